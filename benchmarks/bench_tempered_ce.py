#!/usr/bin/env python
"""Words/s and peak memory of --criterion tempered_ce against fairseq's label_smoothed_cross_entropy.

One fairseq Trainer (one model, one optimizer) runs both criteria, swapped between steps, on the same
random NMT batches (fairseq's LanguagePairDataset, batch_by_size and collater), interleaved A B / B A
over several rounds after discarded warm-up rounds. Throughput is target words/s (fairseq's wps).
Peak memory is tensor memory: torch.cuda.max_memory_allocated on CUDA; on CPU the resting tensors
(parameters, optimizer state) plus the peak of the running sum of the allocator's [memory] events
that torch.profiler(profile_memory=True) records in one step (process max RSS, printed too, is
process-wide and monotonic: it cannot tell the two criteria apart).
"""

import argparse
import json
import logging
import os
import resource
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tracing import add_trace_option, check_trace_target, trace_models  # noqa: E402

PLUGIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fairseq_ctemp")
CPU_DEFAULTS = dict(vocab=8000, max_tokens=4000, layers=2, dim=256, ffn=1024, heads=4)
GPU_DEFAULTS = dict(vocab=32000, max_tokens=8192, layers=6, dim=512, ffn=2048, heads=8)  # base
# The optimizer of the Transformer and LM benchmarks (their speeds are per update of the same Adam).
# (words/s at least, peak memory at most) of tempered_ce against stock: set first on the CPU; on
# CUDA nothing forces any cost (one division per logit); the chunked loss must halve the memory
TARGET = {"cpu": (0.97, 1.05), "cuda": (1.0, 1.0)}
CHUNKED_TARGET = (1.0, 0.5)
ADAM_ARGS = ["--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4", "--clip-norm", "1.0"]
HELP = dict(
    vocab="dictionary size",
    max_tokens="tokens per batch (--max-tokens)",
    dim="embedding dim",
    layers="encoder and decoder layers",
    ffn="FFN dim",
    heads="attention heads",
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


def precision_args(args):
    """fairseq-train's precision option of the benchmark's --fp16 / --bf16."""
    return ["--fp16"] if args.fp16 else ["--bf16"] if args.bf16 else []


def precision(args):
    return "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32"


ROUNDS = 10  # every benchmark's default: a median of >= 10 paired rounds (8 left ±5 % on an H200)


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
    p.add_argument("--seed", type=int, default=1)


def add_beam_search_options(p):
    """The decoding half of the translation benchmarks."""
    p.add_argument("--beam", type=int, default=5, help="beam size (default 5)")
    p.add_argument("--gen-sentences", type=int, default=64, help="sentences decoded per round (default 64)")
    p.add_argument(
        "--gen-batch-size", type=int, default=32, help="sentences per generation batch (default 32)"
    )
    p.add_argument("--gen-len", type=int, default=25, help="target tokens decoded per sentence (default 25)")


def add_json_option(p):
    p.add_argument(
        "--json",
        metavar="PATH",
        help="also write the results as JSON to PATH (refused if it exists); make gpu-check reads it",
    )


def check_json_target(p, args):
    """Refuse an existing --json target before any work (a finished result is never overwritten)."""
    if args.json is not None and os.path.lexists(args.json):
        p.error(f"--json {args.json} exists; refusing to overwrite it")


def write_json(path, result):
    """The results of one benchmark run (plain dicts, numbers and strings) as JSON."""
    if path is not None:
        with open(path, "x", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


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

    from fairseq_ctemp.host import cpu_model

    cuda = args.device == "cuda"
    return {
        "torch": torch.__version__,
        "fairseq": fairseq.__version__,
        "python": sys.version.split()[0],
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "torch_threads": torch.get_num_threads(),
        "cpu_model": cpu_model(),
        # PyTorch's transparent huge pages for large CPU tensors (docs/speed.md): the same numbers,
        # fewer page faults
        "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE"),
    }


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


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    for key, text in HELP.items():
        p.add_argument(
            "--" + key.replace("_", "-"),
            type=int,
            help=f"{text} (default: CPU {CPU_DEFAULTS[key]}, GPU {GPU_DEFAULTS[key]})",
        )
    p.add_argument("--temperature", type=float, default=4.0, help="tempered_ce T (default 4)")
    p.add_argument("--sem-weight", type=float, default=0.0, help="tempered_ce --sem-weight (default 0)")
    p.add_argument("--label-smoothing", type=float, default=0.1, help="both criteria (default 0.1)")
    p.add_argument(
        "--loss-chunk-tokens",
        type=int,
        default=0,
        help="tempered_ce --loss-chunk-tokens: its loss without the batch x vocabulary logits (default 0: off)",
    )
    add_timing_options(p, rounds_help="timed A B / B A rounds", lengths=(8, 60))
    p.add_argument(
        "--fairseq-args",
        default="",
        help='more fairseq-train options, e.g. --fairseq-args="--share-all-embeddings"',
    )
    add_json_option(p)
    add_trace_option(p)
    args = p.parse_args(argv)
    check_json_target(p, args)
    check_trace_target(p, args)
    resolve_device(p, args, CPU_DEFAULTS, GPU_DEFAULTS)
    if args.loss_chunk_tokens < 0:
        p.error(f"--loss-chunk-tokens must be >= 0 (0: off), got {args.loss_chunk_tokens}")
    if args.batches < 1 or args.rounds < 1 or args.warmup < 0:
        p.error("--batches and --rounds must be >= 1, --warmup >= 0")
    low, high = 0.01, 100.0  # tempered_ce's range (fairseq_ctemp/criterions/checks.py)
    if not low <= args.temperature <= high:
        p.error(
            f"--temperature must be in [{low:g}, {high:g}] (tempered_ce's range), got {args.temperature:g}"
        )
    torch.set_num_threads(args.threads)
    return args


def fairseq_cfg(args, data_dir, criterion_args):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    size = {
        "layers": args.layers,
        "embed-dim": args.dim,
        "ffn-embed-dim": args.ffn,
        "attention-heads": args.heads,
    }
    argv = [
        *translation_data_args(data_dir),
        "--arch",
        "transformer",
        "--seed",
        str(args.seed),
        *[x for k, v in size.items() for side in ("encoder", "decoder") for x in (f"--{side}-{k}", str(v))],
        "--share-decoder-input-output-embed",
        "--dropout",
        "0.1",
        *ADAM_ARGS,
        "--max-tokens",
        str(args.max_tokens),
        "--label-smoothing",
        str(args.label_smoothing),
        *precision_args(args),
        *([] if args.device == "cuda" else ["--cpu"]),
        *args.fairseq_args.split(),
        *criterion_args,
    ]
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))


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


