"""The quickstart (`make demo`: scripts/quickstart.py) at its smallest size: corpus, two trainings,
averaging, greedy and beam 5 at each training temperature, and the table it prints."""

import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import REPO

pytestmark = pytest.mark.e2e
QUICKSTART = os.path.join(REPO, "scripts", "quickstart.py")
ENV = dict(os.environ, OMP_NUM_THREADS="1")


ARGS = ["--epochs", "2", "--train-pairs", "200"]  # 2 updates an epoch: a resume can reorder them


def quickstart(work):
    proc = subprocess.run(
        [sys.executable, QUICKSTART, "--workdir", str(work), *ARGS], env=ENV, text=True, capture_output=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A quickstart run to its end, from a workdir where an interrupted run left its .part folders
    (redone, not reused): (workdir, its output)."""
    work = tmp_path_factory.mktemp("finished") / "quickstart"
    for left in ("raw.part", "data-bin.part"):
        (work / left).mkdir(parents=True)
        (work / left / "train.src").write_text("half a corpus\n")
    (work / "quickstart.json").write_text(json.dumps({"epochs": 2, "train_pairs": 200}))  # its first step
    return work, quickstart(work)


def test_quickstart_table_is_its_results(finished):
    work, proc = finished
    assert "200 train / 20 valid / 20 test sentence pairs" in proc.stdout
    assert sorted(os.listdir(work)) == ["T1", "T4", "data-bin", "quickstart.json", "raw", "results.json"]
    assert len((work / "raw" / "train.src").read_text().splitlines()) == 200
    rows = [
        line.strip("|").split("|")
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert [row[0].strip() for row in rows] == ["1", "4"]
    for row, temperature in zip(rows, (1, 4)):
        result = json.loads((work / f"T{temperature}" / "greedy_vs_beam.json").read_text())
        greedy, beam = result["systems"]["greedy"], result["systems"]["beam"]
        assert result["checkpoint"] == str(work / f"T{temperature}" / "checkpoint_avg2.pt")
        assert result["n_sentences"] == 20 and (greedy["beam"], beam["beam"]) == (1, 5)
        assert greedy["decoding_temperature"] == beam["decoding_temperature"] == temperature
        shown = [
            f"{greedy['bleu']:.2f}",
            f"{beam['bleu']:.2f}",
            f"{greedy['chrf']:.2f}",
            f"{beam['chrf']:.2f}",
            f"{greedy['decode_seconds']:.2f}",
            f"{beam['decode_seconds']:.2f}",
            f"{result['speedup']:.2f}x",
        ]
        assert [cell.strip() for cell in row[1:]] == shown
    assert f"BLEU signature: {result['signatures']['bleu']}" in proc.stdout
    assert "No kept result of this command for " in proc.stdout  # --epochs 2: no kept file
    summary = json.loads((work / "results.json").read_text())  # the table as a result file
    assert summary["cpu"] and summary["command"].endswith(" ".join(ARGS))
    assert summary["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    for row, kept in zip(rows, summary["rows"]):
        assert (
            f"{kept['greedy']['bleu']:.2f}" == row[1].strip()
            and f"{kept['beam5']['chrf']:.2f}" == row[4].strip()
        )


def test_an_interrupted_quickstart_ends_at_the_uninterrupted_models(finished, tmp_path):
    """What a demo stopped after the first epoch of T=1 leaves (its corpus, checkpoint1.pt and
    checkpoint_last.pt), run again: the same second epoch, to the bit, and the same scores."""
    work, _ = finished
    resumed = tmp_path / "quickstart"
    resumed.mkdir()
    for done in ("raw", "data-bin", "T4"):  # T=4 finished: reused as it is
        shutil.copytree(work / done, resumed / done)
    shutil.copy(work / "quickstart.json", resumed)
    (resumed / "T1").mkdir()
    for name in ("checkpoint1.pt", "checkpoint_last.pt"):
        shutil.copy(work / "T1" / "checkpoint1.pt", resumed / "T1" / name)
    quickstart(resumed)
    log = (resumed / "T1" / "train.log").read_text()
    assert (
        "checkpoint_last.pt (epoch 2 @ 2 updates)" in log
        and "epoch 002 | valid on" in log
        and "epoch 001 | valid" not in log
    )
    uninterrupted = torch.load(work / "T1" / "checkpoint2.pt", weights_only=False)["model"]
    again = torch.load(resumed / "T1" / "checkpoint2.pt", weights_only=False)["model"]
    assert uninterrupted.keys() == again.keys()
    assert all(torch.equal(uninterrupted[k], again[k]) for k in uninterrupted)
    scores = [
        [[row[s][k] for s in ("greedy", "beam5") for k in ("bleu", "chrf")] for row in summary["rows"]]
        for summary in (json.loads((w / "results.json").read_text()) for w in (work, resumed))
    ]
    assert scores[0] == scores[1]


def test_quickstart_refuses_zero_epochs(tmp_path):
    proc = subprocess.run(
        [sys.executable, QUICKSTART, "--workdir", str(tmp_path / "q"), "--epochs", "0"],
        env=ENV,
        text=True,
        capture_output=True,
    )
    assert proc.returncode == 2 and "--epochs must be >= 1, got 0" in proc.stderr
    assert not (tmp_path / "q").exists()


def test_the_decoding_length_limit_is_above_every_reference(tmp_path):
    """The quickstart's --max-len-a / --max-len-b leave room for every reference of its corpus (the
    default size; counted here from the files, not from toy_data's rule), so they can cut only
    hypotheses longer than any reference, not a correct translation."""
    quickstart = runpy.run_path(QUICKSTART, run_name="quickstart")
    quickstart["corpus"](str(tmp_path), quickstart["TRAIN_PAIRS"])  # the corpus make demo writes
    for split in ("train", "valid", "test"):
        sources = (tmp_path / f"{split}.src").read_text().splitlines()
        targets = (tmp_path / f"{split}.tgt").read_text().splitlines()
        for source, target in zip(sources, targets, strict=True):
            # fairseq's SequenceGenerator: at most a x (source tokens + EOS) + b tokens before the
            # EOS (asked here with one to spare)
            limit = quickstart["MAX_LEN_A"] * (len(source.split()) + 1) + quickstart["MAX_LEN_B"]
            assert len(target.split()) < limit, (source, target)


def test_a_table_is_compared_with_the_kept_one_of_its_cpu_model():
    """scripts/quickstart.py says whether its table is the one kept for the same command, CPU
    model, instruction set, threads and torch (examples/quickstart/results), each kept file against
    itself; a file that does not record the instruction set is compared with none."""
    quickstart = runpy.run_path(QUICKSTART, run_name="quickstart")
    kept_dir = os.path.join(REPO, "examples", "quickstart", "results")
    kept = {}
    for name in os.listdir(kept_dir):
        if not name.startswith("calibration"):
            with open(os.path.join(kept_dir, name), encoding="utf-8") as f:
                kept[name] = json.load(f)
    recorded = [name for name, summary in kept.items() if "cpu_capability" in summary]
    assert len(recorded) >= 2 and len(kept) > len(recorded)
    for name, summary in kept.items():
        if name not in recorded:  # from before the instruction set was recorded: matches none
            summary["cpu_capability"] = "DEFAULT"  # (what no kept file records)
            assert quickstart["against_kept"](summary).startswith("No kept result")
            continue
        expected = f"as kept for this CPU model in examples/quickstart/results/{name}"
        assert quickstart["against_kept"](summary).endswith(expected)
        summary["rows"][1]["beam5"]["chrf"] += 0.01
        assert "differ from those kept" in quickstart["against_kept"](summary)
        for key, other in (("torch", "2.0.0"), ("cpu_capability", "DEFAULT")):
            assert quickstart["against_kept"]({**summary, key: other}).startswith("No kept result")


def test_a_full_disk_while_the_options_are_recorded_leaves_a_workdir_that_runs_again(tmp_path, monkeypatch):
    """quickstart.json is whole or absent: a write that fails midway (here a lone surrogate after
    the first characters, which UTF-8 cannot encode; a full disk alike) leaves no file behind, so
    the next run records the options anew instead of refusing a cut record."""
    quickstart = runpy.run_path(QUICKSTART, run_name="quickstart")
    args = argparse.Namespace(temperature=4.0, epochs=2, train_pairs=200, workdir=str(tmp_path / "q"))
    monkeypatch.setattr(json, "dumps", lambda obj, **options: '{"epochs": 2, "tra\ud800')
    with pytest.raises(UnicodeEncodeError):
        quickstart["check_options"](argparse.ArgumentParser(), args)
    assert os.listdir(tmp_path / "q") == []
    monkeypatch.undo()
    quickstart["check_options"](argparse.ArgumentParser(), args)  # parser.error would exit
    assert json.loads((tmp_path / "q" / "quickstart.json").read_text()) == {"epochs": 2, "train_pairs": 200}
