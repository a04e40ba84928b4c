"""Perplexity of a language model through fairseq's Python API, as fairseq-eval-lm computes it.

    result = lm_eval.evaluate(["data-bin/ptb", "--user-dir", "fairseq_ctemp", "--path", "ckpt/checkpoint_best.pt",
                               "--gen-subset", "test", "--tokens-per-sample", "140", "--context-window", "70"])
    result.loss_base2, result.perplexity, result.tokens, result.max_log_normalizer
    lm_eval.check(result, expected_tokens=82430, subset="test")   # ValueError if a guard fails
    lm_eval.evaluate(argv, sentences=True).sentences              # [(NLL in nats, tokens)] per line

The arguments are fairseq-eval-lm's, and fairseq_cli.eval_lm.main runs unchanged on them. Guards
watch it, so that a perplexity is known to be over the whole subset and of a distribution:
- the scored tokens, which fairseq only writes into its log, are counted from the batches that its
  ``eval_lm`` scores (the non-padding targets; with --context-window the context tokens are padding
  there), so a caller can check that every token of the subset was scored exactly once;
- fairseq leaves a token whose probability is 0 (log-probability -inf) out of the perplexity, with
  only a log line: such tokens (and NaN ones) are counted;
- every distribution that the scorer takes the targets' probabilities from is checked to sum to 1
  over the vocabulary: the largest |log sum_v p(v)| over all positions is reported. A head that
  divides by a temperature, mixes softmaxes or splits the vocabulary into clusters would otherwise
  report a perplexity of something that is not a distribution without any sign of it.

fairseq's own line for the tokens it skips, ``logger.info("skipping tokens with inf scores:",
tokens)``, has no placeholder for its argument, so logging prints a "--- Logging error ---"
traceback instead of it (and pytest's log capture fails the test): while ``evaluate`` runs, the record
gets its ``%s``. Stock fairseq-eval-lm, with or without the plugin, keeps its own behaviour.

With ``sentences=True`` the scorer's per-token log-probabilities are kept too, and summed per
sentence of the subset (the scored stream, blocks in order, split after each </s>): what a paired
test between two models resamples.
"""

import contextlib
import functools
import logging
import math
from typing import List, NamedTuple, Optional, Tuple

import fairseq_cli.eval_lm
import torch
from fairseq import options
from fairseq.sequence_scorer import SequenceScorer

# The largest |log sum_v p(v)| (nats) that check() accepts: float32 rounding over 10^4-10^5 words is
# ~1e-6; a head that forgets a normaliser, a cluster or a temperature is off by far more.
NORMALIZATION_TOLERANCE = 1e-3
CHECK_ELEMENTS = 2**24  # probabilities summed at a time (64 MB in float32)


class Perplexity(NamedTuple):
    loss_base2: float  # mean negative log2-likelihood per scored token
    perplexity: float  # 2 ** loss_base2
    tokens: int  # tokens in the scored batches (non-padding targets)
    positions_checked: int  # positions whose whole distribution was summed
    max_log_normalizer: float  # the largest |log sum_v p(v)| over them, in nats (0 if normalised)
    tokens_not_finite: int  # targets of probability 0 or NaN, which fairseq leaves out
    # with sentences=True: (negative log-likelihood in nats, tokens) of each sentence, in order
    sentences: Optional[List[Tuple[float, int]]] = None


