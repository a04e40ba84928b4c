"""Fixes of fairseq_ctemp/compat.py: each warning is gone from the fairseq call that caused it, and
the call does what it did before (compared with the call as fairseq makes it); a process whose
batch-preparing thread is busy at exit ends normally."""

import argparse
import os
import subprocess
import sys
import warnings

import pytest
import torch
from conftest import PLUGIN_DIR, REPO, TINY_LM, json_log_records, run_fairseq

import fairseq_ctemp  # noqa: F401  (applies the fixes)
from fairseq_ctemp import compat, exact_resume


def recorded(call):
    """(result, [warning messages, first line]) of call()."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message).strip().splitlines()[0] for w in caught]


# ------------------------------------------------------------------------- pin_memory
class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([i, i * i])


def epoch_batches():
    from fairseq.data import iterators

    itr = iterators.EpochBatchIterator(
        Numbers(), collate_fn=torch.stack, batch_sampler=[[0, 1, 2], [3, 4], [5, 6, 7, 8, 9]], seed=1
    )
    return [b.tolist() for b in itr.next_epoch_itr(shuffle=True)]


# A process that reads one batch of a fairseq BufferedIterator and exits while the iterator's thread is
# inside a torch op making the next one (as fairseq-train does when it stops in mid-epoch). Unfixed,
# Python ends that thread inside the op and the process aborts with status 134.
BUSY_AT_EXIT = """
import torch
import fairseq_ctemp
from fairseq.data.iterators import BufferedIterator

class Batches:
    def __len__(self):
        return 100

    def __iter__(self):
        a = torch.randn(300, 300)
        for i in range(100):
            for _ in range(30):
                a = torch.tanh(a @ a)
            yield i

