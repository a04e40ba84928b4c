"""Checkpoint averaging as a library (the command: cli/average_checkpoints.py,
ctemp-average-checkpoints, whose help says what is averaged and refused): last_n_checkpoints picks
fairseq's last N epoch or update checkpoints, write_average averages them into a new file."""

import collections
import hashlib
import os
import re
import sys
import tempfile

import torch

from . import decoding, inputs
from .checkpoint_files import cannot_load


class AverageError(Exception):
    """Bad input: main() prints it as one error line naming the file or option."""


def last_n_checkpoints(directory, n, update_based=False, upper_bound=None):
    """Paths of the n newest checkpointN.pt (or checkpoint_E_U.pt with update_based) in directory."""
    pattern = re.compile(r"checkpoint_\d+_(\d+)\.pt" if update_based else r"checkpoint(\d+)\.pt")
    found = []
    for name in os.listdir(directory):
        match = pattern.fullmatch(name)
        if match and (upper_bound is None or int(match.group(1)) <= upper_bound):
            found.append((int(match.group(1)), os.path.join(directory, name)))
    if len(found) < n:
        raise AverageError(
            f"found {len(found)} {'checkpoint_E_U.pt' if update_based else 'checkpointN.pt'} "
            f"files in {directory}, need {n}"
        )
    return [path for _, path in sorted(found, reverse=True)[:n]]


def load(path):
    """A checkpoint's state; AverageError naming the file if it is not a readable fairseq checkpoint."""
    if os.path.isdir(path):
        raise AverageError(
            f"--inputs {path} is a directory: give checkpoint files, or one directory "
            "with --num-epoch-checkpoints / --num-update-checkpoints N"
        )
    inputs.check_checkpoint_option("--inputs", path, AverageError)
    try:
        state = torch.load(path, map_location="cpu")  # weights_only by default on torch >= 2.6
    except Exception as e:  # a damaged archive or unexpected objects: one line, not a traceback
        raise AverageError(cannot_load(f"--inputs {path}", e)) from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise AverageError(f"--inputs {path} is not a fairseq checkpoint (no 'model' parameters)")
    return state


def criterion_of(state):
    """(criterion name, softmax temperature) a checkpoint was trained with; T is 1.0 for criteria
    that do not temper (as decoding treats them)."""
    cfg = state.get("cfg")
    if cfg is not None:
        criterion = cfg.get("criterion") if isinstance(cfg, dict) else getattr(cfg, "criterion", None)
        get = (
            criterion.get
            if isinstance(criterion, dict)
            else lambda key, default=None: getattr(criterion, key, default)
        )
        name, temperature = get("_name"), get("softmax_temperature", 1.0)
    else:  # checkpoints of argparse-era fairseq
        args = state.get("args")
        name, temperature = getattr(args, "criterion", None), getattr(args, "softmax_temperature", 1.0)
    return name, float(temperature if name == "tempered_ce" and temperature is not None else 1.0)


def check_same_training(paths, trained, allow_mixed):
    """AverageError if the inputs, trained with trained[i] = (criterion, T), differ (unless
    allow_mixed); returns the "ctemp_average" record of the output."""
    record = {
        "inputs": [os.path.basename(p) for p in paths],
        "criteria": [c for c, _ in trained],
        "softmax_temperatures": [t for _, t in trained],
        "decodes_at_temperature": trained[0][1],
    }
    if len(set(trained)) > 1:
        shown = ", ".join(f"{os.path.basename(p)}: {c} T={t:g}" for p, (c, t) in zip(paths, trained))
        if not allow_mixed:
            raise AverageError(
                f"the inputs were trained with different criteria or temperatures ({shown}); "
                "their average would decode at the first one's T. Average checkpoints of "
                "one run, or pass --allow-mixed-temperatures"
            )
        print(
            f"warning: --allow-mixed-temperatures: averaging {shown}; the average decodes at "
            f"T={trained[0][1]:g} ({trained[0][0]}, from {paths[0]})",
            file=sys.stderr,
        )
    return record


