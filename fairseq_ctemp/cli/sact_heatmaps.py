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
import statistics

import torch

from .. import inputs
from ..errors import OptionError


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
    p.add_argument("--beam", type=int, default=5, help="beam size (default 5)")
    p.add_argument("--max-len-a", type=float, default=1.5, help="max length = a * source + b (1.5)")
    p.add_argument("--max-len-b", type=int, default=10, help="(default 10)")
    p.add_argument("--source-spm", help="sentencepiece model to encode raw --input lines")
    p.add_argument("--target-spm", help="sentencepiece model to encode raw --references lines")
    p.add_argument("--max-sentences", type=int, default=20, help="at most this many (default 20)")
    args = p.parse_args(argv)
    if args.beam < 1 or args.max_sentences < 1:
        p.error("--beam and --max-sentences must be >= 1")
    if not (math.isfinite(args.max_len_a) and args.max_len_a >= 0) or args.max_len_b < 0:
        p.error(
            f"--max-len-a must be a finite number >= 0 and --max-len-b >= 0, got {args.max_len_a}, {args.max_len_b}"
        )
    return args


def read_lines(path, option):
    """Every line of an input file (the caller compares the counts of aligned files first)."""
    try:
        lines = inputs.read_utf8_lines(path)
    except inputs.InputError as e:
        raise SystemExit(f"error: {option} {path}: {e}") from None
    if not lines:
        raise SystemExit(f"error: {option} {path} is empty")
    return lines


def encoded(lines, spm_model):
    """The lines in the model's input format: sentencepiece pieces where a model is given."""
    if spm_model:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=spm_model)
        lines = [" ".join(sp.encode(line, out_type=str)) for line in lines]
    return lines


def load(args):
    from fairseq import checkpoint_utils  # the plugin's loader: the package is imported

    from ..models.sact_lstm import SactLSTMModel
    from ..models.sact_transformer import SactTransformerModel

    for option, path in (("DATA_BIN", args.data), ("--path", args.path)):
        if not os.path.exists(path):
            raise SystemExit(f"error: {option} {path}: no such file or directory")
    try:
        inputs.check_checkpoint(args.path)
    except inputs.InputError as e:
        raise SystemExit(f"error: --path {args.path} {e}") from None
    overrides = {"data": args.data}
    if args.source_lang:
        overrides["source_lang"] = args.source_lang
    if args.target_lang:
        overrides["target_lang"] = args.target_lang
    try:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            [args.path], arg_overrides=overrides
        )
    except OptionError as e:  # a file fairseq cannot load, or one of the plugin's checks at loading
        raise SystemExit(f"error: {e}") from None
    model = models[0].eval()
    if not isinstance(model, (SactLSTMModel, SactTransformerModel)):
        raise SystemExit(
            f"{args.path} is not a sact_lstm or sact_transformer checkpoint (arch {cfg.model._name})"
        )
    return model, task


def temperature_settings(model):
    """(mode, lambda or None, the constant tau of modes without a learned one)."""
    attention = getattr(model.decoder, "attention", None)  # sact_lstm
    if attention is None:  # sact_transformer: fairseq's own attention in mode "none"
        attention = model.decoder.layers[0].encoder_attn
    mode = getattr(attention, "mode", "none")
    return mode, getattr(attention, "lam", None), getattr(attention, "fixed_temperature", None) or 1.0


def tau_rows(tau):
    """Row labels of sact_transformer's tau (1 x target x layers x K), or None for sact_lstm."""
    if tau is None or tau.dim() == 2:
        return None
    layers, k = tau.shape[2:]
    if k == 1:
        return [f"layer {i + 1}" for i in range(layers)]
    return [f"layer {i + 1} head {j + 1}" for i in range(layers) for j in range(k)]


def tau_summary(sentences, rows):
    """Mean, min and max of tau over every target token of the sentences: one entry for sact_lstm,
    one per row (layer, or layer and head) for sact_transformer."""
    values = [tau for sentence in sentences for tau in sentence["tau"]]
    columns = [values] if rows is None else [list(column) for column in zip(*values)]
    labels = [None] if rows is None else rows
    return [
        {"row": label, "tokens": len(c), "mean": statistics.fmean(c), "min": min(c), "max": max(c)}
        for label, c in zip(labels, columns)
    ]


@torch.no_grad()
def analyse(model, task, source, reference, args):
    from fairseq.sequence_generator import SequenceGenerator

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    src = src_dict.encode_line(source, add_if_not_exist=False, append_eos=True).long()[None]
    lengths = torch.tensor([src.size(1)])
    if reference is not None:
        target = tgt_dict.encode_line(reference, add_if_not_exist=False, append_eos=True).long()
    else:
        generator = SequenceGenerator(
            [model], tgt_dict, beam_size=args.beam, max_len_a=args.max_len_a, max_len_b=args.max_len_b
        )
        target = generator.forward({"net_input": {"src_tokens": src, "src_lengths": lengths}})[0][0]["tokens"]
    prev = torch.cat([torch.tensor([tgt_dict.eos()]), target[:-1]])[None]
    model.decoder.need_attn = True
    _, extra = model(src, lengths, prev)
    tau = extra["attention_temperature"]
    if tau is not None:  # sact_lstm: 1 x target; sact_transformer: 1 x target x layers x K
        tau = tau[0].flatten(1).tolist() if tau.dim() == 4 else tau[0].tolist()
    else:  # fixed or plain attention: the constant the scores were divided by
        tau = [temperature_settings(model)[2]] * target.numel()
    attention = extra["attn"]
    if isinstance(attention, list):  # sact_transformer: [the last layer's, averaged over heads]
        attention = attention[0]
    return {
        "source": source,
        "source_tokens": [src_dict[i] for i in src[0]],
        "target_tokens": [tgt_dict[i] for i in target],
        "tau": tau,
        "attention": attention[0].tolist(),
    }, tau_rows(extra["attention_temperature"])


