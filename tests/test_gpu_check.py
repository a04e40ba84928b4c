"""`make gpu-check` (benchmarks/gpu_check.py) on a machine without CUDA: it refuses at once with one
line, and with --allow-cpu writes a well-formed report in which the CUDA tests are skipped, not
passed. The CUDA tests themselves: tests/test_cuda.py."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import torch
from conftest import REPO, checkout_commit

BENCH_DIR = os.path.join(REPO, "benchmarks")
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")


@pytest.fixture
def gpu_check(monkeypatch):
    monkeypatch.syspath_prepend(BENCH_DIR)
    import gpu_check

    return gpu_check


def refusal(gpu_check, capsys, *argv):
    """(exit status, the one stderr line) of a run expected to stop before any work."""
    status = gpu_check.main(list(map(str, argv)))
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return status, err


@NO_CUDA
def test_refuses_without_cuda_in_one_line_before_any_work(gpu_check, capsys, tmp_path):
    out = tmp_path / "report"
    status, err = refusal(gpu_check, capsys, "--out", out)
    assert status == 2
    assert err.startswith("gpu-check: no CUDA device: torch ") and "--allow-cpu" in err
    assert not out.exists()


@NO_CUDA
def test_make_gpu_check_stops_at_once_without_cuda_before_the_set_up(tmp_path):
    venv = os.path.dirname(os.path.dirname(sys.executable))
    if shutil.which("make") is None or not os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        pytest.skip("needs make and a virtualenv")
    out = tmp_path / "report"
    proc = subprocess.run(
        ["make", "-C", REPO, "gpu-check", f"VENV={venv}", f"GPU_CHECK_ARGS=--out {out}"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert proc.stderr.startswith("gpu-check: no CUDA device: torch "), proc.stderr
    assert "setting up" not in proc.stdout + proc.stderr  # scripts/setup_venv.sh never started
    assert not out.exists()


@NO_CUDA  # with a GPU the same call runs the real check: `make gpu-check` itself
def test_report_on_the_cpu_has_every_cuda_test_skipped_and_a_benchmark(
    gpu_check, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "report"
    argv = [
        "--allow-cpu",
        "--smoke",
        "--benchmarks",
        "tempered_ce",
        "--tests",
        "tests/test_cuda.py",
        "--test-workers",
        "0",
    ]
    monkeypatch.chdir(REPO)  # as make runs it
    assert gpu_check.main([*argv, "--out", str(out)]) == 0
    assert sorted(os.listdir(out)) == [
        ".gpu-check",
        "bench_tempered_ce.json",
        "bench_tempered_ce.log",
        "pytest-junit.xml",
        "pytest.log",
        "report.json",
        "report.md",
        "trace_tempered_ce",
    ]
    # one profiled step per model (tempered_ce's division path beside its default one: --division):
    # the operator table, every operator's calls and the Chrome trace
    assert sorted(os.listdir(out / "trace_tempered_ce")) == [
        "division.ops.csv",
        "division.trace.json.gz",
        "division.txt",
        "stock.ops.csv",
        "stock.trace.json.gz",
        "stock.txt",
        "tempered.ops.csv",
        "tempered.trace.json.gz",
        "tempered.txt",
    ]
    report = json.loads((out / "report.json").read_text())
    assert set(report) == {
        "gpu_check",
        "command",
        "mode",
        "smoke",
        "started",
        "environment",
        "tests",
        "benchmarks",
        "seconds",
        "not_run",
        "not_run_why",
        "ok",
        "problems",
    }
    assert report["ok"] is True and report["problems"] == [] and report["mode"].startswith("cpu")
    env = report["environment"]
    assert env["device"] == "cpu" and env["torch"] == torch.__version__ and env["cudnn"] is None
    assert {"cuda", "compute_capability", "driver", "fairseq"} <= set(env)
    assert env["code"] == checkout_commit()  # the commit measured (git, asked here directly)

    tests = report["tests"]
    assert tests["status"] == "ran" and tests["returncode"] == 0 and "-m cuda" in tests["command"]
    cases = tests["cases"]
    assert tests["summary"] == {"passed": 0, "failed": 0, "error": 0, "skipped": len(cases), "xfailed": 0}
    for case in cases:
        assert case["outcome"] == "skipped" and case["message"].startswith("no CUDA device (torch "), case
    ids = " ".join(c["id"] for c in cases)
    for name in (
        "test_tempered_ce_fp32_equals_the_float64_reference[100.0-0.2-0.5-V32003]",
        "test_tempered_ce_half_precision_logits_are_computed_in_fp32[4.0-0.1-0.3-V17-bf16]",
        "test_fairseq_train_in_half_precision_trains_like_fp32[fp16-100.0]",
        "test_model_in_half_precision[lm:transformer-adaptive-ct-fp16]",
        "test_model_in_half_precision[sact_lstm-sact-bf16]",
        "test_model_in_half_precision[ct_transformer-fp16]",  # listed before it is registered
        "test_model_in_half_precision[sact_transformer-bf16]",
        "test_greedy_decoding_on_cuda_equals_the_cpu",
    ):
        assert f"tests/test_cuda.py::{name} " in ids + " ", name

    (bench,) = report["benchmarks"]
    assert bench["name"] == "bench_tempered_ce" and bench["status"] == "ok"
    assert bench["cuda_max_memory_allocated_mib"] is None  # no CUDA: no CUDA memory to report
    ratio = bench["ratios"]["tempered/stock"]
    assert ratio["words_per_s"] > 0 and ratio["peak_memory"] > 0 and isinstance(ratio["met"], bool)
    assert (
        set(bench["models"]) == {"stock", "tempered", "division"} and bench["traces"] == "trace_tempered_ce"
    )
    assert set(bench["ratios"]) == {"tempered/stock", "division/stock", "tempered/division"}
    assert json.loads((out / "bench_tempered_ce.json").read_text())["ratios"] == bench["ratios"]

    md = (out / "report.md").read_text()
    assert md.startswith("# gpu-check report\n") and "- result: **OK**" in md
    assert f"## Tests: 0 passed, 0 failed, 0 errors, {len(cases)} skipped" in md
    assert md.count("| skipped |") == len(cases) and "| passed |" not in md
    assert "| bench_tempered_ce | ok |" in md and "**tempered/stock** words/s " in md
    steps = bench["profiled_steps"]
    assert set(steps) == {"stock", "tempered", "division"} and steps["stock"]["device_ms"] is None
    stock = steps["stock"]
    assert (
        f"Profiled step (--trace): stock {stock['step_ms']:.1f} ms, {stock['operators']} operator calls; "
        in md
    )
    assert "Profiled beam search" not in md and bench["profiled_beam_searches"] is None  # none timed
    bench["profiled_beam_searches"] = {"stock": {**stock, "step_ms": 2.25, "device_ms": 1.5}}
    assert "\nProfiled beam search (--trace): stock 2.2 ms, " in gpu_check.markdown(report)
    assert f"{stock['operators']} operator calls, kernels 67 % (tables and traces: trace_tempered_ce/)." in (
        gpu_check.markdown(report)
    )

    # The report is never overwritten unless asked, and then only if gpu-check wrote everything in it.
    before = (out / "report.json").read_text()
    status, err = refusal(gpu_check, capsys, *argv, "--out", out)
    assert status == 2 and "holds an earlier gpu-check report; --overwrite replaces it" in err
    assert gpu_check.main([*argv, "--out", str(out), "--overwrite", "--preflight"]) == 0
    (out / "notes.txt").write_text("mine")
    status, err = refusal(gpu_check, capsys, *argv, "--out", out, "--overwrite")
    assert status == 2 and "also holds notes.txt, which gpu-check did not write" in err
    assert (out / "report.json").read_text() == before and (out / "notes.txt").read_text() == "mine"


@NO_CUDA
def test_tests_none_reports_the_benchmarks_alone_and_fails_for_the_tests(gpu_check, tmp_path, monkeypatch):
    """--tests none (a second call on a GPU machine held for minutes, say): no pytest run, its
    benchmarks reported, and the result FAILED, naming the tests not run: never an OK check
    without its tests."""
    out = tmp_path / "report"
    argv = ["--allow-cpu", "--smoke", "--benchmarks", "tempered_ce_bf16", "--tests", "none"]
    monkeypatch.chdir(REPO)
    assert gpu_check.main([*argv, "--out", str(out)]) == 1
    assert "pytest.log" not in os.listdir(out) and "bench_tempered_ce_bf16.json" in os.listdir(out)
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] is False and report["problems"] == ["tests not run (--tests none)"]
    assert report["tests"]["cases"] == [] and report["benchmarks"][0]["status"] == "ok"
    md = (out / "report.md").read_text()
    assert "- result: **FAILED** (tests not run (--tests none))" in md
    assert "## Tests: 0 passed, 0 failed, 0 errors, 0 skipped\n\nnot run (--tests none)\n" in md


def test_outcomes_are_reported_as_pytest_gives_them(gpu_check, tmp_path):
    """A failing, an erroring, a skipped and an xfailed cuda test next to a passing one (and a test
    not marked cuda, which does not run): each keeps its outcome, and the run is not OK."""
    tests = tmp_path / "test_outcomes.py"
    tests.write_text(
        "import pytest\n"
        "cuda = pytest.mark.cuda\n"
        "@pytest.fixture\n"
        "def broken():\n"
        "    raise RuntimeError('fixture broke')\n"
        "@cuda\n"
        "def test_passes(): pass\n"
        "@cuda\n"
        "def test_fails(): assert 1 == 2, 'one is not two'\n"
        "@cuda\n"
        "def test_errors(broken): pass\n"
        "@cuda\n"
        "def test_skips(): pytest.skip('not here | not now')\n"
        "@cuda\n"
        "@pytest.mark.xfail(reason='known')\n"
        "def test_xfails(): assert False\n"
        "def test_not_marked_cuda(): pass\n"
    )
    out = tmp_path / "report"
    status = gpu_check.main(
        [
            "--allow-cpu",
            "--benchmarks",
            "none",
            "--tests",
            str(tests),
            "--test-workers",
            "2",
            "--out",
            str(out),
        ]
    )
    assert status == 1
    report = json.loads((out / "report.json").read_text())
    outcomes = {c["id"].split("::")[1]: (c["outcome"], c["message"]) for c in report["tests"]["cases"]}
    assert sorted(outcomes) == ["test_errors", "test_fails", "test_passes", "test_skips", "test_xfails"]
    assert outcomes["test_passes"] == ("passed", None)
    assert outcomes["test_fails"][0] == "failed" and "one is not two" in outcomes["test_fails"][1]
    assert outcomes["test_errors"][0] == "error" and "fixture broke" in outcomes["test_errors"][1]
    assert outcomes["test_skips"] == ("skipped", "not here | not now")
    assert outcomes["test_xfails"] == ("xfailed", "known")
    assert report["ok"] is False and report["problems"] == ["2 test(s) failed"]
    md = (out / "report.md").read_text()
    assert "- result: **FAILED** (2 test(s) failed)" in md
    assert "| skipped | 0.0 | not here \\| not now |" in md


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--benchmarks", "tempered_ce,bogus"], "--benchmarks must be a comma-separated subset of"),
        (["--test-timeout", "0"], "--test-timeout must be > 0 seconds, got 0.0"),
        (["--bench-timeout", "-5"], "--bench-timeout must be > 0 seconds, got -5.0"),
        (["--tests", "no/such/tests"], "--tests no/such/tests does not exist (a pytest target, or 'none')"),
        (["--rounds", "0"], "--rounds must be >= 1, got 0"),
        (["--time-limit", "0"], "--time-limit must be > 0 seconds, got 0.0"),
    ],
)
def test_bad_options_are_refused(gpu_check, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["tempered_ce", "tempered_ce_bf16", "tempered_ce_chunked_32k", "translation"]
)
def test_each_benchmark_runs_with_the_rounds_json_and_traces(gpu_check, monkeypatch, tmp_path, name):
    """Outside --smoke every benchmark runs at its own CUDA sizes and rounds (--rounds where given),
    its variant's options, --json and --trace."""
    commands = []
    monkeypatch.setattr(
        gpu_check, "run_logged", lambda command, *a, **k: (commands.append(command), (1, 0.0))[1]
    )
    (tmp_path / f"bench_{name}.log").write_text("failed on purpose\n")
    gpu_check.run_benchmark(name, gpu_check.parse_args(["--rounds", "12"]), str(tmp_path), cuda=True)
    entry = gpu_check.run_benchmark(name, gpu_check.parse_args([]), str(tmp_path), cuda=True)
    given, command = commands
    assert given == command[:-4] + ["--rounds", "12"] + command[-4:]
    script, options = gpu_check.VARIANTS.get(name, (name, ""))
    assert command[1].endswith(f"bench_{script}.py") and command[2:4] == ["--device", "cuda"]
    assert "--rounds" not in command and options in " ".join(command)
    assert command[-4:] == [
        "--json",
        str(tmp_path / f"bench_{name}.json"),
        "--trace",
        str(tmp_path / f"trace_{name}"),
    ]
    assert entry["status"] == "failed" and entry["log_tail"] == ["failed on purpose"]


