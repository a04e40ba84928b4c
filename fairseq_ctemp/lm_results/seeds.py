"""`lm_results.py seeds`: each row of run tables over its seeds (runs named VARIANT@SEED; no @:
seed 1), and against a baseline with the seed as the unit: Welch's t-test on the per-seed log
perplexities, and the paired t-test over the seeds both have as a check of its verdict."""

import collections
import csv
import math

from ..seed_test import CONFIDENCE, paired_seed_test, seed_test
from . import ResultsError
from .output import fmt, write_tables

COLUMNS = [
    *("variant", "seeds", "test_ppl_geomean", "test_ppl_min", "test_ppl_max", "ratio_to_baseline"),
    *("ratio_ci_low", "ratio_ci_high"),  # the interval of the ratio (seed_test.CONFIDENCE)
    *("welch_t", "welch_df", "p_value", "verdict", "paired_seeds", "paired_t", "paired_p"),
]


def seeds(tables, baseline, output):
    """output.md and output.csv: a row (COLUMNS) per row of the tables."""
    import numpy as np

    by_row = seed_log_perplexities(tables)
    if baseline not in by_row:
        raise ResultsError(f"--baseline {baseline} is not a row of {' '.join(tables)}")
    base = np.array([by_row[baseline][s] for s in sorted(by_row[baseline])])
    rows = []
    for variant, logs_by_seed in by_row.items():
        values = np.array([logs_by_seed[s] for s in sorted(logs_by_seed)])
        row = {
            "variant": variant,
            "seeds": " ".join(map(str, sorted(logs_by_seed))),
            "test_ppl_geomean": math.exp(values.mean()),
            "test_ppl_min": math.exp(values.min()),
            "test_ppl_max": math.exp(values.max()),
            "ratio_to_baseline": math.exp(values.mean() - base.mean()),
        }
        if variant == baseline:
            row["verdict"] = "baseline"
        else:
            row.update(ratio_test(values, base), **paired_seed_test(logs_by_seed, by_row[baseline]))
        rows.append(row)
    write_tables(output, COLUMNS, rows, markdown(rows, baseline))


def ratio_test(values, base):
    """seed_test of log perplexities, its interval of their difference as one of the perplexity
    ratio (ratio_ci_low, ratio_ci_high)."""
    test = seed_test(values, base)
    if "ci_low" in test:
        test["ratio_ci_low"], test["ratio_ci_high"] = (
            math.exp(test.pop("ci_low")),
            math.exp(test.pop("ci_high")),
        )
    return test


# what runs compared over seeds must share (a table's column: in words); a table that predates a
# column says nothing of it and is taken as it is
SETTINGS = {
    "ar_tar": "trained with different AR/TAR weights",
    "clip_norm": "trained with different gradient clipping (--clip-norm)",
    "lr": "trained with different learning rates (--lr)",
    "patience": "stopped by different early-stopping patience (--patience)",
    "test_tokens": "scored on different test sets (test tokens)",
    "eval_protocol": "scored under different evaluation protocols (blocks/context)",
}


