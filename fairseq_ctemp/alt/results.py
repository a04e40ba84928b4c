"""Tables and plots of ALT sweeps, shaped like the paper's (ctemp-alt-results; what it writes: its
--help). OUT is written as a whole into a new directory, which replaces an existing OUT only if this
tool wrote that one (its MARKER file lists the files) and it holds nothing else."""

import csv
import dataclasses
import glob
import io
import os
import shutil
import tempfile

from ..progress import progress_bar
from . import posthoc, systems
from .common import AltError, fmt, read_config, read_json
from .presets import DEFAULT_VARIANT, VARIANTS
from .records import Experiment, RunResult, read_comparisons, read_run, read_tempering
from .training import training_steps, training_summary, validations

MARKER = ".alt_results"  # in every OUT this tool writes: the names of the files it wrote
SHORT = {"temperature": "T", "label_smoothing": "LS", "sem_weight": "SEM"}
CONFIGS = [  # Table 3 / 4 rows: (name, T free?, LS free?, SEM free?)
    ("Default", False, False, False),
    ("LS", False, True, False),
    ("Temp.", True, False, False),
    ("Temp. & LS", True, True, False),
    ("SEM", False, False, True),
    ("LS & SEM", False, True, True),
    ("Temp. & SEM", True, False, True),
    ("Temp. & LS & SEM", True, True, True),
]

# Table 1 needs T=1 and another T finished in one experiment (a sweep at T=1 only never has it)
NO_TABLE1 = "none: Table 1 needs a finished T=1 run and a finished run at another T in the same experiment"


def load(work):
    experiments = []
    for path in sorted(glob.glob(os.path.join(work, "sweep", "*", "experiment.json"))):
        exp_dir = os.path.dirname(path)
        exp = read_json(path)
        runs, pending = [], []
        for config_path in sorted(glob.glob(os.path.join(exp_dir, "*", "config.json"))):
            run_dir = os.path.dirname(config_path)
            config = read_config(config_path)
            result = read_run(run_dir)
            if result is None:  # not finished: its training so far, for the runs table and the curves
                settings = ("name", "variant", "seed", "temperature", "label_smoothing", "sem_weight")
                pending.append(
                    RunResult(
                        **{k: config[k] for k in settings},
                        direction=f"{exp['src']}-{exp['tgt']}",
                        training=training_summary(run_dir, exp["patience"]),
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
                test=test_name(exp_dir, exp),
                final=read_tempering(exp_dir),
                posthoc=posthoc.load(exp_dir),
                compare=read_comparisons(exp_dir),
            )
        )
    return experiments


def test_name(exp_dir, exp):
    """What an experiment's tables call its test split: "carved test" where ctemp-alt-data carved it
    from train (--carve-test), else "test"."""
    if not exp.get("data"):
        return "test"
    data = os.path.join(exp_dir, exp["data"])  # relative to exp_dir (absolute in older sweeps)
    source = (read_json(os.path.join(data, "prepare.json")) or {}).get("test_source") or ""
    return "carved test" if source.startswith("carved") else "test"


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


def run_order(run):
    """The transformer's runs by LS, SEM and T, then the other variants'."""
    variant = run.variant
    return (
        variant != DEFAULT_VARIANT,
        variant,
        run.label_smoothing,
        run.sem_weight,
        run.temperature,
    )


def tempered(runs):
    """The runs of the transformer variant (softmax tempering)."""
    return [r for r in runs if r.variant == DEFAULT_VARIANT]


def run_label(run):
    """T=2 for the transformer variant; the variant's name for the others, with its T when it has
    one (not ct_transformer, which learns its temperature)."""
    variant = run.variant
    if variant == DEFAULT_VARIANT:
        return f"T={fmt(run.temperature)}"
    if VARIANTS.get(variant.partition(":")[0], {}).get("criterion") == "ct_cross_entropy":
        return variant
    return f"{variant} T={fmt(run.temperature)}"


def scored(run, test="test"):
    """(subset label, eval) of a run: test (named `test`) when there is one, else dev."""
    return (test, run.eval["test"]) if "test" in run.eval else ("dev", run.eval["valid"])


