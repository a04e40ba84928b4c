"""The ALT recipes (examples/alt/, scripts/alt_*.py) end to end on a tiny corpus in the release's
layout: prepare -> sweep (killed mid-training, then resumed) -> finalize -> results; a local copy
without a test split; SLURM submission with a stand-in sbatch; dry runs; every bad corpus."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN_DIR, REPO

pytestmark = pytest.mark.e2e
ALT = os.path.join(REPO, "examples", "alt")
DATA = os.path.join(REPO, "scripts", "alt_data.py")
SWEEP = os.path.join(REPO, "scripts", "alt_sweep.py")
TINY = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16",
        "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
        "--encoder-attention-heads", "2", "--decoder-attention-heads", "2", "--max-tokens", "300",
        "--warmup-updates", "4"]
# the mini preset, shrunk: 2 temperatures, validation/checkpoint every 4 updates, tiny decoding grid
SWEEP_OPTIONS = ["--preset", "mini", "--temperatures", "1,2", "--vocab", "20", "--interval", "4",
                 "--average", "3", "--log-interval", "2", "--grid-beams", "1,2", "--grid-lenpens", "1",
                 "--speed-beams", "2", "--eval-beam", "2", "--decode-args", "--max-len-a 1.2 --max-len-b 5"]
ENV = dict(os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1",
           PYTHON=sys.executable)
for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
    ENV.pop(key, None)


def run(*command, check=True, env=None):
    proc = subprocess.run([str(c) for c in command], env=env or ENV, text=True, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{command[:3]} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def snapshot(path):
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
            for d, _, files in os.walk(path) for f in files}


def write_local_copy(dest, with_test=False):
    """An already split en/ja copy like ../shared/data/alt: no ids, CRLF, train/dev only."""
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    from alt_data import toy_language_pair

    toy = toy_language_pair(seed=3)
    os.makedirs(dest)
    for split, count in (("train", 60), ("dev", 12)) + ((("test", 12),) if with_test else ()):
        pairs = [toy.sentence_pair(3, 8) for _ in range(count)]
        for lang, index in (("en", 0), ("ja", 1)):
            with open(os.path.join(dest, f"{split}.{lang}"), "w", encoding="utf-8", newline="") as f:
                f.writelines(p[index] + "\r\n" for p in pairs)
    return dest


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("alt")
    run(sys.executable, DATA, "toy-release", root / "release")
    write_local_copy(str(root / "local"))
    return {"root": root, "release": root / "release", "local": root / "local"}


def test_toy_release_has_the_release_layout(corpora):
    release = corpora["release"]
    corpus = release / "ALT-Parallel-Corpus-20191206"
    assert sorted(os.listdir(corpus)) == ["data_en.txt", "data_ja.txt", "data_vi.txt"]
    first = (corpus / "data_en.txt").read_bytes().split(b"\n")[0]
    assert first.startswith(b"SNT.") and b"\t" in first and first.endswith(b"\r")
    assert (release / "URL-dev.txt").read_text().startswith("URL.")
    listed = {s: len((release / f"URL-{s}.txt").read_text().splitlines()) for s in ("train", "dev", "test")}
    assert listed == {"train": 15, "dev": 3, "test": 3}


def test_dry_run_creates_nothing(corpora, tmp_path):
    work = tmp_path / "work"
    proc = run("bash", os.path.join(ALT, "run_all.sh"), "en-vi", "--release", corpora["release"],
               "--work", work, *SWEEP_OPTIONS, "--dry-run")
    assert "en-vi: OK, train 60, dev 12, test 12" in proc.stdout
    assert "dry run: nothing is started" in proc.stdout and "to train" in proc.stdout
    assert "--softmax-temperature 1 --label-smoothing 0.1" in proc.stdout
    assert "is not prepared" in proc.stderr
    assert not work.exists()


def test_recipe_end_to_end_with_interruption(corpora):
    work = corpora["root"] / "work"
    # stage 1: the release (with a test split) for en-vi, the local copy (no test) for en-ja
    proc = run("bash", os.path.join(ALT, "prepare.sh"), "vi-en", "--release", corpora["release"],
               "--work", work, "--vocab", "20")
    assert "train 60, dev 12, test 12" in proc.stderr
    proc = run("bash", os.path.join(ALT, "prepare.sh"), "en-ja", "--work", work, "--vocab", "20",
               env=dict(ENV, ALT_LOCAL=str(corpora["local"])))
    assert "no test split" in proc.stderr
    vi_data, ja_data = work / "data" / "en-vi.spm20", work / "data" / "en-ja.spm20"
    info = json.loads((vi_data / "prepare.json").read_text())
    assert info["has_test"] and info["sizes"] == {"train": 60, "dev": 12, "test": 12}
    assert not json.loads((ja_data / "prepare.json").read_text())["has_test"]
    raw = (vi_data / "raw" / "train.vi").read_bytes()
    assert b"\r" not in raw and raw.count(b"\n") == 60
    before = snapshot(vi_data)
    proc = run("bash", os.path.join(ALT, "prepare.sh"), "en-vi", "--release", corpora["release"],
               "--work", work, "--vocab", "20")
    assert "nothing to do" in proc.stderr and snapshot(vi_data) == before  # never overwritten
    proc = run(sys.executable, DATA, "prepare", "en-vi", "--release", corpora["release"], "--work", work,
               "--vocab", "20", "--drop-incomplete", check=False)
    assert proc.returncode == 2 and "was prepared with" in proc.stderr

    # stage 2-3: kill the sweep while the first run trains, then resume it
    sweep = ["bash", os.path.join(ALT, "sweep.sh"), "vi-en", "en-ja", "--work", str(work), "--jobs", "2",
             *SWEEP_OPTIONS, "--max-update", "48", "--", *TINY]
    first = work / "sweep" / "vi-en.mini.spm20" / "T1-ls0.1-sem0"
    killed = [("1" if arg == "2" and sweep[i - 1] == "--jobs" else arg) for i, arg in enumerate(sweep)]
    proc = subprocess.Popen(killed, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # one run at a time: only T1 is interrupted
    deadline = time.time() + 240
    try:
        while time.time() < deadline and proc.poll() is None:
            log = first / "train.log"
            if (first / "checkpoint_last.pt").exists() and log.exists() and "Saved checkpoint" in log.read_text():
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its fairseq-train processes
        proc.communicate()
    assert not (first / "train.json").exists(), "training finished before the kill: make it longer"
    assert not (first / "run.json").exists()
    proc = run(*sweep[:-len(TINY) - 1], "--dry-run", "--", *TINY)  # the plan shows the interrupted run
    assert "interrupted: resumes from checkpoint_last.pt (update" in proc.stdout
    proc = run("bash", os.path.join(ALT, "results.sh"), "--work", work)  # a sweep in progress
    assert "no finished direction yet" in proc.stdout
    runs_csv = (work / "results" / "runs.csv").read_text()
    assert re.search(r"^vi-en\.mini\.spm20,vi-en,1,0\.1,0,[1-9]\d*,\(not finished\),", runs_csv, re.M)
    assert (work / "results" / "curves.vi-en.mini.spm20.png").exists()

    proc = run(*sweep)
    assert "resuming from checkpoint_last.pt (update" in (first / "run.log").read_text()
    log = (first / "train.log").read_text()
    assert "Loaded checkpoint" in log and "@ 0 updates" not in log.split("Loaded checkpoint")[1].split("\n")[0]
    result = json.loads((first / "run.json").read_text())
    # it stopped where an uninterrupted run stops: fairseq's --patience 10 over every validation,
    # those before the kill included (their count is restored from the log), else at --max-update
    history = result["training"]["valid_bleu"]
    best, since, stop = None, 0, 48
    for update, bleu in history:
        best, since = (bleu, 0) if best is None or bleu > best else (best, since + 1)
        if since == 10:
            stop = update
            break
    assert result["training"]["num_updates"] == stop
    assert result["training"]["stop_reason"] == ("max update" if stop == 48 else "early stop")
    assert [u for u, _ in history] == list(range(4, stop + 1, 4))  # none lost, none twice
    assert len(result["averaged"]) == 3 and set(result["eval"]) == {"valid", "test"}
    assert result["eval"]["valid"]["greedy"]["decoding_temperature"] == 1.0
    t2 = json.loads((first.parent / "T2-ls0.1-sem0" / "run.json").read_text())
    assert t2["eval"]["test"]["greedy"]["decoding_temperature"] == 2.0  # decoded at its training T
    assert "tok:13a" in t2["eval"]["test"]["signature"]

    final = json.loads((first.parent / "final" / "final.json").read_text())
    assert final["t_opt"] == 2.0 and final["scored_subset"] == "test"
    assert set(final["significance"]) == {"greedy", "beam", "tempered_greedy_vs_untempered_beam"}
    assert 0 < final["significance"]["greedy"]["bleu"]["p_value"] <= 1
    assert final["systems"]["tempered"]["beam"]["beam"] in (1, 2) and len(final["systems"]["tempered"]["grid"]) == 2
    assert set(final["speed"]["tempered"]) >= {"greedy_seconds", "beam2_seconds"}
    ja_final = json.loads((work / "sweep" / "en-ja.mini.spm20" / "final" / "final.json").read_text())
    assert ja_final["scored_subset"] == "valid"  # no test split: dev, and it says so
    ja_run = json.loads((work / "sweep" / "en-ja.mini.spm20" / "T1-ls0.1-sem0" / "run.json").read_text())
    assert set(ja_run["eval"]) == {"valid"} and "tok:char" in ja_run["eval"]["valid"]["signature"]

    before = snapshot(work / "sweep")
    proc = run(*sweep)  # everything finished: nothing is redone
    assert proc.stdout.count("0 to do") == 2 and "started" not in proc.stderr
    assert snapshot(work / "sweep") == before

    # stage 4
    proc = run("bash", os.path.join(ALT, "results.sh"), "--work", work)
    out = work / "results"
    names = set(os.listdir(out))
    for experiment in ("vi-en.mini.spm20", "en-ja.mini.spm20"):
        assert {f"bleu_vs_T.{experiment}.png", f"entropy.{experiment}.png", f"gnorm.{experiment}.png",
                f"curves.{experiment}.png"} <= names
    assert {"alt_results.md", "table1.csv", "table34.csv", "runs.csv"} <= names
    table1 = (out / "table1.csv").read_text().splitlines()
    assert len(table1) == 3 and "vi-en,vi-en.mini.spm20,test,2," in table1[2] + table1[1]
    assert "dev (tuned on dev too)" in (out / "table1.csv").read_text()
    assert len((out / "runs.csv").read_text().splitlines()) == 5
    table34 = (out / "table34.csv").read_text()
    assert "Default" in table34 and "Temp." in table34 and "LS & SEM" not in table34  # only T was swept
    md = (out / "alt_results.md").read_text()
    assert "Table 1" in md and "![entropy.vi-en.mini.spm20.png]" in md and "nrefs:1|case:mixed" in md
    assert "| vi-en |" in proc.stdout


def test_slurm_submission_and_gpu_plan(corpora, tmp_path):
    work = corpora["root"] / "slurm-work"
    run(sys.executable, DATA, "prepare", "en-vi", "--release", corpora["release"], "--work", work,
        "--vocab", "20", "--subwords", "bpe")
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "sbatch.calls"
    (fake / "sbatch").write_text(f'#!/bin/bash\necho "$*" >> {calls}\necho $((12344 + $(wc -l < {calls})))\n')
    (fake / "sbatch").chmod(0o755)
    env = dict(ENV, PATH=f"{fake}{os.pathsep}{ENV['PATH']}")
    options = ["en-vi", "--work", work, "--subwords", "bpe", "--vocab", "20", "--temperatures", "1,3"]
    proc = run("bash", os.path.join(ALT, "sweep.sh"), *options, "--gpus", "0,1,2,3", "--gpus-per-run", "2",
               "--dry-run", env=env)
    assert "GPUs 0,1,2,3, 2 per run (2 runs at a time)" in proc.stdout
    assert "--distributed-world-size 2" in proc.stdout and "--cpu" not in proc.stdout
    assert "--eval-bleu-remove-bpe subword_nmt" in proc.stdout
    proc = run("bash", os.path.join(ALT, "sweep.sh"), *options, "--slurm", "--dry-run", env=env)
    assert "#SBATCH --array=0-1" in proc.stdout and not calls.exists()
    proc = run("bash", os.path.join(ALT, "sweep.sh"), *options, "--slurm", "--slurm-args",
               "--partition gpu --time 24:00:00", env=env)
    submitted = calls.read_text().splitlines()
    assert len(submitted) == 2 and submitted[0].startswith("--parsable --partition gpu --time 24:00:00")
    assert "--dependency=afterok:12345" in submitted[1] and submitted[1].endswith("finalize.sbatch")
    array = open(submitted[0].split()[-1]).read()
    assert "#SBATCH --gres=gpu:1" in array and "run-one" in array and "--gpus-per-run 1" in array
    runs = open(os.path.join(os.path.dirname(submitted[0].split()[-1]), "runs.txt")).read().split()
    assert [os.path.basename(r) for r in runs] == ["T1-ls0.1-sem0", "T3-ls0.1-sem0"]
    assert "submitted job array 12345" in proc.stdout
    # a later call with other training options for the same runs is refused
    proc = run("bash", os.path.join(ALT, "sweep.sh"), *options, "--slurm", "--", "--dropout", "0.2",
               env=env, check=False)
    assert proc.returncode == 2 and "was started with other fairseq-train options" in proc.stderr


def edit_line(key, new):
    """A transform of data_<lang>.txt bytes: the line of sentence `key` becomes new(line)."""
    def transform(data):
        lines = data.split(b"\r\n")
        index = next(i for i, line in enumerate(lines) if line.startswith(key.encode() + b"\t"))
        lines[index:index + 1] = new(lines[index])
        return b"\r\n".join(lines)
    return transform


BAD_RELEASES = {  # case -> (transform of data_vi.txt given a training sentence's id, error message)
    "misaligned": (lambda key: edit_line(key, lambda line: []),
                   "misaligned train split: 1 sentence ids of data_en.txt are missing from data_vi.txt "),
    "empty": (lambda key: edit_line(key, lambda line: [key.encode() + b"\t \t"]),
              "train split: 1 sentence pairs have an empty side"),
    "latin1": (lambda key: edit_line(key, lambda line: [line + " caf\u00e9".encode("latin-1")]),
               ": not UTF-8 (byte 0xe9 at column"),
    "utf16": (lambda key: lambda data: data.decode("utf-8").encode("utf-16"), "looks like UTF-16"),
    "malformed": (lambda key: lambda data: b"this line has no id\r\n" + data,
                  "data_vi.txt, line 1: expected 'SNT.<urlid>.<sentid><TAB><text>'"),
    "duplicate": (lambda key: edit_line(key, lambda line: [line, line]), "appears twice (lines"),
}


@pytest.mark.parametrize("case", sorted(BAD_RELEASES))
def test_bad_release(corpora, tmp_path, case):
    import shutil

    transform, message = BAD_RELEASES[case]
    release = tmp_path / "release"
    shutil.copytree(corpora["release"], release)
    url = (release / "URL-train.txt").read_text().split("\t")[0].split(".")[1]
    path = release / "ALT-Parallel-Corpus-20191206" / "data_vi.txt"
    path.write_bytes(transform(f"SNT.{url}.2")(path.read_bytes()))
    work = tmp_path / "work"
    proc = run(sys.executable, DATA, "prepare", "en-vi", "--release", release, "--work", work, "--vocab", "20",
               check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr.split("error: ", 1)[1] and "Traceback" not in proc.stderr
    assert not (work / "data").exists() or not os.listdir(work / "data")  # nothing half-made
    if case in ("misaligned", "empty"):
        proc = run(sys.executable, DATA, "check", "en-vi", "--release", release, "--drop-incomplete")
        assert "en-vi: OK, train 59, dev 12, test 12; dropped {'train': 1, 'dev': 0, 'test': 0}" in proc.stdout


def test_bad_inputs_and_other_sources(corpora, tmp_path):
    import shutil
    import zipfile

    release = corpora["release"]

    def fails(*args, env=None):
        proc = run(sys.executable, DATA, *map(str, args), check=False, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr

    assert "has no data_th.txt (Thai); it has: data_en.txt data_ja.txt data_vi.txt" in fails(
        "check", "en-th", "--release", release)
    assert "unknown language code 'xx'" in fails("check", "xx-en", "--release", release)
    assert "no corpus: pass --release" in fails("check", "en-vi")
    copy = tmp_path / "no-test-list"
    shutil.copytree(release, copy)
    os.remove(copy / "URL-test.txt")
    assert "URL-test.txt (the official split) not found" in fails("check", "en-vi", "--release", copy)
    # the zip as released, URL lists next to it; Bengali / Khmer file codes (bg, khm) are accepted
    archive = tmp_path / "ALT-Parallel-Corpus-20191206.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in os.listdir(release / "ALT-Parallel-Corpus-20191206"):
            z.write(release / "ALT-Parallel-Corpus-20191206" / name, f"ALT-Parallel-Corpus-20191206/{name}")
    for split in ("train", "dev", "test"):
        shutil.copy(release / f"URL-{split}.txt", tmp_path)
    proc = run(sys.executable, DATA, "check", "ja-en", "--release", archive)
    assert "en-ja: OK, train 60, dev 12, test 12" in proc.stdout
    assert "has no data_bg.txt (Bengali)" in fails("check", "bn-en", "--release", archive)
    # ALT_RELEASE instead of the flag
    proc = run(sys.executable, DATA, "check", "en-vi", env=dict(ENV, ALT_RELEASE=str(archive)))
    assert "en-vi: OK" in proc.stdout

    local = tmp_path / "local"
    write_local_copy(str(local), with_test=True)
    proc = run(sys.executable, DATA, "check", "en-ja", "--local", local)
    assert "en-ja: OK, train 60, dev 12, test 12" in proc.stdout
    assert "has no train.vi (Vietnamese); its languages: en ja" in fails("check", "en-vi", "--local", local)
    with open(local / "train.ja", "ab") as f:
        f.write(b"one line too many\r\n")
    assert "misaligned train split: train.en has 60 lines, train.ja has 61" in fails("check", "en-ja", "--local", local)
    text = (local / "dev.en").read_bytes().split(b"\r\n")
    text[4] = b"   "
    (local / "dev.en").write_bytes(b"\r\n".join(text))
    (local / "train.ja").write_bytes(b"".join((local / "train.ja").read_bytes().splitlines(True)[:60]))
    assert "dev split: 1 empty lines in dev.en / dev.ja (line 5)" in fails("check", "en-ja", "--local", local)
    os.remove(local / "test.en")
    (local / "dev.en").write_bytes(b"\r\n".join(text).replace(b"\r\n   \r\n", b"\r\nfixed\r\n"))
    assert "test.ja but no test.en" in fails("check", "en-ja", "--local", local)
    assert "give either --release or --local" in fails("check", "en-ja", "--local", local, "--release", release)
