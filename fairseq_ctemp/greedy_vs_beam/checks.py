"""Every option of a Request checked before anything is read, loaded or decoded; the output files
refused up front if one exists."""

import glob
import math
import os

from sacrebleu.metrics import BLEU

from .. import inputs, translate
from . import UsageError

# Set by this command for every decoding; after -- they would make the two systems differ silently.
OWN_OPTIONS = (
    "--path",
    "--beam",
    "--lenpen",
    "--gen-subset",
    "--temperature",
    "--user-dir",
    "--results-path",
    "--quiet",
)


def check(option, values, ok, allowed):
    for value in values:
        if not ok(value):
            raise UsageError(f"{option} must be {allowed}, got {value}")


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def check_subset(option, data, subset):
    """UsageError unless DATA's first folder (where fairseq reads every subset but train from) has
    files of SUBSET: found now, not once the checkpoint is loaded."""
    folder = data.split(":")[0]
    if not glob.glob(os.path.join(folder, glob.escape(subset) + ".*")):
        raise UsageError(f"{option} {subset}: DATA {folder} has no such subset (no file {subset}.*)")


def subset_size(data, subset):
    """Sentences in a binarized subset, so that a --ref with the wrong number of lines fails before
    any decoding; None if unknown (no index, or language pairs of different sizes)."""
    from fairseq.data import data_utils  # already imported with the plugin

    sizes = set()
    for index in glob.glob(os.path.join(data.split(":")[0], glob.escape(subset) + ".*-*.*.idx")):
        dataset = data_utils.load_indexed_dataset(index[: -len(".idx")], None)
        sizes.add(len(dataset) if dataset is not None else None)
    return sizes.pop() if len(sizes) == 1 else None


def read_lines(path, option, expected=None):
    lines = inputs.read_lines_option(option, path, UsageError)
    if expected is not None and len(lines) != expected:
        raise UsageError(f"{option} {path} has {len(lines)} lines but there are {expected} sentences")
    return lines


def decoding_options(extra_args):
    """The options after -- as translate.DecodingOptions; UsageError for any this command sets or
    the API does not take."""
    for option in (arg.split("=")[0] for arg in extra_args):
        if option in OWN_OPTIONS:
            raise UsageError(f"{option} cannot go after --: this command sets it")
    try:
        return translate.decoding_options(extra_args)
    except translate.TranslateError as e:
        raise UsageError(f"after --: {e}") from None


def check_request(request):
    """Every option checked before anything is read, loaded or decoded."""
    for path in request.data.split(":"):
        if not os.path.isdir(path):
            raise UsageError(f"DATA {path}: no such directory")
    for path in request.checkpoint.split(":"):
        if not os.path.exists(path):
            raise UsageError(f"--checkpoint {path}: no such file")
    check_subset("--subset", request.data, request.subset)
    if request.grid:
        check_subset("--dev-subset", request.data, request.dev_subset)
    integer = lambda b: isinstance(b, int) and b >= 1  # noqa: E731
    check("--beam", [request.beam], integer, "an integer >= 1")
    check("--grid-beams", request.grid_beams or [], integer, "integers >= 1")
    check("--lenpen", [request.lenpen], positive, "a finite number > 0")
    check("--grid-lenpens", request.grid_lenpens or [], positive, "finite numbers > 0")
    temperature = [request.temperature] if request.temperature is not None else []
    check("--temperature", temperature, positive, "finite and > 0")
    tokenize = [request.tokenize] if request.tokenize else []
    check(
        "--sacrebleu-tokenize", tokenize, BLEU.TOKENIZERS.__contains__, f"one of {', '.join(BLEU.TOKENIZERS)}"
    )
    if request.dev_ref and not request.grid:
        raise UsageError("--dev-ref is only used with --grid-beams / --grid-lenpens")
    decoding_options(list(request.extra_args))


def output_files(request):
    """name -> path of every file the request writes, refused now if one exists or cannot be made."""
    names = ["greedy.hyp", "beam.hyp", "ref"] + [
        f"grid.beam{b}.lenpen{lp:g}.hyp" for b, lp in request.grid_points()
    ]
    files = {name: os.path.join(request.save_dir, name) for name in names} if request.save_dir else {}
    files.update({"json": request.json_path} if request.json_path else {})
    if twice := inputs.one_file_twice(list(files.values())):
        raise UsageError(
            f"two outputs are one file ({twice[0]}): give --json a name outside --save-dir's files"
        )
    for path in files.values():
        if os.path.exists(path):
            raise UsageError(f"{path} already exists; refusing to overwrite it")
        try:  # found now, not after decoding
            inputs.check_folder_can_be_made(path)
        except inputs.InputError as e:
            raise UsageError(f"{path} {e}") from None
    return files
