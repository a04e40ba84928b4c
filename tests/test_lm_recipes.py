"""The language-model recipes (examples/language_model/) end to end on a tiny PTB-like corpus:
prepare -> train -> evaluate (token-count check) -> plot / table, re-runs skip finished steps, and
bad inputs fail with a clear message. No network: downloads are pointed at a closed local port."""

import collections
import csv
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import time

import pytest
import torch
from conftest import (
    BIN_DIR,
    REPO,
    checkout_commit,
    command,
    example_script,
    json_log_records,
    real_processes,
    run_fairseq,
    run_main,
)

pytestmark = pytest.mark.e2e
RECIPES = os.path.join(REPO, "examples", "language_model")
NO_NETWORK = "http://127.0.0.1:9"  # the discard port: connection refused at once


def recipe(name, *args, env=None, cwd=None):
    full_env = dict(
        os.environ,
        PATH=BIN_DIR + os.pathsep + os.environ["PATH"],
        OMP_NUM_THREADS="1",
        PTB_URL=f"{NO_NETWORK}/simple-examples.tgz",
        PTB_FALLBACK_URL=NO_NETWORK,
        WIKITEXT_URL_BASE=NO_NETWORK,
    )
    full_env.update(env or {})
    return subprocess.run(
        ["bash", os.path.join(RECIPES, name), *map(str, args)],
        env=full_env,
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def ok(proc):
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout


def fails(proc, message):
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert message in proc.stdout, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]


