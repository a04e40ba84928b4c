"""The options of an ALT sweep, every one checked before anything is written or started,
including those used only after training (decoding, finalize): ctemp-alt-sweep run's refusals."""

import shlex

from .. import greedy_vs_beam, translate
from ..criterions.checks import TEMPERATURE_RANGE
from ..training_options import refusal
from . import gpus
from .common import AltError, fmt
from .presets import (
    DEFAULT_VARIANT,
    baseline_variant,
    canonical_variant,
    compared_variants,
    variant_model,
    variant_names,
    variant_spec,
)

# fairseq-train options the sweep sets itself (after --, fairseq would silently take the last one)
SWEEP_TRAIN_OPTIONS = {
    "--criterion": "each run's",
    "--softmax-temperature": "--temperatures",
    "--label-smoothing": "--label-smoothing",
    "--sem-weight": "--sem-weights",
    "--save-dir": "each run's directory",
    "--user-dir": "the plugin",
    "--source-lang": "the direction",
    "-s": "the direction",
    "--target-lang": "the direction",
    "-t": "the direction",
    "--seed": "--seed",
    "--arch": "--preset and --variants",
    "--attention-temperature": "--variants",
    "--patience": "--patience",
    "--max-update": "--max-update",
    "--validate-interval-updates": "--interval",
    "--save-interval-updates": "--interval",
    "--keep-interval-updates": "--average",
    "--log-format": "json, parsed by the recipes",
    "--log-interval": "--log-interval",
}


# fairseq-train options that begin like one the sweep sets; fairseq's argparse takes any other
# unambiguous beginning of an option (--softmax-temp) as that option
FAIRSEQ_OPTIONS_LIKE_SWEEP_OPTIONS = ("--save-interval", "--validate-interval")


def sweep_train_option(option):
    """The option the sweep sets that OPTION (after --) would set: itself or the one it
    abbreviates (None: not one of them)."""
    if option in SWEEP_TRAIN_OPTIONS:
        return option
    if not option.startswith("--") or option in FAIRSEQ_OPTIONS_LIKE_SWEEP_OPTIONS:
        return None
    return next((o for o in SWEEP_TRAIN_OPTIONS if o.startswith(option)), None)


# fairseq-generate options every decoding sets (ctemp-greedy-vs-beam's and the sweep's)
DECODING_OPTIONS = (
    *greedy_vs_beam.OWN_OPTIONS,
    "--batch-size",
    "--remove-bpe",
    "--source-lang",
    "--target-lang",
    "-s",
    "-t",
)


def check_settings(args, preset):
    """Every option of a sweep, including those only used after training (decoding, finalize),
    checked before anything is written or started. Returns (temperatures, scalar settings, variants)."""
    variants = checked_variants(args)
    temperatures = args.temperatures or (preset.temperatures if DEFAULT_VARIANT in variants else [1.0])
    check_grid(args, temperatures)
    scalar = {
        k: getattr(args, k) if getattr(args, k) is not None else getattr(preset, k) for k in SCALAR_SETTINGS
    }
    check_scalars(args, scalar)
    seeds = args.seeds or [1]
    if any(seed < 0 for seed in seeds) or len(set(seeds)) < len(seeds):
        raise AltError(f"--seed must be distinct integers >= 0, got {','.join(map(str, seeds))}")
    check_variants(args, variants, temperatures)
    check_finalize_group(args, temperatures, variants)
    check_decoding_options(args)
    if args.gpus and not args.dry_run:  # (a dry run may plan for another machine's GPUs)
        gpus.check_ids(args.gpus)
    for option in (arg.split("=")[0] for arg in args.fairseq_args if arg.startswith("-")):
        owned = sweep_train_option(option)
        if owned is not None:
            named = option if owned == option else f"{option} (fairseq reads it as {owned})"
            raise AltError(
                f"{named} after -- is set by the sweep ({SWEEP_TRAIN_OPTIONS[owned]}); "
                "fairseq would silently use one value for every run"
            )
    return temperatures, scalar, variants


# the settings a sweep takes from its preset unless an option gives them
SCALAR_SETTINGS = (
    "interval",
    "patience",
    "average",
    "max_update",
    "eval_beam",
    "grid_beams",
    "grid_lenpens",
    "speed_beams",
    "log_interval",
    "decode_batch",
)
# the least value of each integer option
LEAST = {
    "interval": 1,
    "patience": 1,
    "average": 1,
    "max_update": 0,
    "eval_beam": 1,
    "log_interval": 1,
    "decode_batch": 1,
    "jobs": 1,
    "threads": 1,
    "gpus_per_run": 1,
    "slurm_cpus": 1,
}


