#!/usr/bin/env python
"""Training words/s and beam-search sentences/s of the plugin's translators against fairseq's stock
transformer of the same size, in one process.

  transformer          --arch transformer, label_smoothed_cross_entropy   (fairseq's own)
  ct_transformer       --arch ct_transformer_alt_<preset>, ct_cross_entropy (contextual temperature)
  ct_transformer_none  the same with --ct-normalization none (our output layer without tau)
  sact_transformer     --arch sact_transformer_alt_<preset>, label_smoothed_cross_entropy
  ct_transformer_chunked  ct_transformer with ct_cross_entropy --loss-chunk-tokens N (against
                       ct_transformer: words/s and the peak memory of a training step)
A model whose architecture is not registered is skipped with a note. Every model gets the
Transformer options (layers, dimensions, heads, dropout, tied decoder embeddings) that
ct_transformer_alt_<preset> and --fairseq-args resolve to; all use label smoothing 0.1.

Training: one fairseq Trainer per model (Adam, clip-norm 1), the same random batches (fairseq's
LanguagePairDataset, batch_by_size, collater), the models in rotating order over the rounds after
discarded warm-up rounds; target words/s (fairseq's wps). Generation: fairseq's SequenceGenerator
(beam 5) after make_generation_fast_, as fairseq-generate, on random sources with min_len = max_len
so that every model decodes the same number of steps.

The analytic bound of ct_transformer / transformer is the ratio of their multiply-accumulates per
target token (forward; the backward pass of a linear layer costs twice its forward, so training has
the same ratio): the temperature's mu = h W1 W2 (d x Q, Q x V) is a second vocabulary-sized layer
beside the output projection (d x V). Element-wise work (the softmaxes over V) is not counted.
"""

import argparse
import os
import statistics
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_common as common  # noqa: E402
import bench_timing as timing  # noqa: E402
from tracing import add_trace_option, check_trace_target, finish_traces, trace_beam_searches, trace_models  # noqa: E402

CPU_DEFAULTS = dict(vocab=8000, max_tokens=2048, preset="mini", loss_chunk_tokens=2048)  # ALT mini's batch
# 16x the tokens that left an H200 idle for 91 % of a step (bench_tempered_ce.GPU_DEFAULTS says why),
# in chunks of an eighth of the batch (smaller ones: more rounds of small kernels)
GPU_DEFAULTS = dict(vocab=16000, max_tokens=65536, preset="base", loss_chunk_tokens=8192)
HELP = dict(
    vocab="dictionary size (source and target)",
    max_tokens="tokens per training batch (--max-tokens)",
    preset="size: ALT mini (2+2 layers, 128/512, 4 heads) or base (Transformer base)",
    loss_chunk_tokens="ct_transformer_chunked's --loss-chunk-tokens",
)
STOCK = "transformer"
MODELS = {  # name: (architecture, options, criterion)
    STOCK: ("transformer", [], "label_smoothed_cross_entropy"),
    "ct_transformer": ("ct_transformer_alt_{preset}", [], "ct_cross_entropy"),
    "ct_transformer_none": (
        "ct_transformer_alt_{preset}",
        ["--ct-normalization", "none"],
        "ct_cross_entropy",
    ),
    "sact_transformer": ("sact_transformer_alt_{preset}", [], "label_smoothed_cross_entropy"),
    "ct_transformer_chunked": (
        "ct_transformer_alt_{preset}",
        ["--loss-chunk-tokens", "{chunk}"],
        "ct_cross_entropy",
    ),
}
WITH_TEMPERATURE = ("ct_transformer", "ct_transformer_chunked")  # the models that read --ct-rank
CHUNKED = ("ct_transformer_chunked", "ct_transformer")  # compared with each other, memory included
# Targets, set first on the CPU, stricter on a GPU: ct_transformer reaches this share of its
# analytic bound; sact_transformer this share of the transformer's words/s (none on the CPU)
BOUND_SHARE = {"cpu": 0.9, "cuda": 0.95}
SACT_SHARE = {"cpu": None, "cuda": 0.9}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_device_options(p, HELP, CPU_DEFAULTS, GPU_DEFAULTS, choices={"preset": ["mini", "base"]})
    p.add_argument(
        "--models",
        default="transformer,ct_transformer,sact_transformer",
        help=f"comma-separated, from {', '.join(MODELS)} (default %(default)s; {STOCK} is needed for the ratios)",
    )
    common.add_timing_options(p, lengths=(8, 40))
    common.add_beam_search_options(p)
    p.add_argument(
        "--fairseq-args",
        default="",
        help="more fairseq-train options of ct_transformer(_none); the other models take the Transformer "
        'options (sizes, dropout, tying) from it, e.g. --fairseq-args="--encoder-layers 1"',
    )
    p.add_argument(
        "--ct-rank",
        type=int,
        help="--ct-rank Q of the models with contextual temperature (ct_transformer, "
        "ct_transformer_chunked; default: that of ct_transformer_alt_<preset>)",
    )
    common.add_json_option(p)
    add_trace_option(p)
    args = p.parse_args(argv)
    common.check_json_target(p, args)
    check_trace_target(p, args)
    common.resolve_device(p, args, CPU_DEFAULTS, GPU_DEFAULTS)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or any(m not in MODELS for m in args.models) or STOCK not in args.models:
        p.error(
            f"--models must be a comma-separated subset of {','.join(MODELS)} with {STOCK}, got {args.models}"
        )
    for name in (
        "batches",
        "rounds",
        "beam",
        "gen_sentences",
        "gen_batch_size",
        "gen_len",
        "vocab",
        "max_tokens",
        "loss_chunk_tokens",
        "ct_rank",
    ):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0 or not 2 <= args.lengths[0] <= args.lengths[1]:
        p.error("--warmup must be >= 0 and --lengths MIN MAX with 2 <= MIN <= MAX")
    torch.set_num_threads(args.threads)
    return args


