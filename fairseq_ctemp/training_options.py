"""fairseq-train's own parser, the plugin loaded, as a check before any work: training options that
fairseq-train would refuse (an option it does not know, a bad value) stop a recipe or a sweep in
one line before it prepares data or starts a run, not each run once it has started; ctemp-train
also refuses what fairseq-train would end in a traceback for (``before_training``).

    python -m fairseq_ctemp.training_options NAME DATA [fairseq-train options]
        (NAME: who is checking, for the error line; exit status 2 where fairseq-train refuses)
"""

import contextlib
import dataclasses
import json
import logging
import os
import sys

from fairseq import options
from fairseq.data.data_utils import infer_language_pair
from fairseq.data.indexed_dataset import dataset_exists
from fairseq.utils import split_paths

from . import USER_DIR  # this package: the --user-dir ctemp-train can take
from .inputs import folder_problem
from .setup_checks import setup_problem, symbols
from .translate import post_process_problem

# the tasks whose DATA fairseq reads as folders of fairseq-preprocess's files
FOLDER_TASKS = ("translation", "language_modeling")


class _Refused(Exception):
    pass


@contextlib.contextmanager
def _argv(argv):
    saved, sys.argv = sys.argv, argv
    try:
        yield
    finally:
        sys.argv = saved


def parse(train_args, prog="fairseq-train"):
    """(fairseq-train's namespace of ``train_args``, None), or (None, the message of its refusal)."""

    def refuse(message):  # argparse's error prints the usage and exits
        raise _Refused(message)

    train_args = list(train_args)
    try:
        # fairseq's parser takes --user-dir (and its name, for --help) from sys.argv
        with _argv([prog, *train_args]):
            parser = options.get_training_parser()
            parser.error = refuse
            return options.parse_args_and_arch(parser, train_args), None
    except _Refused as e:
        return None, str(e)
    except RuntimeError:  # fairseq's (bare) error for a model-less command
        if any(a in ("--arch", "-a") or a.startswith("--arch=") for a in train_args):
            raise
        return None, "--arch must be given: one of fairseq's architectures (--help lists them)"
    except SyntaxError as e:  # fairseq reads list-valued options (--lr 1e-3,5e-4) with ast.literal_eval
        value = (e.text or "").strip()
        option = next((a for a, v in zip(train_args, train_args[1:]) if v == value), "a list option")
        return None, f"argument {option}: invalid value: {value!r} (a number, or numbers separated by commas)"


def other_plugin_copy(argv):
    """ctemp-train (and this check) runs from this package, so fairseq would refuse a --user-dir
    naming another copy of fairseq_ctemp (ImportError "not globally unique", with a traceback).
    Returns the one-line reason, or None."""
    user_dir = None  # the last one given, as argparse takes it
    for i, arg in enumerate(argv):
        if arg == "--user-dir" and i + 1 < len(argv):
            user_dir = argv[i + 1]
        elif arg.startswith("--user-dir="):
            user_dir = arg.split("=", 1)[1]
    if user_dir is None or os.path.basename(os.path.normpath(user_dir)) != "fairseq_ctemp":
        return None
    if os.path.realpath(user_dir) == os.path.realpath(USER_DIR):
        return None
    return (
        f"--user-dir {user_dir} is another copy of fairseq_ctemp than the one ctemp-train runs from "
        f"({USER_DIR}): give --user-dir {USER_DIR} (what ctemp-user-dir prints), or run the "
        "other copy's own ctemp-train"
    )


def refusal(train_args):
    """None where fairseq-train's parser takes ``train_args`` (DATA first), else its message."""
    return other_plugin_copy(train_args) or parse(train_args)[1]


def before_training(train_args, prog):
    """What ctemp-train refuses before fairseq-train starts, which would fail on it with a traceback
    (after making --save-dir): options its parser refuses, a DATA folder that is not there or lacks
    a dictionary or a split, options the model or optimizer cannot be built with (setup_checks.py),
    no batch size, a --save-dir that cannot be a folder; before these, a --user-dir of another copy
    of the plugin. None where there is nothing to refuse."""
    if problem := other_plugin_copy(train_args):
        return problem
    args, message = parse(train_args, prog)
    if message is not None:
        return message
    folders = split_paths(args.data)  # fairseq's shards: DATA1:DATA2
    if problem := missing_folder(args, folders):
        return problem
    pair = language_pair(args, folders[0]) if args.task == "translation" else None  # (read once)
    if problem := data_problem(args, folders, pair) or setup_problem(args, folders[0], pair):
        return problem
    if args.max_tokens is None and args.batch_size is None:
        return "--max-tokens or --batch-size must be given: fairseq makes no batches without one"
    if problem := folder_problem(args.save_dir, made_if_missing=True):
        return f"--save-dir {args.save_dir} {problem}"
    return restore_problem(args) or metric_problem(args) or eval_bleu_problem(args)


