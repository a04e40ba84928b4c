"""Progress bars of the plugin's own long loops (fairseq shows its own): tqdm on stderr, shown only
when stderr is a terminal (a log file gets none), and never with enabled=False (--no-progress-bar)."""

import sys

from tqdm import tqdm


def progress_bar(iterable, description, enabled=True, total=None):
    return tqdm(
        iterable,
        desc=description,
        total=total,
        file=sys.stderr,
        disable=None if enabled else True,  # None: tqdm turns itself off when not on a terminal
        leave=False,
        dynamic_ncols=True,
    )
