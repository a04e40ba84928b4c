"""The suite's fork server (tests/forkserver): a command it runs behaves as the same command
started for real — output, exit status, uncaught exceptions, signals, atexit — and its worker
ends with the process the test started."""

import os
import select
import signal
import socket
import subprocess
import sys
import time

import ctemp_forkserver  # tests/forkserver, on sys.path through conftest
import pytest
from conftest import real_processes

pytestmark = pytest.mark.skipif(
    ctemp_forkserver.SOCKET_VAR not in os.environ, reason="no fork server (CTEMP_TEST_FORK=0)"
)


@pytest.fixture(autouse=True)
def server_listening():
    """The server binds its socket once it has imported its libraries (~5 s after pytest starts)."""
    deadline = time.time() + 120
    while not os.path.exists(os.environ[ctemp_forkserver.SOCKET_VAR]) and time.time() < deadline:
        time.sleep(0.1)


PROGRAM = """
import atexit, os, sys, time
deferred = " deferred" if any(type(f).__name__ == "Deferred" for f in sys.meta_path) else ""
print(("preloaded" if "torch" in sys.modules else "fresh") + deferred, file=sys.stderr, flush=True)
atexit.register(lambda: print("atexit ran"))
print(sys.argv, sys.path[0], __file__, __name__, os.getcwd(), os.environ.get("PROBE"), sys.stdin.read())
mode = sys.argv[1]
if mode == "accent":
    print("\u00e9t\u00e9")
if mode == "exit3":
    sys.exit(3)
if mode == "message":
    sys.exit("a message")
if mode == "raise":
    raise ValueError("bad")
if mode == "interrupt":
    raise KeyboardInterrupt
if mode == "orphan":  # as a sweep's run does (fairseq_ctemp.alt.children.die_with_parent)
    import ctypes, signal
    def orphaned(*_):  # written whole, then renamed: the test polls for the name
        with open("orphaned.part", "w") as f:
            f.write("SIGTERM")
        os.replace("orphaned.part", "orphaned")
        os._exit(0)
    signal.signal(signal.SIGTERM, orphaned)
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)
    print("parent", os.getppid(), "torch" in sys.modules, flush=True)
    time.sleep(60)
if mode.startswith("fairseq"):  # fairseq's import configures logging unless the command did
    import logging
    if mode == "fairseq-after-logging":
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level="INFO", stream=sys.stdout)
    print("fairseq" in sys.modules, "bitarray" in sys.modules)
    import fairseq.models.transformer
    logging.getLogger("probe").debug("a debug record")
    root = logging.getLogger()
    print(root.level, [h.stream.name for h in root.handlers], fairseq.models.transformer.__spec__.name)
if mode == "signals":  # what a background job of a script inherits: SIGINT ignored
    import signal
    ignored = [n for n in signal.valid_signals() if n < signal.NSIG and signal.getsignal(n) == signal.SIG_IGN]
    print("ignored", sorted(ignored), signal.getsignal(signal.SIGINT) is signal.default_int_handler)
if mode == "numpy":
    import numpy
    print(numpy.random.randint(1 << 62))
if mode == "wait":
    print(os.getpid(), flush=True)
    time.sleep(60)
"""


LAUNCHER_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)  # what nohup or a background job ignores


