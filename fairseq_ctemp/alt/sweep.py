"""Planning and running a sweep: every option checked before anything is written, experiment.json
and each run's config.json, the plan, then the runs (locally, a few at a time, on CPU or GPUs, each
in its own process) and finalize, or a SLURM job array."""

import concurrent.futures
import datetime
import json
import math
import os
import shlex
import threading

from .. import greedy_vs_beam, translate
from ..criterions.checks import TEMPERATURE_RANGE
from .children import call, child_env, sweep_command
from .common import (
    AltError,
    RunFailed,
    bleu_tokenize,
    check_data_location,
    data_dir,
    data_tag,
    direction,
    fmt,
    prepared,
    read_config,
    read_json,
    say,
    tool,
    tool_env,
    write_json,
)
from .finalize import pending as finalize_pending
from .presets import (
    DEFAULT_VARIANT,
    MAX_LEN,
    PRESETS,
    baseline_variant,
    canonical_variant,
    variant_dir_name,
    variant_model,
    variant_names,
    variant_spec,
)
from .records import read_run
from .training import last_saved_update, read_log, train_argv


def run_name(t, ls, sem, variant=DEFAULT_VARIANT):
    """T1-ls0.1-sem0 for the preset's Transformer (the names of sweeps before variants), else with
    the variant first: ct_transformer-T1-ls0.1-sem0, fixed_lstm-tau2-T1-ls0.1-sem0."""
    name = f"T{fmt(t)}-ls{fmt(ls)}-sem{fmt(sem)}"
    return name if variant == DEFAULT_VARIANT else f"{variant_dir_name(variant)}-{name}"


def experiment_dir(work, src, tgt, preset, tag, seed):
    """WORK/sweep/<src>-<tgt>.<preset>.<tag> for seed 1, with .seed<N> for another seed; a
    directory of an older version, which kept one seed per WORK under the plain name, is used for
    the seed its runs were trained with."""
    base = os.path.abspath(os.path.join(work, "sweep", f"{src}-{tgt}.{preset}.{tag}"))
    named = f"{base}.seed{seed}"
    if seed == 1 or (not os.path.exists(named) and experiment_seed(base) == seed):
        return base
    return named


def experiment_seed(exp_dir):
    """The --seed of the runs in an experiment directory (None: no run yet)."""
    for name in sorted(os.listdir(exp_dir)) if os.path.isdir(exp_dir) else []:
        config = read_config(os.path.join(exp_dir, name, "config.json"))
        if config is not None:
            return config["seed"]
    return None


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
    temperatures = args.temperatures or (preset["temperatures"] if DEFAULT_VARIANT in variants else [1.0])
    check_grid(args, temperatures)
    scalar = {k: getattr(args, k) if getattr(args, k) is not None else preset[k] for k in SCALAR_SETTINGS}
    check_scalars(args, scalar)
    seeds = args.seeds or [1]
    if any(seed < 0 for seed in seeds) or len(set(seeds)) < len(seeds):
        raise AltError(f"--seed must be distinct integers >= 0, got {','.join(map(str, seeds))}")
    check_variants(args, variants, temperatures)
    check_finalize_group(args, temperatures, variants)
    check_decoding_options(args)
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
    """--variants in canonical spelling, each once."""
    variants = []
    for variant in [DEFAULT_VARIANT] if args.variants is None else args.variants:
        try:
            variants.append(canonical_variant(variant))
        except ValueError as e:
            raise AltError(f"--variants: {e}; choose from {', '.join(variant_names())}") from None
    return list(dict.fromkeys(variants))


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
    untempered = [v for v in variants if variant_spec(v)["criterion"] != "tempered_ce"]
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


def compared_variants(variants):
    """The variants finalize compares with their baseline's T=1 run: those whose baseline is in the
    sweep (e.g. lstm,sact_lstm: sact_lstm against lstm; lstm is the baseline, not compared)."""
    return [v for v in variants if v != DEFAULT_VARIANT and baseline_variant(v) in variants]


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


