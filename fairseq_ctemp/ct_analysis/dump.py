"""dump: tau and p(target) at every position of a text -> TSV / JSON lines (+ the full tau, .npy)."""

import json
import os
import sys

import numpy as np

from .loading import load_model
from .outputs import check_outputs, fmt, make_parent
from .scoring import fitting, score
from .texts import read_text

DUMP_FIELDS = (
    "line",
    "pos",
    "input",
    "target",
    "p_target",
    "logp_target",
    "tau_target",
    "tau_mean",
    "tau_min",
    "tau_max",
    "tau_argmax",
)


def dump_rows(scores):
    for s in scores:
        for i in range(len(s.targets)):
            yield (
                s,
                i,
                {
                    "line": s.line,
                    "pos": i + 1,
                    "input": s.inputs[i],
                    "target": s.targets[i],
                    "p_target": float(np.exp(s.logp_target[i])),
                    "logp_target": float(s.logp_target[i]),
                    "tau_target": float(s.tau_target[i]),
                    "tau_mean": float(s.tau_mean[i]),
                    "tau_min": float(s.tau_min[i]),
                    "tau_max": float(s.tau_max[i]),
                    "tau_argmax": s.tau_argmax[i],
                },
            )


def run(args):
    """tau of a text, position by position (the raw material of every figure). The outputs are
    written as PATH.partial and renamed when complete, so a failure leaves no half-written file."""
    check_outputs([args.output, args.full], args)
    sentences = read_text(args.text, source=args.source)
    lm = load_model(args.path, args.data, args.cpu)
    lm.require_temperature("dump")
    sentences = fitting(lm, sentences, args.skip_long, args.final_eos)
    finals = [p for p in (args.output, args.full) if p and p != "-"]
    for path in finals:
        make_parent(path)
    try:
        n_rows = write_dump(args, lm, sentences)
    except BaseException:
        for path in finals:
            if os.path.exists(path + ".partial"):
                os.remove(path + ".partial")
        raise
    for path in finals:
        os.replace(path + ".partial", path)
    print(
        f"{n_rows} positions of {len(sentences)} sentences -> {args.output}"
        + (f", full tau ({n_rows} x {len(lm.dictionary)}) -> {args.full}" if args.full else ""),
        file=sys.stderr,
    )


def write_dump(args, lm, sentences):
    """One row per position to --output (.partial), tau vectors to --full (.partial)."""
    fmt_name = args.format or ("jsonl" if args.output.endswith((".jsonl", ".json")) else "tsv")
    full = None
    if args.full:
        n_positions = sum(len(s.words) + (1 if args.final_eos else 0) for s in sentences)
        full = np.lib.format.open_memmap(
            args.full + ".partial", mode="w+", dtype=np.float32, shape=(n_positions, len(lm.dictionary))
        )
    out = sys.stdout if args.output == "-" else open(args.output + ".partial", "w", encoding="utf-8")
    n_rows = 0
    try:
        if fmt_name == "tsv":
            out.write("\t".join(DUMP_FIELDS) + "\n")
        scores = score(
            lm, sentences, full=full is not None, final_eos=args.final_eos, batch_size=args.batch_size
        )
        for s, i, row in dump_rows(scores):
            if fmt_name == "tsv":
                out.write("\t".join(fmt(v) if isinstance(v, float) else str(v) for v in row.values()) + "\n")
            else:
                out.write(json.dumps(row) + "\n")
            if full is not None:
                full[n_rows] = s.tau_full[i]
            n_rows += 1
    finally:
        if out is not sys.stdout:
            out.close()
        if full is not None:
            full.flush()
    return n_rows