def markdown_rows(text):
    """The cells of each row of the markdown table in text (not its header and rule)."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def ptb_like(tmp_path_factory):
    """A tiny corpus laid out like PTB (ptb.{train,valid,test}.txt, one sentence per line)."""
    from fairseq_ctemp.toy_data import write_corpus

    root = tmp_path_factory.mktemp("lm_recipes")
    toy = root / "toy"
    write_corpus(str(toy), (("train", 600), ("valid", 60), ("test", 70)), vocab=120)
    raw = root / "ptb"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        shutil.copy(toy / f"{split}.tgt", raw / f"ptb.{split}.txt")
    return root, raw


def corpus_tokens(path):
    """Whitespace tokens + one </s> per line, as fairseq-eval-lm counts them."""
    with open(path) as f:
        return sum(len(line.split()) + 1 for line in f)


def unigram_perplexity(train, test):
    """Perplexity on `test` of add-one smoothed unigram counts of `train` (words and one </s> per
    line; unseen words share one <unk> entry)."""
    counts = collections.Counter(
        w for line in train.read_text().splitlines() for w in line.split() + ["</s>"]
    )
    total, entries = sum(counts.values()), len(counts) + 1
    tokens = [w for line in test.read_text().splitlines() for w in line.split() + ["</s>"]]
    return math.exp(-sum(math.log((counts[w] + 1) / (total + entries)) for w in tokens) / len(tokens))


def test_recipes_end_to_end(ptb_like, toy_checkpoint):
    root, raw = ptb_like
    data_bin = root / "data-bin" / "ptb"
    env = {"DATA_BIN": str(data_bin)}

    # A custom corpus is not the official PTB: the count check says so, and EXPECTED_COUNTS=skip accepts it.
    fails(recipe("prepare.sh", "ptb", raw, env=env), "is not the official corpus")
    assert not data_bin.exists()
    part = root / "data-bin" / "ptb.part"  # what an interrupted run leaves: made anew
    part.mkdir(parents=True)
    (part / "dict.txt").write_text("half a dictionary\n")
    out = ok(recipe("prepare.sh", "ptb", raw, env=dict(env, EXPECTED_COUNTS="skip")))
    assert not part.exists() and "half" not in (data_bin / "dict.txt").read_text()
    assert "EXPECTED_COUNTS=skip: not checked" in out
    counts = (data_bin / "counts.tsv").read_text().split("\n")
    assert counts[3].split("\t") == ["test", "70", str(corpus_tokens(raw / "ptb.test.txt"))]
    skip = dict(env, EXPECTED_COUNTS="skip")
    assert "already prepared" in ok(recipe("prepare.sh", "ptb", raw, env=skip))
    # ... and refused when asked for another check, corpus or dataset: it would be taken for that one
    made = f"dataset=ptb source={raw} counts=skip"
    fails(
        recipe("prepare.sh", "ptb", raw, env=env),
        f"DATA_BIN {data_bin} was prepared with '{made}', not '{made[:-4]}check': give another DATA_BIN",
    )
    fails(recipe("prepare.sh", "ptb", root, env=skip), f"not 'dataset=ptb source={root} counts=skip'")
    fails(recipe("prepare.sh", "wikitext-2", raw, env=skip), f"not 'dataset=wikitext-2 source={raw} ")

    # Train CT-MoS (tiny) for 2 epochs with the recipe, json log teed into SAVE_DIR/train.log.
    save = root / "ct-mos"
    train_env = dict(
        env,
        ARCH="ct_mos_lstm_lm_tiny",
        OPTIMIZER="adam",
        LR="3e-3",
        MAX_EPOCH="2",
        MAX_TOKENS="256",
        TOKENS_PER_SAMPLE="64",
        DEVICE_ARGS="--cpu",
        LOG_INTERVAL="5",
    )
    # a start that fails before any checkpoint leaves nothing that blocks the corrected one
    fails(recipe("train.sh", "ptb", "ct-mos", save, "--no-such-option", env=train_env), "--no-such-option")
    ok(recipe("train.sh", "ptb", "ct-mos", save, env=train_env))
    assert (save / "checkpoint_best.pt").exists() and (save / "train.done").exists()
    log = (save / "train.log").read_text()
    assert "'output_head': mos" in log and "'ct_normalization': softmax" in log
    assert (
        "'_name': 'ct_mos_lstm_lm_tiny'" in log or "ct_mos_lstm_lm_tiny" in (save / "command.txt").read_text()
    )
    # command.txt: every start with the environment that sets its speed (recipe() runs one thread)
    from fairseq_ctemp.alt.common import CPU_ALLOCATOR_ENV

    speed_env = " ".join(f"{n}={os.environ.get(n) or v}" for n, v in CPU_ALLOCATOR_ENV.items())
    assert (save / "command.txt").read_text().startswith(f"OMP_NUM_THREADS=1 {speed_env} ")
    assert '"valid_ppl"' in log and '"train_tau_mean"' in log
    assert "skipping training" in ok(recipe("train.sh", "ptb", "ct-mos", save, env=train_env))
    # the run directory keeps what it was started with: another learning rate is refused
    started = (save / "run_options.txt").read_text().strip()
    assert (
        started.startswith("dataset=ptb variant=ct-mos arch=ct_mos_lstm_lm_tiny seed=1 ")
        and "3e-3" in started
    )
    fails(
        recipe("train.sh", "ptb", "ct-mos", save, env={**train_env, "LR": "1e-3"}),
        f"SAVE_DIR {save} was started with '{started}', not '{started.replace('3e-3', '1e-3')}': give another SAVE_DIR",
    )
    # ... and so is another learning-rate schedule (the default's, the dataset's, is recorded too)
    default_schedule = "--lr-scheduler reduce_lr_on_plateau --lr-shrink 0.25 --lr-patience 0"
    assert f" {default_schedule} " in started
    fails(
        recipe("train.sh", "ptb", "ct-mos", save, env={**train_env, "SCHEDULER": "--lr-scheduler fixed"}),
        f"not '{started.replace(default_schedule, '--lr-scheduler fixed')}': give another SAVE_DIR",
    )

    # Evaluate: a wrong expected count fails loudly and writes nothing ...
    good_counts = (data_bin / "counts.tsv").read_text()
    (data_bin / "counts.tsv").write_text(good_counts.replace("test\t70\t", "test\t70\t1"))
    try:
        fails(
            recipe("evaluate.sh", save, "ptb", "test", env=env),
            "the perplexity would not be over the whole corpus",
        )
    finally:
        (data_bin / "counts.tsv").write_text(good_counts)
    assert not (save / "eval_test.json").exists()
    # ... the right one passes: every test token (incl. one </s> per line) is scored once.
    (save / "eval_test.log").unlink()
    ok(recipe("evaluate.sh", save, "ptb", "test", env=env))
    result = json.loads((save / "eval_test.json").read_text())
    assert result["evaluated_tokens"] == result["expected_tokens"] == corpus_tokens(raw / "ptb.test.txt")
    # without DEVICE_ARGS: --cpu exactly when no GPU is visible, in the command the result records
    assert ("--cpu" in shlex.split(result["command"])) is not torch.cuda.is_available()
    assert (result["tokens_per_sample"], result["context_window"]) == (140, 70)
    # every distribution scored sums to 1 (lm_eval's guard; test_lm_cli shows it catches one that does not)
    assert result["positions_checked"] >= result["evaluated_tokens"] and result["max_log_normalizer"] < 1e-5
    # 2 epochs of the tiny model reach the unigram level; a uniform model is at 160
    assert result["ppl"] == pytest.approx(2 ** result["loss_base2"], rel=1e-3)
    assert result["ppl"] < 1.05 * unigram_perplexity(raw / "ptb.train.txt", raw / "ptb.test.txt")
    assert "not re-evaluating" in ok(recipe("evaluate.sh", save, "ptb", "test", env=env))
    assert json.loads((save / "eval_test.json").read_text()) == result  # never overwritten
    # ... and not given as the answer to another protocol, nor read when cut short
    made, asked = "TOKENS_PER_SAMPLE=140 CONTEXT_WINDOW=70", "TOKENS_PER_SAMPLE=64 CONTEXT_WINDOW=32"
    fails(
        recipe(
            "evaluate.sh", save, "ptb", "test", env=dict(env, TOKENS_PER_SAMPLE="64", CONTEXT_WINDOW="32")
        ),
        f"{save}/eval_test.json was evaluated with 'dataset=ptb {made}', not 'dataset=ptb {asked}': move it away",
    )
    best = save / "checkpoint_best.pt"  # trained on since (newer than the result): not its answer
    times = (best.stat().st_atime_ns, best.stat().st_mtime_ns)
    os.utime(best, ns=(times[0], (save / "eval_test.json").stat().st_mtime_ns + 10**9))
    fails(
        recipe("evaluate.sh", save, "ptb", env=env),
        f"{best} is newer than {save}/eval_test.json (trained on since): move {save}/eval_test.json away",
    )
    os.utime(best, ns=times)
    text = (save / "eval_test.json").read_text()
    (save / "eval_test.json").write_text(text[: len(text) // 2])
    try:
        fails(
            recipe("evaluate.sh", save, "ptb", env=env),
            "eval_test.json is not an evaluation record (JSONDecodeError: ",
        )
    finally:
        (save / "eval_test.json").write_text(text)
    # each line's NLL and tokens, for lm_results.py compare: they add up to the result
    with open(save / "eval_test.sentences.tsv") as f:
        sentences = [(float(r["nll_nats"]), int(r["tokens"])) for r in csv.DictReader(f, delimiter="\t")]
    assert [n for _, n in sentences] == [
        len(line.split()) + 1 for line in (raw / "ptb.test.txt").read_text().splitlines()
    ]
    assert sum(x for x, _ in sentences) / result["evaluated_tokens"] / math.log(2) == pytest.approx(
        result["loss_base2"]
    )
    # a result evaluated before sentences were written gets them, the result itself kept
    (save / "eval_test.sentences.tsv").rename(root / "sentences.tsv")
    stamp = (save / "eval_test.json").stat().st_mtime_ns
    assert "eval_test.json kept)" in ok(recipe("evaluate.sh", save, "ptb", "test", env=env))
    assert (save / "eval_test.sentences.tsv").read_text() == (root / "sentences.tsv").read_text()
    assert (save / "eval_test.json").stat().st_mtime_ns == stamp
    # an evaluation interrupted while it wrote leaves FILE.partial only: the rerun replaces them
    for name in ("eval_test.json", "eval_test.sentences.tsv"):
        (save / name).rename(root / name)
        (save / (name + ".partial")).write_text("cut short\n")
    ok(recipe("evaluate.sh", save, "ptb", "test", env=env))
    assert json.loads((save / "eval_test.json").read_text())["loss_base2"] == result["loss_base2"]
    assert (save / "eval_test.sentences.tsv").read_text() == (root / "eval_test.sentences.tsv").read_text()
    assert not list(save.glob("*.partial"))
    # a translation model is refused in one line (its traceback in the log)
    translation = root / "translation"
    translation.mkdir()
    shutil.copy(toy_checkpoint("S"), translation / "checkpoint_best.pt")
    fails(recipe("evaluate.sh", translation, "ptb", env=env), "checkpoint_best.pt could not be evaluated on")
    assert "Traceback" in (translation / "eval_test.log").read_text()

    # Learning curves -> PNG, and the results table.
    png = root / "curves.png"
    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))  # in this process
    points = root / "curves.csv"
    run_main(
        lm_results.main,
        *("plot", "--logs", save / "train.log", "--labels", "ct-mos", "--output", png, "--csv", points),
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the points: each epoch's validation perplexity, learning rate and clipped share, as the log has them
    with open(points) as f:
        plotted = [
            (r["run"], int(r["epoch"]), float(r["valid_ppl"]), float(r["lr"]), float(r["clipped_percent"]))
            for r in csv.DictReader(f)
        ]
    logged = {int(r["epoch"]): r for r in json_log_records((save / "train.log").read_text(), "valid")}
    trained = {int(r["epoch"]): r for r in json_log_records((save / "train.log").read_text(), "train")}
    assert (
        plotted
        == [
            ("ct-mos", e, logged[e]["valid_ppl"], trained[e]["train_lr"], trained[e]["train_clip"])
            for e in sorted(logged)
        ]
        and len(plotted) == 2
    )
    table = root / "table"
    run_main(lm_results.main, "table", "--runs", root, "--variants", "ct-mos", "--output", table)
    with open(table.with_suffix(".csv")) as f:
        (row,) = csv.DictReader(f)
    assert row["variant"] == "ct-mos" and float(row["test_ppl"]) == pytest.approx(result["ppl"], abs=0.01)
    assert (row["stopped_by"], row["epochs"]) == ("not early-stopped", "2")  # MAX_EPOCH=2 ended it
    assert (row["max_epoch"], row["max_update"]) == ("2", "0")
    assert float(row["test_max_log_normalizer"]) == result["max_log_normalizer"]
    assert row["commit"] == checkout_commit()  # the code that trained it
    from fairseq_ctemp.host import cpu_model  # the machine it trained on, torch's kernels with it

    assert row["machines"] == f"{cpu_model()} ({torch.backends.cpu.get_cpu_capability()})"
    epochs = json_log_records((save / "train.log").read_text(), "train")  # the updates --clip-norm shortened
    assert float(row["clipped_percent"]) == pytest.approx(
        statistics.fmean(r["train_clip"] for r in epochs), abs=0.05
    )

    # tau statistics over the test text, from ctemp-ct-analysis's dump, against the dump's own numbers
    from fairseq_ctemp.cli import ct_analysis

    dump = root / "tau_test.tsv"
    run_main(
        ct_analysis.main,
        "dump",
        *("--path", save / "checkpoint_best.pt", "--data", data_bin),
        *("--text", raw / "ptb.test.txt", "--output", dump, "--cpu"),
    )
    run_main(lm_results.main, "tau", "--dumps", dump, "--labels", "ct-mos", "--output", root / "tau")
    with open(dump) as f:
        positions = list(csv.DictReader(f, delimiter="\t"))
    target = [float(p["tau_target"]) for p in positions]
    with open(root / "tau.csv") as f:
        (stats,) = csv.DictReader(f)
    assert int(stats["positions"]) == len(positions) == corpus_tokens(raw / "ptb.test.txt")
    assert float(stats["tau_target_mean"]) == pytest.approx(statistics.fmean(target), rel=1e-9)
    assert float(stats["tau_target_std"]) == pytest.approx(statistics.pstdev(target), rel=1e-6)
    assert float(stats["tau_min"]) == min(float(p["tau_min"]) for p in positions)
    assert float(stats["tau_max"]) == max(float(p["tau_max"]) for p in positions)
    assert min(target) <= float(stats["tau_target_p5"]) <= float(stats["tau_target_p95"]) <= max(target)
    on_target = [p["tau_argmax"] == p["target"] for p in positions]
    assert float(stats["tau_argmax_is_target"]) == pytest.approx(statistics.fmean(on_target), rel=1e-9)
    most = collections.Counter(p["tau_argmax"] for p in positions).most_common(1)[0]
    assert stats["tau_argmax_words"].startswith(f"{most[0]} {most[1] / len(positions):.0%}")


def test_bad_inputs(ptb_like, tmp_path):
    root, raw = ptb_like
    env = {"DATA_BIN": str(tmp_path / "bin"), "RAW_DIR": str(tmp_path / "raw")}
    fails(recipe("prepare.sh", "ptb3", raw, env=env), "unknown dataset 'ptb3'")
    fails(recipe("prepare.sh", "ptb", tmp_path / "nowhere", env=env), "does not exist")
    fails(recipe("prepare.sh", "wikitext-2", raw, env=env), "wiki.train.tokens not found")
    fails(recipe("prepare.sh", "ptb", raw, env=dict(env, EXPECTED_COUNTS="maybe")), "EXPECTED_COUNTS must be")
    # No DATA_DIR and no network: both PTB sources fail, with a hint to pass a local directory.
    fails(recipe("prepare.sh", "ptb", env=env), "no network?). Pass a local directory")
    fails(recipe("prepare.sh", "wikitext-103", env=env), "no network?). Pass a local directory")
    assert not (tmp_path / "bin").exists()
    # A half-written DATA_BIN is never overwritten.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "dict.txt").write_text("a 1\n")
    fails(recipe("prepare.sh", "ptb", raw, env=dict(env, EXPECTED_COUNTS="skip")), "refusing to overwrite")

    save = tmp_path / "run"
    fails(
        recipe("train.sh", "ptb", "softmax", save, env={"DATA_BIN": str(tmp_path / "none")}),
        "no prepared corpus",
    )
    fails(recipe("train.sh", "enwik8", "softmax", save), "unknown dataset 'enwik8'")
    fails(recipe("train.sh", "ptb", "sparsemax", save), "unknown variant 'sparsemax'")
    for bad in ("constant-0", "constant-x", "constant-"):
        fails(recipe("train.sh", "ptb", bad, save), "constant-T needs a number T > 0")
        fails(recipe("train.sh", "ptb", "mos-" + bad, save), "mos-constant-T needs a number T > 0")
    for variant in ("ct-mos", "mos-constant-2"):
        fails(recipe("train.sh", "wikitext-103", variant, save), "not defined for wikitext-103")
    assert not save.exists()

    fails(recipe("evaluate.sh", save, "ptb"), "no checkpoint")
    fails(recipe("evaluate.sh", save, "ptb", "dev"), "unknown subset 'dev'")
    fails(recipe("evaluate.sh", save, "ptb5"), "unknown dataset 'ptb5'")
    assert recipe("train.sh", "ptb").returncode == 2  # usage


@pytest.mark.parametrize("given", [None, "7"])
def test_the_recipes_set_the_cpu_allocator_unless_told_otherwise(given, monkeypatch):
    """The LM scripts that train and evaluate (train.sh, which the experiments call, evaluate.sh)
    source common.sh, which exports PyTorch's huge pages and glibc's heap settings (the same
    numbers, faster CPU steps: docs/speed.md), with the values the ALT sweep's runs get from
    tool_env, unless the caller set them."""
    from fairseq_ctemp.alt.common import CPU_ALLOCATOR_ENV, tool_env

    assert set(CPU_ALLOCATOR_ENV) == {"THP_MEM_ALLOC_ENABLE", "MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_"}
    for name in CPU_ALLOCATOR_ENV:
        monkeypatch.delenv(name, raising=False)
        if given is not None:
            monkeypatch.setenv(name, given)
    expected = {name: given or value for name, value in CPU_ALLOCATOR_ENV.items()}
    assert {name: tool_env()[name] for name in CPU_ALLOCATOR_ENV} == expected
    common = os.path.join(REPO, "examples", "language_model", "common.sh")
    show = "import json, os, sys; print(json.dumps({n: os.environ.get(n) for n in sys.argv[1:]}))"
    proc = subprocess.run(
        ["bash", "-c", f'source "{common}" && python3 -c "$SHOW" {" ".join(expected)}', "recipe.sh"],
        env={**os.environ, "SHOW": show},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout) == expected


def test_the_cpu_allocator_settings_change_no_number(tmp_path):
    """Training with the recipes' allocator settings (CPU_ALLOCATOR_ENV: huge pages, glibc's heap
    kept between steps, where freed memory comes back holding old values) and with glibc's and
    torch's defaults (every tensor above 32 MB mapped afresh, zero-filled) ends at bit for bit the
    same parameters: nothing reads memory it has not written. Tokens x vocabulary tensors of 2,800
    x ~6,000 floats (67 MB, three of them for the MoS head) are above glibc's largest mapping
    threshold (32 MiB)."""
    import numpy as np
    import torch

    from fairseq_ctemp.alt.common import CPU_ALLOCATOR_ENV

    rng = np.random.default_rng(1)
    for split, lines in (("train", 2500), ("valid", 50)):
        words = rng.integers(0, 6000, (lines, 14))
        (tmp_path / split).write_text("".join(" ".join(f"w{w}" for w in row) + "\n" for row in words))
    data = tmp_path / "bin"
    run_fairseq(
        "fairseq-preprocess",
        *("--only-source", "--workers", "1", "--destdir", data),
        *("--trainpref", tmp_path / "train", "--validpref", tmp_path / "valid"),
    )
    assert len((data / "dict.txt").read_text().splitlines()) >= 5900
    train = [*command("ctemp-train"), data, "--user-dir", os.path.join(REPO, "fairseq_ctemp")] + (
        "--task language_modeling --arch ct_mos_lstm_lm_tiny --criterion ct_cross_entropy --cpu --seed 1 "
        "--tokens-per-sample 70 --max-tokens 2800 --optimizer adam --lr 3e-3 --max-update 3 --num-workers 0"
    ).split()
    params = []
    unset = {k: v for k, v in os.environ.items() if k not in CPU_ALLOCATOR_ENV}
    for name, env in (("recipes", {**unset, **CPU_ALLOCATOR_ENV}), ("defaults", unset)):
        env = real_processes({**env, "OMP_NUM_THREADS": "1"})  # glibc reads it at the start
        subprocess.run([*train, "--save-dir", tmp_path / name], env=env, check=True, capture_output=True)
        checkpoint = torch.load(
            tmp_path / name / "checkpoint_last.pt", map_location="cpu", weights_only=False
        )
        params.append(checkpoint["model"])
    assert params[0].keys() == params[1].keys()
    for key in params[0]:
        assert torch.equal(params[0][key], params[1][key]), key


def test_training_time_adds_up_every_process_of_a_resumed_run():
    """fairseq's train_wall restarts at 0 in each process of a resumed run; an epoch trained again
    after an interruption counts once."""
    from fairseq_ctemp.lm_results import runs

    start = "2026-01-01 00:00:00 | INFO | fairseq_cli.train | {'_name': None, 'common': {}}\n"

    def epoch(n, wall):
        return f'2026-01-01 00:00:00 | INFO | train | {{"epoch": {n}, "train_loss": "5.1", "train_wall": "{wall}"}}\n'

    log = start + epoch(1, 100) + epoch(2, 200)  # killed during epoch 3
    log += start + epoch(3, 250) + epoch(4, 370)  # a first epoch longer than the last one before
    log += start + epoch(4, 140) + epoch(5, 260)  # epoch 4 again (killed before its checkpoint)
    assert runs.training_seconds(log) == 100 + 100 + 250 + 140 + 120
    assert runs.training_seconds(start) is None
    assert runs.devices_text(runs.training_seconds_by_device(log)) is None  # not in the log


def test_the_epochs_at_which_a_run_was_resumed():
    from fairseq_ctemp.lm_results import runs

    line = (
        "2026-01-01 00:00:00 | INFO | fairseq.trainer | Loaded checkpoint runs/{} (epoch {} @ {} updates)\n"
    )
    log = (
        line.format("ct/checkpoint_last.pt", 28, 17928)
        + "...\n"
        + line.format("ct/checkpoint_last.pt", 35, 22576)
    )
    assert runs.resumed_at(log) == "28 35"
    assert runs.resumed_at("2026-01-01 00:00:00 | INFO | fairseq_cli.train | no checkpoint found\n") is None


def test_the_commits_a_run_trained_from_are_listed_once_each_in_order(tmp_path):
    from fairseq_ctemp.lm_results import runs

    assert runs.commits(str(tmp_path)) is None  # no command.txt
    start = "OMP_NUM_THREADS=1 ctemp-train data --seed 2 {}\n"
    (tmp_path / "command.txt").write_text(start.format(""))  # written before commits were recorded
    assert runs.commits(str(tmp_path)) is None
    (tmp_path / "command.txt").write_text(
        start.format("# commit 7b1843f")
        + start.format("# commit 7b1843f")
        + start.format("# commit 3d3ece0+changes")
    )
    assert runs.commits(str(tmp_path)) == "7b1843f 3d3ece0+changes"
    # a run resumed by a checkout that records them after starts that did not: those are "?"
    (tmp_path / "command.txt").write_text(start.format("") + start.format("# commit 01aad6f"))
    assert runs.commits(str(tmp_path)) == "? 01aad6f"


def test_the_machines_a_run_trained_on_are_listed_once_each_in_order(tmp_path):
    from fairseq_ctemp.lm_results import runs

    assert runs.machines(str(tmp_path)) is None  # no command.txt
    start = "OMP_NUM_THREADS=1 ctemp-train data --seed 2 {}\n"
    (tmp_path / "command.txt").write_text(start.format("# commit 7b1843f"))  # before machines were
    assert runs.machines(str(tmp_path)) is None
    (tmp_path / "command.txt").write_text(
        start.format("# commit 7b1843f")
        + start.format("# host AMD EPYC (AVX2) # commit 7b1843f")
        + start.format("# host AMD EPYC (AVX2) # commit 3d3ece0")
        + start.format("# host Intel Xeon (AVX512); NVIDIA H200 # commit 3d3ece0+changes")
    )
    assert runs.machines(str(tmp_path)) == "? / AMD EPYC (AVX2) / Intel Xeon (AVX512); NVIDIA H200"
    assert runs.commits(str(tmp_path)) == "7b1843f 3d3ece0 3d3ece0+changes"  # still read after it


def test_an_evaluation_recorded_before_the_guards_reads_back_without_their_counts(tmp_path):
    from fairseq_ctemp.lm_results import runs

    older = {  # eval_test.json as evaluate.sh wrote it before the guards' counts were recorded
        "dataset": "data-bin/ptb",
        "subset": "test",
        "checkpoint": "checkpoint_best.pt",
        "tokens_per_sample": 140,
        "context_window": 70,
        "evaluated_tokens": 82430,
        "expected_tokens": 82430,
        "loss_base2": 6.5,
        "ppl": 2**6.5,
        "command": "fairseq-eval-lm data-bin/ptb",
        "date": "2026-11-22T10:00:00Z",
    }
    (tmp_path / "eval_test.json").write_text(json.dumps(older))
    assert runs.evaluations(str(tmp_path), "") == {
        "valid_ppl": None,
        "valid_tokens": None,
        "test_ppl": round(2**6.5, 2),
        "test_tokens": 82430,
        "eval_protocol": "140/70",
        "test_max_log_normalizer": None,
    }


def evaluation_record(path, tokens_per_sample, context_window, loss_base2):
    """An eval_test_checkpoint_last.json in path, as evaluate.sh writes it."""
    path.mkdir(parents=True, exist_ok=True)
    record = {
        "dataset": "ptb",
        "subset": "test",
        "checkpoint": str(path / "checkpoint_last.pt"),
        "tokens_per_sample": tokens_per_sample,
        "context_window": context_window,
        "evaluated_tokens": 82430,
        "expected_tokens": 82430,
        "loss_base2": loss_base2,
        "ppl": 2**loss_base2,
        "command": "fairseq-eval-lm data-bin/ptb",
        "date": "2026-11-22T10:00:00Z",
    }
    (path / "eval_test_checkpoint_last.json").write_text(json.dumps(record))


def test_the_protocols_table_lists_one_checkpoints_settings_by_tokens_scored_then_context(tmp_path):
    """ptb_small_experiment.sh's RESULTS_protocols.md: the run's own evaluation and those of its
    protocol_<block>_<context> folders, each setting once, fewest tokens scored per block first."""
    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))
    run = tmp_path / "runs" / "softmax"
    evaluation_record(run, 140, 70, 6.7)  # the run's own: 70 scored per block
    evaluation_record(run / "protocol_280_210", 280, 210, 6.6)  # 70
    evaluation_record(run / "protocol_70_0", 70, 0, 6.9)  # 70
    evaluation_record(run / "protocol_70_35", 70, 35, 6.8)  # 35
    (run / "protocol_140_0").mkdir()  # not evaluated (yet): no row
    out = tmp_path / "protocols.md"
    proc = run_main(
        lm_results.main, "protocols", "--runs", tmp_path / "runs", "--variants", "softmax", "--output", out
    )
    expected = [
        f"| softmax | {block} | {context} | {block - context} | {2**loss:.2f} | 82,430 |"
        for block, context, loss in [(70, 35, 6.8), (70, 0, 6.9), (140, 70, 6.7), (280, 210, 6.6)]
    ]
    assert out.read_text().splitlines()[2:] == expected
    assert proc.stdout == out.read_text()
    # written once: a second run is refused without --force
    again = run_main(
        lm_results.main,
        "protocols",
        "--runs",
        tmp_path / "runs",
        "--variants",
        "softmax",
        "--output",
        out,
        check=False,
    )
    assert (
        again.returncode != 0 and "--force" in again.stderr and out.read_text().splitlines()[2:] == expected
    )


def test_a_table_refuses_runs_that_are_not_there_and_protocols_refuse_to_be_empty(tmp_path):
    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    proc = run_main(
        lm_results.main,
        "table",
        "--runs",
        runs_dir,
        "--variants",
        "softmax",
        "ct",
        "--output",
        tmp_path / "t",
        check=False,
    )
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        f"lm_results.py table: error: no run {runs_dir / 'softmax'}, {runs_dir / 'ct'}: name the runs there "
        "are (`status` says where each stands)"
    ]
    proc = run_main(
        lm_results.main,
        "protocols",
        "--runs",
        runs_dir,
        "--variants",
        "softmax",
        "--output",
        tmp_path / "p.md",
        check=False,
    )
    assert (
        proc.returncode != 0 and proc.stderr == "lm_results.py protocols: error: no protocol results found\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["runs"]  # nothing written


def test_the_status_of_a_run_follows_the_metric_and_the_ties_of_fairseqs_early_stopping(tmp_path):
    """status goes by the metric the run's configuration names (here nll_loss, not the loss), takes
    the last of tied epochs as the best checkpoint, counts a tie as no improvement, and keeps the
    latest record of an epoch trained again after a resume."""
    from fairseq_ctemp.lm_results import status

    def line(kind, record):
        return f"2026-11-29 10:00:00 | INFO | {kind} | {json.dumps(record)}\n"

    config = "2026-11-29 09:00:00 | INFO | fairseq_cli.train | {'_name': None, 'checkpoint': {"
    config += "'best_checkpoint_metric': 'nll_loss', 'maximize_best_checkpoint_metric': False}}\n"
    nll = {1: "7.000", 2: "6.900", 3: "6.950", 4: "6.900", 5: "6.901"}  # 4 ties 2: the best, no improvement
    log = config
    for epoch, value in nll.items():
        loss = f"{2 * float(value) - epoch / 10:.3f}"  # a loss that falls every epoch: not what counts
        log += line("train", {"epoch": epoch, "train_lr": f"{0.003 / epoch:.6g}"})
        log += line(
            "valid", {"epoch": epoch, "valid_loss": loss, "valid_nll_loss": value, "valid_ppl": f"{epoch}0.5"}
        )
    log += config + line(
        "valid", {"epoch": 5, "valid_loss": "13", "valid_nll_loss": "6.950", "valid_ppl": "55.5"}
    )
    run = tmp_path / "ct-mos@2"
    run.mkdir()
    (run / "train.log").write_text(log)
    (run / "checkpoint_last.pt").write_bytes(b"")
    row = status.run_status(str(run))
    assert row == [
        "ct-mos@2", "unfinished: resumes from checkpoint_last.pt", 5, 40.5, 4, 55.5, 0.0006, 3, None
    ]  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the kernel's list of locks is Linux's")
def test_the_status_of_a_run_names_the_recipe_holding_its_save_dir(tmp_path):
    """A run whose SAVE_DIR lock (examples/run_options.sh) is held is being trained, or once
    trained, evaluated, by the holder its lock file names; a lock file no one holds (left by a
    recipe that ended) changes nothing."""
    import fcntl

    from fairseq_ctemp.lm_results import status

    run = tmp_path / "ct"
    run.mkdir()
    (run / "train.log").write_text("2026-11-29 09:00:00 | INFO | fairseq_cli.train | started\n")
    (run / "checkpoint_last.pt").write_bytes(b"")
    (run / ".lock").write_text("pid 12 on elsewhere\n")
    assert status.run_status(str(run))[1] == "unfinished: resumes from checkpoint_last.pt"
    with open(run / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert status.run_status(str(run))[1] == "training now (pid 12 on elsewhere)"
        with open(run / "train.log", "a") as log:
            log.write(f"2026-11-29 10:00:00 | INFO | fairseq_cli.train | {status.DONE} 9.0 seconds\n")
        assert status.run_status(str(run))[1] == "trained: evaluating now (pid 12 on elsewhere)"
    assert status.run_status(str(run))[1] == "trained: evaluation to do"


def test_the_ar_tar_weights_are_those_of_the_latest_start():
    from fairseq_ctemp.lm_results import runs

    config = (
        "2026-01-01 00:00:00 | INFO | fairseq_cli.train | {{'_name': None, 'model': {{'_name': 'ct_lstm_lm', "
        "'activation_regularization': {}, 'dropout': 0.2, 'temporal_activation_regularization': {}}}}}\n"
    )
    assert runs.ar_tar_weights(config.format(2.0, 1.0) + "...\n" + config.format(0.0, 0.0)) == "0.0/0.0"
    assert runs.ar_tar_weights(config.format(2.0, 1.0)) == "2.0/1.0"
    assert runs.ar_tar_weights("2026-01-01 | INFO | fairseq_cli.train | {'_name': None}\n") is None


def test_a_rows_seeds_share_a_colour_and_differ_in_line_style():
    from fairseq_ctemp.lm_results import curves

    rows = ["softmax", "constant-0.5"]
    styles = {label: curves.line_style(label, rows) for label in ("softmax", "softmax@2", "constant-0.5@2")}
    assert styles["softmax"][0] == styles["softmax@2"][0] != styles["constant-0.5@2"][0]
    assert styles["softmax"][1] != styles["softmax@2"][1] == styles["constant-0.5@2"][1]


def test_the_best_epoch_is_that_of_checkpoint_best():
    """fairseq saves checkpoint_best.pt when a validation loss (rounded as logged) is not worse than
    the best: of equal losses the latest is best."""
    from fairseq_ctemp.lm_results import runs

    valid = {33: 6.666, 34: 6.667, 35: 6.667, 36: 6.666}
    saved = "| INFO | fairseq.checkpoint_utils | Saved checkpoint runs/x/checkpoint_best.pt (epoch {} @ {} updates, score 6.666)\n"
    assert runs.best_epoch(saved.format(33, 21912) + saved.format(36, 23904), valid) == 36
    assert runs.best_epoch("", valid) == 36  # the same rule, from the losses alone


def test_training_time_of_a_run_that_moved_from_a_gpu_to_the_cpu():
    """Each process's device is fairseq's common.cpu in the configuration it logs at its start."""
    from fairseq_ctemp.lm_results import runs

    def start(cpu):
        return f"2026-01-01 00:00:00 | INFO | fairseq_cli.train | {{'_name': None, 'common': {{'cpu': {cpu}}}}}\n"

    def epoch(n, wall):
        return f'2026-01-01 00:00:00 | INFO | train | {{"epoch": {n}, "train_loss": "5.1", "train_wall": "{wall}"}}\n'

    on_gpu = start(False) + epoch(1, 20) + epoch(2, 41)
    log = on_gpu + start(True) + epoch(3, 300) + epoch(4, 1234)
    assert runs.training_seconds_by_device(log) == {"gpu": 41, "cpu": 1234}
    assert runs.devices_text(runs.training_seconds_by_device(log)) == "GPU 41 s + CPU 1,234 s"
    assert runs.devices_text(runs.training_seconds_by_device(on_gpu)) == "GPU"
    assert runs.training_seconds(log) == 1275


def test_compare_pairs_the_sentences_of_two_runs(tmp_path):
    """lm_results.py compare: a variant better by 0.1 nats on every token has ratio e^-0.1 and
    p < 1/samples; one that only adds symmetric noise to the baseline's sentences has p > 0.05."""
    import numpy as np

    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))
    rng = np.random.default_rng(0)
    tokens = rng.integers(5, 30, size=400)
    base = tokens * 4.5 + rng.normal(0, 10, size=400)
    noise = rng.normal(0, 3, size=400)
    for name, nll in (("a", base), ("better", base - 0.1 * tokens), ("noisy", base + noise - noise.mean())):
        (tmp_path / name).mkdir()
        rows = "".join(f"{float(x)!r}\t{int(n)}\n" for x, n in zip(nll, tokens))
        (tmp_path / name / "eval_test.sentences.tsv").write_text("nll_nats\ttokens\n" + rows)
    out = tmp_path / "compare"
    run_main(
        lm_results.main,
        "compare",
        "--runs",
        tmp_path,
        "--variants",
        "a",
        "better",
        "noisy",
        "--samples",
        "2000",
        "--output",
        out,
    )
    with open(out.with_suffix(".csv")) as f:
        better, noisy = csv.DictReader(f)
    assert float(better["ppl_ratio"]) == pytest.approx(math.exp(-0.1)) and float(better["p_value"]) == 0
    assert float(better["ppl_baseline"]) == pytest.approx(math.exp(base.sum() / tokens.sum()))
    assert float(noisy["ppl_ratio"]) == pytest.approx(1.0) and float(noisy["p_value"]) > 0.05
    assert float(noisy["ratio_low"]) < 1 < float(noisy["ratio_high"])
    assert "< 0.0005" in (tmp_path / "compare.md").read_text()
    # runs scored on other sentences (one sentence's token count differs) are not paired
    other = tmp_path / "other"
    other.mkdir()
    rows = "".join(f"{float(x)!r}\t{int(n) + (i == 7)}\n" for i, (x, n) in enumerate(zip(base, tokens)))
    (other / "eval_test.sentences.tsv").write_text("nll_nats\ttokens\n" + rows)
    for variants, samples, message in (
        (
            ["a", "other"],
            "2000",
            "other and a were not scored on the same sentences (eval_test.sentences.tsv)",
        ),
        (["a", "better"], "99", "--samples must be >= 100, got 99"),
    ):
        argv = ["compare", "--runs", tmp_path, "--variants", *variants, "--samples", samples]
        proc = run_main(lm_results.main, *argv, "--output", tmp_path / "refused", check=False)
        assert proc.returncode != 0 and proc.stderr == f"lm_results.py compare: error: {message}\n"
        assert not (tmp_path / "refused.csv").exists() and not (tmp_path / "refused.md").exists()


