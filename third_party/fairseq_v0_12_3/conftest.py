"""fairseq v0.12.3's own tests, run with the plugin imported as --user-dir imports it (the point:
stock fairseq models, criteria and CLIs behave as fairseq's tests expect with the plugin loaded).
FAIRSEQ_TESTS_STOCK=1 runs them without the plugin, for comparison (under torch >= 2.6 and numpy 2
some then fail in stock fairseq itself: README.md)."""

import os

if os.environ.get("FAIRSEQ_TESTS_STOCK") != "1":
    import fairseq_ctemp  # noqa: F401