print("first batch", next(BufferedIterator(10, Batches())))
"""


def test_a_process_exits_normally_while_fairseq_prepares_batches(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", BUSY_AT_EXIT], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "first batch 0" in proc.stdout and "terminate called" not in proc.stderr


PIN_WARNING = "'pin_memory' argument is set as true but no accelerator is found"


def test_fairseq_data_loaders_pin_memory_only_with_an_accelerator(monkeypatch):
    from fairseq.data import iterators

    batches, messages = recorded(epoch_batches)
    assert not [m for m in messages if PIN_WARNING in m]
    monkeypatch.setattr(iterators, "torch", torch)  # fairseq's own call
    before, messages = recorded(epoch_batches)
    assert batches == before and len(batches) == 3
    if not compat._accelerator_available():
        assert [m for m in messages if PIN_WARNING in m]  # what the fix removes
    # pinned exactly where torch can pin; everything else of torch as it is
    for available in (True, False):
        monkeypatch.setattr(compat, "_accelerator_available", lambda: available)  # noqa: B023
        assert compat.data_loader(Numbers(), pin_memory=True).pin_memory is available
        assert compat.data_loader(Numbers()).pin_memory is False
    monkeypatch.undo()
    assert (
        iterators.torch.cuda is torch.cuda and iterators.torch.utils.data.Dataset is torch.utils.data.Dataset
    )


# ------------------------------------------------------------------ attention masks
MASK_WARNING = "Support for mismatched key_padding_mask and attn_mask is deprecated"


@pytest.mark.parametrize("need_weights", [False, True])
def test_fairseq_attention_gets_masks_of_one_type(need_weights, monkeypatch):
    from fairseq import utils
    from fairseq.modules import multihead_attention

    torch.manual_seed(0)
    attention = multihead_attention.MultiheadAttention(16, 4, dropout=0.0, self_attention=True).train()
    x = torch.randn(6, 3, 16)
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[1, 4:], padding[2, 1] = True, True
    future = torch.triu(utils.fill_with_neg_inf(torch.zeros(6, 6)), 1)  # the decoder's mask

    def forward():
        x.grad = None
        attention.zero_grad()
        out, weights = attention(
            x, x, x, key_padding_mask=padding, attn_mask=future, need_weights=need_weights
        )
        out.pow(2).sum().backward()
        return out.detach(), weights, [p.grad.clone() for p in attention.parameters()]

    (out, weights, grads), messages = recorded(forward)
    assert not [m for m in messages if MASK_WARNING in m]
    monkeypatch.setattr(multihead_attention, "F", torch.nn.functional)  # fairseq's own call
    (out0, weights0, grads0), messages = recorded(forward)
    assert [m for m in messages if MASK_WARNING in m]  # what the fix removes
    assert torch.equal(out, out0)
    assert (weights is None) == (weights0 is None) and (weights is None or torch.equal(weights, weights0))
    assert all(torch.equal(a, b) for a, b in zip(grads, grads0))
    assert out.isfinite().all()  # padded keys masked, not every key of a row


def test_only_a_bool_padding_mask_next_to_a_float_mask_is_converted(monkeypatch):
    seen = []
    fake = lambda *a, **k: seen.append(compat._MHA_SIGNATURE.bind(*a, **k).arguments)  # noqa: E731
    monkeypatch.setattr(torch.nn.functional, "multi_head_attention_forward", fake)
    bool_mask, float_mask = torch.tensor([[False, True]]), torch.tensor([[0.0, float("-inf")]])
    mha = compat.multi_head_attention_forward
    for padding, attn_mask in (
        (bool_mask, float_mask),
        (bool_mask, None),
        (float_mask, float_mask),
        (None, float_mask),
    ):
        seen.clear()
        args = [None] * 14  # query ... training, as fairseq passes them
        mha(*args, key_padding_mask=padding, need_weights=False, attn_mask=attn_mask)
        given = seen[0].get("key_padding_mask", None)
        if padding is bool_mask and attn_mask is not None:
            assert given.dtype == float_mask.dtype and torch.equal(given, float_mask)
        else:
            assert given is padding


# ------------------------------------------------------------------- torch.cuda.amp
def test_fairseq_amp_uses_torch_amp(monkeypatch):
    from fairseq.optim import amp_optimizer
    from fairseq.tasks import fairseq_task

    def state(context):
        return context.device, context.fast_dtype, context._enabled, context._cache_enabled

    for kwargs in ({"enabled": False}, {"enabled": True, "dtype": torch.bfloat16, "cache_enabled": False}):
        ours, messages = recorded(lambda: fairseq_task.torch.cuda.amp.autocast(**kwargs))  # noqa: B023
        theirs, old = recorded(lambda: torch.cuda.amp.autocast(**kwargs))  # noqa: B023
        assert state(ours) == state(theirs)
        assert not [m for m in messages if "deprecated" in m] and [m for m in old if "deprecated" in m]
    ours, messages = recorded(
        lambda: amp_optimizer.torch.cuda.amp.GradScaler(init_scale=4.0, growth_interval=7)
    )
    theirs, old = recorded(lambda: torch.cuda.amp.GradScaler(init_scale=4.0, growth_interval=7))
    assert ours.state_dict() == theirs.state_dict() and ours.is_enabled() == theirs.is_enabled()
    settings = ("_device", "_init_scale", "_growth_factor", "_backoff_factor", "_growth_interval")
    settings = settings if theirs.is_enabled() else settings[:1]  # without CUDA it keeps no settings
    assert [getattr(ours, k) for k in settings] == [getattr(theirs, k) for k in settings]
    assert not [m for m in messages if "deprecated" in m] and [m for m in old if "deprecated" in m]
    assert (
        fairseq_task.torch.no_grad is torch.no_grad
        and fairseq_task.torch.cuda.is_available is torch.cuda.is_available
    )


# ---------------------------------------------------------------------------- hydra
# The two that come from fairseq's own files and hydra_init (see compat.py; ignored in pytest.ini).
FAIRSEQ_FILES = [
    "In 'config': Usage of deprecated keyword in package header '# @package _group_'.",
    "'config' is validated against ConfigStore schema with the same name.",
]


def as_plain(cfg):
    from omegaconf import OmegaConf

    return {
        k: vars(v)
        if isinstance(v, argparse.Namespace)
        else OmegaConf.to_container(v)
        if v is not None
        else None
        for k, v in cfg.items()
    }


@pytest.mark.parametrize(
    "arch", [["--arch", "transformer"], ["--arch", "ct_transformer_lm_tiny", "--task", "language_modeling"]]
)
def test_fairseq_config_conversion_without_hydra_experimental(arch, monkeypatch):
    from fairseq import options
    from fairseq.dataclass import utils
    from hydra.experimental import compose, initialize

    parser = options.get_training_parser()
    argv = [
        "DATA",
        "--user-dir",
        PLUGIN_DIR,
        *arch,
        "--criterion",
        "tempered_ce",
        "--optimizer",
        "adam",
        "--lr",
        "1e-3",
    ]
    args = options.parse_args_and_arch(parser, input_args=argv)
    cfg, messages = recorded(lambda: utils.convert_namespace_to_omegaconf(args))
    assert messages == FAIRSEQ_FILES
    monkeypatch.setattr(utils, "initialize", initialize)  # fairseq's own calls
    monkeypatch.setattr(utils, "compose", compose)
    cfg0, messages = recorded(lambda: utils.convert_namespace_to_omegaconf(args))
    assert len(messages) == 6 and set(FAIRSEQ_FILES) <= set(messages)
    assert as_plain(cfg) == as_plain(cfg0)
    assert cfg.criterion.softmax_temperature == 1.0 and cfg.model._name == arch[1]


def test_hydra_is_initialized_for_fairseq_as_hydra_initialize_does(monkeypatch):
    """fairseq's call of initialize (from fairseq/dataclass/utils.py, config_path ../config) sets up
    hydra as hydra.initialize itself does: the same config search path and job name, found from
    the caller's frame instead of hydra's inspect.stack()."""
    import hydra
    from fairseq import options
    from fairseq.dataclass import utils
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import JobRuntime

    class SetUp(Exception):
        """hydra's set-up when fairseq composes (the conversion stops there)."""

    def compose(*args, **kwargs):
        path = GlobalHydra.instance().hydra.config_loader.get_search_path().get_path()
        raise SetUp([(e.provider, e.path) for e in path], JobRuntime().get("name"))

    def hydra_set_up(initialize):
        monkeypatch.setattr(utils, "initialize", initialize)
        monkeypatch.setattr(utils, "compose", compose)
        args = options.parse_args_and_arch(options.get_training_parser(), ["DATA", "--arch", "transformer"])
        with pytest.raises(SetUp) as set_up:
            utils.convert_namespace_to_omegaconf(args)
        return set_up.value.args

    def hydra_initialize(config_path, job_name=None, caller_stack_depth=1):  # hydra's own search
        return hydra.initialize(config_path, job_name, caller_stack_depth + 1, version_base="1.1")

    search_path, job_name = hydra_set_up(compat.hydra_initialize)
    assert (search_path, job_name) == hydra_set_up(hydra_initialize)
    config = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(utils.__file__)), "..", "config"))
    assert ("main", config) in search_path and job_name == "utils"


