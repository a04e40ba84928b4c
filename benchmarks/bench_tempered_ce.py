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
import os
import statistics
import sys
import tempfile
import unittest.mock

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as common  # noqa: E402
import bench_timing as timing  # noqa: E402
from tracing import add_trace_option, check_trace_target, finish_traces, trace_models  # noqa: E402

CPU_DEFAULTS = dict(vocab=8000, max_tokens=4000, layers=2, dim=256, ffn=1024, heads=4)
# transformer base, 65536 tokens a batch: at 8192 an H200 idled for 87 % of a profiled step (its
# host launching kernels), at 65536 for 13 % (benchmarks/results/h200_2026-12-04/trace_report)
GPU_DEFAULTS = dict(vocab=32000, max_tokens=65536, layers=6, dim=512, ffn=2048, heads=8)
# (words/s at least, peak memory at most) of tempered_ce against stock: set first on the CPU; on
# CUDA nothing forces any cost (the 1/T rides on the projection's product); the chunked loss must
# halve the memory
TARGET = {"cpu": (0.97, 1.05), "cuda": (1.0, 1.0)}
CHUNKED_TARGET = (1.0, 0.5)
HELP = dict(
    vocab="dictionary size",
    max_tokens="tokens per batch (--max-tokens)",
    dim="embedding dim",
    layers="encoder and decoder layers",
    ffn="FFN dim",
    heads="attention heads",
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_device_options(p, HELP, CPU_DEFAULTS, GPU_DEFAULTS)
    p.add_argument("--temperature", type=float, default=4.0, help="tempered_ce T (default 4)")
    p.add_argument("--sem-weight", type=float, default=0.0, help="tempered_ce --sem-weight (default 0)")
    p.add_argument("--label-smoothing", type=float, default=0.1, help="both criteria (default 0.1)")
    p.add_argument(
        "--loss-chunk-tokens",
        type=int,
        default=0,
        help="tempered_ce --loss-chunk-tokens: its loss without the batch x vocabulary logits (default 0: off)",
    )
    p.add_argument(
        "--division",
        action="store_true",
        help="also time tempered_ce through its division path (the model's logits divided by T, as "
        "models other than fairseq's transformers get it) beside its default path and stock",
    )
    common.add_timing_options(p, rounds_help="timed A B / B A rounds", lengths=(8, 60))
    p.add_argument(
        "--fairseq-args",
        default="",
        help='more fairseq-train options, e.g. --fairseq-args="--share-all-embeddings"',
    )
    common.add_json_option(p)
    add_trace_option(p)
    args = p.parse_args(argv)
    common.check_json_target(p, args)
    check_trace_target(p, args)
    common.resolve_device(p, args, CPU_DEFAULTS, GPU_DEFAULTS)
    if args.loss_chunk_tokens < 0:
        p.error(f"--loss-chunk-tokens must be >= 0 (0: off), got {args.loss_chunk_tokens}")
    if args.batches < 1 or args.rounds < 1 or args.warmup < 0:
        p.error("--batches and --rounds must be >= 1, --warmup >= 0")
    if args.division and (args.loss_chunk_tokens or args.temperature == 1.0):
        p.error(
            "--division needs --loss-chunk-tokens 0 and --temperature other than 1 (else the paths are one)"
        )
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
        *common.translation_data_args(data_dir),
        "--arch",
        "transformer",
        "--seed",
        str(args.seed),
        *[x for k, v in size.items() for side in ("encoder", "decoder") for x in (f"--{side}-{k}", str(v))],
        "--share-decoder-input-output-embed",
        "--dropout",
        "0.1",
        *common.ADAM_ARGS,
        "--max-tokens",
        str(args.max_tokens),
        "--label-smoothing",
        str(args.label_smoothing),
        *common.device_args(args),
        *args.fairseq_args.split(),
        *criterion_args,
    ]
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))


