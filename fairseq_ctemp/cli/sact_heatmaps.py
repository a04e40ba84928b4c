"""Dump the attention temperatures tau_t and the attention weights of a sact_lstm or sact_transformer
checkpoint for given sentences, and draw the paper's heatmaps (Lin et al., EMNLP 2018, Figure 2) as
PNG: tau_t per target token (red: softer attention, blue: harder; one row per decoder layer, or per
layer and head, for sact_transformer), and the attention matrix (target x source; for
sact_transformer the last layer's, averaged over its heads, as fairseq's alignments).

Each source sentence is translated by beam search (at the training temperature for tempered_ce
checkpoints), or force-decoded on --references; the translation is then scored in one teacher-forced
pass, which gives exactly the tau_t and alpha_t of incremental decoding. Input lines must be in the
model's input format (e.g. sentencepiece pieces), or pass --source-spm to encode raw text.

    ctemp-sact-heatmaps DATA_BIN --path CKPT --input SENTENCES \\
        --out-dir DIR [-s en -t vi] [--references REFS] [--beam 5] [--source-spm spm.en.model]

Writes DIR/sact_attention.json ({"checkpoint" (the path as given), "mode", "lambda", "tau_rows",
"sentences": [{"source_tokens", "target_tokens", "tau", "attention"}]}: tau[t] and attention[t][i]
belong to target token t, which the model predicted from the tokens before it; tau[t] is a number for sact_lstm, a list with one
number per entry of tau_rows ("layer 1", ... or "layer 1 head 1", ...) for sact_transformer) and
DIR/sentence<N>.png. Existing files are never overwritten.
"""

import argparse
import json
import logging
import math
import os

from .. import inputs, optional, outputs, plotting, translate
from ..sact_analysis import SactAnalysisError, analyse, draw, encoded, load, tau_summary, temperature_settings

BEAM_SEARCH = {"beam": 5, "max_len_a": 1.5, "max_len_b": 10}  # the defaults of its options


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="ctemp-sact-heatmaps",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA_BIN", help="binarized data (for the dictionaries)")
    p.add_argument("--path", required=True, help="sact_lstm or sact_transformer checkpoint")
    p.add_argument("--input", required=True, help="source sentences, one a line")
    p.add_argument("--references", help="target sentences to force-decode instead of beam search")
    p.add_argument("--out-dir", required=True, help="where the JSON dump and PNGs go")
    p.add_argument("-s", "--source-lang", help="source language (default: the checkpoint's)")
    p.add_argument("-t", "--target-lang", help="target language (default: the checkpoint's)")
    p.add_argument(
        "--beam", type=int, help=f"beam size (default {BEAM_SEARCH['beam']}; not with --references)"
    )
    p.add_argument(
        "--max-len-a", type=float, help=f"max length = a * source + b (default {BEAM_SEARCH['max_len_a']})"
    )
    p.add_argument("--max-len-b", type=int, help=f"(default {BEAM_SEARCH['max_len_b']})")
    p.add_argument("--source-spm", help="sentencepiece model to encode raw --input lines")
    p.add_argument("--target-spm", help="sentencepiece model to encode raw --references lines")
    p.add_argument("--max-sentences", type=int, default=20, help="at most this many (default 20)")
    args = p.parse_args(argv)
    for name, default in BEAM_SEARCH.items():
        option = f"--{name.replace('_', '-')}"
        if getattr(args, name) is not None and args.references:
            p.error(f"{option} is for beam search; with --references the sentences are force-decoded")
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    if args.target_spm and not args.references:
        p.error("--target-spm encodes --references: give them, or leave it out")
    if args.beam < 1 or args.max_sentences < 1:
        p.error(f"--beam and --max-sentences must be >= 1, got {args.beam}, {args.max_sentences}")
    if not (math.isfinite(args.max_len_a) and args.max_len_a >= 0) or args.max_len_b < 0:
        p.error(
            f"--max-len-a must be a finite number >= 0 and --max-len-b >= 0, got {args.max_len_a}, {args.max_len_b}"
        )
    if problem := plotting.missing("the heatmaps"):
        p.error(problem)
    spm = [
        option
        for option, model in (("--source-spm", args.source_spm), ("--target-spm", args.target_spm))
        if model
    ]
    if spm and (problem := optional.missing("sentencepiece", f"encodes the lines of {' and '.join(spm)}")):
        p.error(problem)
    return args


def read_lines(path, option):
    """Every line of an input file (the caller compares the counts of aligned files first)."""
    return inputs.read_lines_option(option, path, lambda message: SystemExit(f"error: {message}"))


def main(argv=None):
    """ctemp-sact-heatmaps (python -m fairseq_ctemp.cli.sact_heatmaps)."""
    logging.disable(logging.INFO)  # fairseq's chatter
    try:
        heatmaps(parse_args(argv))
    finally:
        logging.disable(logging.NOTSET)


