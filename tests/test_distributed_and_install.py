"""Scale and packaging: 2-process CPU distributed training (gloo) gives the same updates as one
process with --update-freq 2 (losses, gradient norms, batch sizes); its checkpoints load with torch's
safe loading and resume on 2 processes; tempered_ce's metrics reach --tensorboard-logdir; the
installed package works as --user-dir (bare name and `ctemp-user-dir`)."""

import os
import shutil
import socket
import subprocess

import pytest
import torch
from conftest import (
    PLUGIN_DIR,
    REPO,
    TINY_TRANSFORMER,
    TRAIN_DEFAULTS,
    cli,
    fork_server_env,
    json_log_records,
    pythonpath_value,
    run_cli,
)

pytestmark = pytest.mark.e2e
TEMPERED = [
    "--criterion",
    "tempered_ce",
    "--softmax-temperature",
    "2",
    "--label-smoothing",
    "0.1",
    "--sem-weight",
    "0.1",
    "--dropout",
    "0",
    "--max-epoch",
    "2",
]
# per update: what the criterion logs, the gradient norm (a wrong gradient scale across ranks moves
# it, while Adam leaves the losses almost unchanged) and the batch that made the update
COMPARED = ("loss", "nll_loss", "nll_loss_untempered", "entropy", "entropy_untempered", "gnorm")
BATCH = ("wpb", "bsz")
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # each rank runs on one thread: so does the single process


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_on_two_ranks(args, extra_dist=(), env_extra=None):
    """fairseq on CPU: one process per rank, explicit ranks, gloo. Returns rank 0's output."""
    dist = [
        "--distributed-world-size",
        "2",
        "--distributed-init-method",
        f"tcp://127.0.0.1:{free_port()}",
        "--distributed-no-spawn",
        "--distributed-backend",
        "gloo",
        *extra_dist,
    ]
    env = {**fork_server_env(), **ONE_THREAD, "PATH": "/usr/bin:/bin", **(env_extra or {})}
    ranks = [
        subprocess.Popen(
            args + dist + ["--distributed-rank", str(r)],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in (0, 1)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    assert all(p.returncode == 0 for p in ranks), outputs[0][-3000:] + outputs[1][-3000:]
    assert "training on 2 devices" in outputs[0]
    return outputs[0]


def last_digit(key):
    """One unit of the last digit fairseq logs `key` with (round=4 for tau statistics, else 3)."""
    return 1e-4 if key.startswith("tau_") else 1e-3


def assert_same_updates(two, one, keys, exact=False):
    """Per update: the same batch sizes, and the same logged values, or (exact=False) values that
    differ by at most one unit of the last printed digit: the runs sum in a different order, so a
    value a hair from a rounding boundary may round the other way."""
    assert len(two) == len(one) >= 3
    for a, b in zip(two, one):
        assert a["num_updates"] == b["num_updates"]
        for key in BATCH:
            assert a[key] == b[key], (key, a, b)  # the same batches make up each update
        for key in keys:
            allowed = 0 if exact else last_digit(key)
            assert abs(float(a[key]) - float(b[key])) <= allowed, (key, a, b)


def tempered_args(data, *extra):
    return [
        cli("fairseq-train"),
        str(data),
        "--user-dir",
        PLUGIN_DIR,
        *TINY_TRANSFORMER,
        *TRAIN_DEFAULTS,
        *TEMPERED,
        *extra,
    ]


@pytest.fixture(scope="module")
def single_process(toy_data, tmp_path_factory):
    """One process, --update-freq 2, tensorboard logging on: (output, tensorboard dir)."""
    root = tmp_path_factory.mktemp("single")
    args = tempered_args(
        toy_data["bin"], "--no-save", "--update-freq", "2", "--tensorboard-logdir", root / "tb"
    )
    args += ["--save-dir", root / "no-save"]  # made even with --no-save: not in the working directory
    return run_cli(*args, env=ONE_THREAD).stdout, root / "tb"


def test_two_process_gloo_training_matches_one_process_and_its_checkpoints_resume(
    toy_data, tmp_path, single_process
):
    # the default --ddp-backend pytorch_ddp works on CPU with the plugin's compat fix (README,
    # "Distributed training"); epoch checkpoints saved
    whole = train_on_two_ranks(tempered_args(toy_data["bin"], "--save-dir", tmp_path / "dist"))
    two, one = json_log_records(whole, "train_inner"), json_log_records(single_process[0], "train_inner")
    assert_same_updates(two, one, COMPARED)

    # the checkpoints of a distributed run load with torch's safe loading (weights_only) ...
    import fairseq_ctemp  # noqa: F401  (registers the globals fairseq checkpoints contain)

    state = torch.load(tmp_path / "dist" / "checkpoint1.pt", weights_only=True)
    assert state["optimizer_history"][-1]["num_updates"] == int(
        json_log_records(whole, "train")[0]["train_num_updates"]
    )
    # ... and resume on 2 processes (rank 0 loads, then sends the state to rank 1 through
    # torch.load): epoch 2 repeats the uninterrupted run's
    (tmp_path / "resumed").mkdir()
    shutil.copy(tmp_path / "dist" / "checkpoint1.pt", tmp_path / "resumed" / "checkpoint_last.pt")
    resumed = train_on_two_ranks(  # with the plugin's exact resume (opt-in): the same batches
        tempered_args(toy_data["bin"], "--save-dir", tmp_path / "resumed"),
        env_extra={"CTEMP_EXACT_RESUME": "1"},
    )
    assert "Loaded checkpoint" in resumed
    second = [r for r in two if int(r["epoch"]) == 2]
    assert_same_updates(json_log_records(resumed, "train_inner"), second, COMPARED, exact=True)


def test_tempered_ce_metrics_reach_tensorboard(single_process):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    output, logdir = single_process
    for kind, prefix in (("train_inner", ""), ("valid", "valid_")):
        events = EventAccumulator(str(logdir / kind))
        events.Reload()
        for record in json_log_records(output, kind):
            step = int(record[prefix + "num_updates"])
            for key in ("loss", "nll_loss", "nll_loss_untempered", "entropy", "entropy_untempered"):
                logged = {e.step: e.value for e in events.Scalars(key)}  # tensorboard: unrounded
                assert abs(logged[step] - float(record[prefix + key])) <= 5e-4 * abs(logged[step]) + 5e-4, (
                    kind,
                    key,
                )


def test_installed_package_works_as_user_dir(toy_data, tmp_path):
    site = tmp_path / "site"
    # built from a copy of what the package is made of: a build in the checkout would leave a
    # build/ there, whose stale build/lib a later install could ship
    source = tmp_path / "source"
    shutil.copytree(PLUGIN_DIR, source / "fairseq_ctemp", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "ctemp_user_dir.py"):
        shutil.copy(os.path.join(REPO, name), source)
    run_cli(
        cli("python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        site,
        source,
    )
    installed = site / "fairseq_ctemp"
    # the console script prints the installed package directory, and fairseq-train takes it
    user_dir = (
        run_cli(site / "bin" / "ctemp-user-dir", cwd=tmp_path, env={"PYTHONPATH": pythonpath_value(site)})
        .stdout.strip()
        .splitlines()[-1]
    )
    assert user_dir == str(installed)
    # without importing the plugin, which imports fairseq (seconds, in every command line using it)
    imported = run_cli(
        cli("python"),
        "-c",
        "import runpy, sys; sys.argv = ['ctemp-user-dir']; runpy.run_module('ctemp_user_dir', run_name='__main__'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fairseq', 'fairseq_ctemp')))",
        cwd=tmp_path,
        env={"PYTHONPATH": pythonpath_value(site)},
    ).stdout.splitlines()
    assert imported == [str(installed), "[]"]
    # and where the package is not on the path, one line saying so
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(site / "ctemp_user_dir.py", alone)
    missing = run_cli(cli("python"), "-S", alone / "ctemp_user_dir.py", cwd=alone, check=False)
    assert missing.returncode == 1
    assert missing.stdout.strip().splitlines() == [
        f"ctemp-user-dir: error: no fairseq_ctemp package on the path of {missing.args[0]}"
    ]
    # with the fairseq-hydra-train configs (docs/hydra.md)
    shipped = sorted(f for f in os.listdir(os.path.join(PLUGIN_DIR, "config")) if f.endswith(".yaml"))
    assert shipped and sorted(os.listdir(installed / "config")) == shipped
    # and the CPU allocator settings the ALT pipeline gives its runs (read at its import)
    assert (installed / "cpu_allocator.env").read_bytes() == open(
        os.path.join(PLUGIN_DIR, "cpu_allocator.env"), "rb"
    ).read()
    # every subpackage of the checkout (the ALT pipeline's included), and its commands run
    for package in (
        "alt",
        "calibration",
        "cli",
        "criterions",
        "ct_analysis",
        "lm_results",
        "models",
        "modules",
    ):
        ours = sorted(f for f in os.listdir(os.path.join(PLUGIN_DIR, package)) if f.endswith(".py"))
        assert sorted(f for f in os.listdir(installed / package) if f.endswith(".py")) == ours, package
    usage = run_cli(
        site / "bin" / "ctemp-alt-sweep",
        "run",
        "--help",
        cwd=tmp_path,
        env={"PYTHONPATH": pythonpath_value(site)},
    )
    assert "usage: ctemp-alt-sweep run" in usage.stdout
    out = run_cli(
        "fairseq-train",
        toy_data["bin"],
        "--user-dir",
        user_dir,
        *TINY_TRANSFORMER,
        *TRAIN_DEFAULTS,
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        "2",
        "--max-update",
        "1",
        "--no-save",
        cwd=tmp_path,
        env={"PYTHONPATH": pythonpath_value(site)},
    ).stdout
    assert "TemperedCrossEntropyCriterion" in out and f"'user_dir': '{installed}'" in out
    # A regular install puts fairseq_ctemp next to fairseq, where fairseq also looks for a bare
    # --user-dir name: reproduce that layout with a fairseq package dir in the same directory
    # (a real directory of links, so that fairseq/.. is that directory).
    import fairseq

    real_fairseq = os.path.dirname(fairseq.__file__)
    os.mkdir(site / "fairseq")
    for entry in os.listdir(real_fairseq):
        os.symlink(os.path.join(real_fairseq, entry), site / "fairseq" / entry)
    out = run_cli(
        "fairseq-train",
        toy_data["bin"],
        "--user-dir",
        "fairseq_ctemp",
        *TINY_TRANSFORMER,
        *TRAIN_DEFAULTS,
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        "2",
        "--max-update",
        "1",
        "--no-save",
        cwd=tmp_path,
        env={"PYTHONPATH": pythonpath_value(site)},
    ).stdout
    assert "TemperedCrossEntropyCriterion" in out
    assert "'user_dir': 'fairseq_ctemp'" in out
