"""The example recipe runs end to end (tiny model, tiny data) and does not redo finished steps; its
average, decoding temperature and scores are checked against the files it wrote."""

import json
import os
import subprocess

import pytest
import torch
from conftest import BIN_DIR, REPO, TINY_DIMS
from sacrebleu.metrics import BLEU, CHRF

pytestmark = pytest.mark.e2e
SCRIPT = os.path.join(REPO, "examples", "softmax_tempering", "train_and_decode.sh")
TINY = [
    *TINY_DIMS,
    "--warmup-updates",
    "10",
    "--num-workers",
    "0",
    "--eval-bleu-args",
    '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}',
]


def test_train_and_decode_recipe(toy_data, tmp_path):
    env = dict(
        os.environ,
        PATH=BIN_DIR + os.pathsep + os.environ["PATH"],
        MAX_EPOCH="2",
        AVERAGE="2",
        LR="3e-3",
        MAX_TOKENS="2000",
        BEAM="2",
        DEVICE_ARGS="--cpu",
        GENERATE_ARGS="--max-len-a 1.2 --max-len-b 10",
        OMP_NUM_THREADS="1",
    )
    save = tmp_path / "ckpt"
    command = ["bash", SCRIPT, str(toy_data["bin"]), str(save), "3"] + TINY
    # a start that fails before any checkpoint does not bind the directory to its options
    failed = subprocess.run([*command, "--no-such-option"], env=env, text=True, capture_output=True)
    assert failed.returncode != 0 and "unrecognized arguments: --no-such-option" in failed.stdout
    first = subprocess.run(command, env=env, text=True, capture_output=True)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "validation generator: decoding at training temperature T=3" in first.stdout
    assert "'softmax_temperature': 3.0" in (tmp_path / "ckpt.train.log").read_text()

    # the average is the mean of the last AVERAGE=2 epoch checkpoints
    import fairseq_ctemp  # noqa: F401  (torch's safe loading of fairseq checkpoints)

    average = torch.load(save / "checkpoint_avg.pt")["model"]
    inputs = [torch.load(save / f"checkpoint{epoch}.pt")["model"] for epoch in (1, 2)]
    assert sorted(average) == sorted(inputs[0])
    for key, value in average.items():
        torch.testing.assert_close(value.double(), (inputs[0][key].double() + inputs[1][key].double()) / 2)
    assert not torch.equal(inputs[0]["encoder.layers.0.fc1.weight"], inputs[1]["encoder.layers.0.fc1.weight"])

    # greedy and beam 2 of the average, at T=3, on every test sentence, scored on the saved files
    result = json.loads((save / "greedy_vs_beam.json").read_text())
    assert result["checkpoint"] == str(save / "checkpoint_avg.pt") and result["n_sentences"] == 80
    refs = (save / "eval" / "ref").read_text().splitlines()
    assert refs == (toy_data["raw"] / "test.tgt").read_text().splitlines()  # the target side, in order
    for name, beam in (("greedy", 1), ("beam", 2)):
        system = result["systems"][name]
        hyps = (save / "eval" / f"{name}.hyp").read_text().splitlines()
        assert len(hyps) == 80 and system["beam"] == beam and system["decoding_temperature"] == 3.0
        assert system["bleu"] == pytest.approx(BLEU(tokenize="none").corpus_score(hyps, [refs]).score)
        assert system["chrf"] == pytest.approx(CHRF().corpus_score(hyps, [refs]).score)

    finished = {p: p.stat().st_mtime_ns for p in (save / "checkpoint_avg.pt", save / "greedy_vs_beam.json")}
    second = subprocess.run(command, env=env, text=True, capture_output=True)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "early stopping resumed" in second.stdout  # ctemp-train: the patience count carried
    assert "averaging" not in second.stderr  # finished steps are skipped ...
    assert {p: p.stat().st_mtime_ns for p in finished} == finished  # ... and nothing is rewritten

    # another average or decoding: refused before any work, not given the finished ones as its answer
    for name, value in (("AVERAGE", "1"), ("BEAM", "3"), ("GENERATE_ARGS", "--max-len-b 5")):
        asked = {"AVERAGE": "2", "BEAM": "2", "GENERATE_ARGS": "--max-len-a 1.2 --max-len-b 10", name: value}
        other = subprocess.run(command, env={**env, name: value}, text=True, capture_output=True)
        assert other.returncode == 2 and other.stderr.strip() == (
            f"train_and_decode.sh: error: SAVE_DIR {save} was averaged and scored with 'AVERAGE=2 BEAM=2 "
            "GENERATE_ARGS=--max-len-a 1.2 --max-len-b 10', not '"
            + " ".join(f"{k}={v}" for k, v in asked.items())
            + "': move checkpoint_avg.pt, greedy_vs_beam.json and eval/ away to do them again"
        ), other.stderr
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    # trained on (a larger MAX_EPOCH): the average and scores of the older checkpoints are not its answer
    longer = subprocess.run(command, env={**env, "MAX_EPOCH": "3"}, text=True, capture_output=True)
    assert longer.returncode == 2 and longer.stderr.strip().splitlines()[-1] == (
        f"train_and_decode.sh: error: SAVE_DIR {save} was trained on after checkpoint_avg.pt was made: move "
        "checkpoint_avg.pt, greedy_vs_beam.json and eval/ away to average and score the new checkpoints"
    ), longer.stderr[-3000:]
    assert (save / "checkpoint3.pt").exists() and {p: p.stat().st_mtime_ns for p in finished} == finished

    # the same SAVE_DIR at another T: refused, not trained on (its checkpoints would mix two runs)
    last = (save / "checkpoint_last.pt").stat().st_mtime_ns
    other = subprocess.run([*command[:4], "2", *command[5:]], env=env, text=True, capture_output=True)
    assert other.returncode == 2 and other.stderr.strip().splitlines() == [
        f"train_and_decode.sh: error: SAVE_DIR {save} was started with 'T=3 ARCH=transformer "
        f"LABEL_SMOOTHING=0.1 SEM_WEIGHT=0 LR=3e-3 MAX_TOKENS=2000 extra: {' '.join(TINY)}', not 'T=2 "
        f"ARCH=transformer LABEL_SMOOTHING=0.1 SEM_WEIGHT=0 LR=3e-3 MAX_TOKENS=2000 extra: {' '.join(TINY)}': "
        "give another SAVE_DIR"
    ]
    # and so is another learning rate (the schedule of one run)
    other = subprocess.run(command, env={**env, "LR": "1e-3"}, text=True, capture_output=True)
    assert (
        other.returncode == 2
        and "not 'T=3 ARCH=transformer LABEL_SMOOTHING=0.1 SEM_WEIGHT=0 LR=1e-3 " in other.stderr
    )
    assert (save / "checkpoint_last.pt").stat().st_mtime_ns == last
