"""The output files of one run, all or none: a file the run created is removed again when the run
fails or is interrupted before all are written, so that the rerun (which refuses to overwrite a
file) is not refused for it. A file that existed before (overwritten under --force) is left."""

import contextlib
import json
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


def write_json(path, obj):
    """obj as indented JSON in path, whole or not at all (write_text)."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_text(path, text):
    """text in path, whole or not at all: written beside it, then renamed over it (a file cut
    short by a full disk or a kill would be read, or refused, by the next run)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # a full disk, an interruption: no half-written copy left beside it
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
