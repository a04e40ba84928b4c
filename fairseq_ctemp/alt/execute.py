"""Running a planned ALT sweep: the plan printed, then each run in its own process (locally, a few
at a time, on CPU or GPUs) and finalize per experiment, or a SLURM job array and its finalize jobs."""

import concurrent.futures
import datetime
import os
import shlex
import threading

from .children import call, child_env, sweep_command
from .common import HELD_STATUS, AltError, RunFailed, RunHeld, fmt, say, tool, tool_env
from .finalize import pending as finalize_pending
from .gpus import cuda_visible_devices
from .presets import DEFAULT_VARIANT, baseline_variant, compared_variants
from .records import prepared, read_run
from .training import train_argv


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
        shown, why = scored_subsets(exp_dir, exp)
        print(
            f"\n{os.path.basename(exp_dir)}  ({exp_dir})\n  data {exp.data}; scores {shown}{why}"
            f"; sacrebleu tokenize={exp.bleu_tokenize}\n  {len(runs)} runs, {len(todo)} to do:"
        )
        for _, config, state in runs:
            print(f"    {config.name:<30} {state}")
        variants = list(dict.fromkeys(config.variant for _, config, _ in runs))
        if variants != [DEFAULT_VARIANT]:
            others = [v for v in variants if v != DEFAULT_VARIANT]
            print(
                f"  note: {', '.join(others)}: at label smoothing {fmt(exp.primary[0])}, SEM "
                f"{fmt(exp.primary[1])} only, at each T of --temperatures"
                + (" (ct_transformer: T=1 only)" if "ct_transformer" in others else "")
                + "; --label-smoothing and --sem-weights are the transformer's grid"
            )
        for variant in variants:
            todo_of = [r for r in todo if r[1].variant == variant]
            if not todo_of:
                continue
            run_dir, config, _ = todo_of[0]
            differ = " (its other runs differ in T / LS / SEM)" if len(todo_of) > 1 else ""
            print(
                f"  fairseq-train of {config.name}{differ}:\n    "
                + shlex.join(["fairseq-train", *train_argv(exp, run_dir, config, device)])
            )
        print(
            f"  then per run: average the last {exp.average} checkpoints; greedy and beam "
            f"{exp.eval_beam} on {shown}"
        )
        steps = finalize_steps(exp, runs, variants)
        if args.no_finalize:
            print("  no finalize (--no-finalize)")
        elif steps:
            print("  then finalize: " + "; ".join(steps))


def scored_subsets(exp_dir, exp):
    """The splits the runs are scored on, in words, and why where it is not dev and test. A dry run
    before the data is prepared (without --carve-test, whose test split is known) cannot know
    whether the corpus has a test split."""
    if "test" in exp.subsets:
        return "dev and test", ""
    if prepared(os.path.join(exp_dir, exp.data)) is None:
        return "dev, and test if the corpus has a test split", " (the data is not prepared yet)"
    return "dev", " (no test split: dev numbers only)"


def finalize_steps(exp, runs, variants):
    """What finalize will do for one experiment, in words (nothing: [])."""
    ls0, sem0 = exp.primary
    temperatures = {
        c.temperature
        for _, c, _ in runs
        if c.variant == DEFAULT_VARIANT and (c.label_smoothing, c.sem_weight) == (ls0, sem0)
    }
    steps = []
    if len(temperatures) > 1:
        steps.append(
            f"T_opt by dev greedy BLEU (LS {fmt(ls0)}, SEM {fmt(sem0)}); beams {exp.grid_beams} x "
            f"lenpens {exp.grid_lenpens} on dev for T_opt and T=1; paired bootstrap; timing of "
            f"beams {exp.speed_beams}; T=1 + post-hoc t* (fitted on dev NLL), tuned the same"
        )
    compared = compared_variants(variants)
    if compared:
        steps.append(
            ", ".join(f"{v} against {baseline_variant(v)} T=1" for v in compared)
            + f" (greedy and beam {exp.eval_beam}, paired bootstrap)"
        )
    return steps


