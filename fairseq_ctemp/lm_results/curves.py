"""`lm_results.py plot`: validation curves of runs from fairseq's --log-format json logs."""

import logging
import os

from .. import logs, plotting
from . import ResultsError, labels_of
from .output import write_csv
from .runs import per_epoch

logger = logging.getLogger(__name__)


def curve(path, x_key, metric):
    """[(x, y)] of valid_<metric> against valid_num_updates / epoch; a resumed run's repeated
    points keep the latest value."""
    points = {}
    for record in logs.read(path, "valid"):
        x = record.get("valid_num_updates" if x_key == "update" else "epoch")
        y = record.get(f"valid_{metric}")
        if x is not None and y is not None:
            points[float(x)] = float(y)
    return sorted(points.items())


def line_style(label, row_names):
    """(colour, line style) of a run's curve: the colour is its row's (the label before @), the
    style its seed's (@N; no @: seed 1)."""
    row, _, seed = label.partition("@")
    styles = ["-", "--", "-.", ":"]
    return f"C{row_names.index(row) % 10}", styles[(int(seed) - 1 if seed.isdigit() else 0) % len(styles)]


def plot(log_paths, labels, x_key, metric, title, output, csv_path=None):
    """output (PNG): valid_<metric> against x_key ("update" or "epoch"), a line per log; csv_path:
    also the points (per epoch also the learning rate and the % of updates clipped)."""
    if problem := plotting.missing("the plot"):
        raise ResultsError(problem)
    labels = labels_of(log_paths, labels, "--logs")
    if csv_path and not csv_path.endswith(".csv"):
        raise ResultsError(f"--csv {csv_path}: give a file name ending in .csv")
    row_names = list(dict.fromkeys(label.partition("@")[0] for label in labels))
    lines, rows = [], []
    for path, label in zip(log_paths, labels):
        if not os.path.exists(path):
            raise ResultsError(f"no log {path}")
        points = curve(path, x_key, metric)
        if not points:
            logger.warning(f"no valid_{metric} records in {path}")
            continue
        train = logs.read(path, "train") if x_key == "epoch" else []
        lrs, clips = per_epoch(train, "train_lr"), per_epoch(train, "train_clip")
        rows += [
            {
                "run": label,
                x_key: int(x),
                f"valid_{metric}": y,
                "lr": lrs.get(int(x), ""),
                "clipped_percent": clips.get(int(x), ""),
            }
            for x, y in points
        ]
        lines.append((label, points))
    if not lines:
        raise ResultsError("nothing to plot (train with --log-format json and keep the log)")
    draw(lines, row_names, x_key, metric, title, output)
    print(f"wrote {output}")
    if csv_path:
        write_csv(csv_path[: -len(".csv")], ["run", x_key, f"valid_{metric}", "lr", "clipped_percent"], rows)
        print(f"wrote {csv_path}")


def draw(lines, row_names, x_key, metric, title, output):
    """The figure of [(label, [(x, y)])]: a logarithmic y axis for perplexities."""
    plt = plotting.pyplot()
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for label, points in lines:
        xs, ys = zip(*points)
        color, linestyle = line_style(label, row_names)
        ax.plot(
            xs, ys, marker="o", markersize=3, linewidth=1.3, label=label, color=color, linestyle=linestyle
        )
    ax.set_xlabel("updates" if x_key == "update" else "epoch")
    ax.set_ylabel(f"validation {metric}")
    if metric == "ppl":
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.tick_params(axis="y", which="minor", labelsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output)
    plt.close(fig)
