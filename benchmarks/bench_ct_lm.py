#!/usr/bin/env python
"""Words/s and peak memory of the contextual-temperature LM heads against fairseq's stock LMs.

In one process, one fairseq Trainer per model, all with the same body (same layers, dims, dropout,
seed, optimizer; but for fairseq's stock LSTM, see below), on the same language-modelling batches.
--body transformer (default):

  A  stock  fairseq --arch transformer_lm --adaptive-softmax-cutoff C, --criterion adaptive_loss
  B  ct-ada --arch ct_transformer_lm --output-head adaptive (contextual temperature), ct_cross_entropy
  C  ct-full --arch ct_transformer_lm --output-head softmax (CT over all V words), ct_cross_entropy
  D  ada-noT --arch ct_transformer_lm --output-head adaptive --ct-normalization none (our head, tau = 1)

--body lstm: the PTB LSTM LM of examples/language_model/ptb_converged_experiment.sh (its sizes,
dropouts and batches; the Adam settings above stand in for its lr, clip-norm and weight decay, which
hardly change the cost), tied input/output embedding:

  A  stock   fairseq --arch lstm_lm, --criterion cross_entropy (one hidden size for all its layers:
             the first of --lstm-hidden-sizes, then its projection to the embedding dim)
  B  softmax --arch ct_lstm_lm --output-head softmax --ct-normalization none, ct_cross_entropy
  C  ct      the same with contextual temperature (--ct-normalization softmax --ct-rank Q)
  D  mos     --arch ct_lstm_lm --output-head mos --mos-components M --ct-normalization none
  E  ct-mos  the same with contextual temperature

The batches are a random token stream (words drawn from a Zipf distribution over the dictionary's
frequency order, so the adaptive softmax's tail clusters are hit as with real text; sentences end
with </s>) put through fairseq's own TokenBlockDataset (--sample-break-mode none),
MonolingualDataset, batch_by_size and collater, like fairseq's language_modeling task does.
After discarded warm-up rounds, every round runs each model on the same batches, the model order
rotated from round to round. Throughput is target words/s (fairseq's wps) and words per CPU-second;
ratios are of medians and, per round, of paired segments. Peak memory is measured as in
bench_common.py (torch.profiler memory events on CPU, the CUDA allocator's high-water mark).
"""

import argparse
import os
import shlex
import statistics
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as common  # noqa: E402
import bench_timing as timing  # noqa: E402
from tracing import add_trace_option, check_trace_target, finish_traces, trace_models  # noqa: E402