def test_an_existing_directory_or_file_not_written_by_gpu_check_is_refused(gpu_check, capsys, tmp_path):
    theirs = tmp_path / "results"
    theirs.mkdir()
    (theirs / "report.json").write_text("{}")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out, reason in (
        (theirs, "was not written by gpu-check (no .gpu-check)"),
        (afile, "is not a directory"),
    ):
        for extra in ([], ["--overwrite"]):
            status, err = refusal(gpu_check, capsys, "--allow-cpu", "--out", out, *extra)
            assert status == 2 and f"--out {out} exists and {reason}" in err
    assert (theirs / "report.json").read_text() == "{}" and afile.read_text() == "x"


def test_a_step_past_its_time_limit_is_stopped_and_reported(gpu_check, tmp_path):
    """The tests' process (and what it started: here a child sleeping for a minute) is killed at
    --test-timeout; the report says timeout and the run is not OK."""
    tests, pid_file = tmp_path / "test_slow.py", tmp_path / "sleep.pid"
    tests.write_text(
        "import subprocess, pytest\n"
        "@pytest.mark.cuda\n"
        "def test_slow():\n"
        "    child = subprocess.Popen(['sleep', '60'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    child.wait()\n"
    )
    out = tmp_path / "report"
    argv = [
        "--allow-cpu",
        "--benchmarks",
        "none",
        "--tests",
        str(tests),
        "--test-timeout",
        "3",
        "--test-workers",
        "0",
    ]
    assert gpu_check.main([*argv, "--out", str(out)]) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["tests"]["status"] == "timeout" and report["tests"]["returncode"] is None
    assert report["problems"] == ["tests timeout"] and report["tests"]["seconds"] < 30
    assert (out / "pytest.log").read_text().endswith("gpu-check: stopped after 3 s\n")
    assert ends_within(int(pid_file.read_text()), seconds=10)  # the killed pytest's child too


