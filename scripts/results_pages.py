"""The tables of the results pages, generated from the committed result files.

A page marks each generated table with a comment line naming it and ends it with another:

    <!-- table: ptb_runs (scripts/results_pages.py) -->
    | ... the rows this script writes ... |
    <!-- end of table -->

    python scripts/results_pages.py           # rewrite every marked table from its files
    python scripts/results_pages.py --check   # exit 1, naming each table that is not what its files give

Each table reads only result files that the project's commands wrote (named in TABLES), so a
number in it is the file's number, rounded. Nothing else on a page is touched.
"""

import argparse
import csv
import functools
import itertools
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Callable, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = (os.path.join("docs", "results.md"), os.path.join("docs", "softmax_tempering.md"))
BLOCK = re.compile(
    r"^<!-- table: (?P<name>[\w-]+) \(scripts/results_pages.py\) -->\n(?P<body>.*?)^<!-- end of table -->$",
    re.M | re.S,
)
LM_RESULTS = os.path.join("examples", "language_model", "results")
ALT_RESULTS = os.path.join("examples", "alt", "results")
QUICKSTART_RESULTS = os.path.join("examples", "quickstart", "results")


@dataclass(frozen=True)
class Table:
    files: Tuple[str, ...]  # the result files it reads, relative to the checkout
    render: Callable  # (the files' rows, one list per file) -> markdown lines


def read_rows(path):
    """A CSV file's rows (dicts), or a JSON file's object."""
    with open(os.path.join(REPO, path), encoding="utf-8", newline="") as f:
        return json.load(f) if path.endswith(".json") else list(csv.DictReader(f))


# ----------------------------------------------------------------------------- PTB (Part 2)
LM_NAMES = {
    "softmax": "softmax",
    "mos": "MoS (M = 2)",
    "ct": "CT",
    "ct-mos": "CT-MoS",
}


def lm_label(run):
    """softmax@2 -> "softmax, seed 2"; constant-0.5 -> "constant τ = 0.5"; mos-constant-2 -> "MoS
    (M = 2), constant τ = 2"."""
    variant, _, seed = run.partition("@")
    name = LM_NAMES.get(variant)
    if name is None:  # constant-T, mos-constant-T
        head, _, t = variant.rpartition("constant-")
        name = (LM_NAMES["mos"] + ", " if head == "mos-" else "") + f"constant τ = {t}"
    return name + (f", seed {seed}" if seed else "")


def ptb_runs(rows, clipped=False):
    """clipped: a column with the share of updates --clip-norm shortened (files that have it)."""
    lines = [
        "| run | stopped by | epochs | best epoch | eval-lm valid / test ppl | parameters | "
        "training s (train_wall) | trained on |" + (" updates clipped |" if clipped else ""),
        "|---|---|---:|---:|---|---:|---:|---|" + ("---:|" if clipped else ""),
    ]
    for r in itertools.chain.from_iterable(rows):  # the files' rows, in order
        lines.append(
            f"| {lm_label(r['variant'])} | {r['stopped_by']} | {r['epochs']} | {r['best_epoch']} | "
            f"{float(r['valid_ppl']):.2f} / {float(r['test_ppl']):.2f} | {int(r['params']):,} | "
            f"{int(r['train_seconds']):,} | {trained_on(r)} |"
            + (f" {float(r['clipped_percent']):.1f} % |" if clipped else "")
        )
    return lines


def trained_on(run):
    """The run's device, with the machine where its table records it ("CPU: AMD EPYC (AVX512)")."""
    machines = run.get("machines")
    return run["trained_on"] + (f": {machines}" if machines else "")


def p_text(p_value, samples):
    """A bootstrap p-value of 0 says only that it is below 1 / samples."""
    return f"< {1 / samples:g}" if float(p_value) == 0 else f"{float(p_value):.4g}"


