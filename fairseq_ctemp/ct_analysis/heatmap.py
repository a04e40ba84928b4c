"""heatmap: tau of vocabulary tokens x positions of one sentence -> PNG + CSV."""

import sys

import numpy as np

from .. import plotting
from ..outputs import all_or_none
from .loading import choose_tokens, load_model
from .outputs import check_outputs, companion, fmt, save_figure, write_csv
from .scoring import fitting, score
from .texts import read_text


def run(args):
    """tau of vocabulary tokens (y) at each position of one sentence (x, labelled with the input
    word read there): ICLR Fig. 1 (transposed there: input words on y)."""
    csv_path = companion(args.output, ".csv")
    check_outputs([args.output, csv_path], args)
    sentence = read_text(args.text, [args.line], args.source)[0]
    lm = load_model(args.path, args.data, args.cpu)
    lm.require_temperature("heatmap")
    names, ids = choose_tokens(lm.dictionary, args.tokens, args.vocab_k)
    fit = fitting(lm, [sentence], final_eos=args.final_eos)
    s = next(score(lm, fit, columns=ids, final_eos=args.final_eos))
    matrix = s.tau_columns.T  # (tokens, positions)
    header = ["token"] + [f"{i + 1}:{w}" for i, w in enumerate(s.inputs)]
    with all_or_none([csv_path, args.output]):
        write_csv(csv_path, header, [[n] + [fmt(v) for v in row] for n, row in zip(names, matrix)])
        plot_heatmap(args.output, matrix, names, s.inputs, args)
    print(
        f"{len(names)} tokens x {len(s.inputs)} positions of line {args.line} -> {args.output}, {csv_path}",
        file=sys.stderr,
    )


def plot_heatmap(path, matrix, names, inputs, args):
    plt = plotting.pyplot()
    width = min(max(4.0, 0.35 * len(inputs) + 2), 20)
    height = min(max(3.0, 0.25 * len(names) + 1.5), 20)
    fig, ax = plt.subplots(figsize=(width, height))
    label, limits = "τ", {}
    if args.center:  # each token's heating up / cooling down along the sentence, 0 in the middle
        matrix = matrix - matrix.mean(axis=1, keepdims=True)
        label = "τ − the token's mean over the sentence"
        bound = float(np.abs(matrix).max()) or 1.0
        limits = {"vmin": -bound, "vmax": bound}
    image = ax.imshow(
        matrix,
        aspect="auto",
        interpolation="nearest",
        cmap=args.cmap or ("coolwarm" if args.center else "viridis"),
        **limits,
    )
    ax.set_xticks(range(len(inputs)), inputs, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_xlabel("input token read (its column's τ predicts the next token)", fontsize=8)
    ax.set_ylabel("vocabulary token", fontsize=8)
    ax.set_title(args.title or f"τ, line {args.line}", fontsize=10)
    fig.colorbar(image, ax=ax, label=label)
    save_figure(fig, path)