def test_seeds_are_the_unit_of_the_comparison_with_the_baseline(tmp_path):
    """`lm_results.py seeds`: Welch's t-test on per-seed log perplexities, against the textbook
    formulas (Welch-Satterthwaite degrees of freedom, Student t tail) computed by hand here."""
    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))
    ppl = {"softmax": 85.0, "softmax@2": 87.0, "softmax@3": 86.0, "ct": 88.0, "ct@2": 90.5, "ct@3": 89.0}
    ppl.update({"mos": 88.7, "flat": 80.0, "flat@2": 80.0, "flat@3": 80.0, "low": 70.0, "low@2": 70.5})
    table = tmp_path / "t.csv"
    table.write_text("variant,test_ppl\n" + "".join(f"{k},{v}\n" for k, v in ppl.items()), encoding="utf-8")
    run_main(lm_results.main, "seeds", "--table", table, "--output", tmp_path / "s")
    rows = {r["variant"]: r for r in read_csv(tmp_path / "s.csv")}
    a = [math.log(ppl[k]) for k in ("ct", "ct@2", "ct@3")]
    b = [math.log(ppl[k]) for k in ("softmax", "softmax@2", "softmax@3")]
    va, vb = statistics.variance(a) / 3, statistics.variance(b) / 3
    t = (statistics.mean(a) - statistics.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    from scipy.stats import t as student

    assert float(rows["ct"]["welch_t"]) == pytest.approx(t)
    assert float(rows["ct"]["welch_df"]) == pytest.approx(df)
    assert float(rows["ct"]["p_value"]) == pytest.approx(2 * student.sf(abs(t), df))
    assert rows["ct"]["verdict"] == ("higher" if 2 * student.sf(abs(t), df) < 0.05 else "inconclusive")
    # the 95 % interval of the difference of the mean log perplexities, as one of the ratio
    half = student.ppf(0.975, df) * math.sqrt(va + vb)
    low, high = (math.exp(statistics.mean(a) - statistics.mean(b) + s * half) for s in (-1, 1))
    assert (float(rows["ct"]["ratio_ci_low"]), float(rows["ct"]["ratio_ci_high"])) == (
        pytest.approx(low),
        pytest.approx(high),
    )
    assert rows["mos"]["ratio_ci_low"] == rows["softmax"]["ratio_ci_low"] == ""  # no test; the baseline
    d = [x - y for x, y in zip(a, b)]  # the paired check: the mean difference over its standard error
    t = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(3))
    assert (rows["ct"]["paired_seeds"], float(rows["ct"]["paired_t"])) == ("3", pytest.approx(t))
    assert float(rows["ct"]["paired_p"]) == pytest.approx(2 * student.sf(abs(t), 2))
    assert (rows["low"]["paired_seeds"], rows["mos"]["paired_seeds"], rows["mos"]["paired_p"]) == (
        "2",
        "1",
        "",
    )
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert f"| {float(rows['ct']['paired_p']):.5g} (3) |" in md and "| – (1) |" in md
    assert f"| {low:.4f}–{high:.4f} |" in md
    assert float(rows["ct"]["ratio_to_baseline"]) == pytest.approx(
        math.exp(statistics.mean(a) - statistics.mean(b))
    )
    assert rows["mos"]["verdict"] == "no test: one seed" and rows["mos"]["p_value"] == ""
    run_main(lm_results.main, "seeds", "--table", table, "--baseline", "mos", "--output", tmp_path / "m")
    against_mos = {r["variant"]: r for r in read_csv(tmp_path / "m.csv")}  # a baseline of one seed
    assert against_mos["ct"]["verdict"] == "no test: one seed of the baseline"
    assert against_mos["ct"]["p_value"] == ""
    # two seeds: tested (here p < 0.05), but not enough to decide
    assert (
        float(rows["low"]["p_value"]) < 0.05 and rows["low"]["verdict"] == "inconclusive: fewer than 3 seeds"
    )
    # no spread over its seeds (the baseline has some): Welch's test still applies
    assert rows["flat"]["verdict"] == "lower" and float(rows["flat"]["welch_df"]) == pytest.approx(2)
    flat = tmp_path / "flat.csv"  # neither row spreads: no test, never a verdict from a NaN
    flat.write_text("variant,test_ppl\nsoftmax,80\nsoftmax@2,80\nct,81\nct@2,81\n", encoding="utf-8")
    run_main(lm_results.main, "seeds", "--table", flat, "--output", tmp_path / "no_spread")
    (ct,) = [r for r in read_csv(tmp_path / "no_spread.csv") if r["variant"] == "ct"]
    assert ct["verdict"] == "no test: no spread over the seeds" and ct["p_value"] == ""
    assert rows["softmax"]["seeds"] == "1 2 3"
    with pytest.raises(SystemExit, match="exists; refusing to overwrite"):
        lm_results.main(["seeds", "--table", str(table), "--output", str(tmp_path / "s")])
    # runs trained elsewhere, in a table of their own: the same rows and tests as one table (the
    # second saved with a byte order mark, as a spreadsheet saves it)
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    items = list(ppl.items())
    for path, part, encoding in ((first, items[::2], "utf-8"), (second, items[1::2], "utf-8-sig")):
        path.write_text("variant,test_ppl\n" + "".join(f"{k},{v}\n" for k, v in part), encoding=encoding)
    run_main(lm_results.main, "seeds", "--table", first, second, "--output", tmp_path / "both")
    assert (tmp_path / "both.csv").read_text(encoding="utf-8") == (tmp_path / "s.csv").read_text(
        encoding="utf-8"
    )
    with pytest.raises(SystemExit, match="seed 1 is there twice"):
        lm_results.main(["seeds", "--table", str(first), str(first), "--output", str(tmp_path / "twice")])
    # runs trained with other AR/TAR weights are never pooled or compared (tables that predate the
    # column say nothing and are taken as they are)
    on, off, old = tmp_path / "on.csv", tmp_path / "off.csv", tmp_path / "old.csv"
    on.write_text("variant,test_ppl,ar_tar\nsoftmax,85,2.0/1.0\nct,88,2.0/1.0\n", encoding="utf-8")
    off.write_text("variant,test_ppl,ar_tar\nsoftmax@2,95,0.0/0.0\nct@2,93,0.0/0.0\n", encoding="utf-8")
    old.write_text("variant,test_ppl\nsoftmax@3,86\nct@3,89\n", encoding="utf-8")
    with pytest.raises(
        SystemExit, match=r"different AR/TAR weights \(2\.0/1\.0: softmax@1 ct@1; 0\.0/0\.0: softmax@2"
    ):
        lm_results.main(["seeds", "--table", str(on), str(off), "--output", str(tmp_path / "mixed")])
    assert not (tmp_path / "mixed.csv").exists()
    run_main(lm_results.main, "seeds", "--table", on, old, "--output", tmp_path / "on_and_old")
    # nor runs scored on another test set (another corpus, say) or under another protocol
    ptb = tmp_path / "ptb.csv"
    ptb.write_text("variant,test_ppl,test_tokens,eval_protocol\nsoftmax,85,82430,140/70\n", encoding="utf-8")
    for name, other, words in (
        ("wiki", "softmax@2,95,245569,140/70", r"scored on different test sets \(test tokens\) \(82430: "),
        ("short", "softmax@2,86,82430,35/0", r"under different evaluation protocols \(blocks/context\)"),
    ):
        (tmp_path / f"{name}.csv").write_text(
            "variant,test_ppl,test_tokens,eval_protocol\n" + other + "\n", encoding="utf-8"
        )
        with pytest.raises(SystemExit, match=words):
            lm_results.main(
                [
                    "seeds",
                    "--table",
                    str(ptb),
                    str(tmp_path / f"{name}.csv"),
                    "--output",
                    str(tmp_path / f"mixed_{name}"),
                ]
            )


