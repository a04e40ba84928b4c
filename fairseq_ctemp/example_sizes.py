"""ctemp-train's refusal of examples longer than the model's positions or a batch, in one line, and
its warning of the examples fairseq's batching leaves out.

fairseq-train skips the training examples longer than the positions the model allows
(``--max-source-positions`` / ``--max-target-positions``, ``--tokens-per-sample`` for a language
model; for training, capped at ``--max-tokens``) with a warning; when it skips every one of them it
fails in ``batch_by_size`` with an IndexError and a traceback. A validation example too long raises
an Exception, with a traceback, unless ``--skip-invalid-size-inputs-valid-test``; one within the
positions but longer than ``--max-tokens-valid`` (no cap there) fails batch_by_size's assertion.
Inside ``checked()`` (what ctemp-train runs in) each ends with one line naming the options
(``errors.OptionError``); a training set of which only some examples are too long still trains, as
fairseq's, with its warning. fairseq's batch_by_size also drops, without a word, a last batch whose
size is not a multiple of ``--required-batch-size-multiple`` (8 by default): the longest examples
of the training set are then never trained on, and validation (its loss, ``--eval-bleu``) is over
the rest of the validation set; inside ``checked()`` a warning says how many examples are left out
(an error where that is all of them).
The worker processes of multi-GPU training inherit ``ENV`` and check too (``install_if_requested``,
called by the plugin's import), as ``early_stopping`` does. ``longest`` also serves the decoding and
calibration tools, which refuse a ``--max-tokens`` below the longest example themselves.
"""

import contextlib
import logging
import os

import numpy as np

from . import environment
from .errors import OptionError

# Set inside checked(): the processes fairseq spawns inherit it and check when they import the plugin.
ENV = "CTEMP_CHECK_EXAMPLE_SIZES"
OPTIONS = "--max-source-positions / --max-target-positions (--tokens-per-sample for a language model)"
BATCH_OPTIONS = "--max-tokens-valid (--max-tokens where not given)"

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def checked():
    """Examples too long for the model's positions refused in one line, in this process and in
    those that fairseq spawns from it."""
    with environment.installed_here_and_in_spawned(_install, ENV):
        yield


def install_if_requested():
    """In a process started inside checked(): check there too, for the process's lifetime."""
    if os.environ.get(ENV) == "1":
        _install()


def problem(dataset, split, indices, max_positions, ignore_invalid_inputs):
    """Why fairseq cannot batch ``indices`` of ``dataset`` (the ``split`` subset) within
    ``max_positions``, or None: none of them fits where fairseq skips what is too long
    (ignore_invalid_inputs: the training set, a validation set with
    --skip-invalid-size-inputs-valid-test), or one does not fit where it would stop at it."""
    if max_positions is None or len(indices) == 0:
        return None
    kept, ignored = dataset.filter_indices_by_size(indices, max_positions)
    if len(ignored) == 0 or (ignore_invalid_inputs and len(kept) > 0):
        return None
    first = ignored[0]
    allowed, size = _tokens(max_positions), _tokens(dataset.size(first))
    if ignore_invalid_inputs:
        return (
            f"{OPTIONS}: every one of the {len(indices):,} examples of {split} is longer than the "
            f"model's positions allow ({allowed}; example #{first}: {size}): raise them (for training, "
            "fairseq-train caps them at --max-tokens too), or give shorter examples"
        )
    return (
        f"{OPTIONS}: example #{first} of {split} ({size}) is longer than the model's positions "
        f"allow ({allowed}): raise them, or skip such examples with --skip-invalid-size-inputs-valid-test"
    )


