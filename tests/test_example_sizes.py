"""ctemp-train's refusal of examples too long for the model's positions or a batch
(fairseq_ctemp.example_sizes), and the ALT sweep's of a decoding --max-tokens too small;
against a count made here by hand; in ctemp-train's own process and in those it spawns. The
commands themselves: tests/test_bad_inputs.py (ctemp-train: ... longer than the model's positions)."""

import functools
import os
import re
import subprocess

import numpy as np
import pytest
import torch
from conftest import python_script
from fairseq.data import Dictionary, LanguagePairDataset, data_utils
from fairseq.tasks.fairseq_task import FairseqTask

from fairseq_ctemp import example_sizes
from fairseq_ctemp.alt import sweep_checks
from fairseq_ctemp.alt.common import AltError

SIZES = [(5, 4), (9, 3), (2, 2), (4, 12), (7, 7)]  # (source, target) tokens of each example


def dataset():
    vocab = Dictionary()
    src = [torch.full((s,), 5) for s, _ in SIZES]
    tgt = [torch.full((t,), 5) for _, t in SIZES]
    return LanguagePairDataset(
        src, np.array([s for s, _ in SIZES]), vocab, tgt, np.array([t for _, t in SIZES]), vocab
    )


def too_long(limit):
    """The examples longer than (source, target) limit, counted by hand."""
    return [i for i, (s, t) in enumerate(SIZES) if s > limit[0] or t > limit[1]]


def test_a_training_set_is_refused_only_when_no_example_fits():
    data, indices = dataset(), np.arange(len(SIZES))
    for limit in ((9, 12), (5, 5), (2, 2)):  # all fit; some; one
        assert too_long(limit) != list(range(len(SIZES)))
        assert example_sizes.problem(data, "train", indices, limit, True) is None
    limit = (1, 12)
    first = too_long(limit)[0]
    assert too_long(limit) == list(range(len(SIZES)))
    message = example_sizes.problem(data, "train", indices, limit, True)
    assert message.startswith("--max-source-positions / --max-target-positions")
    assert (
        f"every one of the 5 examples of train is longer than the model's positions allow "
        f"(1 source / 12 target tokens; example #{first}: {SIZES[first][0]} source / {SIZES[first][1]} "
        "target tokens)"
    ) in message


def test_a_validation_example_too_long_is_refused_by_its_index():
    data, indices = dataset(), np.arange(len(SIZES))
    assert example_sizes.problem(data, "valid", indices, (9, 12), False) is None
    for limit in ((5, 5), (8, 11), (9, 3)):
        first = too_long(limit)[0]
        s, t = SIZES[first]
        message = example_sizes.problem(data, "valid", indices, limit, False)
        assert (
            f"example #{first} of valid ({s} source / {t} target tokens) is longer than the model's "
            f"positions allow ({limit[0]} source / {limit[1]} target tokens)"
        ) in message
        assert message.endswith("--skip-invalid-size-inputs-valid-test")


def test_an_example_longer_than_a_batch_is_refused_by_its_index_inside_checked_only(monkeypatch):
    """fairseq batches a pair by its longer side; the first example (in the batching order) over
    the limit is named, and the longest one's size asked for."""
    monkeypatch.delenv(example_sizes.ENV, raising=False)
    data, order = dataset(), np.array([2, 0, 4, 1, 3])
    longest = max(max(s, t) for s, t in SIZES)
    for limit in (longest, None, 0):  # enough; fairseq's "no limit" twice
        with example_sizes.checked():
            assert data.batch_by_size(order, max_tokens=limit)
    for limit in (8, 5, 1):
        first = next(i for i in order if max(SIZES[i]) > limit)
        expected = (
            f"--max-tokens-valid (--max-tokens where not given): a batch of {limit} tokens cannot hold "
            f"example #{first} ({max(SIZES[first])} tokens): raise it to at least {longest}, the "
            "longest example's"
        )
        with example_sizes.checked(), pytest.raises(example_sizes.OptionError) as refused:
            data.batch_by_size(order, max_tokens=limit)
        assert str(refused.value) == expected
        with pytest.raises(AssertionError, match="should not exceed max_tokens"):  # stock, outside
            data.batch_by_size(order, max_tokens=limit)


@pytest.mark.parametrize("count", [5, 13, 16, 21])
def test_the_examples_that_fairseqs_batching_leaves_out_are_told(count, monkeypatch, caplog):
    """Examples that all fit one batch: fairseq keeps a multiple of --required-batch-size-multiple
    (8) of them and drops the rest, count % 8, without a word; inside checked() that is a warning,
    or an error where nothing is kept. With multiple 1 nothing is left out and nothing said."""
    monkeypatch.delenv(example_sizes.ENV, raising=False)
    data = LanguagePairDataset(
        [torch.full((3,), 5)] * count, np.full(count, 3), Dictionary(), [torch.full((3,), 5)] * count,
        np.full(count, 3), Dictionary(),
    )  # fmt: skip
    order, dropped = np.arange(count), count % 8
    stock = data.batch_by_size(order, max_tokens=1000, required_batch_size_multiple=8)
    assert sum(map(len, stock)) == count - dropped  # (outside checked())
    told = (
        f"--required-batch-size-multiple 8: fairseq's batching leaves {dropped} of the {count} examples "
        "out of every epoch (it drops a last batch whose size is not a multiple of 8: the longest "
        "examples); --required-batch-size-multiple 1 keeps every example"
    )
    with example_sizes.checked():
        assert sum(map(len, data.batch_by_size(order, max_tokens=1000))) == count
        assert not caplog.records
        if dropped == count:
            with pytest.raises(example_sizes.OptionError, match=re.escape(told)):
                data.batch_by_size(order, max_tokens=1000, required_batch_size_multiple=8)
            return
        batches = data.batch_by_size(order, max_tokens=1000, required_batch_size_multiple=8)
    assert [list(b) for b in batches] == [list(b) for b in stock]
    assert [r.getMessage() for r in caplog.records] == ([told] if dropped else [])


