"""ctemp-alt-seeds (what it writes: its --help): the systems of ALT sweeps over their seeds, each
against a baseline with the seed as the unit (Welch's t-test on the per-seed BLEU, and the paired
t-test over the seeds both have as a check of its verdict), read from the
runs.csv files that ctemp-alt-results wrote (seeds trained in different working directories, or
on machines that are gone, each in a file of its own)."""

import collections
import csv
import math
import statistics
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from ..outputs import all_or_none, write_text
from ..seed_test import CONFIDENCE, paired_seed_test, seed_test
from .common import AltError, fmt
from .presets import DEFAULT_VARIANT
from .sections import markdown_table, write_csv
from .systems import setup_name
from .tables import TRAINING_OPTIONS

METRICS = ("greedy", "beam")  # runs.csv's "<split> greedy" and "<split> beam" BLEU
NOT_FINISHED = "not finished"  # why a run has no BLEU (the other reason: not scored on the split)
# what must be equal in every run compared (runs.csv's columns; the experiment without its seed)
SETTING = ("experiment", "direction", "LS", "SEM", "beam k")
COLUMNS = [
    *("metric", "variant", "T", "seeds", "BLEU per seed", "mean", "min", "max", "difference"),
    *("ci_low", "ci_high"),  # the interval of the difference (seed_test.CONFIDENCE)
    *("welch_t", "welch_df", "p_value", "verdict", "paired_seeds", "paired_t", "paired_p"),
]


@dataclass(frozen=True)
class SeedRun:
    """One finished run of a runs.csv: a system (variant at T) at one seed, its BLEU per metric."""

    variant: str
    temperature: str  # as run names write it: "1", "2.5"
    seed: int
    bleu: Dict[str, float]
    setting: Tuple[str, ...]  # SETTING's values
    where: str  # "FILE line N"
    options: str = ""  # its TRAINING_OPTIONS ("": a runs.csv from before the column)

    @property
    def beam_k(self):
        return self.setting[SETTING.index("beam k")]


@dataclass(frozen=True)
class Selection:
    """Which runs to compare (None: all) and how."""

    variants: Optional[Sequence[str]]
    temperatures: Optional[Sequence[float]]
    baseline: str  # a variant, at T = 1
    split: str  # dev or test


def parse_runs_spec(text):
    """'runs.csv' or 'runs.csv@2' (the seed of a file written before runs.csv had a seed column)."""
    path, at, seed = text.rpartition("@")
    if not at:
        return text, None
    if not seed.isdigit():
        raise AltError(f"--runs {text}: FILE@SEED wants an integer seed")
    return path, int(seed)


def read_runs(spec, sel):
    """The runs of one --runs file that `sel` selects and that have its split's BLEU (SeedRun), and
    the others it selects as (why they have none, "NAME (FILE line N)")."""
    path, seed_given = parse_runs_spec(spec)
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise AltError(f"--runs {path}: {getattr(e, 'strerror', None) or e}") from None
    wanted = [*SETTING, "T", *(f"{sel.split} {m}" for m in METRICS)]
    missing = [c for c in wanted if c not in (rows[0] if rows else {})]
    if missing:
        raise AltError(
            f"--runs {path} is not a runs.csv of ctemp-alt-results with runs (no column {missing[0]!r})"
        )
    if seed_given is None and "seed" not in rows[0]:
        raise AltError(
            f"--runs {path} has no seed column (written before it had one): give it as {path}@SEED"
        )
    runs, left_out = [], []
    for n, row in enumerate(rows, 2):
        run = seed_run(row, f"{path} line {n}", seed_given, sel)
        if run is not None and run.bleu:
            runs.append(run)
        elif run is not None:
            name = f"{run.variant} T={run.temperature} seed {run.seed} ({run.where})"
            left_out.append((why_no_bleu(row, sel.split), name))
    return runs, left_out


def why_no_bleu(row, split):
    """Why a run has no BLEU of the split: it has not finished, or (a test split) was not scored on
    one (its sweep's data has none)."""
    finished = all(row[f"dev {m}"] for m in METRICS)
    return f"no {split} BLEU" if finished and split != "dev" else NOT_FINISHED


