"""Softmax-tempering sweeps on ALT: train (tempered_ce, validation BLEU, early stopping) -> average
the last checkpoints -> greedy and beam at the training temperature, then per direction T_opt,
beam/length-penalty tuning, significance and decoding speed. Resumable; CPU, GPUs or SLURM.
The presets: fairseq_ctemp.alt.presets.PRESETS.

    ctemp-alt-sweep run en-vi [vi-en ...] [--preset base|small|mini] [--temperatures 1,2,3]
                    [--label-smoothing 0.1] [--sem-weights 0] [--variants transformer,ct_transformer]
                    [--seed 1,2] [--jobs N] [--gpus 0,1 [--gpus-per-run G]]
                    [--slurm] [--dry-run | --check] [-- extra fairseq-train options]
    ctemp-alt-sweep run-one RUN_DIR [--cpu] [--threads K] [--gpus-per-run G]   (one run; SLURM tasks)
    ctemp-alt-sweep finalize EXPERIMENT_DIR... [--cpu]                        (T_opt etc.; after the runs)

Model variants (--variants, default transformer): the preset's Transformer is trained at every
T x LS x SEM (softmax tempering); each other variant at the primary LS and SEM, at every T of
--temperatures (ct_transformer, which learns its temperature: T=1 only), with the same data,
training options, early stopping, averaging and decoding; finalize compares each of its runs with
the T=1 transformer (paired bootstrap), or the lstm variants with lstm's. Each variant is described
under `ctemp-alt-sweep run --help` (--variants); fixed_lstm:TAU's runs are
fixed_lstm-tauTAU-T<T>-ls<eps>-sem<w>/.

Layout: WORK/sweep/<src>-<tgt>.<preset>.<data tag>[.seed<N> for a seed other than 1]/ (an
"experiment": experiment.json) with one directory per run, T<T>-ls<eps>-sem<w>/ (other variants:
<variant>-T<T>-ls<eps>-sem<w>/) : config.json (its variant, seed and fairseq-train options), train.log
(fairseq's json log; appended on resume), checkpoints, train.json (how training ended),
checkpoint_avg.pt, eval/<valid|test>/ (ctemp-greedy-vs-beam: greedy and beam --eval-beam) and
run.json, written last. final/ holds T_opt's and T=1's tuned beam (dev grid), the significance tests
and the greedy / beam 4 / beam 10 timings; final.json is written last; compare-<run>.json: a variant
against T=1.

Resuming: run the same command again. Finished runs (run.json) are skipped, an interrupted run
resumes from its checkpoint_last.pt (fairseq) with the early-stopping count restored from its log,
interrupted averaging/decoding is redone from scratch, and every result file appears only complete.
A run directory is locked while a process works on it, so two sweeps never run the same run (the
second leaves it to the first: `run-one` exits with status 75, not counted as failed); the
processes a sweep starts die with it (even by kill -9). A run whose options differ from what its
directory was started with is refused. Every option is checked before anything is written.
"""

import argparse
import contextlib
import json
import os
import shlex
import sys

from ..alt import gpus
from ..alt.children import Tee, die_with_parent, stopping_children
from ..alt.common import HELD_STATUS, AltError, Device, RunFailed, RunHeld, run_main, say
from ..alt.execute import execute_local, print_plan, sbatch_path, submit_slurm
from ..alt.finalize import finalize
from ..alt.presets import DEFAULT_VARIANT, MAX_LEN, PRESETS, VARIANTS, variant_names
from ..alt.runs import run_one
from ..alt.sweep import plan
from . import arguments


def main(argv=None):
    """ctemp-alt-sweep (python -m fairseq_ctemp.cli.alt_sweep)."""
    return run_main(sweep_main, argv)


def sweep_main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["run-one"], ["finalize"]):
        die_with_parent()  # started by a sweep: stop with it
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = build_parser()
    args = parser.parse_args(own)
    if extra and args.command != "run":
        parser.error("options after -- (for fairseq-train) only go with `run`")
    check_device_options(parser, args)
    if args.command == "run-one":
        return run_one_command(args)
    if args.command == "finalize":
        return finalize_command(args)
    args.fairseq_args = extra
    return run_command(args)


def on_cpu(args):
    """Whether the runs go to the CPU: --cpu, a local `run` without --gpus, or --slurm-cpu."""
    if args.command != "run":
        return args.cpu
    return args.cpu or (not args.gpus and not args.slurm) or (args.slurm and args.slurm_gpus is False)


