"""Scale and packaging: 2-process CPU distributed training (gloo) reduces tempered_ce's metrics like
one process with --update-freq 2; the installed package works as --user-dir."""
import os
import socket
import subprocess

import pytest

from conftest import (PLUGIN_DIR, REPO, TINY_TRANSFORMER, TRAIN_DEFAULTS, cli, json_log_records,
                      run_cli)

pytestmark = pytest.mark.e2e
TEMPERED = ["--criterion", "tempered_ce", "--softmax-temperature", "2", "--label-smoothing", "0.1",
            "--sem-weight", "0.1", "--dropout", "0", "--max-epoch", "2", "--no-save"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_gloo_training_matches_one_process_with_update_freq_2(toy_data, tmp_path):
    args = [cli("fairseq-train"), str(toy_data["bin"]), "--user-dir", PLUGIN_DIR,
            *TINY_TRANSFORMER, *TRAIN_DEFAULTS, *TEMPERED]
    # fairseq on CPU: explicit ranks, gloo; the default --ddp-backend pytorch_ddp works on CPU with
    # the plugin's compat fix (see README, "Distributed training").
    dist = ["--distributed-world-size", "2", "--distributed-init-method",
            f"tcp://127.0.0.1:{free_port()}", "--distributed-no-spawn", "--distributed-backend",
            "gloo"]
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    ranks = [subprocess.Popen(args + dist + ["--distributed-rank", str(r)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in (0, 1)]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    assert all(p.returncode == 0 for p in ranks), outputs[0][-3000:] + outputs[1][-3000:]
    assert "training on 2 devices" in outputs[0]
    single = run_cli("fairseq-train", *args[1:], "--update-freq", "2").stdout

    two, one = json_log_records(outputs[0], "train_inner"), json_log_records(single, "train_inner")
    assert len(two) == len(one) > 3
    for a, b in zip(two, one):
        assert a["wpb"] == b["wpb"]  # the same batches make up each update
        for key in ("loss", "nll_loss", "nll_loss_untempered", "entropy", "entropy_untempered"):
            assert abs(float(a[key]) - float(b[key])) <= 2e-3 * abs(float(b[key])) + 2e-3, (key, a, b)


def test_installed_package_works_as_user_dir(toy_data, tmp_path):
    site = tmp_path / "site"
    run_cli(cli("python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
            "--target", site, REPO)
    installed = site / "fairseq_ctemp"
    probe = run_cli(cli("python"), "-c",
                    "import argparse, fairseq.utils as u, sys; "
                    f"u.import_user_module(argparse.Namespace(user_dir={str(installed)!r})); "
                    "import fairseq_ctemp; print('PLUGIN', fairseq_ctemp.__file__)", cwd=tmp_path)
    assert f"PLUGIN {installed}/__init__.py" in probe.stdout
    # A regular install puts fairseq_ctemp next to fairseq, where fairseq also looks for a bare
    # --user-dir name: reproduce that layout with a fairseq package dir in the same directory
    # (a real directory of links, so that fairseq/.. is that directory).
    import fairseq

    real_fairseq = os.path.dirname(fairseq.__file__)
    os.mkdir(site / "fairseq")
    for entry in os.listdir(real_fairseq):
        os.symlink(os.path.join(real_fairseq, entry), site / "fairseq" / entry)
    out = run_cli("fairseq-train", toy_data["bin"], "--user-dir", "fairseq_ctemp", *TINY_TRANSFORMER,
                  *TRAIN_DEFAULTS, "--criterion", "tempered_ce", "--softmax-temperature", "2",
                  "--max-epoch", "1", "--save-dir", tmp_path / "ckpt", cwd=tmp_path,
                  env={"PYTHONPATH": str(site)}).stdout
    assert "TemperedCrossEntropyCriterion" in out
    assert f"'user_dir': 'fairseq_ctemp'" in out
