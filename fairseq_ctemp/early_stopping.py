"""fairseq's early stopping, carried across a resume.

fairseq counts ``--patience`` in attributes of ``fairseq_cli.train.should_stop_early`` (the best
validation value and the validations since it), in memory only. A run resumed from
checkpoint_last.pt therefore counts anew from its first validation after the resume, even when that
one is worse than the best before the interruption: it trains longer than the same run
uninterrupted, and ends at another update. Inside ``carried_in_checkpoints()`` the count is written
into every checkpoint's extra state and read back when fairseq loads one, so that an interrupted and
resumed run stops exactly where it would have stopped without the interruption.

    with early_stopping.carried_in_checkpoints():
        fairseq_cli.train.cli_main()          # what ctemp-train runs

fairseq calls ``should_stop_early`` before it saves the checkpoint of a validation, so each
checkpoint holds the count after its own validation. As fairseq does for the best checkpoint value,
``--reset-optimizer`` or ``--reset-meters`` start the count anew. The worker processes that fairseq's
multi-GPU training spawns start afresh, without the patch; they inherit the environment variable
``ENV`` set inside ``carried_in_checkpoints()``, and the plugin, which they import (``--user-dir``),
then carries the count in them too (``install_if_requested``).
"""

import contextlib
import logging
import os

from . import environment, patches

EXTRA_STATE_KEY = "ctemp_early_stopping"

logger = logging.getLogger(__name__)


def saved_state(extra_state):
    """{"best": value, "num_runs": n} of a checkpoint's extra state, or None."""
    return (extra_state or {}).get(EXTRA_STATE_KEY)


# Set while the count is carried: the processes fairseq spawns for multi-GPU training inherit it and,
# when they import the plugin (--user-dir), carry the count too (install_if_requested).
ENV = "CTEMP_EARLY_STOPPING_IN_CHECKPOINTS"


@contextlib.contextmanager
def carried_in_checkpoints():
    """Save and restore should_stop_early's count with fairseq's checkpoints (see the module doc),
    in this process and in those that fairseq spawns from it."""
    with environment.installed_here_and_in_spawned(_install, ENV):
        yield


def install_if_requested():
    """In a process started under carried_in_checkpoints() (a spawned multi-GPU worker, which
    imports the plugin afresh): carry the count there too, for the process's lifetime."""
    if os.environ.get(ENV) == "1":
        _install()


def _install():
    """Patch fairseq's Trainer to save and restore the count; returns the function that undoes it
    (nothing to undo when it is patched already)."""
    from fairseq.trainer import Trainer
    from fairseq_cli import train

    if getattr(Trainer.save_checkpoint, "carries_early_stopping", False):
        return lambda: None
    counter = train.should_stop_early
    save, load, train_epoch = Trainer.save_checkpoint, Trainer.load_checkpoint, train.train
    spent = _Spent()
    Trainer.save_checkpoint = _saving_the_count(save, counter)
    Trainer.load_checkpoint = _restoring_the_count(load, counter, spent)
    train.train = _nothing_after_the_stop(train_epoch, counter, spent)

    def restore():
        Trainer.save_checkpoint, Trainer.load_checkpoint = save, load
        train.train = train_epoch

    return restore


class _Spent:
    """Set by each load: whether the checkpoint was saved at the early stop itself."""

    at_load = False


def _saving_the_count(save, counter):
    """Trainer.save_checkpoint with the count in the checkpoint's extra state."""

    def save_checkpoint(self, filename, extra_state):
        if getattr(counter, "best", None) is not None:
            extra_state = {
                **extra_state,
                EXTRA_STATE_KEY: {"best": counter.best, "num_runs": counter.num_runs},
            }
        return save(self, filename, extra_state)

    save_checkpoint.carries_early_stopping = True
    return save_checkpoint


def _restoring_the_count(load, counter, spent):
    """Trainer.load_checkpoint that restores the count a checkpoint holds."""

    def restore(self, filename, extra_state, reset_optimizer, reset_lr_scheduler, reset_meters):
        spent.at_load = False
        if extra_state is None or reset_optimizer or reset_meters:
            return
        state = saved_state(extra_state)
        _restore_count(counter, state, filename)
        # a checkpoint saved at the early stop itself: the run has ended, nothing may follow
        patience = self.cfg.checkpoint.patience
        spent.at_load = state is not None and patience > 0 and state["num_runs"] >= patience

    return patches.after_load_checkpoint(load, restore)


def _nothing_after_the_stop(train_epoch, counter, spent):
    """fairseq_cli.train.train that trains no epoch after a checkpoint saved at the early stop:
    fairseq would train one more before it asks should_stop_early."""

    def train_unless_ended(cfg, trainer, task, epoch_itr):
        if spent.at_load:
            spent.at_load = False
            logger.info(
                f"early stopping had already ended this run ({counter.num_runs} validation(s) "
                f"without improvement, --patience {cfg.checkpoint.patience}): nothing to train"
            )
            return [counter.best], True
        return train_epoch(cfg, trainer, task, epoch_itr)

    return train_unless_ended


def _restore_count(counter, state, filename):
    """should_stop_early's count from a checkpoint's saved state; without one, the count the caller
    restored before is kept, else it starts anew (said in the log either way)."""
    if state is None and getattr(counter, "best", None) is not None:  # set by the caller
        logger.info(
            f"{filename} holds no early-stopping count: keeping the one restored before "
            f"(best {counter.best:.6g}, {counter.num_runs} validation(s) without improvement)"
        )
    elif state is None:
        logger.warning(
            f"{filename} holds no early-stopping count (not written by ctemp-train): "
            "--patience counts anew from the next validation"
        )
    else:
        counter.best, counter.num_runs = state["best"], state["num_runs"]
        logger.info(
            f"early stopping resumed: best {state['best']:.6g}, "
            f"{state['num_runs']} validation(s) without improvement since"
        )