def test_a_run_stopped_from_outside_leaves_the_report_of_what_it_finished(gpu_check, monkeypatch, tmp_path):
    """Killed during its second benchmark (a job's time limit): report.json and report.md hold the
    tests and the first benchmark, say FAILED with the benchmarks not run, and are whole."""
    tests = tmp_path / "test_one.py"
    tests.write_text("import pytest\n@pytest.mark.cuda\ndef test_passes(): pass\n")

    def run_benchmark(name, args, out, cuda, timeout):
        if name == "sact":
            raise KeyboardInterrupt  # the process ends here: what is on disk is what a kill leaves
        return {"name": f"bench_{name}", "status": "ok", "seconds": 1.0, "command": name, "log": "x.log"}

    monkeypatch.setattr(gpu_check, "run_benchmark", run_benchmark)
    out = tmp_path / "report"
    argv = [
        "--allow-cpu",
        "--benchmarks",
        "tempered_ce,sact,ct_lm",
        "--tests",
        str(tests),
        "--test-workers",
        "0",
    ]
    with pytest.raises(KeyboardInterrupt):
        gpu_check.main([*argv, "--out", str(out)])
    report = json.loads((out / "report.json").read_text())
    assert report["tests"]["summary"]["passed"] == 1
    assert [b["name"] for b in report["benchmarks"]] == ["bench_tempered_ce"]
    assert report["not_run"] == ["bench_sact", "bench_ct_lm"] and report["ok"] is False
    assert report["problems"] == ["stopped before bench_sact, bench_ct_lm"]
    md = (out / "report.md").read_text()
    assert "- result: **FAILED** (stopped before bench_sact, bench_ct_lm)" in md
    assert "| bench_tempered_ce | ok |" in md and not list(out.glob("*.partial"))


