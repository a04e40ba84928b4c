"""ctemp-alt-results' view of the calibration that posthoc.py measures: the runs table's
calibration cells, and Table 1 with the row T = 1 + post-hoc t* and its reliability diagrams."""

import functools

from .common import fmt
from .posthoc import COMPARISONS, SYSTEMS, measured, plot_reliability
from .sections import section


def percent(x):
    return "" if x is None else f"{100 * x:.1f}"


def nats(x):
    return "" if x is None else f"{x:.3f}"


RUN_COLUMNS = ["dev NLL", "dev ECE %", "dev t*", "test NLL", "test ECE %"]


def run_cells(run_dir):
    """The runs table's calibration cells of a run: NLL (nats/token) and ECE of the distribution
    it decodes, and the dev t* ("" where not measured)."""
    dev, test = (measured(run_dir, s) for s in ("valid", "test"))
    return [
        nats(dev and dev.nll),
        percent(dev and dev.ece),
        f"{dev.fitted_temperature:.3f}" if dev else "",
        nats(test and test.nll),
        percent(test and test.ece),
    ]


def table(experiments):
    """Table 1 by system, with the row T = 1 + post-hoc t*: (header, rows)."""
    header = [
        "direction",
        "experiment",
        "scored on",
        "system",
        "t decoded at",
        "dev NLL",
        "dev ECE %",
        "test NLL",
        "test ECE %",
        "greedy BLEU",
        "greedy chrF",
        "beam BLEU (k, lp)",
        "beam chrF",
        "p greedy vs T=1",
        "p beam vs T=1",
        "p greedy vs T_opt",
        "p beam vs T_opt",
    ]
    rows = []
    for e in experiments:
        f, p = e.final, e.posthoc
        if f is None or p is None:
            continue
        sig, own = f.significance, p.significance
        pvalue = {
            "untempered": ("", "", "", ""),
            "tempered": (
                sig["greedy"].bleu.p_value,
                sig["beam"].bleu.p_value,
                "",
                "",
            ),
            "posthoc": tuple(own[k].bleu.p_value for k in COMPARISONS),
        }
        for key, label in SYSTEMS:
            s = f.systems[key] if key != "posthoc" else p.systems["posthoc"]
            c, t = p.systems[key].calibration, p.systems[key].temperature
            rows.append(
                [
                    f.direction,
                    e.name,
                    "test" if f.scored_subset == "test" else "dev (tuned on dev too)",
                    label if key != "tempered" else f"T_opt = {fmt(t)}",
                    f"{t:.4g}",
                    nats(c["valid"].nll),
                    percent(c["valid"].ece),
                    nats(c["test"].nll) if "test" in c else "",
                    percent(c["test"].ece) if "test" in c else "",
                    f"{s.greedy.bleu:.2f}",
                    f"{s.greedy.chrf:.2f}",
                    f"{s.beam.bleu:.2f} ({s.beam.beam}, {fmt(s.beam.lenpen)})",
                    f"{s.beam.chrf:.2f}",
                ]
                + [x if x == "" else f"{x:.4f}" for x in pvalue[key]]
            )
    return header, rows


def report(experiments, out):
    """ctemp-alt-results' section: table1_posthoc.csv, reliability.<experiment>.png; its markdown."""
    caption = (
        "T = 1 + post-hoc t*: the T = 1 model decoded at the temperature t* that minimises its dev NLL "
        "(ctemp-calibrate; one number fitted after training), its beam and length penalty tuned on dev "
        "over the same grid as the others. p: paired bootstrap (sacrebleu, 1000 samples) of BLEU. NLL "
        "(nats/token) and ECE (15 bins): teacher forced, of the distribution each system decodes. "
        "Greedy output cannot change with t (the argmax of softmax(D/t) does not depend on t)."
    )
    figures = [
        (f"reliability.{e.name}.png", functools.partial(plot_reliability, e.posthoc))
        for e in experiments
        if e.final is not None and e.posthoc is not None
    ]
    title = "Table 1, with T = 1 + post-hoc t*"
    return section(out, title, "table1_posthoc.csv", table(experiments), caption, figures)