def check_device_options(parser, args):
    """Refuse the device options that where the runs go would ignore; then fill in the defaults."""
    if args.command == "run":
        if args.check and args.dry_run:
            parser.error("--check and --dry-run exclude each other: give one")
        if args.slurm and args.gpus:
            parser.error(
                "--gpus is for local runs; with --slurm each job gets --gpus-per-run GPUs from SLURM"
            )
        if args.cpu and args.gpus:
            parser.error("--cpu and --gpus exclude each other: give one")
        for option, given in (
            ("--slurm-args", args.slurm_args is not None),
            ("--slurm-cpus", args.slurm_cpus is not None),
            ("--slurm-cpu", args.slurm_gpus is False),
        ):
            if given and not args.slurm:
                parser.error(f"{option} only goes with --slurm")
        if args.jobs is not None and (args.gpus or args.slurm):
            parser.error(
                "--jobs is the number of local CPU runs at a time; with --gpus one run goes on each "
                "--gpus-per-run of --gpus (repeat an id to run several on one GPU), with --slurm on each job"
            )
        args.jobs = 1 if args.jobs is None else args.jobs
    if on_cpu(args):
        for option, given in (("--fp16", args.fp16), ("--gpus-per-run", args.gpus_per_run is not None)):
            if given:
                parser.error(
                    f"{option} is for runs on GPUs (--gpus, or --slurm without --slurm-cpu); these go to the CPU"
                )
    args.gpus_per_run = 1 if args.gpus_per_run is None else args.gpus_per_run


def build_parser():
    parser = argparse.ArgumentParser(
        prog="ctemp-alt-sweep",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("run", help="plan, train, decode, finalize (or --dry-run / --slurm)")
    what_options(p)
    budget_options(p)
    execution_options(p)
    device_options(p)
    p.set_defaults(slurm_gpus=None)
    p = commands.add_parser("run-one", help="one run (what the SLURM array tasks call)")
    p.add_argument("run_dir", help="a run's directory, as `run` planned it (its config.json)")
    p.add_argument("--gpus-per-run", type=int, help="GPUs of each run (as given to `run`; default 1)")
    device_options(p)
    p = commands.add_parser("finalize", help="T_opt, tuning, significance, speed of experiments")
    p.add_argument(
        "exp_dirs", nargs="+", metavar="EXPERIMENT_DIR", help="WORK/sweep/<experiment> (its experiment.json)"
    )
    p.add_argument("--gpus-per-run", type=int, help="GPUs of each run (as given to `run`; default 1)")
    device_options(p)
    return parser


def what_options(p):
    """What a sweep trains: directions, preset, data, variants, the T x LS x SEM grid, seeds."""
    p.add_argument("directions", nargs="+", metavar="DIRECTION", help="e.g. en-vi vi-en")
    p.add_argument("--work", default=os.environ.get("ALT_WORK", "runs/alt"), help="(env ALT_WORK)")
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="base",
        help="; ".join(f"{name}: {preset.about}" for name, preset in PRESETS.items()) + " (default: base)",
    )
    p.add_argument(
        "--temperatures",
        type=arguments.numbers,
        help="the T of the tempered_ce variants (default: the paper's 1,1.2,...,2,3,4,5,10; mini: 1,2,3,4,5; "
        "without the transformer variant: 1)",
    )
    p.add_argument(
        "--label-smoothing",
        type=arguments.numbers,
        default=[0.1],
        help="e.g. 0,0.05,0.1,...,0.5 (default 0.1)",
    )
    p.add_argument(
        "--sem-weights", type=arguments.numbers, default=[0.0], help="e.g. 0,0.1,0.3,0.5 (default 0)"
    )
    p.add_argument(
        "--primary-label-smoothing",
        type=float,
        default=0.1,
        help="the LS of the Table 1 comparison (T_opt vs T=1; default 0.1)",
    )
    p.add_argument(
        "--primary-sem-weight",
        type=float,
        default=0.0,
        help="the SEM weight of the Table 1 comparison (T_opt vs T=1; default 0)",
    )
    p.add_argument("--subwords", choices=("spm", "bpe"), default="spm", help="which prepared data")
    p.add_argument("--vocab", type=int, default=8192, help="which prepared data")
    p.add_argument("--train-subset", type=int, help="which prepared data")
    p.add_argument(
        "--carve-test", type=int, metavar="N", help="which prepared data (ctemp-alt-data --carve-test)"
    )
    p.add_argument(
        "--variants",
        type=arguments.names,
        metavar="NAMES",
        help="models to train, comma-separated (default "
        + DEFAULT_VARIANT
        + "): "
        + "; ".join(f"{name}: {VARIANTS[name.partition(':')[0]].about}" for name in variant_names()),
    )
    p.add_argument(
        "--seed",
        dest="seeds",
        type=arguments.integers,
        metavar="SEEDS",
        help="fairseq --seed of every run (default 1); a list (1,2) trains each seed, each seed but 1 in "
        "its own experiment directory (.seed<N>)",
    )


