"""The figures of one experiment in ctemp-alt-results: BLEU against T, LS and SEM, learning
curves, and the training statistics of the primary group."""

import os

from .. import plotting
from .common import fmt
from .presets import DEFAULT_VARIANT
from .sections import write_csv
from .tables import SHORT, run_label, run_order, tempered
from .training import training_steps, validations


def plots(e, out):
    """The PNGs of one experiment; returns their file names."""
    plt = plotting.pyplot()

    made = []
    ls0, sem0 = e.exp.primary
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
    ls0, sem0 = e.exp.primary
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
    ls0, sem0 = e.exp.primary
    fig.suptitle(f"{e.name} (LS {fmt(ls0)}, SEM {fmt(sem0)}): learning curves (* best validation)")
    fig.tight_layout()
    name = f"curves.{e.name}.png"
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    write_csv(os.path.join(out, f"curves.{e.name}.csv"), CURVE_COLUMNS, points)
    return name
