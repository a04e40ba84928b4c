#!/usr/bin/env python
"""ctemp-greedy-vs-beam from a checkout (the plugin need not be installed): see
fairseq_ctemp/cli/greedy_vs_beam.py, or run with --help."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fairseq_ctemp.cli.greedy_vs_beam import main  # noqa: E402

if __name__ == "__main__":
    main()