def prepared_or_planned(args, src, tgt, ddir):
    """The prepared data's record of ``ddir``; in a dry run a stand-in with a warning when it is not
    prepared yet (else AltError, saying how to prepare it)."""
    data = prepared(ddir)
    if data is not None:
        return data
    message = (
        f"{src}-{tgt}: {ddir} is not prepared: run ctemp-alt-data prepare {src}-{tgt} "
        f"--work {args.work}"
        + (f" --vocab {args.vocab}" if args.vocab != 8192 else "")
        + (f" --subwords {args.subwords}" if args.subwords != "spm" else "")
        + (f" --train-subset {args.train_subset}" if args.train_subset else "")
        + (f" --carve-test {args.carve_test}" if args.carve_test else "")
    )
    if not args.dry_run:
        raise AltError(message)
    say("warning: " + message)
    return {"has_test": None, "remove_bpe": "sentencepiece" if args.subwords == "spm" else "subword_nmt"}


def checked_run_config(run_dir, config, writes):
    """The config of a run: ``config`` for a new run, the one it was started with otherwise (its
    --max-update raised where asked; AltError for any other change); writes[path] gets what must be
    written."""
    path = os.path.join(run_dir, "config.json")
    old = read_config(path)
    if old is None:
        writes[path] = config
        return config
    if old == config:
        return config
    if not raised_max_update(old, config):
        raise AltError(
            f"{run_dir} was started with other fairseq-train options:\n  "
            f"{shlex.join(old['train_args'])}\nnow:\n  {shlex.join(config['train_args'])}\n"
            "use another --work, or the options it was started with"
        )
    config = config_with_raised_max_update(run_dir, old, config)
    if config is not old:
        writes[path] = config
    return config


def plan(args):
    """Check every setting, then create / check experiment.json and each run's config.json (not in
    a dry run; nothing is written unless everything is valid). Returns
    [(exp_dir, exp, [(run_dir, config, state)])]."""
    preset = PRESETS[args.preset]
    temperatures, scalar, variants = check_settings(args, preset)
    tag = data_tag(args.subwords, args.vocab, args.train_subset, args.carve_test)
    experiments, writes = [], {}
    for text, seed in [(text, seed) for text in args.directions for seed in args.seeds or [1]]:
        src, tgt = direction(text)
        ddir = os.path.abspath(data_dir(args.work, src, tgt, tag))
        data = prepared_or_planned(args, src, tgt, ddir)
        exp_dir = experiment_dir(args.work, src, tgt, args.preset, tag, seed)
        if any(exp_dir == e[0] for e in experiments):
            continue  # the direction given twice
        exp = {
            "src": src,
            "tgt": tgt,
            "preset": args.preset,
            "data": os.path.relpath(ddir, exp_dir),
            "data_tag": tag,
            "subsets": ["valid", "test"] if data["has_test"] else ["valid"],
            "bleu_tokenize": args.sacrebleu_tokenize or bleu_tokenize(tgt),
            "decode_args": shlex.split(args.decode_args) if args.decode_args is not None else MAX_LEN,
            "primary": [args.primary_label_smoothing, args.primary_sem_weight],
            **scalar,
        }
        check_experiment(exp_dir, exp, writes)
        runs = []
        for variant, t, ls, sem in run_grid(args, temperatures, variants):
            config = run_config(variant, t, ls, sem, seed, preset, scalar, data, args)
            run_dir = os.path.join(exp_dir, config["name"])
            config = checked_run_config(run_dir, config, writes)
            runs.append((run_dir, config, run_state(run_dir)))
        experiments.append((exp_dir, dict(exp, data=ddir), runs))
    if not args.dry_run:
        for path, obj in writes.items():
            write_json(path, obj)
    return experiments


