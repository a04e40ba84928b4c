"""What fairseq-train stops on while it builds the model and the optimizer, with a traceback (an
AttributeError, an AssertionError, a ZeroDivisionError), found from its parsed options before it
starts: ctemp-train refuses these in one line (training_options.before_training)."""

import os

import torch
from fairseq.models import ARCH_MODEL_REGISTRY, FairseqEncoderDecoderModel, FairseqLanguageModel
from fairseq.models.transformer import TransformerModel
from fairseq.models.transformer_lm import TransformerLanguageModel

from .errors import OptionError
from .models.transformer_checks import check_attention_heads

# the kind of model each task of training_options.FOLDER_TASKS trains, and the other kind, refused
# (a model of neither kind is left to fairseq)
TASK_MODELS = {
    "translation": ("an encoder-decoder (translation) model", FairseqLanguageModel),
    "language_modeling": ("a language model", FairseqEncoderDecoderModel),
}


# fairseq's schedulers that raise a ValueError for several --lr values (only "fixed" takes a list)
ONE_LR_SCHEDULERS = ("reduce_lr_on_plateau", "inverse_sqrt", "triangular", "cosine", "tri_stage")
DROPOUTS = ("dropout", "attention_dropout", "activation_dropout", "relu_dropout")


def setup_problem(args, folder, pair):
    """The first problem of fairseq-train's options ``args`` in building its batches, optimizer,
    scheduler and model, in words, else None; folder: the first DATA folder, pair: its (source,
    target) languages (None for a language model)."""
    return optimization_problem(args) or model_problem(args, folder, pair)


def optimization_problem(args):
    for option, value in (("--max-tokens", args.max_tokens), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:  # fairseq takes 0 as no limit at all, silently
            return f"{option} must be >= 1, got {value}"
    if bad := [f for f in args.update_freq if f < 1]:
        return f"--update-freq must be >= 1 (batches per update), got {bad[0]}"
    if args.fp16 and not args.memory_efficient_fp16 and (args.cpu or not torch.cuda.is_available()):
        return "--fp16 needs a CUDA device: on a CPU leave it out (--bf16 runs there)"
    if len(args.lr) > 1 and args.lr_scheduler in ONE_LR_SCHEDULERS:
        return (
            f"--lr {','.join(f'{lr:g}' for lr in args.lr)}: several learning rates are --lr-scheduler "
            f"fixed's (one per epoch); --lr-scheduler {args.lr_scheduler} takes one"
        )
    if args.lr_scheduler == "inverse_sqrt" and args.warmup_updates < 1:
        return f"--lr-scheduler inverse_sqrt needs --warmup-updates >= 1 (it divides by it), got {args.warmup_updates}"
    return None


def model_problem(args, folder, pair):
    for name in DROPOUTS:
        value = getattr(args, name, None)
        if value is not None and not 0 <= value <= 1:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {value:g}"
    model = ARCH_MODEL_REGISTRY[args.arch]
    if args.task in TASK_MODELS and issubclass(model, TASK_MODELS[args.task][1]):
        return f"--arch {args.arch} is not {TASK_MODELS[args.task][0]}, which --task {args.task} trains"
    if issubclass(model, (TransformerModel, TransformerLanguageModel)):
        sides = ("encoder", "decoder") if issubclass(model, TransformerModel) else ("decoder",)
        try:
            check_attention_heads(args, sides)
        except OptionError as e:
            return str(e)
    if pair and getattr(args, "share_all_embeddings", False):
        src, tgt = (symbols(os.path.join(folder, f"dict.{lang}.txt")) for lang in pair)
        if src != tgt:
            return (
                "--share-all-embeddings needs one dictionary for both languages (fairseq-preprocess "
                f"--joined-dictionary); DATA {folder} has dict.{pair[0]}.txt and dict.{pair[1]}.txt apart"
            )
    return None


def symbols(path):
    """The entries of a fairseq dictionary file, in order (what fairseq compares of two)."""
    with open(path, encoding="utf-8") as f:
        return [line.split(" ", 1)[0] for line in f]
