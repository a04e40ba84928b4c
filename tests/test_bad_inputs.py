"""Bad inputs through every user-facing tool: each must fail (non-zero exit) with a last line that
names the option or file and what is wrong, without a traceback, before any work, changing no file
(checksums of every input and output location before and after).

The package's console scripts (ctemp-*) and the scripts that import torch anyway run in this process
through the same main() their console script calls (a fresh Python + torch + fairseq start costs
~5 s), and so does fairseq-train (conftest.run_fairseq), except a few as subprocesses (the installed
script, else python -m its module); the shell recipes run as themselves. All inputs are tiny and rejected before any training.
Every console script also runs as python -m with --help, which explains each of its own arguments."""

import argparse
import collections
import contextlib
import glob
import hashlib
import importlib
import io
import json
import logging
import os
import random
import re
import runpy
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch
from conftest import (
    BIN_DIR,
    PLUGIN_DIR,
    REPO,
    TINY_DIMS,
    console_scripts,
    example_script,
    experiment_json,
    run_fairseq,
)
from conftest import command as console_command

pytestmark = pytest.mark.e2e
SCRIPTS = os.path.join(REPO, "scripts")
ENV = dict(
    os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1", PYTHON=sys.executable
)
for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
    ENV.pop(key, None)


def checkpoint(path, weights, temperature=2.0, calibrated=None, task=None):
    cfg = {"criterion": {"_name": "tempered_ce", "softmax_temperature": temperature}}
    if calibrated is not None:  # as ctemp-calibrate --write-checkpoint records it
        cfg["ctemp_calibration"] = {"temperature": calibrated, "signature": "subset:valid"}
    state = {"model": collections.OrderedDict((k, torch.tensor(v)) for k, v in weights.items()), "cfg": cfg}
    if task is not None:  # what fairseq's loader needs besides (it reads the training history)
        cfg["task"] = {"_name": task}
        state["optimizer_history"] = [{"criterion_name": "TemperedCrossEntropy", "best_loss": None}]
        state["extra_state"] = {}
    torch.save(state, path)


def memo_archive(good, path):
    """A torch.save archive of `good` whose pickle misses its memo: torch's safe unpickler raises a
    KeyError."""
    with zipfile.ZipFile(good) as archive, zipfile.ZipFile(path, "w") as damaged:
        for item in archive.infolist():
            pickled = item.filename.endswith("/data.pkl")
            damaged.writestr(item, b"\x80\x02h\x05." if pickled else archive.read(item.filename))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, toy_data):
    """Every input the cases refer to, under one root: the toy release and a work directory
    prepared from it, bad corpora, checkpoints (good, damaged, diverged, mismatched), references."""
    root = tmp_path_factory.mktemp("bad-inputs")
    for argv in (
        ["toy-release", root / "release"],
        ["prepare", "en-vi", "--release", root / "release", "--work", root / "work", "--vocab", "20"],
    ):
        assert in_process(alt_data, [str(a) for a in argv])[0] == 0
    # an already split en/ja copy (CRLF, like the shared ALT copy) and its damaged variants
    lines = {split: [f"s{i} s{i + 1} s{i + 2}" for i in range(n)] for split, n in (("train", 20), ("dev", 4))}
    for name, damage in (("local", None), ("cr-only", "cr"), ("empty-dev", "dev"), ("utf16", "utf16")):
        for split, text in lines.items():
            for lang in ("en", "ja"):
                body = "".join(t + "\r\n" for t in text).encode()
                if damage == "cr" and split == "train" and lang == "en":
                    body = "".join(t + "\r" for t in text).encode()
                elif damage == "dev" and split == "dev":
                    body = b""
                elif damage == "utf16" and split == "dev" and lang == "ja":
                    body = body.decode().encode("utf-16")
                write(str(root / name / f"{split}.{lang}"), body)
    other = root / "other-release"  # the same layout, one sentence changed: another corpus
    shutil.copytree(root / "release", other)
    corpus = other / "ALT-Parallel-Corpus-20191206" / "data_vi.txt"
    first, rest = corpus.read_bytes().split(b"\r\n", 1)
    corpus.write_bytes(first.split(b"\t")[0] + b"\tchanged\r\n" + rest)
    exp = root / "results-work" / "sweep" / "en-vi.mini.spm20"  # a sweep for results.sh
    exp.mkdir(parents=True)
    (exp / "experiment.json").write_text(json.dumps(experiment_json()))
    truncated = root / "truncated-work" / "sweep" / "en-vi.mini.spm20"  # a file cut by a full disk
    truncated.mkdir(parents=True)
    (truncated / "experiment.json").write_text('{"src": "en", "tgt": "vi", "pati')
    partial = root / "partial-work" / "sweep" / "en-vi.mini.spm20"  # written by no version of the sweep
    partial.mkdir(parents=True)
    (partial / "experiment.json").write_text(
        '{"src": "en", "tgt": "vi", "patience": 10, "primary": [0.1, 0]}'
    )
    unprepared = root / "unprepared-work"  # a prepare.json that ctemp-alt-data did not write
    (unprepared / "sweep" / "en-vi.mini.spm20").mkdir(parents=True)
    (unprepared / "sweep" / "en-vi.mini.spm20" / "experiment.json").write_text(json.dumps(experiment_json()))
    write(str(unprepared / "data" / "en-vi.spm20" / "prepare.json"), b'{"pair": ["en", "vi"]}')
    alien = root / "alien-run-work" / "sweep" / "en-vi.mini.spm20"  # a run.json the sweep did not write
    (alien / "T1-ls0.1-sem0").mkdir(parents=True)
    (alien / "experiment.json").write_text(json.dumps(experiment_json()))
    config = {"name": "T1-ls0.1-sem0", "temperature": 1.0, "label_smoothing": 0.1, "sem_weight": 0.0}
    (alien / "T1-ls0.1-sem0" / "config.json").write_text(json.dumps({**config, "train_args": []}))
    (alien / "T1-ls0.1-sem0" / "run.json").write_text('{"name": "T1-ls0.1-sem0", "bleu": 30.1}')
    for name, made in (  # quickstart --workdirs: cut by a full disk, of no version, of the first one
        ("cut", b'{"epochs": 3, "tra'),
        ("no-epochs", b'{"train_pairs": 3000}'),
        ("first", b'{"epochs": 3}'),  # before --train-pairs: 3000 pairs
    ):
        write(str(root / "quickstart" / name / "quickstart.json"), made)
    write(str(root / "no-sentencepiece" / "sentencepiece.py"), b"raise ImportError('not here')\n")
    # SACT's data directories, prepared with other options than the defaults
    write(str(root / "sact-alt-4000" / "prepare_options.txt"), b"SPM_VOCAB=4000\n")
    write(str(root / "iwslt-5000" / "prepare_options.txt"), b"NWORDS_SRC=17700 NWORDS_TGT=5000\n")
    wrapper = root / "python-without-sentencepiece"  # a PYTHON for the shell recipes
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={root / "no-sentencepiece"} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    write(str(root / "mine" / "notes.txt"), b"a user's notes")
    write(str(root / "a-file"), b"not a directory")
    write(str(root / "resumable" / "checkpoint_last.pt"), b"a run's last checkpoint")  # a --save-dir
    no_train = root / "no-train"  # fairseq-preprocess's files but the training split's
    no_train.mkdir()
    for made in toy_data["bin"].iterdir():
        if not made.name.startswith("train."):
            shutil.copy(made, no_train / made.name)
    apart = root / "dicts-apart"  # the toy's files with a target dictionary of its own
    shutil.copytree(toy_data["bin"], apart)
    with open(apart / "dict.tgt.txt", "a", encoding="utf-8") as f:
        f.write("only-in-the-target 1\n")
    (root / "run-without-config").mkdir()
    (root / "run-of-another-tool").mkdir()  # a config.json that ctemp-alt-sweep did not write
    (root / "run-of-another-tool" / "config.json").write_text('{"lr": 0.001}')
    ckpt = root / "ckpt"
    ckpt.mkdir()
    checkpoint(ckpt / "a.pt", {"w": [1.0, 2.0]})
    checkpoint(ckpt / "b.pt", {"w": [3.0, 4.0]})
    checkpoint(ckpt / "t1.pt", {"w": [3.0, 4.0]}, temperature=1.0)
    checkpoint(ckpt / "shape.pt", {"w": [1.0, 2.0, 3.0]})
    checkpoint(ckpt / "nan.pt", {"w": [1.0, float("nan")]})
    checkpoint(ckpt / "calibrated.pt", {"w": [3.0, 4.0]}, calibrated=1.7)
    checkpoint(ckpt / "lm.pt", {"w": [1.0]}, task="language_modeling")  # a tempered_ce language model
    checkpoint(ckpt / "mt.pt", {"w": [1.0]}, task="translation")
    shutil.copy(ckpt / "a.pt", ckpt / "best.pt")  # as fairseq copies checkpointN.pt to checkpoint_best.pt
    checkpoint(ckpt / "a-again.pt", {"w": [1.0, 2.0]}, temperature=2.0)  # the same parameters, saved anew
    write(str(ckpt / "empty.pt"), b"")
    write(str(ckpt / "random.pt"), random.Random(0).randbytes(4096))
    write(str(ckpt / "memo.pt"), b"\x80\x02h\x05.")  # a pickle whose unpickling misses its memo
    write(str(ckpt / "text.pt"), b"this is not a checkpoint\n")
    write(str(ckpt / "truncated.pt"), (ckpt / "a.pt").read_bytes()[:300])  # an interrupted copy
    memo_archive(ckpt / "a.pt", ckpt / "memo-archive.pt")
    refs = root / "refs"
    test_refs = (toy_data["raw"] / "test.tgt").read_bytes().split(b"\n")
    latin1 = test_refs[:2] + [test_refs[2] + " caf\u00e9".encode("latin-1")] + test_refs[3:]
    write(str(refs / "latin1.tgt"), b"\n".join(latin1))
    write(str(refs / "utf16.tgt"), b"\n".join(test_refs).decode().encode("utf-16"))
    write(str(refs / "empty"), b"")
    write(str(refs / "cr-only.tgt"), b"\r".join(test_refs))  # CR-only line ends: one line to a reader of LF
    write(str(refs / "one-short.tgt"), b"\n".join(test_refs[:-2]) + b"\n")  # one sentence fewer than test
    write(str(root / "lm-text" / "latin1.txt"), "caf\u00e9 s1 s2\n".encode("latin-1"))
    write(str(root / "lm-runs-partial" / "softmax" / "eval_test.json"), b'{"ppl": 80.1}')  # another tool's
    write(str(root / "lm-runs-cut" / "softmax" / "eval_test.json"), b'{"ppl": 80.1')  # cut by a full disk
    for name, table in (  # lm_results.py seeds: tables that are not what `table` writes
        ("columns", "a,b\n1,2\n"),
        ("nan", "variant,test_ppl\nsoftmax,80\nct,nan\n"),
        ("seed", "variant,test_ppl\nsoftmax,80\nct@x,80\n"),
        ("twice", "variant,test_ppl\nsoftmax,80\nsoftmax@1,81\n"),
        ("good", "variant,test_ppl\nsoftmax,80\nsoftmax@2,81\nct,82\n"),
    ):
        write(str(root / "seeds" / f"{name}.csv"), table.encode())
    head = "experiment,direction,variant,T,LS,SEM,seed,updates,stopped by,dev greedy,dev beam,beam k\n"
    for (
        name,
        rows,
    ) in (  # ctemp-alt-seeds: runs.csv files of ctemp-alt-results, and one from before its seed column
        ("seed1", "en-vi.m,en-vi,transformer,1,0.1,0,1,900,early stop,6.6,7.9,4\n"),
        ("seed2-ls0.2", "en-vi.m.seed2,en-vi,transformer,1,0.2,0,2,900,early stop,7.1,8.2,4\n"),
        ("bleu150", "en-vi.m.seed2,en-vi,transformer,1,0.1,0,2,900,early stop,150,8.2,4\n"),
        ("t-nan", "en-vi.m.seed2,en-vi,transformer,nan,0.1,0,2,900,early stop,7.1,8.2,4\n"),
    ):
        write(str(root / "alt-seeds" / name / "runs.csv"), (head + rows).encode())
    old_runs = "experiment,direction,T,LS,SEM,updates,stopped by,dev greedy,dev beam,beam k\n"
    write(
        str(root / "alt-seeds" / "old" / "runs.csv"),
        (old_runs + "en-vi.m,en-vi,1,0.1,0,900,x,7,8,4\n").encode(),
    )
    write(str(root / "alt-seeds" / "taken.md"), b"a finished table")
    return {"root": root, "toy": toy_data, "ckpt": ckpt, "refs": refs}


def fingerprint(*roots):
    """{path: sha256} of every file and every directory (as None) under the roots."""
    found = {}
    for root in roots:
        for d, dirs, files in os.walk(root):
            found.update({os.path.join(d, name): None for name in dirs})
            for name in files:
                with open(os.path.join(d, name), "rb") as f:
                    found[os.path.join(d, name)] = hashlib.sha256(f.read()).hexdigest()
    return found


def in_process(main, argv):
    """(exit status, output) of a console script's main(argv) run here, as the interpreter would
    report it: SystemExit("text") prints the text and exits 1."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(argv)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) or e.code is None else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
    return code or 0, out.getvalue()


def ctemp_train(argv):
    from fairseq_ctemp.cli import train

    train.main(argv)


def quickstart(argv):
    saved = sys.argv
    sys.argv = ["quickstart.py", *argv]
    try:
        runpy.run_path(os.path.join(SCRIPTS, "quickstart.py"), run_name="__main__")
    finally:
        sys.argv = saved


def average(argv):
    from fairseq_ctemp.cli import average_checkpoints

    average_checkpoints.main(argv)


def calibrate(argv):
    from fairseq_ctemp.cli import calibrate

    calibrate.main(argv)


def greedy_vs_beam(argv):
    from fairseq_ctemp.cli import greedy_vs_beam

    greedy_vs_beam.main(argv)


def toy_translation(argv):
    from fairseq_ctemp.cli import toy_translation

    toy_translation.main(argv)


def ctemp_user_dir_main(argv):
    import ctemp_user_dir

    ctemp_user_dir.main(argv)


def ct_analysis(argv):
    from fairseq_ctemp.cli import ct_analysis

    ct_analysis.main(argv)


def sact_heatmaps(argv):
    from fairseq_ctemp.cli import sact_heatmaps

    sact_heatmaps.main(argv)


def alt_data(argv):
    from fairseq_ctemp.cli import alt_data

    alt_data.main(argv)


def alt_sweep(argv):
    from fairseq_ctemp.cli import alt_sweep

    alt_sweep.main(argv)


def alt_results(argv):
    from fairseq_ctemp.cli import alt_results

    alt_results.main(argv)


def alt_seeds(argv):
    from fairseq_ctemp.cli import alt_seeds

    alt_seeds.main(argv)


def lm_results(argv):
    example_script(os.path.join(REPO, "examples", "language_model", "lm_results.py")).main(argv)


def results_pages(argv):
    example_script(os.path.join(REPO, "scripts", "results_pages.py")).main(argv)


def sact_summarize(argv):
    example_script(os.path.join(REPO, "examples", "sact", "summarize.py")).main(argv)


def sact_translate_subset(argv):
    example_script(os.path.join(REPO, "examples", "sact", "translate_subset.py")).main(argv)


def export_hydra_configs(argv):
    example_script(os.path.join(SCRIPTS, "export_hydra_configs.py")).main(argv)


def bench_ct_lm(argv):
    example_script(os.path.join(REPO, "benchmarks", "bench_ct_lm.py")).parse_args(argv)


def bench_sact(argv):
    example_script(os.path.join(REPO, "benchmarks", "bench_sact.py")).parse_args(argv)


def bench_tempered_ce(argv):
    example_script(os.path.join(REPO, "benchmarks", "bench_tempered_ce.py")).parse_args(argv)


def suite_time(argv):
    example_script(os.path.join(REPO, "benchmarks", "suite_time.py")).main(argv)


def bench_translation(argv):
    example_script(os.path.join(REPO, "benchmarks", "bench_translation.py")).parse_args(argv)


def trace_report(argv):
    example_script(os.path.join(REPO, "benchmarks", "trace_report.py")).main(argv)


def fairseq_generate(argv):
    """fairseq-generate in this process, as fairseq_train."""
    proc = run_fairseq("fairseq-generate", *argv, check=False)
    print(proc.stdout, end="")
    sys.exit(proc.returncode)


def fairseq_train(argv):
    """fairseq-train in this process (conftest.run_fairseq): its output printed, its exit status
    raised as the console script's."""
    proc = run_fairseq("fairseq-train", *argv, check=False)
    print(proc.stdout, end="")
    sys.exit(proc.returncode)


PY = [sys.executable]
DATA, SWEEP, RESULTS = alt_data, alt_sweep, alt_results
EXAMPLES = os.path.join(REPO, "examples")
ALT = os.path.join(EXAMPLES, "alt")
SWEEP_OK = ["en-vi", "--work", "{root}/work", "--vocab", "20", "--preset", "mini", "--temperatures", "1,2"]
GVB = ["{toy}/bin", "--checkpoint", "{ckpt}/a.pt", "--ref", "{toy}/raw/test.tgt", "--", "--cpu"]
TRAIN = [
    "{toy}/bin",
    "--user-dir",
    PLUGIN_DIR,
    "--arch",
    "transformer",
    *TINY_DIMS,
    "--cpu",
    "--optimizer",
    "adam",
    "--lr",
    "1e-3",
    "--max-tokens",
    "1000",
    "--num-workers",
    "0",
    "--save-dir",
    "{root}/train-out",
    "--criterion",
]
LM_TRAIN = [
    "{toy}/lm-bin",
    "--user-dir",
    PLUGIN_DIR,
    "--task",
    "language_modeling",
    "--tokens-per-sample",
    "32",
    "--cpu",
    "--optimizer",
    "adam",
    "--lr",
    "1e-3",
    "--max-tokens",
    "1000",
    "--num-workers",
    "0",
    "--save-dir",
    "{root}/train-out",
]

