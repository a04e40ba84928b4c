"""ctemp-alt-results' report of ALT sweeps (what it writes: its --help): the experiments of a
working directory loaded and selected, their tables (tables.py), figures (plots.py), post-hoc and
systems sections written into OUT as a whole: a new directory, which replaces an existing OUT only
if this tool wrote that one (its MARKER file lists the files) and it holds nothing else."""

import dataclasses
import glob
import io
import os
import shutil
import tempfile

from .. import inputs
from ..progress import progress_bar
from . import posthoc, posthoc_report, systems
from .common import AltError
from .overlap import in_train_line, in_train_of_raw
from .plots import plots
from .presets import DEFAULT_VARIANT, VARIANTS
from .records import (
    Experiment,
    RunResult,
    prepared,
    read_comparisons,
    read_config,
    read_run,
    read_settings,
    read_tempering,
)
from .sections import markdown_table, write_csv
from .tables import run_order, runs_table, table1, table34, variants_table
from .training import training_summary

MARKER = ".alt_results"  # in every OUT this tool writes: the names of the files it wrote


# Table 1 needs T=1 and another T finished in one experiment (a sweep at T=1 only never has it)
NO_TABLE1 = "none: Table 1 needs a finished T=1 run and a finished run at another T in the same experiment"


def load(work):
    experiments = []
    for path in sorted(glob.glob(os.path.join(work, "sweep", "*", "experiment.json"))):
        exp_dir = os.path.dirname(path)
        exp = read_settings(exp_dir, AltError)
        data = prepared(os.path.join(exp_dir, exp.data))  # relative to exp_dir (absolute in older sweeps)
        runs, pending = [], []
        for config_path in sorted(glob.glob(os.path.join(exp_dir, "*", "config.json"))):
            run_dir = os.path.dirname(config_path)
            config = read_config(config_path)
            result = read_run(run_dir)
            if result is None:  # not finished: its training so far, for the runs table and the curves
                settings = ("name", "variant", "seed", "temperature", "label_smoothing", "sem_weight")
                pending.append(
                    RunResult(
                        **{k: getattr(config, k) for k in settings},
                        direction=f"{exp.src}-{exp.tgt}",
                        training=training_summary(run_dir, exp.patience),
                        dir=run_dir,
                    )
                )
            else:
                runs.append(result)
        for group in (runs, pending):
            group.sort(key=run_order)
        experiments.append(
            Experiment(
                name=os.path.basename(exp_dir),
                dir=exp_dir,
                exp=exp,
                runs=runs,
                pending=pending,
                test=test_name(data),
                in_train=in_train_note(data),
                final=read_tempering(exp_dir),
                posthoc=posthoc.load(exp_dir),
                compare=read_comparisons(exp_dir),
            )
        )
    return experiments


def test_name(data):
    """What an experiment's tables call its test split (``data``: its prepared data, or None):
    "carved test" where ctemp-alt-data carved it from train (--carve-test), else "test"."""
    source = (data.test_source if data else None) or ""
    return "carved test" if source.startswith("carved") else "test"


def in_train_note(data):
    """'dev: 6 en, 0 vi, 0 pairs of 1,000; ...': the sentences of an experiment's dev and test splits
    (``data``: its prepared data, or None) also in its train split, read from the data directory's
    raw text (None where that is gone)."""
    counts = data and in_train_of_raw(data.raw, *data.pair, data.sizes)
    return in_train_line(counts, data.sizes) if counts else None


def select(experiments, names=None, variants=None):
    """The experiments named in `names` (all when None), with only the runs, runs in progress and
    comparisons of `variants` (all when None; NAME matches every NAME:VALUE); T_opt's tuning and the
    post-hoc row belong to the transformer variant and go with it. Unknown names raise AltError."""
    if names is not None:
        known = [e.name for e in experiments]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise AltError(
                f"--experiments: no experiment {', '.join(unknown)} in the working directory "
                f"(it has: {', '.join(known)})"
            )
        experiments = [e for e in experiments if e.name in names]
    if variants is None:
        return experiments
    unknown = [v for v in variants if v.partition(":")[0] not in VARIANTS]
    if unknown:
        raise AltError(f"--variants: unknown {', '.join(unknown)} (expected some of: {', '.join(VARIANTS)})")

    def wanted(variant):
        return variant in variants or variant.partition(":")[0] in variants

    with_default = DEFAULT_VARIANT in variants
    return [
        dataclasses.replace(
            e,
            runs=[r for r in e.runs if wanted(r.variant)],
            pending=[r for r in e.pending if wanted(r.variant)],
            compare=[c for c in e.compare if wanted(c.variant)],
            final=e.final if with_default else None,
            posthoc=e.posthoc if with_default else None,
        )
        for e in experiments
    ]


