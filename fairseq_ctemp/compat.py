"""Compatibility fixes for running fairseq 0.12 under current torch, applied on plugin import.

torch >= 2.6 loads checkpoints with ``weights_only=True`` by default, and fairseq calls
``torch.load`` without that argument (checkpoint_utils, distributed broadcast of a resumed state).
Instead of switching the safety check off, we allowlist exactly the globals fairseq checkpoints
contain (found with ``torch.serialization.get_unsafe_globals_in_checkpoint`` and by trial; see
../shared/docs/INSTALL-NOTES.md section 4):
- ``argparse.Namespace``: cfg.model of checkpoints from legacy (argparse) architectures;
- numpy arrays, dtypes and scalars: ``--eval-bleu`` keeps BLEU counts as numpy arrays in the
  metrics state; numpy 1.x pickles name the same functions ``numpy.core.*``;
- fairseq's ``_TensorPlaceholder`` and omegaconf containers: rank 0 broadcasts a resumed state
  (cfg as a DictConfig) to the other ranks via ``torch.load`` in distributed training.
"""
import argparse
import collections
import typing

import numpy as np
import torch


def _numpy_safe_globals():
    """numpy objects that appear in fairseq checkpoints, under their numpy-2 and numpy-1 names."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    entries = [np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar]
    for name in ("_reconstruct", "scalar"):
        entries.append((getattr(multiarray, name), f"numpy.core.multiarray.{name}"))
    # Each dtype has its own class (numpy.dtypes.Int64DType, ...); get_unsafe_globals_in_checkpoint
    # does not list them, they only fail at load time.
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.float16, np.float32, np.float64):
        entries.append(type(np.dtype(t)))
    return entries


def _distributed_safe_globals():
    from omegaconf import DictConfig, ListConfig
    from omegaconf.base import ContainerMetadata, Metadata
    from omegaconf.nodes import AnyNode
    from fairseq.distributed.utils import _TensorPlaceholder

    return [_TensorPlaceholder, DictConfig, ListConfig, ContainerMetadata, Metadata, AnyNode,
            typing.Any, collections.defaultdict, dict, list, int]


def allow_fairseq_checkpoint_globals():
    if not hasattr(torch.serialization, "add_safe_globals"):  # torch < 2.4: weights_only is off
        return
    torch.serialization.add_safe_globals(
        [argparse.Namespace] + _numpy_safe_globals() + _distributed_safe_globals()
    )


def apply():
    allow_fairseq_checkpoint_globals()