def eval_bleu_problem(args):
    """--eval-bleu-args that are not a JSON object of fairseq's generation options, or an
    --eval-bleu-remove-bpe fairseq cannot post-process with, in words, else None: fairseq stops on
    text that is not JSON with a traceback, decodes the validation as if a key it does not know
    (``beam_size`` for ``beam``) were not given, without a word, and fails on the post-processing
    at the first validation."""
    from fairseq.dataclass.configs import GenerationConfig

    if not getattr(args, "eval_bleu", False):
        return None
    if problem := post_process_problem("--eval-bleu-remove-bpe", args.eval_bleu_remove_bpe):
        return problem  # (fairseq: NotImplementedError at the first validation, an epoch in)
    try:
        given = json.loads(args.eval_bleu_args or "{}")
    except ValueError as e:
        return f"--eval-bleu-args {args.eval_bleu_args}: not JSON ({e})"
    if not isinstance(given, dict):
        return f"--eval-bleu-args {args.eval_bleu_args}: not a JSON object of generation options"
    known = {f.name for f in dataclasses.fields(GenerationConfig)}
    if unknown := [key for key in given if key not in known]:
        return (
            f"--eval-bleu-args: {unknown[0]} is not one of fairseq's generation options (beam, lenpen, "
            "max_len_a, max_len_b, temperature, ...: GenerationConfig); validation would decode without it"
        )
    return None


# fairseq's validation metrics whose better direction is known (--best-checkpoint-metric)
HIGHER_BETTER = ("bleu", "accuracy", "chrf")
LOWER_BETTER = ("loss", "nll_loss", "ppl")


def metric_problem(args):
    """A --best-checkpoint-metric taken the wrong way, in words, else None: fairseq-train keeps as
    checkpoint_best.pt the checkpoint of the lowest value unless --maximize-best-checkpoint-metric,
    and --patience stops the run when that stops improving, without a word; a BLEU that a
    translation's validation does not compute (fairseq: KeyError 'bleu' after the first epoch)."""
    metric, maximize = args.best_checkpoint_metric, args.maximize_best_checkpoint_metric
    if metric in HIGHER_BETTER and not maximize:
        return (
            f"--best-checkpoint-metric {metric} is better higher: give --maximize-best-checkpoint-metric "
            "(without it fairseq-train keeps the lowest as checkpoint_best.pt, and --patience stops the "
            "run when it stops falling)"
        )
    if metric in LOWER_BETTER and maximize:
        return (
            f"--best-checkpoint-metric {metric} is better lower: leave out --maximize-best-checkpoint-metric "
            "(with it fairseq-train keeps the highest as checkpoint_best.pt)"
        )
    if metric == "bleu" and args.task == "translation" and not args.eval_bleu:
        return "--best-checkpoint-metric bleu needs --eval-bleu: without it validation computes no BLEU"
    return None


NOT_THERE = "no such file (read as given, not in --save-dir); fairseq-train would train from scratch"


def restore_problem(args):
    """What fairseq-train would start from that is not what was asked, in words, else None: a
    --restore-file (or, on a first launch, --continue-once) that is not a file, from which it trains
    from scratch with one log line ("No existing checkpoint found"); a --restore-file where
    --save-dir has a checkpoint_last.pt, which it overwrites rather than resumes; a missing
    --finetune-from-model (its ValueError's traceback). fairseq reads each path as given, not in
    --save-dir. Sharded checkpoints are left to it."""
    if args.checkpoint_shard_count > 1 or args.model_parallel_size > 1:
        return None
    last = os.path.join(args.save_dir, f"checkpoint_last{args.checkpoint_suffix}.pt")
    resuming = os.path.exists(last)
    if args.restore_file != "checkpoint_last.pt":  # (fairseq's default: --save-dir's last)
        restore = args.restore_file.replace(".pt", args.checkpoint_suffix + ".pt")
        if not os.path.isfile(restore):
            return f"--restore-file {restore}: {NOT_THERE}"
        if resuming and not os.path.samefile(restore, last):
            return (
                f"--restore-file {restore}: --save-dir {args.save_dir} has a checkpoint_last.pt, which "
                "fairseq-train would not resume but overwrite, starting again from --restore-file; "
                "--continue-once starts from a checkpoint once and resumes afterwards"
            )
    if args.continue_once is not None and not resuming and not os.path.isfile(args.continue_once):
        return f"--continue-once {args.continue_once}: {NOT_THERE}"
    finetune = args.finetune_from_model
    if finetune is not None and not resuming and not os.path.isfile(finetune):
        return f"--finetune-from-model {finetune}: no such file"
    return None