def num(x, digits=2):
    return "" if x is None else f"{x:.{digits}f}"


def p_mark(p):
    return "" if p is None else ("†" if p < 0.05 else "")


def markdown_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def table1(experiments):
    finals = [e for e in experiments if e.final is not None]
    beams = sorted({b for e in finals for b in e.exp["speed_beams"]})
    header = (
        [
            "direction",
            "experiment",
            "scored on",
            "T_opt",
            "greedy T=1",
            "beam T=1 (k, lp)",
            "greedy T_opt",
            "beam T_opt (k, lp)",
            "p greedy",
            "p beam",
            "p greedy T_opt vs beam T=1",
            "greedy s (T_opt)",
        ]
        + [f"beam {b} s" for b in beams]
        + ([f"beam {beams[-1]} / greedy time"] if beams else [])
    )
    rows = []
    for e in finals:
        f = e.final
        u, t = f.systems["untempered"], f.systems["tempered"]
        sig, speed = f.significance, f.speed["tempered"]
        subset = e.test if f.scored_subset == "test" else "dev (tuned on dev too)"
        ratio = (
            (speed.get(f"beam{beams[-1]}_seconds") or 0) / speed[f"greedy_seconds_with_beam{beams[-1]}"]
            if beams and speed.get(f"greedy_seconds_with_beam{beams[-1]}")
            else None
        )
        rows.append(
            [
                f.direction,
                e.name,
                subset,
                fmt(f.t_opt),
                num(u.greedy.bleu),
                f"{num(u.beam.bleu)} ({u.beam.beam}, {fmt(u.beam.lenpen)})",
                num(t.greedy.bleu) + p_mark(sig["greedy"].bleu.p_value),
                f"{num(t.beam.bleu)}{p_mark(sig['beam'].bleu.p_value)} ({t.beam.beam}, {fmt(t.beam.lenpen)})",
                num(sig["greedy"].bleu.p_value, 4),
                num(sig["beam"].bleu.p_value, 4),
                num(sig["tempered_greedy_vs_untempered_beam"].bleu.p_value, 4),
                num(speed["greedy_seconds"]),
            ]
            + [num(speed.get(f"beam{b}_seconds")) for b in beams]
            + ([num(ratio)] if beams else [])
        )
    return header, rows


def runs_table(experiments):
    header = [
        "experiment",
        "direction",
        "variant",
        "T",
        "LS",
        "SEM",
        "seed",
        "updates",
        "stopped by",
        "best dev BLEU (training)",
        "averaged",
        "dev greedy",
        "dev beam",
        "test greedy",
        "test beam",
        "test greedy chrF",
        "beam k",
        *posthoc.RUN_COLUMNS,
        "test is",
        "last training session s",
        "train words/s",
        "code",  # the commit training finished from
        "torch",
    ]
    rows = []
    for e in experiments:
        for r in e.runs:
            ev, tr = r.eval, r.training
            test = ev.get("test")
            rows.append(
                [
                    *settings_cells(e, r),
                    tr.stop_reason,
                    num(tr.best_valid_bleu),
                    len(r.averaged),
                    num(ev["valid"].greedy.bleu),
                    num(ev["valid"].beam.bleu),
                    num(test.greedy.bleu) if test else "",
                    num(test.beam.bleu) if test else "",
                    num(test.greedy.chrf) if test else "",
                    ev["valid"].beam.beam,
                    *posthoc.run_cells(r.dir),
                    e.test if test else "",
                    num(tr.last_session_seconds, 0),
                    num(train_words_per_second(r.dir), 0),
                    tr.code or "",
                    tr.torch or "",
                ]
            )
        for r in e.pending:
            tr = r.training
            rows.append(
                [
                    *settings_cells(e, r),
                    "(not finished)",
                    num(tr.best_valid_bleu),
                ]
                + [""] * (12 + len(posthoc.RUN_COLUMNS))
            )
    return header, rows


