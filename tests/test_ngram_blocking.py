"""--no-repeat-ngram-size with CTEMP_FIX_NO_REPEAT_NGRAM=1 (fairseq_ctemp.ngram_blocking): the
tokens it bans are those a set-of-n-grams reference bans, on fairseq's padded token buffer where
fairseq's own Python blocker bans none; it scripts as fairseq's does; fairseq-generate with the
variable holds no repeated n-gram, and without it stays stock (repeats included)."""

import itertools
import math

import pytest
import torch
from conftest import FAST_DECODE, PLUGIN_DIR, hypotheses, run_cli
from fairseq.ngram_repeat_block import NGramRepeatBlock

from fairseq_ctemp import ngram_blocking

PAD, BOS, VOCAB = 1, 2, 7


class Fixed(NGramRepeatBlock):
    """fairseq's module with the plugin's method, as CTEMP_FIX_NO_REPEAT_NGRAM=1 installs it (the
    test process itself stays unpatched)."""

    _no_repeat_ngram = ngram_blocking._no_repeat_ngram


def buffer(rows, step, generator):
    """A SequenceGenerator-like token buffer: BOS, step tokens from a small vocabulary (repeats
    likely), then padding up to the maximum length."""
    tokens = torch.full((rows, step + 6), PAD, dtype=torch.long)
    tokens[:, 0] = BOS
    tokens[:, 1 : step + 1] = torch.randint(3, 6, (rows, step), generator=generator)
    return tokens


def reference_bans(row, n):
    """The tokens t for which row + [t] ends in an n-gram that row already holds (row: BOS and the
    tokens so far)."""
    held = {tuple(row[i : i + n]) for i in range(len(row) - n + 1)}
    last = tuple(row[len(row) - n + 1 :]) if n > 1 else ()
    return {t for t in range(VOCAB) if last + (t,) in held}


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_the_banned_tokens_are_the_references(n):
    generator = torch.Generator().manual_seed(n)
    bsz, beam = 3, 2
    for step in range(0, 9):
        tokens = buffer(bsz * beam, step, generator)
        lprobs = torch.randn(bsz * beam, VOCAB, generator=generator)
        fixed = Fixed(n, use_extension=False)(tokens, lprobs.clone(), bsz, beam, step)
        for r in range(bsz * beam):
            banned = set(torch.nonzero(fixed[r] == -math.inf).flatten().tolist())
            assert banned == reference_bans(tokens[r, : step + 1].tolist(), n), (n, step, r)
            kept = [t for t in range(VOCAB) if t not in banned]
            assert torch.equal(fixed[r, kept], lprobs[r, kept])
        stock = NGramRepeatBlock(n, use_extension=False)(tokens, lprobs.clone(), bsz, beam, step)
        if n > 1:  # fairseq's own compares the padding at the buffer's end: it bans nothing
            assert not torch.isinf(stock).any()


def test_it_scripts_and_the_scripted_module_bans_the_same_tokens():
    generator = torch.Generator().manual_seed(0)
    module = Fixed(2, use_extension=False)
    scripted = torch.jit.script(module)
    for step, (bsz, beam) in itertools.product(range(2, 7), [(1, 1), (2, 3)]):
        tokens = buffer(bsz * beam, step, generator)
        lprobs = torch.randn(bsz * beam, VOCAB, generator=generator)
        expected = module(tokens, lprobs.clone(), bsz, beam, step)
        assert torch.equal(scripted(tokens, lprobs.clone(), bsz, beam, step), expected)


def repeated_bigrams(text):
    words = text.split()
    bigrams = list(zip(words, words[1:]))
    return len(bigrams) - len(set(bigrams))


def test_fairseq_generate_blocks_repeated_ngrams_only_when_asked(toy_data, toy_checkpoint):
    """The toy translator repeats itself (2 epochs); with the variable no hypothesis holds a
    repeated bigram, without it fairseq-generate's output keeps them (stock)."""
    command = [
        *(toy_data["bin"], "--user-dir", PLUGIN_DIR, "--path", toy_checkpoint("A")),
        *(*FAST_DECODE, "--beam", "2", "--no-repeat-ngram-size", "2"),
    ]
    fixed = hypotheses(run_cli("fairseq-generate", *command, env={ngram_blocking.ENV: "1"}).stdout)
    stock = hypotheses(run_cli("fairseq-generate", *command, env={ngram_blocking.ENV: "0"}).stdout)
    assert len(fixed) == len(stock) == 80
    assert sum(repeated_bigrams(text) for _, text in stock.values()) > 0
    assert all(repeated_bigrams(text) == 0 for _, text in fixed.values())
