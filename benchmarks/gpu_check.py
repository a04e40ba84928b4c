#!/usr/bin/env python
"""`make gpu-check`: the CUDA tests and the four benchmark scripts on one GPU, in one report.

1. pytest on the tests marked `cuda` (tests/test_cuda.py: tempered_ce against its float64 reference,
   fairseq-train --fp16 / --bf16 at T = 1, 4, 100, every temperature head and SACT in half
   precision, greedy decoding on CUDA = on the CPU), each test's outcome read from pytest's JUnit XML;
2. bench_tempered_ce.py (also with --bf16, with SEM and with the chunked loss), bench_ct_lm.py, bench_sact.py
   and bench_translation.py with their CUDA defaults (--fp16, base sizes) and rounds, each in its own
   process (its own torch.cuda.max_memory_allocated), each with one profiled step per model (--trace;
   the translation benchmarks also one profiled beam search);
3. OUT/report.json and OUT/report.md: device, torch / CUDA / cuDNN versions, every test's outcome,
   every benchmark's ratios and CUDA memory (the format: docs/gpu.md), written again after each
   step (a run stopped from outside leaves what it finished, marked as stopped).

It needs a CUDA device; --allow-cpu runs it on the CPU only to test the report itself (the CUDA
tests are then reported as skipped). OUT must not exist, or must hold an earlier gpu-check report
and --overwrite be given. Exit status: 0 when every test passed or was skipped and every benchmark
ran, 1 otherwise, 2 for a refusal before any work.
"""

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MARKER = ".gpu-check"  # in every directory gpu-check writes; nothing else is ever replaced
BENCHMARKS = (
    "tempered_ce",
    "tempered_ce_bf16",
    "tempered_ce_sem",
    "tempered_ce_chunked_8k",
    "tempered_ce_chunked_32k",
    "ct_lm",
    "sact",
    "translation",
)
# name: (the script bench_SCRIPT.py, its options before the sizes); the others run bench_NAME.py
VARIANTS = {
    "tempered_ce": ("tempered_ce", "--division"),  # its two paths side by side, each against stock
    "tempered_ce_bf16": ("tempered_ce", "--bf16"),
    "tempered_ce_sem": ("tempered_ce", "--sem-weight 0.3"),  # the entropy term's cost
    # an eighth of the 65536-token CUDA batch a chunk: with 2048 (32 chunks) the chunks' products
    # at V = 8000 take microseconds each, and the loop's kernel launches would be what is measured
    "tempered_ce_chunked_8k": ("tempered_ce", "--loss-chunk-tokens 8192 --vocab 8000"),
    "tempered_ce_chunked_32k": ("tempered_ce", "--loss-chunk-tokens 8192 --vocab 32000"),
    "translation": (
        "translation",
        "--models transformer,ct_transformer,sact_transformer,ct_transformer_chunked",
    ),
}
# The names gpu-check writes into OUT: --overwrite refuses a directory holding anything else.
OWN_FILES = re.compile(
    r"(\.gpu-check|report\.(json|md)(\.partial)?|pytest\.log|pytest-junit\.xml|bench_\w+\.(json|log)|trace_\w+(\.partial)?)"
)
SMOKE = {  # toy sizes, shell words: seconds on a CPU (the benchmarks' own smoke tests use the same)
    "tempered_ce": "--vocab 300 --layers 1 --dim 32 --ffn 64 --heads 2 --max-tokens 256",
    "ct_lm": "--vocab 300 --layers 1 --dim 32 --ffn 64 --heads 2 --tokens-per-sample 32 --max-tokens 128 "
    "--ct-rank 8",
    "sact": "--vocab 300 --layers 1 --dim 32 --max-tokens 256 --beam 2 --gen-sentences 8 --gen-batch-size 4 "
    "--gen-len 5",
    "translation": "--vocab 300 --max-tokens 256 --beam 2 --gen-sentences 8 --gen-batch-size 4 --gen-len 5 "
    "'--fairseq-args=--encoder-layers 1 --decoder-layers 1 --encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 "
    "--decoder-attention-heads 2' --ct-rank 8",
}
SMOKE_ROUNDS = ["--rounds", "1", "--warmup", "0", "--batches", "1"]
# A benchmark given less than this under --time-limit is not started: start-up alone takes ~10 s.
MIN_STEP_SECONDS = 20


