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
``--reset-optimizer`` or ``--reset-meters`` start the count anew.
"""

import contextlib
import logging

EXTRA_STATE_KEY = "ctemp_early_stopping"

logger = logging.getLogger(__name__)


def saved_state(extra_state):
    """{"best": value, "num_runs": n} of a checkpoint's extra state, or None."""
    return (extra_state or {}).get(EXTRA_STATE_KEY)


@contextlib.contextmanager
def carried_in_checkpoints():
    """Save and restore should_stop_early's count with fairseq's checkpoints (see the module doc)."""
    from fairseq.trainer import Trainer
    from fairseq_cli import train

    counter = train.should_stop_early
    save, load = Trainer.save_checkpoint, Trainer.load_checkpoint

    def save_checkpoint(self, filename, extra_state):
        if getattr(counter, "best", None) is not None:
            extra_state = {
                **extra_state,
                EXTRA_STATE_KEY: {"best": counter.best, "num_runs": counter.num_runs},
            }
        return save(self, filename, extra_state)

    def load_checkpoint(
        self,
        filename,
        reset_optimizer=False,
        reset_lr_scheduler=False,
        optimizer_overrides=None,
        reset_meters=False,
    ):
        extra_state = load(
            self, filename, reset_optimizer, reset_lr_scheduler, optimizer_overrides, reset_meters
        )
        if extra_state is None or reset_optimizer or reset_meters:
            return extra_state
        state = saved_state(extra_state)
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
        return extra_state

    Trainer.save_checkpoint, Trainer.load_checkpoint = save_checkpoint, load_checkpoint
    try:
        yield
    finally:
        Trainer.save_checkpoint, Trainer.load_checkpoint = save, load