def seed_run(row, where, seed_given, sel):
    """The SeedRun of a runs.csv row (bleu empty: not finished), or None where `sel` leaves it out."""
    variant = row.get("variant") or DEFAULT_VARIANT  # a file from before the column had only it
    try:
        temperature = float(row["T"])
        seed = int(row["seed"]) if row.get("seed") else seed_given
        cells = [row[f"{sel.split} {m}"] for m in METRICS]
        bleu = dict(zip(METRICS, map(float, cells))) if all(cells) else {}
    except ValueError as e:
        raise AltError(f"--runs {where}: not a number where runs.csv has one ({e})") from None
    if not 0 < temperature < math.inf:
        raise AltError(f"--runs {where}: T is {row['T']}, not a temperature (a positive number)")
    for metric, value in bleu.items():
        if not 0 <= value <= 100:  # NaN too
            column = f"{sel.split} {metric}"
            raise AltError(f"--runs {where}: {column} is {row[column]}, not a BLEU score (0 to 100)")
    if seed is None:
        raise AltError(f"--runs {where}: the row has no seed: give the file as FILE@SEED")
    if seed_given is not None and seed != seed_given:
        raise AltError(f"--runs {where}: the row's seed is {seed}, the file was given as @{seed_given}")
    if (sel.variants and variant not in sel.variants) or (
        sel.temperatures and temperature not in sel.temperatures
    ):
        return None
    setting = (setup_name(row["experiment"]), *(row[c] for c in SETTING[1:]))
    return SeedRun(variant, fmt(temperature), seed, bleu, setting, where, row.get(TRAINING_OPTIONS) or "")


def check_one_setting(records, names, option, what):
    """Refuses records (each with .setting, the values of `names`, and .where) of more than one
    setting, naming the first difference: "compare {what}"."""
    first = records[0]
    for record in records:
        for name, mine, theirs in zip(names, record.setting, first.setting):
            if mine != theirs:
                raise AltError(
                    f"{option}: {first.where} and {record.where} differ in {name} ({theirs} vs {mine}): "
                    f"compare {what}"
                )


def by_system(runs):
    """{(variant, T): {seed: SeedRun}}; refuses a seed given twice and runs of different settings."""
    check_one_setting(runs, SETTING, "--runs", "runs of one setting")
    systems = collections.defaultdict(dict)
    for run in runs:
        seeds = systems[run.variant, run.temperature]
        if run.seed in seeds:
            raise AltError(
                f"--runs: {run.variant} T={run.temperature} seed {run.seed} is there twice "
                f"({seeds[run.seed].where} and {run.where})"
            )
        seeds[run.seed] = run
    check_trained_alike({f"{v} T={t}": seeds for (v, t), seeds in systems.items()}, "--runs")
    return systems


def check_trained_alike(systems, option):
    """Refuses a system ({name: {seed: record with .options and .where}}) whose seeds were trained
    with other fairseq-train options ("": a file from before the column, taken as it is)."""
    for name, seeds in systems.items():
        trained = [record for record in seeds.values() if record.options]
        other = next((r for r in trained if r.options != trained[0].options), None)
        if other is not None:
            raise AltError(
                f"{option}: the seeds of {name} were trained with other fairseq-train options "
                f"({trained[0].where}: {trained[0].options}; {other.where}: {other.options}): "
                "compare runs of one setting"
            )


def compare(systems, sel, beam_k):
    """The rows (dicts of COLUMNS): per metric, the baseline, then each system against it."""
    base_key = (sel.baseline, "1")
    if base_key not in systems:
        raise AltError(f"--baseline {sel.baseline}: no finished run of it at T=1 in --runs")
    order = sorted(systems, key=lambda k: (k != base_key, k[0], float(k[1])))

    def by_seed(key, metric):
        return {seed: run.bleu[metric] for seed, run in systems[key].items()}

    rows = []
    for metric in METRICS:
        label = f"{sel.split} {metric} BLEU" + (f" (beam {beam_k})" if metric == "beam" else "")
        for key in order:
            row = {"metric": label, "variant": key[0], "T": key[1]}
            rows.append(row | versus(by_seed(key, metric), by_seed(base_key, metric), key == base_key))
    return rows


def versus(by_seed, base_by_seed, is_baseline):
    """A system's BLEU over its seeds ({seed: BLEU}) against the baseline's: the columns of COLUMNS
    from "seeds" on (Welch's test and the paired check; the baseline's own row: no test)."""
    seeds = sorted(by_seed)
    values = [by_seed[s] for s in seeds]
    row = {
        "seeds": " ".join(map(str, seeds)),
        "BLEU per seed": " ".join(f"{v:.2f}" for v in values),
        "mean": statistics.mean(values),
        "min": min(values),
        "max": max(values),
        "difference": statistics.mean(values) - statistics.mean(base_by_seed.values()),
    }
    if is_baseline:
        return row | {"verdict": "baseline"}
    base = [base_by_seed[s] for s in sorted(base_by_seed)]
    return row | seed_test(values, base) | paired_seed_test(by_seed, base_by_seed)


