"""Perplexity of a language model through fairseq's Python API, as fairseq-eval-lm computes it.

    result = lm_eval.evaluate(["data-bin/ptb", "--user-dir", "fairseq_ctemp", "--path", "ckpt/checkpoint_best.pt",
                               "--gen-subset", "test", "--tokens-per-sample", "140", "--context-window", "70"])
    result.loss_base2, result.perplexity, result.tokens

The arguments are fairseq-eval-lm's, and fairseq_cli.eval_lm.main runs unchanged on them. The number
of scored tokens, which fairseq only writes into its log, is counted from the batches that its
``eval_lm`` scores (the non-padding targets; with --context-window the context tokens are padding
there), so a caller can check that every token of the subset was scored exactly once.
"""

import contextlib
from typing import NamedTuple

import fairseq_cli.eval_lm
from fairseq import options


class Perplexity(NamedTuple):
    loss_base2: float  # mean negative log2-likelihood per scored token
    perplexity: float  # 2 ** loss_base2
    tokens: int  # tokens scored


@contextlib.contextmanager
def _counting_scored_tokens(counter):
    """fairseq_cli.eval_lm.eval_lm with its batch iterator wrapped to add each batch's non-padding
    targets to counter[0]."""
    eval_lm = fairseq_cli.eval_lm.eval_lm

    def counting_eval_lm(models, source_dictionary, batch_iterator, *args, **kwargs):
        pad = source_dictionary.pad()

        def batches():
            for sample in batch_iterator:
                if "target" in sample:  # fairseq skips the empty batches (no net_input, no target)
                    counter[0] += int(sample["target"].ne(pad).sum())
                yield sample

        return eval_lm(models, source_dictionary, batches(), *args, **kwargs)

    fairseq_cli.eval_lm.eval_lm = counting_eval_lm
    try:
        yield
    finally:
        fairseq_cli.eval_lm.eval_lm = eval_lm


def evaluate(argv):
    """fairseq-eval-lm on argv (its command-line arguments, without the program name)."""
    args = options.parse_args_and_arch(options.get_eval_lm_parser(), list(argv))
    counter = [0]
    with _counting_scored_tokens(counter):
        results = fairseq_cli.eval_lm.main(args)
    return Perplexity(float(results["loss"]), float(results["perplexity"]), counter[0])