class Refusal(Exception):
    """A one-line reason to stop before any work (exit status 2)."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="gpu-check-report", help="report directory (default %(default)s)")
    p.add_argument(
        "--overwrite", action="store_true", help="replace an earlier gpu-check report in --out (only that)"
    )
    p.add_argument(
        "--allow-cpu",
        action="store_true",
        help="run without a CUDA device, to test the report path: the CUDA tests are reported as skipped",
    )
    p.add_argument(
        "--smoke", action="store_true", help="benchmarks at toy sizes (seconds; to test the report path)"
    )
    p.add_argument(
        "--benchmarks",
        default=",".join(BENCHMARKS),
        help=f"comma-separated subset of {','.join(BENCHMARKS)}, or 'none' (default: all)",
    )
    p.add_argument(
        "--tests",
        default=os.path.join(REPO, "tests"),
        help="pytest target whose `cuda`-marked tests run (default: the checkout's tests/), or 'none': "
        "a report of the benchmarks alone (its result FAILED: tests not run)",
    )
    p.add_argument(
        "--test-timeout", type=float, default=300, help="seconds for all the tests (default %(default)s)"
    )
    p.add_argument(
        "--bench-timeout", type=float, default=240, help="seconds per benchmark (default %(default)s)"
    )
    p.add_argument(
        "--time-limit",
        type=float,
        help="seconds for the whole check (a job's or lease's wall time, less the set-up): each step "
        "gets at most what is left, and the benchmarks no time is left for are reported as not run "
        "(default: no limit)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        help="timed rounds of every benchmark, each a paired comparison (default: the benchmarks' own, "
        "10; --smoke: 1)",
    )
    p.add_argument(
        "--test-workers",
        type=int,
        default=4,
        help="pytest-xdist processes sharing the GPU for the tests; 0 runs them in this one "
        "(default %(default)s: on an H200 the tests took 136 s so, their own times adding up to 316 s)",
    )
    p.add_argument(
        "--preflight",
        action="store_true",
        help="only check the device (if torch is installed) and --out, then exit (make gpu-check runs "
        "this before the set-up)",
    )
    args = p.parse_args(argv)
    names = [] if args.benchmarks.strip() == "none" else [b.strip() for b in args.benchmarks.split(",")]
    if any(b not in BENCHMARKS for b in names):
        p.error(
            f"--benchmarks must be a comma-separated subset of {','.join(BENCHMARKS)} or 'none', got {args.benchmarks!r}"
        )
    args.benchmarks = names
    for option in ("test_timeout", "bench_timeout", "time_limit"):
        if getattr(args, option) is not None and not getattr(args, option) > 0:
            p.error(f"--{option.replace('_', '-')} must be > 0 seconds, got {getattr(args, option)}")
    if args.test_workers < 0:
        p.error(f"--test-workers must be >= 0, got {args.test_workers}")
    if args.rounds is not None and args.rounds < 1:
        p.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.tests != "none" and not os.path.exists(args.tests):
        p.error(f"--tests {args.tests} does not exist (a pytest target, or 'none')")
    return args


def check_device(args):
    try:
        import torch
    except ImportError:
        if args.preflight:  # a venv before its set-up: nothing to check yet
            return
        raise

    if torch.cuda.is_available() or args.allow_cpu:
        return
    if torch.version.cuda is None:
        why = f"torch {torch.__version__} is a CPU build (install a CUDA torch first: README, GPU set-up)"
    else:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        why = f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU" + (
            f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        )
    raise Refusal(f"no CUDA device: {why}; --allow-cpu runs gpu-check on the CPU to test its report only")


def check_out(args):
    out = args.out
    if not os.path.lexists(out):
        return
    if not os.path.isdir(out) or os.path.islink(out):
        raise Refusal(f"--out {out} exists and is not a directory; choose another --out")
    if not os.path.exists(os.path.join(out, MARKER)):
        raise Refusal(
            f"--out {out} exists and was not written by gpu-check (no {MARKER}); choose another --out"
        )
    if not args.overwrite:
        raise Refusal(
            f"--out {out} holds an earlier gpu-check report; --overwrite replaces it, or choose another --out"
        )
    foreign = sorted(name for name in os.listdir(out) if not OWN_FILES.fullmatch(name))
    if foreign:
        raise Refusal(
            f"--out {out} also holds {', '.join(foreign)}, which gpu-check did not write; not replacing it"
        )


def code_commit():
    """The checkout's commit (fairseq_ctemp/provenance.py, loaded as a file: this runs before the
    set-up, where the package may not import yet), "+changes" with edits; None outside git."""
    spec = importlib.util.spec_from_file_location(
        "provenance", os.path.join(REPO, "fairseq_ctemp", "provenance.py")
    )
    provenance = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(provenance)
    return provenance.code_commit(REPO)


def driver_version():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else None


def distribution_version(*names):
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def environment():
    import torch

    cuda = torch.cuda.is_available()
    env = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "device_count": torch.cuda.device_count() if cuda else 0,
        "compute_capability": ".".join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
        "memory_gib": torch.cuda.get_device_properties(0).total_memory / 2**30 if cuda else None,
        "driver": driver_version() if cuda else None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "bf16_supported": torch.cuda.is_bf16_supported() if cuda else None,
        "fairseq": distribution_version("fairseq-fixed", "fairseq"),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    env["code"] = code_commit()
    return env


def kill_group(proc):
    """Kill a child started with start_new_session=True and everything it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass
    proc.wait()