def training_args(args, data_dir, name):
    """fairseq-train's namespace for one model (its architecture resolved)."""
    from fairseq import options

    arch, extra, criterion = MODELS[name]
    argv = [
        *common.translation_data_args(data_dir),
        "--arch",
        arch.format(preset=args.preset),
        *(x.format(chunk=args.loss_chunk_tokens) for x in extra),
        "--criterion",
        criterion,
        "--label-smoothing",
        "0.1",
        *common.ADAM_ARGS,
        "--max-tokens",
        str(args.max_tokens),
        "--seed",
        str(args.seed),
        *common.device_args(args),
        *(args.fairseq_args.split() if name.startswith("ct_transformer") else []),
        *(["--ct-rank", str(args.ct_rank)] if args.ct_rank and name in WITH_TEMPERATURE else []),
    ]
    return options.parse_args_and_arch(options.get_training_parser(), argv)


def transformer_options():
    """The destinations of fairseq's transformer options (layers, dims, heads, dropout, tying, ...)."""
    from fairseq.models.transformer import TransformerModel

    parser = argparse.ArgumentParser()
    TransformerModel.add_args(parser)
    return [a.dest for a in parser._actions if a.dest != "help"]


def forward_macs(a, src_per_tgt, src_len, tgt_len, beam=None, attention=True):
    """Multiply-accumulates of the linear layers and (``attention``) of the attention scores and
    weighted sums, per target token of training (teacher forcing) or, with ``beam``, per sentence
    of beam search (the encoder and the cross attention's keys / values once per hypothesis row,
    then every step of every hypothesis). Returns (body, output projection d x V, temperature
    d x Q + Q x V)."""
    d, f, v = a.encoder_embed_dim, a.encoder_ffn_embed_dim, a.vocab
    dd, df = a.decoder_embed_dim, a.decoder_ffn_embed_dim
    att = 2 if attention else 0  # q.k and weights.v: one product of the model dimension each
    encoder_token = a.encoder_layers * (4 * d * d + 2 * d * f + att * src_len * d)
    cross_kv_token = a.decoder_layers * 2 * dd * d  # per source token, per decoder layer
    step = a.decoder_layers * (6 * dd * dd + 2 * dd * df + att * (tgt_len + src_len) * dd)
    output, temperature = dd * v, dd * a.ct_rank + a.ct_rank * v
    if beam is None:
        body = src_per_tgt * (encoder_token + cross_kv_token) + step
        return body, output, temperature
    steps = beam * tgt_len
    body = src_len * encoder_token + beam * src_len * cross_kv_token + steps * step
    return body, steps * output, steps * temperature