# (name, command (a list: a subprocess; a function: in-process main), arguments, the last line has)
CASES = [
    # ctemp-alt-data and examples/alt/prepare.sh
    (
        "data: CR-only line ends",
        DATA,
        ["prepare", "en-ja", "--local", "{root}/cr-only", "--work", "{root}/new", "--vocab", "20"],
        "train.en has CR-only line ends",
    ),
    (
        "data: empty dev split",
        DATA,
        ["prepare", "en-ja", "--local", "{root}/empty-dev", "--work", "{root}/new", "--vocab", "20"],
        "the dev split of en-ja has no sentence pair",
    ),
    (
        "data: UTF-16 local file",
        DATA,
        ["check", "en-ja", "--local", "{root}/utf16"],
        "dev.ja looks like UTF-16",
    ),
    (
        "data: --vocab 0",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new", "--vocab", "0"],
        "--vocab must be >= 1, got 0",
    ),
    (
        "data: --workers 0",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new", "--workers", "0"],
        "--workers must be >= 1, got 0",
    ),
    (
        "data: --spm-model-type with --subwords bpe",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new", "--subwords", "bpe"]
        + ["--spm-model-type", "bpe"],
        "--spm-model-type is only used with --subwords spm, not bpe",
    ),
    (
        "data: --train-subset too large",
        DATA,
        [
            "prepare",
            "en-vi",
            "--release",
            "{root}/release",
            "--work",
            "{root}/new",
            "--vocab",
            "20",
            "--train-subset",
            "1000",
        ],
        "--train-subset 1000 > 60 training pairs",
    ),
    (
        "data: --download with --release",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new", "--download"],
        "--download fetches the release: give it without --release",
    ),
    (
        "data: same language twice",
        ["ctemp-alt-data"],  # a subprocess
        ["check", "en-en", "--release", "{root}/release"],
        "source and target are the same language",
    ),
    (
        "data: no such --local",
        DATA,
        ["check", "en-ja", "--local", "{root}/nowhere"],
        "nowhere: no such directory",
    ),
    (
        "data: toy-release over a directory",
        DATA,
        ["toy-release", "{root}/mine"],
        "mine exists; refusing to overwrite",
    ),
    (
        "data: other options for a prepared directory",
        DATA,
        [
            "prepare",
            "en-vi",
            "--release",
            "{root}/release",
            "--work",
            "{root}/work",
            "--vocab",
            "20",
            "--drop-incomplete",
        ],
        "was prepared with other options (drop_incomplete: False, now True)",
    ),
    (
        "data: another corpus for a prepared directory",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/other-release", "--work", "{root}/work", "--vocab", "20"],
        "was prepared from another corpus than",
    ),
    (
        "prepare.sh: unknown --subwords",
        ["bash", os.path.join(ALT, "prepare.sh")],
        ["en-vi", "--release", "{root}/release", "--subwords", "wordpiece"],
        "argument --subwords: invalid choice",
    ),
    # ctemp-alt-sweep and examples/alt/sweep.sh, run_all.sh
    (
        "sweep: --eval-beam 0",
        SWEEP,
        ["run", *SWEEP_OK, "--eval-beam", "0"],
        "--eval-beam must be >= 1, got 0",
    ),
    (
        "sweep: --grid-beams 0",
        SWEEP,
        ["run", *SWEEP_OK, "--grid-beams", "0,2"],
        "--grid-beams must be integers >= 1",
    ),
    (
        "sweep: --grid-lenpens -1",
        SWEEP,
        ["run", *SWEEP_OK, "--grid-lenpens=-1"],
        "--grid-lenpens must be finite numbers > 0, got -1",
    ),
    (
        "sweep: a length penalty twice",
        SWEEP,
        ["run", *SWEEP_OK, "--grid-lenpens", "0.5,1,1.0"],
        "--grid-lenpens: 1 given twice; give each value once",
    ),
    (
        "sweep: temperatures naming one run",
        SWEEP,
        ["run", *SWEEP_OK, "--temperatures", "1,2,2.0000001"],
        "--temperatures: 2.0, 2.0000001 name the same run (2)",
    ),
    (
        "sweep: variants naming one run",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "transformer,fixed_lstm:2.25,lstm,fixed_lstm:2.250"],
        "--variants: fixed_lstm:2.25, fixed_lstm:2.250 name the same run (fixed_lstm:2.25); give each once",
    ),
    (
        "sweep: an empty entry in a list",
        SWEEP,
        ["run", *SWEEP_OK, "--temperatures", "1,,2"],
        "argument --temperatures: expected comma-separated numbers, got '1,,2'",
    ),
    (
        "sweep: an empty GPU id",
        SWEEP,
        ["run", *SWEEP_OK, "--gpus", "0,", "--dry-run"],
        "argument --gpus: expected comma-separated GPU ids, got '0,'",
    ),
    (
        "sweep: temperature out of range",
        SWEEP,
        ["run", *SWEEP_OK, "--temperatures", "1,1e-9"],
        "--temperatures must be in [0.01, 100]",
    ),
    (
        "sweep: no T=1 for finalize",
        SWEEP,
        ["run", *SWEEP_OK, "--temperatures", "2,3"],
        "needs 1 and another T",
    ),
    (
        "sweep: primary LS not swept",
        SWEEP,
        ["run", *SWEEP_OK, "--primary-label-smoothing", "0.2"],
        "--primary-label-smoothing 0.2 is not among --label-smoothing 0.1",
    ),
    (
        "sweep: unknown variant",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "transformer,gru"],
        "--variants: unknown gru; choose from transformer, ct_transformer, sact_transformer, "
        "sact_transformer_tempered, lstm, sact_lstm, fixed_lstm:TAU",
    ),
    (
        "sweep: fixed_lstm without its temperature",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "lstm,fixed_lstm"],
        "--variants: fixed_lstm: fixed_lstm needs its --fixed-attention-temperature as fixed_lstm:TAU, "
        "a number > 0",
    ),
    (
        "sweep: fixed_lstm at temperature 0",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "lstm,fixed_lstm:0"],
        "--variants: fixed_lstm:0: fixed_lstm needs its --fixed-attention-temperature as fixed_lstm:TAU",
    ),
    (
        "sweep: a value for a variant without one",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "lstm:2"],
        "--variants: lstm:2: lstm takes no :VALUE",
    ),
    (
        "sweep: ct_transformer at T=2",
        SWEEP,
        ["run", *SWEEP_OK[:-2], "--variants", "ct_transformer", "--temperatures", "2"],
        "--temperatures 2: ct_transformer learns its temperature and trains at T=1 only; allowed: "
        "--temperatures 1",
    ),
    (
        "sweep: ct_transformer beside tempered runs without T=1",
        SWEEP,
        ["run", *SWEEP_OK[:-2], "--variants", "transformer,ct_transformer", "--temperatures", "2,3"],
        "--temperatures 2,3: ct_transformer trains at T=1 only; add 1 to --temperatures",
    ),
    (
        "sweep: no variant",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", ","],
        "argument --variants: expected comma-separated names, got ','",
    ),
    (
        "sweep: sact_transformer of a preset without its architecture",
        SWEEP,
        ["run", *SWEEP_OK, "--preset", "small", "--variants", "transformer,sact_transformer"],
        "--variants sact_transformer: --arch sact_transformer_alt_small (preset small) is not registered",
    ),
    (
        "sweep: a variant whose architecture is not registered",
        SWEEP,
        ["run", *SWEEP_OK, "--preset", "small", "--variants", "transformer,ct_transformer"],
        "--variants ct_transformer: --arch ct_transformer_alt_small (preset small) is not registered",
    ),
    (
        "sweep: ct_transformer with a SEM weight",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "transformer,ct_transformer", "--sem-weights", "0.1"]
        + ["--primary-sem-weight", "0.1"],
        "--primary-sem-weight 0.1: ct_transformer trains with ct_cross_entropy, which has no SEM term",
    ),
    (
        "sweep: a variant to finalize without the transformer",
        SWEEP,
        ["run", *SWEEP_OK[:-2], "--variants", "lstm"],
        "finalize compares lstm with the T=1 transformer: add transformer to --variants",
    ),
    (
        "sweep: sact_lstm to finalize without lstm",
        SWEEP,
        ["run", *SWEEP_OK[:-2], "--variants", "sact_lstm"],
        "finalize compares sact_lstm with the T=1 lstm: add lstm to --variants",
    ),
    (
        "sweep: a variant without its baseline beside another variant's baseline",
        SWEEP,
        ["run", *SWEEP_OK[:-2], "--variants", "ct_transformer,lstm,sact_lstm"],
        "finalize compares ct_transformer with the T=1 transformer: add transformer to --variants",
    ),
    (
        "sweep: a seed twice",
        SWEEP,
        ["run", *SWEEP_OK, "--seed", "1,2,1"],
        "--seed must be distinct integers >= 0, got 1,2,1",
    ),
    (
        "sweep: --arch after --",
        SWEEP,
        ["run", *SWEEP_OK, "--", "--arch", "lstm"],
        "--arch after -- is set by the sweep (--preset and --variants)",
    ),
    (
        "sweep: a fairseq-train option misspelt after --",
        SWEEP,
        ["run", *SWEEP_OK, "--", "--stop-time-hourz", "1"],
        "fairseq-train refuses the options of the transformer runs (after --: --stop-time-hourz 1): "
        "unrecognized arguments: --stop-time-hourz 1",
    ),
    (
        "sweep: a bad fairseq-train value after --",
        SWEEP,
        ["run", *SWEEP_OK, "--variants", "transformer,lstm", "--", "--stop-time-hours", "x"],
        "argument --stop-time-hours: invalid float value: 'x'",
    ),
    ("sweep: --patience 0", SWEEP, ["run", *SWEEP_OK, "--patience", "0"], "--patience must be >= 1, got 0"),
    ("sweep: --jobs 0", SWEEP, ["run", *SWEEP_OK, "--jobs", "0"], "--jobs must be >= 1, got 0"),
    (
        "sweep: --fp16 on the CPU",
        SWEEP,
        ["run", *SWEEP_OK, "--fp16"],
        "--fp16 is for runs on GPUs (--gpus, or --slurm without --slurm-cpu); these go to the CPU",
    ),
    (
        "sweep: --gpus-per-run on the CPU",
        SWEEP,
        ["run", *SWEEP_OK, "--slurm", "--slurm-cpu", "--gpus-per-run", "2"],
        "--gpus-per-run is for runs on GPUs (--gpus, or --slurm without --slurm-cpu); these go to the CPU",
    ),
    (
        "sweep: --cpu with --gpus",
        SWEEP,
        ["run", *SWEEP_OK, "--cpu", "--gpus", "0"],
        "--cpu and --gpus exclude each other: give one",
    ),
    (
        "sweep: --jobs with --gpus",
        SWEEP,
        ["run", *SWEEP_OK, "--gpus", "0,1", "--jobs", "2"],
        "--jobs is the number of local CPU runs at a time",
    ),
    (
        "sweep: --slurm-cpus without --slurm",
        SWEEP,
        ["run", *SWEEP_OK, "--slurm-cpus", "4"],
        "--slurm-cpus only goes with --slurm",
    ),
    (
        "sweep: run-one with --cpu and --fp16",
        SWEEP,
        ["run-one", "{root}/work", "--cpu", "--fp16"],
        "--fp16 is for runs on GPUs",
    ),
    (
        "sweep: unbalanced quote in --decode-args",
        SWEEP,
        ["run", *SWEEP_OK, "--decode-args", "--max-len-a '2"],
        '--decode-args "--max-len-a \'2": No closing quotation',
    ),
    (
        "sweep: --slurm where there is no sbatch",
        SWEEP,
        ["run", *SWEEP_OK, "--slurm"],
        "--slurm: sbatch (SLURM's) is not on PATH: run on a SLURM login node, or leave out --slurm",
    ),
    (
        "sweep: --decode-args --max-len-a nan",
        SWEEP,
        ["run", *SWEEP_OK, "--decode-args", "--max-len-a nan"],
        "--decode-args: --max-len-a must be a finite number >= 0, got nan",
    ),
    (
        "sweep: --decode-args --min-len above every output",
        SWEEP,
        ["run", *SWEEP_OK, "--decode-args", "--max-len-a 0 --max-len-b 5 --min-len 9"],
        "--decode-args: --min-len 9 is above the longest output, --max-len-b 5 (with --max-len-a 0)",
    ),
    (
        "sweep: --decode-args output lengths below --min-len for the shortest sentence",
        SWEEP,  # (each run's evaluation would fail after its training)
        ["run", *SWEEP_OK, "--decode-args", "--max-len-a 0.001 --max-len-b 0"],
        "--decode-args: --max-len-a 0.001 --max-len-b 0 allow at most 0 target tokens for the shortest "
        "source sentence of valid in {root}/work/data/",
    ),
    (
        "greedy-vs-beam: --max-len-a inf after --",
        greedy_vs_beam,
        [*GVB[:5], "--", "--cpu", "--max-len-a", "inf"],
        "after --: --max-len-a must be a finite number >= 0, got inf",
    ),
    (
        "sweep: --decode-args --max-tokens below the longest sentence",
        SWEEP,  # (each run's evaluation would fail after its training)
        ["run", *SWEEP_OK, "--decode-args", "--max-tokens 2"],
        "--decode-args: --max-tokens 2 is below the longest sentence of valid in {root}/work/data/",
    ),
    (
        "sweep: --decode-args sets the beam",
        SWEEP,
        ["run", *SWEEP_OK, "--decode-args", "--beam 3"],
        "--decode-args: --beam is set by the sweep",
    ),
    (
        "sweep: --decode-args fairseq's decoding API does not take",
        SWEEP,
        ["run", *SWEEP_OK, "--decode-args", "--nbest 2"],
        "--decode-args: --nbest is not a decoding option this tool passes on to fairseq's API",
    ),
    (
        "sweep: unknown --sacrebleu-tokenize",
        SWEEP,
        ["run", *SWEEP_OK, "--sacrebleu-tokenize", "moses"],
        "--sacrebleu-tokenize must be one of",
    ),
    (
        "sweep: fairseq-train option the sweep sets",
        SWEEP,
        ["run", *SWEEP_OK, "--", "--softmax-temperature", "3"],
        "--softmax-temperature after -- is set by the sweep (--temperatures)",
    ),
    (
        "sweep: an abbreviation of a fairseq-train option the sweep sets",
        SWEEP,
        ["run", *SWEEP_OK, "--", "--softmax-temp", "3"],
        "--softmax-temp (fairseq reads it as --softmax-temperature) after -- is set by the sweep",
    ),
    (
        "sweep: direction not prepared",
        SWEEP,
        ["run", "en-ja", *SWEEP_OK[1:]],
        "is not prepared: run ctemp-alt-data prepare en-ja",
    ),
    (
        "sweep: run-one without config.json",
        SWEEP,
        ["run-one", "{root}/run-without-config"],
        "has no config.json",
    ),
    (
        "sweep: run-one with a config.json of another tool",
        SWEEP,
        ["run-one", "{root}/run-of-another-tool"],
        "{root}/run-of-another-tool/config.json lacks name, temperature, label_smoothing, sem_weight, "
        "train_args: not a config.json of ctemp-alt-sweep",
    ),
    (
        "sweep: finalize of a directory that is no experiment",
        SWEEP,
        ["finalize", "{root}/work/sweep-nowhere"],
        "EXPERIMENT_DIR {root}/work/sweep-nowhere has no experiment.json",
    ),
    (
        "sweep.sh: --gpus-per-run 0",
        ["bash", os.path.join(ALT, "sweep.sh")],
        [*SWEEP_OK, "--gpus", "0", "--gpus-per-run", "0"],
        "--gpus-per-run must be >= 1, got 0",
    ),
    (
        "run_all.sh: not a direction",
        ["bash", os.path.join(ALT, "run_all.sh")],
        ["english", "--local", "{root}/local"],
        "'english' is not a direction",
    ),
    (
        "run_all.sh: a misspelt fairseq-train option, before the data are prepared",
        ["bash", os.path.join(ALT, "run_all.sh")],
        ["en-ja", "--local", "{root}/local", "--work", "{root}/new-work", "--vocab", "20", "--cpu"]
        + ["--preset", "mini", "--temperatures", "1,2", "--", "--stop-time-hourz", "1"],
        "unrecognized arguments: --stop-time-hourz 1",
    ),
    (
        "run_all.sh: --gpus the sweep does not see, before the data are prepared",
        ["bash", os.path.join(ALT, "run_all.sh")],
        ["en-ja", "--local", "{root}/local", "--work", "{root}/new-work", "--vocab", "20"]
        + ["--preset", "mini", "--temperatures", "1,2", "--gpus", "99"],
        "--gpus 99: ",
    ),
    (
        "run_all.sh: --slurm where there is no sbatch, before the data are prepared",
        ["bash", os.path.join(ALT, "run_all.sh")],
        ["en-ja", "--local", "{root}/local", "--work", "{root}/new-work", "--vocab", "20"]
        + ["--preset", "mini", "--temperatures", "1,2", "--slurm"],
        "--slurm: sbatch (SLURM's) is not on PATH",
    ),
    (
        "sweep: --check with --dry-run",
        SWEEP,
        ["run", *SWEEP_OK, "--check", "--dry-run"],
        "--check and --dry-run exclude each other: give one",
    ),
    (
        "paper_scale.sh: no --results",
        ["bash", os.path.join(ALT, "paper_scale.sh")],
        ["en-ja", "--local", "{root}/local"],
        "--results DIR is required (where the archive of the results goes)",
    ),
    (
        "paper_scale.sh: --runs-per-gpu with --cpu",
        ["bash", os.path.join(ALT, "paper_scale.sh")],
        ["en-ja", "--local", "{root}/local", "--results", "{root}/out", "--cpu", "--runs-per-gpu", "2"],
        "--runs-per-gpu is for every visible GPU: not with --gpus (repeat an id there: 0,0) or --cpu",
    ),
    (
        "paper_scale.sh: --runs-per-gpu 0",
        ["bash", os.path.join(ALT, "paper_scale.sh")],
        ["en-ja", "--local", "{root}/local", "--results", "{root}/out", "--runs-per-gpu", "0"],
        "--runs-per-gpu must be an integer >= 1, got '0'",
    ),
    (
        "paper_scale.sh: --results in a file",
        ["bash", os.path.join(ALT, "paper_scale.sh")],
        ["en-ja", "--local", "{root}/local", "--results", "{root}/a-file/out"],
        "--results {root}/a-file/out cannot be made (a file on its path, or no permission)",
    ),
    (
        "paper_scale.sh: --deadline 0",
        ["bash", os.path.join(ALT, "paper_scale.sh")],
        ["en-ja", "--local", "{root}/local", "--results", "{root}/out", "--deadline", "0"],
        "--deadline must be whole seconds >= 1, got '0'",
    ),
    (
        "paper_scale.sh: --wheels not a directory",
        ["bash", os.path.join(ALT, "paper_scale.sh")],
        ["en-ja", "--local", "{root}/local", "--results", "{root}/out", "--wheels", "{root}/nothing"],
        "--wheels {root}/nothing: no such directory",
    ),
    # ctemp-alt-results
    (
        "results: a truncated experiment.json",
        RESULTS,
        ["--work", "{root}/truncated-work", "--out", "{root}/truncated-out"],
        "{root}/truncated-work/sweep/en-vi.mini.spm20/experiment.json is not valid JSON (Unterminated string",
    ),
    (
        "results: an experiment.json without the sweep's settings",
        RESULTS,
        ["--work", "{root}/partial-work", "--out", "{root}/partial-out"],
        "{root}/partial-work/sweep/en-vi.mini.spm20/experiment.json lacks preset, data, data_tag, subsets, "
        "bleu_tokenize, decode_args, interval, average, max_update, eval_beam, grid_beams, grid_lenpens, "
        "speed_beams, log_interval, decode_batch: not an experiment.json of this version",
    ),
    (
        "results: a data directory whose prepare.json another tool wrote",
        RESULTS,
        ["--work", "{root}/unprepared-work", "--out", "{root}/unprepared-out"],
        "{root}/unprepared-work/data/en-vi.spm20/prepare.json lacks options, source, sizes, has_test, dropped, "
        "unassigned, remove_bpe, subsets, bin, raw: not a prepare.json of `ctemp-alt-data prepare`",
    ),
    (
        "results: a run.json another tool wrote",
        RESULTS,
        ["--work", "{root}/alien-run-work", "--out", "{root}/alien-run-out"],
        "{root}/alien-run-work/sweep/en-vi.mini.spm20/T1-ls0.1-sem0/run.json lacks direction, temperature, "
        "label_smoothing, sem_weight, training: not a run.json of ctemp-alt-sweep",
    ),
    (
        "results: --out is the work directory",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/results-work"],
        "was not written by ctemp-alt-results",
    ),
    (
        "results: --out holds a user's files",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/mine"],
        "mine exists and was not written by ctemp-alt-results",
    ),
    (
        "results: --out is a file",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/a-file"],
        "a-file is not a directory",
    ),
    # ctemp-alt-seeds
    (
        "seeds: a BLEU score above 100",
        alt_seeds,
        [
            "--runs",
            "{root}/alt-seeds/seed1/runs.csv",
            "{root}/alt-seeds/bleu150/runs.csv",
            "--output",
            "{root}/s",
        ],
        "--runs {root}/alt-seeds/bleu150/runs.csv line 2: dev greedy is 150, not a BLEU score (0 to 100)",
    ),
    (
        "seeds: a temperature that is not a number",
        alt_seeds,
        [
            "--runs",
            "{root}/alt-seeds/seed1/runs.csv",
            "{root}/alt-seeds/t-nan/runs.csv",
            "--output",
            "{root}/s",
        ],
        "--runs {root}/alt-seeds/t-nan/runs.csv line 2: T is nan, not a temperature (a positive number)",
    ),
    (
        "seeds: a runs.csv from before the seed column, its seed not given",
        alt_seeds,
        [
            "--runs",
            "{root}/alt-seeds/seed1/runs.csv",
            "{root}/alt-seeds/old/runs.csv",
            "--output",
            "{root}/s",
        ],
        "--runs {root}/alt-seeds/old/runs.csv has no seed column (written before it had one): give it as "
        "{root}/alt-seeds/old/runs.csv@SEED",
    ),
    (
        "seeds: runs of two label smoothings",
        alt_seeds,
        [
            "--runs",
            "{root}/alt-seeds/seed1/runs.csv",
            "{root}/alt-seeds/seed2-ls0.2/runs.csv",
            "--output",
            "{root}/s",
        ],
        "--runs: {root}/alt-seeds/seed1/runs.csv line 2 and {root}/alt-seeds/seed2-ls0.2/runs.csv line 2 "
        "differ in LS (0.1 vs 0.2): compare runs of one setting",
    ),
    (
        "seeds: one seed from two files",
        alt_seeds,
        [
            "--runs",
            "{root}/alt-seeds/seed1/runs.csv",
            "{root}/alt-seeds/old/runs.csv@1",
            "--output",
            "{root}/s",
        ],
        "--runs: transformer T=1 seed 1 is there twice ({root}/alt-seeds/seed1/runs.csv line 2 and "
        "{root}/alt-seeds/old/runs.csv line 2)",
    ),
    (
        "seeds: a variant twice",
        alt_seeds,
        [
            "--runs",
            "{root}/alt-seeds/seed1/runs.csv",
            "--variants",
            "transformer,transformer",
            "--output",
            "{root}/s",
        ],
        "argument --variants: expected comma-separated names, each once, got 'transformer,transformer'",
    ),
    (
        "seeds: --output names a finished table",
        alt_seeds,
        ["--runs", "{root}/alt-seeds/seed1/runs.csv", "--output", "{root}/alt-seeds/taken"],
        "--output: {root}/alt-seeds/taken.md exists; refusing to overwrite it (--force)",
    ),
    (
        "seeds: --output in a file, not a folder",
        alt_seeds,
        ["--runs", "{root}/alt-seeds/seed1/runs.csv", "--output", "{root}/a-file/s"],
        "--output: {root}/a-file/s.csv is in {root}/a-file, which is not a folder",
    ),
    ("results: no sweep", RESULTS, ["--work", "{root}/mine", "--out", "{root}/new"], "no sweep in"),
    (
        "results: unknown experiment",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/new", "--experiments", "en-vi.base"],
        "--experiments: no experiment en-vi.base in the working directory (it has: en-vi.mini.spm20)",
    ),
    (
        "results: unknown variant",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/new", "--variants", "transformer,gru"],
        "--variants: unknown gru (expected some of: transformer, ct_transformer,",
    ),
    (
        "results: empty variant name",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/new", "--variants", "transformer,"],
        "argument --variants: expected comma-separated names, got 'transformer,'",
    ),
    (
        "results: no run of the variants",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/new", "--variants", "lstm"],
        "--variants: no run of lstm in the experiments selected",
    ),
    # ctemp-average-checkpoints
    (
        "average: empty checkpoint",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/empty.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/empty.pt is empty (0 bytes), not a checkpoint",
    ),
    (
        "average: random bytes",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/random.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/random.pt is not a PyTorch checkpoint",
    ),
    (
        "average: a truncated checkpoint",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/truncated.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/truncated.pt is not a PyTorch checkpoint (no torch.save zip archive: truncated",
    ),
    (
        "average: an archive whose pickle is damaged",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/memo-archive.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/memo-archive.pt cannot be loaded (KeyError: 5): it is truncated, damaged or not a "
        "fairseq checkpoint",
    ),
    (
        "average: a text file",
        ["ctemp-average-checkpoints"],
        ["--inputs", "{ckpt}/text.pt", "{ckpt}/a.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/text.pt is not a PyTorch checkpoint",
    ),
    (
        "average: --num-epoch-checkpoints 0",
        average,
        ["--inputs", "{ckpt}", "--num-epoch-checkpoints", "0", "--output", "{root}/avg.pt"],
        "--num-epoch-checkpoints must be >= 1, got 0",
    ),
    (
        "average: other shapes",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/shape.pt", "--output", "{root}/avg.pt"],
        "parameter w has shape (3,) in {ckpt}/shape.pt but (2,) in {ckpt}/a.pt",
    ),
    (
        "average: NaN weights",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/nan.pt", "--output", "{root}/avg.pt"],
        "parameter w of {ckpt}/nan.pt has NaN or infinite values",
    ),
    (
        "average: mixed temperatures",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/t1.pt", "--output", "{root}/avg.pt"],
        "--allow-mixed-temperatures",
    ),
    (
        "average: a directory without --num-*",
        average,
        ["--inputs", "{ckpt}", "--output", "{root}/avg.pt"],
        "--inputs {ckpt} is a directory: give checkpoint files, or one directory with --num-epoch-checkpoints",
    ),
    (
        "average: one input twice",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/a.pt", "--output", "{root}/avg.pt"],
        "names {ckpt}/a.pt more than once",
    ),
    (
        "average: the same checkpoint under two names",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/b.pt", "{ckpt}/best.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/a.pt and {ckpt}/best.pt hold the same parameters",
    ),
    (
        "average: the same parameters saved twice",
        average,
        ["--inputs", "{ckpt}/a-again.pt", "{ckpt}/b.pt", "{ckpt}/a.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/a-again.pt and {ckpt}/a.pt hold the same parameters",
    ),
    (
        "average: existing output",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/b.pt", "--output", "{ckpt}/t1.pt"],
        "--output {ckpt}/t1.pt already exists; refusing to overwrite it",
    ),
    (
        "average: a calibrated input",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/calibrated.pt", "--output", "{root}/avg.pt"],
        "--inputs {ckpt}/calibrated.pt was calibrated by ctemp-calibrate (t*=1.7)",
    ),
    # ctemp-calibrate (cases that need a trained model: tests/test_calibrate.py)
    (
        "calibrate: no such checkpoint",
        calibrate,
        ["{toy}/bin", "--path", "{root}/none.pt"],
        "--path {root}/none.pt: no such file",
    ),
    (
        "calibrate: a text file as checkpoint",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/text.pt"],
        "--path {ckpt}/text.pt is not a PyTorch checkpoint",
    ),
    (
        "calibrate: an archive whose pickle is damaged",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/memo-archive.pt"],
        "--path {ckpt}/memo-archive.pt cannot be loaded (KeyError: 5): it is truncated, damaged or not a "
        "fairseq checkpoint",
    ),
    (
        "calibrate: not a checkpoint of fairseq-train",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt"],
        "--path {ckpt}/a.pt is not a checkpoint of fairseq-train (it has no 'best_loss')",
    ),
    (
        "calibrate: existing --json",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--json", "{root}/mine/notes.txt"],
        "--json {root}/mine/notes.txt already exists; refusing to overwrite it",
    ),
    (
        "calibrate: existing --write-checkpoint",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--write-checkpoint", "{ckpt}/b.pt"],
        "--write-checkpoint {ckpt}/b.pt already exists; refusing to overwrite it",
    ),
    (
        "calibrate: --plot and --json one file",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--json", "{root}/r.out", "--plot", "{root}/r.out"],
        "--plot {root}/r.out is also --json",
    ),
    (
        "calibrate: --plot in a missing directory",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--plot", "{root}/nowhere/r.png"],
        "--plot {root}/nowhere/r.png is in {root}/nowhere, which does not exist",
    ),
    # ctemp-greedy-vs-beam
    (
        "greedy-vs-beam: not a list of integers",
        greedy_vs_beam,
        [*GVB[:5], "--grid-beams", "2,x", "--", "--cpu"],
        "argument --grid-beams: expected comma-separated integers, got '2,x'",
    ),
    (
        "greedy-vs-beam: a length penalty twice",
        greedy_vs_beam,
        [*GVB[:5], "--grid-beams", "2,4", "--grid-lenpens", "0.8,1,1.0", "--", "--cpu"],
        "argument --grid-lenpens: expected comma-separated numbers, each once, got '0.8,1,1.0'",
    ),
    (
        "greedy-vs-beam: random-bytes checkpoint",
        greedy_vs_beam,
        ["{toy}/bin", "--checkpoint", "{ckpt}/random.pt", *GVB[3:]],
        "--checkpoint {ckpt}/random.pt is not a PyTorch checkpoint",
    ),
    (
        "greedy-vs-beam: DATA is a file",
        greedy_vs_beam,
        ["{root}/a-file", "--checkpoint", "{ckpt}/a.pt"],
        "DATA {root}/a-file: no such directory",
    ),
    (
        "ct_analysis: --output is a directory",
        ct_analysis,
        [
            "dump",
            "--path",
            "{ckpt}/a.pt",
            "--data",
            "{toy}/lm-bin",
            "--text",
            "{toy}/raw/test.tgt",
            "--output",
            "{root}/mine",
            "--force",
        ],
        "{root}/mine is a directory; give a file name",
    ),
    (
        "greedy-vs-beam: a fairseq-generate option outside the decoding API",
        greedy_vs_beam,
        [*GVB[:5], "--", "--cpu", "--sampling"],
        "after --: --sampling is not a decoding option this tool passes on to fairseq's API",
    ),
    (
        "greedy-vs-beam: --save-dir is a file",
        greedy_vs_beam,
        [*GVB[:5], "--save-dir", "{root}/a-file", "--", "--cpu"],
        "{root}/a-file/greedy.hyp is in {root}/a-file, which is not a folder",
    ),
    (
        "greedy-vs-beam compare: empty files",
        greedy_vs_beam,
        ["compare", "--ref", "{refs}/empty", "--baseline", "{refs}/empty", "--system", "{refs}/empty"],
        "--ref {refs}/empty is empty",
    ),
    (
        "greedy-vs-beam compare: CR-only line ends",
        greedy_vs_beam,
        [
            "compare",
            "--ref",
            "{refs}/cr-only.tgt",
            "--baseline",
            "{refs}/cr-only.tgt",
            "--system",
            "{refs}/cr-only.tgt",
        ],
        "--ref {refs}/cr-only.tgt: line 1 holds a carriage return (CR) that ends no line",
    ),
    (
        "greedy-vs-beam compare: a hypothesis file one line short",
        greedy_vs_beam,
        [
            "compare",
            "--ref",
            "{toy}/raw/test.tgt",
            "--baseline",
            "{toy}/raw/test.tgt",
            "--system",
            "{refs}/one-short.tgt",
        ],
        "lines but there are",
    ),
    # ctemp-toy-translation, ctemp-user-dir
    (
        "toy-translation: --vocab 0",
        toy_translation,
        ["{root}/new", "--vocab", "0"],
        "--vocab must be >= 1, got 0",
    ),
    (
        "toy-translation: --train -5",
        ["ctemp-toy-translation"],
        ["{root}/new", "--train", "-5"],
        "--train must be >= 1, got -5",
    ),
    (
        "toy-translation: existing corpus",
        toy_translation,
        ["{toy}/raw"],
        "train.src exists; refusing to overwrite it",
    ),
    ("user-dir: an argument", ctemp_user_dir_main, ["--path"], "unrecognized arguments: --path"),
    # fairseq-train with the plugin
    (
        "train: degenerate --softmax-temperature",
        ["fairseq-train"],  # a subprocess: the plugin's exit hook in the installed script
        [*TRAIN, "tempered_ce", "--softmax-temperature", "1e-9"],
        "fairseq-train: error: --softmax-temperature must be in [0.01, 100], got 1e-09",
    ),
    (
        "ctemp-train: degenerate --softmax-temperature",
        ["ctemp-train"],  # a subprocess, as the line above
        [*TRAIN, "tempered_ce", "--softmax-temperature", "1e-9"],
        "ctemp-train: error: --softmax-temperature must be in [0.01, 100], got 1e-09",
    ),
    (
        "ctemp-train: a --lr fairseq cannot read",
        ctemp_train,  # (stock fairseq-train: ast's SyntaxError with its traceback)
        [*TRAIN, "tempered_ce", "--lr", "3e-3x"],
        "ctemp-train: error: argument --lr: invalid value: '3e-3x' (a number, or numbers separated by commas)",
    ),
    (
        "ctemp-train: no such DATA folder",
        ctemp_train,  # (stock fairseq-train: FileNotFoundError's traceback, after making --save-dir)
        ["{root}/nowhere", *TRAIN[1:], "tempered_ce"],
        "ctemp-train: error: DATA {root}/nowhere: no such folder (fairseq-preprocess's --destdir)",
    ),
    (
        "ctemp-train: DATA is a file",
        ctemp_train,  # (stock fairseq-train: NotADirectoryError's traceback, after making --save-dir)
        ["{root}/a-file", *TRAIN[1:], "tempered_ce"],
        "ctemp-train: error: DATA {root}/a-file: not a folder (fairseq-preprocess's --destdir)",
    ),
    (
        "ctemp-train: a DATA folder fairseq-preprocess did not write",
        ctemp_train,  # (stock fairseq-train: FileNotFoundError's traceback, after making --save-dir)
        ["{toy}/raw", *LM_TRAIN[1:], "--arch", "transformer_lm"],
        "ctemp-train: error: DATA {toy}/raw has no dict.txt: give the --destdir of fairseq-preprocess",
    ),
    (
        "ctemp-train: a translation DATA folder without fairseq-preprocess's files, no -s/-t",
        ctemp_train,  # (stock fairseq-train: "Could not infer language pair" with its traceback)
        ["{toy}/raw", *TRAIN[1:], "tempered_ce"],
        "ctemp-train: error: DATA {toy}/raw has no SPLIT.SRC-TGT.* files to infer the language pair from "
        "(without -s/-t): give the --destdir of fairseq-preprocess",
    ),
    (
        "ctemp-train: a DATA folder without the training split",
        ctemp_train,  # (stock fairseq-train: FileNotFoundError's traceback, after building the model)
        ["{root}/no-train", *TRAIN[1:], "tempered_ce"],
        "ctemp-train: error: DATA {root}/no-train has no train split (train.src-tgt.src.bin and .idx): "
        "binarize it with fairseq-preprocess --trainpref, or name the split with --train-subset",
    ),
    (
        "ctemp-train: a second DATA shard without the training split",
        ctemp_train,  # (stock fairseq-train: the same, at the second epoch)
        ["{toy}/bin:{root}/no-train", *TRAIN[1:], "tempered_ce"],
        "ctemp-train: error: DATA {root}/no-train has no train split",
    ),
    (
        "ctemp-train: a second DATA shard binarized with another dictionary",
        ctemp_train,  # (stock fairseq-train: reads its word ids with the first shard's dictionary)
        ["{toy}/bin:{root}/dicts-apart", *TRAIN[1:], "tempered_ce"],
        "ctemp-train: error: DATA {root}/dicts-apart has another dict.tgt.txt than the first shard "
        "{toy}/bin: fairseq reads the first shard's dictionaries for every shard",
    ),
    (
        "ctemp-train: a --restore-file that is not there",
        ctemp_train,  # (stock fairseq-train: trains from scratch, "No existing checkpoint found")
        [*TRAIN, "tempered_ce", "--restore-file", "{root}/train-out/checkpoint9.pt"],
        "ctemp-train: error: --restore-file {root}/train-out/checkpoint9.pt: no such file (read as given, "
        "not in --save-dir); fairseq-train would train from scratch",
    ),
    (
        "ctemp-train: a --continue-once that is not there",
        ctemp_train,  # (stock fairseq-train: the same, where --save-dir has no checkpoint_last.pt)
        [*TRAIN, "tempered_ce", "--continue-once", "checkpoint_best.pt"],
        "ctemp-train: error: --continue-once checkpoint_best.pt: no such file",
    ),
    (
        "ctemp-train: a --restore-file over a --save-dir it would not resume",
        ctemp_train,  # (stock fairseq-train: starts again from it, overwriting checkpoint_last.pt)
        [*TRAIN, "tempered_ce", "--save-dir", "{root}/resumable", "--restore-file", "{ckpt}/a.pt"],
        "ctemp-train: error: --restore-file {ckpt}/a.pt: --save-dir {root}/resumable has a "
        "checkpoint_last.pt, which fairseq-train would not resume but overwrite",
    ),
    (
        "ctemp-train: a BLEU checkpoint metric without --maximize-best-checkpoint-metric",
        ctemp_train,  # (stock fairseq-train: keeps the lowest BLEU as checkpoint_best.pt, silently)
        [*TRAIN, "tempered_ce", "--eval-bleu", "--best-checkpoint-metric", "bleu"],
        "ctemp-train: error: --best-checkpoint-metric bleu is better higher: give "
        "--maximize-best-checkpoint-metric",
    ),
    (
        "ctemp-train: a loss checkpoint metric with --maximize-best-checkpoint-metric",
        ctemp_train,  # (stock fairseq-train: keeps the highest loss as checkpoint_best.pt, silently)
        [*TRAIN, "tempered_ce", "--best-checkpoint-metric", "nll_loss", "--maximize-best-checkpoint-metric"],
        "ctemp-train: error: --best-checkpoint-metric nll_loss is better lower: leave out "
        "--maximize-best-checkpoint-metric",
    ),
    (
        "ctemp-train: a BLEU checkpoint metric without --eval-bleu",
        ctemp_train,  # (stock fairseq-train: KeyError 'bleu' after the first epoch)
        [*TRAIN, "tempered_ce", "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric"],
        "ctemp-train: error: --best-checkpoint-metric bleu needs --eval-bleu",
    ),
    (
        "ctemp-train: --eval-bleu-args with a key fairseq's generation does not know",
        ctemp_train,  # (stock fairseq-train: validates at beam 5, the key ignored without a word)
        [
            *TRAIN,
            "tempered_ce",
            "--eval-bleu",
            "--eval-bleu-args",
            '{{"beam_size": 1}}',
        ],  # ({{ }}: braces of str.format)
        "ctemp-train: error: --eval-bleu-args: beam_size is not one of fairseq's generation options",
    ),
    (
        "ctemp-train: --eval-bleu-args that are not JSON",
        ctemp_train,  # (stock fairseq-train: JSONDecodeError's traceback)
        [*TRAIN, "tempered_ce", "--eval-bleu", "--eval-bleu-args", "{{beam: 1}}"],
        "ctemp-train: error: --eval-bleu-args {{beam: 1}}: not JSON (",
    ),
    (
        "ctemp-train: an --eval-bleu-remove-bpe fairseq does not know",
        ctemp_train,  # (stock fairseq-train: NotImplementedError's traceback at the first validation)
        [*TRAIN, "tempered_ce", "--eval-bleu", "--eval-bleu-remove-bpe", "spm"],
        "ctemp-train: error: --eval-bleu-remove-bpe spm: not one of fairseq's post-processing options",
    ),
    (
        "ctemp-train: a --finetune-from-model that is not there",
        ctemp_train,  # (stock fairseq-train: a ValueError's traceback, after building the model)
        [*TRAIN, "tempered_ce", "--finetune-from-model", "{root}/pretrained.pt"],
        "ctemp-train: error: --finetune-from-model {root}/pretrained.pt: no such file",
    ),
    (
        "ctemp-train: a --valid-subset the DATA folder lacks",
        ctemp_train,  # (stock fairseq-train: FileNotFoundError's traceback, after building the model)
        [*LM_TRAIN, "--arch", "transformer_lm", "--valid-subset", "valid,valid7"],
        "ctemp-train: error: DATA {toy}/lm-bin has no valid7 split (valid7.bin and .idx): binarize it with "
        "fairseq-preprocess --validpref, name the split with --valid-subset, or train with --disable-validation",
    ),
    (
        "ctemp-train: a translation architecture for a language model",
        ctemp_train,  # (stock fairseq-train: AttributeError's traceback, after building the model)
        [*LM_TRAIN, "--arch", "transformer"],
        "ctemp-train: error: --arch transformer is not a language model, which --task language_modeling trains",
    ),
    (
        "ctemp-train: a language model's architecture for translation",
        ctemp_train,  # (stock fairseq-train: omegaconf's InterpolationKeyError with its traceback)
        [*TRAIN[:4], "transformer_lm", *TRAIN[TRAIN.index("--cpu") :], "tempered_ce"],
        "ctemp-train: error: --arch transformer_lm is not an encoder-decoder (translation) model, which "
        "--task translation trains",
    ),
    (
        "ctemp-train: --share-all-embeddings with a dictionary per language",
        ctemp_train,  # (stock fairseq-train: ValueError's traceback)
        ["{root}/dicts-apart", *TRAIN[1:], "tempered_ce", "--share-all-embeddings"],
        "ctemp-train: error: --share-all-embeddings needs one dictionary for both languages "
        "(fairseq-preprocess --joined-dictionary); DATA {root}/dicts-apart has dict.src.txt and "
        "dict.tgt.txt apart",
    ),
    (
        "ctemp-train: --fp16 on a CPU",
        ctemp_train,  # (stock fairseq-train: "Torch not compiled with CUDA enabled", with its traceback)
        [*TRAIN, "tempered_ce", "--fp16"],
        "ctemp-train: error: --fp16 needs a CUDA device: on a CPU leave it out (--bf16 runs there)",
    ),
    (
        "ctemp-train: an embedding size the attention heads do not divide",
        ctemp_train,  # (stock fairseq-train: an AssertionError's traceback)
        [*TRAIN, "tempered_ce", "--encoder-attention-heads", "3"],
        "ctemp-train: error: --encoder-embed-dim 32 must be a multiple of --encoder-attention-heads 3",
    ),
    (
        "ctemp-train: --update-freq 0",
        ctemp_train,  # (stock fairseq-train: ZeroDivisionError's traceback)
        [*TRAIN, "tempered_ce", "--update-freq", "0"],
        "ctemp-train: error: --update-freq must be >= 1 (batches per update), got 0",
    ),
    (
        "ctemp-train: --batch-size 0",
        ctemp_train,  # (stock fairseq-train: no limit on the sentences of a batch, without a word)
        [*TRAIN, "tempered_ce", "--batch-size", "0", "--max-update", "1"],  # (a stop, were it to train)
        "ctemp-train: error: --batch-size must be >= 1, got 0",
    ),
    (
        "ctemp-train: several learning rates for reduce_lr_on_plateau",
        ctemp_train,  # (stock fairseq-train: ValueError's traceback)
        [*TRAIN, "tempered_ce", "--lr-scheduler", "reduce_lr_on_plateau", "--lr", "1e-3,5e-4"],
        "ctemp-train: error: --lr 0.001,0.0005: several learning rates are --lr-scheduler fixed's (one per "
        "epoch); --lr-scheduler reduce_lr_on_plateau takes one",
    ),
    (
        "ctemp-train: inverse_sqrt without warm-up",
        ctemp_train,  # (stock fairseq-train: ZeroDivisionError's traceback)
        [*TRAIN, "tempered_ce", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "0"],
        "ctemp-train: error: --lr-scheduler inverse_sqrt needs --warmup-updates >= 1 (it divides by it), got 0",
    ),
    (
        "ctemp-train: a dropout above 1",
        ctemp_train,  # (stock fairseq-train: ValueError's traceback, after building half the model)
        [*TRAIN, "tempered_ce", "--dropout", "1.5"],
        "ctemp-train: error: --dropout must be in [0, 1], got 1.5",
    ),
    (
        "ctemp-train: --save-dir in a file",
        ctemp_train,  # (stock fairseq-train: NotADirectoryError's traceback)
        [*TRAIN, "tempered_ce", "--save-dir", "{root}/a-file/checkpoints"],
        "ctemp-train: error: --save-dir {root}/a-file/checkpoints cannot be made: {root}/a-file is not a folder",
    ),
    (
        "ctemp-train: no --arch",
        ctemp_train,  # (stock fairseq-train: a bare RuntimeError's traceback)
        [a for a in TRAIN if a not in ("--arch", "transformer")] + ["tempered_ce"],
        "ctemp-train: error: --arch must be given: one of fairseq's architectures (--help lists them)",
    ),
    (
        "ctemp-train: no batch size",
        ctemp_train,  # (stock fairseq-train: an AssertionError's traceback)
        [*TRAIN[: TRAIN.index("--max-tokens")], *TRAIN[TRAIN.index("--max-tokens") + 2 :], "tempered_ce"],
        "ctemp-train: error: --max-tokens or --batch-size must be given: fairseq makes no batches without one",
    ),
    (
        "ctemp-train: every training example longer than the model's positions",
        ["ctemp-train"],  # a subprocess: the plugin's exit hook (stock fairseq-train: an IndexError)
        [*TRAIN, "tempered_ce", "--max-source-positions", "2", "--max-target-positions", "2"],
        "ctemp-train: error: --max-source-positions / --max-target-positions (--tokens-per-sample for a "
        "language model): every one of the 800 examples of train is longer than the model's positions "
        "allow (2 source / 2 target tokens; example #",
    ),
    (
        "ctemp-train: a validation example longer than the model's positions",
        ["ctemp-train"],  # (stock fairseq-train: an Exception with its traceback)
        [*TRAIN, "tempered_ce", "--max-source-positions", "17", "--max-target-positions", "17"],
        "target tokens) is longer than the model's positions allow (17 source / 17 target tokens): raise "
        "them, or skip such examples with --skip-invalid-size-inputs-valid-test",
    ),
    (
        "ctemp-train: every training example longer than --max-tokens",
        ["ctemp-train"],  # (fairseq-train caps the training positions at --max-tokens: as above)
        [*TRAIN, "tempered_ce", "--max-tokens", "3", "--max-tokens-valid", "1000"],
        "ctemp-train: error: --max-source-positions / --max-target-positions (--tokens-per-sample for a "
        "language model): every one of the 800 examples of train is longer than the model's positions "
        "allow (3 source / 3 target tokens; example #",
    ),
    (
        "ctemp-train: a validation example longer than --max-tokens-valid",
        ["ctemp-train"],  # (stock fairseq-train: batch_by_size's AssertionError with its traceback)
        [*TRAIN, "tempered_ce", "--max-tokens-valid", "3"],
        "ctemp-train: error: --max-tokens-valid (--max-tokens where not given): a batch of 3 tokens "
        "cannot hold example #",
    ),
    (
        "ctemp-train: fairseq's batching would leave out every example",
        ["ctemp-train"],  # (stock fairseq-train: "The dataset is empty" with its traceback)
        [
            *LM_TRAIN,
            "--arch",
            "ct_transformer_lm_tiny",
            "--criterion",
            "ct_cross_entropy",
            "--tokens-per-sample",
            "16",
            "--max-tokens",
            "3",
        ],  # fmt: skip  (one block of 3 tokens fits)
        "ctemp-train: error: --required-batch-size-multiple 8: fairseq's batching leaves 1 of the 1 "
        "examples out of every epoch",
    ),
    (
        "ctemp-train: --user-dir of another copy of the plugin",
        ctemp_train,
        [*TRAIN, "tempered_ce", "--user-dir", "{root}/checkout/fairseq_ctemp"],
        "ctemp-train: error: --user-dir {root}/checkout/fairseq_ctemp is another copy of fairseq_ctemp than "
        "the one ctemp-train runs from",
    ),
    (
        "train: degenerate --ct-constant",
        fairseq_train,
        [
            *LM_TRAIN,
            "--arch",
            "ct_transformer_lm_tiny",
            "--ct-normalization",
            "constant",
            "--ct-constant",
            "1e-30",
            "--criterion",
            "ct_cross_entropy",
        ],
        "fairseq-train: error: --ct-constant must be in [0.01, 100], got 1e-30",
    ),
    (
        "train: tempered_ce with the contextual-temperature translator",
        fairseq_train,
        [*TRAIN, "tempered_ce", "--arch", "ct_transformer_tiny", "--softmax-temperature", "2"],
        "fairseq-train: error: --criterion tempered_ce needs a model whose net_output[0] are logits; "
        "this model has a temperature head (ct_transformer, ct_transformer_lm, ct_lstm_lm): use "
        "--criterion ct_cross_entropy",
    ),
    (
        "train: sact_transformer with lambda <= 1",
        fairseq_train,
        [*TRAIN, "tempered_ce", "--arch", "sact_transformer_tiny", "--sact-lambda", "0.5"],
        "fairseq-train: error: --sact-lambda must be a finite number > 1 (tau_t = lambda ** beta_t lies "
        "in (1/lambda, lambda)), got 0.5",
    ),
    (
        "train: sact_transformer with an option of another mode",
        fairseq_train,
        [*TRAIN, "tempered_ce", "--arch", "sact_transformer_tiny", "--fixed-attention-temperature", "0.9"],
        "fairseq-train: error: --fixed-attention-temperature is only used with --attention-temperature "
        "fixed, not sact",
    ),
    (
        "generate: a switch of the plugin set to a value it does not take",
        ["/usr/bin/env", "CTEMP_FIX_NO_REPEAT_NGRAM=true", *console_command("fairseq-generate")],
        [
            "{toy}/bin",
            "--path",
            "{ckpt}/a.pt",
            "--user-dir",
            PLUGIN_DIR,
            "--cpu",
            "--no-repeat-ngram-size",
            "2",
        ],
        "fairseq-generate: error: CTEMP_FIX_NO_REPEAT_NGRAM='true': give CTEMP_FIX_NO_REPEAT_NGRAM=1 (on) or 0 (off)",
    ),
    (
        "train: exact resume asked for with a value it does not take",
        ["/usr/bin/env", "CTEMP_EXACT_RESUME=yes", *console_command("fairseq-train")],
        [*TRAIN, "tempered_ce", "--save-dir", "{root}/new-save"],
        "fairseq-train: error: CTEMP_EXACT_RESUME='yes': give CTEMP_EXACT_RESUME=1 (on) or 0 (off)",
    ),
    (
        "generate: a damaged checkpoint (empty)",
        fairseq_generate,
        ["{toy}/bin", "--path", "{ckpt}/empty.pt", "--user-dir", PLUGIN_DIR, "--cpu", "--gen-subset", "test"],
        "fairseq-generate: error: checkpoint {ckpt}/empty.pt is empty (0 bytes), not a checkpoint file",
    ),
    (
        "generate: a damaged checkpoint (random)",
        fairseq_generate,
        [
            "{toy}/bin",
            "--path",
            "{ckpt}/random.pt",
            "--user-dir",
            PLUGIN_DIR,
            "--cpu",
            "--gen-subset",
            "test",
        ],
        "fairseq-generate: error: checkpoint {ckpt}/random.pt cannot be loaded (",  # the error depends on the bytes
    ),
    (
        "generate: a damaged checkpoint (the unpickler's KeyError)",
        fairseq_generate,
        ["{toy}/bin", "--path", "{ckpt}/memo.pt", "--user-dir", PLUGIN_DIR, "--cpu", "--gen-subset", "test"],
        "fairseq-generate: error: checkpoint {ckpt}/memo.pt cannot be loaded (KeyError: 5)",
    ),
    (
        "generate: an archive whose pickle is damaged",
        fairseq_generate,
        [
            "{toy}/bin",
            "--path",
            "{ckpt}/memo-archive.pt",
            "--user-dir",
            PLUGIN_DIR,
            "--cpu",
            "--gen-subset",
            "test",
        ],
        "fairseq-generate: error: checkpoint {ckpt}/memo-archive.pt cannot be loaded (KeyError: 5)",
    ),
    (
        "generate: a damaged checkpoint (text)",
        fairseq_generate,
        ["{toy}/bin", "--path", "{ckpt}/text.pt", "--user-dir", PLUGIN_DIR, "--cpu", "--gen-subset", "test"],
        "fairseq-generate: error: checkpoint {ckpt}/text.pt cannot be loaded (IndexError",
    ),
    (
        "generate: a damaged checkpoint (truncated)",
        fairseq_generate,
        [
            "{toy}/bin",
            "--path",
            "{ckpt}/truncated.pt",
            "--user-dir",
            PLUGIN_DIR,
            "--cpu",
            "--gen-subset",
            "test",
        ],
        "fairseq-generate: error: checkpoint {ckpt}/truncated.pt cannot be loaded (RuntimeError: PytorchStreamReader failed reading zip archive",
    ),
    (
        "generate: a language model's checkpoint on translation data",
        fairseq_generate,
        ["{toy}/bin", "--path", "{ckpt}/lm.pt", "--user-dir", PLUGIN_DIR, "--cpu", "--gen-subset", "test"],
        "fairseq-generate: error: --path {ckpt}/lm.pt was trained for --task language_modeling, not --task "
        "translation: a language model scores text",
    ),
    (
        "generate: a translation checkpoint under --task language_modeling",
        fairseq_generate,
        [
            "{toy}/lm-bin",
            "--task",
            "language_modeling",
            "--path",
            "{ckpt}/mt.pt",
            "--user-dir",
            PLUGIN_DIR,
            "--cpu",
        ],
        "fairseq-generate: error: --path {ckpt}/mt.pt was trained for --task translation, not --task "
        "language_modeling: it needs --task translation and its data",
    ),
    (
        "train: ct_transformer with --ct-lambda under the softmax normalisation",
        fairseq_train,
        [*TRAIN, "ct_cross_entropy", "--arch", "ct_transformer_tiny", "--ct-lambda", "3"],
        "fairseq-train: error: --ct-lambda 3.0 is only used with --ct-normalization lambda_tanh or "
        "tanh_plus_lambda, not softmax",
    ),
    (
        "train: ct_transformer with --ct-alpha and no temperature",
        fairseq_train,
        [
            *TRAIN,
            "ct_cross_entropy",
            "--arch",
            "ct_transformer_tiny",
            "--ct-normalization",
            "none",
            "--ct-alpha",
            "2",
        ],
        "fairseq-train: error: --ct-alpha 2.0 is only used with --ct-normalization softmax, not none",
    ),
    (
        "train: ct_lstm_lm with --ct-alpha at its default value and no temperature",
        fairseq_train,
        [
            *LM_TRAIN,
            "--arch",
            "ct_lstm_lm",
            "--criterion",
            "ct_cross_entropy",
            "--ct-normalization",
            "none",
            "--ct-alpha",
            "1",
        ],
        "fairseq-train: error: --ct-alpha 1.0 is only used with --ct-normalization softmax, not none",
    ),
    (
        "train: ct_transformer with --ct-constant under lambda_tanh",
        fairseq_train,
        [
            *TRAIN,
            "ct_cross_entropy",
            "--arch",
            "ct_transformer_tiny",
            "--ct-normalization",
            "lambda_tanh",
            "--ct-constant",
            "2",
        ],
        "fairseq-train: error: --ct-constant 2.0 is only used with --ct-normalization constant, not lambda_tanh",
    ),
    (
        "train: ct_transformer with --mos-components and a softmax head",
        fairseq_train,
        [*TRAIN, "ct_cross_entropy", "--arch", "ct_transformer_tiny", "--mos-components", "3"],
        "fairseq-train: error: --mos-components 3 is only used with --output-head mos, not softmax",
    ),
    (
        "train: an LSTM LM with --ct-rank and no temperature (the architecture's default)",
        fairseq_train,
        [*LM_TRAIN, "--arch", "lstm_lm_tiny", "--criterion", "ct_cross_entropy", "--ct-rank", "8"],
        "fairseq-train: error: --ct-rank 8 is only used with --ct-normalization softmax or lambda_tanh or "
        "tanh_plus_lambda, not none",
    ),
    (
        "train: ct_lstm_lm (its config's defaults) with --mos-latent-dropout and a softmax head",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_lstm_lm", "--criterion", "ct_cross_entropy", "--mos-latent-dropout", "0.1"],
        "fairseq-train: error: --mos-latent-dropout 0.1 is only used with --output-head mos, not softmax",
    ),
    (
        "train: ct_transformer_lm with --ct-rank at a constant temperature",
        fairseq_train,
        [
            *LM_TRAIN,
            "--arch",
            "ct_transformer_lm_tiny",
            "--criterion",
            "ct_cross_entropy",
            "--ct-normalization",
            "constant",
            "--ct-constant",
            "2",
            "--ct-rank",
            "4",
        ],
        "fairseq-train: error: --ct-rank 4 is only used with --ct-normalization softmax or lambda_tanh or "
        "tanh_plus_lambda, not constant",
    ),
    (
        "train: ct_transformer_lm_tiny (tied adaptive input and softmax) with another softmax cutoff",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_transformer_lm_tiny", "--criterion", "ct_cross_entropy"]
        + ["--adaptive-softmax-cutoff", "30,60"],
        "fairseq-train: error: --adaptive-softmax-cutoff 30,60 must be the same as --adaptive-input-cutoff "
        "20,60: --tie-adaptive-weights (set by the adaptive presets) shares the adaptive input's weights",
    ),
    (
        "train: ct_transformer_lm with tied adaptive weights and no adaptive input",
        fairseq_train,
        [
            *LM_TRAIN,
            "--arch",
            "ct_transformer_lm",
            "--criterion",
            "ct_cross_entropy",
            "--output-head",
            "adaptive",
        ]
        + ["--adaptive-softmax-cutoff", "20,60", "--tie-adaptive-weights"],
        "fairseq-train: error: --tie-adaptive-weights needs --adaptive-input",
    ),
    (
        "train: ct_transformer_lm_tiny with another adaptive softmax factor",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_transformer_lm_tiny", "--criterion", "ct_cross_entropy"]
        + ["--adaptive-softmax-factor", "2"],
        "fairseq-train: error: --adaptive-softmax-factor 2.0 must be the same as --adaptive-input-factor 4.0",
    ),
    (
        "train: ct_transformer_lm_tiny with an adaptive input cutoff beyond the vocabulary",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_transformer_lm_tiny", "--criterion", "ct_cross_entropy"]
        + ["--adaptive-input-cutoff", "20,6000"],
        "fairseq-train: error: --adaptive-input-cutoff must be strictly increasing integers in [1, ",
    ),
    (
        "train: sact_transformer with attention heads that do not divide the embedding",
        fairseq_train,
        [*TRAIN, "tempered_ce", "--arch", "sact_transformer_tiny", "--decoder-attention-heads", "3"],
        "fairseq-train: error: --decoder-embed-dim 32 must be a multiple of --decoder-attention-heads 3",
    ),
    (
        "train: ct_transformer_lm with attention heads that do not divide the embedding",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_transformer_lm_tiny", "--criterion", "ct_cross_entropy"]
        + ["--decoder-attention-heads", "0"],
        "fairseq-train: error: --decoder-embed-dim 64 must be a multiple of --decoder-attention-heads 0",
    ),
    (
        "train: ct_transformer_lm, a softmax tied to an embedding of another size",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_transformer_lm_tiny", "--criterion", "ct_cross_entropy"]
        + ["--output-head", "softmax", "--share-decoder-input-output-embed", "--decoder-output-dim", "48"],
        "fairseq-train: error: --share-decoder-input-output-embed needs --decoder-output-dim (48) equal to "
        "--decoder-input-dim (64, the embedding's)",
    ),
    (
        "train: ct_lstm_lm, the tied softmax after a last layer of another size than the embedding",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_lstm_lm", "--criterion", "ct_cross_entropy"]
        + ["--embed-dim", "16", "--lstm-hidden-sizes", "16,24"],
        "fairseq-train: error: --lstm-hidden-sizes 16,24 ends with 24: the softmax tied to the input "
        "embedding (the default; --untie-embeddings unties it) needs --embed-dim 24, not 16",
    ),
    (
        "train: tempered_ce with an adaptive softmax",
        fairseq_train,
        [
            *LM_TRAIN,
            "--arch",
            "transformer_lm",
            "--decoder-layers",
            "1",
            "--decoder-embed-dim",
            "16",
            "--decoder-ffn-embed-dim",
            "32",
            "--decoder-attention-heads",
            "2",
            "--adaptive-softmax-cutoff",
            "20,40",
            "--criterion",
            "tempered_ce",
            "--softmax-temperature",
            "2",
        ],
        "fairseq-train: error: --criterion tempered_ce needs a full softmax output layer",
    ),
    # analysis and results scripts
    (
        "ct_analysis: non-UTF-8 --text",
        ct_analysis,
        [
            "dump",
            "--path",
            "{ckpt}/a.pt",
            "--data",
            "{toy}/lm-bin",
            "--text",
            "{root}/lm-text/latin1.txt",
            "--output",
            "{root}/o.tsv",
        ],
        "--text {root}/lm-text/latin1.txt: line 1 is not UTF-8",
    ),
    (
        "ct_analysis: --source of another length than --text",
        ct_analysis,
        [
            "dump",
            "--path",
            "{ckpt}/a.pt",
            "--data",
            "{toy}/bin",
            "--source",
            "{toy}/raw/train.src",
            "--text",
            "{toy}/raw/test.tgt",
            "--output",
            "{root}/o.tsv",
        ],
        "--source {toy}/raw/train.src has 800 lines, --text {toy}/raw/test.tgt 80: line N of one must be",
    ),
    (
        "ct_analysis: empty checkpoint",
        ct_analysis,
        [
            "dump",
            "--path",
            "{ckpt}/empty.pt",
            "--data",
            "{toy}/lm-bin",
            "--text",
            "{toy}/raw/test.tgt",
            "--output",
            "{root}/o.tsv",
        ],
        "--path {ckpt}/empty.pt is empty (0 bytes)",
    ),
    (
        "ct_analysis heatmap: unknown --cmap",
        ct_analysis,
        [
            "heatmap",
            *("--path", "{ckpt}/a.pt", "--data", "{toy}/lm-bin", "--text", "{toy}/raw/test.tgt"),
            *("--line", "1", "--output", "{root}/h.png", "--cmap", "nosuchmap"),
        ],
        "--cmap 'nosuchmap' is not a matplotlib colormap",
    ),
    (
        "ct_analysis dump: a translation checkpoint with a language model's --data",
        ct_analysis,
        [
            *("dump", "--path", "{ckpt}/mt.pt", "--data", "{toy}/lm-bin", "--text", "{toy}/raw/test.tgt"),
            *("--output", "{root}/d.tsv"),
        ],
        "--path {ckpt}/mt.pt cannot be loaded with --data {toy}/lm-bin: ",
    ),
    (
        "sact heatmaps: --out-dir is a file",
        sact_heatmaps,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--input", "{toy}/raw/test.src", "--out-dir", "{root}/a-file"],
        "--out-dir {root}/a-file is a file, not a directory",
    ),
    (
        "greedy-vs-beam: --json exists",
        greedy_vs_beam,
        [*GVB[:5], "--json", "{root}/mine/notes.txt", "--", "--cpu"],
        "{root}/mine/notes.txt already exists; refusing to overwrite it",
    ),
    (
        "data: --vocab too large for sentencepiece (nothing left behind)",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new", "--vocab", "100000"],
        "sentencepiece could not learn 100000 pieces",
    ),
    (
        "data: --vocab too small for the text's characters (nothing left behind)",
        DATA,
        ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new", "--vocab", "8"],
        "(choose a larger --vocab)",
    ),
    (
        "sact heatmaps: missing --input",
        sact_heatmaps,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--input", "{root}/nothing.src", "--out-dir", "{root}/maps"],
        "--input {root}/nothing.src: no such file",
    ),
    (
        "sact heatmaps: references one line short",
        sact_heatmaps,
        [
            "{toy}/bin",
            "--path",
            "{ckpt}/a.pt",
            "--input",
            "{toy}/raw/test.src",
            "--references",
            "{refs}/one-short.tgt",
            "--out-dir",
            "{root}/maps",
        ],
        "lines, --input {toy}/raw/test.src",
    ),
    (
        "sact heatmaps: a text file as checkpoint",
        sact_heatmaps,
        [
            "{toy}/bin",
            "--path",
            "{ckpt}/text.pt",
            "--input",
            "{toy}/raw/test.src",
            "--out-dir",
            "{root}/maps",
        ],
        "--path {ckpt}/text.pt is not a PyTorch checkpoint",
    ),
    (
        "quickstart: --epochs 0",
        quickstart,
        ["--epochs", "0", "--workdir", "{root}/new"],
        "--epochs must be >= 1, got 0",
    ),
    (
        "quickstart: --temperature 1",
        quickstart,
        ["--temperature", "1", "--workdir", "{root}/new"],
        "and not 1 (the baseline)",
    ),
    (
        "quickstart: a cut quickstart.json",
        quickstart,
        ["--workdir", "{root}/quickstart/cut"],
        "{root}/quickstart/cut/quickstart.json is not a quickstart.json this script wrote",
    ),
    (
        "quickstart: a quickstart.json without --epochs",
        quickstart,
        ["--workdir", "{root}/quickstart/no-epochs"],
        "quickstart.json does not record --epochs and --train-pairs: use another --workdir",
    ),
    (
        "quickstart: a --workdir it did not make",
        quickstart,
        ["--workdir", "{root}/mine"],
        "--workdir {root}/mine has files this script did not write (no quickstart.json): give a new",
    ),
    (
        "quickstart: a first version's workdir, other --train-pairs",
        quickstart,
        ["--workdir", "{root}/quickstart/first", "--epochs", "3", "--train-pairs", "100"],
        "--workdir {root}/quickstart/first has models of --train-pairs 3000: use that",
    ),
    (
        "lm_results: missing log",
        lm_results,
        ["plot", "--logs", "{root}/none.log", "--output", "{root}/c.png"],
        "no log {root}/none.log",
    ),
    (
        "lm_results: --csv without .csv",
        lm_results,
        ["plot", "--logs", "{root}/none.log", "--output", "{root}/c.png", "--csv", "{root}/c.tsv"],
        "--csv {root}/c.tsv: give a file name ending in .csv",
    ),
    (
        "lm_results: status of no runs directory",
        lm_results,
        ["status", "--runs", "{root}/no-runs", "--variants", "softmax"],
        "--runs {root}/no-runs: no such directory",
    ),
    (
        "lm_results: an evaluation another tool wrote",
        lm_results,
        ["status", "--runs", "{root}/lm-runs-partial", "--variants", "softmax"],
        "{root}/lm-runs-partial/softmax/eval_test.json lacks dataset, subset, checkpoint, tokens_per_sample, "
        "context_window, evaluated_tokens, expected_tokens, loss_base2, command, date: not an evaluation of "
        "evaluate.sh",
    ),
    (
        "lm_results: a truncated evaluation",
        lm_results,
        ["status", "--runs", "{root}/lm-runs-cut", "--variants", "softmax"],
        "{root}/lm-runs-cut/softmax/eval_test.json is not valid JSON (Expecting ',' delimiter",
    ),
    (
        "lm_results: a run twice",
        lm_results,
        ["table", "--runs", "{root}", "--variants", "softmax", "ct", "softmax", "--output", "{root}/table"],
        "--variants: softmax given twice; give each run once",
    ),
    (
        "lm_results: compare without a baseline",
        lm_results,
        ["compare", "--runs", "{root}", "--variants", "softmax", "--output", "{root}/compare"],
        "--variants needs a baseline and at least one variant to compare",
    ),
    (
        "results_pages: a misspelt --check",
        results_pages,
        ["--chek"],
        "unrecognized arguments: --chek",
    ),
    (
        "lm_results seeds: a table without its columns",
        lm_results,
        ["seeds", "--table", "{root}/seeds/columns.csv", "--output", "{root}/new/s"],
        "is not a table of `lm_results.py table` (columns variant, test_ppl)",
    ),
    (
        "lm_results seeds: a perplexity that is not a number",
        lm_results,
        ["seeds", "--table", "{root}/seeds/nan.csv", "--output", "{root}/new/s"],
        "line 3: 'ct' has no test perplexity >= 1 (got 'nan')",
    ),
    (
        "lm_results seeds: a seed that is not an integer",
        lm_results,
        ["seeds", "--table", "{root}/seeds/seed.csv", "--output", "{root}/new/s"],
        "line 3: 'ct@x': a run is named VARIANT or VARIANT@SEED, SEED an integer",
    ),
    (
        "lm_results seeds: one seed of a row twice",
        lm_results,
        ["seeds", "--table", "{root}/seeds/twice.csv", "--output", "{root}/new/s"],
        "softmax seed 1 is there twice",
    ),
    (
        "lm_results seeds: a baseline that is no row",
        lm_results,
        ["seeds", "--table", "{root}/seeds/good.csv", "--baseline", "mos", "--output", "{root}/new/s"],
        "--baseline mos is not a row of",
    ),
    (
        "lm_results seeds: --output taken",
        lm_results,
        ["seeds", "--table", "{root}/seeds/good.csv", "--output", "{root}/seeds/good"],
        "{root}/seeds/good.csv exists; refusing to overwrite it (--force)",
    ),
    (
        "lm_results table: --output taken",
        lm_results,
        ["table", "--runs", "{root}/none", "--variants", "softmax", "--output", "{root}/seeds/good"],
        "lm_results.py table: error: {root}/seeds/good.csv exists; refusing to overwrite it (--force)",
    ),
    (
        "lm_results plot: --csv taken",
        lm_results,
        [
            "plot",
            "--logs",
            "{root}/none.log",
            "--output",
            "{root}/new/c.png",
            "--csv",
            "{root}/seeds/good.csv",
        ],
        "lm_results.py plot: error: {root}/seeds/good.csv exists; refusing to overwrite it (--force)",
    ),
    (
        "lm_results: tau of a missing dump",
        lm_results,
        ["tau", "--dumps", "{root}/none/tau_test.tsv", "--output", "{root}/new/tau"],
        "lm_results.py tau: error: no dump {root}/none/tau_test.tsv (ctemp-ct-analysis dump --output",
    ),
    (
        "sact translate_subset.py: beam 0",
        sact_translate_subset,
        ["{toy}/bin", "{ckpt}/a.pt", "test", "0", "1", "{root}/new.hyp", "--cpu"],
        "BEAM must be an integer >= 1 and LENPEN a number > 0, got 0 1",
    ),
    (
        "sact translate_subset.py: an option the API does not take",
        sact_translate_subset,
        ["{toy}/bin", "{ckpt}/a.pt", "test", "4", "1", "{root}/new.hyp", "--print-alignment"],
        "--print-alignment is not a decoding option",
    ),
    (
        "sact translate_subset.py: existing output",
        sact_translate_subset,
        ["{toy}/bin", "{ckpt}/a.pt", "test", "4", "1", "{toy}/raw/test.tgt", "--cpu"],
        "{toy}/raw/test.tgt already exists; refusing to overwrite it",
    ),
    (
        "sact translate_subset.py: a subset DATA_BIN does not have",
        sact_translate_subset,
        ["{toy}/bin", "{ckpt}/a.pt", "dev", "4", "1", "{root}/new.hyp", "--cpu"],
        "SUBSET dev: DATA {toy}/bin has no such subset (no file dev.*)",
    ),
    (
        "sact summarize: missing work directory",
        sact_summarize,
        ["{root}/nowhere", "test", "5", "sact"],
        "WORK_DIR {root}/nowhere: no such directory",
    ),
    (
        "export_hydra_configs: unknown config",
        export_hydra_configs,
        ["--check", "alt_mini", "alt_huge"],
        "unknown config(s) alt_huge; known: alt_base, alt_small, alt_mini, lm_ptb_ct_mos,",
    ),
    ("bench_ct_lm: --rounds 0", bench_ct_lm, ["--rounds", "0", "--device", "cpu"], "--rounds must be >= 1"),
    (
        "bench_sact: --models without sact",
        bench_sact,
        ["--models", "stock", "none", "--device", "cpu"],
        "--models must include stock and sact",
    ),
    (
        "bench_translation: --models without the stock transformer",
        bench_translation,
        ["--models", "ct_transformer", "--device", "cpu"],
        "--models must be a comma-separated subset of transformer,ct_transformer,ct_transformer_none,"
        "sact_transformer,ct_transformer_chunked with transformer, got ['ct_transformer']",
    ),
    (
        "trace_report: a directory without traces",
        trace_report,
        ["{root}/work"],
        "DIR {root}/work has no <model>.trace.json.gz (a benchmark's --trace writes them)",
    ),
    (
        "gpu_check: unknown benchmark",
        PY + [os.path.join(REPO, "benchmarks", "gpu_check.py")],
        ["--allow-cpu", "--benchmarks", "tempered_ce,bogus", "--out", "{root}/gpu-report"],
        "--benchmarks must be a comma-separated subset of tempered_ce,tempered_ce_bf16,tempered_ce_sem,tempered_ce_chunked_8k,tempered_ce_chunked_32k,ct_lm,sact,translation or 'none'",
    ),
    (
        "bench_tempered_ce: --temperature 0",
        bench_tempered_ce,
        ["--temperature", "0", "--device", "cpu"],
        "--temperature must be in [0.01, 100]",
    ),
    (
        "bench_tempered_ce: --loss-chunk-tokens -1",
        bench_tempered_ce,
        ["--loss-chunk-tokens", "-1", "--device", "cpu"],
        "--loss-chunk-tokens must be >= 0 (0: off), got -1",
    ),
    (
        "bench_tempered_ce: --division with the chunked loss",
        bench_tempered_ce,
        ["--division", "--loss-chunk-tokens", "512", "--device", "cpu"],
        "--division needs --loss-chunk-tokens 0 and --temperature other than 1 (else the paths are one)",
    ),
    (
        "suite_time: --repeats 0",
        suite_time,
        ["--json", "{root}/suite.json", "--repeats", "0"],
        "--repeats must be >= 1, got 0",
    ),
    (
        "train: tempered_ce --loss-chunk-tokens -1",
        fairseq_train,
        [*TRAIN, "tempered_ce", "--loss-chunk-tokens", "-1"],
        "fairseq-train: error: --loss-chunk-tokens must be >= 0 (0: off), got -1",
    ),
    (
        "train: tempered_ce --loss-chunk-tokens on a model without one output projection",
        fairseq_train,
        [
            *TRAIN[:3],
            "--arch",
            "lstm",
            *TRAIN[TRAIN.index("--cpu") :],
            "tempered_ce",
            "--loss-chunk-tokens",
            "64",
        ],
        "fairseq-train: error: --loss-chunk-tokens needs a decoder whose output layer is one linear projection",
    ),
    (
        "train: ct_cross_entropy --label-smoothing 1",
        fairseq_train,
        [*TRAIN[:3], "--arch", "ct_transformer_tiny", *TRAIN[TRAIN.index("--cpu") :], "ct_cross_entropy"]
        + ["--label-smoothing", "1"],
        "fairseq-train: error: --label-smoothing must be in [0, 1), got 1.0",
    ),
    (
        "train: ct_cross_entropy --loss-chunk-tokens -1",
        fairseq_train,
        [*TRAIN[:3], "--arch", "ct_transformer_tiny", *TRAIN[TRAIN.index("--cpu") :], "ct_cross_entropy"]
        + ["--loss-chunk-tokens", "-1"],
        "fairseq-train: error: --loss-chunk-tokens must be an integer >= 0 (0: off), got -1",
    ),
    (
        "train: ct_cross_entropy --loss-chunk-tokens with the adaptive softmax",
        fairseq_train,
        [*LM_TRAIN, "--arch", "ct_transformer_lm_tiny", "--criterion", "ct_cross_entropy"]
        + ["--loss-chunk-tokens", "64"],
        "fairseq-train: error: --loss-chunk-tokens needs a head with the full distribution (--output-head "
        "softmax or mos); the adaptive softmax never holds the batch x vocabulary logits: use "
        "--loss-chunk-tokens 0",
    ),
    # the offline wheelhouse (scripts/)
    (
        "wheelhouse.sh: DIR exists",
        ["bash", os.path.join(SCRIPTS, "wheelhouse.sh")],
        ["{root}", "python3"],
        "{root} exists: name a new folder",
    ),
    (
        "wheelhouse.sh: PYTHON not a command",
        ["bash", os.path.join(SCRIPTS, "wheelhouse.sh")],
        ["{root}/new", "python9.9"],
        "PYTHON 'python9.9' is not a command",
    ),
    (
        "strip_torch_extensions.py: not fairseq's setup.py",
        [sys.executable, os.path.join(SCRIPTS, "strip_torch_extensions.py")],
        ["{toy}/raw/test.tgt"],
        "{toy}/raw/test.tgt: expected once, found 0 times: 'from torch.utils import cpp_extension' "
        "(fairseq 0.12.3's setup.py expected)",
    ),
    # the example recipes (shell)
    (
        "language_model/train.sh: unknown variant",
        ["bash", os.path.join(EXAMPLES, "language_model", "train.sh")],
        ["ptb", "ct-large", "{root}/new"],
        "unknown variant 'ct-large'",
    ),
    (
        "language_model/ptb_converged_experiment.sh: unknown step",
        ["bash", os.path.join(EXAMPLES, "language_model", "ptb_converged_experiment.sh")],
        ["evaluate"],
        "unknown step 'evaluate' (expected train, status or results)",
    ),
    (
        "language_model/eval_checkpoint.py: too few arguments",
        [sys.executable, os.path.join(EXAMPLES, "language_model", "eval_checkpoint.py")],
        ["{root}/eval_test.json", "82430", "ptb", "test"],
        "usage: eval_checkpoint.py RESULT.json EXPECTED_TOKENS DATASET SUBSET CHECKPOINT",
    ),
    (
        "language_model/prepare.sh: unknown dataset",
        ["bash", os.path.join(EXAMPLES, "language_model", "prepare.sh")],
        ["wikitext-3"],
        "unknown dataset 'wikitext-3'",
    ),
    (
        "language_model/evaluate.sh: no checkpoint",
        ["bash", os.path.join(EXAMPLES, "language_model", "evaluate.sh")],
        ["{root}/new", "ptb"],
        "no checkpoint {root}/new/checkpoint_best.pt",
    ),
    *(
        (
            f"language_model/evaluate.sh: {setting}",
            ["/usr/bin/env"],
            [setting, "bash", os.path.join(EXAMPLES, "language_model", "evaluate.sh"), "{root}/new", "ptb"],
            f"{setting.split('=')[0]} must be a whole number >= {least}, got '{setting.split('=')[1]}'",
        )
        for setting, least in (("TOKENS_PER_SAMPLE=abc", 1), ("CONTEXT_WINDOW=-5", 0), ("MAX_TOKENS=0", 1))
    ),
    *(
        (
            f"language_model/ptb_converged_experiment.sh: JOBS={jobs}",
            ["/usr/bin/env"],
            [f"JOBS={jobs}", "EXP_DIR={root}/new", "bash"]
            + [os.path.join(EXAMPLES, "language_model", "ptb_converged_experiment.sh")],
            f"JOBS must be a whole number >= 1, got '{jobs}'",
        )
        for jobs in ("0", "two")
    ),
    (
        "language_model/prepare.sh: WORKERS not a number",
        ["/usr/bin/env"],
        ["WORKERS=x", "bash", os.path.join(EXAMPLES, "language_model", "prepare.sh"), "ptb", "{root}"],
        "WORKERS must be a whole number >= 1, got 'x'",
    ),
    (
        "sact/train.sh: SAVE_DIR in a file",
        ["bash", os.path.join(EXAMPLES, "sact", "train.sh")],
        ["{toy}/bin", "{root}/a-file/run", "sact"],
        "SAVE_DIR {root}/a-file/run cannot be made: {root}/a-file is not a folder that can be written to",
    ),
    (
        "sact/train.sh: unknown variant",
        ["bash", os.path.join(EXAMPLES, "sact", "train.sh")],
        ["{toy}/bin", "{root}/new", "sact-2"],
        "unknown VARIANT 'sact-2'",
    ),
    (
        "sact/train.sh: fixed:TAU not a number",
        ["bash", os.path.join(EXAMPLES, "sact", "train.sh")],
        ["{toy}/bin", "{root}/new", "fixed:abc"],
        "VARIANT fixed:TAU needs a number TAU > 0, got 'abc'",
    ),
    *(
        (
            f"sact/{script}: an unknown variant after a good one, before the data",
            ["/usr/bin/env"],
            ["VARIANTS=none fixd:0.8", "bash", os.path.join(EXAMPLES, "sact", script)]
            + ["{root}/new", "{root}/nowhere"],
            "unknown VARIANT 'fixd:0.8' (sact, sact_released, none or fixed:TAU)",
        )
        for script in ("run_alt_small.sh", "run_iwslt15_en_vi.sh")
    ),
    *(
        (
            f"sact/{script}: a value fairseq-train refuses (BATCH_SIZE), before the data",
            ["/usr/bin/env"],
            [
                "BATCH_SIZE=64x",
                "bash",
                os.path.join(EXAMPLES, "sact", script),
                "{root}/new",
                "{root}/nowhere",
            ],
            "train.sh: error: fairseq-train refuses the training options: argument "
            "--batch-size/--max-sentences: invalid int value: '64x'",
        )
        for script in ("run_alt_small.sh", "run_iwslt15_en_vi.sh")
    ),
    (
        "sact/train.sh DRY_RUN=1: a misspelt fairseq-train option",
        ["/usr/bin/env"],
        ["DRY_RUN=1", "bash", os.path.join(EXAMPLES, "sact", "train.sh"), "{toy}/bin", "{root}/new", "sact"]
        + ["--max-epochz", "2"],
        "train.sh: error: fairseq-train refuses the training options: unrecognized arguments: --max-epochz 2",
    ),
    (
        "sact/train.sh DRY_RUN=1: USER_DIR another copy of the plugin",
        ["/usr/bin/env"],
        [
            "DRY_RUN=1",
            "USER_DIR={root}/checkout/fairseq_ctemp",
            "bash",
            os.path.join(EXAMPLES, "sact", "train.sh"),
        ]
        + ["{toy}/bin", "{root}/new", "sact"],
        "train.sh: error: fairseq-train refuses the training options: --user-dir {root}/checkout/fairseq_ctemp "
        "is another copy of fairseq_ctemp than the one ctemp-train runs from",
    ),
    (
        "language_model/train.sh DRY_RUN=1: LR not a number",
        ["/usr/bin/env"],
        ["DRY_RUN=1", "LR=abc", "bash", os.path.join(EXAMPLES, "language_model", "train.sh")]
        + ["ptb", "ct", "{root}/new"],
        "train.sh: error: fairseq-train refuses the training options: argument --lr: invalid",
    ),
    (
        "sact/evaluate.sh: no data",
        ["bash", os.path.join(EXAMPLES, "sact", "evaluate.sh")],
        ["{root}/nowhere", "{root}/new", "test", "{toy}/raw/test.tgt"],
        "DATA_BIN {root}/nowhere: no such directory",
    ),
    (
        "sact/evaluate.sh: BEAM not a number",
        ["/usr/bin/env"],
        ["BEAM=abc", "CHECKPOINT=a.pt", "bash", os.path.join(EXAMPLES, "sact", "evaluate.sh")]
        + ["{toy}/bin", "{ckpt}", "test", "{toy}/raw/test.tgt"],
        "BEAM must be a whole number >= 1, got 'abc'",
    ),
    (
        "sact/prepare_alt_en_vi.sh: no such LOCAL_DIR",
        ["bash", os.path.join(EXAMPLES, "sact", "prepare_alt_en_vi.sh")],
        ["{root}/new", "{root}/nowhere"],
        "LOCAL_DIR {root}/nowhere: no such directory",
    ),
    (
        "sact/prepare_alt_en_vi.sh: a DEST of another SPM_VOCAB",
        ["bash", os.path.join(EXAMPLES, "sact", "prepare_alt_en_vi.sh")],
        ["{root}/sact-alt-4000"],
        "DEST {root}/sact-alt-4000 was prepared with 'SPM_VOCAB=4000', not 'SPM_VOCAB=8000': give another DEST",
    ),
    (
        "sact/prepare_iwslt15_en_vi.sh: a DEST of other NWORDS_*",
        ["bash", os.path.join(EXAMPLES, "sact", "prepare_iwslt15_en_vi.sh")],
        ["{root}/iwslt-5000"],
        "DEST {root}/iwslt-5000 was prepared with 'NWORDS_SRC=17700 NWORDS_TGT=5000', not 'NWORDS_SRC=17700 "
        "NWORDS_TGT=7000': give another DEST",
    ),
    (
        "sact/prepare_alt_en_vi.sh: DEST in a file",
        ["bash", os.path.join(EXAMPLES, "sact", "prepare_alt_en_vi.sh")],
        ["{root}/a-file/alt"],
        "DEST {root}/a-file/alt cannot be made: {root}/a-file is not a folder that can be written to",
    ),
    (
        "sact/prepare_iwslt15_en_vi.sh: DEST in a file",
        ["bash", os.path.join(EXAMPLES, "sact", "prepare_iwslt15_en_vi.sh")],
        ["{root}/a-file/iwslt"],
        "DEST {root}/a-file/iwslt cannot be made: {root}/a-file is not a folder that can be written to",
    ),
    (
        "sact/prepare_iwslt15_en_vi.sh: no such LOCAL_DIR",
        ["bash", os.path.join(EXAMPLES, "sact", "prepare_iwslt15_en_vi.sh")],
        ["{root}/new", "{root}/nowhere"],
        "LOCAL_DIR {root}/nowhere: no such directory",
    ),
    (
        "sact/run_alt_small.sh: no such LOCAL_ALT_DIR",
        ["bash", os.path.join(EXAMPLES, "sact", "run_alt_small.sh")],
        ["{root}/new", "{root}/nowhere"],
        "LOCAL_DIR {root}/nowhere: no such directory",
    ),
    (
        "sact/run_iwslt15_en_vi.sh: no such LOCAL_DIR",
        ["bash", os.path.join(EXAMPLES, "sact", "run_iwslt15_en_vi.sh")],
        ["{root}/new", "{root}/nowhere"],
        "LOCAL_DIR {root}/nowhere: no such directory",
    ),
    (
        "softmax_tempering/train_and_decode.sh: T 0",
        ["bash", os.path.join(EXAMPLES, "softmax_tempering", "train_and_decode.sh")],
        ["{toy}/bin", "{root}/new", "0"],
        "T must be a number in [0.01, 100]",
    ),
    # the final decoding's settings, refused before the training, not after it
    *(
        (
            f"softmax_tempering/train_and_decode.sh: {setting}",
            ["/usr/bin/env"],
            [setting, "bash", os.path.join(EXAMPLES, "softmax_tempering", "train_and_decode.sh")]
            + ["{toy}/bin", "{root}/new", "2"],
            expected,
        )
        for setting, expected in (
            ("BEAM=0", "BEAM must be a whole number >= 1, got '0'"),
            ("AVERAGE=x", "AVERAGE must be a whole number >= 1, got 'x'"),
            (
                "GENERATE_ARGS=--lenpenn 1.2",
                "DEVICE_ARGS / GENERATE_ARGS: --lenpenn is not a decoding option this tool passes on",
            ),
            (
                "GENERATE_ARGS=--beam 3",
                "DEVICE_ARGS / GENERATE_ARGS: --beam cannot go after --: this command sets it",
            ),
        )
    ),
]


# Every text-file option of the tools against every kind of bad file: (option, argv with {FILE} in
# its place, the prefix of the error line). Expected per kind: the end of the error message.
TEXT_OPTIONS = {
    "greedy-vs-beam compare --ref": (
        greedy_vs_beam,
        ["compare", "--ref", "{FILE}", "--baseline", "{toy}/raw/test.tgt", "--system", "{toy}/raw/test.tgt"],
    ),
    "greedy-vs-beam compare --baseline": (
        greedy_vs_beam,
        ["compare", "--ref", "{toy}/raw/test.tgt", "--baseline", "{FILE}", "--system", "{toy}/raw/test.tgt"],
    ),
    "greedy-vs-beam compare --system": (
        greedy_vs_beam,
        ["compare", "--ref", "{toy}/raw/test.tgt", "--baseline", "{toy}/raw/test.tgt", "--system", "{FILE}"],
    ),
    "greedy-vs-beam --ref": (greedy_vs_beam, [*GVB[:3], "--ref", "{FILE}", "--", "--cpu"]),
    "greedy-vs-beam --dev-ref": (
        greedy_vs_beam,
        [*GVB[:5], "--grid-beams", "2", "--grid-lenpens", "1.0", "--dev-ref", "{FILE}", "--", "--cpu"],
    ),
    "sact-heatmaps --input": (
        sact_heatmaps,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--input", "{FILE}", "--out-dir", "{root}/maps"],
    ),
    "sact-heatmaps --references": (
        sact_heatmaps,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--input", "{toy}/raw/test.src", "--references", "{FILE}"]
        + ["--out-dir", "{root}/maps"],
    ),
    "ct-analysis dump --text": (
        ct_analysis,
        [
            "dump",
            "--path",
            "{ckpt}/a.pt",
            "--data",
            "{toy}/lm-bin",
            "--text",
            "{FILE}",
            "--output",
            "{root}/o.tsv",
        ],
    ),
    "ct-analysis dump --source": (
        ct_analysis,
        ["dump", "--path", "{ckpt}/a.pt", "--data", "{toy}/bin", "--source", "{FILE}"]
        + ["--text", "{toy}/raw/test.tgt", "--output", "{root}/o.tsv"],
    ),
}
BAD_FILES = {  # kind: (the file, the end of the message)
    "missing": ("{root}/nothing.txt", "{FILE}: no such file"),
    "a directory": ("{root}/mine", "{FILE}: is a directory, not a text file"),
    "empty": ("{refs}/empty", "{FILE} is empty"),
    "latin-1": ("{refs}/latin1.tgt", "{FILE}: line 3 is not UTF-8 (byte 0xe9"),
    "UTF-16": ("{refs}/utf16.tgt", "{FILE}: looks like UTF-16"),
    "CR-only line ends": (
        "{refs}/cr-only.tgt",
        "{FILE}: line 1 holds a carriage return (CR) that ends no line",
    ),
}
EMPTY_ELSEWHERE = {  # an empty --source is refused by its line count against --text
    "ct-analysis dump --source": "{refs}/empty has 0 lines, --text {toy}/raw/test.tgt 80",
}
FILE_CASES = [
    (f"{option}: {kind}", command, [a.replace("{FILE}", bad) for a in argv], message.replace("{FILE}", bad))
    for option, (command, argv) in TEXT_OPTIONS.items()
    for kind, (bad, message) in BAD_FILES.items()
]


# Every numeric option of the tools' own that has a range, at a value outside it (each tool's
# checks run before any file is read or model loaded): (name, command, argv, expected).
CT_DUMP = ["dump", "--path", "{ckpt}/a.pt", "--data", "{toy}/lm-bin", "--text", "{toy}/raw/test.tgt"]
CT_POSITIONS = [
    "positions",
    "--path",
    "{ckpt}/a.pt",
    "--data",
    "{toy}/lm-bin",
    "--text",
    "{toy}/raw/test.tgt",
]
HEATMAPS = ["{toy}/bin", "--path", "{ckpt}/a.pt", "--input", "{toy}/raw/test.src", "--out-dir", "{root}/maps"]
COMPARE = [
    "compare",
    "--ref",
    "{toy}/raw/test.tgt",
    "--baseline",
    "{toy}/raw/test.tgt",
    "--system",
    "{toy}/raw/test.tgt",
]
NUMBER_CASES = [
    ("greedy-vs-beam: --beam 0", greedy_vs_beam, [*GVB[:5], "--beam", "0", "--", "--cpu"], "--beam"),
    (
        "greedy-vs-beam: --subset not in DATA",
        greedy_vs_beam,
        [*GVB[:5], "--subset", "test1", "--", "--cpu"],
        "--subset test1: DATA {toy}/bin has no such subset (no file test1.*)",
    ),
    (
        "greedy-vs-beam: --dev-subset not in DATA",
        greedy_vs_beam,
        [*GVB[:5], "--grid-beams", "2", "--dev-subset", "dev", "--", "--cpu"],
        "--dev-subset dev: DATA {toy}/bin has no such subset (no file dev.*)",
    ),
    (
        "greedy-vs-beam: --lenpen nan",
        greedy_vs_beam,
        [*GVB[:5], "--lenpen", "nan", "--", "--cpu"],
        "--lenpen",
    ),
    ("greedy-vs-beam: --lenpen 0", greedy_vs_beam, [*GVB[:5], "--lenpen", "0", "--", "--cpu"], "--lenpen"),
    (
        "greedy-vs-beam: unknown --sacrebleu-tokenize",
        greedy_vs_beam,
        [*GVB[:5], "--sacrebleu-tokenize", "moses", "--", "--cpu"],
        "--sacrebleu-tokenize",
    ),
    (
        "greedy-vs-beam: --dev-ref without a grid",
        greedy_vs_beam,
        [*GVB[:5], "--dev-ref", "{toy}/raw/valid.tgt", "--", "--cpu"],
        "--dev-ref is only used with --grid-beams / --grid-lenpens",
    ),
    (
        "greedy-vs-beam: --dev-subset without a grid",
        greedy_vs_beam,
        [*GVB[:5], "--dev-subset", "valid", "--", "--cpu"],
        "--dev-subset is only used with --grid-beams / --grid-lenpens",
    ),
    (
        "sact heatmaps: --beam with --references",
        sact_heatmaps,
        [*HEATMAPS, "--references", "{toy}/raw/test.tgt", "--beam", "4"],
        "--beam is for beam search; with --references the sentences are force-decoded",
    ),
    (
        "sact heatmaps: --target-spm without --references",
        sact_heatmaps,
        [*HEATMAPS, "--target-spm", "{toy}/raw/test.tgt"],
        "--target-spm encodes --references: give them, or leave it out",
    ),
    (
        "sact heatmaps: --beam -2",
        sact_heatmaps,
        [*HEATMAPS, "--beam", "-2"],
        "--beam and --max-sentences must be >= 1",
    ),
    (
        "greedy-vs-beam: --temperature 0",
        greedy_vs_beam,
        [*GVB[:5], "--temperature", "0", "--", "--cpu"],
        "--temperature",
    ),
    (
        "greedy-vs-beam: --temperature nan",
        greedy_vs_beam,
        [*GVB[:5], "--temperature", "nan", "--", "--cpu"],
        "--temperature",
    ),
    (
        "greedy-vs-beam: --temperature inf",
        greedy_vs_beam,
        [*GVB[:5], "--temperature", "inf", "--", "--cpu"],
        "--temperature",
    ),
    (
        "greedy-vs-beam: --grid-lenpens 0",
        greedy_vs_beam,
        [*GVB[:5], "--grid-beams", "2", "--grid-lenpens", "0", "--", "--cpu"],
        "--grid-lenpens",
    ),
    (
        "greedy-vs-beam: --grid-beams 0",
        greedy_vs_beam,
        [*GVB[:5], "--grid-beams", "0", "--grid-lenpens", "1", "--", "--cpu"],
        "--grid-beams",
    ),
    ("greedy-vs-beam compare: --n-samples 0", greedy_vs_beam, [*COMPARE, "--n-samples", "0"], "--n-samples"),
    (
        "greedy-vs-beam compare: --n-samples -5",
        greedy_vs_beam,
        [*COMPARE, "--n-samples", "-5"],
        "--n-samples",
    ),
    ("sact heatmaps: --beam 0", sact_heatmaps, [*HEATMAPS, "--beam", "0"], "--beam"),
    (
        "sact heatmaps: --max-sentences 0",
        sact_heatmaps,
        [*HEATMAPS, "--max-sentences", "0"],
        "--max-sentences",
    ),
    ("sact heatmaps: --max-len-a nan", sact_heatmaps, [*HEATMAPS, "--max-len-a", "nan"], "--max-len-a"),
    ("sact heatmaps: --max-len-a -1", sact_heatmaps, [*HEATMAPS, "--max-len-a", "-1"], "--max-len-a"),
    ("sact heatmaps: --max-len-b -1", sact_heatmaps, [*HEATMAPS, "--max-len-b", "-1"], "--max-len-b"),
    (
        "sact heatmaps: output lengths below 1 for the shortest sentence",
        sact_heatmaps,
        [*HEATMAPS, "--max-len-a", "0.001", "--max-len-b", "0"],
        "--max-len-a 0.001 --max-len-b 0 allow at most 0 target tokens for the shortest source sentence",
    ),
    (
        "ct_analysis dump: --batch-size 0",
        ct_analysis,
        [*CT_DUMP, "--output", "{root}/o.tsv", "--batch-size", "0"],
        "--batch-size",
    ),
    (
        "ct_analysis positions: --bins 0",
        ct_analysis,
        [*CT_POSITIONS, "--output", "{root}/p.png", "--bins", "0"],
        "--bins",
    ),
    (
        "ct_analysis positions: --bootstrap-samples 0",
        ct_analysis,
        [*CT_POSITIONS, "--output", "{root}/p.png", "--bootstrap-samples", "0"],
        "--bootstrap-samples",
    ),
    (
        "ct_analysis positions: --seed without --ci bootstrap",
        ct_analysis,
        [*CT_POSITIONS, "--output", "{root}/p.png", "--seed", "3"],
        "--seed is used only with --ci bootstrap",
    ),
    (
        "ct_analysis positions: --bins with --segment",
        ct_analysis,
        [*CT_POSITIONS, "--output", "{root}/p.png", "--segment", "2", "--bins", "4"],
        "--bins is used only without --segment",
    ),
    (
        "ct_analysis positions: --labels not one per --path",
        ct_analysis,
        [*CT_POSITIONS, "--output", "{root}/p.png", "--labels", "a", "b"],
        "--labels needs one label per --path (1), got 2",
    ),
    (
        "ct_analysis positions: no sentence of the lengths asked",
        ct_analysis,
        [*CT_POSITIONS, "--output", "{root}/p.png", "--min-len", "1000"],
        "no sentence of {toy}/raw/test.tgt has between 1000 and any number of words",
    ),
    (
        "calibrate: --batch-size 0",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--batch-size", "0"],
        "--batch-size",
    ),
    (
        "calibrate: --max-tokens 0",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--max-tokens", "0"],
        "--max-tokens",
    ),
    (
        "average: --num-update-checkpoints 0",
        average,
        ["--inputs", "{ckpt}", "--num-update-checkpoints", "0", "--output", "{root}/avg.pt"],
        "--num-update-checkpoints must be >= 1",
    ),
    (
        "average: --checkpoint-upper-bound without --num-*",
        average,
        [
            "--inputs",
            "{ckpt}/a.pt",
            "{ckpt}/b.pt",
            "--checkpoint-upper-bound",
            "3",
            "--output",
            "{root}/avg.pt",
        ],
        "--checkpoint-upper-bound only goes with --num-*-checkpoints",
    ),
]
# Outputs that cannot be made, refused before the work
OUTPUT_CASES = [
    (
        "greedy-vs-beam compare: --json in a missing directory",
        greedy_vs_beam,
        [*COMPARE, "--json", "{root}/nowhere/r.json"],
        "--json {root}/nowhere/r.json is in {root}/nowhere, which does not exist",
    ),
    (
        "greedy-vs-beam compare: --json is a directory",
        greedy_vs_beam,
        [*COMPARE, "--json", "{root}/mine"],
        "--json {root}/mine already exists",
    ),
    (
        "greedy-vs-beam: --json is a directory",
        greedy_vs_beam,
        [*GVB[:5], "--json", "{root}/mine", "--", "--cpu"],
        "{root}/mine already exists",
    ),
    (
        "ct_analysis dump: --output exists",
        ct_analysis,
        [*CT_DUMP, "--output", "{root}/mine/notes.txt"],
        "{root}/mine/notes.txt exists; refusing to overwrite it (--force)",
    ),
    (
        "average: --output is a directory",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/b.pt", "--output", "{root}/mine"],
        "--output {root}/mine already exists",
    ),
    (
        "average: --output in a missing directory",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/b.pt", "--output", "{root}/nowhere/avg.pt"],
        "--output {root}/nowhere/avg.pt is in {root}/nowhere, which does not exist",
    ),
    (
        "calibrate: --json is a directory",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--json", "{root}/mine"],
        "--json {root}/mine already exists",
    ),
    (
        "calibrate: --write-checkpoint in a missing directory",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--write-checkpoint", "{root}/nowhere/c.pt"],
        "--write-checkpoint {root}/nowhere/c.pt is in {root}/nowhere, which does not exist",
    ),
    (
        "calibrate: --write-checkpoint is --path",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--write-checkpoint", "{ckpt}/a.pt"],
        "--write-checkpoint {ckpt}/a.pt already exists",
    ),
    ("toy-translation: the output directory is a file", toy_translation, ["{root}/a-file"], "{root}/a-file"),
    (
        "toy-translation: the output directory in a file",
        toy_translation,
        ["{root}/a-file/toy"],
        "OUT_DIR {root}/a-file/toy cannot be made: {root}/a-file is not a folder",
    ),
    (
        "results: --out in a file",
        RESULTS,
        ["--work", "{root}/results-work", "--out", "{root}/a-file/out"],
        "--out {root}/a-file/out cannot be made: {root}/a-file is not a folder",
    ),
    (
        "data: --work in a file",
        DATA,
        ["prepare", "en-ja", "--local", "{root}/local", "--work", "{root}/a-file/work"],
        "--work {root}/a-file/work cannot be made: {root}/a-file is not a folder",
    ),
    (
        "data: toy-release in a file",
        DATA,
        ["toy-release", "{root}/a-file/release"],
        "dest {root}/a-file/release cannot be made: {root}/a-file is not a folder",
    ),
    # an output that is a file the tool reads: refused, --force or not
    (
        "seeds: --output is a --runs file, with --force",
        alt_seeds,
        ["--runs", "{root}/alt-seeds/seed1/runs.csv", "--output", "{root}/alt-seeds/seed1/runs", "--force"],
        "--output: {root}/alt-seeds/seed1/runs.csv is also --runs {root}/alt-seeds/seed1/runs.csv: an output "
        "never replaces an input",
    ),
    (
        "lm_results seeds: --output is a --table, with --force",
        lm_results,
        ["seeds", "--table", "{root}/seeds/good.csv", "--output", "{root}/seeds/good", "--force"],
        "{root}/seeds/good.csv is also --table {root}/seeds/good.csv: an output never replaces an input",
    ),
    (
        "lm_results plot: --csv is a --logs file, with --force",
        lm_results,
        [
            "plot",
            "--logs",
            "{root}/mine/notes.txt",
            "--output",
            "{root}/c.png",
            "--csv",
            "{root}/mine/notes.txt",
            "--force",
        ],
        "{root}/mine/notes.txt is also --logs {root}/mine/notes.txt: an output never replaces an input",
    ),
    (
        "ct_analysis dump: --output is --text, with --force",
        ct_analysis,
        [*CT_DUMP[:2], "{ckpt}/lm.pt", *CT_DUMP[3:], "--output", "{toy}/raw/test.tgt", "--force"],
        "{toy}/raw/test.tgt is also --text {toy}/raw/test.tgt: an output never replaces an input",
    ),
    (
        "ct_analysis positions: --output is its own CSV",
        ct_analysis,
        [*CT_POSITIONS[:2], "{ckpt}/lm.pt", *CT_POSITIONS[3:], "--output", "{root}/p.csv"],
        "two outputs are one file ({root}/p.csv): give each its own name",
    ),
    (
        "lm_results plot: --csv is --output",
        lm_results,
        ["plot", "--logs", "{root}/mine/notes.txt", "--output", "{root}/c.png", "--csv", "{root}/c.png"],
        "two outputs are one file ({root}/c.png): give each its own name",
    ),
    (
        "greedy-vs-beam: --json is one of --save-dir's files",
        greedy_vs_beam,
        [*GVB[:5], "--save-dir", "{root}/hyps", "--json", "{root}/hyps/beam.hyp", "--", "--cpu"],
        "two outputs are one file ({root}/hyps/beam.hyp): give --json a name outside --save-dir's files",
    ),
    # an output whose path goes through a file: refused before the work, not failed after it
    (
        "greedy-vs-beam compare: --json in a file",
        greedy_vs_beam,
        [*COMPARE, "--json", "{root}/a-file/r.json"],
        "--json {root}/a-file/r.json is in {root}/a-file, which is not a folder",
    ),
    (
        "average: --output in a file",
        average,
        ["--inputs", "{ckpt}/a.pt", "{ckpt}/b.pt", "--output", "{root}/a-file/avg.pt"],
        "--output {root}/a-file/avg.pt is in {root}/a-file, which is not a folder",
    ),
    (
        "calibrate: --json in a file",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--json", "{root}/a-file/r.json"],
        "--json {root}/a-file/r.json is in {root}/a-file, which is not a folder",
    ),
    (
        "calibrate: --plot in a file",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--plot", "{root}/a-file/sub/r.png"],
        "--plot {root}/a-file/sub/r.png is in {root}/a-file/sub, which cannot be made: {root}/a-file is "
        "not a folder",
    ),
    (
        "ct_analysis dump: --output in a file",
        ct_analysis,
        [*CT_DUMP[:2], "{ckpt}/lm.pt", *CT_DUMP[3:], "--output", "{root}/a-file/o.tsv"],
        "{root}/a-file/o.tsv is in {root}/a-file, which is not a folder",
    ),
    (
        "ct_analysis positions: --output in a file",
        ct_analysis,
        [*CT_POSITIONS[:2], "{ckpt}/lm.pt", *CT_POSITIONS[3:], "--output", "{root}/a-file/p.png"],
        "{root}/a-file/p.png is in {root}/a-file, which is not a folder",
    ),
    (
        "sact heatmaps: --out-dir in a file",
        sact_heatmaps,
        ["{toy}/bin", "--path", "{ckpt}/mt.pt", *HEATMAPS[3:-1], "{root}/a-file/maps"],
        "--out-dir {root}/a-file/maps cannot be made: {root}/a-file is not a folder",
    ),
    (
        "lm_results seeds: --output in a file",
        lm_results,
        ["seeds", "--table", "{root}/seeds/good.csv", "--output", "{root}/a-file/s"],
        "{root}/a-file/s.md is in {root}/a-file, which is not a folder",
    ),
    (
        "lm_results plot: --output in a file",
        lm_results,
        ["plot", "--logs", "{root}/a-file", "--output", "{root}/a-file/sub/c.png"],
        "{root}/a-file/sub/c.png is in {root}/a-file/sub, which cannot be made: {root}/a-file is not a folder",
    ),
    (
        "sact heatmaps: a torch.save file that is not a fairseq checkpoint",
        sact_heatmaps,
        HEATMAPS,
        "checkpoint {ckpt}/a.pt is not a checkpoint of fairseq-train (it has no 'best_loss')",
    ),
    (
        "ct_analysis dump: a torch.save file that is not a fairseq checkpoint",
        ct_analysis,
        [*CT_DUMP, "--output", "{root}/o.tsv"],
        "checkpoint {ckpt}/a.pt is not a checkpoint of fairseq-train (it has no 'best_loss')",
    ),
]


@pytest.mark.parametrize(
    "name, command, argv, expected",
    NUMBER_CASES + OUTPUT_CASES,
    ids=[c[0] for c in NUMBER_CASES + OUTPUT_CASES],
)
def test_bad_number_or_output(inputs, name, command, argv, expected, monkeypatch):
    refused(inputs, name, command, argv, expected, monkeypatch)


@pytest.mark.parametrize("name, command, argv, expected", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_text_file(inputs, name, command, argv, expected, monkeypatch):
    option = name.split(":")[0]
    if name.endswith(": empty") and option in EMPTY_ELSEWHERE:
        expected = EMPTY_ELSEWHERE[option]
    refused(inputs, name, command, argv, expected, monkeypatch)


def test_a_text_file_marked_utf8_or_with_crlf_line_ends_reads_as_the_plain_one(tmp_path):
    """What the text checks above accept: a UTF-8 byte-order mark at the start (Windows editors
    write one) and CR LF line ends are dropped, nothing else; a BOM inside a line is text."""
    from fairseq_ctemp import inputs as text_inputs

    lines = ["ẩm thực Việt", "x \ufeff y", "", "last"]
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8"))  # no final line end
    assert text_inputs.read_utf8_lines(str(plain)) == lines
    assert text_inputs.read_utf8_lines(str(marked)) == lines


@pytest.mark.parametrize("name, command, argv, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input(inputs, name, command, argv, expected, monkeypatch):
    refused(inputs, name, command, argv, expected, monkeypatch)


# The tools that need a package of an extra ([plots]: matplotlib, [subwords]: sentencepiece and
# subword-nmt), where it cannot be imported: refused with their checks, not after (part of) their
# work with a traceback (nor, as ctemp-alt-results once did, with some figures silently left out).
# Their other inputs are good. (name, the package, command, argv, expected)
NO_MATPLOTLIB = "matplotlib, which draws {what}, cannot be imported"
PREPARE = ["prepare", "en-vi", "--release", "{root}/release", "--work", "{root}/new-work", "--vocab", "20"]
WITHOUT_PACKAGE_CASES = [
    (
        "alt results",
        "matplotlib",
        alt_results,
        ["--work", "{root}/results-work", "--out", "{root}/new-results"],
        NO_MATPLOTLIB.format(what="the plots"),
    ),
    (
        "calibrate --plot",
        "matplotlib",
        calibrate,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--plot", "{root}/r.png"],
        NO_MATPLOTLIB.format(what="--plot's diagrams"),
    ),
    (
        "ct_analysis heatmap",
        "matplotlib",
        ct_analysis,
        [
            "heatmap",
            *("--path", "{ckpt}/a.pt", "--data", "{toy}/lm-bin", "--text", "{toy}/raw/test.tgt"),
            *("--line", "1", "--output", "{root}/h.png"),
        ],
        NO_MATPLOTLIB.format(what="the figure"),
    ),
    (
        "sact heatmaps",
        "matplotlib",
        sact_heatmaps,
        ["{toy}/bin", "--path", "{ckpt}/a.pt", "--input", "{toy}/raw/test.src", "--out-dir", "{root}/maps"],
        NO_MATPLOTLIB.format(what="the heatmaps"),
    ),
    (
        "lm_results plot",
        "matplotlib",
        lm_results,
        ["plot", "--logs", "{root}/none.log", "--output", "{root}/c.png"],
        NO_MATPLOTLIB.format(what="the plot"),
    ),
    (
        "data prepare --subwords spm",
        "sentencepiece",
        DATA,
        PREPARE,
        "sentencepiece, which makes the subwords of --subwords spm, cannot be imported",
    ),
    (
        "data prepare --subwords bpe",
        "subword_nmt",
        DATA,
        [*PREPARE, "--subwords", "bpe"],
        "subword_nmt, which makes the subwords of --subwords bpe, cannot be imported",
    ),
    (
        "sact heatmaps --source-spm",
        "sentencepiece",
        sact_heatmaps,
        [
            *(
                "{toy}/bin",
                "--path",
                "{ckpt}/a.pt",
                "--input",
                "{toy}/raw/test.src",
                "--out-dir",
                "{root}/maps",
            ),
            *("--source-spm", "{root}/spm.en.model"),
        ],
        "sentencepiece, which encodes the lines of --source-spm, cannot be imported",
    ),
    (
        "sact/prepare_alt_en_vi.sh",
        "sentencepiece",  # PYTHON: a Python that finds a sentencepiece.py raising ImportError
        ["/usr/bin/env"],
        [
            "PYTHON={root}/python-without-sentencepiece",
            *(
                "bash",
                os.path.join(EXAMPLES, "sact", "prepare_alt_en_vi.sh"),
                "{root}/sact-alt",
                "{root}/local",
            ),
        ],
        "sentencepiece cannot be imported by {root}/python-without-sentencepiece (PYTHON): pip install "
        "sentencepiece",
    ),
]


@pytest.mark.parametrize(
    "name, package, command, argv, expected", WITHOUT_PACKAGE_CASES, ids=[c[0] for c in WITHOUT_PACKAGE_CASES]
)
def test_without_an_optional_package(inputs, name, package, command, argv, expected, monkeypatch):
    for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.setitem(sys.modules, module, None)  # import package[.x] raises ImportError
    monkeypatch.setitem(sys.modules, package, None)
    refused(inputs, name, command, argv, expected, monkeypatch)


def test_a_missing_package_is_named_as_pip_installs_it(monkeypatch):
    from fairseq_ctemp import optional

    monkeypatch.setitem(sys.modules, "subword_nmt", None)
    assert optional.missing("subword_nmt", "makes BPE").endswith("): pip install subword-nmt")
    assert optional.missing("json", "reads JSON") is None


def refused(inputs, name, command, argv, expected, monkeypatch):
    """The command fails with `expected` in its last line, no traceback, no file changed."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
        monkeypatch.delenv(key, raising=False)
    places = {
        "root": inputs["root"],
        "toy": inputs["toy"]["bin"].parent,
        "ckpt": inputs["ckpt"],
        "refs": inputs["refs"],
    }
    argv = [a.format(**places) for a in argv]
    expected = expected.format(**places)
    watched = (inputs["root"], places["toy"])
    before = fingerprint(*watched)
    if callable(command):
        code, output = in_process(command, argv)
    else:
        if not os.path.isabs(command[0]) and command[0] != "bash":
            command = console_command(command[0]) + command[1:]
        proc = subprocess.run(
            command + argv,
            env=ENV,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=inputs["root"],
        )
        code, output = proc.returncode, proc.stdout
    last = output.strip().split("\n")[-1]
    assert code != 0, f"{name}: exit status 0\n{output[-2000:]}"
    assert "Traceback" not in output, output[-3000:]
    assert "weights_only=False" not in output and "weights_only` set to `False" not in output  # unsafe advice
    assert expected in last, f"{name}: last line {last!r}\n{output[-2000:]}"
    assert fingerprint(*watched) == before, f"{name}: files changed"


# fairseq-hydra-train catches the exceptions of its job and prints them itself, ending with a line of
# its own ("Set the environment variable HYDRA_FULL_ERROR=1 ..."): the plugin's message comes alone,
# on the line before that line's blank line.
HYDRA_CASES = [
    ("criterion.softmax_temperature=0", "--softmax-temperature must be a finite number > 0, got 0.0"),
    ("criterion.label_smoothing=1.0", "--label-smoothing must be in [0, 1), got 1.0"),
    ("criterion.sem_weight=1", "--sem-weight must be in [0, 1), got 1.0"),
    ("criterion.loss_chunk_tokens=-1", "--loss-chunk-tokens must be >= 0 (0: off), got -1"),
]


@pytest.mark.parametrize("override, expected", HYDRA_CASES, ids=[c[0] for c in HYDRA_CASES])
def test_bad_hydra_override(inputs, tmp_path, override, expected):
    overrides = [
        f"task.data={inputs['toy']['bin']}",
        f"common.user_dir={PLUGIN_DIR}",
        f"checkpoint.save_dir={tmp_path / 'ckpt'}",
        f"hydra.run.dir={tmp_path}",
        "common.cpu=true",
        override,
    ]
    config = ["--config-dir", os.path.join(PLUGIN_DIR, "config"), "--config-name", "alt_mini"]
    before = fingerprint(inputs["root"], inputs["toy"]["bin"].parent)
    proc = subprocess.run(
        console_command("fairseq-hydra-train") + config + overrides,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    lines = proc.stdout.strip().split("\n")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout, proc.stdout[-3000:]
    assert lines[-1].startswith("Set the environment variable HYDRA_FULL_ERROR=1"), lines[-1]
    assert lines[-2] == "" and expected in lines[-3], proc.stdout[-2000:]
    assert fingerprint(inputs["root"], inputs["toy"]["bin"].parent) == before


def test_the_suite_covers_every_tool():
    """Every console script of pyproject.toml and every Python or shell entry point in scripts/,
    examples/ and benchmarks/ has a case, or is named here with the reason it has none."""
    covered = " ".join(" ".join(map(str, c[1])) if isinstance(c[1], list) else c[1].__name__ for c in CASES)
    consoles = console_scripts()
    assert len(consoles) == 12
    for console, module in consoles.items():
        assert console in covered or module.rsplit(".", 1)[-1] in covered, console
    not_covered = {  # relative to the repository: why it has no case of its own
        "scripts/setup_venv.sh": "set-up of the environment",
        "scripts/versions.sh": "sourced by setup_venv.sh and wheelhouse.sh",
        "examples/alt/common.sh": "sourced by the other ALT scripts",
        "examples/alt/results.sh": "execs ctemp-alt-results (covered)",
        "examples/language_model/common.sh": "sourced by the other LM scripts",
        "examples/run_options.sh": "sourced by the training recipes (refusals: test_lm_recipes, test_sact)",
        "examples/language_model/ptb_small_experiment.sh": "no arguments; its refusals: test_lm_recipes",
        "examples/softmax_tempering/check_decoding_options.py": "train_and_decode.sh's check (its cases)",
        "benchmarks/tracing.py": "the benchmarks' --trace, not a command (its refusal: test_benchmarks)",
        "benchmarks/bench_common.py": "the benchmarks' shared options and helpers, not a command",
        "benchmarks/bench_timing.py": "the benchmarks' timed rounds, not a command",
        "benchmarks/json_output.py": "the benchmarks' --json report, not a command",
    }
    function = {
        "quickstart.py": quickstart,
        "export_hydra_configs.py": export_hydra_configs,
        "lm_results.py": lm_results,
        "results_pages.py": results_pages,
        "summarize.py": sact_summarize,
        "translate_subset.py": sact_translate_subset,
        "bench_ct_lm.py": bench_ct_lm,
        "bench_sact.py": bench_sact,
        "bench_tempered_ce.py": bench_tempered_ce,
        "bench_translation.py": bench_translation,
        "suite_time.py": suite_time,
        "trace_report.py": trace_report,
    }
    for folder in ("scripts", "examples", "benchmarks"):
        for d, _, files in os.walk(os.path.join(REPO, folder)):
            for f in files:
                path = os.path.relpath(os.path.join(d, f), REPO)
                if f.endswith((".py", ".sh")) and path not in not_covered:
                    name = function[f].__name__ if f in function else os.path.join(REPO, path)
                    assert name in covered, f"{path} has no bad-input case"


@pytest.mark.parametrize("console, module", sorted(console_scripts().items()))
def test_every_command_runs_as_python_m(console, module, monkeypatch, capsys):
    """python -m MODULE --help (what a checkout without the console scripts runs): the module's
    __main__ block calls main, whose usage names the console script."""
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    # as a fresh `python -m` finds it: not yet imported (runpy warns about one that is)
    monkeypatch.delitem(sys.modules, module, raising=False)
    # ctemp-train logs as fairseq-train does, to this test's captured stdout: not to later tests'
    monkeypatch.setattr(logging.getLogger(), "handlers", logging.getLogger().handlers[:])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {console}")


def options_without_help(parser, command):
    """'COMMAND [SUBCOMMAND] OPTION' of each argument of parser (and its subcommands) with no help."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += options_without_help(sub, f"{command} {name}")
        elif action.help is None:
            found.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
    return found


# the repository's Python scripts with options (their main reads sys.argv)
SCRIPTS_WITH_OPTIONS = [
    *(f"benchmarks/{name}.py" for name in ("bench_ct_lm", "bench_sact", "bench_tempered_ce")),
    *(f"benchmarks/{name}.py" for name in ("bench_translation", "gpu_check", "suite_time", "trace_report")),
    *(f"scripts/{name}.py" for name in ("export_hydra_configs", "quickstart", "results_pages")),
    "examples/language_model/lm_results.py",
]


def test_the_scripts_with_options_are_all_named_here():
    found = {
        os.path.relpath(path, REPO)
        for folder in ("benchmarks", "scripts", "examples")
        for path in glob.glob(os.path.join(REPO, folder, "**", "*.py"), recursive=True)
        if "add_argument(" in open(path, encoding="utf-8").read()
    }
    # helpers that add options to the benchmarks' parsers
    helpers = {"benchmarks/bench_common.py", "benchmarks/json_output.py", "benchmarks/tracing.py"}
    assert found - helpers == set(SCRIPTS_WITH_OPTIONS)


@pytest.mark.parametrize(
    "command, main",
    [*sorted(console_scripts().items()), *((path, None) for path in SCRIPTS_WITH_OPTIONS)],
)
def test_every_option_says_what_it_is(command, main, monkeypatch, capsys):
    """--help explains every argument a command adds (fairseq's own options: as stock fairseq has them)."""
    from fairseq import options

    shown = []
    format_help = argparse.ArgumentParser.format_help
    monkeypatch.setattr(argparse.ArgumentParser, "format_help", lambda p: shown.append(p) or format_help(p))
    monkeypatch.setattr(logging.getLogger(), "handlers", logging.getLogger().handlers[:])
    monkeypatch.setattr(sys, "argv", [command, "--help"])
    with pytest.raises(SystemExit):
        if main is None:
            example_script(os.path.join(REPO, command)).main()
        else:
            importlib.import_module(main).main(["--help"])
    stock = set(options_without_help(options.get_training_parser(), command))
    stock |= set(options_without_help(options.get_generation_parser(), command))
    assert [found for found in options_without_help(shown[0], command) if found not in stock] == []
    capsys.readouterr()


def test_the_readme_counts_every_bad_input():
    """The README's count of bad inputs is this file's (it went stale once)."""
    with open(os.path.join(REPO, "README.md")) as f:
        (count,) = re.findall(r"(\d[\d,]*) bad inputs", f.read())
    cases = CASES + FILE_CASES + NUMBER_CASES + OUTPUT_CASES + HYDRA_CASES + WITHOUT_PACKAGE_CASES
    assert int(count.replace(",", "")) == len(cases)