# ------------------------------------------------------------------------- lr step on resume
# No validation counts as better than 0.5 x the best one: after the first epoch every epoch is one
# without improvement, and reduce_lr_on_plateau halves the rate after more than --lr-patience of them.
PLATEAU = [
    *("--lr-scheduler", "reduce_lr_on_plateau", "--lr-shrink", "0.5", "--lr-threshold", "0.5"),
    *(
        "--task",
        "language_modeling",
        "--tokens-per-sample",
        "32",
        "--cpu",
        "--optimizer",
        "adam",
        "--lr",
        "1e-2",
    ),
    *("--max-tokens", "1024", "--seed", "1", "--num-workers", "0", "--log-format", "json", *TINY_LM),
]
# the learning rate of epochs 1-5 at --lr-patience 1 (torch's documented rule: halved after more
# than one epoch without improvement, the count then starting again)
SCHEDULE = [1e-2, 1e-2, 1e-2, 5e-3, 5e-3]


def plateau_training(data, save_dir, max_epoch, *extra, exact=True):
    """fairseq-train under PLATEAU: (epoch, learning rate, training loss) of each epoch it trained;
    exact: with the plugin's exact resume switched on (CTEMP_EXACT_RESUME=1)."""
    argv = [
        data,
        "--user-dir",
        PLUGIN_DIR,
        *PLATEAU,
        "--save-dir",
        save_dir,
        *extra,
        "--max-epoch",
        max_epoch,
    ]
    log = run_fairseq("fairseq-train", *argv, env={exact_resume.ENV: "1" if exact else "0"}).stdout
    return [(int(r["epoch"]), r["train_lr"], r["train_loss"]) for r in json_log_records(log, "train")]


def test_a_resumed_run_steps_its_learning_rate_where_the_uninterrupted_run_does(toy_data, tmp_path):
    """The epoch-end checkpoint is saved before fairseq's lr step of that epoch and without torch's
    count of epochs without improvement; resumed from it after epoch 3 (count 1), the run makes the
    step with the restored count (2: a halving) instead of keeping epoch 3's learning rate."""
    data, patience = toy_data["lm_bin"], ("--lr-patience", "1")
    full = plateau_training(data, tmp_path / "full", 5, *patience)
    assert [lr for _, lr, _ in full] == pytest.approx(SCHEDULE)
    resumed = plateau_training(data, tmp_path / "resumed", 3, *patience)
    resumed += plateau_training(data, tmp_path / "resumed", 5, *patience)
    assert resumed == full  # the same learning rates, hence the same training losses


def test_a_reset_scheduler_gets_no_step_made_up(toy_data, tmp_path):
    """--reset-lr-scheduler asks for a fresh scheduler: a step made up for it would make epoch 2's
    loss its best, and epoch 3, not better than half of it, would halve the rate."""
    plateau_training(toy_data["lm_bin"], tmp_path, 2, "--lr-patience", "0")
    resumed = plateau_training(toy_data["lm_bin"], tmp_path, 4, "--lr-patience", "0", "--reset-lr-scheduler")
    assert [lr for _, lr, _ in resumed] == [1e-2, 1e-2]


def test_without_the_switch_a_resumed_run_is_stock_fairseqs(toy_data, tmp_path):
    """Exact resume is opt-in: without CTEMP_EXACT_RESUME a run resumed after epoch 3 keeps epoch 3's
    learning rate as fairseq 0.12 does (its lost step), where the uninterrupted run halves it, and
    the checkpoint holds no plateau counts."""
    data, patience = toy_data["lm_bin"], ("--lr-patience", "1")
    resumed = plateau_training(data, tmp_path, 3, *patience, exact=False)
    state = torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
    assert not set(exact_resume.PLATEAU_COUNTS) & set(state["optimizer_history"][-1]["lr_scheduler_state"])
    resumed += plateau_training(data, tmp_path, 5, *patience, exact=False)
    # fairseq's own rule: epoch 3's step is lost, and the count of epochs without improvement, not
    # saved, starts again at 0, so epoch 4 (its first) does not halve either: 1e-2 throughout
    assert [lr for _, lr, _ in resumed] == pytest.approx([1e-2] * 5) != SCHEDULE