def budget_options(p):
    """Training and decoding budgets, by default the preset's."""
    for name, kind, what in (
        ("interval", int, "validate (BLEU) and save every N updates"),
        ("patience", int, "stop after N validations without improvement"),
        ("average", int, "average the last N interval checkpoints"),
        ("max-update", int, "cap on updates (mini: 8000; 0: none); may be raised for a started sweep"),
        ("eval-beam", int, "beam of every run's beam decoding (4)"),
        ("log-interval", int, "fairseq --log-interval"),
        ("decode-batch", int, "fairseq-generate --batch-size"),
    ):
        p.add_argument(f"--{name}", type=kind, help=f"{what} (default: the preset's)")
    p.add_argument(
        "--grid-beams", type=arguments.integers, help="dev grid for T_opt and T=1 (base: 2,4,...,12)"
    )
    p.add_argument("--grid-lenpens", type=arguments.numbers, help="(base: 0.6,0.7,...,1.4)")
    p.add_argument("--speed-beams", type=arguments.integers, help="beams timed against greedy (4,10)")
    p.add_argument(
        "--decode-args", help=f"fairseq-generate options for every decoding (default: {shlex.join(MAX_LEN)})"
    )
    p.add_argument(
        "--sacrebleu-tokenize", help="default by target language: zh, ja-mecab/char, char (th lo km), 13a"
    )


def execution_options(p):
    """Where and how the runs go: CPU jobs, GPUs, SLURM."""
    p.add_argument("--jobs", type=int, help="runs at a time on the CPU (default 1)")
    p.add_argument(
        "--gpus",
        type=arguments.comma_list(str, "GPU ids"),
        help="GPU ids for local runs, e.g. 0,1,2,3 (one run per --gpus-per-run GPUs)",
    )
    p.add_argument(
        "--gpus-per-run",
        type=int,
        help="GPUs per run (default 1; > 1: fairseq's own distributed training)",
    )
    p.add_argument("--slurm", action="store_true", help="submit a job array (+ finalize job) with sbatch")
    p.add_argument("--slurm-args", help='extra sbatch options, e.g. "--partition gpu --time 24:00:00"')
    p.add_argument("--slurm-cpus", type=int, help="--cpus-per-task of each job")
    p.add_argument(
        "--slurm-cpu",
        dest="slurm_gpus",
        action="store_false",
        help="SLURM jobs on CPU nodes (default: one node's GPUs, --gpus-per-run)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan and commands; start nothing")
    p.add_argument(
        "--check",
        action="store_true",
        help="check every option as a real sweep would, its GPUs and sbatch included (data not "
        "prepared yet: a warning, as in --dry-run); print no plan, write and start nothing",
    )
    p.add_argument("--no-finalize", action="store_true", help="runs only")


def device_options(p):
    p.add_argument("--cpu", action="store_true", help="train and decode on CPU")
    p.add_argument("--threads", type=int, help="OMP/MKL threads per run (mini: 1)")
    p.add_argument("--fp16", action="store_true", help="fairseq --fp16 (GPUs)")


def run_one_command(args):
    device = Device(args.cpu, args.threads, args.fp16, args.gpus_per_run)
    try:
        with stopping_children():
            result = run_one(args.run_dir, device)
    except RunHeld as e:  # not a failure: the sweep that started this leaves the run to the holder
        print(f"error: {e}", file=sys.stderr)
        sys.exit(HELD_STATUS)
    except RunFailed as e:
        raise AltError(str(e)) from None
    print(json.dumps(result.to_dict()["eval"], indent=2))


def finalize_command(args):
    device = Device(args.cpu, args.threads, args.fp16, args.gpus_per_run)
    for exp_dir in args.exp_dirs:  # all checked before any writes its final.log
        if not os.path.isfile(os.path.join(exp_dir, "experiment.json")):
            raise AltError(
                f"EXPERIMENT_DIR {exp_dir} has no experiment.json: give a directory "
                "WORK/sweep/<direction>.<preset>.<data> made by `ctemp-alt-sweep run`"
            )
    if not args.cpu:
        gpus.require(1, "finalize", "fairseq would decode on the CPU")
    failed = []
    for exp_dir in args.exp_dirs:
        with open(
            os.path.join(exp_dir, "final.log"), "a", encoding="utf-8"
        ) as log, contextlib.redirect_stderr(Tee(sys.stderr, log)), stopping_children():
            try:
                finalize(exp_dir, device)
            except RunFailed as e:
                failed.append(exp_dir)
                say(f"{os.path.basename(os.path.abspath(exp_dir))}: finalize failed: {e}")
    if failed:
        raise AltError(f"finalize failed for {', '.join(failed)}")


def run_command(args):
    if args.slurm and not args.dry_run:
        sbatch_path()  # before the plan writes anything
    preset = PRESETS[args.preset]
    cpu = on_cpu(args)
    threads = args.threads or (preset.threads if cpu else None)
    device = Device(cpu, threads, args.fp16, args.gpus_per_run)
    experiments = plan(args)
    if args.check:
        return
    print_plan(experiments, args, device)
    if args.slurm:
        return submit_slurm(experiments, args, device)
    if args.dry_run:
        return
    with stopping_children():
        held = execute_local(experiments, args, device)
    if held:
        print(
            f"\nleft to the processes working on them: {', '.join(held)}; when they end, tables and "
            f"plots: ctemp-alt-results --work {args.work}"
        )
        return
    print("\nall runs done; tables and plots: ctemp-alt-results --work " + args.work)


if __name__ == "__main__":
    main()
