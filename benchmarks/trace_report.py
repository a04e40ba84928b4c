"""Where a profiled step's GPU time goes, model by model, from the Chrome traces a benchmark's
--trace wrote (DIR/<model>.trace.json.gz; --beam: DIR/<model>.beam.trace.json.gz), read by
Holistic Trace Analysis (HTA, the PyTorch trace analysis library):

- the kernels' span (first kernel's start to last kernel's end), and in it the GPU's idle and
  compute time (HTA's temporal breakdown);
- the idle time by cause on the stream that ran the most kernels (a training step's own stream;
  HTA's idle-time breakdown): host wait, where a kernel's launch call started after the kernel
  before it on the stream had ended (the host was late: a host-bound step), kernel wait, gaps under
  --consecutive-kernel-delay between kernels queued in time (launch overhead), and other (e.g.
  waiting for a copy or an event on another stream);
- the kernels, the kernels that ran shorter than their launch call took on the host (HTA's kernel
  launch statistics: many of them mean the host cannot keep the GPU fed), and the host-device
  synchronisations (cuda*Synchronize calls: aten::item, .cpu(), a printed loss).

The first of --models is the baseline (the stock model): each row gives its change against it. A
benchmark's trace directory from `make gpu-check` (gpu-check-report/trace_<benchmark>/):

    python benchmarks/trace_report.py gpu-check-report/trace_sact --models lstm,sact --json sact.json

Needs HTA and its analysis libraries, not its notebook ones:
pip install "pandas<3" plotly pydot psutil; pip install --no-deps HolisticTraceAnalysis==0.5.0
"""

import argparse
import contextlib
import gzip
import json
import logging
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_output  # noqa: E402  (not bench_common: it imports torch)

# HTA's default: a gap shorter than this (µs) between kernels launched in time is launch overhead
CONSECUTIVE_KERNEL_DELAY_US = 30
SUFFIX = {False: ".trace.json.gz", True: ".beam.trace.json.gz"}
COLUMNS = (  # (key, header) of the table, in its order
    ("kernels", "kernels"),
    ("span_ms", "kernel span ms"),
    ("idle_ms", "GPU idle ms"),
    ("idle_pct", "idle %"),
    ("stream_kernels", "main stream kernels"),
    ("host_wait_ms", "its host wait ms"),
    ("kernel_wait_ms", "its kernel wait ms"),
    ("other_idle_ms", "its other idle ms"),
    ("compute_ms", "compute ms"),
    ("shorter_than_launch", "kernels shorter than their launch"),
    ("syncs", "syncs"),
    ("sync_ms", "sync ms"),
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a --trace directory of a benchmark")
    p.add_argument(
        "--models",
        help="comma-separated models of DIR, the baseline (stock) first (default: every trace of "
        "DIR, by name)",
    )
    p.add_argument("--beam", action="store_true", help="the beam searches' traces, not the training steps'")
    p.add_argument(
        "--consecutive-kernel-delay",
        type=float,
        default=CONSECUTIVE_KERNEL_DELAY_US,
        help="µs: a shorter gap between kernels launched in time is kernel wait (default %(default)s, HTA's)",
    )
    json_output.add_json_option(p)
    args = p.parse_args(argv)
    json_output.check_json_target(p, args)
    if not os.path.isdir(args.dir):
        p.error(f"DIR {args.dir}: no such directory")
    if not args.consecutive_kernel_delay > 0:
        p.error(f"--consecutive-kernel-delay must be > 0 µs, got {args.consecutive_kernel_delay:g}")
    args.models = resolve_models(p, args)
    return args


def resolve_models(p, args):
    """The --models, each with its trace in DIR, or every trace of DIR by name."""
    suffix = SUFFIX[args.beam]
    found = sorted(
        name[: -len(suffix)]
        for name in os.listdir(args.dir)
        if name.endswith(suffix) and (args.beam or not name.endswith(SUFFIX[True]))
    )
    if args.models is None:
        if not found:
            p.error(f"DIR {args.dir} has no <model>{suffix} (a benchmark's --trace writes them)")
        return found
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    missing = [m for m in models if m not in found]
    if not models or missing or len(set(models)) < len(models):
        p.error(
            f"--models must name distinct traces of {args.dir}: {', '.join(found) or 'none'}; got {args.models}"
        )
    return models


class TraceError(Exception):
    """A trace that cannot be broken down (the message names it)."""


def check_trace(path):
    """TraceError unless `path` is a gzipped Chrome trace (JSON with traceEvents)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            events = json.load(f).get("traceEvents")
    except (OSError, EOFError, UnicodeDecodeError, ValueError, AttributeError) as e:
        raise TraceError(f"{path} is not a gzipped Chrome trace ({type(e).__name__}: {e})") from None
    if not isinstance(events, list):
        raise TraceError(f"{path} is not a Chrome trace: it has no traceEvents list")


def load_hta():
    """HTA's TraceAnalysis, its progress logging quieted (our traces are one profiled call each: no
    ProfilerStep, which HTA warns about; the whole trace is the step)."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError as e:
        raise SystemExit(
            f"trace_report: error: Holistic Trace Analysis is not installed ({e}): "
            'pip install "pandas<3" plotly pydot psutil; pip install --no-deps HolisticTraceAnalysis==0.5.0'
            " (scripts/setup_venv.sh does)"
        ) from None
    logging.getLogger("hta").setLevel(logging.ERROR)
    return TraceAnalysis