def check_experiment(exp_dir, exp, writes):
    """An existing experiment.json must hold these settings (its data in this work directory);
    a new one is queued in `writes`."""
    existing = read_json(os.path.join(exp_dir, "experiment.json"))
    if existing is None:
        writes[os.path.join(exp_dir, "experiment.json")] = exp
        return
    check_data_location(exp_dir, existing, AltError)
    existing["data"] = exp["data"]  # the same directory, maybe named by an absolute path
    if existing != exp and raised_max_update(existing, exp):
        writes[os.path.join(exp_dir, "experiment.json")] = exp  # its runs are checked in plan()
    elif existing != exp:
        diff = sorted(k for k in set(exp) | set(existing) if exp.get(k) != existing.get(k))
        raise AltError(
            f"{exp_dir} was started with other settings ({', '.join(diff)}: "
            f"{ {k: existing.get(k) for k in diff} }); use another --work or the same options"
        )


def max_update_of(settings):
    """The --max-update cap of an experiment.json or a run's config.json (inf: none), and the
    settings without it."""
    if "train_args" in settings:
        argv = settings["train_args"]
        at = [i for i, a in enumerate(argv) if a == "--max-update"]
        cap = float(argv[at[-1] + 1]) if at else 0
        rest = dict(settings, train_args=[a for i, a in enumerate(argv) if i not in at and i - 1 not in at])
    else:
        cap, rest = settings.get("max_update") or 0, {k: v for k, v in settings.items() if k != "max_update"}
    return cap or math.inf, rest


def raised_max_update(old, new):
    """Whether `new` is `old` with a larger --max-update: the one change a started experiment
    takes, so that runs the cap would cut short can go on to early stopping."""
    (old_cap, old_rest), (new_cap, new_rest) = max_update_of(old), max_update_of(new)
    return old_rest == new_rest and new_cap > old_cap


def config_with_raised_max_update(run_dir, old, new):
    """The config a run goes on with under a raised --max-update: the new one if it has not
    finished training (it resumes under the new cap), its own if early stopping ended it (the cap
    never bound). A run the old cap stopped keeps its results: AltError."""
    summary = read_json(os.path.join(run_dir, "train.json"))
    if summary is None:
        return new
    stop_reason = summary["stop_reason"]  # (a TrainingSummary's)
    if stop_reason == "early stop":
        return old
    raise AltError(
        f"--max-update: {run_dir} stopped at --max-update {max_update_of(old)[0]:g} "
        f"({stop_reason}), and its averaged checkpoint and scores are final; "
        "train longer in another --work"
    )


def run_grid(args, temperatures, variants):
    """(variant, T, LS, SEM) of every run: the transformer variant at every T x LS x SEM; each other
    variant at the primary LS and SEM, at every T (ct_transformer, which learns its temperature: at
    T=1 only)."""
    grid = []
    for variant in variants:
        if variant == DEFAULT_VARIANT:
            grid += [
                (variant, t, ls, sem)
                for t in temperatures
                for ls in args.label_smoothing
                for sem in args.sem_weights
            ]
        else:
            grid += [
                (variant, t, args.primary_label_smoothing, args.primary_sem_weight)
                for t in temperatures
                if variant_spec(variant)["criterion"] == "tempered_ce" or fmt(t) == "1"
            ]
    return grid


def criterion_args(variant, t, ls, sem):
    if variant_spec(variant)["criterion"] == "ct_cross_entropy":
        return ["--criterion", "ct_cross_entropy", "--label-smoothing", fmt(ls)]
    return [
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        fmt(t),
        "--label-smoothing",
        fmt(ls),
        "--sem-weight",
        fmt(sem),
    ]