WT2_VOCAB = 33278  # WikiText-2's vocabulary
CPU_DEFAULTS = dict(max_tokens=1024, tokens_per_sample=256, layers=2, dim=256, ffn=1024, heads=4)
# 8x the tokens that left an H200 idle for 89 % of a step (bench_tempered_ce.GPU_DEFAULTS says why)
GPU_DEFAULTS = dict(max_tokens=65536, tokens_per_sample=512, layers=6, dim=512, ffn=2048, heads=8)
BODY_DEFAULTS = {  # the transformer's beside CPU_DEFAULTS / GPU_DEFAULTS; the LSTM's on any device
    "transformer": dict(vocab=WT2_VOCAB, ct_rank=280),
    # examples/language_model/ptb_converged_experiment.sh: PTB's 10k words, batches of 20 x 70
    "lstm": dict(
        vocab=10000,
        max_tokens=1400,
        tokens_per_sample=70,
        dim=128,
        lstm_hidden_sizes="256,128",
        ct_rank=64,
        mos_components=2,
    ),
}
BODY_OPTIONS = {  # the options of one body only
    "transformer": ("layers", "ffn", "heads", "cutoffs"),
    "lstm": ("lstm_hidden_sizes", "mos_components"),
}
PTB_DROPOUTS = dict(
    dropout=0.2, dropout_input=0.2, dropout_hidden=0.1, dropout_embedding=0, weight_dropout=0.2
)
HELP = dict(
    max_tokens="tokens per batch (--max-tokens)",
    tokens_per_sample="block length (--tokens-per-sample)",
    layers="decoder layers",
    dim="embedding dim",
    ffn="FFN dim",
    heads="attention heads",
)
CT_NORMALIZATIONS = ("softmax", "lambda_tanh", "tanh_plus_lambda")  # those with mu = h W1 W2, and so Q
FAIRSEQ_OPTIONS = {  # this script's options that models pass on to fairseq
    "cutoffs": "--adaptive-softmax-cutoff",
    "ct_rank": "--ct-rank",
    "ct_normalization": "--ct-normalization",
    "mos_components": "--mos-components",
}
MODELS = {  # name: (label, fairseq options beyond the common ones, FAIRSEQ_OPTIONS they take)
    "A": ("stock", ["--arch", "transformer_lm", "--criterion", "adaptive_loss"], ["cutoffs"]),
    "B": (
        "ct-ada",
        ["--arch", "ct_transformer_lm", "--output-head", "adaptive", "--criterion", "ct_cross_entropy"],
        ["cutoffs", "ct_rank", "ct_normalization"],
    ),
    "C": (
        "ct-full",
        ["--arch", "ct_transformer_lm", "--output-head", "softmax", "--criterion", "ct_cross_entropy"],
        ["ct_rank", "ct_normalization"],
    ),
    "D": (
        "ada-noT",
        [
            "--arch",
            "ct_transformer_lm",
            "--output-head",
            "adaptive",
            "--ct-normalization",
            "none",
            "--criterion",
            "ct_cross_entropy",
        ],
        ["cutoffs"],
    ),
}
RATIOS = (("B", "A", 0.8), ("C", "A", None), ("B", "C", None), ("D", "A", None), ("B", "D", None))
CT_LSTM = ["--arch", "ct_lstm_lm", "--criterion", "ct_cross_entropy", "--output-head"]
LSTM_MODELS = {  # --body lstm
    "A": ("stock", ["--arch", "lstm_lm", "--criterion", "cross_entropy"], []),
    "B": ("softmax", [*CT_LSTM, "softmax", "--ct-normalization", "none"], []),
    "C": ("ct", [*CT_LSTM, "softmax"], ["ct_rank", "ct_normalization"]),
    "D": ("mos", [*CT_LSTM, "mos", "--ct-normalization", "none"], ["mos_components"]),
    "E": ("ct-mos", [*CT_LSTM, "mos"], ["mos_components", "ct_rank", "ct_normalization"]),
}
LSTM_RATIOS = tuple((x, y, None) for x, y in ("BA", "CA", "DA", "EA", "CB", "DB", "ED"))
BODIES = {"transformer": (MODELS, RATIOS), "lstm": (LSTM_MODELS, LSTM_RATIOS)}


def resolve_body_options(p, args):
    """Refuse an option of the other body; fill the body's defaults of those left unset."""
    for body, keys in BODY_OPTIONS.items():
        given = [key for key in keys if body != args.body and getattr(args, key) is not None]
        if given:
            p.error(f"--{given[0].replace('_', '-')} is an option of --body {body} only")
    for key, value in BODY_DEFAULTS[args.body].items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    lstm = BODY_DEFAULTS["lstm"]
    common.add_device_options(
        p,
        HELP,
        CPU_DEFAULTS,
        GPU_DEFAULTS,
        default_note=lambda key: f"--body lstm {lstm[key]}" if key in lstm else "--body transformer only",
    )
    p.add_argument("--body", choices=list(BODIES), default="transformer", help="(default %(default)s)")
    p.add_argument(
        "--vocab",
        type=int,
        help=f"dictionary size, specials included (default {BODY_DEFAULTS['transformer']['vocab']}, "
        f"WikiText-2; --body lstm {lstm['vocab']}, PTB)",
    )
    p.add_argument(
        "--lstm-hidden-sizes",
        help=f"--body lstm: LSTM sizes, one per layer (default {lstm['lstm_hidden_sizes']})",
    )
    p.add_argument(
        "--cutoffs",
        help="--adaptive-softmax-cutoff of A, B, D (default: 2000,10000 scaled "
        "by vocab/33278, i.e. 2000,10000 at WikiText-2 size; --body transformer only)",
    )
    p.add_argument(
        "--ct-rank",
        type=int,
        help=f"--ct-rank Q of the CT models (default {BODY_DEFAULTS['transformer']['ct_rank']}; "
        f"--body lstm {lstm['ct_rank']})",
    )
    p.add_argument(
        "--ct-normalization",
        default="softmax",
        choices=CT_NORMALIZATIONS,
        help="of the CT models (transformer B, C; lstm C, E; default softmax)",
    )
    p.add_argument(
        "--mos-components",
        type=int,
        help=f"--body lstm: M of the MoS models D, E (default {lstm['mos_components']})",
    )
    p.add_argument(
        "--models",
        help="comma-separated subset of the body's models, transformer A,B,C,D, lstm A,B,C,D,E "
        "(default all; A is needed for the ratios to stock)",
    )
    p.add_argument(
        "--zipf", type=float, default=1.0, help="Zipf exponent of the word distribution (default 1)"
    )
    common.add_timing_options(p, rounds_help="timed rounds, each running every model")
    p.add_argument(
        "--fairseq-args",
        default="",
        help="more fairseq-train options for all models, "
        'e.g. --fairseq-args="--adaptive-softmax-dropout 0.1"',
    )
    common.add_json_option(p)
    add_trace_option(p)
    args = p.parse_args(argv)
    resolve_args(p, args)
    return args


