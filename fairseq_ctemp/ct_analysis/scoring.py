"""The shared scorer: p(target) and tau at every position of every sentence, batch by batch."""

import os
import sys
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from .. import inputs
from ..progress import progress_bar
from . import AnalysisError


@dataclass
class Scores:
    """What one model computes for one sentence; arrays over its L positions (see the module
    docstring: position i predicts ``targets[i]`` after reading ``inputs[i]``)."""

    line: int
    inputs: List[str]
    targets: List[str]
    target_ids: np.ndarray  # (L,)
    logp_target: np.ndarray  # (L,) natural log
    tau_target: Optional[np.ndarray] = None  # (L,)  tau of the target token
    tau_mean: Optional[np.ndarray] = None  # (L,)  mean/min/max/std of tau over the vocabulary
    tau_min: Optional[np.ndarray] = None
    tau_max: Optional[np.ndarray] = None
    tau_std: Optional[np.ndarray] = None
    tau_argmax: Optional[List[str]] = None  # (L,) the word with the largest tau
    tau_columns: Optional[np.ndarray] = None  # (L, K) tau of the requested vocabulary entries
    tau_full: Optional[np.ndarray] = None  # (L, V)
    topk_ids: Optional[np.ndarray] = None  # (L, k) most probable next tokens
    topk_logp: Optional[np.ndarray] = None  # (L, k)
    topk_tau: Optional[np.ndarray] = None  # (L, k)


def max_positions(lm):
    """The most target positions the model takes (a translation model: its decoder's)."""
    limit = lm.model.max_positions()
    return limit[1 if lm.is_translation else 0] if isinstance(limit, tuple) else limit


def encode(lm, sentence, final_eos=True):
    """(input ids, target ids) of one sentence: [</s> w_1..w_n] and [w_1..w_n </s>]."""
    d = lm.dictionary
    ids = [d.index(w) for w in sentence.words]  # unknown words -> <unk>, as fairseq-preprocess
    inputs, targets = [d.eos()] + ids, ids + [d.eos()]
    if not final_eos:
        inputs, targets = inputs[:-1], targets[:-1]
    return inputs, targets


def fitting(lm, sentences, skip_long=False, final_eos=True):
    """Check, before anything is written, that the model takes every sentence in one piece
    (a transformer's positions are limited); with ``skip_long`` leave the longer ones out. A
    translation model needs each sentence's source (--source), a language model none."""
    if lm.is_translation and sentences[0].source is None:
        raise AnalysisError(
            f"{lm.path} is a translation model ({type(lm.model).__name__}): give the source sentences "
            "of --text with --source"
        )
    if not lm.is_translation and sentences[0].source is not None:
        raise AnalysisError(f"--source is for translation models; {lm.path} is a language model")
    words = [w for s in sentences for w in s.words]
    inputs.check_known_words("--text", words, lm.dictionary, lm.path, AnalysisError)
    if lm.is_translation:
        source = [w for s in sentences for w in s.source]
        inputs.check_known_words("--source", source, lm.source_dictionary, lm.path, AnalysisError)
    limit = max_positions(lm)
    n_positions = [len(s.words) + (1 if final_eos else 0) for s in sentences]
    if limit is None or max(n_positions) <= limit:
        return sentences
    if not skip_long:
        line, n = next((s.line, n) for s, n in zip(sentences, n_positions) if n > limit)
        raise AnalysisError(
            f"line {line} has {n} positions; the model takes at most {limit} (its "
            f"--tokens-per-sample / --max-target-positions); dump, positions and "
            f"trajectories can leave such lines out with --skip-long"
        )
    kept = [s for s, n in zip(sentences, n_positions) if n <= limit]
    print(
        f"--skip-long: left out {len(sentences) - len(kept)} lines longer than the model's {limit} positions",
        file=sys.stderr,
    )
    if not kept:
        raise AnalysisError(f"every line is longer than the model's {limit} positions")
    return kept


