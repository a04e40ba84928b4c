"""The output files of one run, all or none: a file the run created is removed again when the run
fails or is interrupted before all are written, so that the rerun (which refuses to overwrite a
file) is not refused for it. A file that existed before (overwritten under --force) is left."""

import contextlib
import os


@contextlib.contextmanager
def all_or_none(paths=()):
    """Yields the list of files this run made: append each path once the run has created it (a
    file opened "x", before writing to it). `paths`: files the block writes without "x" (under
    --force): those absent now count as made."""
    made = [p for p in paths if not os.path.exists(p)]
    try:
        yield made
    except BaseException:
        for path in made:
            if os.path.exists(path):
                os.remove(path)
        raise


def not_written(path, error, made):
    """The message for an output that could not be written, naming those removed again."""
    gone = f"; {', '.join(made)} removed again" if made else ""
    return f"{path} could not be written ({error}){gone}"
