"""--trace of the benchmarks: one training step per model under torch.profiler, after the timed
rounds (and, in the translation benchmarks, one beam search per model after its timed rounds),
written as the operator (and CUDA kernel) table by self time, every operator's calls and self
times (CSV) and the gzipped Chrome trace, with the wall time, the kernels' summed time and the
count of operator calls: where the time goes, and whether the GPU or the host sets the pace of a
measurement."""

import csv
import functools
import gzip
import os
import shutil
import tempfile
import time

import torch


def add_trace_option(p):
    p.add_argument(
        "--trace",
        metavar="DIR",
        help="also profile one training step per model after the timed rounds (torch.profiler): "
        "DIR/<model>.txt, its operators and kernels by self time, and DIR/<model>.trace.json.gz, "
        "the Chrome trace (chrome://tracing, Perfetto); benchmarks that time beam search also "
        "profile one, as DIR/<model>.beam.txt and .trace.json.gz; DIR must not exist (DIR.partial "
        "until the run has ended)",
    )


PARTIAL = ".partial"  # the traces are written into DIR.partial, renamed DIR at the end


def check_trace_target(p, args):
    """Refuse an existing --trace directory before any work (traces of another run are never
    mixed). The traces go into DIR.partial and become DIR once the run has written its result
    (finish_traces): an interrupted run leaves only DIR.partial, which its rerun replaces."""
    if args.trace is None:
        return
    if os.path.lexists(args.trace):
        p.error(f"--trace {args.trace} exists; give a new directory")
    partial = args.trace + PARTIAL
    if os.path.lexists(partial) and not os.path.isdir(partial):
        p.error(f"--trace: {partial} exists and is not the directory of an interrupted run")
    shutil.rmtree(partial, ignore_errors=True)


def finish_traces(args):
    """--trace: DIR.partial becomes DIR (called once the run's result is written)."""
    if args.trace is not None and os.path.isdir(args.trace + PARTIAL):
        os.rename(args.trace + PARTIAL, args.trace)


def trace_step(trainer, sample, directory, name, cuda):
    """One train step under torch.profiler: trace_call's files and times."""
    return trace_call(lambda: trainer.train_step([sample]), directory, name, cuda)


def trace_call(run, directory, name, cuda):
    """run() under torch.profiler (CPU, and CUDA kernels on a GPU): the operator table by self time
    (where the time goes: kernels, host-device syncs such as aten::item or cudaStreamSynchronize)
    as directory/name.txt, every operator's calls and self times as directory/name.ops.csv (the
    table shows the top 40 only: compare two models' operators from these) and the gzipped Chrome
    trace (the host gaps between kernels). Returns {"step_ms": the call's wall time, "device_ms":
    its kernels' time summed (None on the CPU), "operators": the operator calls recorded}:
    device_ms / step_ms near 1 says the GPU, not the host, sets the pace (the profiler's own overhead
    lengthens the call, so the fraction is, if anything, understated); the operator count is the
    host's share that a CPU can measure too."""
    from torch.profiler import ProfilerActivity, profile

    os.makedirs(directory, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        run()
        sync()
        step_ms = (time.perf_counter() - start) * 1e3
    events = prof.key_averages()
    device_ms = sum(e.self_device_time_total for e in events if is_kernel(e)) / 1e3 if cuda else None
    operators = sum(e.count for e in events if e.device_type == torch.autograd.DeviceType.CPU)
    table = events.table(sort_by="self_device_time_total" if cuda else "self_cpu_time_total", row_limit=40)
    with open(os.path.join(directory, f"{name}.txt"), "x", encoding="utf-8") as f:
        f.write(table + "\n")
    write_operators(os.path.join(directory, f"{name}.ops.csv"), events)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as src, gzip.open(os.path.join(directory, f"{name}.trace.json.gz"), "xb") as dst:
            shutil.copyfileobj(src, dst)
    return {"step_ms": step_ms, "device_ms": device_ms, "operators": operators}


def is_kernel(event):
    """A kernel (or memory copy) on the device: not an operator on the host, which owns its
    kernels' time too, nor a record_function range drawn on the device's timeline (fairseq's
    "forward", "optimizer": the whole span, idle gaps included)."""
    return event.device_type != torch.autograd.DeviceType.CPU and not getattr(
        event, "is_user_annotation", False
    )


def write_operators(path, events):
    """Every operator of a profile (its key averages): calls and self times, most calls first."""
    rows = sorted(events, key=lambda e: (-e.count, e.key))
    with open(path, "x", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(["operator", "device", "calls", "self_cpu_us", "self_device_us"])
        for e in rows:
            out.writerow(
                [e.key, e.device_type.name, e.count, e.self_cpu_time_total, e.self_device_time_total]
            )


def trace_models(args, trainers, sample, cuda, before=lambda name: None):
    """--trace: one profiled step of each {name: Trainer} on the same batch, before(name) called
    first (a benchmark that swaps one trainer's criterion); {name: trace_step's times}, printed
    (None without --trace)."""
    if args.trace is None:
        return None
    times = {}
    for name, trainer in trainers.items():
        before(name)
        times[name] = trace_step(trainer, sample, args.trace + PARTIAL, name, cuda)
    print_traces(args.trace, times)
    print_operator_differences(args.trace + PARTIAL, list(times))
    return times


def trace_beam_searches(args, generators, batch, cuda):
    """--trace: one profiled beam search of each {name: SequenceGenerator} on the same batch, as
    DIR/<name>.beam.txt and .trace.json.gz; {name: trace_call's times}, printed (None without
    --trace)."""
    if args.trace is None:
        return None
    with torch.no_grad():
        times = {
            name: trace_call(
                functools.partial(generator.forward, batch), args.trace + PARTIAL, f"{name}.beam", cuda
            )
            for name, generator in generators.items()
        }
    print_traces(args.trace, times, "one beam search", "search")
    print_operator_differences(args.trace + PARTIAL, list(times), ".beam")
    return times


def print_traces(directory, times, what="one step", unit="step"):
    print(f"traces of {what} per model: {directory}")
    for name, t in times.items():
        busy = (
            ""
            if t["device_ms"] is None
            else f", kernels {t['device_ms']:.1f} ms ({t['device_ms'] / t['step_ms']:.0%})"
        )
        print(f"  {name}: profiled {unit} {t['step_ms']:.1f} ms, {t['operators']} operator calls{busy}")


def operator_calls(path):
    """{operator: calls} of the CPU operators of an .ops.csv."""
    with open(path, newline="", encoding="utf-8") as f:
        return {r["operator"]: int(r["calls"]) for r in csv.DictReader(f) if r["device"] == "CPU"}


def print_operator_differences(directory, names, kind="", most=5):
    """Each model's operator calls against the first model's (the stock one): the total difference
    and the operators that differ most, from their .ops.csv files (where a host-bound step's extra
    time would come from)."""
    base = operator_calls(os.path.join(directory, f"{names[0]}{kind}.ops.csv"))
    for name in names[1:]:
        calls = operator_calls(os.path.join(directory, f"{name}{kind}.ops.csv"))
        change = {op: calls.get(op, 0) - base.get(op, 0) for op in set(calls) | set(base)}
        top = sorted((op for op in change if change[op]), key=lambda op: (-abs(change[op]), op))[:most]
        listed = ", ".join(f"{op} {change[op]:+d}" for op in top) or "none"
        print(f"  {name} against {names[0]}: {sum(change.values()):+d} operator calls; most: {listed}")