def ptb_compare(rows):
    lines = [
        "| baseline | variant | test ppl, baseline | variant | ppl ratio | 95 % interval | p | sentences |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in itertools.chain.from_iterable(rows):  # the files' rows, in order
        lines.append(
            f"| {lm_label(r['baseline'])} | {lm_label(r['variant'])} | {float(r['ppl_baseline']):.2f} | "
            f"{float(r['ppl_variant']):.2f} | {float(r['ppl_ratio']):.4f} | "
            f"{interval(r, *COMPARE_INTERVAL)} | "
            f"{p_text(r['p_value'], int(r['samples']))} | {int(r['sentences']):,} |"
        )
    return lines


def ptb_seeds(rows):
    (seeds,) = rows
    (baseline,) = (r["variant"] for r in seeds if r["verdict"] == "baseline")
    lines = [
        f"| row | seeds | test ppl, geometric mean (range) | ratio to {lm_label(baseline)} (95 % interval) | "
        "Welch t | df | p | verdict | paired p |",
        "|---|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in seeds:
        welch = [optional(r["welch_t"], ".2f"), optional(r["welch_df"], ".2f"), optional(r["p_value"], ".3g")]
        ratio = with_interval(f"{float(r['ratio_to_baseline']):.4f}", interval(r, *RATIO_INTERVAL))
        lines.append(
            f"| {lm_label(r['variant'])} | {r['seeds']} | {float(r['test_ppl_geomean']):.2f} "
            f"({float(r['test_ppl_min']):.2f}–{float(r['test_ppl_max']):.2f}) | "
            f"{ratio} | {' | '.join(welch)} | {r['verdict']} | {paired(r)} |"
        )
    return lines


def ptb_ar_tar(rows):
    """Each row's seed-level comparison with the softmax, trained with AR/TAR and without, side by
    side (the rows of the first file, then those only in the second)."""
    with_ar_tar, without = ({r["variant"]: r for r in file_rows} for file_rows in rows)
    lines = [
        "| row | with AR/TAR: seeds | ratio to softmax | p | verdict | "
        "without AR/TAR: seeds | ratio to softmax | p | verdict |",
        "|---|---|---:|---:|---|---|---:|---:|---|",
    ]
    for variant in [*with_ar_tar, *(v for v in without if v not in with_ar_tar)]:
        cells = []
        for side in (with_ar_tar, without):
            r = side.get(variant)
            cells += (
                [
                    r["seeds"],
                    f"{float(r['ratio_to_baseline']):.4f}",
                    optional(r["p_value"], ".3g"),
                    r["verdict"],
                ]
                if r
                else ["not run", "–", "–", "–"]
            )
        lines.append(f"| {lm_label(variant)} | {' | '.join(cells)} |")
    return lines


def ptb_clipping(rows):
    """The runs trained with --clip-norm 0.25 and without clipping, side by side, each against the
    softmax of its setting and seed over the test sentences: the rows of the unclipped table, from
    (clipped table, unclipped table, then per seed 1, 2, ... its comparisons: clipped, unclipped)."""
    clipped, unclipped, *compares = ({r.get("variant"): r for r in file_rows} for file_rows in rows)
    lines = [
        "| row | seed | clipped: epochs | test ppl | ratio to softmax (95 % interval) | p | updates clipped | "
        "unclipped: epochs | test ppl | ratio to softmax (95 % interval) | p |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    for variant in unclipped:
        name, _, seed = variant.partition("@")
        seed = int(seed or 1)
        cells = [str(seed)]
        for table, compare in zip((clipped, unclipped), compares[2 * (seed - 1) : 2 * seed]):
            run = table[variant]
            versus = None if name == "softmax" else compare[variant]  # against softmax@seed
            ratio = (
                with_interval(f"{float(versus['ppl_ratio']):.4f}", interval(versus, *COMPARE_INTERVAL))
                if versus
                else "baseline"
            )
            p_value = p_text(versus["p_value"], int(versus["samples"])) if versus else "–"
            cells += [run["epochs"], f"{float(run['test_ppl']):.2f}", ratio, p_value]
            if table is clipped:
                cells.append(f"{float(run['clipped_percent']):.1f} %")
        lines.append(f"| {lm_label(name)} | {' | '.join(cells)} |")
    return lines


def paired(r):
    """The paired test's p of a seeds row (the check of its verdict): blank for the baseline."""
    return "" if r["verdict"] == "baseline" else optional(r.get("paired_p"), ".3g")


def optional(value, spec):
    """A number of a seeds file in the format ``spec``; "–" where the file has none (no test). p to
    three significant digits: at two decimals p = 0.0489 would read 0.05 beside its verdict "higher"."""
    return format(float(value), spec) if value else "–"


def interval(row, low, high, form):
    """A seeds row's interval in `form` ("{:+.2f} to {:+.2f}"); "" where no test was made."""
    return form.format(float(row[low]), float(row[high])) if row.get(low) else ""


def with_interval(text, within):
    """ "-0.04 (-0.37 to +0.29)": a number and its interval, if any."""
    return f"{text} ({within})" if within else text


BLEU_INTERVAL = ("ci_low", "ci_high", "{:+.2f} to {:+.2f}")
RATIO_INTERVAL = ("ratio_ci_low", "ratio_ci_high", "{:.4f}–{:.4f}")
COMPARE_INTERVAL = ("ratio_low", "ratio_high", "{:.4f}–{:.4f}")  # a paired comparison's


# ----------------------------------------------------------------- ALT over seeds (Parts 1, 3)
def alt_system(variant, temperature):
    """transformer, 2 -> "T = 2"; ct_transformer, 1 -> "`ct_transformer`"."""
    return (
        f"T = {temperature}"
        if variant == "transformer"
        else f"`{variant}`" + (f" at T = {temperature}" if temperature != "1" else "")
    )


def difference_cell(r):
    """ " (-0.37, -0.67 to -0.06)": a seeds row's difference to the baseline and its interval (where
    a test was made); nothing for the baseline."""
    if r["verdict"] == "baseline":
        return ""
    within = interval(r, *BLEU_INTERVAL)
    return f" ({float(r['difference']):+.2f}{', ' + within if within else ''})"


def alt_seeds(rows):
    """ctemp-alt-seeds' rows: per system, greedy and beam BLEU over the seeds side by side."""
    (seeds,) = rows
    by_system = {}
    for r in seeds:
        by_system.setdefault((r["variant"], r["T"]), {})[r["metric"].split()[1]] = r
    beam_k = re.search(r"beam (\d+)\)", next(r["metric"] for r in seeds if " beam " in r["metric"]))[1]
    split = seeds[0]["metric"].split()[0]  # "dev" or "test": the split the BLEU is of
    lines = [
        f"| system | seeds | {split} greedy BLEU per seed | mean (difference, 95 % interval) | p | verdict | "
        f"paired p | {split} beam {beam_k} BLEU per seed | mean (difference, 95 % interval) | p | verdict | paired p |",
        "|---|---|---|---:|---:|---|---:|---|---:|---:|---|---:|",
    ]
    for (variant, temperature), metrics in by_system.items():
        cells = []
        for metric in ("greedy", "beam"):
            r = metrics[metric]
            difference = difference_cell(r)
            cells += [
                r["BLEU per seed"],
                f"{float(r['mean']):.2f}{difference}",
                optional(r["p_value"], ".3g"),
                r["verdict"],
                paired(r),
            ]
        lines.append(
            f"| {alt_system(variant, temperature)} | {metrics['greedy']['seeds']} | {' | '.join(cells)} |"
        )
    return lines


# ---------------------------------------------------------------------- ALT base pilot (Part 0)
def alt_pilot(rows):
    (runs,) = rows
    lines = [
        "| T | updates | training s (start-up, validations included) | train words/s (median) | "
        "dev greedy BLEU | carved-test greedy BLEU | carved-test beam 4 BLEU | carved-test ECE % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['T']} | {r['updates']} | {r['last training session s']} | {r['train words/s']} | "
            f"{r['dev greedy']} | {r['test greedy']} | {r['test beam']} | {r['test ECE %']} |"
        )
    return lines


# ------------------------------------------------- ALT mini on the carved test (Part 1)
def sacrebleu_p(p_value):
    """sacrebleu's paired bootstrap reports (count + 1) / (samples + 1): 0.0010 is its floor; "–"
    where the file has none (the baseline)."""
    if not p_value:
        return "–"
    return "≤ 0.001 (floor)" if float(p_value) <= 0.001 else p_value


def is_posthoc(system):
    """T = 1 + post-hoc t*: T = 1's own model, decoded at t*."""
    return "post-hoc" in system


def greedy_p(system, p_value):
    """The post-hoc system decodes greedily with T = 1's model: its output is T = 1's, word for word."""
    return sacrebleu_p(p_value) + (" (identical output)" if is_posthoc(system) else "")


def alt_carved(rows):
    (systems,) = rows
    lines = [
        "| system | decoded at t | greedy BLEU | p (greedy) vs T = 1 | tuned beam BLEU (k, lp) | p (beam) vs T = 1 | "
        "test NLL nats/token | test ECE | dev NLL | dev ECE |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in systems:
        p_greedy = greedy_p(r["system"], r["p greedy vs T=1"])
        p_beam = sacrebleu_p(r["p beam vs T=1"])
        lines.append(
            f"| {r['system']} | {r['t decoded at']} | {r['greedy BLEU']} | {p_greedy} | {r['beam BLEU (k, lp)']} | "
            f"{p_beam} | {r['test NLL']} | {r['test ECE %']} % | {r['dev NLL']} | {r['dev ECE %']} % |"
        )
    return lines


# ---------------------------------------------------- ALT mini Vi->En, one seed (Part 1)
def alt_sweep_runs(rows):
    """ctemp-alt-results' runs.csv: one row per T of the tempered Transformer, scored on dev."""
    (runs,) = rows
    lines = [
        "| T | updates (stopped by) | best dev greedy BLEU in training | dev greedy BLEU (averaged) | "
        "dev beam 4 BLEU | dev NLL nats/token | dev ECE | dev t* |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted((r for r in runs if r["variant"] == "transformer"), key=lambda r: float(r["T"])):
        lines.append(
            f"| {r['T']} | {int(r['updates']):,} ({r['stopped by']}) | {r['best dev BLEU (training)']} | {r['dev greedy']} | "
            f"{r['dev beam']} | {r['dev NLL']} | {r['dev ECE %']} % | {r['dev t*']} |"
        )
    return lines


def alt_systems(rows):
    """ctemp-alt-results' systems.csv (T = 1, T_opt, T = 1 + post-hoc t*) with the paired
    bootstrap's p against T = 1 from its table1_posthoc.csv, scored on dev."""
    systems, posthoc = rows
    tested = {r["system"]: r for r in posthoc}
    lines = [
        "| system | greedy BLEU / chrF | p (greedy) vs T = 1 | tuned beam BLEU (k, lp) / chrF | p (beam) vs T = 1 | "
        "beam 4 BLEU / chrF | dev ECE | dev NLL nats/token |",
        "|---|---|---:|---|---:|---|---:|---:|",
    ]
    for r in (r for r in systems if r["system"] in tested):  # (the other variants: not tested here)
        t = tested[r["system"]]
        p_greedy = greedy_p(r["system"], t["p greedy vs T=1"])
        p_beam = sacrebleu_p(t["p beam vs T=1"])
        beam = f"{r['beam BLEU']} / {r['beam chrF']}" if r["beam BLEU"] else "–"
        name = r["system"] + (f" (t* = {t['t decoded at']})" if is_posthoc(r["system"]) else "")
        lines.append(
            f"| {name} | {r['greedy BLEU']} / {r['greedy chrF']} | {p_greedy} | {r['tuned beam BLEU']} "
            f"{r['tuned beam (k, lp)']} / {r['tuned beam chrF']} | {p_beam} | {beam} | {r['dev ECE %']} % | "
            f"{r['dev NLL']} |"
        )
    return lines


# ------------------------------------------- model variants on the carved test (Part 1)
SACT_MODES = {
    "transformer": ("`transformer`, T = 1", "–"),
    "sact_transformer": ("`sact_transformer`", "untempered (default)"),
    "sact_transformer_tempered": ("`sact_transformer_tempered`", "tempered (the paper's recurrence)"),
}
VARIANTS = {
    "transformer": "`transformer`, T = 1",
    "ct_transformer": "`ct_transformer`",
    "sact_transformer": "`sact_transformer`",
}
CARVED_COLUMNS = (
    "updates (early stop) | test greedy BLEU / chrF | p (greedy) | test beam 4 BLEU | p (beam) | "
    "test NLL nats/token | test ECE | dev greedy BLEU |"
)
CARVED_ALIGNMENT = "---:|---|" + "---:|" * 6


def carved_cells(run, compared):
    """A run's columns of CARVED_COLUMNS, its p values from its row of variants.csv (compared: those
    rows by variant; none: the baseline)."""
    c = compared.get(run["variant"])
    p_greedy, p_beam = (sacrebleu_p(c["p greedy"]), sacrebleu_p(c["p beam"])) if c else ("–", "–")
    return (
        f"{int(run['updates']):,} | {run['test greedy']} / {run['test greedy chrF']} | {p_greedy} | "
        f"{run['test beam']} | {p_beam} | {run['test NLL']} | {run['test ECE %']} % | {run['dev greedy']} |"
    )


def alt_carved_sact(rows):
    runs, variants = rows
    compared = {r["variant"]: r for r in variants}
    lines = [f"| system | `--sact-previous-context` | {CARVED_COLUMNS}", "|---|---|" + CARVED_ALIGNMENT]
    for r in sorted(runs, key=lambda r: list(SACT_MODES).index(r["variant"])):
        name, mode = SACT_MODES[r["variant"]]
        lines.append(f"| {name} | {mode} | {carved_cells(r, compared)}")
    return lines


def alt_carved_variants(rows):
    runs, variants = rows
    compared = {r["variant"]: r for r in variants}
    lines = [f"| system | {CARVED_COLUMNS}", "|---|" + CARVED_ALIGNMENT]
    for r in sorted(runs, key=lambda r: list(VARIANTS).index(r["variant"])):
        lines.append(f"| {VARIANTS[r['variant']]} | {carved_cells(r, compared)}")
    return lines


# ------------------------------------------------------------------ SACT LSTM on ALT (Part 3)
PART3_ORDER = ("lstm", "sact_lstm", "fixed_lstm:2.25")


def sact_lstm(rows):
    """Part 3's runs: the files are (runs.csv, variants.csv) pairs of ctemp-alt-results, one per
    results directory."""
    runs, variants = [r for f in rows[0::2] for r in f], [r for f in rows[1::2] for r in f]
    compared = {(r["experiment"], r["variant"]): r for r in variants}
    lines = [
        "| system | seed | updates (early stop) | dev greedy BLEU / chrF | p (greedy) | dev beam 4 BLEU | "
        "p (beam) | dev ECE | dev NLL nats/token | dev t* |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    chosen = [r for r in runs if r["variant"] in PART3_ORDER]
    for r in sorted(chosen, key=lambda r: (PART3_ORDER.index(r["variant"]), int(r["seed"]))):
        if r["variant"] == "lstm":  # the baseline: its chrF is on the rows compared with it
            c = next(c for c in variants if c["experiment"] == r["experiment"] and c["baseline"] == "lstm")
            chrf, p_greedy, p_beam = c["greedy chrF T=1"], "–", "–"
        else:
            c = compared[(r["experiment"], r["variant"])]
            chrf, p_greedy, p_beam = c["greedy chrF"], c["p greedy"], c["p beam"]
        lines.append(
            f"| `{r['variant']}` | {r['seed']} | {int(r['updates']):,} | {r['dev greedy']} / {chrf} | "
            f"{p_greedy} | {r['dev beam']} | {p_beam} | {r['dev ECE %']} % | {r['dev NLL']} | {r['dev t*']} |"
        )
    return lines


# ------------------------------------------------- at a glance: every verdict over the seeds
@dataclass(frozen=True)
class Evidence:
    """A seeds file of ctemp-alt-seeds (kind "alt"; "systems": of its --systems, the tuned beam
    rows) or of lm_results.py seeds ("ptb"), or ctemp-alt-results' files of each seed (one file a
    seed, seeds 1, 2, ...): table1_posthoc.csv ("ece") or table1.csv ("claim": greedy at T_opt
    against T = 1's tuned beam); the setting its models were trained in, and the variants the
    glance table shows (every one but the baseline where empty)."""

    kind: str
    paths: Tuple[str, ...]
    setting: str
    variants: Tuple[str, ...] = ()


MINI = "ALT {}, mini Transformer"
PTB = "PTB, LSTM LM, {} AR/TAR"


def alt_seeds_evidence(folder, name, setting):
    return Evidence("alt", (os.path.join(ALT_RESULTS, folder, name),), setting)


def per_seed_evidence(kind, name, folders, setting):
    return Evidence(kind, tuple(os.path.join(ALT_RESULTS, f, name) for f in folders), setting)


def ptb_evidence(name, setting, variants=()):
    return Evidence("ptb", (os.path.join(LM_RESULTS, name),), setting, variants)


CARVED_EN_VI = ("mini_en_vi_carved", *(f"mini_en_vi_carved_seed{s}" for s in (2, 3, 4)))
CARVED_VI_EN = ("mini_vi_en_carved", *(f"mini_vi_en_carved_seed{s}" for s in (2, 3, 4)))
GLANCE = (
    per_seed_evidence("claim", "table1.csv", CARVED_EN_VI, MINI.format("En→Vi")),
    per_seed_evidence("claim", "table1.csv", CARVED_VI_EN, MINI.format("Vi→En")),
    alt_seeds_evidence("mini_en_vi_carved_seeds", "tempering_four_seeds.csv", MINI.format("En→Vi")),
    alt_seeds_evidence("mini_en_vi_carved_seeds", "tempering_dev_four_seeds.csv", MINI.format("En→Vi")),
    alt_seeds_evidence("mini_vi_en_carved_seeds", "tempering_four_seeds.csv", MINI.format("Vi→En")),
    alt_seeds_evidence("mini_vi_en_carved_seeds", "tempering_dev_four_seeds.csv", MINI.format("Vi→En")),
    Evidence(
        "systems",
        (os.path.join(ALT_RESULTS, "mini_en_vi_carved_seeds", "systems_four_seeds.csv"),),
        MINI.format("En→Vi"),
    ),
    Evidence(
        "systems",
        (os.path.join(ALT_RESULTS, "mini_vi_en_carved_seeds", "systems_four_seeds.csv"),),
        MINI.format("Vi→En"),
    ),
    per_seed_evidence("ece", "table1_posthoc.csv", CARVED_EN_VI, MINI.format("En→Vi")),
    per_seed_evidence("ece", "table1_posthoc.csv", CARVED_VI_EN, MINI.format("Vi→En")),
    alt_seeds_evidence("mini_en_vi_carved_seeds", "variants_five_seeds_ct_sact.csv", MINI.format("En→Vi")),
    alt_seeds_evidence("mini_en_vi_seeds", "lstm.csv", "ALT En→Vi, attention LSTM"),
    ptb_evidence("ptb_converged_mos_constant2_seeds.csv", PTB.format("with")),
    ptb_evidence(
        "ptb_converged_mos_constant2_seeds_vs_mos.csv", PTB.format("with"), ("ct-mos", "mos-constant-2")
    ),
    ptb_evidence("ptb_converged_mos_constant2_seeds_vs_mos-constant-2.csv", PTB.format("with"), ("ct-mos",)),
    ptb_evidence("ptb_converged_mos_constant2_seeds_vs_constant-2.csv", PTB.format("with"), ("ct",)),
    ptb_evidence("ptb_converged_no_ar_tar_final_seeds.csv", PTB.format("without")),
    ptb_evidence("ptb_converged_no_ar_tar_final_seeds_vs_mos.csv", PTB.format("without"), ("ct-mos",)),
    ptb_evidence("ptb_converged_no_ar_tar_final_seeds_vs_constant-2.csv", PTB.format("without"), ("ct",)),
)


def glance(rows):
    """One line per comparison of GLANCE: the method's mean over its seeds against the baseline's,
    their difference (a ratio of perplexities) with its 95 % interval, the test with the seed as the
    unit and its verdict, the file it comes from."""
    lines = [
        "| method | against | setting | metric | seeds | method vs baseline | difference (95 % interval) | p | "
        "verdict | result file |",
        "|---|---|---|---|---|---|---|---:|---|---|",
    ]
    files = iter(rows)
    for evidence in GLANCE:
        read = [next(files) for _ in evidence.paths]
        for cells in GLANCE_ROWS[evidence.kind](read, evidence):
            lines.append(f"| {' | '.join(cells)} | {evidence_links(evidence.paths)} |")
    return lines


def evidence_links(paths):
    """Links from docs/ to the files: by name, or "seed 1, 2, ..." for one file a seed."""
    if len(paths) == 1:
        return f"[{os.path.basename(paths[0])}](../{paths[0]})"
    return ", ".join(f"[{'seed ' if i == 0 else ''}{i + 1}](../{p})" for i, p in enumerate(paths))


GLANCE_NAMES = {  # the ALT systems that are not a temperature of the plain transformer
    "ct_transformer": "contextual temperature (`ct_transformer`)",
    "sact_transformer": "SACT (`sact_transformer`)",
    "sact_lstm": "SACT (`sact_lstm`)",
    "fixed_lstm:2.25": "constant attention τ = 2.25 (`fixed_lstm`)",
}


def glance_name(variant, temperature):
    """The method of an ALT seeds row: the plain transformer at T is softmax tempering."""
    if variant == "transformer":
        return f"softmax tempering, {alt_system(variant, temperature)}"
    return GLANCE_NAMES[variant]


def alt_glance(read, evidence):
    """A ctemp-alt-seeds file's comparisons, system by system (greedy, then beam)."""
    (seeds,) = read
    baselines = {r["metric"]: r for r in seeds if r["verdict"] == "baseline"}
    systems = list(dict.fromkeys((r["variant"], r["T"]) for r in seeds))
    for r in sorted(seeds, key=lambda r: systems.index((r["variant"], r["T"]))):
        if r["verdict"] != "baseline":
            b = baselines[r["metric"]]
            names = glance_name(r["variant"], r["T"]), alt_system(b["variant"], b["T"])
            yield bleu_cells(r, b, *names, evidence.setting, r["metric"])


def bleu_cells(r, b, method, against, setting, metric):
    """The glance cells of a seeds row `r` of BLEU against its baseline's row `b`."""
    return (
        method,
        against,
        setting,
        metric,
        seeds_cell(r, b),
        f"{float(r['mean']):.2f} vs {float(b['mean']):.2f}",
        with_interval(f"{float(r['difference']):+.2f}", interval(r, *BLEU_INTERVAL)),
        optional(r["p_value"], ".3g"),
        r["verdict"],
    )


def seeds_cell(r, b):
    """The seeds of a comparison: "1 2 3", or "1 2 3 vs 1 2" where the baseline has other seeds."""
    return r["seeds"] if r["seeds"] == b["seeds"] else f"{r['seeds']} vs {b['seeds']}"


def ece_glance(read, evidence):
    """Post-hoc t* against T = 1's own model: the test ECE of each seed before and after, and in how
    many seeds it is lower (no test is made)."""
    pairs = []
    for systems in read:
        by_system = {"post-hoc" if is_posthoc(r["system"]) else r["system"]: r for r in systems}
        pairs.append((by_system["T = 1"]["test ECE %"], by_system["post-hoc"]["test ECE %"]))
    below = sum(float(after) < float(before) for before, after in pairs)
    yield (
        "post-hoc t* (fitted on dev)",
        "T = 1, the same model",
        evidence.setting,
        "test ECE % (T = 1 → t*)",
        " ".join(str(seed) for seed in range(1, len(pairs) + 1)),
        ", ".join(f"{before} → {after}" for before, after in pairs),
        "–",
        "–",
        f"lower in {below} of {len(pairs)} seeds",
    )


SYSTEM_NAMES = {"T = 1 + post-hoc t*": "post-hoc t* (fitted on dev)"}  # else "T_opt = 2": tempering


def systems_glance(read, evidence):
    """A --systems seeds file's tuned beam rows: T_opt and post-hoc t* against T = 1, each decoded
    with the beam and length penalty dev chose for it."""
    (seeds,) = read
    for r in seeds:
        if "tuned beam" in r["metric"] and r["verdict"] != "baseline":
            b = next(x for x in seeds if x["metric"] == r["metric"] and x["verdict"] == "baseline")
            name = SYSTEM_NAMES.get(r["system"], f"softmax tempering, {r['system']}")
            yield bleu_cells(
                r, b, name, b["system"], evidence.setting, r["metric"].replace("carved test", "test")
            )


def claim_glance(read, evidence):
    """The softmax-tempering paper's claim, seed by seed: greedy at T_opt against T = 1's tuned beam
    (sacrebleu's paired bootstrap over the test sentences of each seed; no test over the seeds)."""
    seeds = [r for (r,) in read]
    pairs = [
        (r["greedy T_opt"], r["beam T=1 (k, lp)"].split()[0], r["p greedy T_opt vs beam T=1"]) for r in seeds
    ]
    lower = sum(float(g) < float(b) and float(p) < 0.05 for g, b, p in pairs)
    t_opt = " / ".join(dict.fromkeys(r["T_opt"] for r in seeds))  # one T_opt per seed where they differ
    yield (
        f"greedy at T_opt = {t_opt} (the paper's claim: as good)",
        "T = 1, tuned beam",
        evidence.setting,
        "test BLEU",
        " ".join(str(seed) for seed in range(1, len(pairs) + 1)),
        ", ".join(f"{g} vs {b}" for g, b, _ in pairs),
        "–",
        " / ".join("≤ 0.001" if float(p) <= 0.001 else p for _, _, p in pairs) + " (per seed)",
        f"lower in {lower} of {len(pairs)} seeds (p < 0.05)",
    )


def ptb_glance(read, evidence):
    (seeds,) = read
    (b,) = (r for r in seeds if r["verdict"] == "baseline")
    for r in seeds:
        if r["verdict"] != "baseline" and (not evidence.variants or r["variant"] in evidence.variants):
            yield (
                lm_label(r["variant"]),
                lm_label(b["variant"]),
                evidence.setting,
                "test perplexity (geometric mean)",
                seeds_cell(r, b),
                f"{float(r['test_ppl_geomean']):.2f} vs {float(b['test_ppl_geomean']):.2f}",
                with_interval(f"× {float(r['ratio_to_baseline']):.4f}", interval(r, *RATIO_INTERVAL)),
                optional(r["p_value"], ".3g"),
                r["verdict"],
            )


GLANCE_ROWS = {
    "alt": alt_glance,
    "systems": systems_glance,
    "claim": claim_glance,
    "ece": ece_glance,
    "ptb": ptb_glance,
}


# ------------------------------------------------------------- the quickstart (make demo)
def quickstart(results):
    lines = [
        "| CPU | torch's kernels | threads | training T | greedy BLEU | beam-5 BLEU | greedy chrF | beam-5 chrF "
        "| greedy s | beam-5 s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for r in result["rows"]:
            greedy, beam = r["greedy"], r["beam5"]
            lines.append(
                f"| {result['cpu']} | {result.get('cpu_capability', 'not recorded')} | {result['threads']} | "
                f"{r['training_temperature']:g} | "
                f"{greedy['bleu']:.2f} | {beam['bleu']:.2f} | {greedy['chrf']:.2f} | {beam['chrf']:.2f} | "
                f"{greedy['decode_seconds']:.2f} | {beam['decode_seconds']:.2f} |"
            )
    return lines


def alt_table(folder, name, render):
    """A table of one result file of an ALT results folder."""
    return Table((os.path.join(ALT_RESULTS, folder, name),), render)


def alt_variants_table(folder, render):
    """A table of an ALT results folder's runs.csv and variants.csv (each variant against T = 1)."""
    return Table(
        tuple(os.path.join(ALT_RESULTS, folder, name) for name in ("runs.csv", "variants.csv")), render
    )


TABLES = {
    "glance": Table(tuple(p for evidence in GLANCE for p in evidence.paths), glance),
    "ptb_runs": Table(
        (
            os.path.join(LM_RESULTS, "ptb_converged.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_more_seeds.csv"),  # the seeds trained after them
            os.path.join(LM_RESULTS, "ptb_converged_ct_seed2.csv"),  # and CT's second seed
            os.path.join(LM_RESULTS, "ptb_converged_ct_seed3.csv"),  # and its third
            os.path.join(LM_RESULTS, "ptb_converged_constant2_seed2.csv"),  # and tau = 2's second
            os.path.join(LM_RESULTS, "ptb_converged_constant2_seed3.csv"),  # and its third
            os.path.join(LM_RESULTS, "ptb_converged_ctmos.csv"),  # and CT-MoS's second and third
            os.path.join(LM_RESULTS, "ptb_converged_mos_constant2.csv"),  # and MoS at tau = 2
        ),
        ptb_runs,
    ),
    "ptb_compare": Table(
        (
            os.path.join(LM_RESULTS, "ptb_converged_compare.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_compare_seed2.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_compare_seed3.csv"),
        ),
        ptb_compare,
    ),
    "ptb_seeds": Table((os.path.join(LM_RESULTS, "ptb_converged_mos_constant2_seeds.csv"),), ptb_seeds),
    "ptb_seeds_vs_mos": Table(
        (os.path.join(LM_RESULTS, "ptb_converged_mos_constant2_seeds_vs_mos.csv"),), ptb_seeds
    ),
    "ptb_no_ar_tar_runs": Table(
        (
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_later.csv"),  # the runs trained later
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_final.csv"),  # and the last ones
        ),
        functools.partial(ptb_runs, clipped=True),
    ),
    "ptb_no_ar_tar_compare": Table(
        (
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_compare.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_compare_seed2.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_compare_seed3.csv"),
        ),
        ptb_compare,
    ),
    "ptb_no_ar_tar_seeds": Table(
        (os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_final_seeds.csv"),), ptb_seeds
    ),
    "ptb_no_ar_tar_seeds_vs_mos": Table(
        (os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_final_seeds_vs_mos.csv"),), ptb_seeds
    ),
    "ptb_no_ar_tar_seeds_vs_constant_2": Table(
        (os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_final_seeds_vs_constant-2.csv"),), ptb_seeds
    ),
    "ptb_clipping": Table(
        (
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_no_clip.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_compare.csv"),  # seed 1
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_no_clip_compare.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_compare_seed2.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_no_clip_compare_seed2.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_compare_seed3.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_no_clip_compare_seed3.csv"),
        ),
        ptb_clipping,
    ),
    "ptb_ar_tar": Table(
        (
            os.path.join(LM_RESULTS, "ptb_converged_ctmos_seeds.csv"),
            os.path.join(LM_RESULTS, "ptb_converged_no_ar_tar_final_seeds.csv"),
        ),
        ptb_ar_tar,
    ),
    "alt_tempering_seeds": alt_table("mini_en_vi_seeds", "tempering.csv", alt_seeds),
    "alt_tempering_four_seeds": alt_table("mini_en_vi_seeds", "tempering_four_seeds.csv", alt_seeds),
    "alt_variants_seeds": alt_table("mini_en_vi_seeds", "variants.csv", alt_seeds),
    "alt_lstm_seeds": alt_table("mini_en_vi_seeds", "lstm.csv", alt_seeds),
    "alt_pilot": alt_table("base_en_vi_pilot", "runs.csv", alt_pilot),
    "alt_pilot_large_batch": alt_table("base_en_vi_pilot_large_batch", "runs.csv", alt_pilot),
    "alt_vi_en_tempering_seeds": alt_table("mini_vi_en_seeds", "tempering.csv", alt_seeds),
    "alt_vi_en_runs": alt_table("mini_vi_en", "runs.csv", alt_sweep_runs),
    "alt_vi_en_systems": Table(
        (
            os.path.join(ALT_RESULTS, "mini_vi_en", "systems.csv"),
            os.path.join(ALT_RESULTS, "mini_vi_en", "table1_posthoc.csv"),
        ),
        alt_systems,
    ),
    "alt_carved": alt_table("mini_en_vi_carved", "table1_posthoc.csv", alt_carved),
    "alt_carved_seed2": alt_table("mini_en_vi_carved_seed2", "table1_posthoc.csv", alt_carved),
    "alt_carved_seed3": alt_table("mini_en_vi_carved_seed3", "table1_posthoc.csv", alt_carved),
    "alt_carved_tempering_seeds": alt_table("mini_en_vi_carved_seeds", "tempering.csv", alt_seeds),
    "alt_carved_seed4": alt_table("mini_en_vi_carved_seed4", "table1_posthoc.csv", alt_carved),
    "alt_carved_tempering_four_seeds": alt_table(
        "mini_en_vi_carved_seeds", "tempering_four_seeds.csv", alt_seeds
    ),
    "alt_vi_en_carved": alt_table("mini_vi_en_carved", "table1_posthoc.csv", alt_carved),
    "alt_vi_en_carved_seed2": alt_table("mini_vi_en_carved_seed2", "table1_posthoc.csv", alt_carved),
    "alt_vi_en_carved_seed3": alt_table("mini_vi_en_carved_seed3", "table1_posthoc.csv", alt_carved),
    "alt_vi_en_carved_seed4": alt_table("mini_vi_en_carved_seed4", "table1_posthoc.csv", alt_carved),
    "alt_vi_en_carved_tempering_four_seeds": alt_table(
        "mini_vi_en_carved_seeds", "tempering_four_seeds.csv", alt_seeds
    ),
    "alt_carved_sact": alt_variants_table("mini_en_vi_carved_sact", alt_carved_sact),
    "alt_carved_variants_seed2": alt_variants_table("mini_en_vi_carved_seed2_variants", alt_carved_variants),
    "alt_carved_variants_seed3": alt_variants_table("mini_en_vi_carved_seed3_variants", alt_carved_variants),
    "alt_carved_variants_seed4": alt_variants_table("mini_en_vi_carved_seed4_variants", alt_carved_variants),
    "alt_carved_variants_seed5": alt_variants_table(
        "mini_en_vi_carved_seed5_variants_with_sact", alt_carved_variants
    ),
    "sact_lstm": Table(
        (
            os.path.join(ALT_RESULTS, "mini_en_vi_variants", "part3", "runs.csv"),
            os.path.join(ALT_RESULTS, "mini_en_vi_variants", "part3", "variants.csv"),
            os.path.join(ALT_RESULTS, "mini_en_vi_seed3_lstm", "runs.csv"),
            os.path.join(ALT_RESULTS, "mini_en_vi_seed3_lstm", "variants.csv"),
            os.path.join(ALT_RESULTS, "mini_en_vi_seed3_fixed_lstm", "runs.csv"),
            os.path.join(ALT_RESULTS, "mini_en_vi_seed3_fixed_lstm", "variants.csv"),
        ),
        sact_lstm,
    ),
    "quickstart": Table(
        (
            os.path.join(QUICKSTART_RESULTS, "amd-epyc-avx512-2-threads.json"),
            os.path.join(QUICKSTART_RESULTS, "amd-epyc-avx2-2-threads.json"),
            os.path.join(QUICKSTART_RESULTS, "intel-xeon-avx512-2-threads.json"),
            os.path.join(QUICKSTART_RESULTS, "intel-xeon-2-threads.json"),  # kernels not recorded
        ),
        quickstart,
    ),
}


def render(name):
    table = TABLES[name]
    return "\n".join(table.render([read_rows(path) for path in table.files])) + "\n"


def regenerate(text, page):
    """The page with every marked table rendered again; an unknown table name is an error."""

    def replace(match):
        name = match.group("name")
        if name not in TABLES:
            sys.exit(f"results_pages.py: error: {page} marks a table {name!r}; known: {', '.join(TABLES)}")
        start, end = match.span("body")
        return match.group(0)[: start - match.start()] + render(name) + match.group(0)[end - match.start() :]

    return BLOCK.sub(replace, text)


def stale_tables(text, page):
    """The names of the marked tables of a page that differ from what their files give."""
    return [
        m.group("name")
        for m in BLOCK.finditer(text)
        if m.group("name") not in TABLES or m.group("body") != render(m.group("name"))
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="results_pages.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    args = parser.parse_args(argv)
    stale = []
    for page in PAGES:
        path = os.path.join(REPO, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if args.check:
            stale += [f"{page}: {name}" for name in stale_tables(text, page)]
            continue
        new = regenerate(text, page)
        if new != text:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(new)
            os.replace(path + ".tmp", path)
            print(f"{page}: tables regenerated")
    if stale:
        sys.exit(
            "not what their result files give (run python scripts/results_pages.py):\n" + "\n".join(stale)
        )


if __name__ == "__main__":
    main()
