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

fairseq saves the checkpoint of an epoch's end before it steps the learning-rate scheduler with that
epoch's validation loss (``fairseq_cli.train.main``: ``train`` saves, then ``trainer.lr_step(epoch,
valid_loss)``), and a run resumed from that checkpoint never makes the step: ``load_checkpoint``
only calls ``lr_step(next_epoch)``, without a loss. Under ``reduce_lr_on_plateau`` a resumed run
whose last epoch did not improve keeps the learning rate the uninterrupted run halves (and one whose
last epoch did improve keeps the older best to compare with). When a checkpoint saved at an epoch's
end is loaded with its optimizer and scheduler (no ``--reset-*``), we make that step, with the
validation loss the checkpoint holds, before fairseq's own. ``reduce_lr_on_plateau`` also keeps
only its best loss in checkpoints, not torch's counts of epochs without improvement and of cooldown
epochs, so with ``--lr-patience`` above 0 a resumed run counted anew; its checkpoints now hold
both counts. Every epoch-level scheduler then continues as it would have uninterrupted.

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

fairseq's ``BufferedIterator`` prepares batches in a daemon thread. When training stops in the middle
of an epoch (``--max-update``, early stopping at an update interval), that thread is still collating
at interpreter exit; Python 3.11 ends such a thread with ``pthread_exit`` when it next takes the GIL,
and if that happens inside a torch op the unwinding reaches a ``noexcept`` frame: the process aborts
("terminate called without an active exception", exit status 134) after a successful run. At exit
we let each such thread finish the batch it is making and stop (the batches left are not needed).

Warnings that fairseq 0.12 causes under current torch and hydra are fixed where fairseq makes the
call, without changing what the call does:
- fairseq's batch iterators create their ``DataLoader`` with ``pin_memory=True``; without an
  accelerator torch does not pin and warns "'pin_memory' argument is set as true but no accelerator
  is found" for every epoch. fairseq's iterators get ``pin_memory`` only where an accelerator is
  available, which is what torch then does anyway.
