"""What the benchmarks share: their options (device, sizes, precision, timed rounds, JSON report),
the environment line, fairseq's translation data made of random sentences, peak-memory measurement
and fairseq's Trainer as they build it."""

import argparse
import logging
import os
import resource
import statistics
import sys
import warnings

import numpy as np
import torch
from json_output import add_json_option, check_json_target, write_json  # noqa: F401  (as common.*)

PLUGIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fairseq_ctemp")
# The optimizer of the Transformer and LM benchmarks (their speeds are per update of the same Adam).
ADAM_ARGS = ["--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4", "--clip-norm", "1.0"]


def add_device_options(p, sizes, cpu_defaults, gpu_defaults, choices=None, default_note=None):
    """--device, and an option for each of `sizes` ({key: help text}) whose default depends on the
    device (resolve_device sets it); `choices`: {key: allowed values}; `default_note(key)`: more
    words for that option's default."""
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where to run (default auto: cuda if there is one)",
    )
    for key, text in sizes.items():
        default = f"CPU {cpu_defaults[key]}, GPU {gpu_defaults[key]}"
        p.add_argument(
            "--" + key.replace("_", "-"),
            type=type(cpu_defaults[key]),
            choices=(choices or {}).get(key),
            help=f"{text} (default: {default}{'; ' + default_note(key) if default_note else ''})",
        )


def resolve_device(p, args, cpu_defaults, gpu_defaults):
    """--device auto -> cuda when present; size options left unset take that device's defaults;
    --fp16 defaults to on with CUDA and is refused without it."""
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    args.device = "cuda" if cuda else "cpu"
    for key, value in (gpu_defaults if cuda else cpu_defaults).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.bf16 and args.fp16:
        p.error("--bf16 and --fp16 exclude each other")
    args.fp16 = cuda and not args.bf16 if args.fp16 is None else args.fp16
    if args.fp16 and not cuda:
        p.error("--fp16 needs CUDA (fairseq's fp16 trainer moves the model to the GPU)")


def device_args(args):
    """fairseq-train's device and precision options of the benchmark's --device, --fp16 / --bf16."""
    precision = ["--fp16"] if args.fp16 else ["--bf16"] if args.bf16 else []
    return precision + ([] if args.device == "cuda" else ["--cpu"])


def quiet():
    """No fairseq and hydra chatter (INFO logs) and no deprecation warnings in the report."""
    logging.disable(logging.INFO)
    for category in (UserWarning, FutureWarning):
        warnings.simplefilter("ignore", category)


def precision(args):
    return "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"


ROUNDS = 10  # every benchmark's default: a median of >= 10 paired rounds (8 left ±5 % on an H200)


def round_ratios(a, b):
    """The per-round ratios of a to b (a round times both on the same batches)."""
    return [x / y for x, y in zip(a, b)]


def paired(a, b, key="paired_words_per_s"):
    """The per-round ratios of a to b as a result's fields: their median and their spread (min, max)."""
    ratios = round_ratios(a, b)
    return {f"{key}_median": statistics.median(ratios), f"{key}_min": min(ratios), f"{key}_max": max(ratios)}


def add_timing_options(p, rounds_help="timed rounds", lengths=None):
    """The options every benchmark shares: precision, what one timed round is, threads and seed;
    lengths: the default (MIN, MAX) of the random sentence lengths, None for a benchmark without."""
    p.add_argument(
        "--fp16",
        action=argparse.BooleanOptionalAction,
        help="fairseq --fp16 (default: on for CUDA unless --bf16, off for CPU)",
    )
    p.add_argument("--bf16", action="store_true", help="fairseq --bf16 instead (default: off)")
    p.add_argument("--batches", type=int, default=2, help="training batches per timed segment (default 2)")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"{rounds_help} (default {ROUNDS})")
    p.add_argument("--warmup", type=int, default=1, help="discarded rounds first (default 1)")
    if lengths:
        p.add_argument(
            "--lengths",
            type=int,
            nargs=2,
            default=list(lengths),
            metavar=("MIN", "MAX"),
            help=f"sentence lengths, uniform in [MIN, MAX] (default {lengths[0]} {lengths[1]})",
        )
    p.add_argument("--threads", type=int, default=torch.get_num_threads(), help="(default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of the models and the batches (default 1)")


def add_beam_search_options(p):
    """The decoding half of the translation benchmarks."""
    p.add_argument("--beam", type=int, default=5, help="beam size (default 5)")
    p.add_argument("--gen-sentences", type=int, default=64, help="sentences decoded per round (default 64)")
    p.add_argument(
        "--gen-batch-size", type=int, default=32, help="sentences per generation batch (default 32)"
    )
    p.add_argument("--gen-len", type=int, default=25, help="target tokens decoded per sentence (default 25)")


def write_pair_dictionaries(data_dir, vocab):
    """dict.src.txt and dict.tgt.txt of made-up words: fairseq adds 4 specials, so
    len(dictionary) == vocab."""
    for side in ("src", "tgt"):
        with open(os.path.join(data_dir, f"dict.{side}.txt"), "w") as f:
            f.writelines(f"w{i} 1\n" for i in range(vocab - 4))


