"""Compatibility fixes for running fairseq 0.12 under current torch, applied on plugin import.

torch >= 2.6 loads checkpoints with ``weights_only=True`` by default, and fairseq calls
``torch.load`` without that argument (checkpoint_utils, distributed broadcast of a resumed state).
Instead of switching the safety check off, we allowlist exactly the globals fairseq checkpoints
contain (found with ``torch.serialization.get_unsafe_globals_in_checkpoint`` and by trial on
transformer, lstm, transformer_lm, --eval-bleu and distributed-resume checkpoints):
- ``argparse.Namespace``: cfg.model of checkpoints from legacy (argparse) architectures;
- numpy arrays, dtypes and scalars: ``--eval-bleu`` keeps BLEU counts as numpy arrays in the
  metrics state; numpy 1.x pickles name the same functions ``numpy.core.*``;
- fairseq's ``_TensorPlaceholder`` and omegaconf containers: rank 0 broadcasts a resumed state
  (cfg as a DictConfig) to the other ranks via ``torch.load`` in distributed training.

fairseq 0.12 seeds the order of equal-length examples (hence the batches) with ``seed + epoch`` of
the epoch at which the batch iterator is *created*: epoch 1 for a run from scratch, epoch k for a
run resumed at epoch k. A resumed run therefore sees different batches than an uninterrupted one.
We create every reusable training iterator as fairseq does at epoch 1 (then set its real epoch), so
resuming reproduces the uninterrupted run exactly. Runs from scratch are unchanged.

fairseq's ``--ddp-backend pytorch_ddp`` (c10d, the default) passes ``device_ids=[device_id]`` to
torch's DistributedDataParallel even for a CPU model, which torch refuses; on CPU we pass no device
ids, as torch expects, so CPU runs (gloo) can use c10d instead of being limited to legacy_ddp.

numpy 2 removed ``np.compat``; fairseq 0.12 still uses ``np.compat.long`` when it builds an LM
dataset for inference (fairseq-interactive / hub ``sample`` with --task language_modeling) and in
``LanguagePairDataset.num_tokens_vec``. We restore that one alias (``np.int64``, its numpy-1 value
on 64-bit Linux) when it is missing.

fairseq 0.12 makes ``--bf16`` imply ``--tpu`` (``options.parse_args_and_arch``), so ``fairseq-train
--bf16`` on a GPU (or with ``--cpu``) asks torch_xla for a TPU and fails. Without torch_xla there can
be no TPU: ``--bf16`` then means bfloat16 on the training device, as ``--fp16`` does. We undo the
implied ``--tpu`` where fairseq first reads it (``distributed_utils.call_main``, used by every
training CLI, and the ``Trainer``, for Python API users); with torch_xla installed nothing changes.

Importing fairseq runs ``logging.basicConfig(level=DEBUG)`` (fairseq/tasks/text_to_speech.py), so
matplotlib and PIL would print hundreds of DEBUG lines in any plotting script; we keep those two
loggers at WARNING.
"""

import argparse
import collections
import importlib.util
import logging
import types
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
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
    ):
        entries.append(type(np.dtype(t)))
    return entries


def _distributed_safe_globals():
    from fairseq.distributed.utils import _TensorPlaceholder
    from omegaconf import DictConfig, ListConfig
    from omegaconf.base import ContainerMetadata, Metadata
    from omegaconf.nodes import AnyNode

    return [
        _TensorPlaceholder,
        DictConfig,
        ListConfig,
        ContainerMetadata,
        Metadata,
        AnyNode,
        typing.Any,
        collections.defaultdict,
        dict,
        list,
        int,
    ]


def allow_fairseq_checkpoint_globals():
    if not hasattr(torch.serialization, "add_safe_globals"):  # torch < 2.4: weights_only is off
        return
    torch.serialization.add_safe_globals(
        [argparse.Namespace] + _numpy_safe_globals() + _distributed_safe_globals()
    )


def batches_independent_of_resume_epoch():
    from fairseq.tasks import FairseqTask

    original = FairseqTask.get_batch_iterator
    if getattr(original, "_ctemp_patched", False):
        return

    def get_batch_iterator(self, dataset, *args, epoch=1, **kwargs):
        rebuilt_each_epoch = getattr(self.cfg, "rebuild_batches", False) or kwargs.get(
            "disable_iterator_cache", False
        )
        reused = dataset in getattr(self, "dataset_to_epoch_iter", {})  # a live iterator
        if epoch <= 1 or args or rebuilt_each_epoch or reused:
            return original(self, dataset, *args, epoch=epoch, **kwargs)
        iterator = original(self, dataset, epoch=1, **kwargs)
        dataset.set_epoch(epoch)
        iterator.epoch = epoch
        return iterator

    get_batch_iterator._ctemp_patched = True
    FairseqTask.get_batch_iterator = get_batch_iterator


def numpy_compat_long():
    try:
        np.compat.long  # noqa: B018  (numpy 1.x: present)
    except AttributeError:
        np.compat = types.SimpleNamespace(long=np.int64)


def cpu_pytorch_ddp():
    from fairseq.models import distributed_fairseq_model as dfm

    if getattr(dfm.DistributedDataParallel, "_ctemp_patched", False):
        return

    class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
        _ctemp_patched = True

        def __init__(self, module, device_ids=None, output_device=None, **kwargs):
            if all(p.device.type == "cpu" for p in module.parameters()):
                device_ids = output_device = None
            super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)

    dfm.DistributedDataParallel = DistributedDataParallel


def bf16_is_not_tpu(cfg):
    """Clear the --tpu that fairseq's --bf16 implies when torch_xla (hence any TPU) is absent."""
    common = getattr(cfg, "common", cfg)
    if getattr(common, "bf16", False) and getattr(common, "tpu", False):
        if importlib.util.find_spec("torch_xla") is None:
            common.tpu = False
    return cfg


def bf16_without_tpu():
    from fairseq import trainer
    from fairseq.distributed import utils as distributed_utils

    if getattr(distributed_utils.call_main, "_ctemp_patched", False):
        return
    call_main, trainer_init = distributed_utils.call_main, trainer.Trainer.__init__

    def patched_call_main(cfg, main, **kwargs):
        return call_main(bf16_is_not_tpu(cfg), main, **kwargs)

    def patched_trainer_init(self, cfg, *args, **kwargs):
        trainer_init(self, bf16_is_not_tpu(cfg), *args, **kwargs)

    patched_call_main._ctemp_patched = True
    distributed_utils.call_main = patched_call_main
    trainer.Trainer.__init__ = patched_trainer_init


def quiet_plotting_debug_logs():
    for name in ("matplotlib", "PIL"):
        logging.getLogger(name).setLevel(logging.WARNING)


def apply():
    quiet_plotting_debug_logs()
    allow_fairseq_checkpoint_globals()
    cpu_pytorch_ddp()
    bf16_without_tpu()
    batches_independent_of_resume_epoch()
    numpy_compat_long()
