"""Perplexity of a language model through fairseq's Python API, as fairseq-eval-lm computes it.

    result = lm_eval.evaluate(["data-bin/ptb", "--user-dir", "fairseq_ctemp", "--path", "ckpt/checkpoint_best.pt",
                               "--gen-subset", "test", "--tokens-per-sample", "140", "--context-window", "70"])
    result.loss_base2, result.perplexity, result.tokens, result.max_log_normalizer
    lm_eval.check(result, expected_tokens=82430, subset="test")   # ValueError if a guard fails

The arguments are fairseq-eval-lm's, and fairseq_cli.eval_lm.main runs unchanged on them. Two guards
watch it, so that a perplexity is known to be over the whole subset and of a distribution:
- the scored tokens, which fairseq only writes into its log, are counted from the batches that its
  ``eval_lm`` scores (the non-padding targets; with --context-window the context tokens are padding
  there), so a caller can check that every token of the subset was scored exactly once;
- every distribution that the scorer takes the targets' probabilities from is checked to sum to 1
  over the vocabulary: the largest |log sum_v p(v)| over all positions is reported. A head that
  divides by a temperature, mixes softmaxes or splits the vocabulary into clusters would otherwise
  report a perplexity of something that is not a distribution without any sign of it.
"""

import contextlib
import functools
from typing import NamedTuple

import fairseq_cli.eval_lm
import torch
from fairseq import options

# The largest |log sum_v p(v)| (nats) that check() accepts: float32 rounding over 10^4-10^5 words is
# ~1e-6; a head that forgets a normaliser, a cluster or a temperature is off by far more.
NORMALIZATION_TOLERANCE = 1e-3


class Perplexity(NamedTuple):
    loss_base2: float  # mean negative log2-likelihood per scored token
    perplexity: float  # 2 ** loss_base2
    tokens: int  # tokens scored
    positions_checked: int  # positions whose whole distribution was summed
    max_log_normalizer: float  # the largest |log sum_v p(v)| over them, in nats (0 if normalised)


@contextlib.contextmanager
def _guarded(counter, normalizer):
    """fairseq_cli.eval_lm.eval_lm with its batch iterator wrapped to add each batch's non-padding
    targets to counter[0], and each model's get_normalized_probs wrapped to add its positions to
    normalizer[0] and keep the largest |log sum_v p(v)| in normalizer[1]."""
    eval_lm = fairseq_cli.eval_lm.eval_lm

    def check_normalization(get_normalized_probs):
        @functools.wraps(get_normalized_probs)
        def checked(net_output, log_probs, sample=None):
            probs = get_normalized_probs(net_output, log_probs, sample=sample)
            with torch.no_grad():
                values = probs.detach().float()
                log_sums = values.logsumexp(-1) if log_probs else values.sum(-1).log()
                normalizer[0] += log_sums.numel()
                normalizer[1] = max(normalizer[1], float(log_sums.abs().max()) if log_sums.numel() else 0.0)
            return probs

        return checked

    def guarded_eval_lm(models, source_dictionary, batch_iterator, *args, **kwargs):
        pad = source_dictionary.pad()

        def batches():
            for sample in batch_iterator:
                if "target" in sample:  # fairseq skips the empty batches (no net_input, no target)
                    counter[0] += int(sample["target"].ne(pad).sum())
                yield sample

        for model in models:
            model.get_normalized_probs = check_normalization(model.get_normalized_probs)
        return eval_lm(models, source_dictionary, batches(), *args, **kwargs)

    fairseq_cli.eval_lm.eval_lm = guarded_eval_lm
    try:
        yield
    finally:
        fairseq_cli.eval_lm.eval_lm = eval_lm


def evaluate(argv):
    """fairseq-eval-lm on argv (its command-line arguments, without the program name)."""
    args = options.parse_args_and_arch(options.get_eval_lm_parser(), list(argv))
    counter, normalizer = [0], [0, 0.0]
    with _guarded(counter, normalizer):
        results = fairseq_cli.eval_lm.main(args)
    return Perplexity(float(results["loss"]), float(results["perplexity"]), counter[0], *normalizer)


def check(result, expected_tokens, subset):
    """ValueError, saying what is wrong, unless every one of the subset's expected_tokens was scored
    once and every distribution summed to 1 within NORMALIZATION_TOLERANCE."""
    if result.tokens != expected_tokens:
        raise ValueError(
            f"evaluated {result.tokens:,} tokens but {subset} has {expected_tokens:,} (tokens + </s>): "
            "the perplexity would not be over the whole corpus"
        )
    if result.positions_checked == 0:
        raise ValueError("no distribution was checked: the model's get_normalized_probs was never called")
    if not result.max_log_normalizer <= NORMALIZATION_TOLERANCE:  # also catches nan
        raise ValueError(
            f"the model's distributions do not sum to 1: |log sum_v p(v)| reaches "
            f"{result.max_log_normalizer:.3g} nats (allowed: {NORMALIZATION_TOLERANCE:g}): "
            "the perplexity would not be of a probability distribution"
        )
