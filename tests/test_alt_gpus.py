"""The GPUs of an ALT sweep's runs: --gpus ids are the sweep's own GPUs as torch numbers them, each
run is given one of them (under a scheduler's CUDA_VISIBLE_DEVICES, that list's entry). The count
of visible GPUs is stood in for (fairseq_ctemp.alt.gpus.visible_count), so the checks are the same
wherever the tests run, with a GPU or without. A SLURM task for GPUs that sees none: test_alt_recipes.py's SLURM test."""

import os

import pytest
from conftest import run_main

from fairseq_ctemp.alt import execute, gpus
from fairseq_ctemp.alt.common import Device
from fairseq_ctemp.cli import alt_sweep

RUN = ["run", "en-vi", "--vocab", "20", "--preset", "mini", "--temperatures", "1,2"]


@pytest.mark.parametrize(
    "visible, ids, expected",
    [
        (0, "0", "--gpus 0: no CUDA GPU is visible to this process (CUDA_VISIBLE_DEVICES="),
        (2, "0,2", "--gpus 0,2: 2 is not one of this process's 2 GPU(s): ids 0 to 1, as torch numbers them"),
        (2, "0,a", "--gpus 0,a: a is not one of this process's 2 GPU(s)"),
    ],
)
def test_gpu_ids_the_sweep_does_not_see_are_refused_before_anything_is_written(
    visible, ids, expected, tmp_path, monkeypatch
):
    monkeypatch.setattr(gpus, "visible_count", lambda: visible)
    work = tmp_path / "work"
    proc = run_main(alt_sweep.main, *RUN, "--work", work, "--gpus", ids, check=False)
    assert proc.returncode == 2 and expected in proc.stderr.splitlines()[-1], proc.stderr
    assert not work.exists()
    # --check (run_all.sh's, before it prepares data) checks them as the run does
    proc = run_main(alt_sweep.main, *RUN, "--work", work, "--gpus", ids, "--check", check=False)
    assert proc.returncode == 2 and expected in proc.stderr.splitlines()[-1], proc.stderr
    assert not work.exists()
    # a dry run plans for GPUs it may not see (another machine's)
    proc = run_main(alt_sweep.main, *RUN, "--work", work, "--gpus", ids, "--dry-run", check=False)
    assert proc.returncode == 0 and not work.exists(), proc.stderr


@pytest.mark.parametrize(
    "own, slot, given",
    [
        (None, "1", "1"),  # no CUDA_VISIBLE_DEVICES: the ids are the machine's
        ("2,3", "1", "3"),  # a scheduler's 2,3: the sweep's GPU 1 is the machine's 3
        ("2,3", "0,1", "2,3"),  # --gpus-per-run 2
        ("GPU-aa,GPU-bb", "1", "GPU-bb"),  # UUIDs
    ],
)
def test_each_run_is_given_a_gpu_of_the_sweeps(own, slot, given, tmp_path, monkeypatch):
    """What a run's process gets as CUDA_VISIBLE_DEVICES (execute.run_child's environment)."""
    if own is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", own)
    seen = {}
    monkeypatch.setattr(execute, "call", lambda command, env, log, what: seen.update(env))
    execute.run_child(Device(), ["run-one", "RUN"], slot, tmp_path / "log", "run")
    assert seen["CUDA_VISIBLE_DEVICES"] == given
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == own  # the sweep's own stays
