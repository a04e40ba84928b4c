"""The paper-scale path at tiny size on the CPU: a test carved from train (ctemp-alt-data --carve-test)
and examples/alt/paper_scale.sh, which runs data -> sweep -> results on one machine and packs the
results alone; a run stopped by fairseq's --stop-time-hours averages its last validations."""

import csv
import json
import os
import subprocess
import sys
import tarfile

import pytest
from conftest import BIN_DIR, REPO, run_main
from test_alt_recipes import SWEEP_OPTIONS, TINY

from fairseq_ctemp.alt.data import toy_language_pair
from fairseq_ctemp.alt.sources import normalise
from fairseq_ctemp.cli import alt_data

pytestmark = pytest.mark.e2e
ENV = dict(
    os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1", PYTHON=sys.executable
)
for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
    ENV.pop(key, None)
TRAIN, DEV = 60, 12


def local_copy(dest, with_test=False):
    """An already split en/ja copy (CRLF, no ids), as a local ALT copy; returns its train pairs."""
    toy = toy_language_pair(seed=4)
    os.makedirs(dest)
    kept = {}
    for split, count in (("train", TRAIN), ("dev", DEV)) + ((("test", DEV),) if with_test else ()):
        kept[split] = [toy.sentence_pair(3, 8) for _ in range(count)]
        for lang, index in (("en", 0), ("ja", 1)):
            with open(os.path.join(dest, f"{split}.{lang}"), "w", encoding="utf-8", newline="") as f:
                f.writelines(p[index] + "\r\n" for p in kept[split])
    return kept


def prepare(*args, check=True):
    return run_main(alt_data.main, "prepare", *args, check=check, env=ENV)


def test_carve_test_takes_the_last_training_pairs(tmp_path):
    pairs = local_copy(str(tmp_path / "alt"))
    work = tmp_path / "work"
    prepare("en-ja", "--local", tmp_path / "alt", "--work", work, "--vocab", "20", "--carve-test", "10")
    data = work / "data" / "en-ja.spm20.test10"
    info = json.loads((data / "prepare.json").read_text())
    assert info["sizes"] == {"train": TRAIN - 10, "dev": DEV, "test": 10}
    assert info["test_source"].startswith("carved: the last 10 pairs of train")
    for lang, index in (("en", 0), ("ja", 1)):
        test = (data / "raw" / f"test.{lang}").read_text(encoding="utf-8").splitlines()
        train = (data / "raw" / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        assert test == [normalise(p[index]) for p in pairs["train"][-10:]]
        assert train == [normalise(p[index]) for p in pairs["train"][:-10]]  # removed from train
    assert sorted(os.listdir(data / "bin")).count("test.en-ja.en.bin") == 1
    # without --carve-test the same copy has no test split, in its own directory
    prepare("en-ja", "--local", tmp_path / "alt", "--work", work, "--vocab", "20")
    assert not json.loads((work / "data" / "en-ja.spm20" / "prepare.json").read_text())["has_test"]


def test_sentences_also_in_train_are_counted(tmp_path):
    """prepare and check count the dev and test pairs whose en side, ja side or both are training
    sentences (after the carve: the test's pairs against what stays in train), planted here."""
    train = [(f"source number {i} .", f"target {i} here") for i in range(TRAIN)]
    dev = [(f"dev source {i}", f"dev target {i}") for i in range(DEV)]
    dev[0] = train[5]  # the whole pair
    dev[1] = (train[7][0], "a new target")  # the en side alone
    dev[2] = ("a new source", "  target   9 here ")  # the ja side alone, spaced otherwise
    train[-1] = train[0]  # carved into test, still in train
    train[-2] = (train[-2][0], train[1][1])  # carved; its ja side alone in train
    alt = tmp_path / "alt"
    alt.mkdir()
    for split, pairs in (("train", train), ("dev", dev)):
        for lang, index in (("en", 0), ("ja", 1)):
            (alt / f"{split}.{lang}").write_text("".join(p[index] + "\n" for p in pairs), encoding="utf-8")
    work = tmp_path / "work"
    proc = prepare(
        "en-ja", "--local", alt, "--work", work, "--subwords", "bpe", "--vocab", "20", "--carve-test", "10"
    )
    info = json.loads((work / "data" / "en-ja.bpe20.test10" / "prepare.json").read_text())
    assert info["in_train"] == {
        "dev": {"en": 2, "ja": 2, "pair": 1},
        "test": {"en": 1, "ja": 2, "pair": 1},
    }
    line = "also in train (the same sentence): dev: 2 en, 2 ja, 1 pair of 12; test: 1 en, 2 ja, 1 pair of 10"
    assert line in proc.stdout + proc.stderr
    # check: the corpus as it comes (no carve: train keeps the ten pairs, test is none)
    checked = run_main(alt_data.main, "check", "en-ja", "--local", alt, env=ENV)
    assert "also in train (the same sentence): dev: 2 en, 2 ja, 1 pair of 12" in checked.stdout


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--carve-test", str(TRAIN)], f"--carve-test {TRAIN}: train has only {TRAIN} pairs; carve fewer"),
        (["--carve-test", "0"], "--carve-test must be >= 1, got 0"),
    ],
)
def test_carve_test_refusals(tmp_path, extra, message):
    local_copy(str(tmp_path / "alt"))
    proc = prepare("en-ja", "--local", tmp_path / "alt", "--work", tmp_path / "w", *extra, check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "w" / "data").exists()  # refused before anything is written