def checked_inputs(args):
    """(sources, references or Nones, the JSON dump's path, the PNGs' paths, the lines of --input),
    all checked before the model is loaded (the options' ranges: parse_args): --references aligned
    with --input, no output there yet."""
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        raise SystemExit(f"error: --out-dir {args.out_dir} is a file, not a directory")
    if problem := inputs.folder_problem(args.out_dir, made_if_missing=True):
        raise SystemExit(f"error: --out-dir {args.out_dir} {problem}")
    sources = read_lines(args.input, "--input")
    references = read_lines(args.references, "--references") if args.references else None
    if references is not None and len(references) != len(sources):  # whole files: line i with line i
        raise SystemExit(
            f"error: --references {args.references} has {len(references)} lines, --input "
            f"{args.input} {len(sources)}: they must be aligned line by line"
        )
    lines = len(sources)
    sources = encoded(sources[: args.max_sentences], args.source_spm)
    if references is None:  # beam search: each output needs its length bound >= fairseq's --min-len 1
        shortest = min(len(s.split()) + 1 for s in sources)  # words and </s>, as fairseq counts them
        where = f"--input {args.input}"
        if problem := translate.length_budget_problem(args.max_len_a, args.max_len_b, 1, shortest, where):
            raise SystemExit(f"error: {problem}")
    references = (
        encoded(references[: args.max_sentences], args.target_spm) if references else [None] * len(sources)
    )
    dump_path = os.path.join(args.out_dir, "sact_attention.json")
    pngs = [os.path.join(args.out_dir, f"sentence{i + 1}.png") for i in range(len(sources))]
    existing = [p for p in [dump_path] + pngs if os.path.exists(p)]
    if existing:
        raise SystemExit(f"{existing[0]} already exists; refusing to overwrite it (use another --out-dir)")
    return sources, references, dump_path, pngs, lines


def check_known_words(args, sources, references, task):
    """Refuses --input (or --references) of no word of the model's dictionary; says the share of
    unknown words (encoded as <unk>)."""
    texts = [("--input", sources, task.source_dictionary)]
    if references[0] is not None:
        texts.append(("--references", references, task.target_dictionary))
    for option, lines, dictionary in texts:
        words = [w for line in lines for w in line.split()]
        inputs.check_known_words(option, words, dictionary, args.path, lambda m: SystemExit(f"error: {m}"))


def heatmaps(args):
    sources, references, dump_path, pngs, lines = checked_inputs(args)
    try:
        model, task = load(args.data, args.path, args.source_lang, args.target_lang)
    except SactAnalysisError as e:
        raise SystemExit(f"error: {e}") from None
    check_known_words(args, sources, references, task)
    mode, lam, _ = temperature_settings(model)
    decoding = {"beam": args.beam, "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}
    analysed = [analyse(model, task, s, r, **decoding) for s, r in zip(sources, references)]
    sentences, rows = [a[0] for a in analysed], analysed[0][1]
    summary = tau_summary(sentences, rows)
    record = {
        "checkpoint": args.path,  # as given: a relative path keeps the results movable
        "mode": mode,
        "lambda": lam,
        "tau_rows": rows,
        "decoding": "forced (--references)" if args.references else f"beam {args.beam}",
        "tau_summary": summary,
        "sentences": sentences,
    }
    title = f"({mode}" + (f", lambda={lam:g})" if lam else ")")
    write_outputs(
        args.out_dir,
        dump_path,
        record,
        pngs,
        lambda i, png: draw(sentences[i], lam, rows, png, f"sentence {i + 1} {title}"),
    )
    left = (
        f" (the first {len(pngs)} of the {lines} lines of --input: --max-sentences)"
        if lines > len(pngs)
        else ""
    )
    print(f"wrote {dump_path} and {len(pngs)} PNG heatmaps in {args.out_dir}{left}")
    print_taus(sentences, rows, summary)


def write_outputs(out_dir, dump_path, record, pngs, draw_one):
    """The JSON dump, then each heatmap (draw_one(i, path)), all or none (outputs.all_or_none)."""
    os.makedirs(out_dir, exist_ok=True)
    with outputs.all_or_none() as made:
        with open(dump_path, "x", encoding="utf-8") as f:  # made only once it is ours
            made.append(dump_path)
            json.dump(record, f, ensure_ascii=False, indent=1)
        for i, png in enumerate(pngs):
            made.append(png)
            draw_one(i, png)


def print_taus(sentences, rows, summary):
    """τ per target token (one value per row of τ), its summary, and each sentence's tokens with their τ."""
    if rows:
        print("tau per target token: " + " / ".join(rows))
    for s in summary:
        print(
            f"tau{' (' + s['row'] + ')' if s['row'] else ''} over the {s['tokens']} target tokens: "
            f"mean {s['mean']:.3f}, min {s['min']:.3f}, max {s['max']:.3f}"
        )
    for i, sentence in enumerate(sentences):
        print(
            f"{i + 1}: "
            + " ".join(
                f"{tok}({'/'.join(f'{t:.2f}' for t in tau) if rows else f'{tau:.2f}'})"
                for tok, tau in zip(sentence["target_tokens"], sentence["tau"])
            )
        )


if __name__ == "__main__":
    main()
