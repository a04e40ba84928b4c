"""`lm_results.py tau`: τ statistics of CT models over a text, from their ``ctemp-ct-analysis
dump`` TSVs (one line per position)."""

import collections
import csv
import os

from . import ResultsError, labels_of
from .output import fmt, markdown_table, write_tables

COLUMNS = [
    *("variant", "positions", "tau_mean_over_vocabulary", "tau_target_mean", "tau_target_std"),
    *("tau_target_p5", "tau_target_p95", "tau_min", "tau_max", "tau_argmax_is_target"),
    "tau_argmax_words",
]
HEADER = [
    *("variant", "positions", "mean_v τ", "τ(target) mean", "std", "5 %", "95 %", "min τ", "max τ"),
    *("largest τ on the target", "words with the largest τ (share of positions)"),
]


def argmax_words(words, k=5):
    """The k words that most often have the largest tau, with their share of the positions."""
    counts = collections.Counter(words)
    return ", ".join(f"{w} {n / len(words):.0%}" for w, n in counts.most_common(k))


def tau(dumps, labels, output):
    """output.md and output.csv: a row (COLUMNS) per dump."""
    labels = labels_of(dumps, labels, "--dumps")
    rows = [summary(path, label) for path, label in zip(dumps, labels)]
    write_tables(output, COLUMNS, rows, markdown_table(HEADER, [[fmt(r[c]) for c in COLUMNS] for r in rows]))


def summary(path, label):
    """The statistics of one dump: τ of the targets, the mean over the vocabulary, the extremes."""
    import numpy as np

    if not os.path.exists(path):
        raise ResultsError(f"no dump {path} (ctemp-ct-analysis dump --output {path} ...)")
    with open(path, newline="") as f:
        records = list(csv.DictReader(f, delimiter="\t"))
    if not records:
        raise ResultsError(f"{path} has no positions")
    column = {
        key: np.array([float(r[key]) for r in records])
        for key in ("tau_target", "tau_mean", "tau_min", "tau_max")
    }
    target = column["tau_target"]
    # dumps written before ctemp-ct-analysis had the column: None
    argmax = [r["tau_argmax"] for r in records] if "tau_argmax" in records[0] else None
    on_target = None if argmax is None else [a == r["target"] for a, r in zip(argmax, records)]
    return {
        "variant": label,
        "positions": len(records),
        "tau_mean_over_vocabulary": float(column["tau_mean"].mean()),
        "tau_target_mean": float(target.mean()),
        "tau_target_std": float(target.std()),
        "tau_target_p5": float(np.percentile(target, 5)),
        "tau_target_p95": float(np.percentile(target, 95)),
        "tau_min": float(column["tau_min"].min()),
        "tau_max": float(column["tau_max"].max()),
        "tau_argmax_is_target": None if argmax is None else float(np.mean(on_target)),
        "tau_argmax_words": None if argmax is None else argmax_words(argmax),
    }
