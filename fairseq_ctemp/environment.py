"""Switches the plugin passes through the environment, so that the processes fairseq spawns (multi-GPU
training) see them too when they import the plugin."""

import contextlib
import os

from .errors import OptionError


@contextlib.contextmanager
def set_to(name, value):
    """os.environ[name] = value inside the block, the previous value (or none) restored after it."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


@contextlib.contextmanager
def installed_here_and_in_spawned(install, name):
    """install() (a patch; it returns the function that undoes it) for the block, and os.environ[name]
    = "1", so that the processes started inside install it too when they import the plugin."""
    restore = install()
    try:
        with set_to(name, "1"):
            yield
    finally:
        restore()


def switch(name):
    """Whether the switch ``name`` is on: "1" on; unset, empty or "0" off; any other value refused
    (OptionError: one line), since a "true" or "yes" would otherwise leave it off without a word."""
    value = os.environ.get(name, "")
    if value not in ("", "0", "1"):
        raise OptionError(f"{name}={value!r}: give {name}=1 (on) or 0 (off)")
    return value == "1"