def checked_variants(args):
    """--variants in canonical spelling; two entries of one run are refused, as in --temperatures."""
    variants = {}  # canonical name: as given
    for variant in [DEFAULT_VARIANT] if args.variants is None else args.variants:
        try:
            name = canonical_variant(variant)
        except ValueError as e:
            raise AltError(f"--variants: {e}; choose from {', '.join(variant_names())}") from None
        if name in variants:
            raise AltError(
                f"--variants: {variants[name]}, {variant} name the same run ({name}); give each once"
            )
        variants[name] = variant
    return list(variants)


def check_grid(args, temperatures):
    """The T x LS x SEM grid: values in range, none twice (two values naming the same run)."""
    low, high = TEMPERATURE_RANGE
    for option, values, ok, allowed in (
        (
            "--temperatures",
            temperatures,
            lambda t: low <= t <= high,
            f"in [{low:g}, {high:g}] (tempered_ce's range)",
        ),
        ("--label-smoothing", args.label_smoothing, lambda e: 0 <= e < 1, "in [0, 1)"),
        ("--sem-weights", args.sem_weights, lambda w: 0 <= w < 1, "in [0, 1) (1: the entropy alone)"),
    ):
        bad = [v for v in values if not ok(v)]
        if bad or not values:
            raise AltError(f"{option} must be {allowed}, got {', '.join(map(fmt, bad)) or 'no values'}")
        names = [fmt(v) for v in values]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise AltError(
                f"{option}: {', '.join(str(v) for v in values if fmt(v) in twice)} name the same "
                f"run ({', '.join(twice)}); give each value once"
            )


def check_scalars(args, scalar):
    """The budgets, the decoding grid and the execution options."""
    for key, least in LEAST.items():
        value = scalar[key] if key in scalar else getattr(args, key)
        if value is not None and value < least:
            raise AltError(f"--{key.replace('_', '-')} must be >= {least}, got {value}")
    for key in ("grid_beams", "speed_beams"):
        if (key == "grid_beams" and not scalar[key]) or any(b < 1 for b in scalar[key]):
            raise AltError(
                f"--{key.replace('_', '-')} must be integers >= 1, got "
                f"{','.join(map(str, scalar[key])) or 'none'}"
            )
    if not scalar["grid_lenpens"] or not all(0 < x < float("inf") for x in scalar["grid_lenpens"]):
        raise AltError(
            f"--grid-lenpens must be finite numbers > 0, got "
            f"{','.join(map(fmt, scalar['grid_lenpens'])) or 'none'}"
        )
    for key in ("grid_beams", "grid_lenpens", "speed_beams"):  # one decoding (and its files) each
        named = [fmt(x) for x in scalar[key]]
        twice = sorted({x for x in named if named.count(x) > 1})
        if twice:
            raise AltError(f"--{key.replace('_', '-')}: {', '.join(twice)} given twice; give each value once")