def test_the_time_limit_bounds_the_tests_and_starts_no_benchmark_it_cannot_finish(gpu_check, tmp_path):
    """--time-limit 4: the tests (a minute of sleep) are stopped at 4 s, not at --test-timeout, and
    no benchmark starts with less than MIN_STEP_SECONDS left; the report says which did not run."""
    tests = tmp_path / "test_slow.py"
    tests.write_text("import time, pytest\n@pytest.mark.cuda\ndef test_slow(): time.sleep(60)\n")
    out = tmp_path / "report"
    argv = ["--allow-cpu", "--benchmarks", "tempered_ce,sact", "--tests", str(tests), "--test-workers", "0"]
    assert gpu_check.main([*argv, "--time-limit", "4", "--out", str(out)]) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["tests"]["status"] == "timeout" and report["tests"]["seconds"] < 30
    assert report["benchmarks"] == [] and report["not_run"] == ["bench_tempered_ce", "bench_sact"]
    assert report["problems"] == [
        "tests timeout",
        "--time-limit 4 s reached before bench_tempered_ce, bench_sact",
    ]


# One case of each CUDA test that can run on a CPU (the fairseq-train ones take half a minute each;
# no LSTM: the CPU's half-precision LSTM kernels differ between CPUs).
DRY_RUN = [
    "test_tempered_ce_fp32_equals_the_float64_reference[4.0-0.1-0.3-V32003]",
    "test_tempered_ce_half_precision_logits_are_computed_in_fp32[4.0-0.1-0.3-V17-bf16]",
    "test_chunked_loss_fp32_equals_the_float64_reference[4.0-0.1-0.3-32003]",
    "test_chunked_loss_in_half_precision[4.0-0.1-0.3-bf16]",
    "test_chunked_loss_under_autocast[100.0-0.2-0.5-bf16]",
    "test_chunked_ct_loss_on_cuda_equals_the_float64_reference[transformer-mos-ct-lambda-0.1]",
    "test_model_in_half_precision[lm:transformer-mos-ct-lambda-bf16]",
    "test_model_in_half_precision[sact_transformer-bf16]",
    "test_model_under_autocast[ct_transformer-bf16]",
    "test_model_under_autocast[sact_transformer-fp16]",
]


