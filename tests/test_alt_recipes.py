"""The ALT recipes (examples/alt/, ctemp-alt-data / -sweep / -results) end to end on a tiny corpus
in the release's layout: prepare -> sweep (killed mid-training, then resumed) -> finalize -> results;
a local copy without a test split; SLURM submission with a stand-in sbatch; dry runs; every bad
corpus. The shell recipes run as processes; the other commands mostly run their main() in this
process (conftest.run_main: the same code as the console script, without a torch start-up each)."""

import csv
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    BIN_DIR,
    REPO,
    TINY_DIMS,
    checkout_commit,
    experiment_json,
    json_log_records,
    real_processes,
    run_fairseq,
    run_main,
    wait_until_free,
)
from sacrebleu.metrics import BLEU

from fairseq_ctemp.alt import common as alt_common
from fairseq_ctemp.alt import gpus
from fairseq_ctemp.alt import tables as alt_tables
from fairseq_ctemp.alt.data import toy_language_pair
from fairseq_ctemp.cli import alt_data, alt_sweep
from fairseq_ctemp.cli import alt_results as results_command

pytestmark = pytest.mark.e2e
ALT = os.path.join(REPO, "examples", "alt")
TINY = [
    *TINY_DIMS,
    "--max-tokens",
    "120",
    "--warmup-updates",
    "4",
    "--lr",
    "1e-2",
]
# the mini preset, shrunk: validation/checkpoint every 4 updates, patience 3, a 2 x 2 decoding grid.
# With seed 2 the toy runs have distinct dev BLEUs, so T_opt and the grid are real choices (asserted).
SWEEP_OPTIONS = [
    "--preset",
    "mini",
    "--interval",
    "4",
    "--patience",
    "3",
    "--average",
    "3",
    "--log-interval",
    "2",
    "--grid-beams",
    "1,2",
    "--grid-lenpens",
    "0.5,2",
    "--speed-beams",
    "2",
    "--eval-beam",
    "2",
    "--seed",
    "2",
    "--decode-args",
    "--max-len-a 1.2 --max-len-b 5",
]
VI_DATA = ["--subwords", "bpe", "--vocab", "200", "--train-subset", "52"]  # BPE with whole words: BLEU > 0
JA_DATA = ["--vocab", "20"]
ENV = dict(
    os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1", PYTHON=sys.executable
)
for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
    ENV.pop(key, None)


