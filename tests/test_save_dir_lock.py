"""One recipe at a time in a SAVE_DIR: the shell recipes that train into or evaluate a SAVE_DIR
(examples/run_options.sh's lock_save_dir) refuse, before any work, a SAVE_DIR another process holds,
the training a killed recipe left going included; a lock file left by a dead process blocks nothing.
The lock is checked with flock(2) from this process, not with the recipes' own function."""

import contextlib
import fcntl
import os
import signal
import socket
import subprocess

import pytest
from conftest import BIN_DIR, REPO, wait_until_free

EXAMPLES = os.path.join(REPO, "examples")
ENV = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1")


def recipe(script, *args, **env):
    return subprocess.run(
        ["bash", os.path.join(EXAMPLES, script), *map(str, args)],
        env={**ENV, **env},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )


@contextlib.contextmanager
def held(save):
    """SAVE/.lock held by this process, as lock_save_dir holds it."""
    save.mkdir(parents=True, exist_ok=True)
    with open(save / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.truncate(0)
        lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        lock.flush()
        yield


def data_bin(tmp_path):
    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "dict.txt").write_text("a 1\n")
    return data


# each recipe that takes the lock, with arguments that get it as far as the lock
CALLS = {
    "language_model/train.sh": lambda data, save: ("ptb", "softmax", save),
    "language_model/evaluate.sh": lambda data, save: (save, "ptb", "test"),
    "sact/train.sh": lambda data, save: (data, save, "none"),
    "softmax_tempering/train_and_decode.sh": lambda data, save: (data, save),
}


@pytest.mark.parametrize("script", sorted(CALLS))
def test_a_save_dir_in_use_is_refused_before_any_work(script, tmp_path):
    data, save = data_bin(tmp_path), tmp_path / "save"
    with held(save):
        proc = recipe(script, *CALLS[script](data, save), DATA_BIN=data)
    name = os.path.basename(script)
    assert proc.returncode == 75  # EX_TEMPFAIL: not a failed run, another's
    assert proc.stdout == (
        f"{name}: error: SAVE_DIR {save} is in use by pid {os.getpid()} on {socket.gethostname()} or "
        "what it started: wait for it to end, or stop it and run again\n"
    )
    assert sorted(p.name for p in save.iterdir()) == [".lock"]  # no run_options.txt, no log


def test_the_lock_lasts_as_long_as_the_training_a_killed_recipe_left_going(tmp_path):
    """A recipe that dies leaves what it started holding the lock (here a sleep: a training that
    runs on); once that ends too, the lock file it leaves blocks nothing."""
    data, save = data_bin(tmp_path), tmp_path / "save"
    script = 'source "$0"; die() { exit 2; }; lock_save_dir "$1"; sleep 300 > /dev/null & echo $! $$'
    started = subprocess.run(  # lock_save_dir, a child left running, the recipe's end
        ["bash", "-c", script, os.path.join(EXAMPLES, "run_options.sh"), str(save)],
        text=True,
        stdout=subprocess.PIPE,
        check=True,
    )
    child, recipe_pid = map(int, started.stdout.split())
    try:
        proc = recipe("language_model/train.sh", "ptb", "softmax", save, DATA_BIN=data)
        assert proc.returncode != 0 and f"is in use by pid {recipe_pid} on " in proc.stdout, proc.stdout
    finally:
        os.kill(child, signal.SIGKILL)
    wait_until_free(save / ".lock")
    (save / "train.done").write_text("dataset=ptb variant=softmax\n")  # finished: train.sh skips it
    proc = recipe("language_model/train.sh", "ptb", "softmax", save, DATA_BIN=data)
    assert proc.returncode == 0 and f"{save} is finished" in proc.stdout, proc.stdout
    assert (save / ".lock").read_text().startswith("pid ")  # its own, over the dead one's