def missing_folder(args, folders):
    """A DATA folder of a FOLDER_TASKS task that is not there, in words, else None."""
    for folder in folders if args.task in FOLDER_TASKS else ():
        if not os.path.isdir(folder):
            what = "not a folder" if os.path.exists(folder) else "no such folder"
            return f"DATA {folder}: {what} (fairseq-preprocess's --destdir)"
    return None


def data_problem(args, folders, pair):
    """What fairseq-train would not find in the DATA folders of a FOLDER_TASKS task, else None;
    pair: a translation's (source, target) languages (language_pair)."""
    if args.task not in FOLDER_TASKS:
        return None
    if missing := missing_dictionary(args, folders[0], pair):
        return f"DATA {folders[0]} has no {missing}: give the --destdir of fairseq-preprocess"
    return other_dictionary(folders, pair) or missing_split(args, folders, pair)


def other_dictionary(folders, pair):
    """A shard whose dictionary is not the first shard's, in words, else None: fairseq reads the
    first shard's for all of them, so that shard's word ids would be read as other words, without
    a word. (A shard without dictionary files is not checked: fairseq does not read them.)"""
    names = ["dict.txt"] if pair is None else [f"dict.{lang}.txt" for lang in pair]
    for name in names:
        first = symbols(os.path.join(folders[0], name))
        for folder in folders[1:]:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and symbols(path) != first:
                return (
                    f"DATA {folder} has another {name} than the first shard {folders[0]}: fairseq reads "
                    f"the first shard's dictionaries for every shard, so the word ids of {folder} would "
                    "be read as other words; binarize every shard with the first's (fairseq-preprocess "
                    "--srcdict / --tgtdict)"
                )
    return None


def missing_dictionary(args, folder, pair):
    """What fairseq reads first from a DATA folder (LM: dict.txt; translation: the dictionary of each
    language, the pair inferred from the file names as fairseq does without -s/-t) where it is not
    there, in words, else None."""
    if args.task == "language_modeling":
        names = ["dict.txt"]
    else:
        if pair is None:
            return "SPLIT.SRC-TGT.* files to infer the language pair from (without -s/-t)"
        names = [f"dict.{lang}.txt" for lang in pair]
    return next((n for n in names if not os.path.isfile(os.path.join(folder, n))), None)


def language_pair(args, folder):
    """(source, target) of a translation: -s/-t, else inferred from the folder's file names as
    fairseq infers it; None where neither gives it."""
    langs = (args.source_lang, args.target_lang)
    if None in langs:
        langs = infer_language_pair(folder)
    return None if None in langs else tuple(langs)


def missing_split(args, folders, pair):
    """The first split fairseq-train would not find, in words, else None: --train-subset in every
    shard (shard k is read at epoch k, hours in), each --valid-subset in the first (fairseq's
    FileNotFoundError with a traceback, after building the model). pair: None for a language model."""
    wanted = [(folder, args.train_subset, TRAIN_HINT) for folder in folders]
    if not args.disable_validation:
        wanted += [(folders[0], split, VALID_HINT) for split in args.valid_subset.split(",")]
    for folder, split, hint in wanted:
        names = [split] if pair is None else [f"{split}.{a}-{b}.{pair[0]}" for a, b in (pair, pair[::-1])]
        impls = [args.dataset_impl] if args.dataset_impl else ["mmap", "raw"]
        if not any(dataset_exists(os.path.join(folder, n), impl) for n in names for impl in impls):
            return f"DATA {folder} has no {split} split ({names[0]}.bin and .idx): {hint}"
    return None


TRAIN_HINT = "binarize it with fairseq-preprocess --trainpref, or name the split with --train-subset"
VALID_HINT = (
    "binarize it with fairseq-preprocess --validpref, name the split with --valid-subset, or train "
    "with --disable-validation"
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        sys.exit("usage: python -m fairseq_ctemp.training_options NAME DATA [fairseq-train options]")
    name, train_args = argv[0], argv[1:]
    logging.disable(logging.INFO)  # fairseq's import-time notes: a check prints its verdict alone
    message = refusal(train_args)
    if message is not None:
        print(f"{name}: error: fairseq-train refuses the training options: {message}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