def refused(lm_results, tables, output, match):
    """`lm_results.py seeds` over ``tables`` refuses them with ``match`` (a regular expression)."""
    with pytest.raises(SystemExit, match=match):
        lm_results.main(["seeds", "--table", *map(str, tables), "--output", str(output)])


def test_the_seeds_of_a_row_are_models_of_one_size_trained_alike(tmp_path):
    """`lm_results.py seeds` over tables made in other places (EARLIER_TABLES): a row whose seeds
    are models of different sizes (their parameter counts; other EMBED_DIM, say) is refused, not
    pooled (rows may differ in size: their heads do), and so are runs of other learning rates,
    patience or caps."""
    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))
    here, other, same = tmp_path / "here.csv", tmp_path / "other.csv", tmp_path / "same.csv"
    here.write_text("variant,test_ppl,params\nsoftmax,85,1000\nct,88,1200\n", encoding="utf-8")
    other.write_text("variant,test_ppl,params\nsoftmax@2,80,4000\nct@2,87,1200\n", encoding="utf-8")
    same.write_text("variant,test_ppl,params\nsoftmax@2,86,1000\nct@2,87,1200\n", encoding="utf-8")
    refused(
        lm_results,
        [here, other],
        tmp_path / "mixed",
        r"the seeds of softmax are models of different sizes \(parameters 1000: softmax@1; 4000: "
        r"softmax@2: other EMBED_DIM",
    )
    assert not (tmp_path / "mixed.csv").exists()
    run_main(lm_results.main, "seeds", "--table", here, same, "--output", tmp_path / "one_size")
    assert [r["seeds"] for r in read_csv(tmp_path / "one_size.csv")] == ["1 2", "1 2"]
    # nor runs stopped by another patience, or trained at another learning rate
    patient = tmp_path / "patient.csv"
    patient.write_text("variant,test_ppl,patience\nsoftmax@2,86,5\nct@2,87,5\n", encoding="utf-8")
    three = tmp_path / "three.csv"
    three.write_text("variant,test_ppl,patience\nsoftmax,85,3\nct,88,3\n", encoding="utf-8")
    refused(
        lm_results,
        [three, patient],
        tmp_path / "p",
        r"stopped by different early-stopping patience \(--patience\) \(3: ",
    )
    faster = tmp_path / "faster.csv"
    faster.write_text(
        "variant,test_ppl,params,lr\nsoftmax@2,86,1000,0.01\nct@2,87,1200,0.01\n", encoding="utf-8"
    )
    here.write_text("variant,test_ppl,params,lr\nsoftmax,85,1000,0.003\nct,88,1200,0.003\n", encoding="utf-8")
    refused(
        lm_results,
        [here, faster],
        tmp_path / "lr",
        r"trained with different learning rates \(--lr\) \(0\.003: softmax@1 ct@1; 0\.01: ",
    )
    # nor runs of different caps (--max-epoch, --max-update) where one did not stop early: its cap
    # may have ended it; where every run stopped early, no cap acted
    header = "variant,test_ppl,stopped_by,max_epoch,max_update\n"
    longer = tmp_path / "longer.csv"
    longer.write_text(header + "softmax,85,early stop,500,0\nct,88,early stop,500,0\n", encoding="utf-8")
    shorter = tmp_path / "shorter.csv"
    shorter.write_text(
        header + "softmax@2,86,early stop,40,0\nct@2,87,not early-stopped,40,0\n", encoding="utf-8"
    )
    refused(
        lm_results,
        [longer, shorter],
        tmp_path / "cap",
        r"runs trained to different caps \(--max-epoch 500 --max-update 0: softmax@1 ct@1; "
        r"--max-epoch 40 --max-update 0: softmax@2 ct@2\), where ct@2 did not stop early",
    )
    assert not (tmp_path / "cap.csv").exists()
    shorter.write_text(header + "softmax@2,86,early stop,40,0\nct@2,87,early stop,40,0\n", encoding="utf-8")
    run_main(lm_results.main, "seeds", "--table", longer, shorter, "--output", tmp_path / "no_cap_acted")