def seed_log_perplexities(tables):
    """{row: {seed: log test perplexity}} from run tables; refuses a seed given twice, runs of
    different SETTINGS, runs of different training caps where a cap ended one, and seeds of a row
    whose models differ in size (their parameter counts)."""
    by_row = collections.defaultdict(dict)
    settings = {column: collections.defaultdict(list) for column in SETTINGS}  # value -> its runs
    sizes = collections.defaultdict(lambda: collections.defaultdict(list))  # row -> params -> runs
    caps, capped = collections.defaultdict(list), []  # cap -> runs; the runs that did not stop early
    for path in tables:  # several tables: runs made in different places (one seed each)
        for variant, seed, ppl, setting in seed_rows(path):
            if seed in by_row[variant]:
                raise ResultsError(f"--table {path}: {variant} seed {seed} is there twice")
            by_row[variant][seed] = math.log(ppl)
            for column, value in setting.items():
                if value and column in SETTINGS:
                    settings[column][value].append(f"{variant}@{seed}")
            if setting["params"]:
                sizes[variant][setting["params"]].append(f"{variant}@{seed}")
            if setting["max_epoch"] or setting["max_update"]:
                cap = f"--max-epoch {setting['max_epoch']} --max-update {setting['max_update']}"
                caps[cap].append(f"{variant}@{seed}")
            if setting["stopped_by"] == "not early-stopped":
                capped.append(f"{variant}@{seed}")
    for column, runs_by_value in settings.items():
        if len(runs_by_value) > 1:
            raise ResultsError(
                f"--table {' '.join(tables)}: runs {SETTINGS[column]} ({listed(runs_by_value)}): compare "
                "each setting in a seeds table of its own"
            )
    if capped and len(caps) > 1:  # (where early stopping ended every run, no cap acted)
        raise ResultsError(
            f"--table {' '.join(tables)}: runs trained to different caps ({listed(caps)}), where "
            f"{' '.join(capped)} did not stop early: compare each cap in a seeds table of its own"
        )
    for variant, runs_by_size in sizes.items():  # (rows differ in size: their heads do)
        if len(runs_by_size) > 1:
            raise ResultsError(
                f"--table {' '.join(tables)}: the seeds of {variant} are models of different sizes "
                f"(parameters {listed(runs_by_size)}: other EMBED_DIM, HIDDEN_SIZES, CT_RANK or "
                "MOS_COMPONENTS): compare each size in a seeds table of its own"
            )
    return by_row


def listed(runs_by_value):
    return "; ".join(f"{value}: {' '.join(runs)}" for value, runs in runs_by_value.items())


def seed_rows(path):
    """(row, seed, test perplexity, {SETTINGS column, params, the caps or stopped_by: its value or
    None}) of each run of a `table` CSV."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            runs = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise ResultsError(f"--table {path}: {getattr(e, 'strerror', None) or e}") from None
    if not runs or not {"variant", "test_ppl"} <= set(runs[0]):
        raise ResultsError(
            f"--table {path} is not a table of `lm_results.py table` (columns variant, test_ppl)"
        )
    rows = []
    for n, run in enumerate(runs, 2):
        variant, _, seed = run["variant"].partition("@")
        where = f"--table {path} line {n}: {run['variant']!r}"
        if not (seed or "1").isdigit():
            raise ResultsError(f"{where}: a run is named VARIANT or VARIANT@SEED, SEED an integer")
        try:
            ppl = float(run["test_ppl"])
        except ValueError:
            ppl = math.nan
        if not (math.isfinite(ppl) and ppl >= 1):
            raise ResultsError(f"{where} has no test perplexity >= 1 (got {run['test_ppl']!r})")
        fields = (*SETTINGS, "params", "max_epoch", "max_update", "stopped_by")
        rows.append((variant, int(seed or 1), ppl, {c: run.get(c) for c in fields}))
    return rows


def markdown(rows, baseline):
    level = f"{100 * CONFIDENCE:g} %"
    lines = [
        f"Test perplexity over seeds (geometric mean, range), against {baseline} with the seed as "
        f"the unit: Welch's t-test on the per-seed log perplexities, and its {level} confidence "
        "interval of the ratio. Paired p: the paired t-test over the seeds both have (one seed's runs "
        "share their batch order), a check of the verdict.",
        "",
        f"| row | seeds | test ppl (geometric mean) | range | ratio to {baseline} | {level} interval | "
        "Welch t | df | p | verdict | paired p (seeds) |",
        "|---|---|---:|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        interval = f"{r['ratio_ci_low']:.4f}–{r['ratio_ci_high']:.4f}" if "ratio_ci_low" in r else "–"
        lines.append(
            f"| {r['variant']} | {r['seeds']} | {r['test_ppl_geomean']:.2f} | {r['test_ppl_min']:.2f}–"
            f"{r['test_ppl_max']:.2f} | {r['ratio_to_baseline']:.4f} | {interval} | "
            f"{fmt(r.get('welch_t'))} | {fmt(r.get('welch_df'))} | {fmt(r.get('p_value'))} | {r['verdict']} | "
            f"{paired_cell(r)} |"
        )
    return lines


def paired_cell(row):
    """ "0.102 (3)": the paired test's p and its number of seeds; "–" where none was made."""
    if row["verdict"] == "baseline":
        return ""
    return f"{fmt(row.get('paired_p'))} ({row['paired_seeds']})"
