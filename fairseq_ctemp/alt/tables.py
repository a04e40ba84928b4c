"""The tables of ctemp-alt-results (Table 1, Tables 3 and 4, the model variants, every run), each
as (header, rows) for its CSV and markdown."""

import os
import shlex

from . import posthoc_report
from .common import fmt
from .presets import DEFAULT_VARIANT, VARIANTS
from .records import read_config
from .training import training_steps

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
    spec = VARIANTS.get(variant.partition(":")[0])
    if spec is not None and spec.criterion == "ct_cross_entropy":
        return variant
    return f"{variant} T={fmt(run.temperature)}"


def scored(run, test="test"):
    """(subset label, eval) of a run: test (named `test`) when there is one, else dev."""
    return (test, run.eval["test"]) if "test" in run.eval else ("dev", run.eval["valid"])


def num(x, digits=2):
    return "" if x is None else f"{x:.{digits}f}"


def p_mark(p):
    return "" if p is None else ("†" if p < 0.05 else "")


def table1(experiments):
    finals = [e for e in experiments if e.final is not None]
    beams = sorted({b for e in finals for b in e.exp.speed_beams})
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
        *posthoc_report.RUN_COLUMNS,
        "test is",
        "last training session s",
        "train words/s",
        "code",  # the commit training finished from
        "torch",
        TRAINING_OPTIONS,
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
                    *posthoc_report.run_cells(r.dir),
                    e.test if test else "",
                    num(tr.last_session_seconds, 0),
                    num(train_words_per_second(r.dir), 0),
                    tr.code or "",
                    tr.torch or "",
                    training_options(r.dir),
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
                + [""] * (12 + len(posthoc_report.RUN_COLUMNS))
                + [training_options(r.dir)]
            )
    return header, rows


# runs.csv's column of a run's fairseq-train options but its seed and its cap of updates (a cap
# raised on resume leaves a run early stopping ended as it was): the seeds of one system share them
TRAINING_OPTIONS = "fairseq-train options but --seed, --max-update"


def training_options(run_dir):
    """The fairseq-train options of the run in run_dir (its config.json) without --seed and
    --max-update and their values, as one shell line ("" where the run has none)."""
    config = read_config(os.path.join(run_dir, "config.json")) if run_dir else None
    if config is None:
        return ""
    args = list(config.train_args)
    for option in ("--seed", "--max-update"):
        if option in args:
            del args[args.index(option) : args.index(option) + 2]
    return shlex.join(args)


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
        ls0, sem0 = e.exp.primary
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
