"""positions: mean tau against normalised sentence position, 95% CI across sentences -> PNG + CSV."""

import math
import os
import sys

import numpy as np

from .. import plotting
from ..outputs import all_or_none
from . import AnalysisError
from .loading import load_model
from .outputs import check_outputs, companion, fmt, save_figure, write_csv
from .scoring import fitting, score
from .texts import read_text

STATS = {
    "mean": "mean over the vocabulary",
    "target": "tau of the target token",
    "std": "std over the vocabulary",
    "min": "min over the vocabulary",
    "max": "max over the vocabulary",
}


def position_bins(length, bins=None, segment=None):
    """The bin of each of ``length`` positions, -1 for positions left out.
    bins: relative position (pos - 1) / (length - 1) in [0, 1] cut into ``bins`` equal bins.
    segment: the papers' "normalised sentence": first, middle and last ``segment`` positions as
    bins 0 .. 3*segment-1; shorter sentences (< 3*segment positions) are left out entirely."""
    if segment:
        out = np.full(length, -1)
        if length < 3 * segment:
            return out
        middle = (length - segment) // 2
        out[:segment] = np.arange(segment)
        out[middle : middle + segment] = segment + np.arange(segment)
        out[length - segment :] = 2 * segment + np.arange(segment)
        return out
    relative = np.arange(length) / max(length - 1, 1)
    return np.minimum((relative * bins).astype(int), bins - 1)


def confidence_interval(values, method, rng, samples=1000):
    """Mean and 95% CI across sentences. "t": mean +- t_{0.975, n-1} * sd / sqrt(n) (Student t);
    "bootstrap": 2.5 / 97.5 percentiles of the means of ``samples`` resamples of the sentences."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    mean = float(values.mean()) if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan
    if method == "bootstrap":
        means = values[rng.integers(0, n, size=(samples, n))].mean(axis=1)
        return mean, float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
    from scipy import stats

    half = stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half


def per_sentence_bin_means(scores, stats_names, n_bins, bins, segment):
    """{stat: [list of per-sentence means, one list per bin]}: each sentence counts once per bin
    (its positions in the bin averaged), so the CI is across sentences."""
    table = {name: [[] for _ in range(n_bins)] for name in stats_names}
    n_sentences = 0
    for s in scores:
        which = position_bins(len(s.targets), bins, segment)
        if (which < 0).all():
            continue
        n_sentences += 1
        for name in stats_names:
            values = getattr(s, f"tau_{name}")
            for b in np.unique(which[which >= 0]):
                table[name][b].append(float(values[which == b].mean()))
    return table, n_sentences


def stat_curve(bins, label, name, n_bins, args, rng, rows):
    """(mean, low, high) of one τ statistic in each position bin (its per-sentence means ``bins``),
    as an array; appends the CSV rows of its bins to ``rows``."""
    curve = []
    for b in range(n_bins):
        mean, low, high = confidence_interval(bins[b], args.ci, rng, args.bootstrap_samples)
        start, end = (b, b + 1) if args.segment else (b / n_bins, (b + 1) / n_bins)
        rows.append([label, name, b, fmt(start), fmt(end), fmt(mean), fmt(low), fmt(high), len(bins[b])])
        curve.append((mean, low, high))
    return np.array(curve, dtype=float)


def run(args):
    """Mean tau against normalised sentence position, 95% CI across sentences: AAAI Fig. 1b (CT-MoS,
    PTB: sentences of 15-25 words, first/middle/last 5 positions) and ICLR Fig. 5.
    With the softmax normalisation the mean over the vocabulary is (alpha + 1/V)/beta at every
    position (a flat curve by construction); --stats target/std/min/max show position effects."""
    if args.labels and len(args.labels) != len(args.path):
        raise AnalysisError(f"--labels needs one label per --path ({len(args.path)}), got {len(args.labels)}")
    csv_path = companion(args.output, ".csv")
    check_outputs([args.output, csv_path], args)
    every = read_text(args.text, source=args.source)
    sentences = [s for s in every if args.min_len <= len(s.words) <= (args.max_len or math.inf)]
    if not sentences:
        raise AnalysisError(
            f"no sentence of {args.text} has between {args.min_len} and "
            f"{args.max_len or 'any number of'} words"
        )
    n_bins = 3 * args.segment if args.segment else args.bins
    rng = np.random.default_rng(args.seed)
    labels = args.labels or [os.path.basename(p) for p in args.path]
    rows, curves, used = [], [], []
    for path, label in zip(args.path, labels):
        lm = load_model(path, args.data, args.cpu)
        lm.require_temperature("positions")
        fit = fitting(lm, sentences, args.skip_long, args.final_eos)
        scores = score(lm, fit, final_eos=args.final_eos, batch_size=args.batch_size)
        table, n_sentences = per_sentence_bin_means(scores, args.stats, n_bins, args.bins, args.segment)
        if n_sentences == 0:
            raise AnalysisError(
                f"no sentence has the {3 * args.segment} positions --segment {args.segment} needs"
            )
        used.append(n_sentences)
        for name in args.stats:
            curve = stat_curve(table[name], label, name, n_bins, args, rng, rows)
            curves.append((f"{label}: {STATS[name]}", curve))
        del lm
    with all_or_none([csv_path, args.output]):
        write_csv(
            csv_path,
            ["label", "stat", "bin", "bin_start", "bin_end", "mean", "ci_low", "ci_high", "n_sentences"],
            rows,
        )
        plot_positions(args.output, curves, n_bins, args)
    counts = " / ".join(str(n) for n in dict.fromkeys(used))  # (one count a model where they differ)
    left = (
        " (the others left out by --min-len / --max-len, --segment or --skip-long)"
        if max(used) < len(every)
        else ""
    )
    print(
        f"{counts} of the {len(every)} sentences of {args.text}{left}, {len(curves)} curves -> "
        f"{args.output}, {csv_path}",
        file=sys.stderr,
    )


def plot_positions(path, curves, n_bins, args):
    plt = plotting.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if args.segment:
        x = np.arange(n_bins) + 1
        for edge in (args.segment + 0.5, 2 * args.segment + 0.5):
            ax.axvline(edge, color="grey", lw=0.5, ls=":")
        ax.set_xlabel(f"normalised position (first / middle / last {args.segment} positions)")
    else:
        x = (np.arange(n_bins) + 0.5) / n_bins
        ax.set_xlabel("relative position in the sentence")
    for label, curve in curves:
        (line,) = ax.plot(x, curve[:, 0], marker="o", ms=3, label=label)
        ax.fill_between(x, curve[:, 1], curve[:, 2], color=line.get_color(), alpha=0.2, lw=0)
    ax.set_ylabel("temperature τ")
    ci = "Student t" if args.ci == "t" else "bootstrap"
    ax.set_title(args.title or f"τ over sentence positions (95% CI, {ci})", fontsize=10)
    ax.legend(fontsize=7)
    save_figure(fig, path)