def run_config(variant, t, ls, sem, seed, preset, scalar, data, args):
    model = variant_model(variant, args.preset)[0]
    train_args = model + preset["training"] + criterion_args(variant, t, ls, sem)
    train_args += [
        "--eval-bleu",
        "--eval-bleu-args",
        json.dumps({"beam": 1, "max_len_a": float(MAX_LEN[1]), "max_len_b": int(MAX_LEN[3])}),
        "--eval-bleu-remove-bpe",
        data["remove_bpe"],
        "--best-checkpoint-metric",
        "bleu",
        "--maximize-best-checkpoint-metric",
        "--patience",
        str(scalar["patience"]),
        "--validate-interval-updates",
        str(scalar["interval"]),
        "--save-interval-updates",
        str(scalar["interval"]),
        "--keep-interval-updates",
        str(max(scalar["average"], 1)),
        # validate and save every `interval` updates only (not also at epoch ends)
        "--validate-interval",
        "1000000",
        "--save-interval",
        "1000000",
        "--no-epoch-checkpoints",
        "--seed",
        str(seed),
        "--log-format",
        "json",
        "--log-interval",
        str(scalar["log_interval"]),
    ]
    if scalar["max_update"]:
        train_args += ["--max-update", str(scalar["max_update"])]
    train_args += args.fairseq_args
    return {
        "name": run_name(t, ls, sem, variant),
        "variant": variant,
        "seed": seed,
        "temperature": t,
        "label_smoothing": ls,
        "sem_weight": sem,
        "train_args": train_args,
    }


def run_state(run_dir):
    if os.path.exists(os.path.join(run_dir, "run.json")):
        return f"done (dev greedy BLEU {read_run(run_dir).eval['valid'].greedy.bleu:.2f})"
    if os.path.exists(os.path.join(run_dir, "train.json")):
        return "trained; averaging / decoding to do"
    if os.path.exists(os.path.join(run_dir, "checkpoint_last.pt")):
        update = last_saved_update(run_dir, read_log(os.path.join(run_dir, "train.log")))
        return (
            f"interrupted: resumes from checkpoint_last.pt (update {update if update is not None else '?'})"
        )
    return "to train"


def print_plan(experiments, args, device):
    where = (
        "SLURM: a job array of the runs to do, then one finalize job per direction"
        if args.slurm
        else f"GPUs {','.join(args.gpus)}, {args.gpus_per_run} per run ({len(gpu_slots(args))} runs at a time)"
        if args.gpus
        else f"CPU, {args.jobs} run(s) at a time, {device.threads or 'default'} thread(s) each"
    )
    print(f"plan ({'dry run: nothing is started' if args.dry_run else 'starting'}): {where}")
    for exp_dir, exp, runs in experiments:
        todo = [r for r in runs if not r[2].startswith("done")]
        shown = " and ".join({"valid": "dev", "test": "test"}[x] for x in exp["subsets"])
        print(
            f"\n{os.path.basename(exp_dir)}  ({exp_dir})\n  data {exp['data']}; scores "
            f"{shown}"
            + ("" if "test" in exp["subsets"] else " (no test split: dev numbers only)")
            + f"; sacrebleu tokenize={exp['bleu_tokenize']}\n  {len(runs)} runs, {len(todo)} to do:"
        )
        for _, config, state in runs:
            print(f"    {config['name']:<30} {state}")
        variants = list(dict.fromkeys(config["variant"] for _, config, _ in runs))
        if variants != [DEFAULT_VARIANT]:
            others = [v for v in variants if v != DEFAULT_VARIANT]
            print(
                f"  note: {', '.join(others)}: at label smoothing {fmt(exp['primary'][0])}, SEM "
                f"{fmt(exp['primary'][1])} only, at each T of --temperatures"
                + (" (ct_transformer: T=1 only)" if "ct_transformer" in others else "")
                + "; --label-smoothing and --sem-weights are the transformer's grid"
            )
        for variant in variants:
            todo_of = [r for r in todo if r[1]["variant"] == variant]
            if not todo_of:
                continue
            run_dir, config, _ = todo_of[0]
            differ = " (its other runs differ in T / LS / SEM)" if len(todo_of) > 1 else ""
            print(
                f"  fairseq-train of {config['name']}{differ}:\n    "
                + shlex.join(["fairseq-train", *train_argv(exp, run_dir, config, device)])
            )
        print(
            f"  then per run: average the last {exp['average']} checkpoints; greedy and beam "
            f"{exp['eval_beam']} on {shown}"
        )
        steps = finalize_steps(exp, runs, variants)
        if args.no_finalize:
            print("  no finalize (--no-finalize)")
        elif steps:
            print("  then finalize: " + "; ".join(steps))


