"""The one way the plugin changes code it does not own.

Importing the plugin (what ``--user-dir fairseq_ctemp`` does) changes some of fairseq, some of the
views fairseq modules have of torch, numpy and Python's exception hook: each change goes through
``replace`` (an attribute replaced) or ``record`` (any other change of shared state), which make it
once per process (a second import finds it made) and list it in ``INSTALLED`` with the reason.
docs/design.md prints that list; tests/test_stock_stays_stock.py checks that it is complete."""

import types

MARK = "__ctemp_patch__"  # on every replacement: the name of what it replaced
INSTALLED = {}  # "module.attribute" or "module.Class.attribute": why


def name_of(owner, name):
    base = (
        owner.__name__ if isinstance(owner, types.ModuleType) else f"{owner.__module__}.{owner.__qualname__}"
    )
    return f"{base}.{name}"


def installed(owner, name):
    """Whether owner.name is already one of the plugin's replacements."""
    return getattr(getattr(owner, name, None), MARK, None) == name_of(owner, name)


def replace(owner, name, new, why):
    """owner.name = new, recorded with why; nothing if the plugin replaced it already. Returns
    whether it replaced it now."""
    if installed(owner, name):
        return False
    setattr(new, MARK, name_of(owner, name))
    setattr(owner, name, new)
    INSTALLED[name_of(owner, name)] = why
    return True


def record(target, why):
    """A change of shared state that is not an attribute replaced (an allowlist extended, a logging
    filter added, a default changed), made by the caller, recorded here. Returns whether it is new:
    the caller makes the change only then."""
    if target in INSTALLED:
        return False
    INSTALLED[target] = why
    return True


def after_load_checkpoint(load, after):
    """A Trainer.load_checkpoint with fairseq 0.12's signature that calls fairseq's ``load``, then
    after(trainer, filename, extra_state, reset_optimizer, reset_lr_scheduler, reset_meters)."""

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
        after(self, filename, extra_state, reset_optimizer, reset_lr_scheduler, reset_meters)
        return extra_state

    return load_checkpoint