class _Guards:
    """What the guards count while fairseq_cli.eval_lm runs (see the module's doc)."""

    def __init__(self, keep_scores=False):
        self.tokens = self.positions = self.not_finite = 0
        self.max_log_normalizer = 0.0
        self.scores = {} if keep_scores else None  # sample id -> (target tokens, log-probabilities)
        self.eos = None  # the dictionary's </s>, which ends every sentence of the stream

    def watch_scorer(self, generate):
        @functools.wraps(generate)
        def watched(scorer, models, sample, **kwargs):
            hypos = generate(scorer, models, sample, **kwargs)
            if self.scores is not None:
                for sample_id, (hypo, *_) in zip(sample["id"].tolist(), hypos):
                    self.scores[sample_id] = (hypo["tokens"].cpu(), hypo["positional_scores"].double().cpu())
            return hypos

        return watched

    def sentences(self, eos):
        """(NLL in nats, tokens) per sentence of the scored stream: the blocks in id order (the
        subset's order), cut after each </s>."""
        if not self.scores:
            return []
        blocks = [self.scores[i] for i in sorted(self.scores)]
        tokens = torch.cat([block_tokens for block_tokens, _ in blocks])
        scores = torch.cat([block_scores for _, block_scores in blocks])
        ends = (tokens == eos).nonzero().squeeze(-1).add(1).tolist()
        if not ends or ends[-1] != len(tokens):  # a last line without </s>
            ends.append(len(tokens))
        starts = [0] + ends[:-1]
        return [(-float(scores[a:b].sum()), b - a) for a, b in zip(starts, ends)]

    def watch_batches(self, batch_iterator, pad):
        for sample in batch_iterator:
            if "target" in sample:  # fairseq skips the empty batches (no net_input, no target)
                self.tokens += int(sample["target"].ne(pad).sum())
            yield sample

    def watch_distributions(self, get_normalized_probs, pad):
        @functools.wraps(get_normalized_probs)
        def checked(net_output, log_probs, sample=None):
            probs = get_normalized_probs(net_output, log_probs, sample=sample)
            with torch.no_grad():
                self.check(probs.detach(), log_probs, sample["target"] if sample else None, pad)
            return probs

        return checked

    def check(self, probs, log_probs, target, pad):
        rows = probs.reshape(-1, probs.size(-1))
        step = max(1, CHECK_ELEMENTS // rows.size(1))  # bounded memory: V can be 10^5 words
        for chunk in rows.split(step):
            values = chunk.float()
            log_sums = values.logsumexp(-1) if log_probs else values.sum(-1).log()
            self.positions += log_sums.numel()
            worst = float(log_sums.abs().max())
            if math.isnan(worst) or worst > self.max_log_normalizer:  # a NaN stays: max() drops it
                self.max_log_normalizer = worst
        if target is not None and target.numel() == rows.size(0):  # the scorer's targets of these rows
            target = target.reshape(-1)
            picked = rows.gather(1, target.unsqueeze(1)).squeeze(1).float()
            picked = picked if log_probs else picked.log()
            self.not_finite += int((~torch.isfinite(picked) & target.ne(pad)).sum())

    def result(self, results):
        return Perplexity(
            float(results["loss"]),
            float(results["perplexity"]),
            self.tokens,
            self.positions,
            self.max_log_normalizer,
            self.not_finite,
            None if self.scores is None else self.sentences(self.eos),
        )


INF_SCORES_MESSAGE = "skipping tokens with inf scores:"  # fairseq_cli/eval_lm.py's own text


class _MessageWithItsArgument(logging.Filter):
    """Adds the placeholder fairseq-eval-lm's inf-scores message lacks for the tokens it passes."""

    def filter(self, record):
        if record.msg == INF_SCORES_MESSAGE and len(record.args or ()) == 1:
            record.msg = INF_SCORES_MESSAGE + " %s"
        return True


@contextlib.contextmanager
def _inf_scores_message_printed():
    logger, message_filter = logging.getLogger("fairseq_cli.eval_lm"), _MessageWithItsArgument()
    logger.addFilter(message_filter)
    try:
        yield
    finally:
        logger.removeFilter(message_filter)


@contextlib.contextmanager
def _guarded(guards):
    """fairseq_cli.eval_lm.eval_lm with its batches and each model's get_normalized_probs watched."""
    eval_lm = fairseq_cli.eval_lm.eval_lm

    def guarded_eval_lm(models, source_dictionary, batch_iterator, *args, **kwargs):
        pad, guards.eos = source_dictionary.pad(), source_dictionary.eos()
        for model in models:
            model.get_normalized_probs = guards.watch_distributions(model.get_normalized_probs, pad)
        return eval_lm(models, source_dictionary, guards.watch_batches(batch_iterator, pad), *args, **kwargs)

    generate = SequenceScorer.generate
    fairseq_cli.eval_lm.eval_lm = guarded_eval_lm
    SequenceScorer.generate = guards.watch_scorer(generate)
    try:
        yield
    finally:
        fairseq_cli.eval_lm.eval_lm = eval_lm
        SequenceScorer.generate = generate


def evaluate(argv, sentences=False):
    """fairseq-eval-lm on argv (its command-line arguments, without the program name); with
    sentences=True, also each sentence's NLL (``Perplexity.sentences``)."""
    args = options.parse_args_and_arch(options.get_eval_lm_parser(), list(argv))
    guards = _Guards(keep_scores=sentences)
    with _guarded(guards), _inf_scores_message_printed():
        results = fairseq_cli.eval_lm.main(args)
    return guards.result(results)


def check(result, expected_tokens, subset):
    """ValueError, saying what is wrong, unless every one of the subset's expected_tokens was scored
    once, with a finite log-probability, and every distribution summed to 1 within
    NORMALIZATION_TOLERANCE."""
    if result.tokens != expected_tokens:
        raise ValueError(
            f"evaluated {result.tokens:,} tokens but {subset} has {expected_tokens:,} (tokens + </s>): "
            "the perplexity would not be over the whole corpus"
        )
    if result.tokens_not_finite:
        raise ValueError(
            f"{result.tokens_not_finite:,} of the {result.tokens:,} tokens have probability 0 or NaN, "
            "which fairseq-eval-lm leaves out: the perplexity would not be over the whole corpus"
        )
    if result.positions_checked == 0:
        raise ValueError("no distribution was checked: the model's get_normalized_probs was never called")
    if not result.max_log_normalizer <= NORMALIZATION_TOLERANCE:  # also catches nan
        raise ValueError(
            f"the model's distributions do not sum to 1: |log sum_v p(v)| reaches "
            f"{result.max_log_normalizer:.3g} nats (allowed: {NORMALIZATION_TOLERANCE:g}): "
            "the perplexity would not be of a probability distribution"
        )
