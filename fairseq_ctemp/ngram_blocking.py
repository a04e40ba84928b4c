"""fairseq's ``--no-repeat-ngram-size``, fixed, opt-in: ``CTEMP_FIX_NO_REPEAT_NGRAM=1`` in the
environment of the process that imports the plugin (fairseq-generate, fairseq-interactive, the hub,
--eval-bleu's generator).

fairseq 0.12's n-gram blocker without its CUDA extension (``NGramRepeatBlock._no_repeat_ngram``: on
a CPU, and on a GPU wherever fairseq was installed without building it) compares the last n-1
entries of each hypothesis's whole token buffer, the padding beyond the current step, with the
n-grams it has generated: they never match, so it blocks nothing and the option is silently ignored
(reported to fairseq as "Repetitions are generated although no_repeat_ngram_size is activated").
With the variable set, the plugin replaces that method with one that takes the n-1 tokens ending at
the step, as fairseq's CUDA kernel does, and is otherwise fairseq's (TorchScript-compatible as
fairseq's is). Without it nothing is replaced: decoding stays stock fairseq's."""

import math
from typing import List

import torch

from . import environment, patches

ENV = "CTEMP_FIX_NO_REPEAT_NGRAM"


def install_if_requested():
    """Replace fairseq's blocker where CTEMP_FIX_NO_REPEAT_NGRAM=1 (read once, at import)."""
    if not environment.switch(ENV):
        return
    from fairseq.ngram_repeat_block import NGramRepeatBlock

    why = f"{ENV}=1 only: --no-repeat-ngram-size blocks the repeated n-grams (fairseq's Python path blocks none)"
    patches.replace(NGramRepeatBlock, "_no_repeat_ngram", _no_repeat_ngram, why)


# named as the method it replaces: TorchScript compiles a method under its function's name
def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
    """lprobs of each hypothesis at -inf for every token that would repeat one of its n-grams: a
    token t is banned where tokens[step+2-n : step+1] + [t] is an n-gram the hypothesis already
    holds (its first token, the BOS, counted as fairseq's kernel counts it)."""
    n = self.no_repeat_ngram_size
    check_start_pos = step + 2 - n
    banned_tokens = [torch.jit.annotate(List[int], []) for _ in range(bsz * beam_size)]
    if check_start_pos >= 0:
        cpu_tokens: List[List[int]] = tokens[:, : step + 1].cpu().tolist()  # the tokens so far
        for bbsz_idx in range(bsz * beam_size):
            row = cpu_tokens[bbsz_idx]
            ngram_to_check = row[check_start_pos:]
            for i in range(check_start_pos):
                if ngram_to_check == row[i : i + n - 1]:
                    banned_tokens[bbsz_idx].append(row[i + n - 1])
    for bbsz_idx in range(bsz * beam_size):
        lprobs[bbsz_idx][torch.tensor(banned_tokens[bbsz_idx], dtype=torch.int64)] = torch.tensor(
            -math.inf
        ).to(lprobs)
    return lprobs