def run_logged(command, log_path, timeout, env=None):
    """Run a command in its own process group, stdout + stderr to log_path; kill the whole group
    (pytest's fairseq-train children included) at the timeout. Returns (returncode or None, seconds)."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            returncode = None
            log.write(f"\ngpu-check: stopped after {timeout:g} s\n")
        except BaseException:  # Ctrl-C: its own process group would outlive us otherwise
            kill_group(proc)
            raise
    return returncode, time.monotonic() - start


def junit_cases(path):
    """[{id, outcome, seconds, message}] from pytest's JUnit XML (outcome: passed, failed, error,
    skipped, xfailed). The id is pytest's node id for module-level tests (all of test_cuda's)."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        outcome, message = "passed", None
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = ("failed" if child.tag == "failure" else "error"), child.get("message")
                break
            if child.tag == "skipped":
                xfail = child.get("type") == "pytest.xfail"
                outcome, message = ("xfailed" if xfail else "skipped"), child.get("message")
        cases.append(
            {
                "id": f"{module.replace('.', '/')}.py::{name}",
                "outcome": outcome,
                "seconds": float(case.get("time", 0)),
                "message": None if message is None else message[:2000],
            }
        )
    return cases


# --tests none: the benchmarks alone (a second call on a GPU machine held for minutes, say)
TESTS_NOT_RUN = {
    "command": None,
    "status": "not run (--tests none)",
    "returncode": None,
    "seconds": 0.0,
    "log": None,
    "summary": {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "xfailed": 0},
    "cases": [],
}