def test_ar_tar_is_on_or_off_and_a_run_is_never_resumed_with_the_other(tmp_path):
    """ptb_converged_experiment.sh AR_TAR: refused before any work (no data prepared) when it is
    neither on nor off, or when a run directory was trained with the other setting."""
    fails(
        recipe("ptb_converged_experiment.sh", env={"AR_TAR": "maybe", "EXP_DIR": str(tmp_path)}),
        "AR_TAR must be on or off, got 'maybe'",
    )
    run = tmp_path / "runs" / "ct@2"
    run.mkdir(parents=True)
    (run / "checkpoint_last.pt").write_bytes(b"")  # a run from before the switch: trained with AR/TAR
    env = {"AR_TAR": "off", "EXP_DIR": str(tmp_path), "VARIANTS": "softmax ct@2"}
    fails(recipe("ptb_converged_experiment.sh", env=env), f"{run} was trained with AR_TAR=on, not off")
    (run / "ar_tar").write_text("off\n")
    fails(
        recipe("ptb_converged_experiment.sh", "results", env={**env, "AR_TAR": "on"}),
        "trained with AR_TAR=off, not on",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no data-bin: refused before any work


def test_without_clipping_every_run_trains_unclipped_and_without_ar_tar(ptb_like, tmp_path):
    """CLIP=off: softmax, constant-0.5 and mos-constant-2 train with --clip-norm 0 (no clipping) and without AR and
    TAR (read from their checkpoints' configs); refused before any work: a CLIP that is neither on
    nor off, off with AR and TAR (added unscaled: the loss scale would still act), off for a CT run
    (its scale changes with every batch), off with EARLIER_TABLES that do not record their clip norm
    (tables of clipped runs), and a run directory trained with clipping, in either step. The results
    step's table records the clip norm 0, and pools the runs with EARLIER_TABLES of unclipped runs
    only."""
    env = {"EXP_DIR": str(tmp_path / "refused")}
    fails(recipe("ptb_converged_experiment.sh", env={**env, "CLIP": "maybe"}), "CLIP must be on or off")
    fails(recipe("ptb_converged_experiment.sh", env={**env, "CLIP": "off"}), "CLIP=off needs AR_TAR=off")
    off = {**env, "CLIP": "off", "AR_TAR": "off", "VARIANTS": "softmax ct-mos@2"}
    fails(recipe("ptb_converged_experiment.sh", env=off), "CLIP=off: ct-mos@2's loss scale")
    old_table = tmp_path / "tables" / "old.csv"  # from before the clip norm was recorded
    old_table.parent.mkdir()
    old_table.write_text("variant,test_ppl,ar_tar\r\nsoftmax@2,95,0.0/0.0\r\n", encoding="utf-8")
    earlier = {**off, "VARIANTS": "softmax", "EARLIER_TABLES": str(old_table)}
    fails(
        recipe("ptb_converged_experiment.sh", "results", env=earlier),
        f"CLIP=off: EARLIER_TABLES {old_table} does not record its runs' clip norm",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tables"]
    clipped = tmp_path / "refused" / "runs" / "softmax"  # a run from before CLIP: trained with clipping
    clipped.mkdir(parents=True)
    (clipped / "checkpoint_last.pt").write_bytes(b"")
    (clipped / "ar_tar").write_text("off\n")
    for step in ("train", "results"):
        refused = recipe("ptb_converged_experiment.sh", step, env={**earlier, "EARLIER_TABLES": ""})
        fails(refused, f"{clipped} was trained with CLIP=on, not off")
    assert not (tmp_path / "refused" / "data-bin").exists()
    exp = tmp_path / "off"
    variants = "softmax constant-0.5 mos-constant-2"
    env = converged_env(ptb_like, exp, CLIP="off", AR_TAR="off", VARIANTS=variants, JOBS="2")
    ok(recipe("ptb_converged_experiment.sh", env=env))
    heads = {}
    for run in variants.split():
        state = torch.load(exp / "runs" / run / "checkpoint_last.pt", map_location="cpu", weights_only=False)
        model = state["cfg"]["model"]
        assert state["cfg"]["optimization"]["clip_norm"] == 0
        assert model["activation_regularization"] == model["temporal_activation_regularization"] == 0
        heads[run] = (
            model["output_head"],
            model["ct_normalization"],
            model["ct_constant"],
            model["mos_components"],
        )
    # mos-constant-T: the MoS head (MOS_COMPONENTS 2) at the constant temperature T
    assert heads["constant-0.5"][:3] == ("softmax", "constant", 0.5)
    assert heads["mos-constant-2"] == ("mos", "constant", 2.0, 2)
    unclipped, clipped_table = tmp_path / "tables" / "unclipped.csv", tmp_path / "tables" / "clipped.csv"
    for path, norm in ((unclipped, "0.0"), (clipped_table, "0.25")):
        path.write_text(f"variant,test_ppl,clip_norm,ar_tar\nsoftmax@2,95,{norm},0.0/0.0\n", encoding="utf-8")
    results = tmp_path / "results" / "r"
    env = {**env, "RESULTS": str(results), "EARLIER_TABLES": str(unclipped)}
    ok(recipe("ptb_converged_experiment.sh", "results", env=env))
    with open(f"{results}.csv", encoding="utf-8") as f:
        assert [row["clip_norm"] for row in csv.DictReader(f)] == ["0.0"] * 3
    with open(f"{results}_seeds.csv", encoding="utf-8") as f:
        assert {row["variant"]: row["seeds"] for row in csv.DictReader(f)} == {
            "softmax": "1 2",
            "constant-0.5": "1",
            "mos-constant-2": "1",
        }
    refused = recipe(
        "ptb_converged_experiment.sh", "results", env={**env, "EARLIER_TABLES": str(clipped_table)}
    )
    fails(
        refused,
        "gradient clipping (--clip-norm) (0.25: softmax@2; 0.0: softmax@1 constant-0.5@1 mos-constant-2@1)",
    )


def test_the_small_experiment_refuses_skip_mos_where_it_would_not_act(tmp_path):
    """ptb_small_experiment.sh: SKIP_MOS only trims the default VARIANTS; given with VARIANTS, or as
    anything but 0 or 1, it is refused before any work."""
    env = {"EXP_DIR": str(tmp_path)}
    fails(
        recipe("ptb_small_experiment.sh", env={**env, "SKIP_MOS": "1", "VARIANTS": "softmax ct"}),
        "SKIP_MOS acts on the default VARIANTS only: with VARIANTS, leave mos and ct-mos out of it",
    )
    fails(
        recipe("ptb_small_experiment.sh", env={**env, "SKIP_MOS": "yes"}),
        "SKIP_MOS must be 0 or 1, got 'yes'",
    )
    assert list(tmp_path.iterdir()) == []


def test_the_small_experiment_checks_every_variant_and_protocol_before_any_work(tmp_path):
    """ptb_small_experiment.sh: a bad VARIANTS entry after good ones, or a bad PROTOCOLS entry (only
    read once every variant has trained), is refused before the data are prepared."""
    env = {"EXP_DIR": str(tmp_path / "exp"), "PTB_DIR": str(tmp_path / "no-ptb")}
    fails(
        recipe("ptb_small_experiment.sh", env={**env, "VARIANTS": "softmax ct constant-x"}),
        "bad variant 'constant-x': constant-T needs a number T > 0, e.g. constant-2",
    )
    for protocol in ("70-35", "70/70", "0/0"):
        fails(
            recipe("ptb_small_experiment.sh", env={**env, "PROTOCOLS": f"70/35 {protocol}"}),
            f"PROTOCOLS: bad entry '{protocol}' (expected TOKENS_PER_SAMPLE/CONTEXT_WINDOW, the window "
            "the smaller, e.g. 70/35)",
        )
    fails(  # a value fairseq-train refuses: its parser's, before the data
        recipe("ptb_small_experiment.sh", env={**env, "LR": "3e-3x"}),
        "train.sh: error: fairseq-train refuses the training options: argument --lr: invalid",
    )
    assert list(tmp_path.iterdir()) == []
    fails(recipe("ptb_small_experiment.sh", env=env), "DATA_DIR")  # the checks pass: to the data


def test_jobs_and_variants_are_checked_before_any_work(tmp_path):
    """ptb_converged_experiment.sh JOBS is a whole number >= 1, every run is well named and none
    twice (two processes would train one run directory at once), and the model's and schedule's
    settings are ones fairseq takes: refused before any data is prepared."""
    env = {"EXP_DIR": str(tmp_path)}
    for jobs in ("0", "two", "-1", "1.5"):
        fails(
            recipe("ptb_converged_experiment.sh", env={**env, "JOBS": jobs}),
            f"JOBS must be a whole number >= 1, got '{jobs}'",
        )
    twice = {**env, "VARIANTS": "ct softmax ct@2 ct", "JOBS": "2"}
    fails(recipe("ptb_converged_experiment.sh", env=twice), "VARIANTS: ct given more than once")
    fails(
        recipe("ptb_converged_experiment.sh", env={**env, "VARIANTS": "softmax constant-0@2"}),
        "VARIANTS: bad entry 'constant-0@2' (expected softmax, ct, mos, ct-mos, constant-T or",
    )
    # the settings of the model and schedule, which fairseq would refuse run by run after the data
    for name, value, expected in (
        ("EMBED_DIM", "x", "EMBED_DIM must be a whole number >= 1, got 'x'"),
        ("CT_RANK", "0", "CT_RANK must be a whole number >= 1, got '0'"),
        ("MOS_COMPONENTS", "2.5", "MOS_COMPONENTS must be a whole number >= 1, got '2.5'"),
        ("PATIENCE", "0", "PATIENCE must be a whole number >= 1, got '0'"),
        ("MAX_EPOCH", "-1", "MAX_EPOCH must be a whole number >= 1, got '-1'"),
        ("HIDDEN_SIZES", "256;128", "HIDDEN_SIZES must be whole numbers >= 1 separated by commas"),
        ("LR", "0", "LR must be a number > 0, got '0'"),
    ):
        fails(recipe("ptb_converged_experiment.sh", env={**env, name: value}), expected)
    assert list(tmp_path.iterdir()) == []


def converged_env(ptb_like, exp_dir, **more):
    """ptb_converged_experiment.sh on the tiny corpus: a model of a few thousand weights, one epoch."""
    _, raw = ptb_like
    tiny = {
        "EMBED_DIM": "16",
        "HIDDEN_SIZES": "16,16",
        "CT_RANK": "4",
        "MAX_EPOCH": "1",
        "DEVICE_ARGS": "--cpu",
    }
    return {"EXP_DIR": str(exp_dir), "PTB_DIR": str(raw), "EXPECTED_COUNTS": "skip", **tiny, **more}


TRAINED = "softmax ct mos softmax@2 ct@2 mos@2"  # the runs of converged_runs that finish


@pytest.fixture(scope="module")
def converged_runs(ptb_like, tmp_path_factory):
    """EXP_DIR of ptb_converged_experiment.sh after ct@1 trained alone, then two seeds of softmax, CT
    and MoS trained two at a time beside a run that fails (ct-mos: a checkpoint_last.pt that
    ctemp-train cannot resume); the recipe's output of the second step."""
    exp = tmp_path_factory.mktemp("converged")
    ok(recipe("ptb_converged_experiment.sh", env=converged_env(ptb_like, exp, VARIANTS="ct@1")))
    broken = exp / "runs" / "ct-mos"
    broken.mkdir(parents=True)
    (broken / "checkpoint_last.pt").write_bytes(b"not a checkpoint")
    env = converged_env(ptb_like, exp, VARIANTS="ct-mos " + TRAINED, JOBS="2")
    proc = recipe("ptb_converged_experiment.sh", env=env)
    return exp, proc


def test_runs_side_by_side_train_as_they_do_one_at_a_time(ptb_like, converged_runs):
    """JOBS=2: the runs train at once, each as it would alone (ct, the same test perplexity as ct@1,
    the same model trained by itself first); a run that fails is named at the end and does not
    stop the others."""
    exp, proc = converged_runs
    fails(proc, "run(s) that failed: ct-mos (see")

    def result(name):
        return json.loads((exp / "runs" / name / "eval_test.json").read_text())

    for key in ("ppl", "loss_base2", "evaluated_tokens"):
        assert result("ct")[key] == result("ct@1")[key]
    assert result("softmax")["ppl"] != result("ct")["ppl"]  # two models, not one twice
    # side by side: softmax started before ct-mos, started first, was seen to have failed (the
    # recipe's own lines, in the order it acted); one at a time, it would start after
    output = proc.stdout
    assert output.index("started ct-mos") < output.index("started softmax") < output.index("ct-mos failed")
    assert not (exp / "runs" / "ct-mos" / "eval_test.json").exists()
    # the status step: each run's state and numbers from its files
    env = converged_env(ptb_like, exp, VARIANTS="ct ct-mos constant-2")
    rows = {
        cells[0]: cells
        for cells in markdown_rows(ok(recipe("ptb_converged_experiment.sh", "status", env=env)))
    }
    assert rows["ct"][1:3] == ["evaluated", "1"] and rows["ct"][-1] == f"{result('ct')['ppl']:.2f}"
    assert rows["ct-mos"][1] == "unfinished: resumes from checkpoint_last.pt"
    assert rows["constant-2"][1:] == ["not started"] + ["–"] * 7


def test_a_run_another_recipe_holds_is_left_to_it_not_failed(ptb_like, tmp_path):
    """Two train steps whose VARIANTS overlap: the run the other one trains (its SAVE_DIR lock held,
    here by this process) is refused by train.sh before any work and reported as left to that
    recipe; the step ends without failing (a run that did fail is still reported: the fixture's
    ct-mos)."""
    import fcntl

    exp = tmp_path / "exp"
    (exp / "runs" / "ct").mkdir(parents=True)
    with open(exp / "runs" / "ct" / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("pid 12 on elsewhere\n")
        lock.flush()
        out = ok(
            recipe("ptb_converged_experiment.sh", "train", env=converged_env(ptb_like, exp, VARIANTS="ct"))
        )
    assert f"SAVE_DIR {exp / 'runs' / 'ct'} is in use by pid 12 on elsewhere" in out
    assert out.endswith("ptb_converged_experiment.sh: in use by another recipe, left to it: ct\n"), out
    assert not (exp / "runs" / "ct" / "train.log").exists()


def test_the_results_step_writes_each_file_from_the_finished_runs_alone(ptb_like, converged_runs, tmp_path):
    """ptb_converged_experiment.sh results over two seeds of softmax, CT and MoS and a run that has
    not finished (ct-mos): every file holds the finished runs only, and its numbers are those of
    the runs' own evaluations (eval_test.json): the table, each row against softmax and each seed-2
    row against softmax@2, the seeds against softmax and against MoS (CT-MoS's baseline in the
    AAAI paper; none against constant-2, which did not run), and tau for the CT runs. With
    EARLIER_TABLES the seeds tables also count the runs of those tables."""
    exp, trained = converged_runs[0], TRAINED
    out = tmp_path / "out" / "ptb"
    env = converged_env(ptb_like, exp, VARIANTS=trained + " ct-mos", RESULTS=str(out))
    assert "not finished, left out of the results: ct-mos\n" in ok(
        recipe("ptb_converged_experiment.sh", "results", env=env)
    )

    runs = exp / "runs"
    ppl = {run: json.loads((runs / run / "eval_test.json").read_text())["ppl"] for run in trained.split()}
    table = read_csv(f"{out}.csv")
    assert [r["variant"] for r in table] == trained.split()
    for r in table:
        assert float(r["test_ppl"]) == pytest.approx(ppl[r["variant"]], rel=1e-4)
        # the recipe's LR, PATIENCE, MAX_EPOCH (MAX_UPDATE 0): from the run's configuration
        assert (r["lr"], r["patience"], r["max_epoch"], r["max_update"]) == ("0.003", "3", "1", "0")

    def ratios(name):
        return {(r["baseline"], r["variant"]): float(r["ppl_ratio"]) for r in read_csv(f"{out}_{name}.csv")}

    expected = {("softmax", run): ppl[run] / ppl["softmax"] for run in trained.split()[1:]}
    assert ratios("compare") == pytest.approx(expected, rel=1e-4)
    seed2 = {("softmax@2", run): ppl[run] / ppl["softmax@2"] for run in ("ct@2", "mos@2")}
    assert ratios("compare_seed2") == pytest.approx(seed2, rel=1e-4)

    def geomean(row):
        return math.sqrt(ppl[row] * ppl[row + "@2"])

    for baseline, name in (("softmax", "seeds"), ("mos", "seeds_vs_mos")):
        seeds = {r["variant"]: r for r in read_csv(f"{out}_{name}.csv")}
        assert sorted(seeds) == ["ct", "mos", "softmax"]
        assert seeds[baseline]["verdict"] == "baseline"
        for row, r in seeds.items():
            assert float(r["test_ppl_geomean"]) == pytest.approx(geomean(row), rel=1e-4)
            assert float(r["ratio_to_baseline"]) == pytest.approx(geomean(row) / geomean(baseline), rel=1e-4)
            assert row == baseline or r["verdict"].startswith("inconclusive")  # two seeds decide nothing
    assert not os.path.exists(f"{out}_seeds_vs_constant-2.csv")
    assert [r["variant"] for r in read_csv(f"{out}_tau.csv")] == ["ct", "ct@2"]
    assert os.path.exists(f"{out}_tau_positions.png") and os.path.exists(f"{out}_valid_curves.png")
    assert {r["run"] for r in read_csv(f"{out}_valid_curves.csv")} == set(trained.split())

    # EARLIER_TABLES: runs of the comparison made in another EXP_DIR count in the seeds tables only
    earlier = {"softmax@3": 50.0, "ct@3": 60.0, "constant-2@3": 55.0, "mos-constant-2@3": 52.0}
    write_table(tmp_path / "earlier.csv", table, earlier)
    more = tmp_path / "out" / "more"
    env = converged_env(
        ptb_like, exp, VARIANTS=trained, RESULTS=str(more), EARLIER_TABLES=str(tmp_path / "earlier.csv")
    )
    ok(recipe("ptb_converged_experiment.sh", "results", env=env))
    assert [r["variant"] for r in read_csv(f"{more}.csv")] == trained.split()
    ppl.update(earlier)
    for baseline, name in (
        ("softmax", "seeds"),
        ("mos", "seeds_vs_mos"),
        ("constant-2", "seeds_vs_constant-2"),
        ("mos-constant-2", "seeds_vs_mos-constant-2"),
    ):
        seeds = {r["variant"]: r for r in read_csv(f"{more}_{name}.csv")}
        assert seeds[baseline]["verdict"] == "baseline"
        assert seeds["ct"]["seeds"] == "1 2 3" and seeds["constant-2"]["seeds"] == "3"
        assert float(seeds["ct"]["test_ppl_geomean"]) == pytest.approx(
            (ppl["ct"] * ppl["ct@2"] * ppl["ct@3"]) ** (1 / 3), rel=1e-4
        )
    # a run in both places, or a table that is not there: one line, before any file is written
    write_table(tmp_path / "twice.csv", table, {"ct@1": 60.0})
    for tables, message in (
        ("twice.csv", "twice.csv has ct@1, a run of"),
        ("none.csv", "EARLIER_TABLES: no file"),
    ):
        env["EARLIER_TABLES"], env["RESULTS"] = str(tmp_path / tables), str(tmp_path / "refused")
        fails(recipe("ptb_converged_experiment.sh", "results", env=env), message)
    env = {**env, "EARLIER_TABLES": "", "VARIANTS": "ct-mos constant-2"}
    fails(
        recipe("ptb_converged_experiment.sh", "results", env=env),
        "error: no finished run of VARIANTS (ct-mos constant-2) in",
    )
    assert not list(tmp_path.glob("refused*"))


def test_the_results_step_rebuilds_its_own_files_and_refuses_to_leave_an_earlier_steps_beside_them(
    ptb_like, converged_runs, tmp_path
):
    """A results step again with the same runs rebuilds the same files; one that fails part way (a
    damaged tau dump) leaves those of the step before it as they were. With fewer runs (no MoS, no
    second seed) it would leave the earlier step's comparisons against MoS and of seed 2 beside its
    own: refused, naming them, before any file is touched. So is a CT run without the test text
    of its tau analysis."""
    exp, results = converged_runs[0], tmp_path / "results"
    out = results / "ptb"
    env = converged_env(ptb_like, exp, VARIANTS="softmax ct mos softmax@2 ct@2", RESULTS=str(out))
    ok(recipe("ptb_converged_experiment.sh", "results", env=env))
    written = {p.name: p.read_bytes() for p in results.iterdir()}
    assert {"ptb_seeds_vs_mos.csv", "ptb_compare_seed2.csv", "ptb_tau.csv"} <= set(written)
    for p in results.iterdir():
        p.write_bytes(b"stale")
    ok(recipe("ptb_converged_experiment.sh", "results", env=env))
    assert {p.name: p.read_bytes() for p in results.iterdir()} == written

    damaged = tmp_path / "damaged"
    shutil.copytree(exp, damaged)
    (damaged / "runs" / "ct" / "tau_test.tsv").write_text("not a dump\n")
    scored = damaged / "runs" / "softmax" / "eval_test.json"  # and another softmax: another table
    result = json.loads(scored.read_text())
    result["loss_base2"] += 0.5
    result["ppl"] = 2 ** result["loss_base2"]
    scored.write_text(json.dumps(result))
    proc = recipe("ptb_converged_experiment.sh", "results", env={**env, "EXP_DIR": str(damaged)})
    fails(proc, "tau_test.tsv has no positions")
    assert {p.name: p.read_bytes() for p in results.iterdir()} == written  # nor a stage left behind

    fewer = {**env, "VARIANTS": "softmax ct"}
    proc = recipe("ptb_converged_experiment.sh", "results", env=fewer)
    fails(proc, f"error: RESULTS {out} has files of its set that this step (runs: softmax ct) would not")
    named = proc.stdout.split("would not write again: ")[1].split(";")[0].split()
    assert sorted(os.path.basename(n) for n in named) == [
        "ptb_compare_seed2.csv",
        "ptb_compare_seed2.md",
        "ptb_seeds_vs_mos.csv",
        "ptb_seeds_vs_mos.md",
    ]
    assert {p.name: p.read_bytes() for p in results.iterdir()} == written

    no_text = {**fewer, "RESULTS": str(tmp_path / "new" / "ptb"), "PTB_DIR": str(tmp_path / "new")}
    fails(recipe("ptb_converged_experiment.sh", "results", env=no_text), "for the tau analysis of ct")
    assert not (tmp_path / "new").exists()


def write_table(path, table, test_ppl):
    """A result table like `lm_results.py table`'s: for each run VARIANT@SEED of test_ppl, the row of
    VARIANT in `table` (its model and settings; a variant it lacks: the first row's settings, no
    parameter count) with the run's name and test perplexity."""
    rows = {row["variant"]: row for row in table}
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        for run, ppl in test_ppl.items():
            template = rows.get(run.partition("@")[0], {**table[0], "params": ""})
            writer.writerow({**template, "variant": run, "test_ppl": ppl})


def test_a_stopped_recipe_stops_every_run_it_started(ptb_like, tmp_path):
    """SIGTERM to the recipe while two runs train: their processes end with it (background jobs of
    a script ignore Ctrl-C, so the recipe stops them itself), each run left resumable; before that,
    one to a run's own subshell (as pkill -f sends it) ends that run alone."""
    env = converged_env(ptb_like, tmp_path, VARIANTS="softmax ct", JOBS="2", MAX_EPOCH="80", PATIENCE="80")
    proc = subprocess.Popen(
        ["bash", os.path.join(RECIPES, "ptb_converged_experiment.sh")],
        env={**os.environ, "PATH": BIN_DIR + os.pathsep + os.environ["PATH"], "OMP_NUM_THREADS": "1", **env},
        stdout=(tmp_path / "recipe.log").open("w"),  # a file: no pipe a leftover process could hold
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    logs = [tmp_path / "runs" / run / "train.log" for run in ("softmax", "ct")]
    deadline = time.monotonic() + 120
    while not all(log.exists() and "begin training epoch 2" in log.read_text() for log in logs):
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "recipe.log").read_text()
        time.sleep(0.5)
    # a TERM to one run's subshell (pkill -f hits them all) stops that run, and that run alone
    softmax_subshell = run_subshell(proc.pid, "runs/softmax ")
    os.kill(softmax_subshell, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while any("runs/softmax " in row[3] for row in session_processes(proc.pid)):
        assert time.monotonic() < deadline, session_processes(proc.pid)
        time.sleep(0.2)
    assert any("runs/ct " in row[3] for row in session_processes(proc.pid)) and proc.poll() is None
    proc.terminate()
    assert proc.wait(timeout=60) == 143
    deadline = time.monotonic() + 30
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(proc.pid) == []
    for log in logs:  # each run stopped where the same command resumes it (train.sh's resume)
        assert (log.parent / "checkpoint_last.pt").exists() and not (log.parent / "train.done").exists()


def run_subshell(recipe_pid, marker):
    """The recipe's per-run subshell (a child of its process) under which a process whose command
    line holds `marker` runs."""
    ps = ["ps", "-ww", "-eo", "pid=,ppid=,args="]  # -ww: whole command lines, whatever COLUMNS says
    rows = [
        line.split(None, 2)
        for line in subprocess.run(ps, text=True, stdout=subprocess.PIPE).stdout.splitlines()
    ]
    parent = {int(pid): int(ppid) for pid, ppid, *_ in rows}
    for pid, _, *args in rows:
        if args and marker in args[0]:
            pid = int(pid)
            while parent.get(pid) not in (recipe_pid, None):
                pid = parent[pid]
            if parent.get(pid) == recipe_pid:
                return pid
    raise AssertionError(f"no process with {marker!r} under {recipe_pid}")


def session_processes(sid):
    """The processes of session `sid` still running: every process the recipe started, however deep."""
    out = subprocess.run(
        ["ps", "-ww", "-eo", "sid=,pid=,stat=,args="], text=True, stdout=subprocess.PIPE
    ).stdout
    rows = (line.split(None, 3) for line in out.splitlines())
    return [row for row in rows if int(row[0]) == sid and not row[2].startswith("Z")]


def test_a_table_whose_markdown_cannot_be_written_leaves_no_csv(tmp_path, monkeypatch):
    """`lm_results.py seeds` where PREFIX.md cannot be written (a full disk, say): the PREFIX.csv
    made before it is removed again, so that the rerun is not refused for it."""
    from fairseq_ctemp.lm_results import output

    lm_results = example_script(os.path.join(RECIPES, "lm_results.py"))
    table = tmp_path / "t.csv"
    table.write_text("variant,test_ppl\nsoftmax,85\nct,88\n", encoding="utf-8")
    real_open = open

    def full_disk(path, *args, **kwargs):
        if str(path).endswith(".md"):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(output, "open", full_disk, raising=False)
    with pytest.raises(OSError):
        lm_results.main(["seeds", "--table", str(table), "--output", str(tmp_path / "s")])
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]
    monkeypatch.undo()
    run_main(lm_results.main, "seeds", "--table", table, "--output", tmp_path / "s")
    assert sorted(os.listdir(tmp_path)) == ["s.csv", "s.md", "t.csv"]
