"""The fairseq side of the calibration: a checkpoint's state, its model and task with the data, a
subset's batches, and its teacher-forced scores D with their targets, one chunk at a time."""

import glob
import os

import numpy as np
import torch

from .. import decoding, example_sizes
from ..checkpoint_files import first_line
from . import CalibrationError

CHUNK_ELEMENTS = 1 << 22  # rows x vocabulary of one float64 chunk (32 MiB)


def load_state(checkpoint):
    """A checkpoint's state (fairseq's loader, with its upgrades); CalibrationError naming --path."""
    from fairseq import checkpoint_utils

    from .. import inputs
    from ..checkpoint_files import CheckpointError

    inputs.check_checkpoint_option("--path", checkpoint, CalibrationError)
    try:
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
    except CheckpointError as e:  # fairseq's loader, with the plugin: "checkpoint PATH what is wrong"
        raise CalibrationError(
            f"--path {checkpoint} {str(e).removeprefix(f'checkpoint {checkpoint} ')}"
        ) from None
    except Exception as e:  # a damaged archive or unexpected objects: one line, not a traceback
        raise CalibrationError(f"--path {checkpoint} cannot be loaded: {first_line(e)}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict) or not state.get("cfg"):
        raise CalibrationError(f"--path {checkpoint} is not a fairseq checkpoint (no model and cfg)")
    if task_of(state) is None:
        raise CalibrationError(
            f"--path {checkpoint} has no task in its cfg: not a checkpoint of fairseq-train"
        )
    return state


def task_of(state):
    return decoding._get(state["cfg"].get("task"), "_name")


def subsets_in(data):
    """Names of the binarized subsets in a data directory (valid, test, ...)."""
    names = {os.path.basename(p).split(".")[0] for p in glob.glob(os.path.join(glob.escape(data), "*.idx"))}
    return ", ".join(sorted(names)) or "none"


def check_not_empty(data, subset, option="--gen-subset"):
    """fairseq-preprocess writes an empty subset as empty .bin files, which fairseq cannot map."""
    prefix = os.path.join(glob.escape(data.split(":")[0]), glob.escape(subset))
    files = glob.glob(prefix + ".bin") + glob.glob(prefix + ".*.bin")
    if files and all(os.path.getsize(f) == 0 for f in files):
        raise CalibrationError(f"{option} {subset} of {data} is empty: nothing to calibrate on")


def load_model(checkpoint, data, task=None, overrides=None, state=None, cpu=False):
    """(model, fairseq task, checkpoint cfg) by fairseq's loader (the plugin's: it sets the
    model's own temperature), with ``overrides`` of the checkpoint's options."""
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import overwrite_args_by_name

    if not os.path.isdir(data.split(":")[0]):
        raise CalibrationError(f"DATA {data}: no such directory")
    state = state if state is not None else load_state(checkpoint)
    trained_for = task_of(state)
    if task is not None and task != trained_for:
        raise CalibrationError(
            f"--task {task}, but --path {checkpoint} is a checkpoint of task {trained_for}"
        )
    # fairseq's upgrade already converted an argparse-era Namespace into cfg; without it the loader
    # reads that cfg, which the overrides change, instead of converting the Namespace again
    state["args"] = None
    overwrite_args_by_name(state["cfg"], {**(overrides or {}), "data": data})
    try:
        models, cfg, fairseq_task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], state=state)
    except Exception as e:  # dictionaries of other data, a model the task cannot build, ...
        raise CalibrationError(
            f"--path {checkpoint} cannot be loaded with DATA {data} (task {trained_for}): {first_line(e)}"
        ) from None
    model = models[0].eval()
    if torch.cuda.is_available() and not cpu:
        model.cuda()
    return model, fairseq_task, cfg


def load_subset(fairseq_task, data, subset, option="--gen-subset"):
    """The subset's dataset; CalibrationError (naming ``option``) if it is missing or empty."""
    check_not_empty(data, subset, option)
    try:
        fairseq_task.load_dataset(subset, combine=False, epoch=1)
    except FileNotFoundError:
        raise CalibrationError(
            f"{option} {subset}: no such subset in {data} (found: {subsets_in(data)})"
        ) from None
    except Exception as e:
        raise CalibrationError(f"{option} {subset} of {data} cannot be loaded: {first_line(e)}") from None
    dataset = fairseq_task.dataset(subset)
    if len(dataset) == 0:
        raise CalibrationError(f"{option} {subset} of {data} is empty: nothing to calibrate on")
    return dataset


def batches(
    model, task, dataset, max_tokens=None, batch_size=None, skip_invalid_size=False, subset="the subset"
):
    """fairseq's epoch iterator over the subset (each pass takes its next epoch, in the same order)."""
    from fairseq import utils

    max_positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())
    if max_tokens is not None:  # (fairseq: "Sentences lengths should not exceed max_tokens")
        within = dataset.filter_indices_by_size(np.arange(len(dataset)), max_positions)[0]
        longest = example_sizes.longest(dataset, within)  # (those beyond the positions: below)
        if longest > max_tokens:
            raise CalibrationError(
                f"--max-tokens {max_tokens} is below the longest sentence of {subset} ({longest} tokens, the "
                f"longer of source and target): give at least {longest}"
            )
    try:
        return task.get_batch_iterator(
            dataset=dataset,
            max_tokens=max_tokens if max_tokens or batch_size else 4096,
            max_sentences=batch_size,
            max_positions=max_positions,
            ignore_invalid_inputs=skip_invalid_size,
            disable_iterator_cache=True,
        )
    except Exception as e:  # a sentence longer than the model takes
        raise CalibrationError(first_line(e)) from None


def teacher_forced(model, epoch_itr, pad, where, seen=None, progress=None):
    """(D float64 (n, V), targets (n,)) of every non-pad target token, one chunk at a time; D is
    checked finite (a CalibrationError naming ``where`` and the sentence id otherwise)."""
    from fairseq import utils

    itr = epoch_itr.next_epoch_itr(shuffle=False)
    for sample in progress(itr) if progress else itr:
        if next(model.parameters()).is_cuda:
            sample = utils.move_to_cuda(sample)
        with torch.no_grad():
            net_output = model(**sample["net_input"])
            with decoding.explicit_temperature(1.0):  # D: the raw scores the rule divides by t
                lprobs = model.get_normalized_probs(net_output, log_probs=True, sample=sample)
        target = sample["target"]
        keep = target.ne(pad)
        ids = sample["id"][:, None].expand_as(target)[keep]
        D, y = lprobs[keep], target[keep]
        finite = torch.isfinite(D).all(-1)
        if not finite.all():
            kind = "sentence" if "prev_output_tokens" in sample["net_input"] else "sample"
            raise CalibrationError(
                f"{where}: the model's output is not finite (NaN or inf) for {kind} id "
                f"{ids[~finite][0].item()}: a diverged checkpoint cannot be calibrated"
            )
        if seen is not None:
            seen.update(sample["id"].tolist())
        rows = max(1, CHUNK_ELEMENTS // D.shape[-1])
        for start in range(0, len(y), rows):
            yield D[start : start + rows].double(), y[start : start + rows]