def run(*command, check=True, env=None):
    proc = subprocess.run([str(c) for c in command], env=env or ENV, text=True, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{command[:3]} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def data(*args, check=True, env=None):
    """ctemp-alt-data in this process."""
    return run_main(alt_data.main, *args, check=check, env=env or ENV)


def sweep_run(*args, check=True, env=None):
    """ctemp-alt-sweep run in this process."""
    return run_main(alt_sweep.main, "run", *args, check=check, env=env or ENV)


def snapshot(path):
    return {
        os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
        for d, _, files in os.walk(path)
        for f in files
    }


def write_local_copy(dest, with_test=False):
    """An already split en/ja copy like a local ALT copy: no ids, CRLF, train/dev only."""
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
    data("toy-release", root / "release")
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
    proc = run(
        "bash",
        os.path.join(ALT, "run_all.sh"),
        "en-vi",
        "--release",
        corpora["release"],
        "--work",
        work,
        *JA_DATA,
        *SWEEP_OPTIONS,
        "--temperatures",
        "1,2",
        "--label-smoothing",
        "0.1,0.3",
        "--sem-weights",
        "0,0.1",
        "--dry-run",
    )
    assert "en-vi: OK, train 60, dev 12, test 12" in proc.stdout
    assert "dry run: nothing is started" in proc.stdout and "8 runs, 8 to do" in proc.stdout
    # one run per (T, LS, SEM): the Tables 3/4 sweep
    listed = re.findall(r"^    (T\S+) +to train$", proc.stdout, re.M)
    assert listed == [f"T{t}-ls{ls}-sem{w}" for t in (1, 2) for ls in (0.1, 0.3) for w in (0, 0.1)]
    assert "--softmax-temperature 1 --label-smoothing 0.1 --sem-weight 0 " in proc.stdout
    assert "is not prepared" in proc.stderr
    # before the data is prepared the plan cannot know whether the corpus has a test split ...
    assert "scores dev, and test if the corpus has a test split (the data is not prepared yet)" in proc.stdout
    # ... but with --carve-test it can
    local = ["en-ja", "--local", corpora["local"], "--work", work, *JA_DATA, *SWEEP_OPTIONS, "--dry-run"]
    proc = run("bash", os.path.join(ALT, "run_all.sh"), *local, "--carve-test", "3")
    assert "; scores dev and test;" in proc.stdout and "greedy and beam 2 on dev and test\n" in proc.stdout
    assert not work.exists()


def release_pairs(release, split, a, b):
    """(a, b) sentence pairs of one official split, read straight from the release: data_a.txt
    order, whitespace collapsed (the toy text needs no other normalisation)."""
    urls = {
        line.split("\t")[0].split(".")[1] for line in (release / f"URL-{split}.txt").read_text().splitlines()
    }

    def sentences(lang):
        path = release / "ALT-Parallel-Corpus-20191206" / f"data_{lang}.txt"
        return dict(line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines())

    texts_a, texts_b = sentences(a), sentences(b)
    return [
        (" ".join(texts_a[k].split()), " ".join(texts_b[k].split()))
        for k in texts_a
        if k.split(".")[1] in urls
    ]


def patience_after(history, update):
    """(best BLEU, validations since it) after the validation at `update`: fairseq's --patience rule
    (ties do not improve) over a list of (update, BLEU)."""
    best, since = None, 0
    for u, bleu in history:
        if u > update:
            break
        best, since = (bleu, 0) if best is None or bleu > best else (best, since + 1)
    return best, since


def saved_updates(log_path):
    text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
    return [int(u) for u in re.findall(r"Saved checkpoint \S+ \(epoch \d+ @ (\d+) updates", text)]


def test_recipe_end_to_end_with_interruption(corpora):
    work = corpora["root"] / "work"
    # stage 1: vi-en from the release (with a test split), BPE, the first 52 training pairs only;
    # en-ja from the local copy (no test split), sentencepiece
    proc = run(
        "bash",
        os.path.join(ALT, "prepare.sh"),
        "vi-en",
        "--release",
        corpora["release"],
        "--work",
        work,
        *VI_DATA,
    )
    assert "train 52, dev 12, test 12" in proc.stderr
    # (in this process: prepare.sh itself ran above)
    proc = data("prepare", "en-ja", "--work", work, *JA_DATA, env=dict(ENV, ALT_LOCAL=str(corpora["local"])))
    assert "no test split" in proc.stderr
    vi_data, ja_data = work / "data" / "en-vi.bpe200.n52", work / "data" / "en-ja.spm20"
    info = json.loads((vi_data / "prepare.json").read_text())
    assert info["has_test"] and info["sizes"] == {"train": 52, "dev": 12, "test": 12}
    assert not json.loads((ja_data / "prepare.json").read_text())["has_test"]
    raw = (vi_data / "raw" / "train.vi").read_bytes()
    assert b"\r" not in raw and raw.count(b"\n") == 52
    # --train-subset 52: the first 52 training pairs of the release (it has 60); dev and test whole
    for split, count in (("train", 52), ("dev", 12), ("test", 12)):
        pairs = release_pairs(corpora["release"], split, "en", "vi")
        assert len(pairs) == (60 if split == "train" else count)
        for lang, side in (("en", 0), ("vi", 1)):
            assert (vi_data / "raw" / f"{split}.{lang}").read_text().splitlines() == [
                p[side] for p in pairs[:count]
            ]
    assert "@@ " in (vi_data / "tok" / "train.en").read_text()  # subword-nmt's BPE
    before = snapshot(vi_data)
    proc = data("prepare", "en-vi", "--release", corpora["release"], "--work", work, *VI_DATA)
    assert "nothing to do" in proc.stderr and snapshot(vi_data) == before  # never overwritten
    proc = data(
        "prepare",
        "en-vi",
        "--release",
        corpora["release"],
        "--work",
        work,
        *VI_DATA,
        "--drop-incomplete",
        check=False,
    )
    assert proc.returncode == 2 and "was prepared with" in proc.stderr

    # The reference: T=1 trained uninterrupted, with exactly the fairseq-train command the plan shows.
    options = [
        "vi-en",
        "--work",
        str(work),
        "--jobs",
        "1",
        "--temperatures",
        "1,2,3",
        *VI_DATA,
        *SWEEP_OPTIONS,
        "--max-update",
        "48",
    ]
    sweep = ["bash", os.path.join(ALT, "sweep.sh"), *options, "--", *TINY]
    experiment = work / "sweep" / "vi-en.mini.bpe200.n52.seed2"  # --seed 2: its own directory
    first = experiment / "T1-ls0.1-sem0"
    plan = sweep_run(*options, "--dry-run", "--", *TINY).stdout.splitlines()
    command = shlex.split(
        plan[[i for i, line in enumerate(plan) if "fairseq-train of T1-ls0.1-sem0" in line][0] + 1]
    )
    assert command[0] == "fairseq-train" and command[command.index("--save-dir") + 1] == str(first)
    command[command.index("--save-dir") + 1] = str(corpora["root"] / "uninterrupted")
    reference = run_fairseq(*command).stdout  # fairseq-train's cli_main in this process
    history = [
        (int(r["valid_num_updates"]), float(r["valid_bleu"])) for r in json_log_records(reference, "valid")
    ]
    stop = history[-1][0]
    assert "early stop since valid performance hasn't improved" in reference and stop < 48
    last_best = max(u for u, _ in history if patience_after(history, u)[1] == 0)
    # kill after the last improvement, so that the restored count (>= 1) decides where the run stops;
    # not at an epoch's end, where fairseq saves no checkpoint_<e>_<u>.pt
    epoch_ends = {int(r["train_num_updates"]) for r in json_log_records(reference, "train")}
    window = [u for u, _ in history if last_best < u < stop and u not in epoch_ends]
    assert window, f"no validation between the best and the stop: {history}"

    # stage 2-3: kill the sweep after a checkpoint in the window, as if during fairseq's copy of it
    # to checkpoint_last.pt; then resume
    proc = subprocess.Popen(  # real processes: the process group is frozen and killed
        sweep,
        env=real_processes(ENV),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline, killed_at = time.time() + 240, None
    try:
        while time.time() < deadline and proc.poll() is None:
            saved = saved_updates(first / "train.log")
            if saved and saved[-1] in window:
                os.killpg(proc.pid, signal.SIGSTOP)  # freeze, then look at what was saved last
                killed_at = saved_updates(first / "train.log")[-1]
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its fairseq-train processes
        proc.communicate()
    assert killed_at in window, f"killed after update {killed_at}, not within {window}"
    assert not (first / "train.json").exists() and not (first / "run.json").exists()
    newest = max(first.glob("checkpoint_*_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    assert newest.name.endswith(f"_{killed_at}.pt")
    # fairseq writes checkpoint_<e>_<u>.pt, copies it to checkpoint_last.pt, then logs "Saved
    # checkpoint": a kill during the copy leaves a truncated checkpoint_last.pt and no such line
    last = first / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    log = (first / "train.log").read_text(encoding="utf-8")
    cut = log.rindex("\n", 0, log.rindex("Saved checkpoint")) + 1
    (first / "train.log").write_text(log[:cut] + log[log.index("\n", cut) + 1 :], encoding="utf-8")
    wait_until_free(first / ".lock")  # the killed sweep's processes end (and unlock) in their time
    proc = sweep_run(*options, "--dry-run", "--", *TINY)  # the plan shows the interrupted run
    assert f"interrupted: resumes from checkpoint_last.pt (update {killed_at})" in proc.stdout
    proc = run_main(results_command.main, "--work", work)  # a sweep in progress
    assert "Table 1 needs a finished T=1 run and a finished run at another T" in proc.stdout
    runs_csv = (work / "results" / "runs.csv").read_text()
    assert re.search(
        r"^vi-en\.mini\.bpe200\.n52\.seed2,vi-en,transformer,1,0\.1,0,2,[1-9]\d*,\(not finished\),",
        runs_csv,
        re.M,
    )
    with open(work / "results" / "runs.csv", newline="", encoding="utf-8") as f:  # each run's options
        trained_with = {
            r["T"]: r["fairseq-train options but --seed, --max-update"] for r in csv.DictReader(f)
        }
    assert "--softmax-temperature 1 " in trained_with["1"]
    assert "--seed" not in trained_with["1"] and "--max-update" not in trained_with["1"]
    assert trained_with["2"] == trained_with["1"].replace("temperature 1 ", "temperature 2 ")
    assert (work / "results" / "curves.vi-en.mini.bpe200.n52.seed2.png").exists()
    # finalize before the runs are done (SLURM's finalize job starts after the run array whatever
    # its end): it names the runs it waits for, writes no result and does not fail
    proc = run_main(alt_sweep.main, "finalize", experiment, "--cpu", env=ENV)
    assert "finalize waits for T1-ls0.1-sem0, T2-ls0.1-sem0, T3-ls0.1-sem0" in proc.stderr
    assert not (experiment / "final").exists()

    # the killed run resumes alongside the others (this process runs the sweep: ctemp-alt-sweep run)
    proc = sweep_run(*options[:3], "--jobs", "2", *options[5:], "--", *TINY)
    run_log = (first / "run.log").read_text()
    assert f"checkpoint_last.pt is missing, incomplete or older than {newest.name}" in run_log
    best, since = patience_after(history, killed_at)
    assert since >= 1
    assert (
        f"resuming from checkpoint_last.pt (update {killed_at}; best dev BLEU {best:g}, {since} "
        "validation(s) without improvement)"
    ) in run_log
    log = (first / "train.log").read_text()
    assert f"@ {killed_at} updates)" in log.split("Loaded checkpoint")[1].split("\n")[0]
    # the resumed run's first part ran the reference's command, and stopped where it stopped
    started = shlex.split(log.split(" $ ", 1)[1].split("\n")[0])
    assert started[1:3] == ["-m", "fairseq_ctemp.alt.training"]
    assert started[3:] == [str(first) if a.endswith("uninterrupted") else a for a in command[1:]]
    result = json.loads((first / "run.json").read_text())
    assert [tuple(v) for v in result["training"]["valid_bleu"]] == history
    # the code and torch it finished with (git asked here, independently of the package's helper)
    assert (result["training"]["code"], result["training"]["torch"]) == (checkout_commit(), torch.__version__)
    assert result["training"]["num_updates"] == stop and result["training"]["stop_reason"] == "early stop"
    assert len(result["averaged"]) == 3 and set(result["eval"]) == {"valid", "test"}
    assert result["eval"]["valid"]["greedy"]["decoding_temperature"] == 1.0
    for t in (2, 3):
        tempered = json.loads((experiment / f"T{t}-ls0.1-sem0" / "run.json").read_text())
        assert tempered["eval"]["test"]["greedy"]["decoding_temperature"] == t  # decoded at its training T
        assert "tok:13a" in tempered["eval"]["test"]["signature"]
    # BPE undone before scoring: the saved hypotheses are whole words, scored against the raw text
    eval_dir = first / "eval" / "test"
    hyps = (eval_dir / "greedy.hyp").read_text().splitlines()
    refs = (vi_data / "raw" / "test.en").read_text().splitlines()
    assert (
        len(hyps) == 12
        and not any("@@" in h for h in hyps)
        and (eval_dir / "ref").read_text().splitlines() == refs
    )
    assert result["eval"]["test"]["greedy"]["bleu"] == pytest.approx(BLEU().corpus_score(hyps, [refs]).score)

    # finalize: T_opt is the best dev greedy BLEU among T != 1; beam and length penalty are the dev
    # grid's argmax (first of equal maxima). The toy runs must make both a real choice.
    final = json.loads((experiment / "final" / "final.json").read_text())
    dev_greedy = {
        t: json.loads((experiment / f"T{t}-ls0.1-sem0" / "run.json").read_text())["eval"]["valid"]["greedy"][
            "bleu"
        ]
        for t in (1, 2, 3)
    }
    assert dev_greedy[2] != dev_greedy[3] and dev_greedy[1] > max(dev_greedy[2], dev_greedy[3]), dev_greedy
    assert final["t_opt"] == max((2, 3), key=dev_greedy.get) and final["scored_subset"] == "test"
    dev_refs = (vi_data / "raw" / "dev.en").read_text().splitlines()
    for system in ("untempered", "tempered"):
        tuned, grid = final["systems"][system], final["systems"][system]["grid"]
        assert [(g["beam"], g["lenpen"]) for g in grid] == [(1, 0.5), (1, 2.0), (2, 0.5), (2, 2.0)]
        tune_dir = experiment / "final" / f"tune-T{tuned['temperature']:g}"
        for g in grid:  # each grid point rescored from its saved hypotheses
            hyps = (tune_dir / f"grid.beam{g['beam']}.lenpen{g['lenpen']:g}.hyp").read_text().splitlines()
            assert len(hyps) == 12 and g["bleu"] == pytest.approx(BLEU().corpus_score(hyps, [dev_refs]).score)
        best = max(grid, key=lambda g: g["bleu"])
        assert len({g["bleu"] for g in grid}) > 1, grid
        assert (tuned["beam"]["beam"], tuned["beam"]["lenpen"]) == (best["beam"], best["lenpen"])
    assert set(final["significance"]) == {"greedy", "beam", "tempered_greedy_vs_untempered_beam"}
    assert 0 < final["significance"]["greedy"]["bleu"]["p_value"] <= 1
    assert set(final["speed"]["tempered"]) >= {"greedy_seconds", "beam2_seconds"}

    # en-ja: sentencepiece, no test split, 12 updates a run (3 validations: --average 3 needs
    # them); label smoothing 0.3 and SEM 0.1, also
    # as the group T_opt is chosen in
    ja_sweep = [
        "bash",
        os.path.join(ALT, "sweep.sh"),
        "en-ja",
        "--work",
        str(work),
        "--jobs",
        "2",
        "--temperatures",
        "1,2",
        "--label-smoothing",
        "0.3",
        "--sem-weights",
        "0.1",
        "--primary-label-smoothing",
        "0.3",
        "--primary-sem-weight",
        "0.1",
        *JA_DATA,
        *SWEEP_OPTIONS,
        "--max-update",
        "12",
        "--",
        *TINY,
    ]
    proc = sweep_run(*ja_sweep[2:])  # in this process: the vi-en sweep above ran sweep.sh itself
    assert "; scores dev (no test split: dev numbers only);" in proc.stdout
    assert "greedy and beam 2 on dev\n" in proc.stdout
    ja_experiment = work / "sweep" / "en-ja.mini.spm20.seed2"
    ja_final = json.loads((ja_experiment / "final" / "final.json").read_text())
    assert ja_final["scored_subset"] == "valid"  # no test split: dev, and it says so
    assert (ja_final["label_smoothing"], ja_final["sem_weight"]) == (0.3, 0.1)
    assert ja_final["systems"]["tempered"]["temperature"] == 2.0
    for t in (1, 2):
        ja_run = json.loads((ja_experiment / f"T{t}-ls0.3-sem0.1" / "run.json").read_text())
        assert set(ja_run["eval"]) == {"valid"} and "tok:char" in ja_run["eval"]["valid"]["signature"]
        train_log = (ja_experiment / f"T{t}-ls0.3-sem0.1" / "train.log").read_text()
        assert (
            "'label_smoothing': 0.3," in train_log
            and f"'softmax_temperature': {t}.0, 'sem_weight': 0.1," in train_log
        )

    before = snapshot(work / "sweep")
    for command in (sweep, ja_sweep):  # everything finished: nothing is redone
        proc = sweep_run(*command[2:])
        assert "0 to do" in proc.stdout and "started" not in proc.stderr
    assert snapshot(work / "sweep") == before

    # stage 4
    proc = run("bash", os.path.join(ALT, "results.sh"), "--work", work)
    out = work / "results"
    names = set(os.listdir(out))
    for name in ("vi-en.mini.bpe200.n52.seed2", "en-ja.mini.spm20.seed2"):
        assert {
            f"bleu_vs_T.{name}.png",
            f"entropy.{name}.png",
            f"gnorm.{name}.png",
            f"curves.{name}.png",
        } <= names
    assert {"alt_results.md", "table1.csv", "table34.csv", "runs.csv"} <= names
    assert_curve_points_are_the_logs(out / "curves.vi-en.mini.bpe200.n52.seed2.csv", experiment)
    table1 = list(csv.DictReader((out / "table1.csv").read_text().splitlines()))
    assert [(r["direction"], r["scored on"], r["T_opt"]) for r in table1] == [
        ("en-ja", "dev (tuned on dev too)", f"{ja_final['t_opt']:g}"),
        ("vi-en", "test", f"{final['t_opt']:g}"),
    ]
    assert table1[1]["greedy T_opt"].rstrip("†") == f"{final['systems']['tempered']['greedy']['bleu']:.2f}"
    assert len((out / "runs.csv").read_text().splitlines()) == 1 + 3 + 2
    # Tables 3/4 (their logic: test_table34_configurations): T=1 is "Default", the best dev greedy
    # BLEU over T is "Temp."; the other configurations search the same runs, so they get no row
    ja_runs = {t: json.loads((ja_experiment / f"T{t}-ls0.3-sem0.1" / "run.json").read_text()) for t in (1, 2)}
    best_t = (
        2
        if ja_runs[2]["eval"]["valid"]["greedy"]["bleu"] > ja_runs[1]["eval"]["valid"]["greedy"]["bleu"]
        else 1
    )
    table34 = [
        [r["configuration"], r["greedy BLEU"], r["scored on"], r["T"], r["LS"], r["SEM"], r["runs searched"]]
        for r in csv.DictReader((out / "table34.csv").read_text().splitlines())
        if r["direction"] == "en-ja"
    ]
    assert table34 == [
        [name, f"{ja_runs[t]['eval']['valid']['greedy']['bleu']:.2f}", "dev", str(t), "0.3", "0.1", n]
        for name, t, n in (("Default", 1, "1"), ("Temp.", best_t, "2"))
    ]
    md = (out / "alt_results.md").read_text()
    assert (
        "Table 1" in md and "![entropy.vi-en.mini.bpe200.n52.seed2.png]" in md and "nrefs:1|case:mixed" in md
    )
    assert "| vi-en |" in proc.stdout
    assert (
        f"\n\nAlso in train (the same sentence, spaces collapsed): {in_train_reference(experiment)}\n" in md
    )


def in_train_reference(experiment):
    """'dev: n en, n vi, n pairs of N; ...' of the experiment's data, pair by pair against every
    training pair (the slow way), as the report's line should read."""
    data = os.path.normpath(experiment / json.loads((experiment / "experiment.json").read_text())["data"])
    with open(os.path.join(data, "prepare.json"), encoding="utf-8") as f:
        pair = json.load(f)["pair"]

    def read(split):
        sides = []
        for lang in pair:
            with open(os.path.join(data, "raw", f"{split}.{lang}"), encoding="utf-8") as f:
                sides.append(f.read().splitlines())
        return [tuple(" ".join(s.split()) for s in p) for p in zip(*sides)]

    train, parts = read("train"), []
    for split in ("dev", "test"):
        rows = read(split)
        counts = [sum(any(r[i] == t[i] for t in train) for r in rows) for i in (0, 1)]
        pairs = sum(any(r == t for t in train) for r in rows)
        parts.append(
            f"{split}: {counts[0]} {pair[0]}, {counts[1]} {pair[1]}, {pairs} pair{'' if pairs == 1 else 's'} "
            f"of {len(rows):,}"
        )
    return "; ".join(parts)


def assert_curve_points_are_the_logs(path, experiment):
    """curves.<experiment>.csv holds each run's dev BLEU per validation as its train.log has it
    (read here with a regular expression; the last record per update, as after a resume)."""
    points = list(csv.DictReader(path.read_text().splitlines()))
    assert {p["series"] for p in points} == {
        "dev BLEU (greedy, validation)",
        "dev NLL of softmax(D/T) (bits/token)",
        "train NLL of softmax(D/T) (bits/token)",
    }
    runs = {p["run"] for p in points}
    assert runs and all((experiment / run / "train.log").exists() for run in runs)
    for run in runs:
        logged = {}
        for line in (experiment / run / "train.log").read_text().splitlines():
            bleu = re.search(r'\| valid \| .*"valid_bleu": "([\d.]+)".*"valid_num_updates": "(\d+)"', line)
            if bleu:
                logged[int(bleu.group(2))] = float(bleu.group(1))
        plotted = {
            int(p["updates"]): float(p["value"])
            for p in points
            if p["run"] == run and p["series"].startswith("dev BLEU")
        }
        assert plotted == logged and logged, run


def test_table34_configurations():
    """Tables 3/4 over a full T x LS x SEM sweep (run results made up so that each configuration has
    its own winner): a row reports the run with the best dev greedy BLEU among the runs it allows
    (fixed values: T=1, the primary LS and SEM), scored on test; test BLEU never picks."""
    dev = {
        (1, 0.1, 0): 10,
        (1, 0.3, 0): 11,
        (2, 0.1, 0): 12,
        (2, 0.3, 0): 13,
        (1, 0.1, 0.1): 10.5,
        (1, 0.3, 0.1): 11.5,
        (2, 0.1, 0.1): 12.5,
        (2, 0.3, 0.1): 14,
    }
    from fairseq_ctemp.alt.records import (
        Experiment,
        RunResult,
        Settings,
        SubsetEval,
        SystemRow,
        TrainingSummary,
    )

    def scored(bleu):  # only the greedy BLEU is read
        row = SystemRow(
            1, 1.0, bleu, 0.0, decode_seconds=1.0, sentences_per_second=1.0, decoding_temperature=1.0
        )
        return SubsetEval(row, row, signature="BLEU")

    runs = [
        RunResult(
            name=f"T{t}-ls{ls}-sem{w}",
            direction="en-vi",
            variant="transformer",
            seed=1,
            temperature=float(t),
            label_smoothing=ls,
            sem_weight=w,
            training=TrainingSummary(0, "early stop", 10, 0, None, None, []),
            eval={"valid": scored(b), "test": scored(50 - b)},
        )
        for (t, ls, w), b in reversed(dev.items())
    ]
    experiment = Experiment("en-vi.x", "en-vi.x", Settings(**experiment_json()), runs, pending=[])
    header, rows = alt_tables.table34([experiment])
    got = [dict(zip(header, row)) for row in rows]
    winners = [
        ("Default", (1, 0.1, 0), 1),
        ("LS", (1, 0.3, 0), 2),
        ("Temp.", (2, 0.1, 0), 2),
        ("Temp. & LS", (2, 0.3, 0), 4),
        ("SEM", (1, 0.1, 0.1), 2),
        ("LS & SEM", (1, 0.3, 0.1), 4),
        ("Temp. & SEM", (2, 0.1, 0.1), 4),
        ("Temp. & LS & SEM", (2, 0.3, 0.1), 8),
    ]
    assert [
        (r["configuration"], r["greedy BLEU"], r["scored on"], r["T"], r["LS"], r["SEM"], r["runs searched"])
        for r in got
    ] == [
        (name, f"{50 - dev[key]:.2f}", "test", f"{key[0]:g}", f"{key[1]:g}", f"{key[2]:g}", n)
        for name, key, n in winners
    ]
    # without the SEM runs, the SEM configurations search the same runs as the others: no rows
    experiment.runs = [r for r in runs if r.sem_weight == 0]
    assert [row[2] for row in alt_tables.table34([experiment])[1]] == [
        "Default",
        "LS",
        "Temp.",
        "Temp. & LS",
    ]


def fake_sbatch(tmp_path):
    """(ENV with an sbatch on PATH that records its arguments, one call a line, in the file returned
    and answers job ids 12345, 12346, ...; that file)."""
    fake, calls = tmp_path / "bin", tmp_path / "sbatch.calls"
    fake.mkdir()
    (fake / "sbatch").write_text(f'#!/bin/bash\necho "$*" >> {calls}\necho $((12344 + $(wc -l < {calls})))\n')
    (fake / "sbatch").chmod(0o755)
    return dict(ENV, PATH=f"{fake}{os.pathsep}{ENV['PATH']}"), calls


def test_slurm_submission_and_gpu_plan(corpora, tmp_path, monkeypatch):
    work = corpora["root"] / "slurm-work"
    data(
        "prepare",
        "en-vi",
        "--release",
        corpora["release"],
        "--work",
        work,
        "--vocab",
        "20",
        "--subwords",
        "bpe",
    )
    env, calls = fake_sbatch(tmp_path)
    options = ["en-vi", "--work", work, "--subwords", "bpe", "--vocab", "20", "--temperatures", "1,3"]
    proc = sweep_run(*options, "--gpus", "0,1,2,3", "--gpus-per-run", "2", "--dry-run", env=env)
    assert "GPUs 0,1,2,3, 2 per run (2 runs at a time)" in proc.stdout
    assert "--distributed-world-size 2" in proc.stdout and "--cpu" not in proc.stdout
    assert "--eval-bleu-remove-bpe subword_nmt" in proc.stdout
    proc = sweep_run(*options, "--slurm", "--dry-run", env=env)
    assert "#SBATCH --array=0-1" in proc.stdout and not calls.exists()
    proc = sweep_run(*options, "--slurm", "--slurm-args", "--partition gpu --time 24:00:00", env=env)
    submitted = calls.read_text().splitlines()
    assert len(submitted) == 2 and submitted[0].startswith("--parsable --partition gpu --time 24:00:00")
    assert "--dependency=afterany:12345" in submitted[1] and submitted[1].endswith("finalize.sbatch")
    array = Path(submitted[0].split()[-1]).read_text()
    assert "#SBATCH --gres=gpu:1" in array and "--gpus-per-run 1" in array
    # the tasks run this package's ctemp-alt-sweep by this Python, with the package on PYTHONPATH
    assert f"{sys.executable} -m fairseq_ctemp.cli.alt_sweep run-one" in array
    assert f"export PYTHONPATH={REPO}" in array
    runs = (Path(submitted[0].split()[-1]).parent / "runs.txt").read_text().split()
    assert [os.path.basename(r) for r in runs] == ["T1-ls0.1-sem0", "T3-ls0.1-sem0"]
    assert "submitted job array 12345" in proc.stdout
    # a later call with other training options for the same runs is refused
    proc = sweep_run(*options, "--slurm", "--", "--dropout", "0.2", env=env, check=False)
    assert proc.returncode == 2 and "was started with other fairseq-train options" in proc.stderr
    # a task for GPUs on a node that shows none stops, not trains on the CPU (nor writes its log)
    monkeypatch.setattr(gpus, "visible_count", lambda: 0)
    before = snapshot(work)
    for command, target in (("run-one", runs[0]), ("finalize", os.path.dirname(runs[0]))):
        proc = run_main(alt_sweep.main, command, target, "--gpus-per-run", "1", check=False)
        assert proc.returncode == 2, proc.stderr
        assert f"{command} without --cpu needs 1 CUDA GPU(s) and sees 0" in proc.stderr.splitlines()[-1]
    assert snapshot(work) == before


def test_a_slurm_task_whose_run_another_sweep_holds_has_no_work(corpora, tmp_path):
    """A task of the job array whose run another sweep trains now (its lock held) ends as done,
    saying so (SLURM would count exit status 75 a failed task); any other failure stays one."""
    work = corpora["root"] / "slurm-held-work"
    data("prepare", "en-vi", "--release", corpora["release"], "--work", work, "--vocab", "20")
    env, calls = fake_sbatch(tmp_path)
    options = ["en-vi", "--work", work, "--vocab", "20", "--temperatures", "1,3", "--no-finalize"]
    sweep_run(*options, "--slurm", "--slurm-cpu", env=env)
    sdir = os.path.dirname(calls.read_text().split()[-1])  # sbatch ... DIR/runs.sbatch
    runs = Path(sdir, "runs.txt").read_text().split()
    task_env = dict(ENV, SLURM_ARRAY_TASK_ID="0")
    with alt_common.Lock(runs[0]):  # this process is the other sweep
        task = subprocess.run(
            ["bash", Path(sdir, "runs.sbatch")], env=task_env, capture_output=True, text=True
        )
    assert task.returncode == 0, task.stderr
    assert f"{runs[0]}: left to the process working on it" in task.stdout
    os.remove(os.path.join(runs[1], "config.json"))  # a task that fails
    task = subprocess.run(
        ["bash", Path(sdir, "runs.sbatch")],
        env=dict(task_env, SLURM_ARRAY_TASK_ID="1"),
        capture_output=True,
        text=True,
    )
    assert task.returncode == 2 and "has no config.json" in task.stderr, task.stderr


def edit_line(key, new):
    """A transform of data_<lang>.txt bytes: the line of sentence `key` becomes new(line)."""

    def transform(data):
        lines = data.split(b"\r\n")
        index = next(i for i, line in enumerate(lines) if line.startswith(key.encode() + b"\t"))
        lines[index : index + 1] = new(lines[index])
        return b"\r\n".join(lines)

    return transform


BAD_RELEASES = {  # case -> (transform of data_vi.txt given a training sentence's id, error message)
    "misaligned": (
        lambda key: edit_line(key, lambda line: []),
        "misaligned train split: 1 sentence ids of data_en.txt are missing from data_vi.txt ",
    ),
    "empty": (
        lambda key: edit_line(key, lambda line: [key.encode() + b"\t \t"]),
        "train split: 1 sentence pairs have an empty side",
    ),
    "latin1": (
        lambda key: edit_line(key, lambda line: [line + " caf\u00e9".encode("latin-1")]),
        ": not UTF-8 (byte 0xe9 at column",
    ),
    "utf16": (lambda key: lambda data: data.decode("utf-8").encode("utf-16"), "looks like UTF-16"),
    "malformed": (
        lambda key: lambda data: b"this line has no id\r\n" + data,
        "data_vi.txt, line 1: expected 'SNT.<urlid>.<sentid><TAB><text>'",
    ),
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
    proc = data(
        "prepare",
        "en-vi",
        "--release",
        release,
        "--work",
        work,
        "--vocab",
        "20",
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr.split("error: ", 1)[1] and "Traceback" not in proc.stderr
    assert not (work / "data").exists() or not os.listdir(work / "data")  # nothing half-made
    if case in ("misaligned", "empty"):
        proc = data("check", "en-vi", "--release", release, "--drop-incomplete")
        assert (
            "en-vi: OK, train 59, dev 12, test 12; dropped {'train': 1, 'dev': 0, 'test': 0}" in proc.stdout
        )


def test_bad_inputs_and_other_sources(corpora, tmp_path):
    import shutil
    import zipfile

    release = corpora["release"]

    def fails(*args, env=None):
        proc = data(*args, check=False, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr

    assert "has no data_th.txt (Thai); it has: data_en.txt data_ja.txt data_vi.txt" in fails(
        "check", "en-th", "--release", release
    )
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
    proc = data("check", "ja-en", "--release", archive)
    assert "en-ja: OK, train 60, dev 12, test 12" in proc.stdout
    assert "has no data_bg.txt (Bengali)" in fails("check", "bn-en", "--release", archive)
    # ALT_RELEASE instead of the flag
    proc = data("check", "en-vi", env=dict(ENV, ALT_RELEASE=str(archive)))
    assert "en-vi: OK" in proc.stdout

    local = tmp_path / "local"
    write_local_copy(str(local), with_test=True)
    proc = data("check", "en-ja", "--local", local)
    assert "en-ja: OK, train 60, dev 12, test 12" in proc.stdout
    assert "has no train.vi (Vietnamese); its languages: en ja" in fails("check", "en-vi", "--local", local)
    with open(local / "train.ja", "ab") as f:
        f.write(b"one line too many\r\n")
    assert "misaligned train split: train.en has 60 lines, train.ja has 61" in fails(
        "check", "en-ja", "--local", local
    )
    text = (local / "dev.en").read_bytes().split(b"\r\n")
    text[4] = b"   "
    (local / "dev.en").write_bytes(b"\r\n".join(text))
    (local / "train.ja").write_bytes(b"".join((local / "train.ja").read_bytes().splitlines(True)[:60]))
    assert "dev split: 1 empty lines in dev.en / dev.ja (line 5)" in fails("check", "en-ja", "--local", local)
    os.remove(local / "test.en")
    (local / "dev.en").write_bytes(b"\r\n".join(text).replace(b"\r\n   \r\n", b"\r\nfixed\r\n"))
    assert "test.ja but no test.en" in fails("check", "en-ja", "--local", local)
    assert "give either --release or --local" in fails(
        "check", "en-ja", "--local", local, "--release", release
    )
