"""Analyses of contextual temperatures (tau) of fairseq-ctemp language models, as in the papers, and of
the ct_transformer translation models (with --source).

    dump          tau and p(target) at every position of a text          -> TSV / JSON lines (+ .npy)
    positions     mean tau against normalised sentence position, 95% CI  -> PNG + CSV  (AAAI Fig. 1b,
                                                                               ICLR Fig. 5)
    trajectories  tau of chosen tokens across saved checkpoints          -> PNG + CSV  (AAAI Fig. 1a)
    heatmap       vocabulary-token x position tau for one sentence       -> PNG + CSV  (ICLR Fig. 1)
    case-study    top-k predictions (p, tau) of a CT model vs a baseline -> markdown   (ICLR Table 5)

Every subcommand takes ``--path CHECKPOINT --data DATA_BIN --text FILE`` (one sentence per line,
tokenised like the training data; blank lines are skipped, line numbers count them) and runs on
the GPU when there is one, on the CPU with ``--cpu``. A translation model (ct_transformer) also needs
``--source FILE``: line N is the source sentence of line N of --text (its translation or reference,
tokenised like the training data); --text is then scored as the decoder's target, teacher-forced,
with --data the model's fairseq-preprocess directory (dict.<src>.txt, dict.<tgt>.txt).
Outputs are never overwritten without
``--force``. See docs/ct_analysis.md.

Positions. Each line w_1 .. w_n is scored on its own, as fairseq-eval-lm --sample-break-mode eos
does (fairseq's language_modeling input is the target shifted right, starting with </s>):

    input   </s> w_1 ... w_n            (prev_output_tokens)
    target  w_1  w_2 ... </s>           (what each position predicts)

Position ``pos`` (1-based, 1 .. n+1) is the prediction of target token ``pos`` (w_pos; </s> at
n+1) from the prefix </s> w_1 .. w_{pos-1}: its tau and probabilities come from the decoder state
after reading input token ``pos`` (w_{pos-1}, or </s> at pos 1). ``--no-final-eos`` drops the
last prediction (of </s>).
"""

import argparse
import logging
import sys

from .. import plotting
from ..ct_analysis import AnalysisError, case_study, dump, heatmap, positions, trajectories

PROG = "ctemp-ct-analysis"
# positions' options that act only with another: (name, default, whether it acts, where it acts)
DEPENDENT_OPTIONS = (
    ("bootstrap_samples", 1000, lambda args: args.ci == "bootstrap", "only with --ci bootstrap"),
    ("seed", 1, lambda args: args.ci == "bootstrap", "only with --ci bootstrap"),
    ("bins", 10, lambda args: not args.segment, "only without --segment"),
)
DEFAULT = {name: default for name, default, _, _ in DEPENDENT_OPTIONS}


def common_options(parser, many_paths=False, final_eos=True, skip_long=False):
    if many_paths:
        parser.add_argument(
            "--path", nargs="+", required=True, metavar="CHECKPOINT", help="one or more checkpoints"
        )
    else:
        parser.add_argument("--path", required=True, metavar="CHECKPOINT", help="checkpoint")
    parser.add_argument(
        "--data",
        required=True,
        metavar="DATA_BIN",
        help="the fairseq-preprocess directory of the model (its dict.txt)",
    )
    parser.add_argument(
        "--text",
        required=True,
        metavar="FILE",
        help="one sentence per line, tokenised like the training data",
    )
    parser.add_argument(
        "--source",
        metavar="FILE",
        help="a translation model's (ct_transformer's) source sentences, line N the source of line N "
        "of --text, tokenised like the training data",
    )
    parser.add_argument("--cpu", action="store_true", help="run on the CPU even if CUDA is available")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    if final_eos:
        parser.add_argument(
            "--no-final-eos",
            dest="final_eos",
            action="store_false",
            help="leave out the last position of each line (the prediction of </s>)",
        )
    if skip_long:
        parser.add_argument(
            "--skip-long",
            action="store_true",
            help="leave out lines longer than the model's maximum positions "
            "(default: such a line is an error)",
        )
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")


def token_options(parser, default_k):
    parser.add_argument(
        "--tokens",
        nargs="+",
        metavar="TOKEN",
        help="vocabulary tokens, as spelled in dict.txt (e.g. the of , <unk>)",
    )
    parser.add_argument(
        "--vocab-k",
        type=int,
        default=default_k,
        help=f"without --tokens: the K most frequent words (default {default_k})",
    )


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (add_dump, add_positions, add_trajectories, add_heatmap, add_case_study):
        add(sub)
    return parser


def add_dump(sub):

    p = sub.add_parser("dump", help="tau and p(target) at every position -> TSV / JSON lines")
    common_options(p, skip_long=True)
    p.add_argument("--output", required=True, help="a .tsv, or .jsonl / .json for JSON lines; - for stdout")
    p.add_argument("--format", choices=("tsv", "jsonl"), help="override the format the extension implies")
    p.add_argument(
        "--full",
        metavar="NPY",
        help="also write every position's full tau vector, (positions x V) float32, rows in --output's order",
    )
    p.set_defaults(func=dump.run)