def finalize_steps(exp, runs, variants):
    """What finalize will do for one experiment, in words (nothing: [])."""
    ls0, sem0 = exp["primary"]
    temperatures = {
        c["temperature"]
        for _, c, _ in runs
        if c["variant"] == DEFAULT_VARIANT and (c["label_smoothing"], c["sem_weight"]) == (ls0, sem0)
    }
    steps = []
    if len(temperatures) > 1:
        steps.append(
            f"T_opt by dev greedy BLEU (LS {fmt(ls0)}, SEM {fmt(sem0)}); beams {exp['grid_beams']} x "
            f"lenpens {exp['grid_lenpens']} on dev for T_opt and T=1; paired bootstrap; timing of "
            f"beams {exp['speed_beams']}; T=1 + post-hoc t* (fitted on dev NLL), tuned the same"
        )
    compared = compared_variants(variants)
    if compared:
        steps.append(
            ", ".join(f"{v} against {baseline_variant(v)} T=1" for v in compared)
            + f" (greedy and beam {exp['eval_beam']}, paired bootstrap)"
        )
    return steps


def gpu_slots(args):
    gpus, n = args.gpus, args.gpus_per_run
    if n < 1 or len(gpus) < n:
        raise AltError(f"--gpus-per-run {n} with {len(gpus)} GPU(s) in --gpus {','.join(gpus)}")
    return [",".join(gpus[i : i + n]) for i in range(0, len(gpus) - n + 1, n)]


def execute_local(experiments, args, device):
    """Each run in its own `ctemp-alt-sweep run-one` process (log: RUN/run.log), len(slots) at a
    time; then `ctemp-alt-sweep finalize` per experiment (log: EXPERIMENT/final.log)."""
    slots = gpu_slots(args) if args.gpus else [None] * args.jobs
    free, free_lock, failures = list(slots), threading.Lock(), []

    def child(command, slot, log, what):
        env = child_env(tool_env(device.threads, {"CUDA_VISIBLE_DEVICES": slot} if slot else None))
        call(sweep_command(*command, *device.sweep_options()), env, log, what)

    def work(run_dir, name):
        with free_lock:
            slot = free.pop()
        try:
            say(f"{name}: started" + (f" on GPU {slot}" if slot else ""))
            child(["run-one", run_dir], slot, os.path.join(run_dir, "run.log"), "run")
            result = read_run(run_dir)
            dev = result.eval["valid"]
            say(
                f"{name}: done, dev greedy BLEU {dev.greedy.bleu:.2f}, beam {dev.beam.bleu:.2f} "
                f"({result.training.num_updates} updates, {result.training.stop_reason})"
            )
        except RunFailed as e:
            failures.append(f"{name}: {e}")
            say(f"{name}: FAILED: {e}")
        finally:
            with free_lock:
                free.append(slot)

    todo = [
        (run_dir, f"{os.path.basename(exp_dir)}/{config['name']}")
        for exp_dir, _, runs in experiments
        for run_dir, config, state in runs
        if not state.startswith("done")
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(slots)) as pool:
        list(pool.map(lambda item: work(*item), todo))
    pending = [exp_dir for exp_dir, _, _ in experiments if finalize_pending(exp_dir)]
    if pending and not args.no_finalize:
        try:  # one process for all experiments (logs: EXPERIMENT/final.log)
            child(
                ["finalize", *pending],
                slots[0].split(",")[0] if args.gpus else None,
                os.path.join(os.path.dirname(pending[0]), "finalize.log"),
                "finalize",
            )
        except RunFailed as e:
            failures.append(f"finalize: {e}")
        for exp_dir in pending:
            log = os.path.join(exp_dir, "final.log")
            lines = []
            if os.path.exists(log):
                with open(log, encoding="utf-8") as f:
                    lines = [line.rstrip() for line in f]
            lines = [line for line in lines if line.startswith(os.path.basename(exp_dir) + ":")]
            say(lines[-1] if lines else f"{os.path.basename(exp_dir)}: finalize did not finish")
    if failures:
        raise AltError(
            f"{len(failures)} step(s) failed (re-run the same command to retry):\n" + "\n".join(failures)
        )


