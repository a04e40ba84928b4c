"""BLEU and calibration by system, across seeds (ctemp-alt-results' systems.<setup>.png and
systems.csv): the systems of a setup side by side — T = 1, T_opt, T = 1 + post-hoc t* and every
other model variant — with one point per seed, so that a difference can be read against the seed
spread. A setup is an experiment of the sweep without its seed (en-vi.mini.spm2000.n4000 and
en-vi.mini.spm2000.n4000.seed2 are one setup).

Beam BLEU is shown twice where it exists: beam k at length penalty 1, as every run is decoded
(comparable between all trained systems), and the beam tuned on dev by finalize (T = 1, T_opt and
the post-hoc row only)."""

import functools
import re

from .. import plotting
from . import posthoc
from .common import fmt
from .presets import DEFAULT_VARIANT
from .sections import section
from .tables import TRAINING_OPTIONS, training_options

SEED_SUFFIX = re.compile(r"\.seed\d+$")
HEADER = [
    "setup",
    "system",
    "seed",
    "scored on",
    "greedy BLEU",
    "greedy chrF",
    "beam BLEU",
    "beam chrF",
    "beam k",
    "tuned beam BLEU",
    "tuned beam chrF",
    "tuned beam (k, lp)",
    "dev ECE %",
    "dev NLL",
    TRAINING_OPTIONS,  # of the system's run (post-hoc: T = 1's)
]


def setup_name(experiment):
    return SEED_SUFFIX.sub("", experiment)


def points(experiments):
    """{setup: [point, ...]} with a point per system and seed: system, seed, subset, greedy, beam,
    beam_k, tuned (BLEU; each with its chrF as <key>_chrf), tuned_setting, ece, nll (None where not
    measured). The runs of the primary label
    smoothing and SEM weight only; of the transformer's own temperatures, T = 1 and T_opt."""
    setups = {}
    for e in experiments:
        ls0, sem0 = e.exp.primary
        final, post = e.final, e.posthoc
        t_opt = final.t_opt if final else None
        tuned = {}  # temperature of a transformer run -> finalize's tuned beam row
        if final:
            tuned = {1.0: final.systems["untempered"].beam, t_opt: final.systems["tempered"].beam}
        out = setups.setdefault(setup_name(e.name), [])
        untempered = None  # T = 1's run: the model of the post-hoc system
        for run in e.runs:
            if (run.label_smoothing, run.sem_weight) != (ls0, sem0):
                continue
            if run.variant == DEFAULT_VARIANT and run.temperature not in (1.0, t_opt):
                continue
            out.append(run_point(run, e.test, tuned))
            if run.variant == DEFAULT_VARIANT and run.temperature == 1.0:
                untempered = run
        if final and post:
            seed = next((r.seed for r in e.runs), None)
            options = training_options(untempered.dir) if untempered else ""
            out.append({**posthoc_point(post, seed, e.test), "options": options})
    return {name: sorted(ps, key=order) for name, ps in setups.items() if ps}


def run_point(run, test_name, tuned):
    """The point of one trained run; `tuned`: {temperature: finalize's tuned beam row} of the
    transformer's T = 1 and T_opt."""
    t, transformer = run.temperature, run.variant == DEFAULT_VARIANT
    subset = "test" if "test" in run.eval else "valid"
    scores = run.eval[subset]
    if transformer:
        system = "T = 1" if t == 1.0 else f"T_opt = {fmt(t)}"
    elif run.variant == "ct_transformer":
        system = run.variant
    else:
        system = f"{run.variant} T={fmt(t)}"
    calibration = posthoc.measured(run.dir, "valid")
    best = tuned.get(t) if transformer else None
    return {
        "system": system,
        "seed": run.seed,
        "subset": subset,
        "test_name": test_name,
        "greedy": scores.greedy.bleu,
        "greedy_chrf": scores.greedy.chrf,
        "beam": scores.beam.bleu,
        "beam_chrf": scores.beam.chrf,
        "beam_k": scores.beam.beam,
        "tuned": best.bleu if best else None,
        "tuned_chrf": best.chrf if best else None,
        "tuned_setting": (best.beam, best.lenpen) if best else None,
        "ece": calibration and calibration.ece,
        "nll": calibration and calibration.nll,
        "options": training_options(run.dir),
    }


def posthoc_point(post, seed, test_name):
    """The point of T = 1 decoded at its post-hoc t* (its calibration: on dev)."""
    p = post.systems["posthoc"]
    dev = p.calibration["valid"]
    return {
        "system": "T = 1 + post-hoc t*",
        "seed": seed,
        "subset": post.scored_subset,
        "test_name": test_name,
        "greedy": p.greedy.bleu,
        "greedy_chrf": p.greedy.chrf,
        "beam": None,  # only tuned at t*
        "beam_chrf": None,
        "beam_k": None,
        "tuned": p.beam.bleu,
        "tuned_chrf": p.beam.chrf,
        "tuned_setting": (p.beam.beam, p.beam.lenpen),
        "ece": dev.ece,
        "nll": dev.nll,
    }


