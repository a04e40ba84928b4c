"""ctemp-alt-seeds --systems: the systems of ctemp-alt-results' systems.csv files over their seeds,
each against T = 1 with the seed as the unit (the tests of seeds.py). Only systems.csv has the beam
tuned on dev and the post-hoc system (T = 1 + post-hoc t*: T = 1's model decoded at the t* fitted
on dev), which runs.csv, one row a trained run, cannot."""

import collections
import csv
from dataclasses import dataclass
from typing import Dict, Tuple

from ..outputs import all_or_none, write_text
from .common import AltError
from .sections import write_csv
from .seeds import RUNS_PAIRED, check_one_setting, check_trained_alike, markdown, versus
from .tables import TRAINING_OPTIONS

BASELINE = "T = 1"
# systems.csv's BLEU columns; a system without one (post-hoc: no untuned beam; a variant: no tuned
# beam) is left out of that metric's rows
METRICS = ("greedy BLEU", "beam BLEU", "tuned beam BLEU")
SETTING = ("setup", "scored on")  # equal in every row compared; so is "beam k" where a row has it
READ = ("system", "seed", *SETTING, "beam k", *METRICS)  # the columns read (an older file has fewer)
COLUMNS = [
    *("metric", "system", "seeds", "BLEU per seed", "mean", "min", "max", "difference"),
    *("ci_low", "ci_high"),  # the interval of the difference (seed_test.CONFIDENCE)
    *("welch_t", "welch_df", "p_value", "verdict", "paired_seeds", "paired_t", "paired_p"),
]


@dataclass(frozen=True)
class SystemRow:
    """One row of a systems.csv: a system at one seed, the BLEU it has per metric."""

    system: str
    seed: int
    bleu: Dict[str, float]
    setting: Tuple[str, ...]  # SETTING's values
    beam_k: str  # "" where the system has no untuned beam
    where: str  # "FILE line N"
    options: str = ""  # its run's fairseq-train options ("": a systems.csv from before the column)


def read_systems(path):
    """The rows of one systems.csv (SystemRow), refusing a file of another layout or a cell that is
    not what ctemp-alt-results writes."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise AltError(f"--systems {path}: {getattr(e, 'strerror', None) or e}") from None
    missing = [c for c in READ if c not in (rows[0] if rows else {})]
    if missing:
        raise AltError(
            f"--systems {path} is not a systems.csv of ctemp-alt-results with rows (no column {missing[0]!r})"
        )
    return [system_row(row, f"{path} line {n}") for n, row in enumerate(rows, 2)]


def system_row(row, where):
    """The SystemRow of a systems.csv row (`where`: "FILE line N", for the errors)."""
    try:
        seed = int(row["seed"])
        bleu = {m: float(row[m]) for m in METRICS if row[m]}
    except ValueError as e:
        raise AltError(f"--systems {where}: not a number where systems.csv has one ({e})") from None
    for metric, value in bleu.items():
        if not 0 <= value <= 100:  # NaN too
            raise AltError(f"--systems {where}: {metric} is {row[metric]}, not a BLEU score (0 to 100)")
    setting = tuple(row[c] for c in SETTING)
    options = row.get(TRAINING_OPTIONS) or ""
    return SystemRow(row["system"], seed, bleu, setting, row["beam k"], where, options)


def by_system(rows):
    """{system: {seed: SystemRow}}; refuses rows of different settings and a seed given twice."""
    check_one_setting(rows, SETTING, "--systems", "the systems of one setup")
    beams = {r.beam_k: r for r in rows if r.beam_k}
    if len(beams) > 1:
        a, b = list(beams.values())[:2]
        raise AltError(f"--systems: {a.where} and {b.where} differ in beam k ({a.beam_k} vs {b.beam_k})")
    systems = collections.defaultdict(dict)
    for row in rows:
        if row.seed in systems[row.system]:
            other = systems[row.system][row.seed].where
            raise AltError(
                f"--systems: {row.system} seed {row.seed} is there twice ({other} and {row.where})"
            )
        systems[row.system][row.seed] = row
    if BASELINE not in systems:
        raise AltError(f"--systems: no {BASELINE!r} row to compare against")
    check_trained_alike(systems, "--systems")
    return systems


def compare(systems, beam_k):
    """The rows (dicts of COLUMNS): per metric, T = 1, then each system that has the metric against
    it (in the order of the files)."""
    order = [BASELINE, *(s for s in systems if s != BASELINE)]
    scored_on = next(iter(systems[BASELINE].values())).setting[SETTING.index("scored on")]
    out = []
    for metric in METRICS:
        label = f"{scored_on} {metric}" + (f" (beam {beam_k})" if metric == "beam BLEU" else "")
        having = {s: by_seed(systems[s], metric) for s in order}
        having = {s: values for s, values in having.items() if values}
        if having and BASELINE not in having:
            raise AltError(f"--systems: {BASELINE!r} has no {metric} to compare against")
        for system, values in having.items():
            stats = versus(values, having[BASELINE], system == BASELINE)
            out.append({"metric": label, "system": system} | stats)
    return out


def by_seed(rows, metric):
    """{seed: BLEU} of one system's rows ({seed: SystemRow}) that have the metric."""
    return {seed: r.bleu[metric] for seed, r in rows.items() if metric in r.bleu}


def systems_report(paths, output):
    """OUTPUT.md and OUTPUT.csv; returns the markdown lines."""
    rows = [r for path in paths for r in read_systems(path)]
    beam_k = next((r.beam_k for r in rows if r.beam_k), "")
    table = compare(by_system(rows), beam_k)
    paired_by = f"{RUNS_PAIRED}; the post-hoc system decodes T = 1's own model"
    lines = markdown(table, BASELINE, name=lambda r: r["system"], paired_by=paired_by)
    sources = "Systems: " + ", ".join(f"`{p}`" for p in paths) + "."
    with all_or_none([output + ".csv", output + ".md"]):
        write_csv(output + ".csv", COLUMNS, [[r.get(c, "") for c in COLUMNS] for r in table])
        write_text(output + ".md", "\n".join([*lines, "", sources]) + "\n")
    return lines