def check_variants(args, variants, temperatures):
    """Each variant's architecture is registered; ct_transformer (ct_cross_entropy: no fixed T, no
    SEM term) is trained at T=1 and SEM weight 0 only; the tempered_ce variants take any T."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    for variant in variants:
        arch = variant_model(variant, args.preset)[1]
        if arch not in ARCH_MODEL_REGISTRY:
            raise AltError(
                f"--variants {variant}: --arch {arch} (preset {args.preset}) is not registered by this "
                f"fairseq-ctemp; leave {variant} out"
            )
    untempered = [v for v in variants if variant_spec(v).criterion != "tempered_ce"]
    if not untempered:
        return
    listed = ",".join(map(fmt, temperatures))
    tempered = [v for v in variants if v not in untempered]
    if not tempered and any(fmt(t) != "1" for t in temperatures):
        raise AltError(
            f"--temperatures {listed}: {', '.join(untempered)} learns its temperature and trains at T=1 "
            f"only; allowed: --temperatures 1 (or add a tempered_ce variant, e.g. transformer)"
        )
    if "1" not in map(fmt, temperatures):
        raise AltError(
            f"--temperatures {listed}: {', '.join(untempered)} trains at T=1 only; add 1 to --temperatures"
        )
    if args.primary_sem_weight != 0:
        raise AltError(
            f"--primary-sem-weight {fmt(args.primary_sem_weight)}: {', '.join(untempered)} trains with "
            "ct_cross_entropy, which has no SEM term; allowed with it: --primary-sem-weight 0"
        )


def check_finalize_group(args, temperatures, variants=(DEFAULT_VARIANT,)):
    """finalize compares T=1 with the other temperatures at the primary LS / SEM, and every other
    variant with its baseline's T=1 run: the sweep must train them (else --no-finalize). A variant
    without its baseline is allowed only as another variant's baseline."""
    if args.no_finalize:
        return
    baselines = {baseline_variant(v) for v in compared_variants(variants)}
    alone = [
        v for v in variants if v not in (DEFAULT_VARIANT, *baselines) and baseline_variant(v) not in variants
    ]
    if alone:
        wanted = baseline_variant(alone[0])
        raise AltError(
            f"finalize compares {','.join(v for v in alone if baseline_variant(v) == wanted)} with the "
            f"T=1 {wanted}: add {wanted} to --variants (its finished runs are reused, not trained "
            "again), or pass --no-finalize"
        )
    for option, value, values, listed in (
        (
            "--primary-label-smoothing",
            args.primary_label_smoothing,
            args.label_smoothing,
            "--label-smoothing",
        ),
        ("--primary-sem-weight", args.primary_sem_weight, args.sem_weights, "--sem-weights"),
    ):
        if fmt(value) not in map(fmt, values):
            raise AltError(
                f"{option} {fmt(value)} is not among {listed} {','.join(map(fmt, values))}: finalize "
                "could not run; add it, or pass --no-finalize"
            )
    if "1" not in map(fmt, temperatures) or (len(temperatures) < 2 and len(variants) < 2):
        raise AltError(
            f"finalize compares T=1 with the other temperatures: --temperatures "
            f"{','.join(map(fmt, temperatures))} needs 1 and another T (or pass --no-finalize)"
        )


def check_training_options(train_args, variant, fairseq_args):
    """fairseq-train's own parser takes the options of a variant's runs (the preset's, the
    variant's and those after --): one it does not know or a bad value stops the sweep here, not
    each run once it has started."""
    message = refusal(["DATA", *train_args])
    if message is not None:
        given = f" (after --: {shlex.join(fairseq_args)})" if fairseq_args else ""
        raise AltError(f"fairseq-train refuses the options of the {variant} runs{given}: {message}")


def check_decoding_options(args):
    from sacrebleu.metrics import BLEU

    if args.sacrebleu_tokenize and args.sacrebleu_tokenize not in BLEU.TOKENIZERS:
        raise AltError(
            f"--sacrebleu-tokenize must be one of {', '.join(BLEU.TOKENIZERS)}, "
            f"got {args.sacrebleu_tokenize!r}"
        )
    if args.decode_args is None:
        return
    try:
        decode_args = shlex.split(args.decode_args)
    except ValueError as e:
        raise AltError(f"--decode-args {args.decode_args!r}: {e}") from None
    own = [a for a in decode_args if a.split("=")[0] in DECODING_OPTIONS]
    if own:
        raise AltError(
            f"--decode-args: {', '.join(own)} is set by the sweep (--eval-beam, --grid-*, "
            "--decode-batch, the data)"
        )
    try:
        translate.decoding_options(decode_args)
    except translate.TranslateError as e:
        raise AltError(f"--decode-args: {e}") from None


def check_decode_args(decode_args, data_bin, src, tgt, subsets):
    """--decode-args that would stop every run's evaluation after its training, refused before:
    a --max-tokens below the longest sentence of a subset the runs decode (dev, test), or output
    lengths (--max-len-a/-b, --min-len) its shortest source sentence cannot have."""
    from fairseq.data import data_utils

    options = translate.decoding_options(decode_args)
    for subset in subsets:
        source, target = (
            data_utils.load_indexed_dataset(f"{data_bin}/{subset}.{src}-{tgt}.{lang}", None)
            for lang in (src, tgt)
        )
        if source is None or not len(source):
            continue
        # fairseq batches a pair by its longer side (each size counts its </s>)
        longest = max(int(side.sizes.max()) for side in (source, target) if side is not None and len(side))
        if options.max_tokens is not None and longest > options.max_tokens:
            raise AltError(
                f"--decode-args: --max-tokens {options.max_tokens} is below the longest sentence of {subset} in "
                f"{data_bin} ({longest} tokens): give at least {longest}"
            )
        where = f"{subset} in {data_bin}"
        shortest = int(source.sizes.min())
        if problem := translate.length_budget_problem(
            options.max_len_a, options.max_len_b, options.min_len, shortest, where
        ):
            raise AltError(f"--decode-args: {problem}")