RUNS_PAIRED = "one seed's runs share their batch order"  # why the paired check pairs by seed


def markdown(rows, baseline, name=lambda r: f"{r['variant']} T={r['T']}", paired_by=RUNS_PAIRED):
    """The caption and table of `rows`; baseline: the baseline's name ("transformer T=1"),
    name(row): a system's name; paired_by: what one seed's systems share."""
    header = [
        "metric",
        "system",
        "seeds",
        "BLEU per seed",
        "mean",
        "difference",
        f"{100 * CONFIDENCE:g} % interval",
        "Welch t",
        "df",
        "p",
        "verdict",
        "paired p (seeds)",
    ]

    def num(value, spec):
        return "–" if value is None else format(value, spec)

    cells = [
        [
            r["metric"],
            name(r),
            r["seeds"],
            r["BLEU per seed"],
            f"{r['mean']:.2f}",
            "" if r["verdict"] == "baseline" else f"{r['difference']:+.2f}",
            interval(r),
            num(r.get("welch_t"), ".2f"),
            num(r.get("welch_df"), ".2f"),
            num(r.get("p_value"), ".3g"),
            r["verdict"],
            paired_cell(r),
        ]
        for r in rows
    ]
    caption = (
        f"BLEU over seeds, each system against {baseline} with the seed as the unit: Welch's "
        "t-test on the per-seed BLEU (difference: of the means), and its "
        f"{100 * CONFIDENCE:g} % confidence interval of the difference. Paired p: the paired t-test "
        f"over the seeds both have ({paired_by}), a check of the verdict."
    )
    return [caption, "", markdown_table(header, cells)]


def interval(row):
    """ "-0.43 to +0.35": the interval of the difference; "–" where no test was made, blank for the
    baseline."""
    if row["verdict"] == "baseline":
        return ""
    return f"{row['ci_low']:+.2f} to {row['ci_high']:+.2f}" if "ci_low" in row else "–"


def paired_cell(row):
    """ "0.102 (3)": the paired test's p and its number of seeds; "–" where none was made."""
    if row["verdict"] == "baseline":
        return ""
    p = row.get("paired_p")
    return f"{'–' if p is None else format(p, '.3g')} ({row['paired_seeds']})"


def check_asked_for(runs, left_out, sel):
    """Each variant and T of --variants / --temperatures has a finished run (a typo finds none)."""
    if not runs and left_out and all(why != NOT_FINISHED for why, _ in left_out):
        raise AltError(
            f"--split {sel.split}: no run of --runs has {sel.split} BLEU (a sweep scores a test split "
            "only where its data has one, e.g. from --carve-test)"
        )
    if not runs:
        raise AltError("--runs: no finished run of the variants and temperatures asked for")
    for option, asked, found in (
        ("--variants", sel.variants or [], {r.variant for r in runs}),
        ("--temperatures", [fmt(t) for t in sel.temperatures or []], {r.temperature for r in runs}),
    ):
        if missing := [a for a in asked if a not in found]:
            raise AltError(f"{option} {missing[0]}: no finished run of it in --runs")


def seeds_report(specs, sel, output):
    """OUTPUT.md and OUTPUT.csv; returns the markdown lines and the runs left out, (why, name)."""
    runs, left_out = [], []
    for spec in specs:
        found, left = read_runs(spec, sel)
        runs += found
        left_out += left
    check_asked_for(runs, left_out, sel)
    systems = by_system(runs)
    rows = compare(systems, sel, beam_k=runs[0].beam_k)
    lines = markdown(rows, f"{sel.baseline} T=1")
    sources = "Runs: " + ", ".join(f"`{spec}`" for spec in specs) + "."
    with all_or_none([output + ".csv", output + ".md"]):  # a rerun is not refused for one of them
        write_csv(output + ".csv", COLUMNS, [[r.get(c, "") for c in COLUMNS] for r in rows])
        write_text(output + ".md", "\n".join([*lines, "", sources]) + "\n")
    return lines, left_out
