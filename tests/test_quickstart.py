"""The quickstart (`make demo`: scripts/quickstart.py) at its smallest size: corpus, two trainings,
averaging, greedy and beam 5 at each training temperature, and the table it prints."""

import json
import os
import runpy
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.e2e
QUICKSTART = os.path.join(REPO, "scripts", "quickstart.py")
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def test_quickstart_table_is_its_results(tmp_path):
    work = tmp_path / "quickstart"
    for left in ("raw.part", "data-bin.part"):  # what an interrupted run leaves: redone, not reused
        (work / left).mkdir(parents=True)
        (work / left / "train.src").write_text("half a corpus\n")
    proc = subprocess.run(
        [sys.executable, QUICKSTART, "--workdir", str(work), "--epochs", "1", "--train-pairs", "100"],
        env=ENV,
        text=True,
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "100 train / 10 valid / 10 test sentence pairs" in proc.stdout
    assert sorted(os.listdir(work)) == ["T1", "T4", "data-bin", "quickstart.json", "raw", "results.json"]
    assert len((work / "raw" / "train.src").read_text().splitlines()) == 100
    rows = [
        line.strip("|").split("|")
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert [row[0].strip() for row in rows] == ["1", "4"]
    for row, temperature in zip(rows, (1, 4)):
        result = json.loads((work / f"T{temperature}" / "greedy_vs_beam.json").read_text())
        greedy, beam = result["systems"]["greedy"], result["systems"]["beam"]
        assert result["checkpoint"] == str(work / f"T{temperature}" / "checkpoint_avg1.pt")
        assert result["n_sentences"] == 10 and (greedy["beam"], beam["beam"]) == (1, 5)
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
    assert "No kept result of this command for " in proc.stdout  # --epochs 1: no kept file
    summary = json.loads((work / "results.json").read_text())  # the table as a result file
    assert summary["cpu"] and summary["command"].endswith("--epochs 1 --train-pairs 100")
    for row, kept in zip(rows, summary["rows"]):
        assert (
            f"{kept['greedy']['bleu']:.2f}" == row[1].strip()
            and f"{kept['beam5']['chrf']:.2f}" == row[4].strip()
        )


def test_quickstart_refuses_zero_epochs(tmp_path):
    proc = subprocess.run(
        [sys.executable, QUICKSTART, "--workdir", str(tmp_path / "q"), "--epochs", "0"],
        env=ENV,
        text=True,
        capture_output=True,
    )
    assert proc.returncode == 2 and "--epochs must be >= 1, got 0" in proc.stderr
    assert not (tmp_path / "q").exists()


def test_a_table_is_compared_with_the_kept_one_of_its_cpu_model():
    """scripts/quickstart.py says whether its table is the one kept for the same command, CPU
    model, threads and torch (examples/quickstart/results), each kept file against itself."""
    quickstart = runpy.run_path(QUICKSTART, run_name="quickstart")
    kept_dir = os.path.join(REPO, "examples", "quickstart", "results")
    kept = [name for name in os.listdir(kept_dir) if not name.startswith("calibration")]
    assert len(kept) >= 2
    for name in kept:
        with open(os.path.join(kept_dir, name), encoding="utf-8") as f:
            summary = json.load(f)
        expected = f"as kept for this CPU model in examples/quickstart/results/{name}"
        assert quickstart["against_kept"](summary).endswith(expected)
        summary["rows"][1]["beam5"]["chrf"] += 0.01
        assert "differ from those kept" in quickstart["against_kept"](summary)
        summary["torch"] = "2.0.0"
        assert quickstart["against_kept"](summary).startswith("No kept result")