def run_tests(args, out, timeout):
    junit = os.path.join(out, "pytest-junit.xml")
    command = [
        sys.executable,
        "-m",
        "pytest",
        os.path.abspath(args.tests),
        "-m",
        "cuda",
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit2",
        f"--junitxml={os.path.abspath(junit)}",
    ]
    env = dict(os.environ)
    if args.test_workers:
        command += ["-n", str(args.test_workers)]
        # The workers' CPU-side work (the fp32 CPU reference runs) shares the cores between them.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.test_workers)))
    env.pop("CTEMP_CUDA_TESTS_ON_CPU", None)  # the report is about CUDA, never the tests' CPU dry run
    returncode, seconds = run_logged(command, os.path.join(out, "pytest.log"), timeout, env)
    cases = junit_cases(junit) if os.path.exists(junit) else []
    summary = {
        k: sum(c["outcome"] == k for c in cases) for k in ("passed", "failed", "error", "skipped", "xfailed")
    }
    status = "timeout" if returncode is None else "ran" if cases or returncode == 5 else "crashed"
    return {
        "command": shlex.join(command),
        "status": status,
        "returncode": returncode,
        "seconds": round(seconds, 1),
        "log": "pytest.log",
        "summary": summary,
        "cases": cases,
    }


def run_benchmark(name, args, out, cuda, timeout=None):
    script, options = VARIANTS.get(name, (name, ""))
    json_path = os.path.join(out, f"bench_{name}.json")
    trace_dir = os.path.join(out, f"trace_{name}")  # one profiled step per model (torch.profiler)
    # Otherwise the benchmark's own sizes and rounds (bench_common.ROUNDS) unless --rounds.
    rounds = [] if args.rounds is None else ["--rounds", str(args.rounds)]
    sizes = (shlex.split(SMOKE[script]) + SMOKE_ROUNDS) if args.smoke else rounds
    command = [
        sys.executable,
        os.path.join(HERE, f"bench_{script}.py"),
        "--device",
        "cuda" if cuda else "cpu",
        *shlex.split(options),
        *sizes,
        "--json",
        os.path.abspath(json_path),
        "--trace",
        os.path.abspath(trace_dir),
    ]
    log = os.path.join(out, f"bench_{name}.log")
    returncode, seconds = run_logged(command, log, args.bench_timeout if timeout is None else timeout)
    entry = {
        "name": f"bench_{name}",
        "command": shlex.join(command),
        "status": "timeout" if returncode is None else "ok" if returncode == 0 else "failed",
        "returncode": returncode,
        "seconds": round(seconds, 1),
        "log": os.path.basename(log),
    }
    if entry["status"] == "ok" and os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as f:
            result = json.load(f)
        entry.update(
            cuda_max_memory_allocated_mib=result["cuda_max_memory_allocated_mib"],
            ratios=result["ratios"],
            models=result["models"],
            config=result["config"],
            results=os.path.basename(json_path),
            traces=os.path.basename(trace_dir),
            profiled_steps=result.get("traces"),
            profiled_beam_searches=result.get("beam_traces"),
        )
    else:
        entry["status"] = "failed" if entry["status"] == "ok" else entry["status"]
        with open(log, encoding="utf-8", errors="replace") as f:
            entry["log_tail"] = f.read().splitlines()[-20:]
    return entry


def verdict(report):
    tests, benchmarks = report["tests"], report["benchmarks"]
    problems = []
    if tests["status"] != "ran":
        problems.append(f"tests {tests['status']}")
    bad = tests["summary"]["failed"] + tests["summary"]["error"]
    if bad:
        problems.append(f"{bad} test(s) failed")
    if report["mode"] == "cuda" and tests["status"] == "ran" and tests["summary"]["passed"] == 0:
        problems.append("no test passed")
    problems += [f"{b['name']} {b['status']}" for b in benchmarks if b["status"] != "ok"]
    if report["not_run"]:
        problems.append(f"{report['not_run_why']} " + ", ".join(report["not_run"]))
    return not problems, problems


def cell(text):
    """One Markdown table cell: the first line only, pipes escaped."""
    lines = [] if text is None else str(text).splitlines()
    return (lines[0] if lines else "").replace("|", "\\|")


def label(key):
    """words_per_cpu_s -> words/CPU-s, peak_mib -> peak MiB."""
    return key.replace("_per_", "/").replace("cpu_s", "CPU-s").replace("mib", "MiB").replace("_", " ")