def batch_problem(indices, sizes, max_tokens):
    """Why no batch of ``max_tokens`` tokens can hold one of ``indices`` (``sizes``, an array:
    their tokens as fairseq counts them for batching), or None."""
    if max_tokens is None or max_tokens <= 0 or len(indices) == 0:
        return None  # (fairseq's "no limit")
    over = np.flatnonzero(sizes > max_tokens)
    if len(over) == 0:
        return None
    first = over[0]
    return (
        f"{BATCH_OPTIONS}: a batch of {int(max_tokens)} tokens cannot hold example #{indices[first]} "
        f"({int(sizes[first])} tokens): raise it to at least {int(sizes.max())}, the longest example's"
    )


def left_out(given, batches, multiple):
    """What fairseq's batching left out of ``given`` examples (``batches``: what it made of them),
    or None: it drops a last batch whose size is not a multiple of --required-batch-size-multiple
    (the longest examples, in every epoch) without a word."""
    batched = sum(len(b) for b in batches)
    if batched == given:
        return None
    return (
        f"--required-batch-size-multiple {multiple}: fairseq's batching leaves {given - batched:,} of "
        f"the {given:,} examples out of every epoch (it drops a last batch whose size is not a multiple "
        f"of {multiple}: the longest examples); --required-batch-size-multiple 1 keeps every example"
    )


def longest(dataset, indices=None):
    """The most tokens of an example of ``dataset`` (of ``indices`` only, where given), as fairseq
    counts them when batching (a sentence pair: its longer side)."""
    indices = np.arange(len(dataset)) if indices is None else np.asarray(indices)
    if len(indices) == 0:
        return 0
    try:
        return int(np.max(dataset.num_tokens_vec(indices)))
    except NotImplementedError:
        return max(int(dataset.num_tokens(i)) for i in indices)


def _tokens(size):
    """ "4 source / 5 target tokens" of a sentence pair's (or a model's) sizes, "70 tokens" of one;
    any other (a task's own kind of sizes) as it is."""
    try:
        if isinstance(size, (tuple, list)) and len(size) == 2:
            return f"{int(size[0])} source / {int(size[1])} target tokens"
        return f"{int(size)} tokens"
    except (TypeError, ValueError):
        return str(size)


def _install():
    """Patch FairseqTask.filter_indices_by_size and data_utils.batch_by_size; returns the function
    that undoes it (nothing to undo when it is patched already)."""
    from fairseq.data import data_utils
    from fairseq.tasks.fairseq_task import FairseqTask

    original = FairseqTask.filter_indices_by_size
    if getattr(original, "checks_example_sizes", False):
        return lambda: None
    original_batch_by_size = data_utils.batch_by_size

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        split = next(
            (name for name, d in getattr(self, "datasets", {}).items() if d is dataset), "the dataset"
        )
        why = problem(dataset, split, indices, max_positions, ignore_invalid_inputs)
        if why:
            raise OptionError(why)
        return original(self, indices, dataset, max_positions, ignore_invalid_inputs)

    def batch_by_size(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None, max_sentences=None,
                      required_batch_size_multiple=1, fixed_shapes=None):  # fmt: skip
        if fixed_shapes is None:  # (fixed shapes make no assertion to spare)
            sizes = num_tokens_vec if num_tokens_vec is not None else [num_tokens_fn(i) for i in indices]
            why = batch_problem(indices, np.asarray(sizes), max_tokens)
            if why:
                raise OptionError(why)
        batches = original_batch_by_size(
            indices, num_tokens_fn, num_tokens_vec, max_tokens, max_sentences,
            required_batch_size_multiple, fixed_shapes,
        )  # fmt: skip
        dropped = left_out(len(indices), batches, required_batch_size_multiple)
        if dropped and len(batches) == 0:  # (fairseq: "The dataset is empty" and a traceback)
            raise OptionError(dropped)
        if dropped:
            logger.warning(dropped)
        return batches

    filter_indices_by_size.checks_example_sizes = True
    FairseqTask.filter_indices_by_size = filter_indices_by_size
    data_utils.batch_by_size = batch_by_size

    def restore():
        FairseqTask.filter_indices_by_size = original
        data_utils.batch_by_size = original_batch_by_size

    return restore
