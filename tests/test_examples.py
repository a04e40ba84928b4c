"""The example recipe runs end to end (tiny model, tiny data) and does not redo finished steps."""
import os
import subprocess

import pytest

from conftest import BIN_DIR, REPO

pytestmark = pytest.mark.e2e
SCRIPT = os.path.join(REPO, "examples", "softmax_tempering", "train_and_decode.sh")
TINY = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
        "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim",
        "64", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--warmup-updates", "10", "--num-workers", "0",
        "--eval-bleu-args", '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}']


def test_train_and_decode_recipe(toy_data, tmp_path):
    env = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], MAX_EPOCH="2",
               AVERAGE="2", LR="3e-3", MAX_TOKENS="2000", BEAM="2",
               DEVICE_ARGS="--cpu", GENERATE_ARGS="--max-len-a 1.2 --max-len-b 10",
               OMP_NUM_THREADS="2")
    save = tmp_path / "ckpt"
    command = ["bash", SCRIPT, str(toy_data["bin"]), str(save), "3"] + TINY
    first = subprocess.run(command, env=env, text=True, capture_output=True)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert (save / "checkpoint_avg.pt").exists() and (save / "greedy_vs_beam.json").exists()
    assert "validation generator: decoding at training temperature T=3" in first.stdout
    second = subprocess.run(command, env=env, text=True, capture_output=True)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "averaging" not in second.stderr  # finished steps are skipped