- fairseq's ``MultiheadAttention`` hands torch's ``multi_head_attention_forward`` a bool
  ``key_padding_mask`` with a float ``attn_mask`` (the decoder's future mask), which torch reports as
  "Support for mismatched key_padding_mask and attn_mask is deprecated" before converting the bool
  mask to a float one (-inf where True, 0 elsewhere). fairseq's call gets that float mask, of the
  attn_mask's type: the same values, hence the same attention.
- ``convert_namespace_to_omegaconf`` (every fairseq CLI, loading of argparse-era checkpoints) uses
  ``hydra.experimental.initialize`` / ``compose`` with the deprecated ``strict`` flag and no
  ``version_base``: four hydra deprecation warnings. It gets ``hydra.initialize(version_base="1.1")``
  (what an unspecified version base means) and ``hydra.compose``, applying ``strict`` as hydra's
  own ``compose`` does (the struct flag).
- fairseq's ``train_step`` enters ``torch.cuda.amp.autocast(enabled=...)`` at every update and its
  ``--amp`` optimizer makes a ``torch.cuda.amp.GradScaler``, both deprecated (FutureWarning) for
  ``torch.amp.autocast("cuda", ...)`` and ``torch.amp.GradScaler("cuda", ...)``, which the old
  names only call. fairseq's two modules get the new names with the old defaults.

Two hydra warnings of the same call cannot be fixed outside fairseq: "Usage of deprecated keyword in
package header '# @package _group_'" names the header of fairseq's own ``fairseq/config/config.yaml``
(a file of the installed fairseq), and "'config' is validated against ConfigStore schema with the
same name" is how fairseq validates that file: ``hydra_init`` stores the ``FairseqConfig`` schema
under the name of the config file itself (fairseq-hydra-train does the same with the file it is
given), and hydra 1.1+ deprecates that matching. Fixing either means changing fairseq's files and
its ``hydra_init``; the test configuration (pytest.ini) ignores exactly these two messages, nothing
else. fairseq-hydra-train's ``@hydra.main`` without ``version_base`` warns before the plugin is
imported (the user dir is loaded by the command itself), so that warning stays.

Importing fairseq runs ``logging.basicConfig(level=DEBUG)`` (fairseq/tasks/text_to_speech.py), so
matplotlib and PIL would print hundreds of DEBUG lines in any plotting script; we keep those two
loggers at WARNING.
"""

import argparse
import atexit
import collections
import importlib.util
import inspect
import logging
import os
import queue
import sys
import threading
import types
import typing

import numpy as np
import torch

from . import patches


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
    patches.record(
        "torch.serialization.add_safe_globals",
        "fairseq's checkpoints load under torch >= 2.6's weights_only default: argparse.Namespace, "
        "the numpy and distributed types they hold are allowed",
    )
    torch.serialization.add_safe_globals(
        [argparse.Namespace] + _numpy_safe_globals() + _distributed_safe_globals()
    )


def exact_resume_when_asked():
    """The resume fixes of exact_resume: installed always, acting only under CTEMP_EXACT_RESUME=1."""
    from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule
    from fairseq.tasks import FairseqTask
    from fairseq.trainer import Trainer

    from . import exact_resume

    why = "exact resume (acts only under CTEMP_EXACT_RESUME=1, which ctemp-train sets): "
    for owner, name, wrap, what in (
        (
            FairseqTask,
            "get_batch_iterator",
            exact_resume.batch_order_independent_of_the_resume_epoch,
            "the batch order",
        ),
        (Trainer, "load_checkpoint", exact_resume.lr_step_of_the_saved_epoch, "the saved epoch's lr step"),
        (
            ReduceLROnPlateauLRSchedule,
            "state_dict",
            exact_resume.plateau_counts_saved,
            "plateau counts saved",
        ),
        (
            ReduceLROnPlateauLRSchedule,
            "load_state_dict",
            exact_resume.plateau_counts_restored,
            "plateau counts restored",
        ),
    ):
        if not patches.installed(owner, name):
            patches.replace(owner, name, wrap(getattr(owner, name)), why + what)


def numpy_compat_long():
    try:
        np.compat.long  # noqa: B018  (numpy 1.x: present)
    except AttributeError:
        why = "numpy 2 removed np.compat, whose long fairseq 0.12 uses (LM inference, num_tokens_vec)"
        patches.replace(np, "compat", types.SimpleNamespace(long=np.int64), why)


def cpu_pytorch_ddp():
    from fairseq.models import distributed_fairseq_model as dfm

    if patches.installed(dfm, "DistributedDataParallel"):
        return

    class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
        def __init__(self, module, device_ids=None, output_device=None, **kwargs):
            if all(p.device.type == "cpu" for p in module.parameters()):
                device_ids = output_device = None
            super().__init__(module, device_ids=device_ids, output_device=output_device, **kwargs)

    why = "torch's DDP refuses device_ids for CPU modules, which fairseq passes: multi-process CPU training"
    patches.replace(dfm, "DistributedDataParallel", DistributedDataParallel, why)


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

    if patches.installed(distributed_utils, "call_main"):
        return
    call_main, trainer_init = distributed_utils.call_main, trainer.Trainer.__init__

    def patched_call_main(cfg, main, **kwargs):
        return call_main(bf16_is_not_tpu(cfg), main, **kwargs)

    def patched_trainer_init(self, cfg, *args, **kwargs):
        trainer_init(self, bf16_is_not_tpu(cfg), *args, **kwargs)

    why = "fairseq's --bf16 implies --tpu and then fails without torch_xla: --tpu cleared where it is absent"
    patches.replace(distributed_utils, "call_main", patched_call_main, why)
    patches.replace(trainer.Trainer, "__init__", patched_trainer_init, why)


class _ModuleView(types.ModuleType):
    """A module as one fairseq module sees it through its global name (``torch``, ``F``), with some
    attributes replaced: the replacement reaches that fairseq module only, never torch itself."""

    def __init__(self, module, **replaced):
        super().__init__(module.__name__, module.__doc__)
        self.__dict__.update(replaced, _ctemp_module=module)

    def __getattr__(self, name):  # what is not replaced
        return getattr(self._ctemp_module, name)


def _accelerator_available():
    """torch's own test of whether a DataLoader can pin memory."""
    accelerator = getattr(torch, "accelerator", None)
    return accelerator.is_available() if accelerator is not None else torch.cuda.is_available()


def data_loader(*args, pin_memory=False, **kwargs):
    """torch's DataLoader, pinning memory only where torch can (it ignores pin_memory otherwise)."""
    return torch.utils.data.DataLoader(*args, pin_memory=pin_memory and _accelerator_available(), **kwargs)


def pin_memory_only_with_an_accelerator():
    from fairseq.data import iterators

    data = _ModuleView(torch.utils.data, DataLoader=data_loader)
    view = _ModuleView(torch, utils=_ModuleView(torch.utils, data=data))
    why = "fairseq asks every DataLoader to pin memory: torch warns every epoch where there is no accelerator"
    patches.replace(iterators, "torch", view, why)


_EXITING = threading.Event()


def _until_exit(source):
    """source's items until the interpreter exits (checked before the next item is made)."""
    for item in source:
        yield item
        if _EXITING.is_set():
            return


def _stop_batch_threads(consumer_type):
    """At exit: each live batch-preparing thread ends after its current batch. Its queue is drained
    meanwhile, so that a thread waiting for room in it can move on."""
    _EXITING.set()
    for thread in threading.enumerate():
        if isinstance(thread, consumer_type):
            while thread.is_alive():
                try:
                    while True:
                        thread._queue.get_nowait()
                except queue.Empty:
                    pass
                thread.join(0.05)


def batch_threads_stop_at_exit():
    from fairseq.data import iterators

    if patches.installed(iterators, "BackgroundConsumer"):
        return

    class StoppingConsumer(iterators.BackgroundConsumer):
        def __init__(self, queue, source, max_len, cuda_device):
            super().__init__(queue, _until_exit(source), max_len, cuda_device)

    why = "fairseq's batch-preparing thread, still collating at exit, aborts the process (exit 134) on Python 3.11"
    patches.replace(iterators, "BackgroundConsumer", StoppingConsumer, why)
    atexit.register(_stop_batch_threads, StoppingConsumer)


_MHA_SIGNATURE = inspect.signature(torch.nn.functional.multi_head_attention_forward)


def multi_head_attention_forward(*args, **kwargs):
    """torch's multi_head_attention_forward, with a bool key_padding_mask next to a float attn_mask
    turned into the float mask torch would make of it (-inf where True), so the types match."""
    bound = _MHA_SIGNATURE.bind(*args, **kwargs)
    padding, mask = bound.arguments.get("key_padding_mask"), bound.arguments.get("attn_mask")
    if padding is not None and mask is not None and padding.dtype == torch.bool and mask.is_floating_point():
        float_padding = torch.zeros_like(padding, dtype=mask.dtype).masked_fill_(padding, float("-inf"))
        bound.arguments["key_padding_mask"] = float_padding
    return torch.nn.functional.multi_head_attention_forward(*bound.args, **bound.kwargs)


def attention_masks_of_one_type():
    from fairseq.modules import multihead_attention

    view = _ModuleView(torch.nn.functional, multi_head_attention_forward=multi_head_attention_forward)
    why = "torch >= 2.0 refuses a bool key_padding_mask beside a float attn_mask, which fairseq passes"
    patches.replace(multihead_attention, "F", view, why)


def cuda_autocast(enabled=True, dtype=torch.float16, cache_enabled=True):
    """torch.cuda.amp.autocast as torch spells it now (what the old name calls)."""
    return torch.amp.autocast("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def cuda_grad_scaler(
    init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True
):
    """torch.cuda.amp.GradScaler as torch spells it now (what the old name calls)."""
    return torch.amp.GradScaler(
        "cuda",
        init_scale=init_scale,
        growth_factor=growth_factor,
        backoff_factor=backoff_factor,
        growth_interval=growth_interval,
        enabled=enabled,
    )


def amp_without_deprecated_cuda_names():
    from fairseq.optim import amp_optimizer
    from fairseq.tasks import fairseq_task

    if not hasattr(torch.amp, "GradScaler"):  # torch < 2.3: the torch.cuda.amp names are current
        return
    for module, name, replacement in (
        (fairseq_task, "autocast", cuda_autocast),
        (amp_optimizer, "GradScaler", cuda_grad_scaler),
    ):
        amp = _ModuleView(torch.cuda.amp, **{name: replacement})
        view = _ModuleView(torch, cuda=_ModuleView(torch.cuda, amp=amp))
        why = f"torch.cuda.amp.{name} is deprecated (FutureWarning): torch.amp's, which it only calls"
        patches.replace(module, "torch", view, why)


def hydra_initialize(config_path, job_name=None, caller_stack_depth=1):
    """hydra.experimental.initialize without its deprecation warnings: hydra.initialize at the
    version base that an unspecified one means (1.1), config_path relative to the caller's file.
    The search path and job name are hydra.initialize's for a caller in a file, found from the
    caller's frame: hydra finds them with inspect.stack(), which reads the source of every frame
    on the stack (a tenth of a second or more of every fairseq command on a small CPU)."""
    import hydra
    from hydra._internal.utils import detect_task_name

    if config_path is None or os.path.isabs(config_path) or config_path.startswith("pkg://"):
        return hydra.initialize(  # (not fairseq's call): hydra's own rules
            config_path=config_path,
            job_name=job_name,
            caller_stack_depth=caller_stack_depth + 1,
            version_base="1.1",
        )
    caller = sys._getframe(caller_stack_depth).f_code.co_filename
    return hydra.initialize_config_dir(
        config_dir=os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(caller)), config_path)),
        job_name=job_name if job_name is not None else detect_task_name(caller, None),
        version_base="1.1",
    )