@contextlib.contextmanager
def one_trace_dir(path):
    """A directory holding only `path` (HTA reads a directory, one trace per rank)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.abspath(path), os.path.join(tmp, "rank0.trace.json.gz"))
        yield tmp


def analyse(trace_analysis, path, consecutive_kernel_delay):
    """The row of one trace (times in ms)."""
    with one_trace_dir(path) as tmp, contextlib.redirect_stdout(sys.stderr):
        analysis = trace_analysis(trace_dir=tmp)
        rank = next(iter(analysis.t.traces))
        trace = analysis.t.get_trace(rank)
        names = analysis.t.symbol_table.get_sym_table()
        kernels = trace[trace["stream"].ne(-1)]
        if kernels.empty:
            raise TraceError(f"{path} has no CUDA kernels (a CPU trace): nothing to break down")
        temporal = analysis.get_temporal_breakdown(visualize=False).iloc[0]
        idle, _ = analysis.get_idle_time_breakdown(
            ranks=[rank], visualize=False, consecutive_kernel_delay=consecutive_kernel_delay
        )
        launches = analysis.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
    stream = int(kernels["stream"].value_counts().idxmax())
    by_cause = idle[idle["stream"] == stream].groupby("idle_category")["idle_time"].sum()
    syncs = trace[trace["name"].map(lambda i: "Synchronize" in names[i])]
    return {
        "kernels": int(len(kernels)),
        "span_ms": temporal["kernel_time(us)"] / 1e3,
        "idle_ms": temporal["idle_time(us)"] / 1e3,
        "idle_pct": float(temporal["idle_time_pctg"]),
        "stream": stream,
        "stream_kernels": int((kernels["stream"] == stream).sum()),
        "host_wait_ms": float(by_cause.get("host_wait", 0.0)) / 1e3,
        "kernel_wait_ms": float(by_cause.get("kernel_wait", 0.0)) / 1e3,
        "other_idle_ms": float(by_cause.get("other", 0.0)) / 1e3,
        "compute_ms": temporal["compute_time(us)"] / 1e3,
        "shorter_than_launch": int((launches["gpu_duration"] < launches["cpu_duration"]).sum()),
        "syncs": int(len(syncs)),
        "sync_ms": float(syncs["dur"].sum()) / 1e3,
    }


def markdown(rows, baseline):
    """The rows as a markdown table, each model's change against the baseline's beside its value."""
    lines = ["| model | " + " | ".join(h for _, h in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, row in rows.items():
        cells = []
        for key, _ in COLUMNS:
            value, base = row[key], rows[baseline][key]
            cell = f"{value:d}" if isinstance(value, int) else f"{value:.3f}"
            if name != baseline:
                change = value - base
                cell += f" ({change:+d})" if isinstance(change, int) else f" ({change:+.3f})"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    trace_analysis = load_hta()
    paths = {model: os.path.join(args.dir, model + SUFFIX[args.beam]) for model in args.models}
    try:
        for path in paths.values():
            check_trace(path)
        rows = {
            model: analyse(trace_analysis, path, args.consecutive_kernel_delay)
            for model, path in paths.items()
        }
    except TraceError as e:
        raise SystemExit(f"trace_report: error: {e}") from None
    print(markdown(rows, args.models[0]))
    print(
        "\nits host wait, kernel wait, other idle: the idle time of the stream that ran the model's most "
        f"kernels, by cause (kernel wait: gaps under {args.consecutive_kernel_delay:g} µs between kernels "
        "queued in time); idle %: of the kernel span; (±): against " + args.models[0]
    )
    result = {
        "benchmark": "trace_report",
        "config": vars(args),
        "baseline": args.models[0],
        "models": rows,
    }
    json_output.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
