#!/usr/bin/env python
"""How long `make test` takes, and where the time goes: runs the suite as `make test` does (pytest
-n WORKERS --dist loadfile --no-loadscope-reorder), reads pytest's own JUnit XML report, and writes
the wall time, the test time summed per file, the outcomes, and the start-up of a fresh Python
process importing torch, fairseq and the plugin (the floor of every process an end-to-end test
starts), the time fairseq takes to compose one command's configuration (paid by every fairseq
command the tests run) and the interpreter's build, as JSON. Run it on an idle machine: the load
average before and after is recorded.

    .venv/bin/python benchmarks/suite_time.py --json benchmarks/results/cpu_suite_time.json
"""

import argparse
import collections
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as common  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKERS = 2  # the Makefile's TEST_WORKERS (tests/test_benchmarks.py holds the two equal)
IMPORTS = {"python": "pass", "torch": "import torch", "plugin": "import fairseq_ctemp"}
# fairseq's composition of a command's configuration (hydra), which every fairseq command of the
# tests makes once: the median over five, in seconds, printed last
CONFIG = """
import statistics, time
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
argv = "data --task translation --arch transformer --criterion label_smoothed_cross_entropy --optimizer adam"
args = options.parse_args_and_arch(options.get_training_parser(), argv.split())
times = []
for _ in range(5):
    start = time.perf_counter()
    convert_namespace_to_omegaconf(args)
    times.append(time.perf_counter() - start)
print(statistics.median(times))
"""


SELECTION = ("tests",)  # what `make test` runs


def pytest_command(workers, junit, selection=SELECTION):
    """`make test`'s pytest command, with a JUnit XML report."""
    return [
        *(sys.executable, "-m", "pytest", *selection, "-n", str(workers)),
        *("--dist", "loadfile", "--no-loadscope-reorder", "-q", "-p", "no:cacheprovider"),
        f"--junitxml={junit}",
    ]


def junit_summary(path):
    """Outcomes and test time (call plus fixtures, as pytest's JUnit report times a test case),
    summed per test file, of a pytest JUnit XML report."""
    per_file, outcomes = collections.Counter(), collections.Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "").split(".")[-1] + ".py"
        per_file[name] += float(case.get("time", 0))
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcomes[kinds.pop() if kinds else "passed"] += 1
    return {
        "outcomes": dict(outcomes),
        "test_seconds": round(sum(per_file.values()), 1),
        "per_file_seconds": {k: round(v, 1) for k, v in per_file.most_common()},
    }


def start_up_seconds(code, repeats):
    """Median wall time of a fresh `python -c code` (the interpreter, imports and exit)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True)
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 2)


def config_seconds():
    """Median wall time of fairseq's convert_namespace_to_omegaconf for a translation command."""
    proc = subprocess.run(
        [sys.executable, "-c", CONFIG], check=True, cwd=REPO, capture_output=True, text=True
    )
    return round(float(proc.stdout.split()[-1]), 3)


def python_build():
    """What of the interpreter's build may show in the speed of Python-level work (hydra's
    composition above): its compiler, and whether the executable runs on a shared libpython (None
    where /proc/self/maps does not say)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            shared = any("libpython" in line for line in f)
    except OSError:
        shared = None
    return {
        "version": platform.python_version(),
        "compiler": platform.python_compiler(),
        "libpython_shared": shared,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--json", metavar="PATH", required=True, help="where the results go (refused if it exists)"
    )
    p.add_argument("--workers", type=int, default=WORKERS, help="pytest-xdist workers (default %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes timed per import (default 3)")
    p.add_argument("selection", nargs="*", default=SELECTION, help="what pytest runs (default: tests)")
    args = p.parse_args(argv)
    common.check_json_target(p, args)
    for option, value in (("--workers", args.workers), ("--repeats", args.repeats)):
        if value < 1:
            p.error(f"{option} must be >= 1, got {value}")
    load_before = os.getloadavg()
    start_up = {name: start_up_seconds(code, args.repeats) for name, code in IMPORTS.items()}
    config = config_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        start = time.perf_counter()
        proc = subprocess.run(pytest_command(args.workers, junit, args.selection), cwd=REPO)
        wall = time.perf_counter() - start
        summary = junit_summary(junit)
    from fairseq_ctemp.host import cpu_model  # after the suite: its import is not part of the timing

    result = {
        "command": " ".join(pytest_command(args.workers, "REPORT.xml", args.selection)[1:]),
        "pytest_exit_status": proc.returncode,
        "wall_seconds": round(wall, 1),
        **summary,
        "fresh_process_start_up_seconds": start_up,
        "fairseq_config_seconds": config,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count()},
        "python": platform.python_version(),
        "python_build": python_build(),
    }
    common.write_json(args.json, result)
    print(f"pytest: {wall:.0f} s wall, {summary['test_seconds']:.0f} s of test time; {args.json}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