def average_checkpoints(paths, allow_mixed=False):
    """A fairseq checkpoint state whose "model" is the element-wise mean of the inputs' "model"."""
    real = [os.path.realpath(p) for p in paths]
    repeated = sorted({p for p, r in zip(paths, real) if real.count(r) > 1})
    if repeated:
        raise AverageError(f"--inputs names {', '.join(repeated)} more than once: it would be weighted twice")
    sums, dtypes, first_state, shapes, trained, seen = collections.OrderedDict(), {}, None, None, [], {}
    for path in paths:
        state = load(path)
        check_not_calibrated(path, state)
        params = state["model"]
        digest = parameters_digest(params)
        if digest in seen:  # checkpoint_best.pt / _last.pt are byte copies of a numbered checkpoint
            raise AverageError(
                f"--inputs {seen[digest]} and {path} hold the same parameters (one checkpoint under two "
                "names, such as checkpoint_best.pt): it would be weighted twice; give it once"
            )
        seen[digest] = path
        if shapes is None:
            first_state, shapes = state, {k: tuple(v.shape) for k, v in params.items()}
        check_parameters(path, params, paths[0], shapes)
        trained.append(criterion_of(state))
        for key, tensor in params.items():
            dtypes.setdefault(key, tensor.dtype)
            if tensor.is_floating_point():
                tensor = tensor.double()  # accumulate exactly enough for any number of inputs
            sums[key] = tensor.clone() if key not in sums else sums[key] + tensor
    record = check_same_training(paths, trained, allow_mixed)
    averaged = collections.OrderedDict()
    for key, total in sums.items():
        mean = total / len(paths) if total.is_floating_point() else total // len(paths)
        averaged[key] = mean.to(dtypes[key])
    first_state["model"] = averaged
    first_state["ctemp_average"] = record
    return first_state


def parameters_digest(params):
    """A digest of a model's parameters (names, dtypes, shapes, bytes): equal for the same checkpoint
    saved under two names, whatever else (optimizer state, file layout) the two files hold."""
    h = hashlib.blake2b(digest_size=16)
    for key, tensor in params.items():
        h.update(f"{key}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def check_not_calibrated(path, state):
    """A t* fitted for one checkpoint's parameters does not hold for an average (whose cfg, t*
    included, would be copied from the first input)."""
    t_star = decoding.calibrated_temperature(state.get("cfg"))
    if t_star is not None:
        raise AverageError(
            f"--inputs {path} was calibrated by ctemp-calibrate (t*={t_star:g}) for its own parameters: "
            "average the uncalibrated checkpoints, then calibrate the average"
        )


def check_parameters(path, params, first, shapes):
    """Same parameter names and shapes as the first input, and only finite values."""
    if list(params) != list(shapes):
        differ = sorted(set(params) ^ set(shapes)) or ["(their order)"]
        raise AverageError(f"{path} has other parameters than {first}: {', '.join(differ[:5])}")
    for key, tensor in params.items():
        if tuple(tensor.shape) != shapes[key]:
            raise AverageError(
                f"parameter {key} has shape {tuple(tensor.shape)} in {path} but "
                f"{shapes[key]} in {first}: not checkpoints of one model"
            )
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise AverageError(
                f"parameter {key} of {path} has NaN or infinite values: refusing to "
                "average a diverged checkpoint"
            )


def write_average(paths, output, allow_mixed=False):
    """Average `paths` into `output` (which must not exist), written atomically under a fresh
    temporary name. Raises AverageError."""
    try:
        inputs.check_new_file(output)
    except inputs.InputError as e:
        raise AverageError(f"--output {output} {e}") from None
    directory = os.path.dirname(os.path.abspath(output))
    print(f"averaging {len(paths)} checkpoints: {' '.join(paths)}", file=sys.stderr)
    state = average_checkpoints(paths, allow_mixed)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(output)}.", suffix=".tmp", dir=directory)
    try:
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(state, f)  # (torch's zip writer reports a full disk as a RuntimeError)
        except (OSError, RuntimeError) as e:
            raise AverageError(
                f"--output {output} could not be written ({e}); nothing was left behind"
            ) from None
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 -> the mode an ordinary file gets
        if os.path.lexists(output):  # appeared while averaging
            raise AverageError(f"--output {output} appeared while averaging; not replacing it")
        os.replace(tmp, output)  # never leave a half-written average behind
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print(f"wrote {output}", file=sys.stderr)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
