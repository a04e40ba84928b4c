"""The plugin's one error for a bad option or input file, printed by fairseq's CLIs as one line.

It is a ValueError (what a Python caller expects of a bad argument) and a hydra
CompactHydraException, so that fairseq-hydra-train, which catches every exception of its job
before sys.excepthook could see it, prints its message alone instead of a traceback."""

from hydra.errors import CompactHydraException


class OptionError(ValueError, CompactHydraException):
    """A bad option value or combination; the message starts with the option ("--sem-weight ...")."""