def main(argv=None):
    args = parse_args(argv)
    common.quiet()
    cuda = args.device == "cuda"
    stock = ["--criterion", "label_smoothed_cross_entropy"]
    tempered = [
        *("--criterion", "tempered_ce", "--softmax-temperature", str(args.temperature)),
        *("--sem-weight", str(args.sem_weight)),
        *(["--loss-chunk-tokens", str(args.loss_chunk_tokens)] if args.loss_chunk_tokens else []),
    ]
    task, model, trainer, criteria = build_trainer(args, stock, tempered)
    names = list(criteria)
    batches = common.random_batches(args, task)

    def use(name):  # the trainer (and task.train_step) now runs this criterion
        trainer._criterion = trainer._wrapped_criterion = criteria[name].to(trainer.device)

    describe(args, task, model, batches, stock, tempered)
    sync = common.device_sync(cuda)
    words = sum(b["ntokens"] for b in batches)
    trainers = {name: trainer for name in names}  # one trainer, its criterion swapped
    wall, cpu = timing.time_training(trainers, batches, words, args, sync, before=use)
    cuda_peak = common.cuda_max_memory_mib(cuda)  # before peak_bytes resets the statistics
    peaks = {}
    for name in names:  # a step's memory is deterministic: one pass, largest peak
        use(name)
        peaks[name] = max(common.peak_bytes(trainer, b, cuda) for b in batches)
    if cuda:  # the process's high-water mark: the timed rounds', or one of the measured steps'
        cuda_peak = max(cuda_peak, *(peak / 2**20 for peak, _ in peaks.values()))
    method = "torch.cuda.max_memory_allocated" if cuda else "torch.profiler memory events + resting tensors"
    print_speeds(args, wall, cpu, peaks, method, cuda_peak)
    traces = trace_models(args, trainers, batches[0], cuda, before=use)  # each under its criterion
    models = {
        name: {
            **common.speed_summary(wall[name], cpu[name]),
            "peak_mib": peaks[name][0] / 2**20,
            "step_mib": (peaks[name][0] - peaks[name][1]) / 2**20,
        }
        for name in names
    }
    ratios = {"tempered/stock": ratio_of(args, wall, cpu, peaks)}
    if args.division:
        ratios.update({f"{a}/{b}": paths_ratio(wall, cpu, peaks, a, b) for a, b in DIVISION_RATIOS})
    result = {
        "benchmark": "bench_tempered_ce",
        "environment": common.environment(args),
        "config": vars(args),
        "memory_method": method,
        "models": models,
        "ratios": ratios,
        "cuda_max_memory_allocated_mib": cuda_peak,
        "process_max_rss_mib": common.max_rss_mib(),
        "traces": traces,
    }
    common.write_json(args.json, result)
    finish_traces(args)
    return result


def build_trainer(args, stock, tempered):
    """(task, model, a fairseq Trainer, {"stock", "tempered"[, "division"]: criterion}): one model,
    trained by each criterion in turn."""
    import fairseq.tasks

    with tempfile.TemporaryDirectory() as data_dir:
        common.write_pair_dictionaries(data_dir, args.vocab)
        cfg, cfg_t = fairseq_cfg(args, data_dir, stock), fairseq_cfg(args, data_dir, tempered)
        task = fairseq.tasks.setup_task(cfg.task)
    torch.manual_seed(args.seed)
    model = task.build_model(cfg.model)
    criteria = {
        "stock": task.build_criterion(cfg.criterion),
        "tempered": task.build_criterion(cfg_t.criterion),
    }
    if args.division:
        criteria["division"] = division_path(task.build_criterion(cfg_t.criterion))
    return task, model, common.peak_keeping_trainer(cfg, task, model, criteria["stock"]), criteria


def division_path(criterion):
    """tempered_ce as it trains a model without a plain output projection: the model's logits
    divided by T (the criterion finds no projection to multiply by itself)."""
    from fairseq_ctemp.criterions import tempered_ce

    forward = criterion.forward

    def by_division(model, sample, reduce=True):
        with unittest.mock.patch.object(tempered_ce, "plain_output_projection", lambda model: None):
            return forward(model, sample, reduce)

    criterion.forward = by_division
    return criterion


def describe(args, task, model, batches, stock, tempered):
    print(common.versions_line(args))
    print("config:", " ".join(f"{k}={v}" for k, v in vars(args).items()))
    print(
        f"model: transformer, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params, vocab "
        f"{len(task.target_dictionary)}, {common.precision(args)}, adam, clip-norm 1, dropout 0.1"
    )
    print(
        "batches (sentences, target words, padded target shape):",
        [(b["nsentences"], b["ntokens"], tuple(b["target"].shape)) for b in batches],
    )
    print(f"A = {' '.join(stock)}\nB = {' '.join(tempered)}  (both --label-smoothing {args.label_smoothing})")
    if args.division:
        print("division = B through its division path (the model's logits divided by T)")
    print()