def settings_cells(e, r):
    """The first cells of a run's row in runs.csv, finished or not: what it is and its updates."""
    return [
        e.name,
        r.direction,
        r.variant,
        fmt(r.temperature),
        fmt(r.label_smoothing),
        fmt(r.sem_weight),
        r.seed,
        r.training.num_updates,
    ]


def train_words_per_second(run_dir):
    """The median of fairseq's logged target words/s over a run's training intervals (validation
    time excluded): its training speed, comparable between runs on the same machine."""
    wps = sorted(float(r["wps"]) for r in training_steps(run_dir) if "wps" in r)
    return wps[len(wps) // 2] if wps else None


def table34(experiments):
    header = [
        "direction",
        "experiment",
        "configuration",
        "greedy BLEU",
        "scored on",
        "T",
        "LS",
        "SEM",
        "runs searched",
    ]
    rows = []
    for e in experiments:
        runs = tempered(e.runs)
        if not runs:
            continue
        ls0, sem0 = e.exp["primary"]
        searched = set()
        for name, t_free, ls_free, sem_free in CONFIGS:
            candidates = [
                r
                for r in runs
                if (t_free or r.temperature == 1.0)
                and (ls_free or r.label_smoothing == ls0)
                and (sem_free or r.sem_weight == sem0)
            ]
            key = frozenset(r.name for r in candidates)
            if not candidates or key in searched:
                continue  # a configuration the sweep does not vary beyond an earlier row
            searched.add(key)
            best = max(candidates, key=lambda r: r.eval["valid"].greedy.bleu)
            subset, ev = scored(best, e.test)
            rows.append(
                [
                    best.direction,
                    e.name,
                    name,
                    num(ev.greedy.bleu),
                    subset,
                    fmt(best.temperature),
                    fmt(best.label_smoothing),
                    fmt(best.sem_weight),
                    len(candidates),
                ]
            )
    return header, rows


def variants_table(experiments):
    """Every model variant against the T=1 run of its baseline variant (the transformer, or e.g. lstm
    for sact_lstm) in its experiment (finalize's comparisons)."""
    header = [
        "direction",
        "experiment",
        "variant",
        "T",
        "run",
        "baseline",
        "scored on",
        "greedy",
        "greedy T=1",
        "p greedy",
        "beam",
        "beam T=1",
        "p beam",
        "beam k",
        "greedy chrF",
        "greedy chrF T=1",
    ]
    rows = []
    for e in experiments:
        for c in e.compare:
            v, b, sig = c.systems["variant"], c.systems["baseline"], c.significance
            rows.append(
                [
                    c.direction,
                    e.name,
                    c.variant,
                    fmt(c.temperature),
                    c.run,
                    c.baseline_variant,
                    e.test if c.scored_subset == "test" else "dev",
                    num(v.greedy.bleu) + p_mark(sig["greedy"].bleu.p_value),
                    num(b.greedy.bleu),
                    num(sig["greedy"].bleu.p_value, 4),
                    num(v.beam.bleu) + p_mark(sig["beam"].bleu.p_value),
                    num(b.beam.bleu),
                    num(sig["beam"].bleu.p_value, 4),
                    v.beam.beam,
                    num(v.greedy.chrf),
                    num(b.greedy.chrf),
                ]
            )
    return header, rows


def write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def plots(e, out):
    """The PNGs of one experiment; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    ls0, sem0 = e.exp["primary"]
    everything = e.runs + e.pending
    in_primary = [r for r in everything if r.label_smoothing == ls0 and r.sem_weight == sem0]
    curve_runs = sorted(in_primary or everything, key=run_order)
    # each train.log is parsed once, for the learning curves and the entropy / gradient-norm plots
    logs = {r.name: training_steps(r.dir) for r in curve_runs}
    made.append(learning_curves(plt, e, curve_runs, logs, out))
    if not e.runs:
        return [name for name in made if name]
    # the sweeps over T, LS and SEM; the other variants are at the primary LS and SEM only: their
    # own lines (or points) in the plot against T
    variants = [r for r in e.runs if r.variant != DEFAULT_VARIANT]
    primary_variants = [r for r in variants if r.label_smoothing == ls0 and r.sem_weight == sem0]
    for axis_key, fixed_keys, xlabel, tag, points in (
        ("temperature", ("label_smoothing", "sem_weight"), TEMPERATURE_AXIS, "T", primary_variants),
        ("label_smoothing", ("temperature", "sem_weight"), "label smoothing", "LS", ()),
        ("sem_weight", ("temperature", "label_smoothing"), "SEM weight", "SEM", ()),
    ):
        name = f"bleu_vs_{tag}.{e.name}.png"
        made.append(sweep_plot(plt, e, (axis_key, fixed_keys, xlabel), os.path.join(out, name), points))
    group = [r for r in e.runs if r.label_smoothing == ls0 and r.sem_weight == sem0] or e.runs
    logs = {r.name: logs.get(r.name) or training_steps(r.dir) for r in group}
    if any(logs.values()):
        made += training_plots(plt, e, group, logs, out)
    return [name for name in made if name]


TEMPERATURE_AXIS = "training temperature T (other variants: filled greedy, open beam)"
SUBSET_LABEL = {"valid": "dev", "test": "test"}


def sweep_plot(plt, e, axis, path, points=()):
    """BLEU against one setting (axis: its key, the keys of the others, the x label), a line per
    group of the others; `points`: runs of the other variants, a line (or a single marker) per
    variant. Returns the PNG's file name, None when there is nothing to plot."""
    axis_key, fixed_keys, xlabel = axis
    groups = {}
    for r in tempered(e.runs):
        groups.setdefault(tuple(getattr(r, k) for k in fixed_keys), []).append(r)
    groups = {  # one run is a line only beside the other variants' points
        k: sorted(v, key=lambda r: getattr(r, axis_key)) for k, v in groups.items() if len(v) >= 2 or points
    }
    if not groups and not points:
        return None
    subsets = ["valid"] + (["test"] if any("test" in r.eval for r in e.runs) else [])
    fig, axes = plt.subplots(1, len(subsets), figsize=(5.5 * len(subsets), 4), squeeze=False)
    for ax, subset in zip(axes[0], subsets):
        for i, (key, group) in enumerate(sorted(groups.items())):
            tag = ", ".join(f"{SHORT[k]}={fmt(v)}" for k, v in zip(fixed_keys, key))
            plot_group(ax, [r for r in group if subset in r.eval], subset, axis_key, f"C{i}", tag)
        plot_variants(ax, [r for r in points if subset in r.eval], subset, axis_key, len(groups))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{SUBSET_LABEL[subset]} BLEU")
        ax.set_title(f"{e.name}: {SUBSET_LABEL[subset]}")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    save_figure(plt, fig, path)
    return os.path.basename(path)


def plot_group(ax, group, subset, axis_key, color, tag):
    """Greedy and beam BLEU of the transformer runs of one group, against axis_key."""
    if not group:
        return
    xs = [getattr(r, axis_key) for r in group]
    beam = group[0].eval[subset].beam.beam
    ax.plot(xs, [r.eval[subset].greedy.bleu for r in group], "o-", color=color, label=f"greedy ({tag})")
    ax.plot(
        xs,
        [r.eval[subset].beam.bleu for r in group],
        "s--",
        color=color,
        label=f"beam {beam} ({tag})",
    )


def plot_variants(ax, points, subset, axis_key, first_color):
    """The runs of the other variants: filled greedy, open beam, a marker per variant."""
    by_variant = {}
    for r in points:
        by_variant.setdefault(r.variant, []).append(r)
    for j, (variant, group) in enumerate(by_variant.items()):
        group = sorted(group, key=lambda r: getattr(r, axis_key))
        color, marker = f"C{first_color + j}", "^v<>Dph*"[j % 8]
        for system, fill, style in (("greedy", color, "-"), ("beam", "none", "--")):
            beam = f" {group[0].eval[subset].beam.beam}" if system == "beam" else ""
            ax.plot(
                [getattr(r, axis_key) for r in group],
                [getattr(r.eval[subset], system).bleu for r in group],
                marker + style,
                color=color,
                markerfacecolor=fill,
                markersize=8,
                label=f"{variant} {system}{beam}",
            )


def training_plots(plt, e, group, logs, out):
    """Entropy and gradient norm over the training batches of the primary runs."""
    ls0, sem0 = e.exp["primary"]
    made = []
    entropy = [
        ("entropy", "entropy of softmax(D/T) (bits)"),
        ("entropy_untempered", "entropy of softmax(D) (bits)"),
    ]
    for panels, name in (
        (entropy, f"entropy.{e.name}.png"),
        ([("gnorm", "gradient norm")], f"gnorm.{e.name}.png"),
    ):
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
        for ax, (field, ylabel) in zip(axes[0], panels):
            for i, r in enumerate(group):
                records = [x for x in logs[r.name] if field in x]
                ax.plot(
                    [x["num_updates"] for x in records],
                    [x[field] for x in records],
                    color=f"C{i}",
                    label=run_label(r),
                )
            ax.set_xlabel("updates")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.suptitle(f"{e.name} (LS {fmt(ls0)}, SEM {fmt(sem0)}): training batches")
        save_figure(plt, fig, os.path.join(out, name))
        made.append(name)
    return made


def save_figure(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


CURVE_COLUMNS = ["run", "label", "finished", "series", "updates", "value"]


def learning_curves(plt, e, group, logs, out):
    """Validation BLEU (greedy, at the training temperature) and the NLL of the distribution that is
    decoded, softmax(D/T), on dev and on the training batches, against updates, per T; a star marks
    each run's best validation (the early-stopping reference). Not softmax(D): a tempered model
    learns logits ~T times larger, so its untempered NLL grows while it learns. Unfinished runs are
    drawn dashed, as far as they have got. `logs`: the runs' train_inner records. The plotted
    points go to curves.<experiment>.csv too (one row per point: CURVE_COLUMNS, series = the
    panel's axis label)."""
    valid_logs = {r.name: validations(r.dir) for r in group}
    pending = {r.name for r in e.pending}
    panels = [
        (valid_logs, "valid_bleu", "dev BLEU (greedy, validation)"),
        (valid_logs, "valid_nll_loss", "dev NLL of softmax(D/T) (bits/token)"),
        (logs, "nll_loss", "train NLL of softmax(D/T) (bits/token)"),
    ]
    if not any(valid_logs.values()):
        return None
    points = []  # the plotted values, also written as curves.<experiment>.csv
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (source, field, ylabel) in zip(axes[0], panels):
        for i, r in enumerate(group):
            records = [x for x in source[r.name] if field in x]
            if not records:
                continue
            update = "valid_num_updates" if field.startswith("valid_") else "num_updates"
            xs, ys = [x[update] for x in records], [x[field] for x in records]
            unfinished = r.name in pending
            points += [
                [r.name, run_label(r), "no" if unfinished else "yes", ylabel, int(x), y]
                for x, y in zip(xs, ys)
            ]
            ax.plot(
                xs,
                ys,
                "--" if unfinished else "-",
                color=f"C{i}",
                label=run_label(r) + (" (not finished)" if unfinished else ""),
            )
            if field == "valid_bleu":
                best = max(range(len(ys)), key=ys.__getitem__)  # first of equal maxima, as fairseq
                ax.plot(xs[best], ys[best], "*", color=f"C{i}", markersize=11)
        ax.set_xlabel("updates")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    ls0, sem0 = e.exp["primary"]
    fig.suptitle(f"{e.name} (LS {fmt(ls0)}, SEM {fmt(sem0)}): learning curves (* best validation)")
    fig.tight_layout()
    name = f"curves.{e.name}.png"
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    write_csv(os.path.join(out, f"curves.{e.name}.csv"), CURVE_COLUMNS, points)
    return name


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
    md.write(posthoc.report(experiments, out, markdown_table, write_csv))
    md.write(systems.report(experiments, out, markdown_table, write_csv))
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