def versions_line(args):
    """The first line of every benchmark's report: versions, device, threads, load."""
    import fairseq

    cuda = args.device == "cuda"
    return (
        f"torch {torch.__version__} | fairseq {fairseq.__version__} | python {sys.version.split()[0]} | "
        f"device {torch.cuda.get_device_name() if cuda else 'cpu'} | torch threads {torch.get_num_threads()}"
        f" | loadavg at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def environment(args):
    import fairseq

    from fairseq_ctemp import provenance
    from fairseq_ctemp.alt.common import CPU_ALLOCATOR_ENV
    from fairseq_ctemp.host import cpu_capability, cpu_model

    cuda = args.device == "cuda"
    return {
        "torch": torch.__version__,
        "fairseq": fairseq.__version__,
        "python": sys.version.split()[0],
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "torch_threads": torch.get_num_threads(),
        "cpu_model": cpu_model(),
        "cpu_capability": cpu_capability(),  # the kernels torch chose: AVX2 and AVX512 differ in speed
        "code": provenance.code_commit(),  # the commit measured ("+changes": with edits)
        # the allocator settings of CPU training (docs/speed.md): the same numbers, other speeds
        **{name: os.environ.get(name) for name in CPU_ALLOCATOR_ENV},
        # when the result is written: other work on the machine slows a measurement down
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def device_sync(cuda):
    """What a timed segment calls at its ends: waits for the GPU's queued work (nothing on CPU)."""
    return torch.cuda.synchronize if cuda else (lambda: None)


def max_rss_mib():
    """The process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cuda_max_memory_mib(cuda):
    """torch.cuda.max_memory_allocated of the process so far, in MiB (None on CPU)."""
    return torch.cuda.max_memory_allocated() / 2**20 if cuda else None


def speed_summary(wall, cpu):
    """Words/s (median, min, max) and words/CPU-s (median) of one model's timed segments."""
    return {
        "words_per_s": statistics.median(wall),
        "words_per_s_min": min(wall),
        "words_per_s_max": max(wall),
        "words_per_cpu_s": statistics.median(cpu),
    }


def translation_data_args(data_dir):
    """fairseq-train's data arguments for random_batches' src-tgt data, with this plugin."""
    return [
        data_dir,
        "--user-dir",
        os.path.abspath(PLUGIN_DIR),
        "--task",
        "translation",
        "-s",
        "src",
        "-t",
        "tgt",
    ]


def random_batches(args, task):
    """fairseq-collated batches of random sentences (target length = source length +- 3)."""
    from fairseq.data import LanguagePairDataset, data_utils

    rng, d = np.random.default_rng(args.seed), task.source_dictionary
    n = 4 * args.batches * args.max_tokens // args.lengths[0]  # enough for 4x the batches we need
    sentences = lambda lengths: [  # noqa: E731  (random words, then </s>, like binarized data)
        torch.from_numpy(np.append(rng.integers(d.nspecial, len(d), k - 1), d.eos())) for k in lengths
    ]
    src_len = rng.integers(args.lengths[0], args.lengths[1] + 1, n)
    tgt_len = np.clip(src_len + rng.integers(-3, 4, n), 2, None)
    ds = LanguagePairDataset(
        sentences(src_len), src_len, d, sentences(tgt_len), tgt_len, task.target_dictionary
    )
    with data_utils.numpy_seed(args.seed):  # ordered_indices shuffles ties with numpy's global RNG
        batches = ds.batch_by_size(ds.ordered_indices(), max_tokens=args.max_tokens)
    chosen = rng.choice(len(batches), args.batches, replace=False)
    return [ds.collater([ds[i] for i in batches[j]]) for j in chosen]


def resting_bytes(trainer):
    """Bytes of the distinct storages of parameters, gradients and optimizer state (CPU: no fp16)."""
    tensors = list(trainer.model.parameters())
    tensors += [t for state in trainer.optimizer.optimizer.state.values() for t in state.values()]
    tensors += [t.grad for t in tensors if torch.is_tensor(t) and t.grad is not None]
    return sum(
        {
            t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for t in tensors
            if torch.is_tensor(t)
        }.values()
    )


def peak_bytes(trainer, sample, cuda):
    """(peak tensor bytes in one train step, resting bytes before it). Gradients are freed first
    (as the step's zero_grad would): the profiler cannot see frees of blocks allocated before it."""
    trainer.zero_grad()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        resting = torch.cuda.memory_allocated()
        trainer.train_step([sample])
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(), resting
    from torch.profiler import ProfilerActivity, profile

    resting = resting_bytes(trainer)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        trainer.train_step([sample])
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    return resting + int(np.cumsum([0] + [nbytes for _, nbytes in events]).max()), resting


def peak_keeping_trainer(cfg, task, model, criterion):
    """fairseq's Trainer, keeping CUDA's peak-memory statistics: on CUDA its train_step resets them
    after every step (to log gb_free), which hid each step's peak from the measurements here."""
    from fairseq.trainer import Trainer

    trainer = Trainer(cfg, task, model, criterion)
    trainer.cuda_env = None  # read after init only by train_step's gb_free logging and its reset
    return trainer
