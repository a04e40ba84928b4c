"""pyplot for the tools' figures, on the Agg backend (files, no display). matplotlib is optional
(the [plots] extra): a tool that draws asks for it with its checks (optional.missing)."""

from . import optional


def missing(what):
    """Why a tool cannot draw ``what`` ("the plots"), in a line; None when matplotlib imports."""
    return optional.missing("matplotlib", f"draws {what}")


def pyplot():
    """matplotlib.pyplot, drawing into files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