def resolve_args(p, args):
    """Check the parsed options against each other; fill the defaults that depend on others."""
    common.check_json_target(p, args)
    check_trace_target(p, args)
    resolve_body_options(p, args)
    transformer = args.body == "transformer"
    common.resolve_device(p, args, *((CPU_DEFAULTS, GPU_DEFAULTS) if transformer else ({}, {})))
    if transformer and args.cutoffs is None:
        args.cutoffs = ",".join(str(max(1, round(c * args.vocab / WT2_VOCAB))) for c in (2000, 10000))
    models = BODIES[args.body][0]
    args.models = [m.strip().upper() for m in (args.models or ",".join(models)).split(",") if m.strip()]
    if not args.models or any(m not in models for m in args.models):
        p.error(f"--models must be a comma-separated subset of {','.join(models)}, got {args.models}")
    if args.batches < 1 or args.rounds < 1 or args.warmup < 0:
        p.error("--batches and --rounds must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)


def config(args):
    """The options of this run (those of the other body left out)."""
    other = {key for body, keys in BODY_OPTIONS.items() if body != args.body for key in keys}
    return {key: value for key, value in vars(args).items() if key not in other}


def model_options(args, name):
    """The fairseq options that make model `name` of this body (beyond the body's size options)."""
    _, options, keys = BODIES[args.body][0][name]
    return options + [x for key in keys for x in (FAIRSEQ_OPTIONS[key], str(getattr(args, key)))]


def body_options(args, name):
    """The fairseq options of the body's size and dropout."""
    if args.body == "transformer":
        return [
            "--decoder-layers",
            str(args.layers),
            "--decoder-embed-dim",
            str(args.dim),
            "--decoder-input-dim",
            str(args.dim),
            "--decoder-output-dim",
            str(args.dim),  # (config default: 512)
            "--decoder-ffn-embed-dim",
            str(args.ffn),
            "--decoder-attention-heads",
            str(args.heads),
            "--dropout",
            "0.1",
        ]
    sizes = args.lstm_hidden_sizes.split(",")
    if name == "A":  # fairseq's lstm_lm: one hidden size for all layers, projected to the embedding dim
        return [
            "--decoder-embed-dim",
            str(args.dim),
            "--decoder-hidden-size",
            sizes[0],
            "--decoder-layers",
            str(len(sizes)),
            "--decoder-out-embed-dim",
            str(args.dim),
            "--share-decoder-input-output-embed",
            "--decoder-dropout-in",
            str(PTB_DROPOUTS["dropout_input"]),
            "--decoder-dropout-out",  # between the layers and on the output
            str(PTB_DROPOUTS["dropout"]),
        ]
    dropouts = [x for key, p in PTB_DROPOUTS.items() for x in ("--" + key.replace("_", "-"), str(p))]
    return ["--embed-dim", str(args.dim), "--lstm-hidden-sizes", args.lstm_hidden_sizes, *dropouts]


def fairseq_cfg(args, data_dir, name):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    argv = [
        data_dir,
        "--user-dir",
        os.path.abspath(common.PLUGIN_DIR),
        "--task",
        "language_modeling",
        "--tokens-per-sample",
        str(args.tokens_per_sample),
        "--sample-break-mode",
        "none",
        *body_options(args, name),
        "--seed",
        str(args.seed),
        *common.ADAM_ARGS,
        "--max-tokens",
        str(args.max_tokens),
        "--ddp-backend",
        "legacy_ddp",  # adaptive_loss refuses pytorch_ddp (single process anyway)
        *common.device_args(args),
        *model_options(args, name),
        *args.fairseq_args.split(),
    ]
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))


