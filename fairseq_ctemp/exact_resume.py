"""Exact resume, opt-in: fixes of fairseq 0.12's resume that change what a resumed run does, so
they act only when asked for (``CTEMP_EXACT_RESUME=1``; ``ctemp-train`` and the ALT recipes set it).

- **Batch order.** fairseq seeds the batch order with the epoch at which the iterator is created, so
  a run resumed mid-training batches differently from the uninterrupted one; with the switch the
  iterator is created as at epoch 1 and then moved to the epoch, as an uninterrupted run's is.
- **The lost learning-rate step.** fairseq saves an epoch's checkpoint before it steps the scheduler
  with that epoch's validation loss, and a run resumed from it never makes that step (under
  ``reduce_lr_on_plateau`` it keeps a rate the uninterrupted run halves); with the switch, loading
  such a checkpoint (no ``--reset-*``) makes the step with the loss the checkpoint holds.
- **Plateau counts.** ``reduce_lr_on_plateau`` checkpoints leave out torch's counts of epochs without
  improvement and of cooldown epochs; with the switch they are saved and restored.

The patches are installed once and read the switch at every call: without it each calls fairseq's
own code and nothing else, so a run is stock fairseq's (``tests/test_stock_stays_stock.py``)."""

from . import environment, patches

ENV = "CTEMP_EXACT_RESUME"
PLATEAU_COUNTS = ("num_bad_epochs", "cooldown_counter")  # torch ReduceLROnPlateau's, saved too


def enabled():
    return environment.switch(ENV)


def turned_on():
    """Exact resume for the runs started inside (the variable reaches the workers fairseq spawns)."""
    return environment.set_to(ENV, "1")


def saved_at_end_of_epoch(extra_state):
    """The epoch whose end a checkpoint's extra state was saved at, or None (saved mid-epoch, or
    without its iterator's state)."""
    position = (extra_state or {}).get("train_iterator") or {}
    if position.get("iterations_in_epoch") == 0 and position.get("epoch", 0) > 1:
        return position["epoch"] - 1  # at an epoch's end the iterator saves the next epoch
    return None


def batch_order_independent_of_the_resume_epoch(original):
    def get_batch_iterator(self, dataset, *args, epoch=1, **kwargs):
        rebuilt_each_epoch = getattr(self.cfg, "rebuild_batches", False) or kwargs.get(
            "disable_iterator_cache", False
        )
        reused = dataset in getattr(self, "dataset_to_epoch_iter", {})  # a live iterator
        if not enabled() or epoch <= 1 or args or rebuilt_each_epoch or reused:
            return original(self, dataset, *args, epoch=epoch, **kwargs)
        iterator = original(self, dataset, epoch=1, **kwargs)
        dataset.set_epoch(epoch)
        iterator.epoch = epoch
        return iterator

    return get_batch_iterator


def lr_step_of_the_saved_epoch(load):
    def step(self, filename, extra_state, reset_optimizer, reset_lr_scheduler, reset_meters):
        epoch = saved_at_end_of_epoch(extra_state)
        fresh = reset_optimizer or reset_lr_scheduler or self.cfg.checkpoint.reset_dataloader
        if enabled() and epoch is not None and not fresh:
            self.lr_step(epoch, extra_state.get("val_loss"))

    return patches.after_load_checkpoint(load, step)


def plateau_counts_saved(state_dict):
    def state_dict_with_counts(self):
        state = state_dict(self)
        if enabled():
            state = {**state, **{key: getattr(self.lr_scheduler, key) for key in PLATEAU_COUNTS}}
        return state

    return state_dict_with_counts


def plateau_counts_restored(load_state_dict):
    def load_state_dict_with_counts(self, state):
        load_state_dict(self, state)
        for key in PLATEAU_COUNTS:
            if enabled() and key in state:  # absent from checkpoints written without it: counted anew
                setattr(self.lr_scheduler, key, state[key])

    return load_state_dict_with_counts