def test_carve_test_refused_where_the_copy_has_a_test_split(tmp_path):
    local_copy(str(tmp_path / "alt"), with_test=True)
    proc = prepare(
        "en-ja", "--local", tmp_path / "alt", "--work", tmp_path / "w", "--carve-test", "5", check=False
    )
    assert proc.returncode == 2 and "has a test split of its own" in proc.stderr, proc.stderr
    assert not (tmp_path / "w" / "data").exists()


def paper_scale(*args):
    return subprocess.run(
        ["bash", os.path.join(REPO, "examples", "alt", "paper_scale.sh"), *map(str, args)],
        env=ENV,
        text=True,
        capture_output=True,
    )


def test_paper_scale_script_end_to_end_on_cpu(tmp_path):
    """The whole pack at tiny size: data with a carved test, two runs stopped by wall clock (patience
    never ends them; finalize, tested with the sweep, is left out), tables, one archive with the
    results and no checkpoint; then --deadline, which packs what has finished when it stops."""
    local_copy(str(tmp_path / "alt"))
    work, out = tmp_path / "work", tmp_path / "out"
    common = ["en-ja", "--local", tmp_path / "alt", "--work", work, "--results", out]
    options = [
        *("--carve-test", "10", "--vocab", "20", "--preset", "mini", "--cpu", "--jobs", "2"),
        *("--temperatures", "1,2", *SWEEP_OPTIONS, "--no-finalize"),
        # after SWEEP_OPTIONS, these win (argparse); --average 1: the stop's own validation, which
        # every run has however few the machine's speed allows before the wall-clock stop, and
        # --log-interval 1: a training speed logged from the first update on, however few there are
        *("--patience", "1000", "--average", "1", "--log-interval", "1"),
        *("--", *TINY),
        *("--stop-time-hours", "0.0015"),
    ]
    proc = paper_scale(*common, *options)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    archive = out / "alt-results.tar.gz"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert not [n for n in names if n.endswith((".pt", ".bin", ".idx", ".model"))], names
    exp = "sweep/en-ja.mini.spm20.test10.seed2"
    for name in ("T1-ls0.1-sem0/run.json", "T2-ls0.1-sem0/train.log", "T2-ls0.1-sem0/eval/test/result.json"):
        assert f"{exp}/{name}" in names
    assert "results/runs.csv" in names
    run = json.loads((work / exp / "T1-ls0.1-sem0" / "run.json").read_text())
    assert run["training"]["stop_reason"] == "stop time"
    # the last of the averaged checkpoints is the stop's own validation (checkpoint_last.pt)
    last = run["training"]["valid_bleu"][-1][0]
    if last % 4:  # a stop between interval saves: fairseq saved it as checkpoint_last.pt only
        assert run["averaged"][-1] == "checkpoint_last.pt", run["averaged"]
    else:
        assert run["averaged"][-1].endswith(f"_{last}.pt"), run["averaged"]
    with open(work / "results" / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["test is"] for r in rows} == {"carved test"} and {r["stopped by"] for r in rows} == {
        "stop time"
    }
    # (a run the wall clock stops after its first update has fairseq's first-interval speed, 0)
    assert all(float(r["train words/s"]) >= 0 and float(r["last training session s"]) > 0 for r in rows)
    # the archive is never overwritten: the same command is refused before any work
    again = paper_scale(*common, "--cpu")
    assert again.returncode == 2 and "alt-results.tar.gz exists; give another --results" in again.stderr
    # --deadline: stopped while it trains a third T (wall-clock stopped after 5.4 s, so still at
    # work when the 2 s are up, however fast the machine), it packs what has finished so far
    partial = tmp_path / "partial"
    at = options.index("--temperatures") + 1
    more = [*options[:at], "1,2,3", *options[at + 1 :]]
    stopped = paper_scale(*common[:-1], partial, "--deadline", "2", *more)
    assert stopped.returncode == 3 and "--deadline 2 s reached" in stopped.stderr, stopped.stderr[-3000:]
    assert not (partial / "alt-results.tar.gz").exists()
    with tarfile.open(partial / "alt-results-partial.tar.gz") as tar:
        assert f"{exp}/T1-ls0.1-sem0/run.json" in tar.getnames()
        assert not [n for n in tar.getnames() if n.endswith(".pt")]
    assert (
        paper_scale("en-ja", "--local", tmp_path / "alt")
        .stderr.strip()
        .endswith("--results DIR is required (where the archive of the results goes)")
    )