def add_positions(sub):
    p = sub.add_parser("positions", help="mean tau vs normalised sentence position -> PNG + CSV")
    common_options(p, many_paths=True, skip_long=True)
    p.add_argument("--labels", nargs="+", help="one legend label per --path (default: file names)")
    p.add_argument("--output", required=True, help="PNG; the CSV goes next to it (.csv)")
    p.add_argument(
        "--stats",
        nargs="+",
        choices=tuple(positions.STATS),
        default=["mean"],
        help="curves per checkpoint: mean (over the vocabulary, default), target (tau of "
        "the target token), std, min, max",
    )
    p.add_argument("--bins", type=int, help=f"bins of relative position 0..1 (default {DEFAULT['bins']})")
    p.add_argument(
        "--segment",
        type=int,
        default=0,
        metavar="S",
        help="instead of --bins, the papers' normalised sentence: first / middle / last S "
        "positions (AAAI: 5, with --min-len 16 --max-len 24)",
    )
    p.add_argument("--min-len", type=int, default=1, help="only sentences of at least this many words")
    p.add_argument(
        "--max-len", type=int, default=0, help="only sentences of at most this many words (0: any)"
    )
    p.add_argument(
        "--ci",
        choices=("t", "bootstrap"),
        default="t",
        help="95%% CI across sentences: Student t (default) or percentile bootstrap",
    )
    p.add_argument(
        "--bootstrap-samples",
        type=int,
        help=f"resamples of --ci bootstrap (default {DEFAULT['bootstrap_samples']})",
    )
    p.add_argument("--seed", type=int, help=f"seed of --ci bootstrap (default {DEFAULT['seed']})")
    p.add_argument("--title", help="the plot's title (default: one that says what is plotted)")
    p.set_defaults(func=positions.run)


def add_trajectories(sub):
    p = sub.add_parser("trajectories", help="tau of chosen tokens across checkpoints -> PNG + CSV")
    common_options(p, many_paths=True, skip_long=True)
    token_options(p, 8)
    p.add_argument("--output", required=True, help="PNG; the CSV goes next to it (.csv)")
    p.add_argument(
        "--x",
        choices=("epoch", "update"),
        default="epoch",
        help="x axis from each checkpoint's saved state (default epoch)",
    )
    p.add_argument(
        "--over",
        choices=("targets", "all"),
        default="targets",
        help="average a token's tau over its occurrences as a target (default) or over every position",
    )
    p.add_argument("--title", help="the plot's title (default: one that says what is plotted)")
    p.set_defaults(func=trajectories.run)


def add_heatmap(sub):
    p = sub.add_parser("heatmap", help="token x position tau for one sentence -> PNG + CSV")
    common_options(p)
    token_options(p, 20)
    p.add_argument("--line", type=int, required=True, help="line number in --text (from 1)")
    p.add_argument("--output", required=True, help="PNG; the CSV goes next to it (.csv)")
    p.add_argument(
        "--center",
        action="store_true",
        help="plot each token's tau minus its mean over the sentence (the CSV keeps tau)",
    )
    p.add_argument("--cmap", help="matplotlib colormap (default viridis; coolwarm with --center)")
    p.add_argument("--title", help="the plot's title (default: one that says what is plotted)")
    p.set_defaults(func=heatmap.run)


def add_case_study(sub):
    p = sub.add_parser("case-study", help="top-k predictions, CT vs baseline -> markdown")
    common_options(p, final_eos=False)
    p.add_argument(
        "--baseline-path",
        required=True,
        metavar="CHECKPOINT",
        help="the baseline checkpoint (same dictionary; tau not needed)",
    )
    p.add_argument("--line", type=int, nargs="+", required=True, help="line numbers in --text (from 1)")
    p.add_argument(
        "--positions",
        type=int,
        nargs="+",
        help="positions to show (1-based; pos i predicts token i; default: all)",
    )
    p.add_argument(
        "--only-differ",
        action="store_true",
        help="only positions where the two models' top-1 predictions differ",
    )
    p.add_argument("-k", type=int, default=3, help="predictions per model (default 3)")
    p.add_argument("--context", type=int, default=6, help="prefix words shown per row (default 6)")
    p.add_argument(
        "--labels",
        nargs=2,
        default=["CT", "baseline"],
        metavar=("CT", "BASELINE"),
        help="the two models' column names (default: CT baseline)",
    )
    p.add_argument("--output", help="also write the table to this file (.md)")
    p.set_defaults(func=case_study.run)


def check_options(args):
    for name in ("batch_size", "bins", "vocab_k", "bootstrap_samples"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise AnalysisError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if getattr(args, "segment", 0) < 0:
        raise AnalysisError(f"--segment must be >= 0, got {args.segment}")
    if args.func is positions.run:
        for name, default, acts, where in DEPENDENT_OPTIONS:
            if getattr(args, name) is not None and not acts(args):
                raise AnalysisError(f"--{name.replace('_', '-')} is used {where}")
            setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    drawn = args.func in (positions.run, trajectories.run, heatmap.run)
    if drawn and (problem := plotting.missing("the figure")):
        raise AnalysisError(problem)
    if getattr(args, "cmap", None):  # before the CSV is written, which would block the corrected rerun
        import matplotlib

        if args.cmap not in matplotlib.colormaps:
            raise AnalysisError(
                f"--cmap {args.cmap!r} is not a matplotlib colormap (e.g. viridis, coolwarm, magma)"
            )


def main(argv=None):
    """ctemp-ct-analysis (python -m fairseq_ctemp.cli.ct_analysis)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # importing fairseq set it to DEBUG: its chatter is not wanted here
    try:
        check_options(args)
        args.func(args)
    except AnalysisError as e:
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        sys.exit(2)
    finally:
        root.setLevel(level)


if __name__ == "__main__":
    main()
