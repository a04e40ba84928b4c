"""Switches the plugin passes through the environment, so that the processes fairseq spawns (multi-GPU
training) see them too when they import the plugin."""

import contextlib
import os


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
