"""case-study: top-k next-token predictions (p, tau) of a CT model against a baseline -> markdown."""

import math

from . import AnalysisError
from .loading import load_model
from .outputs import check_outputs, make_parent
from .scoring import fitting, score
from .texts import read_text


def md(token):
    """A token inside a markdown table cell: | and <, > (</s>, <unk> would vanish as HTML) escaped."""
    return token.replace("|", "\\|").replace("<", "\\<").replace(">", "\\>")


def predictions_cell(lm, s, i, target, with_tau):
    items = []
    for token, logp, tau in zip(
        s.topk_ids[i], s.topk_logp[i], s.topk_tau[i] if with_tau else [None] * len(s.topk_ids[i])
    ):
        word = md(lm.dictionary[int(token)])
        word = f"**{word}**" if int(token) == target else word
        items.append(f"{word} {math.exp(logp):.3f}" + (f" (τ={tau:.4g})" if tau is not None else ""))
    return "; ".join(items)


def case_study_table(ct, base, ct_scores, base_scores, positions, labels, k, context, only_differ):
    """A markdown section per sentence, one row per chosen position."""
    out = []
    for s, b in zip(ct_scores, base_scores):
        out.append(f"### line {s.line}: {' '.join(md(t) for t in s.targets[:-1])}\n")
        out.append(
            f"| pos | context | target | {labels[0]} top-{k} (p, τ) | {labels[1]} top-{k} (p) | "
            f"{labels[0]} p(target) | τ(target) | {labels[1]} p(target) |"
        )
        out.append("|---:|---|---|---|---|---:|---:|---:|")
        chosen = positions or range(1, len(s.targets) + 1)
        for pos in chosen:
            if not 1 <= pos <= len(s.targets):
                raise AnalysisError(
                    f"--positions {pos} is out of range for line {s.line} (1 .. {len(s.targets)})"
                )
            i = pos - 1
            if only_differ and s.topk_ids[i][0] == b.topk_ids[i][0]:
                continue
            prefix = s.inputs[max(0, i + 1 - context) : i + 1]
            ellipsis = "… " if i + 1 > context else ""
            target = int(s.target_ids[i])
            out.append(
                f"| {pos} | {ellipsis}{' '.join(md(t) for t in prefix)} | {md(s.targets[i])} | "
                f"{predictions_cell(ct, s, i, target, True)} | "
                f"{predictions_cell(base, b, i, target, False)} | "
                f"{math.exp(s.logp_target[i]):.3f} | {s.tau_target[i]:.4g} | "
                f"{math.exp(b.logp_target[i]):.3f} |"
            )
        out.append("")
    return "\n".join(out)


def run(args):
    """Top-k next-token predictions of a CT model (with each one's tau) against a baseline, at
    chosen positions of chosen sentences: ICLR Table 5 / appendix A.4-A.5."""
    check_outputs([args.output], args)
    if args.k < 1:
        raise AnalysisError(f"-k must be >= 1, got {args.k}")
    sentences = read_text(args.text, args.line, args.source)
    ct = load_model(args.path, args.data, args.cpu)
    ct.require_temperature("case-study")
    base = load_model(args.baseline_path, args.data, args.cpu)  # same --data: same dictionary
    ct_sentences, base_sentences = fitting(ct, sentences), fitting(base, sentences)
    ct_scores = list(score(ct, ct_sentences, topk=args.k))
    base_scores = list(score(base, base_sentences, topk=args.k, need_tau=False))
    table = case_study_table(
        ct, base, ct_scores, base_scores, args.positions, args.labels, args.k, args.context, args.only_differ
    )
    print(table)
    if args.output:
        make_parent(args.output)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(table + "\n")