def zipf_batches(args, dictionary):
    """fairseq-collated LM batches of a Zipf-distributed token stream: word i of the dictionary (in
    its frequency order) has probability proportional to 1 / (i + 1) ** zipf."""
    from fairseq.data import ListDataset, MonolingualDataset, TokenBlockDataset

    rng, d = np.random.default_rng(args.seed), dictionary
    words = np.arange(d.nspecial, len(d))
    p = 1.0 / np.arange(1, len(words) + 1, dtype=np.float64) ** args.zipf
    total = 2 * args.batches * args.max_tokens  # twice the tokens needed
    lengths = rng.integers(8, 61, total // 8)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), total) + 1]
    sentences = [
        torch.from_numpy(np.append(rng.choice(words, k - 1, p=p / p.sum()), d.eos())) for k in lengths
    ]
    blocks = TokenBlockDataset(
        ListDataset(sentences, lengths),
        lengths,
        args.tokens_per_sample,
        pad=d.pad(),
        eos=d.eos(),
        break_mode="none",
        include_targets=True,
    )
    ds = MonolingualDataset(
        blocks, blocks.sizes, d, d, add_eos_for_other_targets=False, shuffle=False, targets=["future"]
    )
    batches = ds.batch_by_size(np.arange(len(ds)), max_tokens=args.max_tokens)
    batches = [b for b in batches if len(b) == len(batches[0])]  # full batches (the last block is shorter)
    if len(batches) < args.batches:
        raise ValueError("not enough full batches: --max-tokens smaller than --tokens-per-sample?")
    return [ds.collater([ds[i] for i in b]) for b in batches[: args.batches]]


def resting_bytes(trainer):
    """Bytes of the distinct storages of the parameters, the optimizer's parameters (fp16: fp32
    master copies), their gradients and the optimizer state."""
    tensors = list(trainer.model.parameters())
    optimizer = trainer.optimizer.optimizer
    tensors += [p for group in optimizer.param_groups for p in group["params"]]
    tensors += [t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)]
    tensors += [t.grad for t in tensors if t.grad is not None]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


def step_memory(trainer, sample, cuda):
    """(peak tensor bytes of one train step, resting bytes of this model). Several models share the
    process: on CUDA the step's own high-water mark above what was allocated before it is added to
    this model's resting tensors; on CPU bench_common.peak_bytes (profiler memory events)."""
    if not cuda:
        return common.peak_bytes(trainer, sample, cuda=False)
    trainer.zero_grad()
    torch.cuda.synchronize()
    resting, before = resting_bytes(trainer), torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    trainer.train_step([sample])
    torch.cuda.synchronize()
    return resting + torch.cuda.max_memory_allocated() - before, resting


def cluster_shares(batches, cutoffs, pad):
    """Fraction of target words in the shortlist and in each tail cluster."""
    target = torch.cat([b["target"].reshape(-1) for b in batches])
    target = target[target.ne(pad)]
    cluster = torch.bucketize(target, torch.tensor(cutoffs), right=True)
    return [float((cluster == k).float().mean()) for k in range(len(cutoffs) + 1)]