def started(tmp_path, mode, env, ignore=()):
    """The probe started by a parent that ignores the signals `ignore` (of LAUNCHER_SIGNALS) and
    no other of them, whatever pytest itself inherited from what launched it."""
    script = tmp_path / "ctemp-probe"  # run as a console script of this package would be
    script.write_text(PROGRAM)
    return subprocess.Popen(
        [sys.executable, str(script), mode],
        preexec_fn=lambda: [
            signal.signal(n, signal.SIG_IGN if n in ignore else signal.SIG_DFL) for n in LAUNCHER_SIGNALS
        ],
        cwd=tmp_path,
        env=dict(env, PROBE="probe"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ran(tmp_path, mode, env, ignore=()):
    proc = started(tmp_path, mode, env, ignore)
    out, err = proc.communicate("the input", timeout=60)
    how, _, err = err.partition("\n")
    return how, (proc.returncode, out, err)


@pytest.mark.parametrize("mode", ["ok", "exit3", "message", "raise", "interrupt"])
def test_a_forked_command_ends_as_a_real_one(tmp_path, mode):
    how, forked = ran(tmp_path, mode, os.environ)
    real_how, real = ran(tmp_path, mode, real_processes(os.environ))
    assert (how, real_how) == ("preloaded deferred", "fresh")  # else this compares a process with itself
    assert forked == real
    assert "atexit ran" in forked[1]


@pytest.mark.parametrize("ignore", [(), LAUNCHER_SIGNALS])
def test_a_forked_command_ignores_the_signals_a_real_one_would(tmp_path, ignore):
    how, forked = ran(tmp_path, "signals", os.environ, ignore)
    real_how, real = ran(tmp_path, "signals", real_processes(os.environ), ignore)
    assert (how, real_how) == ("preloaded deferred", "fresh")
    assert forked == real
    ignored = sorted({signal.SIGPIPE, signal.SIGXFSZ, *ignore})  # Python ignores the first two itself
    assert real[0] == 0 and f"ignored {ignored} {not ignore}\n" in real[1], real


def test_forked_commands_draw_numpy_numbers_as_real_ones_do(tmp_path):
    """numpy's global random state is seeded afresh in each process: two commands differ."""
    draws = [ran(tmp_path, "numpy", os.environ)[1][1].splitlines()[1] for _ in range(2)]
    assert draws[0] != draws[1]


def test_a_forked_command_writes_in_the_encoding_its_environment_asks_for(tmp_path):
    env = dict(os.environ, PYTHONIOENCODING="ascii:backslashreplace")
    how, forked = ran(tmp_path, "accent", env)
    real_how, real = ran(tmp_path, "accent", real_processes(env))
    assert (how, real_how) == ("preloaded deferred", "fresh"), forked
    assert forked == real and "\\xe9t\\xe9" in forked[1]


def test_a_signal_reaches_the_worker_and_the_worker_dies_with_its_process(tmp_path):
    codes = []
    for env in (os.environ, real_processes(os.environ)):
        proc = started(tmp_path, "wait", env)
        proc.stdin.close()
        proc.stdout.readline()  # the argv line
        int(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        codes.append(proc.wait(timeout=30))
    assert codes == [-signal.SIGTERM, -signal.SIGTERM]

    proc = started(tmp_path, "wait", os.environ)
    proc.stdin.close()
    proc.stdout.readline()
    worker = int(proc.stdout.readline())
    assert worker != proc.pid
    proc.kill()  # SIGKILL: nothing to forward
    proc.wait()
    deadline = time.time() + 30  # (a loaded machine: it ends at once where it works)
    while time.time() < deadline and alive(worker):
        time.sleep(0.05)
    assert not alive(worker)


@pytest.mark.parametrize("gone", ["before the reply", "with the reply unread"])
def test_a_worker_dies_with_a_client_killed_before_it_reads_its_pid(tmp_path, gone):
    """The test above, with the race it can lose under load: the client ends before the server
    sent the worker's pid (the send fails) or with that reply unread (the read is reset). The
    worker may not have printed anything yet: its end is the end of its output."""
    started(tmp_path, "unused", os.environ).communicate("", timeout=60)  # writes the program
    argv = [sys.executable, str(tmp_path / "ctemp-probe"), "wait"]
    request = ctemp_forkserver.request_for(argv, str(tmp_path), os.getpid(), [])
    read_end, write_end = os.pipe()
    with open(os.devnull, "r+") as null, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(os.environ[ctemp_forkserver.SOCKET_VAR])
        ctemp_forkserver.send(client, request, fds=(null.fileno(), write_end, null.fileno()))
        os.close(write_end)
        if gone == "with the reply unread":
            assert select.select([client], [], [], 60)[0]
    assert output_closes(read_end, within=30)  # the worker, its only writer, has ended


def output_closes(fd, within):
    """Whether every write end of the pipe `fd` reads from closes within `within` seconds."""
    deadline = time.time() + within
    while select.select([fd], [], [], max(0, deadline - time.time()))[0]:
        if not os.read(fd, 4096):
            os.close(fd)
            return True
    os.close(fd)
    return False


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


LAUNCHER = (
    "import os, subprocess, sys; print('launcher', os.getpid(), flush=True); subprocess.run(sys.argv[1:])"
)


def test_a_worker_has_its_process_parent_and_dies_with_it_where_it_asked_to(tmp_path):
    started(tmp_path, "unused", os.environ).communicate("", timeout=60)  # writes the program
    for env, preloaded in ((os.environ, "True"), (real_processes(os.environ), "False")):
        (tmp_path / "orphaned").unlink(missing_ok=True)
        launcher = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, sys.executable, str(tmp_path / "ctemp-probe"), "orphan"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        seen = {}
        while len(seen) < 2:
            words = launcher.stdout.readline().split()
            if words and words[0] in ("launcher", "parent"):
                seen[words[0]] = words[1:]
        assert seen == {"launcher": [str(launcher.pid)], "parent": [str(launcher.pid), preloaded]}
        launcher.kill()
        launcher.wait()
        deadline = time.time() + 30
        while time.time() < deadline and not (tmp_path / "orphaned").exists():
            time.sleep(0.05)
        assert (tmp_path / "orphaned").read_text() == "SIGTERM"


@pytest.mark.parametrize("extra", [{"OMP_NUM_THREADS": "7"}, {"PYTHONHASHSEED": "3"}])
def test_commands_the_server_cannot_reproduce_start_for_real(tmp_path, extra):
    how, (code, _, err) = ran(tmp_path, "ok", dict(os.environ, **extra))
    assert (how, code) == ("fresh", 0), err


def test_a_forked_module_ends_as_a_real_one(tmp_path):
    command = [sys.executable, "-m", "fairseq_ctemp.cli.calibrate", "--no-such-option"]
    runs = [
        subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        for env in (os.environ, real_processes(os.environ))
    ]
    forked, real = ((r.returncode, r.stdout, r.stderr) for r in runs)
    assert forked == real


@pytest.mark.parametrize("mode", ["fairseq", "fairseq-after-logging", "fairseq-shadowed"])
def test_fairseq_preloaded_logs_as_its_own_import_would(tmp_path, mode):
    """The server imported fairseq; a command gets it at its first import, with the logging that
    import does (its basicConfig calls and records) made then. A module of the command's own
    directory that fairseq's import would find (here tensorboardX) makes it import fairseq anew."""
    if mode == "fairseq-shadowed":
        (tmp_path / "tensorboardX.py").write_text("print('a local tensorboardX')\nSummaryWriter = None\n")
    how, forked = ran(tmp_path, mode, os.environ)
    real_how, real = ran(tmp_path, mode, real_processes(os.environ))
    deferred = "" if mode == "fairseq-shadowed" else " deferred"
    assert (how, real_how) == ("preloaded" + deferred, "fresh"), forked
    assert forked == real
    assert "False False" in forked[1] and "fairseq.models.transformer" in forked[1]
    assert ("local tensorboardX" in forked[1]) is (mode == "fairseq-shadowed")
