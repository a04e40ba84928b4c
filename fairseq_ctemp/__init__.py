"""fairseq-ctemp: fixed and learned temperature for fairseq (use with --user-dir fairseq_ctemp)."""

from . import compat, decoding, early_stopping, option_errors

compat.apply()
decoding.apply()
option_errors.install()
early_stopping.install_if_requested()  # in a worker that fairseq spawned from ctemp-train

from . import criterions, models  # noqa: E402,F401  (registers components with fairseq)

__version__ = "0.1.0"
