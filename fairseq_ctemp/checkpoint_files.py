"""A cheap look at a checkpoint file before torch loads it, and one line instead of a traceback when
it cannot be loaded: fairseq's own loader, with the plugin imported, names the file and what is wrong
with it (empty, not a torch.save archive, objects that torch's safe loading refuses) and never
advises turning that safety off."""

import os
import pickle
import traceback
import zipfile

from .errors import OptionError


class CheckpointError(OptionError):
    """A checkpoint file that cannot be loaded; fairseq's CLIs print it as one line (option_errors)."""


def check_checkpoint(path, archive=True):
    """CheckpointError saying what is wrong with the file, before torch reads it. archive: it must
    be a torch.save zip archive (False: torch's legacy format passes too)."""
    if os.path.isdir(path):
        raise CheckpointError("is a directory, not a checkpoint file")
    if not os.access(path, os.R_OK):
        raise CheckpointError("cannot be read (permission denied)")
    if os.path.getsize(path) == 0:
        raise CheckpointError("is empty (0 bytes), not a checkpoint file")
    if archive and not zipfile.is_zipfile(path):  # what torch.save (>= 1.6) writes
        raise CheckpointError(
            "is not a PyTorch checkpoint (no torch.save zip archive: truncated, or another kind of file?)"
        )


def load_in_one_line(load_checkpoint_to_cpu):
    """fairseq's checkpoint_utils.load_checkpoint_to_cpu, its failures on a damaged file as one
    CheckpointError naming it. A file that loads is loaded exactly as fairseq loads it (also one in
    torch's legacy, non-zip format, as old released models are)."""

    def load(path, *args, **kwargs):
        if os.path.exists(path):  # (a missing file: fairseq's own message)
            try:
                check_checkpoint(path, archive=False)
            except CheckpointError as e:
                raise CheckpointError(f"checkpoint {path} {e}") from None
        try:
            return load_checkpoint_to_cpu(path, *args, **kwargs)
        except Exception as e:
            if isinstance(e, KeyError) and not unpickling(e):  # fairseq's upgrade misses a saved key
                raise CheckpointError(
                    f"checkpoint {path} is not a checkpoint of fairseq-train (it has no {e}): a torch.save "
                    "file of something else?"
                ) from None
            if not damaged(path, e):
                raise
            raise CheckpointError(cannot_load(f"checkpoint {path}", e)) from None

    return load


def cannot_load(name, error):
    """One line for a file that torch.load could not read: what failed, and that safety stays on."""
    return (
        f"{name} cannot be loaded ({type(error).__name__}: {reason(error)}): it is truncated, damaged or "
        "not a fairseq checkpoint; torch's safe loading (weights_only) stays on: load only checkpoints "
        "you trust"
    )


def first_line(error):
    """An error's first line, or its type where it has no message (one line for the user). A first
    line that announces a list (torch's "Error(s) in loading state_dict for M:", a mismatch a
    line) comes with the list's first entry and the count of the others."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        more = f" (and {len(lines) - 2} more)" if len(lines) > 2 else ""
        return f"{lines[0]} {lines[1]}{more}"
    return lines[0]


def reason(error):
    """The line of torch's message that says what is wrong, never its advice to load unsafely."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    detail = [line for line in lines if line.startswith("WeightsUnpickler error:")]
    line = detail[0] if detail else (lines[0] if lines else "")
    return line.split(". ")[0]  # its first sentence: what failed


def unpickling(error):
    """Whether ``error`` was raised while torch (or pickle) read the file, not in fairseq's code
    after it: damaged bytes can make the unpickler look up a memo entry that is not there."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return False
    where = frames[-1].filename
    return "torch" in where.split(os.sep) or os.path.basename(where) == "pickle.py"


def damaged(path, error):
    """Whether torch.load's error says the file itself is bad (not fairseq's code after loading)."""
    if isinstance(error, (pickle.UnpicklingError, EOFError, zipfile.BadZipFile)):
        return True
    if isinstance(error, KeyError) and unpickling(error):
        return True
    if isinstance(error, RuntimeError) and "PytorchStreamReader" in str(error):
        return True  # a torch.save archive with a damaged or missing member
    return not zipfile.is_zipfile(path)  # not torch.save's archive, and not a legacy file that loads