def number_text(key, value):
    """A ratio as 0.954×; a share (share_of_...) as 95.4 %."""
    return f"{label(key)} {100 * value:.1f} %" if key.startswith("share_of") else f"{label(key)} {value:.3f}×"


def ratio_text(ratios):
    parts = []
    for key, r in ratios.items():
        numbers = ", ".join(number_text(k, v) for k, v in r.items() if isinstance(v, float))
        target = (
            "" if r.get("target") is None else f" (target {r['target']}: {'met' if r['met'] else 'MISSED'})"
        )
        parts.append(f"**{key}** {numbers}{target}")
    return "<br>".join(parts)


def profiled_steps_text(steps, directory, what="step"):
    """The traced step (or beam search) of each model: its wall time, its operator calls and, on
    CUDA, the share its kernels took (near 100 %: the GPU, not the host, sets the pace of the
    measurement); its traces are in directory."""
    if not steps:
        return []
    parts = []
    for model, t in steps.items():
        busy = "" if t["device_ms"] is None else f", kernels {100 * t['device_ms'] / t['step_ms']:.0f} %"
        calls = f", {t['operators']} operator calls" if "operators" in t else ""
        parts.append(f"{model} {t['step_ms']:.1f} ms{calls}{busy}")
    return ["", f"Profiled {what} (--trace): " + "; ".join(parts) + f" (tables and traces: {directory}/)."]


def tests_line(tests):
    """The tests' command, status, exit code, time and log; their status alone when not run."""
    if tests["command"] is None:
        return tests["status"]
    return (
        f"`{tests['command']}` ({tests['status']}, exit {tests['returncode']}, "
        f"{tests['seconds']:.0f} s; log: {tests['log']})"
    )


def markdown(report):
    env, tests = report["environment"], report["tests"]
    s = tests["summary"]
    lines = [
        "# gpu-check report",
        "",
        f"- result: **{'OK' if report['ok'] else 'FAILED'}**"
        + ("" if report["ok"] else f" ({'; '.join(report['problems'])})"),
        f"- mode: {report['mode']}" + (", benchmarks at toy sizes (--smoke)" if report["smoke"] else ""),
        f"- device: {env['device']}"
        + (
            f" (compute capability {env['compute_capability']}, {env['memory_gib']:.1f} GiB, driver {env['driver']})"
            if env["compute_capability"]
            else ""
        ),
        f"- torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, bf16 supported: {env['bf16_supported']}",
        f"- fairseq {env['fairseq']}, Python {env['python']}, checkout "
        + (env["code"] or "unknown (not a git checkout)"),
        f"- started {report['started']}, took {report['seconds']:.0f} s: `{report['command']}`",
        "",
        f"## Tests: {s['passed']} passed, {s['failed']} failed, {s['error']} errors, {s['skipped']} skipped"
        + (f", {s['xfailed']} xfailed" if s["xfailed"] else ""),
        "",
        tests_line(tests),
        "",
        "| test | outcome | s | message |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{cell(c['id'])}` | {c['outcome']} | {c['seconds']:.1f} | {cell(c['message'])} |"
        for c in tests["cases"]
    ]
    lines += [
        "",
        "## Benchmarks",
        "",
        "| benchmark | status | s | CUDA max memory MiB | ratios |",
        "|---|---|---|---|---|",
    ]
    for b in report["benchmarks"]:
        memory = b.get("cuda_max_memory_allocated_mib")
        lines.append(
            f"| {b['name']} | {b['status']} | {b['seconds']:.0f} | {'—' if memory is None else f'{memory:.1f}'} "
            f"| {ratio_text(b.get('ratios', {}))} |"
        )
    for b in report["benchmarks"]:
        lines += ["", f"### {b['name']}", "", f"`{b['command']}` (log: {b['log']})", ""]
        if "models" not in b:
            lines += ["```", *b.get("log_tail", []), "```"]
            continue
        keys = list(dict.fromkeys(k for values in b["models"].values() for k in values))  # every model's
        lines += [
            "| model | " + " | ".join(label(k) for k in keys) + " |",
            "|---" * (len(keys) + 1) + "|",
        ]
        for model, values in b["models"].items():
            cells = (f"{values[k]:.1f}" if k in values else "–" for k in keys)
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines += profiled_steps_text(b.get("profiled_steps"), b.get("traces"))
        lines += profiled_steps_text(b.get("profiled_beam_searches"), b.get("traces"), "beam search")
    return "\n".join(lines) + "\n"