def hydra_compose(config_name=None, overrides=(), return_hydra_config=False, strict=None):
    """hydra.experimental.compose without its deprecation warnings: hydra.compose, then what
    hydra's compose does with the deprecated strict flag (the struct flag of the result)."""
    import hydra
    from omegaconf import OmegaConf

    cfg = hydra.compose(
        config_name=config_name, overrides=list(overrides), return_hydra_config=return_hydra_config
    )
    if strict is not None:
        OmegaConf.set_struct(cfg, strict)
    return cfg


def hydra_without_experimental_api():
    import hydra
    from fairseq.dataclass import utils

    if "version_base" not in inspect.signature(hydra.initialize).parameters:
        return  # hydra < 1.2: hydra.experimental is not deprecated there
    why = "hydra.experimental's initialize and compose are deprecated (warnings): hydra's, the same"
    patches.replace(utils, "initialize", hydra_initialize, why)
    patches.replace(utils, "compose", hydra_compose, why)


def quiet_tensorboardx_notice():
    """Called before fairseq is first imported (the package's __init__): effective where the plugin
    comes first (its commands, python -m fairseq_ctemp.cli.*); fairseq's CLIs print it before."""
    why = (
        "fairseq's text-to-speech task logs 'Please install tensorboardX' at every fairseq import; "
        "--tensorboard-logdir needs only torch's tensorboard: the line is left out"
    )
    if patches.record("logging: fairseq.tasks.text_to_speech, its tensorboardX notice", why):
        logging.getLogger("fairseq.tasks.text_to_speech").addFilter(_not_the_tensorboardx_notice)


