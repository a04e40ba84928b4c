"""fairseq-ctemp: fixed and learned temperature for fairseq (use with --user-dir fairseq_ctemp)."""

import os

USER_DIR = os.path.dirname(os.path.abspath(__file__))  # this package: what --user-dir names

from . import compat  # noqa: E402  (imports no fairseq)

compat.quiet_tensorboardx_notice()  # before fairseq's first import, which logs it
from . import decoding, early_stopping, exact_resume, example_sizes, ngram_blocking, option_errors  # noqa: E402

compat.apply()
decoding.apply()
option_errors.install()
exact_resume.enabled()  # a bad CTEMP_EXACT_RESUME value: refused in one line here, not at a resume
early_stopping.install_if_requested()  # in a worker that fairseq spawned from ctemp-train
example_sizes.install_if_requested()  # (the same)
ngram_blocking.install_if_requested()  # CTEMP_FIX_NO_REPEAT_NGRAM=1: fairseq's n-gram blocking fixed

from . import criterions, models  # noqa: E402,F401  (registers components with fairseq)

__version__ = "0.1.0"
