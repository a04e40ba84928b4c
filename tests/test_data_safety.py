"""Regression tests: no tool deletes, overwrites or mixes data, and none gives a silently wrong result.

results.sh --out replaces only a directory it wrote; ctemp-average-checkpoints never touches a
user's OUTPUT.tmp and refuses mixed temperatures; prepare checks its options and the corpus before
skipping a step, and takes a lock; a moved or copied work directory uses its own data; a refused
sweep writes nothing; a killed sweep takes its runs with it and leaves no lock; averaging takes the
checkpoints of exactly the last N validations. The corpus is the tiny toy release, prepared once."""

import collections
import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from conftest import BIN_DIR, TINY_DIMS, experiment_json, python_script, real_processes, run_main

from fairseq_ctemp import outputs
from fairseq_ctemp.alt import children as alt_children
from fairseq_ctemp.alt import common as alt_common
from fairseq_ctemp.alt import records as alt_records
from fairseq_ctemp.alt import sweep_checks, training
from fairseq_ctemp.cli import alt_data, alt_results, average_checkpoints
from fairseq_ctemp.cli import alt_sweep as sweep_cli

pytestmark = pytest.mark.e2e
# the commands' main(): run in this process (conftest.run_main); SWEEP_COMMAND where a process is needed
DATA, SWEEP, RESULTS = alt_data.main, sweep_cli.main, alt_results.main
SWEEP_COMMAND = [sys.executable, "-m", "fairseq_ctemp.cli.alt_sweep"]
ENV = dict(
    os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1", PYTHON=sys.executable
)
for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
    ENV.pop(key, None)
TINY = [
    "--arch",
    "transformer",
    *TINY_DIMS,
    "--optimizer",
    "adam",
    "--lr",
    "3e-3",
    "--cpu",
    "--num-workers",
    "0",
    "--log-format",
    "json",
    "--log-interval",
    "1",
]


