"""Writing an analysis's outputs: refusing to overwrite, CSVs, figures (a CSV and its figure are
written all or none: fairseq_ctemp.outputs.all_or_none)."""

import csv
import os

from .. import inputs, plotting
from . import AnalysisError


def check_outputs(paths, args):
    """Refuse (before any work) an output that is a directory, then what inputs.output_problem
    refuses: two outputs that are one file, an existing output unless --force, an output that is
    one of the files read (--force or not), one that cannot be written (its missing folders are
    made)."""
    for path in paths:
        if path and path != "-" and os.path.isdir(path):
            raise AnalysisError(f"{path} is a directory; give a file name")
    if problem := inputs.output_problem(paths, files_read(args), args.force):
        raise AnalysisError(problem)


def files_read(args):
    """(option, path) of each file a command reads: its checkpoints, --text and --source."""
    checkpoints = args.path if isinstance(args.path, list) else [args.path]
    read = [("--path", p) for p in checkpoints] + [("--baseline-path", getattr(args, "baseline_path", None))]
    return read + [("--text", args.text), ("--source", args.source)]


def companion(path, suffix):
    """The CSV written next to a PNG: out.png -> out.csv."""
    return os.path.splitext(path)[0] + suffix


def make_parent(path):
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)


def write_csv(path, header, rows):
    make_parent(path)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def fmt(x):
    """Floats exactly enough for fp32 (9 significant digits); '' for a missing value."""
    if x is None:
        return ""
    return format(float(x), ".9g")


def save_figure(fig, path):
    make_parent(path)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plotting.pyplot().close(fig)
