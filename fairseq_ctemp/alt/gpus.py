"""The GPUs of a sweep's runs. ``--gpus`` ids number the GPUs the sweep itself sees, as torch does
(cuda:0 is the first): where a scheduler gave the sweep a CUDA_VISIBLE_DEVICES of its own, id i is
that list's i-th entry, so each run is given a GPU of the sweep's and never another one of the
machine. A run meant for GPUs that sees none is refused: fairseq would train it on the CPU."""

import os

from .common import AltError


def visible_count():
    import torch

    return torch.cuda.device_count()


def check_ids(ids):
    """Every --gpus id is one of the GPUs this process sees; AltError otherwise (before any work)."""
    count = visible_count()
    if count == 0:
        raise AltError(
            f"--gpus {','.join(ids)}: no CUDA GPU is visible to this process (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(not set)')}); give --cpu, or run where the GPUs are"
        )
    for gpu in ids:
        if not (gpu.isdigit() and int(gpu) < count):
            raise AltError(
                f"--gpus {','.join(ids)}: {gpu} is not one of this process's {count} GPU(s): "
                f"ids 0 to {count - 1}, as torch numbers them (cuda:0 the first)"
            )


def cuda_visible_devices(slot):
    """The CUDA_VISIBLE_DEVICES of a run given the --gpus ids ``slot`` ("0" or "0,1")."""
    own = os.environ.get("CUDA_VISIBLE_DEVICES")
    if own is None:
        return slot
    visible = own.split(",")
    return ",".join(visible[int(gpu)] for gpu in slot.split(","))


def require(gpus_per_run, what, otherwise):
    """A run or finalize for GPUs (no --cpu) sees at least gpus_per_run of them; else AltError
    (``otherwise``: what fairseq would do)."""
    count = visible_count()
    if count < gpus_per_run:
        raise AltError(
            f"{what} without --cpu needs {gpus_per_run} CUDA GPU(s) and sees {count} (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(not set)')}): {otherwise}"
        )
