"""trajectories: tau of chosen tokens across saved checkpoints -> PNG + CSV."""

import sys

import numpy as np

from .. import plotting
from ..outputs import all_or_none
from . import AnalysisError
from .loading import choose_tokens, load_model
from .outputs import check_outputs, companion, fmt, save_figure, write_csv
from .scoring import fitting, score
from .texts import read_text


def token_means(scores, token_ids_, over):
    """Mean tau of each token: over its occurrences as a target ("targets"), or over every
    position ("all"). Returns (sums, counts) arrays of len(token_ids_)."""
    sums, counts = np.zeros(len(token_ids_)), np.zeros(len(token_ids_), dtype=int)
    for s in scores:
        for j, token in enumerate(token_ids_):
            mask = s.target_ids == token if over == "targets" else np.ones(len(s.targets), bool)
            sums[j] += s.tau_columns[mask, j].sum()
            counts[j] += int(mask.sum())
    return sums, counts


def run(args):
    """tau of chosen tokens across training (one checkpoint per point): AAAI Fig. 1a."""
    csv_path = companion(args.output, ".csv")
    check_outputs([args.output, csv_path], args)
    sentences = read_text(args.text, source=args.source)
    rows, points = [], []
    names = ids = None
    for path in args.path:
        lm = load_model(path, args.data, args.cpu)
        lm.require_temperature("trajectories")
        if names is None:
            names, ids = choose_tokens(lm.dictionary, args.tokens, args.vocab_k)
        x = lm.epoch if args.x == "epoch" else lm.num_updates
        if x is None:
            raise AnalysisError(
                f"{path} has no saved {args.x} (use --x {'update' if args.x == 'epoch' else 'epoch'})"
            )
        fit = fitting(lm, sentences, args.skip_long, args.final_eos)
        scores = score(lm, fit, columns=ids, final_eos=args.final_eos, batch_size=args.batch_size)
        sums, counts = token_means(scores, ids, args.over)
        absent = [n for n, c in zip(names, counts) if c == 0]
        if absent:
            raise AnalysisError(
                f"never a target in {args.text}: {', '.join(absent)} (choose other "
                f"--tokens, or average over every position with --over all)"
            )
        means = sums / counts
        for name, mean, count in zip(names, means, counts):
            rows.append([path, lm.epoch, lm.num_updates, name, fmt(mean), count])
        points.append((x, means))
        del lm
    with all_or_none([csv_path, args.output]):
        write_csv(csv_path, ["checkpoint", "epoch", "num_updates", "token", "tau", "occurrences"], rows)
        plot_trajectories(args.output, names, sorted(points, key=lambda p: p[0]), args)
    print(f"{len(names)} tokens x {len(points)} checkpoints -> {args.output}, {csv_path}", file=sys.stderr)


def plot_trajectories(path, names, points, args):
    plt = plotting.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    x = [p[0] for p in points]
    values = np.array([p[1] for p in points])
    for j, name in enumerate(names):
        ax.plot(x, values[:, j], marker="o", ms=3, label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch" if args.x == "epoch" else "updates")
    what = "as a target" if args.over == "targets" else "at every position"
    ax.set_ylabel(f"mean τ of the token ({what})", fontsize=8)
    ax.set_title(args.title or "τ of chosen tokens over training", fontsize=10)
    ax.legend(fontsize=7, ncol=2 if len(names) > 6 else 1)
    save_figure(fig, path)