def print_speeds(args, wall, cpu, peaks, method, cuda_peak):
    med = statistics.median
    print(f"{'':9} {'words/s median [min .. max]':>29} {'words/CPU-s':>11} {'peak MiB':>9} {'step MiB':>9}")
    for name in wall:
        (peak, resting), w = peaks[name], wall[name]
        print(
            f"{name:9} {med(w):9.0f} [{min(w):7.0f} .. {max(w):7.0f}] {med(cpu[name]):11.0f} "
            f"{peak / 2**20:9.1f} {(peak - resting) / 2**20:9.1f}"
        )
    print(f"\npeak: tensor high-water mark ({method}); step: peak minus resting params/grads/optimizer state")
    print(
        f"process max RSS {common.max_rss_mib():.0f} MiB | "
        f"loadavg at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        + (f" | CUDA max_memory_allocated {cuda_peak:.1f} MiB" if args.device == "cuda" else "")
    )


def ratio_numbers(wall, cpu, peaks, a, b):
    """a against b: words/s (of the medians, and the per-round ratios' median and spread), words
    per CPU-second, peak and step memory."""
    med = statistics.median
    (peak_a, rest_a), (peak_b, rest_b) = peaks[a], peaks[b]
    return {
        "words_per_s": med(wall[a]) / med(wall[b]),
        "words_per_cpu_s": med(cpu[a]) / med(cpu[b]),
        **common.paired(wall[a], wall[b]),
        "peak_memory": peak_a / peak_b,
        "step_memory": (peak_a - rest_a) / (peak_b - rest_b),
    }


def ratio_of(args, wall, cpu, peaks):
    """tempered against stock, printed and returned, with its target (TARGET, CHUNKED_TARGET)."""
    paired = common.round_ratios(wall["tempered"], wall["stock"])
    r = ratio_numbers(wall, cpu, peaks, "tempered", "stock")
    print(
        f"paired per-round words/s ratios: {' '.join(f'{x:.3f}' for x in paired)} "
        f"(median {r['paired_words_per_s_median']:.3f})"
    )
    min_speed, max_memory = CHUNKED_TARGET if args.loss_chunk_tokens else TARGET[args.device]
    missed = [
        name
        # judged as printed, to 3 decimals: a few hundred bytes over a peak of gigabytes is no miss
        for name, ok in (
            ("words/s", round(r["words_per_s"], 3) >= min_speed),
            ("peak memory", round(r["peak_memory"], 3) <= max_memory),
        )
        if not ok
    ]
    met = not missed
    print(
        f"RATIO tempered/stock: words/s {r['words_per_s']:.3f}x (target >= {min_speed:g}) | peak memory "
        f"{r['peak_memory']:.3f}x (target <= {max_memory:g}) | targets: "
        + ("OK" if met else f"MISSED ({', '.join(missed)})")
        + f" | words/CPU-s {r['words_per_cpu_s']:.3f}x | step memory {r['step_memory']:.3f}x"
    )
    return {**r, "target": f"words/s >= {min_speed:g}, peak memory <= {max_memory:g}", "met": met}


# --division: each path of tempered_ce against stock, and the default path against the division
DIVISION_RATIOS = (("division", "stock"), ("tempered", "division"))


def paths_ratio(wall, cpu, peaks, a, b):
    """a against b, printed and returned (no target: a comparison of tempered_ce's two paths)."""
    r = ratio_numbers(wall, cpu, peaks, a, b)
    print(
        f"ratio {a}/{b}: words/s {r['words_per_s']:.3f}x (paired per round {r['paired_words_per_s_median']:.3f}x "
        f"[{r['paired_words_per_s_min']:.3f} .. {r['paired_words_per_s_max']:.3f}]) | peak memory "
        f"{r['peak_memory']:.3f}x | words/CPU-s {r['words_per_cpu_s']:.3f}x | step memory {r['step_memory']:.3f}x"
    )
    return {**r, "target": None, "met": None}


if __name__ == "__main__":
    main()