def run(*command, check=True, cwd=None):
    if callable(command[0]):  # a command's main, in this process
        return run_main(command[0], *command[1:], check=check, env=ENV)
    proc = subprocess.run([str(c) for c in command], env=ENV, text=True, capture_output=True, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{command[:3]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def refused(*command, cwd=None):
    """The last line of a command that must fail with a one-line error."""
    proc = run(*command, check=False, cwd=cwd)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().split("\n")[-1]


def tree(path):
    """{relative path: sha256} of every file under path (an independent check that nothing changed)."""
    found = {}
    for d, _, files in os.walk(path):
        for name in files:
            with open(os.path.join(d, name), "rb") as f:
                found[os.path.relpath(os.path.join(d, name), path)] = hashlib.sha256(f.read()).hexdigest()
    return found


@pytest.fixture(scope="module")
def alt(tmp_path_factory):
    """The toy release and a work directory with en-vi prepared from it (vocab 20)."""
    root = tmp_path_factory.mktemp("safety")
    run(DATA, "toy-release", root / "release")
    run(
        DATA,
        "prepare",
        "en-vi",
        "--release",
        root / "release",
        "--work",
        root / "work",
        "--vocab",
        "20",
    )
    return {
        "root": root,
        "release": root / "release",
        "work": root / "work",
        "data": root / "work" / "data" / "en-vi.spm20",
    }


def copy_work(alt, dest):
    shutil.copytree(alt["work"], dest, symlinks=True)
    return dest


# ----------------------------------------------------------------------------- results --out


def fake_sweep(work):
    """An experiment with no finished run: enough for results.sh to write its tables."""
    exp = work / "sweep" / "en-vi.mini.spm20"
    exp.mkdir(parents=True)
    (exp / "experiment.json").write_text(json.dumps(experiment_json()))
    return work


def test_results_out_replaces_only_a_directory_it_wrote(tmp_path):
    work = fake_sweep(tmp_path / "work")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a week of notes")
    (tmp_path / "a-file").write_text("keep")
    before = tree(tmp_path)
    for out, message in (
        (work, "was not written by ctemp-alt-results"),  # the work directory itself
        (tmp_path / "mine", "was not written by ctemp-alt-results"),
        (tmp_path, "was not written by ctemp-alt-results"),
        (tmp_path / "a-file", "is not a directory"),
    ):
        assert message in refused(RESULTS, "--work", work, "--out", out)
        assert tree(tmp_path) == before  # nothing deleted, renamed or written
    out = tmp_path / "results"
    for sibling in ("results.tmp", "results.old"):  # a user's, next to OUT: never touched
        (tmp_path / sibling).mkdir()
        (tmp_path / sibling / "x").write_text(sibling)
    run(RESULTS, "--work", work, "--out", out)
    first = set(os.listdir(out))
    assert {".alt_results", "alt_results.md", "runs.csv", "table1.csv"} <= first
    run(RESULTS, "--work", work, "--out", out)  # its own directory: replaced
    assert set(os.listdir(out)) == first
    assert (tmp_path / "results.tmp" / "x").read_text() == "results.tmp"
    assert (tmp_path / "results.old" / "x").read_text() == "results.old"
    assert [p for p in os.listdir(tmp_path) if p.startswith(".results")] == []  # no temporary left
    (out / "my-plot.png").write_bytes(b"mine")  # a file the tool did not write: the whole OUT is kept
    assert "has files ctemp-alt-results did not write (my-plot.png)" in refused(
        RESULTS, "--work", work, "--out", out
    )
    assert (out / "my-plot.png").read_bytes() == b"mine"


# ----------------------------------------------------------------------------- averaging


def checkpoint(path, weights, criterion="tempered_ce", temperature=2.0):
    state = {
        "model": collections.OrderedDict((k, torch.tensor(v)) for k, v in weights.items()),
        "cfg": {"criterion": {"_name": criterion, "softmax_temperature": temperature}},
        "optimizer_history": [{"num_updates": 1}],
    }
    torch.save(state, path)
    return str(path)


def average(argv):
    """ctemp-average-checkpoints in this process: (exit code, stderr)."""
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err):
        try:
            average_checkpoints.main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def test_a_record_that_cannot_be_written_leaves_no_partial_copy(tmp_path):
    """The recipes' records are written whole or not at all, and a failed write leaves nothing
    beside the old record (a lone surrogate cannot be encoded: the write fails midway)."""
    path = tmp_path / "record.json"
    outputs.write_json(str(path), {"ok": 1})
    with pytest.raises(UnicodeEncodeError):
        outputs.write_text(str(path), "half written \ud800")
    assert os.listdir(tmp_path) == ["record.json"] and json.loads(path.read_text()) == {"ok": 1}


def test_average_leaves_a_users_output_tmp_alone(tmp_path):
    a = checkpoint(tmp_path / "a.pt", {"w": [1.0, 2.0], "step": [3]})
    b = checkpoint(tmp_path / "b.pt", {"w": [2.0, 5.0], "step": [4]})
    (tmp_path / "avg.pt.tmp").write_text("the user's file")
    code, err = average(["--inputs", a, b, "--output", tmp_path / "avg.pt"])
    assert code == 0, err
    assert (tmp_path / "avg.pt.tmp").read_text() == "the user's file"
    state = torch.load(tmp_path / "avg.pt")
    assert state["model"]["w"].tolist() == [(1.0 + 2.0) / 2, (2.0 + 5.0) / 2]
    assert state["model"]["step"].tolist() == [(3 + 4) // 2]
    assert sorted(os.listdir(tmp_path)) == ["a.pt", "avg.pt", "avg.pt.tmp", "b.pt"]


def test_a_full_disk_while_averaging_leaves_nothing_and_says_so(tmp_path, monkeypatch):
    a = checkpoint(tmp_path / "a.pt", {"w": [1.0, 2.0]})
    b = checkpoint(tmp_path / "b.pt", {"w": [2.0, 5.0]})

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"the first bytes")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    code, err = average(["--inputs", a, b, "--output", tmp_path / "avg.pt"])
    last = err.strip().split("\n")[-1]
    assert code == 2 and "Traceback" not in err
    assert last.endswith(
        f"--output {tmp_path / 'avg.pt'} could not be written ([Errno 28] No space left on device); nothing was left behind"
    ), last
    assert sorted(os.listdir(tmp_path)) == ["a.pt", "b.pt"]


def test_average_refuses_mixed_temperatures_unless_told(tmp_path):
    t2 = checkpoint(tmp_path / "t2.pt", {"w": [1.0]}, temperature=2.0)
    t1 = checkpoint(tmp_path / "t1.pt", {"w": [3.0]}, temperature=1.0)
    plain = checkpoint(tmp_path / "plain.pt", {"w": [5.0]}, criterion="label_smoothed_cross_entropy")
    tempered_at_1 = checkpoint(tmp_path / "tempered1.pt", {"w": [3.0]}, temperature=1.0)
    for inputs in ((t2, t1), (tempered_at_1, plain)):
        code, err = average(["--inputs", *inputs, "--output", tmp_path / "avg.pt"])
        assert code == 2 and "trained with different criteria or temperatures" in err.strip().split("\n")[-1]
        assert "--allow-mixed-temperatures" in err and not (tmp_path / "avg.pt").exists()
    code, err = average(["--inputs", t2, t1, "--output", tmp_path / "avg.pt", "--allow-mixed-temperatures"])
    assert code == 0 and "the average decodes at T=2 (tempered_ce, from " + t2 in err
    state = torch.load(tmp_path / "avg.pt")
    assert state["cfg"]["criterion"]["softmax_temperature"] == 2.0 and state["model"]["w"].tolist() == [2.0]
    assert state["ctemp_average"] == {
        "inputs": ["t2.pt", "t1.pt"],
        "criteria": ["tempered_ce"] * 2,
        "softmax_temperatures": [2.0, 1.0],
        "decodes_at_temperature": 2.0,
    }


def test_average_refuses_checkpoints_of_other_models_and_files_that_are_none(tmp_path):
    """Only checkpoints of one model are averaged: other parameter names (or their order) and a
    torch file without fairseq's 'model' parameters are refused before anything is written."""
    a = checkpoint(tmp_path / "a.pt", {"w": [1.0], "v": [2.0]})
    renamed = checkpoint(tmp_path / "renamed.pt", {"w": [1.0], "u": [2.0]})
    reordered = checkpoint(tmp_path / "reordered.pt", {"v": [2.0], "w": [1.0]})
    torch.save({"w": torch.ones(1)}, tmp_path / "weights.pt")  # a state dict, not a checkpoint
    for other, message in (
        (renamed, f"{renamed} has other parameters than {a}: u, v"),
        (reordered, f"{reordered} has other parameters than {a}: (their order)"),
        (tmp_path / "weights.pt", f"--inputs {tmp_path / 'weights.pt'} is not a fairseq checkpoint"),
    ):
        code, err = average(["--inputs", a, other, "--output", tmp_path / "avg.pt"])
        assert code == 2 and message in err.strip().split("\n")[-1], err
        assert not (tmp_path / "avg.pt").exists()


# ----------------------------------------------------------------------------- prepare


def test_prepare_resumed_with_other_options_is_refused(alt, tmp_path):
    work = copy_work(alt, tmp_path / "work")
    data = work / "data" / "en-vi.spm20"
    os.remove(data / "prepare.json")  # killed just before its last write: every step is done
    before = tree(work)
    message = refused(
        DATA,
        "prepare",
        "en-vi",
        "--release",
        alt["release"],
        "--work",
        work,
        "--vocab",
        "20",
        "--spm-model-type",
        "bpe",
    )
    assert "was started with other options (spm_model_type: 'unigram', now 'bpe')" in message
    assert tree(work) == before  # not a prepare.json describing sub/ models it did not make
    proc = run(DATA, "prepare", "en-vi", "--release", alt["release"], "--work", work, "--vocab", "20")
    assert "sub/ exists: skipped" in proc.stderr
    assert json.loads((data / "prepare.json").read_text())["options"]["spm_model_type"] == "unigram"


def test_prepare_refuses_an_options_file_it_cannot_read(alt, tmp_path):
    work = copy_work(alt, tmp_path / "work")
    data = work / "data" / "en-vi.spm20"
    os.remove(data / "prepare.json")
    options = json.loads((data / "options.json").read_text())
    assert "carve_test" not in options["options"]  # not carved: written as before --carve-test
    del options["options"]["vocab"]
    (data / "options.json").write_text(json.dumps(options))
    before = tree(work)
    message = refused(DATA, "prepare", "en-vi", "--release", alt["release"], "--work", work, "--vocab", "20")
    assert message.endswith("options.json lacks vocab: not the options of `ctemp-alt-data prepare`")
    assert tree(work) == before


def test_prepare_refuses_another_corpus_for_a_prepared_directory(alt, tmp_path):
    release = tmp_path / "release"
    shutil.copytree(alt["release"], release)
    corpus = release / "ALT-Parallel-Corpus-20191206" / "data_vi.txt"
    lines = corpus.read_bytes().split(b"\r\n")
    lines[0] = lines[0].split(b"\t")[0] + b"\tanother translation"
    corpus.write_bytes(b"\r\n".join(lines))
    work = copy_work(alt, tmp_path / "work")
    before = tree(work)
    for partly in (False, True):
        if partly:
            os.remove(work / "data" / "en-vi.spm20" / "prepare.json")
            before = tree(work)
        message = refused(DATA, "prepare", "en-vi", "--release", release, "--work", work, "--vocab", "20")
        assert "was prepared from another corpus than" in message and "raw/" in message
        assert tree(work) == before


def test_two_prepares_on_one_directory(alt, tmp_path):
    """While one prepare works on a data directory (holds its lock), another is refused at once."""
    work = copy_work(alt, tmp_path / "work")
    data = work / "data" / "en-vi.spm20"
    shutil.rmtree(data / "bin")
    os.remove(data / "prepare.json")
    with alt_common.Lock(str(data)):  # this process is "the other prepare"
        message = refused(
            DATA,
            "prepare",
            "en-vi",
            "--release",
            alt["release"],
            "--work",
            work,
            "--vocab",
            "20",
        )
    assert f"is being worked on by pid {os.getpid()}" in message
    assert not (data / "bin").exists() and not (data / "prepare.json").exists()


def test_a_stale_lock_file_does_not_block_and_a_held_one_names_its_holder(tmp_path):
    (tmp_path / ".lock").write_text("pid 999999999 on a-host-that-died\n")
    with alt_common.Lock(str(tmp_path)):
        assert (tmp_path / ".lock").read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"
        with pytest.raises(alt_common.AltError, match=f"being worked on by pid {os.getpid()} on "):
            with alt_common.Lock(str(tmp_path)):
                pass


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the kernel's list of locks is Linux's")
def test_the_plan_names_the_sweep_working_on_a_run(tmp_path):
    """--dry-run's state of a run another sweep holds (its lock, seen without trying it): being
    trained, or once trained, averaged and decoded, by the holder its lock file names."""
    from fairseq_ctemp.alt.sweep import run_state

    run = tmp_path / "T1-ls0.1-sem0"
    run.mkdir()
    assert run_state(str(run)) == "to train"
    me = f"pid {os.getpid()} on {socket.gethostname()}"
    with alt_common.Lock(str(run)):
        assert run_state(str(run)) == f"training now ({me})"
        (run / "train.json").write_text("{}")
        assert run_state(str(run)) == f"trained; averaging / decoding now ({me})"
    assert run_state(str(run)) == "trained; averaging / decoding to do"


# ----------------------------------------------------------------------------- moved work directories


def test_a_moved_or_copied_work_directory_uses_its_own_data(alt, tmp_path):
    work = copy_work(alt, tmp_path / "a" / "work")
    # the sweep's files, written as for a real run (a stand-in sbatch: nothing trains)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\necho 1\n")
    (fake / "sbatch").chmod(0o755)
    env = dict(ENV, PATH=f"{fake}{os.pathsep}{ENV['PATH']}")
    subprocess.run(
        [
            *SWEEP_COMMAND,
            "run",
            "en-vi",
            "--work",
            "work",
            "--vocab",
            "20",
            "--preset",
            "mini",
            "--temperatures",
            "1,2",
            "--slurm",
        ],
        cwd=tmp_path / "a",
        env=env,
        check=True,
        capture_output=True,
    )
    copy = tmp_path / "b" / "copy"
    shutil.copytree(work, copy, symlinks=True)
    exp_dir = copy / "sweep" / "en-vi.mini.spm20"
    exp = alt_records.load_experiment(str(exp_dir))
    assert exp.data == str(copy / "data" / "en-vi.spm20")
    info = alt_records.prepared(exp.data)
    assert info.bin == str(copy / "data" / "en-vi.spm20" / "bin") and os.path.isdir(info.bin)
    proc = run(
        SWEEP,
        "run",
        "en-vi",
        "--work",
        copy,
        "--vocab",
        "20",
        "--preset",
        "mini",
        "--temperatures",
        "1,2",
        "--dry-run",
    )
    assert f"fairseq-train {copy}/data/en-vi.spm20/bin " in proc.stdout
    # a file of an older version names the original's data by absolute path: refused, not used
    old = json.loads((exp_dir / "experiment.json").read_text())
    (exp_dir / "experiment.json").write_text(json.dumps(dict(old, data=str(work / "data" / "en-vi.spm20"))))
    with pytest.raises(alt_common.RunFailed, match="moved or copied"):
        alt_records.load_experiment(str(exp_dir))
    assert "(moved or copied?)" in refused(
        SWEEP,
        "run",
        "en-vi",
        "--work",
        copy,
        "--vocab",
        "20",
        "--preset",
        "mini",
        "--temperatures",
        "1,2",
        "--dry-run",
    )
    # prepare.json of an older version: paths relative to where prepare ran, no test_source
    prepare_json = copy / "data" / "en-vi.spm20" / "prepare.json"
    older = dict(
        json.loads(prepare_json.read_text()), bin="work/data/en-vi.spm20/bin", raw="work/data/en-vi.spm20/raw"
    )
    del older["test_source"]
    prepare_json.write_text(json.dumps(older))
    info = alt_records.prepared(str(copy / "data" / "en-vi.spm20"))
    assert info.raw == str(copy / "data" / "en-vi.spm20" / "raw") and info.test_source is None


# ----------------------------------------------------------------------------- sweeps


def test_a_refused_sweep_writes_nothing(alt, tmp_path):
    work = copy_work(alt, tmp_path / "work")
    before = tree(work)
    message = refused(
        SWEEP,
        "run",
        "en-vi",
        "en-ja",
        "--work",
        work,
        "--vocab",
        "20",
        "--preset",
        "mini",
        "--temperatures",
        "1,2",
    )
    assert "en-ja" in message and "is not prepared" in message
    assert tree(work) == before  # en-vi's experiment.json was not written
    proc = run(
        SWEEP,
        "run",
        "en-vi",
        "--work",
        work,
        "--vocab",
        "20",
        "--preset",
        "mini",
        "--temperatures",
        "1,2",
        "--interval",
        "50",
        "--dry-run",
    )  # other settings: not refused
    assert "2 runs, 2 to do" in proc.stdout


def descendants(pid):
    """Live (not zombie) processes below pid, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def process_state(pid):
    """'PID STATE WCHAN: COMMAND' of a live process, for a failure message."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
        with open(f"/proc/{pid}/cmdline") as f:
            command = f.read().replace("\0", " ").strip()
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} {state} {wchan}: {command}"


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# A process under stopping_children() given SIGTERM where the SystemExit its handler raises is lost
# (a bare `except:`, as in some libraries) or while it holds the children's lock itself.
SWALLOWS_SYSTEM_EXIT = """
import time
from fairseq_ctemp.alt.children import stopping_children
with stopping_children():
    print("ready", flush=True)
    while True:
        try:
            time.sleep(0.01)
        except BaseException:
            pass
"""
HOLDS_THE_CHILDREN_LOCK = """
import time
from fairseq_ctemp.alt.children import CHILDREN_LOCK, stopping_children
with stopping_children(), CHILDREN_LOCK:
    print("ready", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize(
    "program", [SWALLOWS_SYSTEM_EXIT, HOLDS_THE_CHILDREN_LOCK], ids=["swallowed", "locked"]
)
def test_a_stopped_process_exits_whatever_it_was_doing(program, tmp_path):
    command = python_script(tmp_path, "stopped", program)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=alt_children.STOP_GRACE_SECONDS + 30)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert code == 128 + signal.SIGTERM


def test_a_run_another_sweep_holds_is_left_to_it_not_failed(alt, tmp_path):
    """Two sweeps of one experiment: the run the other one works on (its lock, here held by this
    process) is shown as such in the plan, refused by its run-one before any work (exit status 75),
    and reported as left to the holder; the sweep ends without a failure."""
    work = copy_work(alt, tmp_path / "work")
    run_dir = work / "sweep" / "en-vi.mini.spm20" / "T1-ls0.1-sem0"
    run_dir.mkdir(parents=True)
    options = ["run", "en-vi", "--work", work, "--vocab", "20", "--preset", "mini", "--temperatures", "1"]
    options += ["--no-finalize"]
    with alt_common.Lock(str(run_dir)):
        proc = run(*SWEEP_COMMAND, *options, "--", *TINY_DIMS)
        held = f"{run_dir} is being worked on by pid {os.getpid()} on {socket.gethostname()}"
        assert re.search(rf"\n +T1-ls0.1-sem0 +training now \(pid {os.getpid()} on ", proc.stdout), (
            proc.stdout
        )
        assert f"en-vi.mini.spm20/T1-ls0.1-sem0: left to the process working on it ({held}" in proc.stderr
        assert "left to the processes working on them: en-vi.mini.spm20/T1-ls0.1-sem0; when" in proc.stdout
        assert "all runs done" not in proc.stdout
        assert "FAILED" not in proc.stderr and not (run_dir / "train.log").exists()
        one = subprocess.run(
            [*SWEEP_COMMAND, "run-one", run_dir, "--cpu"], env=ENV, text=True, capture_output=True
        )
    assert one.returncode == alt_common.HELD_STATUS, one.stderr
    assert one.stderr.splitlines()[-1] == f"error: {held}: wait for it to finish, or stop it and run again"


def test_a_killed_sweep_takes_its_runs_with_it(alt, tmp_path):
    work = copy_work(alt, tmp_path / "work")
    sweep = subprocess.Popen(
        [
            *SWEEP_COMMAND,
            "run",
            "en-vi",
            "--work",
            str(work),
            "--vocab",
            "20",
            "--preset",
            "mini",
            "--temperatures",
            "1,2",
            "--jobs",
            "2",
            "--no-finalize",
            "--max-update",
            "100000",
            "--",
            *TINY_DIMS,
        ],
        env=real_processes(ENV),  # the parent alone is killed: its runs must see it die
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runs = [work / "sweep" / "en-vi.mini.spm20" / f"T{t}-ls0.1-sem0" for t in (1, 2)]
    children = []
    try:
        deadline = time.time() + 120
        started = lambda r: (r / "train.log").exists() and "| INFO |" in (r / "train.log").read_text()  # noqa: E731
        while time.time() < deadline and not all(started(r) for r in runs):
            time.sleep(0.2)  # both runs' fairseq-train have started
        children = descendants(sweep.pid)
        assert len(children) >= 2, children  # two run-one processes, each training in itself
        sweep.send_signal(signal.SIGKILL)  # only the parent, as a careless `kill -9 PID` would
        sweep.wait()
        deadline = time.time() + 60  # a torch process takes seconds to shut down on a busy machine
        while time.time() < deadline and any(alive(p) for p in children):
            time.sleep(0.2)
        survivors = [process_state(p) for p in children if alive(p)]
        assert not survivors, f"runs kept training after the sweep was killed: {survivors}"
        for run_dir in runs:  # and their locks are free for the next sweep
            with open(run_dir / ".lock", "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        for pid in [sweep.pid] + children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- averaging the last validations

SAVED = "INFO | fairseq.checkpoint_utils | Saved checkpoint {} (epoch {} @ {} updates, score 1.0)\n"
VALID = 'INFO | valid | {{"epoch": {}, "valid_bleu": "1.0", "valid_num_updates": "{}"}}\n'


def test_averaging_takes_exactly_the_last_validations(tmp_path):
    """Validations at 4 (interval file), 8 (an epoch end: checkpoint2.pt), 12 and 14 (the last, at
    --max-update: only checkpoint_last.pt); an older interval file must not stand in for any."""
    log = ""
    for update, epoch, name in (
        (2, 1, "checkpoint_1_2.pt"),
        (4, 1, "checkpoint_1_4.pt"),
        (8, 2, "checkpoint2.pt"),
        (12, 3, "checkpoint_3_12.pt"),
        (14, 3, "checkpoint_last.pt"),
    ):
        log += VALID.format(epoch, update) + SAVED.format(tmp_path / name, epoch, update)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "train.log").write_text(log)
    found = training.last_validation_checkpoints(str(tmp_path), 4)
    assert [os.path.basename(p) for p in found] == [
        "checkpoint_1_4.pt",
        "checkpoint2.pt",
        "checkpoint_3_12.pt",
        "checkpoint_last.pt",
    ]
    with pytest.raises(alt_common.RunFailed, match="validated 5 time"):
        training.last_validation_checkpoints(str(tmp_path), 6)
    os.remove(tmp_path / "checkpoint2.pt")
    with pytest.raises(alt_common.RunFailed, match=r"no checkpoint of the validation\(s\) at update\(s\) 8 "):
        training.last_validation_checkpoints(str(tmp_path), 4)


def test_a_validation_at_an_epoch_end_keeps_its_checkpoint(alt, tmp_path):
    """The sweep's fairseq-train with validations every 3 updates, which are also the epoch ends
    (60 pairs, 20 a batch): stock fairseq with --no-epoch-checkpoints keeps only checkpoint_last."""
    proc = run(
        sys.executable,
        "-m",
        "fairseq_ctemp.alt.training",  # what a run's train.log names as its command
        alt["data"] / "bin",
        "--user-dir",
        alt_common.USER_DIR,
        "--source-lang",
        "en",
        "--target-lang",
        "vi",
        "--save-dir",
        tmp_path,
        *TINY,
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        "2",
        "--batch-size",
        "20",
        "--required-batch-size-multiple",
        "1",
        "--validate-interval-updates",
        "3",
        "--save-interval-updates",
        "3",
        "--keep-interval-updates",
        "5",
        "--validate-interval",
        "1000000",
        "--save-interval",
        "1000000",
        "--no-epoch-checkpoints",
        "--max-update",
        "6",
    )
    (tmp_path / "train.log").write_text(proc.stdout + proc.stderr)
    found = training.last_validation_checkpoints(str(tmp_path), 2)
    assert [os.path.basename(p) for p in found] == ["checkpoint_1_3.pt", "checkpoint_2_6.pt"]
    for path, update in zip(found, (3, 6)):
        assert torch.load(path)["optimizer_history"][-1]["num_updates"] == update


def test_a_failed_step_says_why_in_its_first_line(tmp_path):
    """A child that failed under progress bars (carriage-return redraws, no newline before the
    next message): the sweep's message starts with its reason, the bars' debris gone."""
    script = (
        "import sys; w = sys.stderr.write\n"
        "w(' 10%|#  |\\r 60%|###  |\\rexp: finalize failed: final is being worked on by pid 7\\n')\n"
        "w('error: finalize failed for exp\\n'); sys.exit(2)\n"
    )
    log = tmp_path / "finalize.log"
    with pytest.raises(alt_common.RunFailed) as failed:
        alt_children.call([sys.executable, "-c", script], dict(os.environ), str(log), "finalize")
    first, *rest = str(failed.value).split("\n")
    assert first == "finalize failed (exit 2): exp: finalize failed: final is being worked on by pid 7"
    assert rest[-2:] == [
        "exp: finalize failed: final is being worked on by pid 7",
        "error: finalize failed for exp",
    ]


def test_every_beginning_of_an_option_the_sweep_sets_is_refused_unless_it_is_fairseqs_own():
    """fairseq's argparse reads an unambiguous beginning of an option as the option, so after --
    each beginning of one the sweep sets would set it too; the exceptions are real options of
    fairseq-train (checked against its parser, so the list cannot go stale)."""
    from fairseq import options

    parser = options.get_training_parser()
    fairseq_options = {o for action in parser._actions for o in action.option_strings}
    for owned in sweep_checks.SWEEP_TRAIN_OPTIONS:
        for end in range(3, len(owned) + 1):
            beginning = owned[:end]
            if beginning in fairseq_options and beginning not in sweep_checks.SWEEP_TRAIN_OPTIONS:
                assert beginning in sweep_checks.FAIRSEQ_OPTIONS_LIKE_SWEEP_OPTIONS, beginning
                assert sweep_checks.sweep_train_option(beginning) is None
            else:
                assert sweep_checks.sweep_train_option(beginning) is not None, beginning
    for option in sweep_checks.FAIRSEQ_OPTIONS_LIKE_SWEEP_OPTIONS:
        assert option in fairseq_options
    assert (
        sweep_checks.sweep_train_option("--lr") is None
        and sweep_checks.sweep_train_option("--dropout") is None
    )


def test_a_run_whose_training_fails_reports_fairseqs_error_and_keeps_its_log(tmp_path, capfd):
    """A run trains in its own process: fairseq-train's failure (here its own option error) becomes
    the run's error with the log's last lines, the log keeps what came before, and this process's
    output goes back where it was."""
    log = tmp_path / "train.log"
    log.write_text("an earlier session\n")
    with pytest.raises(alt_common.RunFailed) as failed:
        training.train_in_this_process([str(tmp_path), "--arch", "no_such_arch"], str(log))
    assert str(failed.value).startswith("fairseq-train failed:")
    assert "argument --arch/-a: invalid choice: 'no_such_arch'" in str(failed.value).splitlines()[-1]
    text = log.read_text()
    assert text.startswith("an earlier session\n") and " -m fairseq_ctemp.alt.training " in text
    print("after")
    assert capfd.readouterr().out.endswith("after\n")