def forward_macs(args, name, shares, vocab):
    """Multiply-accumulates per target word of one forward pass of the output layer (fairseq's
    adaptive softmax: tail k projects d -> d / 4**(k+1) -> its words, only for its own targets)."""
    d, q = args.dim, args.ct_rank
    cut = [int(c) for c in args.cutoffs.split(",")] + [vocab]
    if name == "C":
        return d * vocab + d * q + q * vocab
    sizes = [cut[k + 1] - cut[k] for k in range(len(cut) - 1)]
    macs = d * (cut[0] + len(sizes)) + sum(
        s * (d * (d // 4 ** (k + 1)) + d // 4 ** (k + 1) * n)
        for k, (s, n) in enumerate(zip(shares[1:], sizes))
    )
    if name == "B":  # + mu = h W1 W2 for the head entries, and for its own cluster's words
        macs += d * q + q * (cut[0] + len(sizes)) + sum(s * q * n for s, n in zip(shares[1:], sizes))
    return macs


def command_line():
    """The command as run, its interpreter relative to the working directory when it lies below it
    (`.venv/bin/python`): a result file names no machine's paths."""
    interpreter, *rest = sys.orig_argv
    relative = os.path.relpath(interpreter)
    return shlex.join([interpreter if relative.startswith("..") else relative, *rest])


def main(argv=None):
    args = parse_args(argv)
    command = command_line() if argv is None else f"bench_ct_lm.main({argv!r})"
    common.quiet()
    cuda = args.device == "cuda"
    names = args.models
    task, trainers, sizes = build_trainers(args, names)
    dictionary = task.target_dictionary
    batches = zipf_batches(args, dictionary)
    words = sum(b["ntokens"] for b in batches)
    print(f"command: {command}")
    describe(args, names, sizes, dictionary, batches, words)
    sync = common.device_sync(cuda)
    wall, cpu = timing.time_training(trainers, batches, words, args, sync)
    cuda_peak = common.cuda_max_memory_mib(cuda)  # before step_memory resets the statistics
    peaks = {name: max(step_memory(trainers[name], b, cuda) for b in batches) for name in names}
    if cuda:  # the high-water mark of the whole process: one of the measured steps' at the latest
        cuda_peak = max(cuda_peak, torch.cuda.max_memory_allocated() / 2**20)
    method = "torch.cuda.max_memory_allocated" if cuda else "torch.profiler memory events + resting tensors"
    print_speeds(args, names, wall, cpu, peaks, method, cuda_peak)
    traces = trace_models(args, trainers, batches[0], cuda)
    models = BODIES[args.body][0]
    result = {
        "benchmark": "bench_ct_lm",
        "command": command,
        "environment": common.environment(args),
        "config": config(args),
        "memory_method": method,
        "models": {
            f"{name} {models[name][0]}": {
                **common.speed_summary(wall[name], cpu[name]),
                "peak_mib": peaks[name][0] / 2**20,
                "step_mib": (peaks[name][0] - peaks[name][1]) / 2**20,
            }
            for name in names
        },
        "ratios": ratios_of(args, names, wall, cpu, peaks),
        "cuda_max_memory_allocated_mib": cuda_peak,
        "process_max_rss_mib": common.max_rss_mib(),
        "traces": traces,
    }
    common.write_json(args.json, result)
    finish_traces(args)
    return result


def build_trainers(args, names):
    """(task, {name: fairseq Trainer}, {name: (parameters, output-layer parameters)}) on a
    dictionary of --vocab made-up words."""
    import fairseq.tasks

    with tempfile.TemporaryDirectory() as data_dir:
        with open(os.path.join(data_dir, "dict.txt"), "w") as f:  # + 4 specials: len == --vocab
            f.writelines(f"w{i} {args.vocab - i}\n" for i in range(args.vocab - 4))
        cfgs = {name: fairseq_cfg(args, data_dir, name) for name in names}
        task = fairseq.tasks.setup_task(cfgs[names[0]].task)
    trainers, sizes = {}, {}
    for name in names:
        torch.manual_seed(args.seed)
        model = task.build_model(cfgs[name].model)
        head = [
            p
            for n, p in model.named_parameters()
            if "adaptive_softmax" in n or "output_head" in n or "output_projection" in n
        ]
        sizes[name] = (sum(p.numel() for p in model.parameters()), sum(p.numel() for p in head))
        trainers[name] = common.peak_keeping_trainer(
            cfgs[name], task, model, task.build_criterion(cfgs[name].criterion)
        )
    return task, trainers, sizes


def describe(args, names, sizes, dictionary, batches, words):
    """The set-up, printed before the measurement: versions, body, batches, models, MACs."""
    transformer, models = args.body == "transformer", BODIES[args.body][0]
    print(common.versions_line(args))
    print(
        "config:",
        " ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in config(args).items()),
    )
    print(f"body: {body_text(args)}; vocab {len(dictionary)}, {common.precision(args)}, adam, clip-norm 1")
    batches_text = (
        f"batches: {len(batches)} x {tuple(batches[0]['target'].shape)} (sentences x tokens), "
        f"{words} target words per segment; Zipf {args.zipf}"
    )
    shares = None
    if transformer:
        shares = cluster_shares(batches, [int(c) for c in args.cutoffs.split(",")], dictionary.pad())
        batches_text += (
            f": shortlist / tail clusters (cutoffs {args.cutoffs}) get "
            f"{' / '.join(f'{s:.1%}' for s in shares)} of the targets"
        )
    print(batches_text)
    for name in names:
        total, head = sizes[name]
        print(
            f"{name} = {models[name][0]:8} {' '.join(model_options(args, name))}  ({total / 1e6:.2f}M params: "
            f"body {(total - head) / 1e6:.2f}M + output layer {head / 1e6:.2f}M)"
        )
    print(macs_text(args, names, shares, len(dictionary)))
    print()


def body_text(args):
    if args.body == "transformer":
        return (
            f"transformer_lm, {args.layers} layers, {args.dim}-d, FFN {args.ffn}, {args.heads} heads, "
            "dropout 0.1, untied input embedding"
        )
    first, *others = args.lstm_hidden_sizes.split(",")
    projection = f", then its {first} -> {args.dim} projection" if int(first) != args.dim else ""
    return (
        f"LSTM, tied input/output embedding (counted in the body); B-E: {' '.join(body_options(args, 'B'))}"
        f"; A: {' '.join(body_options(args, 'A'))} (fairseq's lstm_lm has one hidden size for all its "
        f"layers: {len(others) + 1} x {first}{projection})"
    )


def macs_text(args, names, shares, vocab):
    if args.body != "transformer":
        return "forward MACs and cluster shares: analytic for the transformer body only, not computed here"
    body = args.layers * (4 * args.dim**2 + 2 * args.dim * args.ffn)
    macs = {name: forward_macs(args, name, shares, vocab) for name in names}
    text = f"forward MACs per target word (linear layers, analytic): body {body / 1e6:.3g}M + output layer "
    text += ", ".join(f"{name} {macs[name] / 1e6:.3g}M" for name in names)
    if "A" in names and "B" in names:
        text += f"; (body + A) / (body + B) = {(body + macs['A']) / (body + macs['B']):.3f}"
    return text


def print_speeds(args, names, wall, cpu, peaks, method, cuda_peak):
    models, med = BODIES[args.body][0], statistics.median
    print(f"{'':11} {'words/s median [min .. max]':>29} {'words/CPU-s':>11} {'peak MiB':>9} {'step MiB':>9}")
    for name in names:
        (peak, resting), w = peaks[name], wall[name]
        print(
            f"{name} {models[name][0]:9} {med(w):9.0f} [{min(w):7.0f} .. {max(w):7.0f}] {med(cpu[name]):11.0f} "
            f"{peak / 2**20:9.1f} {(peak - resting) / 2**20:9.1f}"
        )
    print(
        f"\npeak: tensor high-water mark of one train step ({method}); step: peak minus this model's "
        f"resting params/grads/optimizer state"
    )
    print(
        f"process max RSS {common.max_rss_mib():.0f} MiB | "
        f"loadavg at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        + (f" | CUDA max_memory_allocated {cuda_peak:.1f} MiB" if args.device == "cuda" else "")
        + "\n"
    )


def ratios_of(args, names, wall, cpu, peaks):
    """Each ratio of BODIES (x against y), printed and returned: words/s, CPU words/s, paired per
    round, peak and step memory, and whether its target is met."""
    (models, ratio_list), med = BODIES[args.body], statistics.median
    print(
        f"{'ratio':13} {'words/s':>8} {'words/CPU-s':>11} {'paired per-round words/s [min .. max]':>38} "
        f"{'peak mem':>9} {'step mem':>9}"
    )
    ratios = {}
    for x, y, target in ratio_list:
        if x not in names or y not in names:
            continue
        paired = common.round_ratios(wall[x], wall[y])
        (peak_x, rest_x), (peak_y, rest_y) = peaks[x], peaks[y]
        speed = med(wall[x]) / med(wall[y])
        verdict = "" if target is None else f"  target >= {target}: {'OK' if speed >= target else 'MISSED'}"
        print(
            f"RATIO {x}/{y} {speed:10.3f}x "
            f"{med(cpu[x]) / med(cpu[y]):10.3f}x {med(paired):19.3f}x [{min(paired):.3f} .. {max(paired):.3f}]"
            f" {peak_x / peak_y:8.3f}x {(peak_x - rest_x) / (peak_y - rest_y):8.3f}x"
            f"   ({models[x][0]} / {models[y][0]}){verdict}"
        )
        ratios[f"{x}/{y}"] = {
            "label": f"{models[x][0]} / {models[y][0]}",
            "words_per_s": speed,
            "words_per_cpu_s": med(cpu[x]) / med(cpu[y]),
            **common.paired(wall[x], wall[y]),
            "peak_memory": peak_x / peak_y,
            "step_memory": (peak_x - rest_x) / (peak_y - rest_y),
            "target": None if target is None else f"words/s >= {target}",
            "met": None if target is None else speed >= target,
        }
    return ratios


if __name__ == "__main__":
    main()