def draw(sentence, lam, rows, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src, tgt = sentence["source_tokens"], sentence["target_tokens"]
    taus = [list(row) for row in zip(*sentence["tau"])] if rows else [sentence["tau"]]  # rows x target
    width = max(6.0, 0.45 * max(len(src), len(tgt)) + 2)
    matrix_height = max(2.0, 0.3 * len(tgt))
    tau_height = 0.7 + 0.25 * (len(taus) - 1)
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(width, matrix_height + tau_height + 2.5),
        gridspec_kw={"height_ratios": [tau_height, matrix_height]},
    )
    values = [value for row in taus for value in row]
    low, high = (1 / lam, lam) if lam else (min(values), max(values) + 1e-6)
    image = top.imshow(taus, aspect="auto", cmap="coolwarm", vmin=low, vmax=high)
    top.set_xticks(range(len(tgt)), tgt, rotation=60, ha="right", fontsize=8)
    if rows:
        top.set_yticks(range(len(rows)), rows, fontsize=7)
    else:
        top.set_yticks([])
    for r, row in enumerate(taus):
        for t, value in enumerate(row):
            top.text(t, r, f"{value:.2f}", ha="center", va="center", fontsize=7)
    top.set_title(
        f"{title}\nattention temperature tau_t per target token"
        + (f" (range 1/lambda..lambda = {low:.2f}..{high:.2f})" if lam else ""),
        fontsize=9,
    )
    fig.colorbar(image, ax=top, fraction=0.03, pad=0.01)
    image = bottom.imshow(sentence["attention"], aspect="auto", cmap="Greys", vmin=0)
    bottom.set_xticks(range(len(src)), src, rotation=60, ha="right", fontsize=8)
    bottom.set_yticks(range(len(tgt)), tgt, fontsize=8)
    bottom.set_xlabel("source")
    bottom.set_ylabel("target")
    bottom.set_title("attention weights alpha_t,i", fontsize=9)
    fig.colorbar(image, ax=bottom, fraction=0.03, pad=0.01)
    fig.tight_layout()
    fig.savefig(path + ".tmp", dpi=110, format="png")
    plt.close(fig)
    os.replace(path + ".tmp", path)


def main(argv=None):
    """ctemp-sact-heatmaps (python -m fairseq_ctemp.cli.sact_heatmaps)."""
    logging.disable(logging.INFO)  # fairseq's chatter
    try:
        heatmaps(parse_args(argv))
    finally:
        logging.disable(logging.NOTSET)


def checked_inputs(args):
    """(sources, references or Nones, the JSON dump's path, the PNGs' paths), all checked before the
    model is loaded: options in range, --references aligned with --input, no output there yet."""
    if args.beam < 1 or args.max_sentences < 1:
        raise SystemExit(
            f"error: --beam and --max-sentences must be >= 1, got {args.beam}, {args.max_sentences}"
        )
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        raise SystemExit(f"error: --out-dir {args.out_dir} is a file, not a directory")
    sources = read_lines(args.input, "--input")
    references = read_lines(args.references, "--references") if args.references else None
    if references is not None and len(references) != len(sources):  # whole files: line i with line i
        raise SystemExit(
            f"error: --references {args.references} has {len(references)} lines, --input "
            f"{args.input} {len(sources)}: they must be aligned line by line"
        )
    sources = encoded(sources[: args.max_sentences], args.source_spm)
    references = (
        encoded(references[: args.max_sentences], args.target_spm) if references else [None] * len(sources)
    )
    dump_path = os.path.join(args.out_dir, "sact_attention.json")
    pngs = [os.path.join(args.out_dir, f"sentence{i + 1}.png") for i in range(len(sources))]
    existing = [p for p in [dump_path] + pngs if os.path.exists(p)]
    if existing:
        raise SystemExit(f"{existing[0]} already exists; refusing to overwrite it (use another --out-dir)")
    return sources, references, dump_path, pngs


def heatmaps(args):
    sources, references, dump_path, pngs = checked_inputs(args)
    model, task = load(args)
    mode, lam, _ = temperature_settings(model)
    analysed = [analyse(model, task, s, r, args) for s, r in zip(sources, references)]
    sentences, rows = [a[0] for a in analysed], analysed[0][1]
    summary = tau_summary(sentences, rows)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(dump_path, "x", encoding="utf-8") as f:
        json.dump(
            {
                "checkpoint": args.path,  # as given: a relative path keeps the results movable
                "mode": mode,
                "lambda": lam,
                "tau_rows": rows,
                "decoding": "forced (--references)" if args.references else f"beam {args.beam}",
                "tau_summary": summary,
                "sentences": sentences,
            },
            f,
            ensure_ascii=False,
            indent=1,
        )
    for i, (sentence, png) in enumerate(zip(sentences, pngs)):
        draw(sentence, lam, rows, png, f"sentence {i + 1} ({mode}" + (f", lambda={lam:g})" if lam else ")"))
    print(f"wrote {dump_path} and {len(pngs)} PNG heatmaps in {args.out_dir}")
    print_taus(sentences, rows, summary)


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
