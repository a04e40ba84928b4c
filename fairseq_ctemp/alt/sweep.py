"""Planning an ALT sweep: the experiments' and runs' names and directories, experiment.json and
each run's config.json (written once its options are checked: sweep_checks.py), and each run's
state; running the plan is execute.py's."""

import dataclasses
import json
import math
import os
import shlex

from .. import locks
from ..outputs import write_json
from .common import (
    AltError,
    bleu_tokenize,
    check_data_location,
    data_dir,
    data_tag,
    direction,
    fmt,
    read_json,
    remove_bpe_of,
    say,
)
from .presets import DEFAULT_VARIANT, MAX_LEN, PRESETS, variant_dir_name, variant_model, variant_spec
from .records import RunConfig, Settings, prepared, read_config, read_run
from .sweep_checks import check_decode_args, check_settings, check_training_options
from .training import last_saved_update, read_log


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
            return config.seed
    return None


def prepared_or_planned(args, src, tgt, ddir):
    """What the plan needs of the data directory ``ddir``: (whether it has a test split, fairseq's
    --remove-bpe for its subwords), from its prepare.json; in a dry run, where it is not prepared
    yet, (True with --carve-test, else None: not known before the corpus is read; the --subwords'
    --remove-bpe) with a warning (else AltError, saying how to prepare it)."""
    data = prepared(ddir)
    if data is not None:
        return data.has_test, data.remove_bpe
    message = (
        f"{src}-{tgt}: {ddir} is not prepared: run ctemp-alt-data prepare {src}-{tgt} "
        f"--work {args.work}"
        + (f" --vocab {args.vocab}" if args.vocab != 8192 else "")
        + (f" --subwords {args.subwords}" if args.subwords != "spm" else "")
        + (f" --train-subset {args.train_subset}" if args.train_subset else "")
        + (f" --carve-test {args.carve_test}" if args.carve_test else "")
    )
    if not (args.dry_run or args.check):
        raise AltError(message)
    say("warning: " + message)
    return (True if args.carve_test else None), remove_bpe_of(args.subwords)


def started_with_test_split(exp_dir):
    """Whether the experiment in exp_dir scores a test split (experiment.json); None if not started."""
    path = os.path.join(exp_dir, "experiment.json")
    existing = read_json(path)
    return None if existing is None else "test" in Settings.from_dict(existing, path, AltError).subsets


def checked_run_config(run_dir, config, writes):
    """The config of a run: ``config`` for a new run, the one it was started with otherwise (its
    --max-update raised where asked; AltError for any other change); writes[path] gets what must be
    written."""
    path = os.path.join(run_dir, "config.json")
    old = read_config(path)
    if old is None:
        writes[path] = config.to_dict()
        return config
    if old == config:
        return config
    if not raised_max_update(old.to_dict(), config.to_dict()):
        raise AltError(
            f"{run_dir} was started with other fairseq-train options:\n  "
            f"{shlex.join(old.train_args)}\nnow:\n  {shlex.join(config.train_args)}\n"
            "use another --work, or the options it was started with"
        )
    config = config_with_raised_max_update(run_dir, old, config)
    if config is not old:
        writes[path] = config.to_dict()
    return config


