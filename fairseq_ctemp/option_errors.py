"""A bad option of the plugin ends fairseq's CLIs with one line, not a traceback.

The plugin checks its options when fairseq builds a model or criterion and raises an OptionError
whose message starts with the option ("--softmax-temperature must be ..."). Uncaught, fairseq-train
would print a traceback ending in that message; this hook prints "<program>: error: <message>"
instead (exit status 1). Every other exception keeps its traceback. (fairseq-hydra-train catches
the exception itself and prints an OptionError's message alone: see errors.py.)

fairseq-train makes its --save-dir before it builds the model and criterion, so a bad option would
leave an empty directory behind: the directories it made are removed again if still empty."""

import os
import sys

from . import patches
from .errors import OptionError

MADE_DIRECTORIES = []  # by fairseq's verify_checkpoint_directory for the latest run, deepest first


def is_option_error(error):
    """One of the plugin's own errors about an option or a checkpoint file (errors.OptionError)."""
    return isinstance(error, OptionError)


def missing_directories(path):
    """``path`` and those of its parents that do not exist yet, deepest first."""
    missing, path = [], os.path.abspath(path)
    while not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def remember_made_directories():
    from fairseq import checkpoint_utils

    if patches.installed(checkpoint_utils, "verify_checkpoint_directory"):
        return
    verify = checkpoint_utils.verify_checkpoint_directory

    def verify_checkpoint_directory(save_dir):
        missing = missing_directories(save_dir)
        verify(save_dir)
        MADE_DIRECTORIES[:] = missing  # (one call per fairseq-train run, before its model is built)

    why = "the plugin's option errors: the save directory fairseq-train made before refusing them is removed"
    patches.replace(checkpoint_utils, "verify_checkpoint_directory", verify_checkpoint_directory, why)


def remove_empty(directories):
    """Those of the directories (deepest first) still empty: nothing was written into them (nor by
    anyone else)."""
    for path in directories:
        try:
            os.rmdir(path)
        except OSError:
            pass


def remove_made_directories():
    remove_empty(MADE_DIRECTORIES)


def install():
    remember_made_directories()
    if patches.installed(sys, "excepthook"):
        return
    previous = sys.excepthook

    def excepthook(kind, error, tb):
        if is_option_error(error):
            remove_made_directories()
            sys.stderr.write(f"{os.path.basename(sys.argv[0])}: error: {error}\n")
        else:
            previous(kind, error, tb)

    why = "the plugin's own option errors (OptionError) end fairseq's CLIs with one line, not a traceback"
    patches.replace(sys, "excepthook", excepthook, why)