def _not_the_tensorboardx_notice(record):
    return not record.getMessage().startswith("Please install tensorboardX")


def quiet_plotting_debug_logs():
    why = "fairseq sets the root logger to DEBUG: matplotlib's and PIL's debug lines would flood its logs"
    patches.record("logging: matplotlib, PIL at WARNING", why)
    for name in ("matplotlib", "PIL"):
        logging.getLogger(name).setLevel(logging.WARNING)


def damaged_checkpoints_in_one_line():
    from fairseq import checkpoint_utils

    from . import checkpoint_files

    if patches.installed(checkpoint_utils, "load_checkpoint_to_cpu"):
        return
    patched = checkpoint_files.load_in_one_line(checkpoint_utils.load_checkpoint_to_cpu)
    why = "a damaged checkpoint: one line naming the file, never torch's advice to load it unsafely"
    patches.replace(checkpoint_utils, "load_checkpoint_to_cpu", patched, why)


def apply():
    quiet_plotting_debug_logs()
    allow_fairseq_checkpoint_globals()
    cpu_pytorch_ddp()
    bf16_without_tpu()
    exact_resume_when_asked()
    damaged_checkpoints_in_one_line()
    numpy_compat_long()
    pin_memory_only_with_an_accelerator()
    batch_threads_stop_at_exit()
    attention_masks_of_one_type()
    amp_without_deprecated_cuda_names()
    hydra_without_experimental_api()
