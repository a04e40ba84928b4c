"""Results of the language-model recipes (train.sh / evaluate.sh outputs), one module per command of
examples/language_model/lm_results.py, their command line: table (over runs.py, which reads a run's
directory), curves, tau, compare and seeds; output.py writes the tables, evaluation.py is the
record of one evaluation (evaluate.sh's eval_<subset>.json)."""

import os


class ResultsError(Exception):
    """A user error: printed as ``lm_results.py <command>: error: ...``, before any output is written."""


def labels_of(paths, labels, option):
    """The given labels, one per path of `option` (--logs, --dumps), or each path's directory name."""
    labels = labels or [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in paths]
    if len(labels) != len(paths):
        raise ResultsError(f"give one --labels entry per {option} file")
    return labels