def report(experiments, out):
    t1, t34, tr = table1(experiments), table34(experiments), runs_table(experiments)
    tv = variants_table(experiments)
    write_csv(os.path.join(out, "table1.csv"), *t1)
    write_csv(os.path.join(out, "table34.csv"), *t34)
    write_csv(os.path.join(out, "runs.csv"), *tr)
    if tv[1]:
        write_csv(os.path.join(out, "variants.csv"), *tv)
    md = io.StringIO()
    md.write(
        "# ALT softmax-tempering results\n\n(generated by ctemp-alt-results; † = p < 0.05 "
        "against T=1, sacrebleu paired bootstrap, 1000 samples)\n\n"
    )
    md.write("## Table 1: T_opt vs T=1, greedy and tuned beam\n\n")
    md.write((markdown_table(*t1) if t1[1] else f"({NO_TABLE1})") + "\n\n")
    md.write(
        "T_opt: best dev greedy BLEU among T != 1. Beam width and length penalty of both systems "
        "tuned on dev. Seconds: fairseq's decode time of the scored set (start-up excluded).\n\n"
    )
    md.write(posthoc_report.report(experiments, out))
    md.write(systems.report(experiments, out))
    md.write("## Tables 3 and 4: tempering, label smoothing, SEM\n\n")
    md.write((markdown_table(*t34) if t34[1] else "(no finished run)") + "\n\n")
    md.write(
        "Each row: the run with the best dev greedy BLEU among those its configuration allows "
        "(fixed values: T=1 and the experiment's primary LS / SEM); a configuration that would search "
        "the same runs as an earlier row is left out.\n\n"
    )
    if tv[1]:
        md.write("## Model variants against their baselines\n\n" + markdown_table(*tv) + "\n\n")
        md.write(
            "Each run of another model variant (trained at the primary label smoothing and SEM weight, "
            "at its T; ct_transformer at T=1) against the T=1 run of its baseline (the transformer; "
            "for sact_lstm, lstm) of the same label smoothing and SEM weight: greedy, and beam k "
            "(untuned, as every run is decoded); † = p < 0.05 (paired bootstrap against the "
            "baseline).\n\n"
        )
    md.write("## All runs\n\n" + (markdown_table(*tr) if tr[1] else "(none finished)") + "\n\n")
    if tr[1]:
        md.write(
            "test is: what the test columns score (carved test: ctemp-alt-data --carve-test, the last "
            "pairs of train, removed from train). Last training session s: the wall-clock seconds of "
            "the run's last fairseq-train (start-up and validations included); train words/s: the "
            "median of fairseq's logged target words/s (validations excluded).\n\n"
        )
    for e in progress_bar(experiments, "plots"):
        md.write(f"## {e.name}\n\n")
        if e.in_train:
            md.write(f"Also in train (the same sentence, spaces collapsed): {e.in_train}\n\n")
        if e.pending:
            md.write(f"Not finished: {', '.join(r.name for r in e.pending)}\n\n")
        for png in plots(e, out):
            md.write(f"![{png}]({png})\n\n")
        signatures = sorted({ev.signature for r in e.runs for ev in r.eval.values()})
        if signatures:
            md.write("sacrebleu: " + "; ".join(f"`{s}`" for s in signatures) + "\n\n")
    with open(os.path.join(out, "alt_results.md"), "w", encoding="utf-8") as f:
        f.write(md.getvalue())
    return t1


def check_out(out):
    """Refuse an --out this tool may not replace: anything but a directory it wrote itself (with
    MARKER) holding only the files it wrote (anything else in it would be lost)."""
    if os.path.islink(out) or (os.path.exists(out) and not os.path.isdir(out)):
        raise AltError(f"--out {out} is not a directory (a file or link); choose a new directory")
    if not os.path.isdir(out):
        if problem := inputs.folder_problem(out, made_if_missing=True):
            raise AltError(f"--out {out} {problem}")
        return
    marker = os.path.join(out, MARKER)
    if not os.path.isfile(marker):
        raise AltError(
            f"--out {out} exists and was not written by ctemp-alt-results (it has no {MARKER}); "
            "refusing to replace it: choose a new directory"
        )
    with open(marker, encoding="utf-8") as f:
        ours = {line.strip() for line in f} | {MARKER}
    others = sorted(set(os.listdir(out)) - ours)
    if others:
        raise AltError(
            f"--out {out} has files ctemp-alt-results did not write ({', '.join(others[:5])}"
            f"{', ...' if len(others) > 5 else ''}); move them away or choose another --out"
        )


def replace_dir(out, write):
    """write(tmp) into a new directory next to out, then swap it in for out (which check_out
    allowed) only once complete."""
    parent, name = os.path.split(out)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.new-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # as os.makedirs would (mkdtemp: 0700)
    try:
        result = write(tmp)
        with open(os.path.join(tmp, MARKER), "w", encoding="utf-8") as f:
            f.writelines(n + "\n" for n in sorted(os.listdir(tmp)) if n != MARKER)
    except BaseException:
        shutil.rmtree(tmp)
        raise
    if os.path.exists(out):
        old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
        os.replace(out, old)  # onto the empty directory just made: a fresh, unique name
        os.replace(tmp, out)
        shutil.rmtree(old)
    else:
        os.replace(tmp, out)
    return result