def score(lm, sentences, columns=None, full=False, topk=0, final_eos=True, batch_size=32, need_tau=True):
    """Yield one ``Scores`` per sentence, batch by batch (right-padded; the models are causal, so
    padding after a sentence changes none of its positions). Summaries of tau over the vocabulary
    are reduced inside the batch, so the full (B, T, V) tau only lives one batch at a time.
    ``columns``: vocabulary indices whose tau to keep; ``full``: keep all of tau; ``topk``: keep the
    k most probable next tokens. ``need_tau=False`` computes probabilities only (a baseline).
    ``sentences``: as ``fitting`` returns them (checked once, before anything is written)."""
    import torch

    if need_tau:
        lm.require_temperature("this analysis")
    with torch.no_grad():
        starts = range(0, len(sentences), batch_size)
        for start in progress_bar(starts, f"scoring {os.path.basename(lm.path)}"):
            batch = sentences[start : start + batch_size]
            encoded = [encode(lm, s, final_eos) for s in batch]
            yield from _score_batch(lm, batch, encoded, columns, full, topk, need_tau)


def _score_batch(lm, batch, encoded, columns, full, topk, need_tau):
    import torch

    d = lm.dictionary
    width = max(len(inp) for inp, _ in encoded)
    tokens = torch.full((len(batch), width), d.pad(), dtype=torch.long)
    target = torch.full((len(batch), width), d.pad(), dtype=torch.long)
    for i, (inp, tgt) in enumerate(encoded):
        tokens[i, : len(inp)] = torch.tensor(inp)
        target[i, : len(tgt)] = torch.tensor(tgt)
    tokens, target = tokens.to(lm.device), target.to(lm.device)
    if lm.is_translation:  # the source, each followed by </s> (as fairseq's translation task)
        src = lm.source_dictionary
        ids = [[src.index(w) for w in s.source] + [src.eos()] for s in batch]
        src_tokens = torch.full((len(batch), max(map(len, ids))), src.pad(), dtype=torch.long)
        for i, row in enumerate(ids):
            src_tokens[i, : len(row)] = torch.tensor(row)
        src_lengths = torch.tensor([len(row) for row in ids])
        net_output = lm.model(src_tokens.to(lm.device), src_lengths.to(lm.device), tokens)
    else:
        net_output = lm.model(tokens)  # a language model's forward is its decoder's
    lprobs = lm.model.get_normalized_probs(net_output, log_probs=True).float()
    out = {"logp_target": lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)}
    if topk:
        out["topk_logp"], out["topk_ids"] = lprobs.topk(min(topk, lprobs.size(-1)), dim=-1)
    if need_tau:
        tau = lm.head.temperatures(net_output[0]).float()  # (B, T, V)
        out.update(
            tau_target=tau.gather(-1, target.unsqueeze(-1)).squeeze(-1),
            tau_mean=tau.mean(-1),
            tau_min=tau.amin(-1),
            tau_max=tau.amax(-1),
            tau_std=tau.std(-1, unbiased=False),
            tau_argmax=tau.argmax(-1),
        )
        if columns is not None:
            out["tau_columns"] = tau[..., torch.as_tensor(columns, device=tau.device)]
        if full:
            out["tau_full"] = tau
        if topk:
            out["topk_tau"] = tau.gather(-1, out["topk_ids"])
    out = {k: v.cpu().numpy() for k, v in out.items()}
    argmax = out.pop("tau_argmax", None)
    for i, (sentence, (inp, tgt)) in enumerate(zip(batch, encoded)):
        length = len(inp)
        yield Scores(
            line=sentence.line,
            inputs=[d[t] for t in inp],
            targets=[d[t] for t in tgt],
            target_ids=np.asarray(tgt),
            tau_argmax=None if argmax is None else [d[t] for t in argmax[i, :length]],
            **{k: v[i, :length] for k, v in out.items()},
        )