def main(argv=None):
    args = parse_args(argv)
    common.quiet()
    cuda = args.device == "cuda"
    names, size, task, trainers, sizes = build_trainers(args)
    batches = common.random_batches(args, task)
    sync = common.device_sync(cuda)
    describe(args, names, size, sizes, batches)
    bound, gen_bound = analytic_bounds(args, size, batches)
    train_wall, train_cpu = timing.time_training(
        trainers, batches, sum(b["ntokens"] for b in batches), args, sync
    )
    peaks = step_peaks(args, names, trainers, batches)  # before beam search: no training after it
    traces = trace_models(args, trainers, batches[0], cuda)
    gen_batches = timing.generation_batches(args, task.source_dictionary, "cuda" if cuda else "cpu")
    generators = timing.beam_generators(trainers, task, args)
    gen_wall, gen_cpu = timing.time_beam_search(generators, gen_batches, args, sync)
    beam_traces = trace_beam_searches(args, generators, gen_batches[0], cuda)
    med = statistics.median
    timing.print_speeds(
        names, (train_wall, train_cpu), (gen_wall, gen_cpu), args.beam, max(20, *map(len, names))
    )
    print(f"\nloadavg at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    summaries = ratios_of(args, names, (train_wall, train_cpu), (gen_wall, gen_cpu), (bound, gen_bound))
    chunked_ratio(args, peaks, train_wall, summaries)
    result = {
        "benchmark": "bench_translation",
        "environment": common.environment(args),
        "config": vars(args),
        "models": {
            name: {
                **common.speed_summary(train_wall[name], train_cpu[name]),
                "sentences_per_s": med(gen_wall[name]),
                "sentences_per_cpu_s": med(gen_cpu[name]),
                "parameters": sizes[name][0],
                "temperature_parameters": sizes[name][1],
                **(
                    {
                        "peak_mib": peaks[name][0] / 2**20,
                        "step_mib": (peaks[name][0] - peaks[name][1]) / 2**20,
                    }
                    if name in peaks
                    else {}
                ),
            }
            for name in names
        },
        "ratios": summaries,
        "cuda_max_memory_allocated_mib": common.cuda_max_memory_mib(cuda),
        "process_max_rss_mib": common.max_rss_mib(),
        "traces": traces,
        "beam_traces": beam_traces,
    }
    common.write_json(args.json, result)
    finish_traces(args)
    return result


def build_trainers(args):
    """(the models that exist, the preset's resolved size, task, {name: Trainer}, {name:
    (parameters, temperature parameters)}); every model at ct_transformer_alt_<preset>'s size."""
    import fairseq.tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.utils import import_user_module

    import_user_module(
        argparse.Namespace(user_dir=os.path.abspath(common.PLUGIN_DIR))
    )  # registers ct_transformer
    names = []
    for name in args.models:
        arch = MODELS[name][0].format(preset=args.preset)
        if arch in ARCH_MODEL_REGISTRY:
            names.append(name)
        else:
            print(f"note: {name} skipped: --arch {arch} is not registered")
    with tempfile.TemporaryDirectory() as data_dir:
        common.write_pair_dictionaries(data_dir, args.vocab)
        size = training_args(args, data_dir, "ct_transformer")  # the preset, resolved
        namespaces = {}
        for name in names:
            namespaces[name] = training_args(args, data_dir, name)
            if not name.startswith("ct_transformer"):  # the same size as ct_transformer_alt_<preset>
                for dest in transformer_options():
                    if getattr(size, dest, None) is not None:
                        setattr(namespaces[name], dest, getattr(size, dest))
        cfgs = {name: convert_namespace_to_omegaconf(ns) for name, ns in namespaces.items()}
        task = fairseq.tasks.setup_task(cfgs[STOCK].task)
    trainers, sizes = {}, {}
    for name, cfg in cfgs.items():
        torch.manual_seed(args.seed)
        model = task.build_model(cfg.model)
        head = sum(p.numel() for n, p in model.named_parameters() if "output_head.temperature" in n)
        sizes[name] = (sum(p.numel() for p in model.parameters()), head)
        trainers[name] = common.peak_keeping_trainer(cfg, task, model, task.build_criterion(cfg.criterion))
    return names, size, task, trainers, sizes


def step_peaks(args, names, trainers, batches):
    """{name: (peak, resting) bytes} of a training step (the largest over the batches) of
    ct_transformer_chunked and ct_transformer, when both run."""
    if not all(name in names for name in CHUNKED):
        return {}
    return {
        name: max(common.peak_bytes(trainers[name], b, args.device == "cuda") for b in batches)
        for name in CHUNKED
    }


def chunked_ratio(args, peaks, train_wall, summaries):
    """ct_transformer_chunked against ct_transformer: words/s and step_peaks' memory, printed and
    added to summaries."""
    if not peaks:
        return
    (peak_c, rest_c), (peak_p, rest_p) = (peaks[name] for name in CHUNKED)
    speed = statistics.median(train_wall[CHUNKED[0]]) / statistics.median(train_wall[CHUNKED[1]])
    cuda = args.device == "cuda"
    method = "torch.cuda.max_memory_allocated" if cuda else "torch.profiler memory events + resting tensors"
    print(
        f"RATIO {CHUNKED[0]}/{CHUNKED[1]}: training words/s {speed:.3f}x | peak memory {peak_c / peak_p:.3f}x "
        f"({peak_c / 2**20:.1f} / {peak_p / 2**20:.1f} MiB, {method}) | step memory "
        f"{(peak_c - rest_c) / (peak_p - rest_p):.3f}x (peak minus resting parameters and optimizer state)"
    )
    summaries["/".join(CHUNKED)] = {
        "training_words_per_s": speed,
        "peak_memory": peak_c / peak_p,
        "step_memory": (peak_c - rest_c) / (peak_p - rest_p),
        "memory_method": method,
        "target": None,
        "met": None,
    }


def describe(args, names, size, sizes, batches):
    """The set-up, printed before the measurement."""
    words = sum(b["ntokens"] for b in batches)
    src_words = sum(int(b["net_input"]["src_lengths"].sum()) for b in batches)
    sentences = sum(b["nsentences"] for b in batches)
    print(common.versions_line(args))
    print(
        "config:",
        " ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()),
    )
    print(
        f"size (ct_transformer_alt_{args.preset}): {size.encoder_layers}+{size.decoder_layers} layers, "
        f"{size.encoder_embed_dim}-d, FFN {size.encoder_ffn_embed_dim}, {size.encoder_attention_heads} heads, "
        f"tied decoder embeddings {size.share_decoder_input_output_embed}, dropout {size.dropout}; "
        f"vocab {args.vocab}, Q = {size.ct_rank}, {common.precision(args)}, adam, label smoothing 0.1"
    )
    for name in names:
        arch, extra, criterion = MODELS[name]
        total, head = sizes[name]
        print(
            f"{name:20} {' '.join(['--arch', arch.format(preset=args.preset), *(x.format(chunk=args.loss_chunk_tokens) for x in extra), '--criterion', criterion])}: "
            f"{total / 1e6:.3f}M parameters ({head / 1e6:.3f}M in the temperature)"
        )
    print(
        f"training batches: {len(batches)}, {sentences} sentences, {words} target / {src_words} source words "
        f"per segment, padded target shapes {[tuple(b['target'].shape) for b in batches]}"
    )


def analytic_bounds(args, size, batches):
    """ct_transformer / transformer speed bounds from the MACs of training and of beam search, printed."""
    words = sum(b["ntokens"] for b in batches)
    src_words = sum(int(b["net_input"]["src_lengths"].sum()) for b in batches)
    sentences = sum(b["nsentences"] for b in batches)
    a = argparse.Namespace(**vars(size), vocab=args.vocab)
    tgt_len, src_len = words / sentences, src_words / sentences
    body, output, temperature = forward_macs(a, src_words / words, src_len, tgt_len)
    bound = (body + output) / (body + output + temperature)
    g_body, g_output, g_temperature = forward_macs(a, 1.0, src_len, args.gen_len, beam=args.beam)
    gen_bound = (g_body + g_output) / (g_body + g_output + g_temperature)
    print(
        f"analytic MACs per target token of training (forward; backward x2 for all): body {body / 1e6:.3f}M + "
        f"output projection {output / 1e6:.3f}M + temperature {temperature / 1e6:.3f}M -> bound "
        f"ct_transformer/transformer = {bound:.3f}"
    )
    print(
        f"analytic MACs per sentence of beam-{args.beam} search ({args.gen_len} steps): body {g_body / 1e6:.1f}M + "
        f"output projection {g_output / 1e6:.1f}M + temperature {g_temperature / 1e6:.1f}M -> bound {gen_bound:.3f}"
    )
    return bound, gen_bound


def ratios_of(args, names, train, gen, bounds):
    """Each model against stock transformer, printed and returned (ct_transformer: against its bound)."""
    (train_wall, train_cpu), (gen_wall, gen_cpu), (bound, gen_bound) = train, gen, bounds
    med, summaries = statistics.median, {}
    share, sact_share = BOUND_SHARE[args.device], SACT_SHARE[args.device]
    for name in names:
        if name == STOCK:
            continue
        t = med(train_wall[name]) / med(train_wall[STOCK])
        g = med(gen_wall[name]) / med(gen_wall[STOCK])
        paired = common.round_ratios(train_wall[name], train_wall[STOCK])
        tc = med(train_cpu[name]) / med(train_cpu[STOCK])
        gc = med(gen_cpu[name]) / med(gen_cpu[STOCK])
        line = (
            f"RATIO {name}/{STOCK}: training words/s {t:.3f}x (paired per round {med(paired):.3f}x "
            f"[{min(paired):.3f} .. {max(paired):.3f}]) | beam-{args.beam} sentences/s {g:.3f}x | per CPU-second "
            f"{tc:.3f}x / {gc:.3f}x"
        )
        summary = {
            "training_words_per_s": t,
            "generation_sentences_per_s": g,
            "training_words_per_cpu_s": tc,
            "generation_sentences_per_cpu_s": gc,
            **common.paired(train_wall[name], train_wall[STOCK], "paired_training_words_per_s"),
            "target": None,
            "met": None,
        }
        if name == "ct_transformer":
            verdict = lambda x, b: "OK" if x >= share * b else "MISSED"  # noqa: E731
            line += (
                f" | analytic bound {bound:.3f} / {gen_bound:.3f}: {t / bound:.0%} / {g / gen_bound:.0%} of it "
                f"(target >= {share:.0%}: {verdict(t, bound)} / {verdict(g, gen_bound)})"
            )
            summary.update(
                analytic_bound_training=bound,
                analytic_bound_generation=gen_bound,
                share_of_bound_training=t / bound,  # what the target is about, kept in the file
                share_of_bound_generation=g / gen_bound,
                target=f"training words/s and sentences/s >= {share:.0%} of the analytic bound",
                met=t >= share * bound and g >= share * gen_bound,
            )
        if name == "sact_transformer" and sact_share is not None:
            line += f" (target training words/s >= {sact_share:g}: {'OK' if t >= sact_share else 'MISSED'})"
            summary.update(target=f"training words/s >= {sact_share:g}", met=t >= sact_share)
        summaries[f"{name}/{STOCK}"] = summary
        print(line)
    return summaries


if __name__ == "__main__":
    main()