def sbatch_path():
    """SLURM's sbatch, or AltError saying where --slurm needs to run (checked before the plan)."""
    return tool(
        "sbatch",
        "--slurm: sbatch (SLURM's) is not on PATH: run on a SLURM login node, or leave out --slurm "
        "to run here",
    )


def submit_slurm(experiments, args, device):
    stamp = f"{datetime.datetime.now():%Y%m%d-%H%M%S}"
    sdir = os.path.abspath(os.path.join(args.work, "sweep", "slurm", stamp))
    todo = [
        run_dir for _, _, runs in experiments for run_dir, _, state in runs if not state.startswith("done")
    ]
    scripts = slurm_scripts(experiments, args, device, sdir, todo)
    extra = shlex.split(args.slurm_args or "")
    if args.dry_run:
        for name, text in scripts.items():
            print(f"\n--- {sdir}/{name}\n{text}", end="")
        print(
            f"\nwould submit: sbatch --parsable {shlex.join(extra)} runs.sbatch; then "
            "sbatch --dependency=afterok:<its id> finalize.sbatch"
        )
        return
    sbatch = sbatch_path()
    os.makedirs(sdir)
    for name, text in scripts.items():
        with open(os.path.join(sdir, name), "w", encoding="utf-8") as f:
            f.write(text)

    def submit(script, *options):
        command = [sbatch, "--parsable", *extra, *options, os.path.join(sdir, script)]
        return call(command, tool_env(), what="sbatch").strip().split(";")[0]

    job = None
    if todo:
        job = submit("runs.sbatch")
        print(f"submitted job array {job}: {len(todo)} runs ({sdir}/runs.txt)")
    if "finalize.sbatch" in scripts:
        final = submit("finalize.sbatch", *([f"--dependency=afterok:{job}"] if job else []))
        print(f"submitted finalize job {final}" + (f" (after {job})" if job else ""))


def slurm_scripts(experiments, args, device, sdir, todo):
    """{file name: text} of the job array of the runs still to do and of the finalize job."""
    run_options = device.sweep_options()
    cpus = args.slurm_cpus or (device.threads or 1 if device.cpu else 4 * args.gpus_per_run)
    resources = ([f"#SBATCH --gres=gpu:{args.gpus_per_run}"] if not device.cpu else []) + [
        f"#SBATCH --cpus-per-task={cpus}"
    ]
    # the jobs import the package this sweep runs from (e.g. a checkout)
    python_path = f"export PYTHONPATH={shlex.quote(tool_env()['PYTHONPATH'])}"
    head = ["#!/bin/bash", *resources]
    scripts = {}
    if todo:
        scripts["runs.txt"] = "".join(r + "\n" for r in todo)
        lines = [
            "#SBATCH --job-name=alt-runs",
            f"#SBATCH --array=0-{len(todo) - 1}",
            f"#SBATCH --output={sdir}/run-%A_%a.out",
            "set -euo pipefail",
            python_path,
            f'run=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {shlex.quote(sdir)}/runs.txt)',
            f'exec {shlex.join(sweep_command("run-one"))} "$run" ' + shlex.join(run_options),
        ]
        scripts["runs.sbatch"] = "\n".join(head + lines) + "\n"
    if not args.no_finalize:
        exp_dirs = [exp_dir for exp_dir, _, _ in experiments]
        lines = [
            "#SBATCH --job-name=alt-finalize",
            f"#SBATCH --output={sdir}/finalize-%j.out",
            "set -euo pipefail",
            python_path,
            "exec " + shlex.join(sweep_command("finalize", *exp_dirs, *run_options)),
        ]
        scripts["finalize.sbatch"] = "\n".join(head + lines) + "\n"
    return scripts
