"""matplotlib, which the tools' figures need (the plugin's [plots] extra): a tool that draws asks
for it with its checks, before any work, so that without it the tool ends in one line instead of
a traceback after its work; then pyplot on the Agg backend (files, no display)."""

import importlib


def missing(what):
    """Why a tool cannot draw ``what`` ("the plots"), in a line; None when matplotlib imports."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as e:
        return f"matplotlib, which draws {what}, cannot be imported ({e}): pip install matplotlib"
    return None


def pyplot():
    """matplotlib.pyplot, drawing into files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
