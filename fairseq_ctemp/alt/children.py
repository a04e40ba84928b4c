"""The processes a sweep starts: logged, and stopped with it however it dies."""

import ctypes
import datetime
import os
import shlex
import signal
import subprocess
import sys
import threading

from .common import HELD_STATUS, RunFailed, RunHeld

PARENT_PID = "ALT_PARENT_PID"  # set by the sweep for the child processes it starts
SWEEP_MODULE = __name__.rsplit(".", 2)[0] + ".cli.alt_sweep"  # ctemp-alt-sweep


def sweep_command(*args):
    """ctemp-alt-sweep ARGS run by this Python, as `python -m` (no console script needed)."""
    return [sys.executable, "-m", SWEEP_MODULE, *args]


def die_with_parent():
    """In a child process of a sweep (PARENT_PID set): receive SIGTERM when the parent dies, even
    by SIGKILL (Linux PR_SET_PDEATHSIG), so that a killed sweep leaves no run training on, holding
    its lock. Exits at once if the parent is already gone."""
    parent = os.environ.pop(PARENT_PID, None)
    if parent is None:
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the parent's SIGTERM handler still stops its children
    if os.getppid() != int(parent):
        sys.exit("error: the process that started this one has died; not starting")


CHILDREN = set()  # running subprocesses, terminated if the sweep itself is stopped
# Re-entrant: the SIGTERM handler runs in the main thread, which may be holding it in call().
CHILDREN_LOCK = threading.RLock()
# A stopped process still running this long after its SIGTERM is ended with os._exit: the
# SystemExit the handler raises is lost if it lands in a __del__, a weakref callback or a library's
# bare `except:`, and the process would then train on.
STOP_GRACE_SECONDS = 5


def child_env(env):
    """env for a child process of this script: it dies with this process (die_with_parent)."""
    return dict(env, **{PARENT_PID: str(os.getpid())})


def call(command, env, log_path=None, what=None):
    """Run a command; its output goes to log_path (appended) or is returned. Raises RunFailed."""
    out = open(log_path, "a", encoding="utf-8") if log_path else subprocess.PIPE
    try:
        if log_path:
            out.write(f"# {datetime.datetime.now():%Y-%m-%d %H:%M:%S} $ {shlex.join(command)}\n")
            out.flush()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, text=True)
        with CHILDREN_LOCK:
            CHILDREN.add(proc)
        output, _ = proc.communicate()
        with CHILDREN_LOCK:
            CHILDREN.discard(proc)
    finally:
        if log_path:
            out.close()
    if proc.returncode != 0:
        if log_path:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                output = f.read()
        lines = shown_lines(output or "")
        # finalize's own report of what failed ("EXP: finalize failed: why"), else the error line
        reason = next((line for line in reversed(lines) if " failed: " in line), None) or next(
            (line for line in reversed(lines) if line.startswith("error:")), None
        )
        if proc.returncode == HELD_STATUS:  # refused before any work: another process has it
            raise RunHeld(reason.removeprefix("error: ") if reason else f"{what or command[0]}: held")
        head = f"{what or command[0]} failed (exit {proc.returncode})" + (f": {reason}" if reason else ":")
        raise RunFailed(head + "\n" + "\n".join(lines[-15:]))
    return output


def shown_lines(text):
    """The lines of a child's output as a terminal shows them: a progress bar redrawn with carriage
    returns keeps only its last state, and its fragments are not glued to the next line."""
    lines = []
    for line in text.splitlines():
        lines += [part for part in line.split("\r") if part.strip()][-1:] if "\r" in line else [line]
    return lines


def stop_children(signum, frame):
    with CHILDREN_LOCK:
        for proc in CHILDREN:
            if proc.poll() is None:
                proc.terminate()
    deadline = threading.Timer(STOP_GRACE_SECONDS, os._exit, (128 + signum,))
    deadline.daemon = True
    deadline.start()
    raise SystemExit(128 + signum)


class stopping_children:
    """While the block runs, SIGTERM stops the children too (the handler before it is restored)."""

    def __enter__(self):
        self.previous = signal.signal(signal.SIGTERM, stop_children)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self.previous)


class Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
            stream.flush()
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()
