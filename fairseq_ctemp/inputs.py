"""Checks of input and output files shared by the tools (commands and library), made before any
work, for an error line that names the option and the file: a checkpoint raises the tool's own
error class, a text file or an output InputError saying what is wrong (the caller adds the option
and the file); output_problem: all the checks of a tool's outputs, as one message."""

import codecs
import os
import sys

from . import checkpoint_files


class InputError(Exception):
    """What is wrong with an input file (the caller names the option and the file)."""


def check_checkpoint_option(option, path, error):
    """`error` naming the option and the file where path is not a checkpoint file to load (missing,
    a directory, empty, unreadable, not a torch.save archive): a cheap look before torch loads it,
    which fails on a damaged file with a traceback."""
    if not os.path.exists(path):
        raise error(f"{option} {path}: no such file")
    try:
        checkpoint_files.check_checkpoint(path)
    except checkpoint_files.CheckpointError as e:
        raise error(f"{option} {path} {e}") from None


def read_utf8_lines(path):
    """The lines of a UTF-8 text file, LF or CR LF line ends removed (a UTF-8 BOM too); a CR
    anywhere else (CR-only line ends) is refused, since the lines would silently run together."""
    if os.path.isdir(path):
        raise InputError("is a directory, not a text file")
    if not os.path.exists(path):
        raise InputError("no such file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:  # unreadable (permissions), or a special file
        raise InputError(f"cannot be read ({e.strerror})") from None
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in data[:4096]:
        raise InputError(
            "looks like UTF-16 (NUL bytes); it must be UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8"
        )
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines):
        try:
            lines[number] = line.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as e:
            raise InputError(
                f"line {number + 1} is not UTF-8 (byte 0x{line[e.start]:02x} at column "
                f"{e.start + 1}); convert the file, e.g. iconv -f <its encoding> -t UTF-8"
            ) from None
        if "\r" in lines[number]:  # CR-only line ends would make the whole file one line
            raise InputError(
                f"line {number + 1} holds a carriage return (CR) that ends no line: CR-only line ends? "
                "Use LF or CR LF line ends, e.g. tr '\\r' '\\n'"
            )
    return lines


def read_lines_option(option, path, error, allow_empty=False):
    """read_utf8_lines of the file an option names, `error` naming the option and the file where it
    cannot be read as text, or is empty (unless allow_empty)."""
    try:
        lines = read_utf8_lines(path)
    except InputError as e:
        raise error(f"{option} {path}: {e}") from None
    if not lines and not allow_empty:
        raise error(f"{option} {path} is empty")
    return lines


def check_known_words(option, words, dictionary, path, error):
    """A text against a model's fairseq dictionary, whose unknown words are scored as <unk> (as
    fairseq-preprocess maps them): `error` where no word is in it (another language or
    tokenisation), else a note of their share on stderr where there are any. A literal <unk> in the
    text (as PTB's) is a known word."""
    unknown = sum(dictionary.index(w) == dictionary.unk() and w != dictionary.unk_word for w in words)
    if unknown and unknown == len(words):
        raise error(
            f"{option}: none of its {len(words)} words is in the dictionary of {path}; is it the "
            "model's language and tokenisation?"
        )
    if unknown:
        print(
            f"{option}: {unknown} of {len(words)} words ({unknown / len(words):.1%}) are not in the "
            f"dictionary of {path}: scored as {dictionary.unk_word}",
            file=sys.stderr,
        )


def check_new_file(path):
    """InputError unless a new file can be made at ``path``: nothing is there, its directory exists
    and can be written to (checked before the work that would end by writing it). The message
    follows the file's name: f"{option} {path} {error}"."""
    if os.path.lexists(path):
        raise InputError("already exists; refusing to overwrite it")
    directory = os.path.dirname(os.path.abspath(path))
    if problem := folder_problem(directory):
        raise InputError(f"is in {directory}, which {problem}")


def check_folder_can_be_made(path):
    """InputError unless a file can be written at ``path`` once the tool has made its missing
    folders (a file on the way would fail the write only after the work). The message follows the
    file's name."""
    directory = os.path.dirname(os.path.abspath(path))
    if problem := folder_problem(directory, made_if_missing=True):
        raise InputError(f"is in {directory}, which {problem}")


def folder_problem(folder, made_if_missing=False):
    """Why no file can be written in ``folder`` (None: one can), in words that follow its name: it
    does not exist (unless made_if_missing: the caller makes it), is not a folder, cannot be made
    (a file on its path), cannot be written to."""
    folder = os.path.abspath(folder)  # a bare relative name's dirname is "" (never exists)
    above = folder
    while not os.path.lexists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        return "is not a folder" if above == folder else f"cannot be made: {above} is not a folder"
    if above != folder and not made_if_missing:
        return "does not exist"
    if not os.access(above, os.W_OK):
        return "cannot be written to" if above == folder else f"cannot be made: {above} cannot be written to"
    return None


def output_problem(outputs, read=(), force=False):
    """Why a tool cannot write ``outputs`` (a message naming the file), else None; checked before
    any work, in this order: two outputs that are one file, one that exists (unless force), one
    that is a file the tool reads ((option, path) pairs; force or not: --force replaces outputs,
    never inputs), one whose folder cannot be made (the tool makes its missing folders). Empty
    paths and '-' (standard output) are not files."""
    named = [p for p in outputs if p and p != "-"]
    if twice := one_file_twice(named):
        return f"two outputs are one file ({twice[0]}): give each its own name"
    if not force and (taken := [p for p in named if os.path.lexists(p)]):
        return f"{taken[0]} exists; refusing to overwrite it (--force)"
    for output in named:
        for option, path in read:
            if path and same_file(output, path):
                return f"{output} is also {option} {path}: an output never replaces an input"
    for path in named:
        try:
            check_folder_can_be_made(path)
        except InputError as e:
            return f"{path} {e}"
    return None


def one_file_twice(paths):
    """The first pair of ``paths`` that names one file (two outputs of a run: one would overwrite the
    other), else None."""
    named = [p for p in paths if p and p != "-"]
    for i, path in enumerate(named):
        for other in named[i + 1 :]:
            if same_file(path, other):
                return path, other
    return None


def same_file(a, b):
    """One file under two names (a link, a relative path), or one path where either is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