def order(point):
    """T = 1, T_opt, post-hoc, then the other variants by name; seeds in order."""
    system = point["system"]
    rank = (
        0
        if system == "T = 1"
        else 1
        if system.startswith("T_opt")
        else 2
        if system.startswith("T = 1 +")
        else 3
    )
    return rank, system, point["seed"] if point["seed"] is not None else -1


def rows(setups):
    """systems.csv: (header, rows)."""

    def cell(x, digits=2):
        return "" if x is None else f"{x:.{digits}f}"

    out = []
    for setup, ps in setups.items():
        for p in ps:
            out.append(
                [
                    setup,
                    p["system"],
                    p["seed"],
                    "dev" if p["subset"] == "valid" else p["test_name"],
                    cell(p["greedy"]),
                    cell(p["greedy_chrf"]),
                    cell(p["beam"]),
                    cell(p["beam_chrf"]),
                    p["beam_k"] or "",
                    cell(p["tuned"]),
                    cell(p["tuned_chrf"]),
                    f"({p['tuned_setting'][0]}, {fmt(p['tuned_setting'][1])})" if p["tuned_setting"] else "",
                    "" if p["ece"] is None else f"{100 * p['ece']:.1f}",
                    cell(p["nll"], 3),
                    p["options"],
                ]
            )
    return HEADER, out


def plot(setup, ps, path):
    """figure(setup, ps), saved to path."""
    plt = plotting.pyplot()

    fig = figure(setup, ps)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure(setup, ps):
    """Three panels — greedy BLEU, beam BLEU (beam k filled, tuned open), dev ECE — with the systems
    on the x axis, a marker per seed (the legend names every seed) and a bar at the mean over seeds."""
    plt = plotting.pyplot()
    from matplotlib.lines import Line2D

    systems = list(dict.fromkeys(p["system"] for p in ps))
    seeds = sorted({p["seed"] for p in ps}, key=lambda s: -1 if s is None else s)
    markers = "osD^v<>ph*"
    panels = (
        ("greedy BLEU", [("greedy", True)]),
        ("beam BLEU (filled: beam k, lp 1; open: tuned on dev)", [("beam", True), ("tuned", False)]),
        ("dev ECE (%)", [("ece", True)]),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels):
        for x, system in enumerate(systems):
            for key, filled in series:
                shift = 0.0 if len(series) == 1 else (-0.15 if filled else 0.15)
                values = []
                for i, seed in enumerate(seeds):
                    for p in ps:
                        if p["system"] != system or p["seed"] != seed or p[key] is None:
                            continue
                        y = 100 * p[key] if key == "ece" else p[key]
                        values.append(y)
                        ax.plot(
                            x + shift + 0.06 * (i - (len(seeds) - 1) / 2),
                            y,
                            markers[i % len(markers)],
                            color=f"C{i}",
                            markerfacecolor=f"C{i}" if filled else "none",
                        )
                if values:  # the mean over seeds
                    mean = sum(values) / len(values)
                    ax.hlines(mean, x + shift - 0.13, x + shift + 0.13, color="black", linewidth=1)
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels(systems, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    subset = "dev" if all(p["subset"] == "valid" for p in ps) else ps[0]["test_name"]
    axes[0][0].set_ylabel(f"{subset} BLEU")
    seed_markers = [
        Line2D(
            [], [], marker=markers[i % len(markers)], color=f"C{i}", linestyle="none", label=f"seed {seed}"
        )
        for i, seed in enumerate(seeds)
    ]
    axes[0][0].legend(handles=seed_markers, fontsize=8)
    fig.suptitle(f"{setup}: systems side by side, one marker per seed, a bar at the mean", fontsize=10)
    fig.tight_layout()
    return fig


def report(experiments, out):
    """ctemp-alt-results' section: systems.csv, systems.<setup>.png; its markdown."""
    setups = points(experiments)
    if not setups:
        return ""
    figures = [(f"systems.{setup}.png", functools.partial(plot, setup, ps)) for setup, ps in setups.items()]
    caption = (
        "Beam: beam k at length penalty 1, as every run is decoded; tuned beam: width and length "
        "penalty tuned on dev by finalize (T = 1, T_opt, T = 1 + post-hoc t* only). ECE and NLL "
        "(nats/token): dev, teacher forced, of the distribution each system decodes."
    )
    title = "Systems side by side, across seeds"
    return section(out, title, "systems.csv", rows(setups), caption, figures, csv_only=(TRAINING_OPTIONS,))