def main(argv=None):
    args = parse_args(argv)
    logging.disable(logging.INFO)  # fairseq and hydra chatter, and fairseq's deprecation warnings
    for category in (UserWarning, FutureWarning):
        warnings.simplefilter("ignore", category)
    cuda = args.device == "cuda"
    stock = ["--criterion", "label_smoothed_cross_entropy"]
    tempered = [
        *("--criterion", "tempered_ce", "--softmax-temperature", str(args.temperature)),
        *("--sem-weight", str(args.sem_weight)),
        *(["--loss-chunk-tokens", str(args.loss_chunk_tokens)] if args.loss_chunk_tokens else []),
    ]
    task, model, trainer, criteria = build_trainer(args, stock, tempered)
    batches = random_batches(args, task)

    def use(name):  # the trainer (and task.train_step) now runs this criterion
        trainer._criterion = trainer._wrapped_criterion = criteria[name].to(trainer.device)

    describe(args, task, model, batches, stock, tempered)
    wall, cpu = measure(args, trainer, use, batches)
    cuda_peak = cuda_max_memory_mib(cuda)  # before peak_bytes resets the statistics
    peaks = {}
    for name in ("stock", "tempered"):  # a step's memory is deterministic: one pass, largest peak
        use(name)
        peaks[name] = max(peak_bytes(trainer, b, cuda) for b in batches)
    if cuda:  # the process's high-water mark: the timed rounds', or one of the measured steps'
        cuda_peak = max(cuda_peak, *(peak / 2**20 for peak, _ in peaks.values()))
    method = "torch.cuda.max_memory_allocated" if cuda else "torch.profiler memory events + resting tensors"
    print_speeds(args, wall, cpu, peaks, method, cuda_peak)
    # one trainer, its criterion swapped: each traced under its own
    traces = trace_models(args, {"stock": trainer, "tempered": trainer}, batches[0], cuda, before=use)
    models = {
        name: {
            **speed_summary(wall[name], cpu[name]),
            "peak_mib": peaks[name][0] / 2**20,
            "step_mib": (peaks[name][0] - peaks[name][1]) / 2**20,
        }
        for name in ("stock", "tempered")
    }
    result = {
        "benchmark": "bench_tempered_ce",
        "environment": environment(args),
        "config": vars(args),
        "memory_method": method,
        "models": models,
        "ratios": {"tempered/stock": ratio_of(args, wall, cpu, peaks)},
        "cuda_max_memory_allocated_mib": cuda_peak,
        "traces": traces,
    }
    write_json(args.json, result)
    return result


def peak_keeping_trainer(cfg, task, model, criterion):
    """fairseq's Trainer, keeping CUDA's peak-memory statistics: on CUDA its train_step resets them
    after every step (to log gb_free), which hid each step's peak from the measurements here."""
    from fairseq.trainer import Trainer

    trainer = Trainer(cfg, task, model, criterion)
    trainer.cuda_env = None  # read after init only by train_step's gb_free logging and its reset
    return trainer