def gpu_slots(args):
    gpus, n = args.gpus, args.gpus_per_run
    if n < 1 or len(gpus) < n:
        raise AltError(f"--gpus-per-run {n} with {len(gpus)} GPU(s) in --gpus {','.join(gpus)}")
    return [",".join(gpus[i : i + n]) for i in range(0, len(gpus) - n + 1, n)]


def execute_local(experiments, args, device):
    """Each run in its own `ctemp-alt-sweep run-one` process (log: RUN/run.log), len(slots) at a
    time; then `ctemp-alt-sweep finalize` per experiment (log: EXPERIMENT/final.log). Returns the
    runs left to another process that works on them (another sweep's)."""
    slots = gpu_slots(args) if args.gpus else [None] * args.jobs
    free, free_lock, failures, held = list(slots), threading.Lock(), [], []

    def work(run_dir, name):
        with free_lock:
            slot = free.pop()
        try:
            say(f"{name}: started" + (f" on GPU {slot}" if slot else ""))
            run_child(device, ["run-one", run_dir], slot, os.path.join(run_dir, "run.log"), "run")
            result = read_run(run_dir)
            dev = result.eval["valid"]
            say(
                f"{name}: done, dev greedy BLEU {dev.greedy.bleu:.2f}, beam {dev.beam.bleu:.2f} "
                f"({result.training.num_updates} updates, {result.training.stop_reason})"
            )
        except RunHeld as e:  # another sweep trains it: not a failure of this one
            held.append(name)
            say(f"{name}: left to the process working on it ({e})")
        except RunFailed as e:
            failures.append(f"{name}: {e}")
            say(f"{name}: FAILED: {e}")
        finally:
            with free_lock:
                free.append(slot)

    todo = [
        (run_dir, f"{os.path.basename(exp_dir)}/{config.name}")
        for exp_dir, _, runs in experiments
        for run_dir, config, state in runs
        if not state.startswith("done")
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(slots)) as pool:
        list(pool.map(lambda item: work(*item), todo))
    pending = [exp_dir for exp_dir, _, _ in experiments if finalize_pending(exp_dir)]
    if pending and not args.no_finalize:
        failures += finalize_local(pending, device, slots[0].split(",")[0] if args.gpus else None)
    if failures:
        raise AltError(
            f"{len(failures)} step(s) failed (re-run the same command to retry):\n" + "\n".join(failures)
        )
    return held


def run_child(device, command, slot, log, what):
    """`ctemp-alt-sweep COMMAND` in a process of its own (on GPU(s) `slot`, if given), logged to log."""
    gpus = {"CUDA_VISIBLE_DEVICES": cuda_visible_devices(slot)} if slot else None
    env = child_env(tool_env(device.threads, gpus))
    call(sweep_command(*command, *device.sweep_options()), env, log, what)


def finalize_local(pending, device, gpu):
    """One `ctemp-alt-sweep finalize` process for the experiments (logs: EXPERIMENT/final.log);
    says each one's last word. Returns the failures ([] or one)."""
    failures = []
    try:
        run_child(
            device,
            ["finalize", *pending],
            gpu,
            os.path.join(os.path.dirname(pending[0]), "finalize.log"),
            "finalize",
        )
    except RunFailed as e:
        failures.append(f"finalize: {e}")
    for exp_dir in pending:
        name = os.path.basename(exp_dir)
        lines = []
        if os.path.exists(os.path.join(exp_dir, "final.log")):
            with open(os.path.join(exp_dir, "final.log"), encoding="utf-8") as f:
                lines = [line.rstrip() for line in f if line.startswith(name + ":")]
        say(lines[-1] if lines else f"{name}: finalize did not finish")
    return failures


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
            "sbatch --dependency=afterany:<its id> finalize.sbatch"
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
        # afterany, as the local sweep: finalize does what the finished runs allow and names the
        # runs it waits for (one failed, or left to another sweep, would keep an afterok job
        # pending for ever)
        final = submit("finalize.sbatch", *([f"--dependency=afterany:{job}"] if job else []))
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
            # a run another sweep works on now is that sweep's to finish: this task has no work
            f'{shlex.join(sweep_command("run-one"))} "$run" {shlex.join(run_options)} || {{ status=$?',
            f'  [ $status -eq {HELD_STATUS} ] || exit $status; echo "$run: left to the process working on it"; }}',
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
