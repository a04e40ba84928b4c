"""`lm_results.py table` (one row per run) and `protocols` (one checkpoint under several eval-lm
block / context settings)."""

import glob
import os

from ..outputs import all_or_none
from . import ResultsError
from .evaluation import read_evaluation
from .output import fmt, markdown_table, write_tables
from .runs import COLUMNS, run_summary

HEADER = [
    *("variant", "valid ppl", "test ppl", "valid tokens", "test tokens", "eval blocks/context"),
    *("test max abs log Σp", "params", "stopped by", "epochs", "best epoch", "updates"),
    *("train time (s)", "trained on", "resumed at epoch", "last train ppl", "train τ mean", "τ min"),
    *("τ max", "updates clipped (%)", "clip norm", "AR/TAR weights", "commit"),
    *("machine", "learning rate", "patience", "max epoch", "max update"),
]


def table(runs, variants, eval_suffix, output):
    """output.md and output.csv: a row per run RUNS/<variant> (runs.COLUMNS)."""
    missing = [os.path.join(runs, v) for v in variants if not os.path.isdir(os.path.join(runs, v))]
    if missing:  # a table without a run asked for would pass for the whole set
        raise ResultsError(
            f"no run {', '.join(missing)}: name the runs there are (`status` says where each stands)"
        )
    rows = [run_summary(os.path.join(runs, variant), eval_suffix) for variant in variants]
    lines = markdown_table(HEADER, [[fmt(row[c]) for c in COLUMNS] for row in rows])
    write_tables(output, COLUMNS, rows, lines)


def protocols(runs, variants, output):
    """output (markdown): the test perplexity of each variant's last checkpoint per protocol
    (RUNS/<variant>/protocol_<block>_<context>/ and the run's own evaluation)."""
    rows = []
    for variant in variants:
        run_dir = os.path.join(runs, variant)
        found = glob.glob(os.path.join(run_dir, "protocol_*", "eval_test_checkpoint_last.json"))
        found.append(os.path.join(run_dir, "eval_test_checkpoint_last.json"))
        results = [r for r in map(read_evaluation, found) if r]
        for r in sorted(results, key=lambda r: (r.tokens_per_sample - r.context_window, r.context_window)):
            block, context = r.tokens_per_sample, r.context_window
            cells = [variant, str(block), str(context), str(block - context), f"{r.ppl:.2f}"]
            rows.append(cells + [f"{r.evaluated_tokens:,}"])
    if not rows:
        raise ResultsError("no protocol results found")
    header = [
        *("variant", "eval-lm --tokens-per-sample", "--context-window", "scored per block"),
        *("test ppl", "evaluated tokens"),
    ]
    lines = markdown_table(header, rows)
    with all_or_none([output]), open(output, "w", encoding="utf-8") as f:  # whole, or none made
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
