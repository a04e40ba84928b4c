"""A bad option of the plugin ends fairseq's CLIs with one line, not a traceback.

The plugin checks its options when fairseq builds a model or criterion and raises a ValueError
whose message starts with the option ("--softmax-temperature must be ..."). Uncaught, fairseq-train
would print a traceback ending in that message; this hook prints "<program>: error: <message>"
instead (exit status 1). Every other exception keeps its traceback."""

import os
import sys
import traceback

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def is_option_error(error):
    """A ValueError about an option ("--..."), raised by the plugin's own code."""
    if not isinstance(error, ValueError) or not str(error).startswith("--"):
        return False
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and os.path.abspath(frames[-1].filename).startswith(PACKAGE_DIR + os.sep)


def install():
    previous = sys.excepthook
    if getattr(previous, "ctemp_option_errors", False):
        return

    def excepthook(kind, error, tb):
        if is_option_error(error):
            sys.stderr.write(f"{os.path.basename(sys.argv[0])}: error: {error}\n")
        else:
            previous(kind, error, tb)

    excepthook.ctemp_option_errors = True
    sys.excepthook = excepthook
