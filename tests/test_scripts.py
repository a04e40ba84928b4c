"""The project's shell scripts run as they began when the checkout changes under them.

bash reads a script as it runs it, one command at a time: a checkout updated while a recipe trains
for hours (git pull, an edit) would have it run the rest of the new file from the old file's byte
offset, a syntax error or another command. Every script the project runs is one block
(``{ ... exit; }``) that bash reads whole before it runs any of it."""

import os
import shutil
import stat
import subprocess
import time

from conftest import REPO

WRAPPED = "{  # read whole before it runs: a checkout changed meanwhile (git pull) leaves a running script as it began"


def executed_scripts():
    """The tracked scripts that are run (a #! line), not sourced."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.sh", ".ci/run"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for path in tracked:
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            if f.readline().startswith("#!"):
                yield path


def test_every_script_is_one_block_read_before_it_runs():
    scripts = list(executed_scripts())
    assert "examples/language_model/train.sh" in scripts and ".ci/run" in scripts
    for path in scripts:
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            lines = f.read().splitlines()
        start = lines.index("set -euo pipefail") + 1
        assert lines[start] == WRAPPED, path
        assert lines[-2:] == ["exit", "}"], path  # nothing after the block is ever read


def test_train_sh_changed_while_it_trains_ends_as_it_began(tmp_path):
    """train.sh of a copy of the recipes, its training (a stand-in for ctemp-train that waits) under
    way when the file is replaced by a version that writes train.done otherwise: the run writes
    the train.done of the version it started with."""
    checkout = tmp_path / "checkout"
    here = checkout / "examples" / "language_model"
    os.makedirs(here)
    for name in ("train.sh", "common.sh"):
        shutil.copy(os.path.join(REPO, "examples", "language_model", name), here)
    shutil.copy(os.path.join(REPO, "examples", "run_options.sh"), checkout / "examples")
    os.symlink(os.path.join(REPO, "fairseq_ctemp"), checkout / "fairseq_ctemp")
    data, save, tools = tmp_path / "data-bin", tmp_path / "run", tmp_path / "bin"
    os.makedirs(data)
    (data / "dict.txt").write_text("a 1\n", encoding="utf-8")
    os.makedirs(tools)
    started, go = tmp_path / "started", tmp_path / "go"
    trainer = tools / "ctemp-train"  # writes the checkpoint, then waits for the test
    trainer.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != --save-dir ]; do shift; done\n'
        'touch "$2/checkpoint_last.pt" "$STARTED"\n'
        'while [ ! -e "$GO" ]; do sleep 0.05; done\n',
        encoding="utf-8",
    )
    trainer.chmod(trainer.stat().st_mode | stat.S_IXUSR)
    env = {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "DATA_BIN": str(data),
        "STARTED": str(started),
        "GO": str(go),
    }
    script = here / "train.sh"
    run = subprocess.Popen(
        ["bash", str(script), "ptb", "softmax", str(save)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
            time.sleep(0.05)
        old = script.read_text(encoding="utf-8")
        assert '> "$save/train.done"' in old
        script.write_text(
            old.replace('> "$save/train.done"', '> "$save/train.done"; echo changed >> "$save/train.done"')
        )
        go.touch()
        output, _ = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, output
    done = (save / "train.done").read_text(encoding="utf-8")
    assert done.startswith("dataset=ptb variant=softmax seconds=") and "changed" not in done