def test_the_cuda_tests_own_code_runs_on_the_cpu(tmp_path):
    """The CUDA tests skip in CI: a case of each runs here on the CPU (CTEMP_CUDA_TESTS_ON_CPU), so
    that a change to the helpers they share with the CPU tests cannot break them unseen until a GPU
    runs them."""
    env = {**os.environ, "CTEMP_CUDA_TESTS_ON_CPU": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            *(f"tests/test_cuda.py::{case}" for case in DRY_RUN),
            f"--basetemp={tmp_path}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and f"{len(DRY_RUN)} passed" in proc.stdout, proc.stdout[-3000:]


def ends_within(pid, seconds):
    """Whether a process is gone (or a zombie waiting to be reaped) within `seconds` (Linux /proc)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_a_ratio_reads_as_a_ratio_and_a_share_of_the_bound_as_a_percentage(gpu_check):
    ratios = {
        "ct_transformer/transformer": {
            "training_words_per_s": 0.625,
            "share_of_bound_training": 0.9545,
            "target": "training words/s and sentences/s >= 95% of the analytic bound",
            "met": True,
        }
    }
    assert gpu_check.ratio_text(ratios) == (
        "**ct_transformer/transformer** training words/s 0.625×, share of bound training 95.5 % "
        "(target training words/s and sentences/s >= 95% of the analytic bound: met)"
    )