def build_trainer(args, stock, tempered):
    """(task, model, a fairseq Trainer, {"stock", "tempered": criterion}): one model, trained by
    either criterion in turn."""
    import fairseq.tasks

    with tempfile.TemporaryDirectory() as data_dir:
        write_pair_dictionaries(data_dir, args.vocab)
        cfg, cfg_t = fairseq_cfg(args, data_dir, stock), fairseq_cfg(args, data_dir, tempered)
        task = fairseq.tasks.setup_task(cfg.task)
    torch.manual_seed(args.seed)
    model = task.build_model(cfg.model)
    criteria = {
        "stock": task.build_criterion(cfg.criterion),
        "tempered": task.build_criterion(cfg_t.criterion),
    }
    return task, model, peak_keeping_trainer(cfg, task, model, criteria["stock"]), criteria


def describe(args, task, model, batches, stock, tempered):
    print(versions_line(args))
    print("config:", " ".join(f"{k}={v}" for k, v in vars(args).items()))
    print(
        f"model: transformer, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params, vocab "
        f"{len(task.target_dictionary)}, {precision(args)}, adam, clip-norm 1, dropout 0.1"
    )
    print(
        "batches (sentences, target words, padded target shape):",
        [(b["nsentences"], b["ntokens"], tuple(b["target"].shape)) for b in batches],
    )
    print(
        f"A = {' '.join(stock)}\nB = {' '.join(tempered)}  (both --label-smoothing {args.label_smoothing})\n"
    )


def measure(args, trainer, use, batches):
    """Words per second of wall and of CPU time, per round ({"stock", "tempered": [...]}), the
    order alternating between rounds."""
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    words = sum(b["ntokens"] for b in batches)
    wall, cpu = {"stock": [], "tempered": []}, {"stock": [], "tempered": []}
    for r in range(args.warmup + args.rounds):
        for name in ("stock", "tempered") if r % 2 == 0 else ("tempered", "stock"):
            use(name)
            sync()
            start, cpu_start = time.perf_counter(), time.process_time()
            for sample in batches:
                trainer.train_step([sample])
            sync()
            if r >= args.warmup:
                wall[name].append(words / (time.perf_counter() - start))
                cpu[name].append(words / (time.process_time() - cpu_start))
    return wall, cpu


def print_speeds(args, wall, cpu, peaks, method, cuda_peak):
    med = statistics.median
    print(f"{'':9} {'words/s median [min .. max]':>29} {'words/CPU-s':>11} {'peak MiB':>9} {'step MiB':>9}")
    for name in ("stock", "tempered"):
        (peak, resting), w = peaks[name], wall[name]
        print(
            f"{name:9} {med(w):9.0f} [{min(w):7.0f} .. {max(w):7.0f}] {med(cpu[name]):11.0f} "
            f"{peak / 2**20:9.1f} {(peak - resting) / 2**20:9.1f}"
        )
    print(f"\npeak: tensor high-water mark ({method}); step: peak minus resting params/grads/optimizer state")
    print(
        f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB | "
        f"loadavg at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        + (f" | CUDA max_memory_allocated {cuda_peak:.1f} MiB" if args.device == "cuda" else "")
    )


def ratio_of(args, wall, cpu, peaks):
    """tempered against stock, printed and returned, with its target (TARGET, CHUNKED_TARGET)."""
    med = statistics.median
    paired = [t / s for t, s in zip(wall["tempered"], wall["stock"])]
    print(
        f"paired per-round words/s ratios: {' '.join(f'{x:.3f}' for x in paired)} (median {med(paired):.3f})"
    )
    speed, cpu_speed = (med(d["tempered"]) / med(d["stock"]) for d in (wall, cpu))
    (peak_s, rest_s), (peak_t, rest_t) = peaks["stock"], peaks["tempered"]
    min_speed, max_memory = CHUNKED_TARGET if args.loss_chunk_tokens else TARGET[args.device]
    met = speed >= min_speed and peak_t <= max_memory * peak_s
    print(
        f"RATIO tempered/stock: words/s {speed:.3f}x (target >= {min_speed:g}) | peak memory "
        f"{peak_t / peak_s:.3f}x (target <= {max_memory:g}): {'OK' if met else 'MISSED'}"
        f" | words/CPU-s {cpu_speed:.3f}x | step memory {(peak_t - rest_t) / (peak_s - rest_s):.3f}x"
    )
    return {
        "words_per_s": speed,
        "words_per_cpu_s": cpu_speed,
        "paired_words_per_s_median": med(paired),
        "peak_memory": peak_t / peak_s,
        "step_memory": (peak_t - rest_t) / (peak_s - rest_s),
        "target": f"words/s >= {min_speed:g}, peak memory <= {max_memory:g}",
        "met": met,
    }


if __name__ == "__main__":
    main()
