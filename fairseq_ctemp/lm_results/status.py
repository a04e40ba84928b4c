"""`lm_results.py status`: where each run of a recipe stands, read from its directory while the
recipe trains (nothing is written): evaluated, trained (evaluation to do), training or evaluating
now (the holder of its SAVE_DIR lock), unfinished (a later `train` resumes it from
checkpoint_last.pt) or not started; its epochs, its best and last validation perplexity, the
learning rate of its last epoch and the validations without improvement that --patience counts."""

import math
import os
import re

from .. import locks, logs
from . import ResultsError
from .evaluation import read_evaluation
from .output import fmt, markdown_table
from .runs import best_epoch as checkpoint_best_epoch

DONE = "done training in"  # fairseq-train's last line (fairseq_cli.train.main)
# in the configuration fairseq-train logs at each start: what --patience and checkpoint_best.pt go by
METRIC = re.compile(r"'best_checkpoint_metric': '(\w+)', 'maximize_best_checkpoint_metric': (True|False)")
HEADER = [
    *("run", "state", "epochs", "best valid ppl", "at epoch", "last valid ppl", "lr"),
    *("validations without improvement", "test ppl"),
]


def status(runs, variants):
    """Print one row per run RUNS/<variant> (HEADER)."""
    if not os.path.isdir(runs):
        raise ResultsError(f"--runs {runs}: no such directory")
    rows = [run_status(os.path.join(runs, variant)) for variant in variants]
    print("\n".join(markdown_table(HEADER, [[fmt(cell) for cell in row] for row in rows], text_columns=2)))


def run_status(run_dir):
    """The row (HEADER) of one run directory."""
    text = read_text(os.path.join(run_dir, "train.log"))
    metric, maximize = (METRIC.findall(text) or [("loss", "False")])[-1]  # the latest start's
    sign = -1 if maximize == "True" else 1
    valid = {}  # epoch -> (sign x the metric, valid_ppl): a resumed run's repeated epochs keep the latest
    for record in logs.parse(text, "valid"):
        if f"valid_{metric}" in record:
            valid[int(record["epoch"])] = (sign * record[f"valid_{metric}"], record.get("valid_ppl"))
    train = logs.parse(text, "train")
    test = read_evaluation(os.path.join(run_dir, "eval_test.json"))
    best_epoch = checkpoint_best_epoch(text, {e: value for e, (value, _) in valid.items()}) if valid else None
    return [
        os.path.basename(run_dir),
        state(run_dir, text, test),
        max(valid) if valid else None,
        valid.get(best_epoch, (None, None))[1],
        best_epoch,
        valid[max(valid)][1] if valid else None,
        train[-1].get("train_lr") if train else None,
        without_improvement([valid[e][0] for e in sorted(valid)]),
        round(test.ppl, 2) if test else None,
    ]


def read_text(path):
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def state(run_dir, text, test):
    if test is not None:
        return "evaluated"
    holder = locks.holder(os.path.join(run_dir, ".lock"))  # a recipe working on it now
    if DONE in text:
        trained = "trained" + (" (early stop)" if logs.EARLY_STOP in text else "")
        return trained + (f": evaluating now ({holder})" if holder else ": evaluation to do")
    if holder:
        return f"training now ({holder})"
    if os.path.exists(os.path.join(run_dir, "checkpoint_last.pt")):
        return "unfinished: resumes from checkpoint_last.pt"
    return "not started" if not text else "started: no checkpoint yet"


def without_improvement(losses):
    """fairseq's --patience count after these values of its metric (lower is better; as it logs and
    compares them, to 3 decimals): the validations since the last one lower than all before it."""
    best, count = math.inf, 0
    for loss in losses:
        best, count = (loss, 0) if loss < best else (best, count + 1)
    return count if losses else None