def plan(args):
    """Check every setting, then create / check experiment.json and each run's config.json (not in
    a dry run or --check; nothing is written unless everything is valid). Returns
    [(exp_dir, exp, [(run_dir, config, state)])]."""
    preset = PRESETS[args.preset]
    temperatures, scalar, variants = check_settings(args, preset)
    tag = data_tag(args.subwords, args.vocab, args.train_subset, args.carve_test)
    experiments, writes, checked = [], {}, set()
    for text, seed in [(text, seed) for text in args.directions for seed in args.seeds or [1]]:
        src, tgt = direction(text)
        ddir = os.path.abspath(data_dir(args.work, src, tgt, tag))
        has_test, remove_bpe = prepared_or_planned(args, src, tgt, ddir)
        exp_dir = experiment_dir(args.work, src, tgt, args.preset, tag, seed)
        if has_test is None:  # (a dry run) as the experiment, if started, knows it
            has_test = started_with_test_split(exp_dir)
        if any(exp_dir == e[0] for e in experiments):
            continue  # the direction given twice
        exp = Settings(
            src=src,
            tgt=tgt,
            preset=args.preset,
            data=os.path.relpath(ddir, exp_dir),
            data_tag=tag,
            subsets=["valid", "test"] if has_test else ["valid"],
            bleu_tokenize=args.sacrebleu_tokenize or bleu_tokenize(tgt),
            decode_args=shlex.split(args.decode_args) if args.decode_args is not None else list(MAX_LEN),
            primary=[args.primary_label_smoothing, args.primary_sem_weight],
            **scalar,
        )
        check_experiment(exp_dir, exp, writes)
        if prepared(ddir) is not None:
            check_decode_args(exp.decode_args, os.path.join(ddir, "bin"), src, tgt, exp.subsets)
        runs = []
        for variant, t, ls, sem in run_grid(args, temperatures, variants):
            config = run_config(variant, t, ls, sem, seed, preset, scalar, remove_bpe, args)
            if variant not in checked:  # (its runs differ in T, LS, SEM and seed alone)
                check_training_options(config.train_args, variant, args.fairseq_args)
                checked.add(variant)
            run_dir = os.path.join(exp_dir, config.name)
            config = checked_run_config(run_dir, config, writes)
            runs.append((run_dir, config, run_state(run_dir)))
        experiments.append((exp_dir, dataclasses.replace(exp, data=ddir), runs))
    if not (args.dry_run or args.check):
        for path, obj in writes.items():
            write_json(path, obj)
    return experiments


def check_experiment(exp_dir, exp, writes):
    """An existing experiment.json must hold these settings (its data in this work directory);
    a new one is queued in `writes`."""
    path = os.path.join(exp_dir, "experiment.json")
    existing = read_json(path)
    if existing is None:
        writes[path] = exp.to_dict()
        return
    check_data_location(exp_dir, Settings.from_dict(existing, path, AltError), AltError)
    exp = exp.to_dict()
    existing["data"] = exp["data"]  # the same directory, maybe named by an absolute path
    if existing != exp and raised_max_update(existing, exp):
        writes[path] = exp  # its runs are checked in plan()
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
        f"--max-update: {run_dir} stopped at --max-update {max_update_of(old.to_dict())[0]:g} "
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
                if variant_spec(variant).criterion == "tempered_ce" or fmt(t) == "1"
            ]
    return grid


def criterion_args(variant, t, ls, sem):
    if variant_spec(variant).criterion == "ct_cross_entropy":
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


def run_config(variant, t, ls, sem, seed, preset, scalar, remove_bpe, args):
    model = variant_model(variant, args.preset)[0]
    train_args = model + preset.training + criterion_args(variant, t, ls, sem)
    train_args += [
        "--eval-bleu",
        "--eval-bleu-args",
        json.dumps({"beam": 1, "max_len_a": float(MAX_LEN[1]), "max_len_b": int(MAX_LEN[3])}),
        "--eval-bleu-remove-bpe",
        remove_bpe,
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
    return RunConfig(
        name=run_name(t, ls, sem, variant),
        variant=variant,
        seed=seed,
        temperature=t,
        label_smoothing=ls,
        sem_weight=sem,
        train_args=train_args,
    )


def run_state(run_dir):
    if os.path.exists(os.path.join(run_dir, "run.json")):
        return f"done (dev greedy BLEU {read_run(run_dir).eval['valid'].greedy.bleu:.2f})"
    holder = locks.holder(os.path.join(run_dir, ".lock"))  # another sweep working on it now
    if os.path.exists(os.path.join(run_dir, "train.json")):
        return "trained; averaging / decoding " + (f"now ({holder})" if holder else "to do")
    if holder:
        return f"training now ({holder})"
    if os.path.exists(os.path.join(run_dir, "checkpoint_last.pt")):
        update = last_saved_update(run_dir, read_log(os.path.join(run_dir, "train.log")))
        return (
            f"interrupted: resumes from checkpoint_last.pt (update {update if update is not None else '?'})"
        )
    return "to train"