def time_left(args, start):
    """Seconds left of --time-limit (inf without one)."""
    return math.inf if args.time_limit is None else args.time_limit - (time.monotonic() - start)


def write_report(out, report, start, not_run, why="stopped before"):
    """report.json and report.md as they stand, after every step: a run stopped from outside (a
    job's time limit) leaves what it finished, its result FAILED with the benchmarks not run. Each
    file is replaced whole, never left half-written."""
    report["seconds"] = round(time.monotonic() - start, 1)
    report["not_run"] = [f"bench_{name}" for name in not_run]
    report["not_run_why"] = why if not_run else None
    report["ok"], report["problems"] = verdict(report)
    for name, text in (("report.json", json.dumps(report, indent=2) + "\n"), ("report.md", markdown(report))):
        path = os.path.join(out, name)
        with open(path + ".partial", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".partial", path)


def run_benchmarks(args, out, cuda, report, start):
    """Each benchmark in turn, the report written before each (a kill leaves it) and after the last;
    under --time-limit each gets at most what is left, and none starts with too little left."""
    report["benchmarks"] = []
    for i, name in enumerate(args.benchmarks):
        left = time_left(args, start)
        if left < MIN_STEP_SECONDS:
            why = f"--time-limit {args.time_limit:g} s reached before"
            print(f"gpu-check: {why} bench_{name}", flush=True)
            write_report(out, report, start, args.benchmarks[i:], why)
            return
        write_report(out, report, start, not_run=args.benchmarks[i:])
        entry = run_benchmark(name, args, out, cuda, min(args.bench_timeout, left))
        print(f"gpu-check: bench_{name} {entry['status']} ({entry['seconds']:.0f} s)", flush=True)
        report["benchmarks"].append(entry)
    write_report(out, report, start, not_run=[])


def main(argv=None):
    args = parse_args(argv)
    try:
        check_device(args)
        check_out(args)
    except Refusal as refusal:
        print(f"gpu-check: {refusal}", file=sys.stderr)
        return 2
    if args.preflight:
        return 0
    import torch

    cuda = torch.cuda.is_available()
    started, start = datetime.datetime.now().astimezone(), time.monotonic()
    out = args.out
    if os.path.lexists(out):  # an earlier report, and --overwrite (check_out)
        shutil.rmtree(out)
    os.makedirs(out)
    with open(os.path.join(out, MARKER), "w", encoding="utf-8") as f:
        json.dump({"written_by": "benchmarks/gpu_check.py", "started": started.isoformat()}, f)
    report = {
        "gpu_check": 1,
        "command": shlex.join(sys.argv if argv is None else ["gpu_check.py", *argv]),
        "mode": "cuda" if cuda else "cpu (--allow-cpu: tests the report only; the CUDA tests skip)",
        "smoke": args.smoke,
        "started": started.isoformat(timespec="seconds"),
        "environment": environment(),
    }
    print(f"gpu-check: {report['environment']['device']}, torch {torch.__version__}; tests ...", flush=True)
    left = time_left(args, start)
    if args.tests == "none":
        report["tests"] = TESTS_NOT_RUN
    else:
        report["tests"] = run_tests(args, out, min(args.test_timeout, left))
    print(f"gpu-check: tests {report['tests']['status']}: {report['tests']['summary']}", flush=True)
    run_benchmarks(args, out, cuda, report, start)
    result = "OK" if report["ok"] else "FAILED: " + "; ".join(report["problems"])
    print(f"gpu-check: {result} ({report['seconds']:.0f} s); report: {os.path.join(out, 'report.md')}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
