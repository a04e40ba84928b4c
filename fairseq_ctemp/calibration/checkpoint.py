"""A copy of a checkpoint that records t* in its cfg, so that every decoding path decodes it at t*
by default; written under a temporary name and linked into place, never replacing a file."""

import os

import torch
from omegaconf import OmegaConf

from .. import decoding, inputs
from . import CalibrationError


def check_output(path, option):
    """CalibrationError unless ``path`` can be created: it does not exist, its directory does."""
    try:
        inputs.check_new_file(path)
    except inputs.InputError as e:
        raise CalibrationError(f"{option} {path} {e}") from None


def check_writable(state, checkpoint):
    """t* goes into the cfg, which the loader ignores when an argparse-era Namespace is there."""
    if state.get("args") is not None or state.get("cfg") is None:
        raise CalibrationError(
            f"--write-checkpoint: --path {checkpoint} is an argparse-era checkpoint (no cfg) where "
            "t* cannot be recorded; load and save it with fairseq >= 0.10 first"
        )


def write_calibrated_checkpoint(checkpoint, output, temperature, signature):
    """A copy of ``checkpoint`` at ``output`` (which must not exist) whose cfg records t*, so every
    decoding path decodes it at t* by default; written under a temporary name, then linked into
    place (never replacing a file). The input is only read."""
    check_output(output, "--write-checkpoint")
    if os.path.realpath(output) == os.path.realpath(checkpoint):
        raise CalibrationError(f"--write-checkpoint {output} is --path itself")
    state = torch.load(checkpoint, map_location="cpu")  # as saved: no fairseq upgrade
    check_writable(state, checkpoint)
    cfg = state["cfg"]
    cfg = OmegaConf.to_container(cfg) if OmegaConf.is_config(cfg) else dict(cfg)
    cfg[decoding.CALIBRATION_GROUP] = {"temperature": float(temperature), "signature": signature}
    state["cfg"] = cfg
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(output)), f".{os.path.basename(output)}.{os.getpid()}.tmp"
    )
    f = open(tmp, "xb")
    try:
        with f:
            torch.save(state, f)
        link_into_place(tmp, output)
    finally:
        if os.path.exists(tmp):  # ours (opened "x"); renamed away on a file system without links
            os.remove(tmp)


def link_into_place(tmp, output):
    """Give the finished file ``tmp`` its name ``output`` without ever replacing a file."""
    try:
        os.link(tmp, output)  # fails if output appeared meanwhile
    except FileExistsError:
        raise CalibrationError(f"--write-checkpoint {output} appeared meanwhile; not replacing it") from None
    except OSError:  # a file system without hard links: check, then rename
        if os.path.lexists(output):
            raise CalibrationError(
                f"--write-checkpoint {output} appeared meanwhile; not replacing it"
            ) from None
        os.replace(tmp, output)