def test_a_last_batch_left_out_is_warned_of(monkeypatch, caplog):
    """Batches of 5 examples of 3 tokens (max_tokens 15) hold 4 each with multiple 4, which
    leaves a last batch of 2 of the 10, dropped: counted by hand."""
    monkeypatch.delenv(example_sizes.ENV, raising=False)
    data = LanguagePairDataset(
        [torch.full((3,), 5)] * 10, np.full(10, 3), Dictionary(), [torch.full((3,), 5)] * 10,
        np.full(10, 3), Dictionary(),
    )  # fmt: skip
    with example_sizes.checked():
        batches = data.batch_by_size(np.arange(10), max_tokens=15, required_batch_size_multiple=4)
    assert [len(b) for b in batches] == [4, 4]
    assert [r.getMessage() for r in caplog.records] == [
        "--required-batch-size-multiple 4: fairseq's batching leaves 2 of the 10 examples out of every "
        "epoch (it drops a last batch whose size is not a multiple of 4: the longest examples); "
        "--required-batch-size-multiple 1 keeps every example"
    ]


def test_the_check_is_made_inside_checked_only(monkeypatch):
    monkeypatch.delenv(example_sizes.ENV, raising=False)
    stock, stock_batches = FairseqTask.filter_indices_by_size, data_utils.batch_by_size
    with example_sizes.checked():
        assert FairseqTask.filter_indices_by_size is not stock and os.environ[example_sizes.ENV] == "1"
        assert data_utils.batch_by_size is not stock_batches
    assert FairseqTask.filter_indices_by_size is stock and example_sizes.ENV not in os.environ
    assert data_utils.batch_by_size is stock_batches


def test_a_process_spawned_inside_checked_checks_too(tmp_path):
    """A worker of multi-GPU training is a fresh interpreter with ctemp-train's environment that
    imports the plugin for --user-dir: it checks; without the variable it does not."""
    show = python_script(
        tmp_path,
        "show",
        "import fairseq_ctemp\nfrom fairseq.tasks.fairseq_task import FairseqTask\n"
        "print(getattr(FairseqTask.filter_indices_by_size, 'checks_example_sizes', False))\n",
    )
    for value, expected in (("1", "True"), ("", "False")):
        env = {**os.environ, example_sizes.ENV: value}
        proc = subprocess.run(show, env=env, capture_output=True, text=True, check=True)
        assert proc.stdout.split()[-1] == expected


def test_a_sweeps_decoding_max_tokens_is_checked_against_the_longest_sentence(toy_data):
    """ctemp-alt-sweep's --decode-args --max-tokens against the longest sentence of each subset the
    runs decode, counted by hand from the word-level toy text (words + </s>, the longer side)."""
    for subset in ("valid", "test"):
        sides = [(toy_data["raw"] / f"{subset}.{lang}").read_text().splitlines() for lang in ("src", "tgt")]
        longest = max(max(len(s.split()), len(t.split())) + 1 for s, t in zip(*sides))
        check = functools.partial(sweep_checks.check_decode_args, data_bin=str(toy_data["bin"]))
        check(["--max-tokens", str(longest)], src="src", tgt="tgt", subsets=[subset])
        check(["--max-len-b", "9"], src="src", tgt="tgt", subsets=[subset])  # (no --max-tokens)
        with pytest.raises(AltError) as refused:
            check(["--max-tokens", str(longest - 1)], src="src", tgt="tgt", subsets=[subset])
        assert str(refused.value) == (
            f"--decode-args: --max-tokens {longest - 1} is below the longest sentence of {subset} in "
            f"{toy_data['bin']} ({longest} tokens): give at least {longest}"
        )


def test_a_sweeps_decoding_output_lengths_are_checked_against_the_shortest_sentence(toy_data):
    """--decode-args --max-len-a/-b whose bound falls below --min-len for the shortest source
    sentence of a subset, counted by hand (words + </s>), are refused before any training."""
    for subset in ("valid", "test"):
        lines = (toy_data["raw"] / f"{subset}.src").read_text().splitlines()
        shortest = min(len(line.split()) + 1 for line in lines)
        check = functools.partial(sweep_checks.check_decode_args, data_bin=str(toy_data["bin"]))
        lengths = ["--max-len-a", "0.5", "--max-len-b", "0", "--min-len"]
        check([*lengths, str(shortest // 2)], src="src", tgt="tgt", subsets=[subset])
        with pytest.raises(AltError) as refused:
            check([*lengths, str(shortest // 2 + 1)], src="src", tgt="tgt", subsets=[subset])
        assert str(refused.value) == (
            f"--decode-args: --max-len-a 0.5 --max-len-b 0 allow at most {shortest // 2} target tokens "
            f"for the shortest source sentence of {subset} in {toy_data['bin']} ({shortest} tokens with "
            f"its </s>), fewer than the shortest output fairseq allows (--min-len {shortest // 2 + 1}): "
            "raise --max-len-a or --max-len-b"
        )
