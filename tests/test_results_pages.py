"""The generated tables of the results pages (scripts/results_pages.py) are what their result files
give, and the generator reads the files (a changed number changes the table)."""

import importlib.util
import os
import shutil

import pytest
from conftest import REPO


@pytest.fixture
def pages():
    spec = importlib.util.spec_from_file_location(
        "results_pages", os.path.join(REPO, "scripts", "results_pages.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_table_is_what_its_files_give(pages):
    pages.main(["--check"])  # exits with the stale tables' names otherwise
    marked = []
    for page in pages.PAGES:
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            marked += [m.group("name") for m in pages.BLOCK.finditer(f.read())]
    assert sorted(marked) == sorted(pages.TABLES)  # every table is on a page once, every marker has a table


def test_a_changed_result_changes_the_table_and_the_check_says_so(pages, tmp_path, monkeypatch):
    for table in pages.TABLES.values():
        for path in table.files:
            os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
            shutil.copy(os.path.join(REPO, path), tmp_path / path)
    os.makedirs(tmp_path / "docs")
    for page in pages.PAGES:
        shutil.copy(os.path.join(REPO, page), tmp_path / page)
    monkeypatch.setattr(pages, "REPO", str(tmp_path))
    pages.main(["--check"])
    runs = tmp_path / pages.TABLES["ptb_runs"].files[0]
    text = runs.read_text(encoding="utf-8")
    assert ",85.12," in text
    runs.write_text(text.replace(",85.12,", ",85.13,", 1), encoding="utf-8")
    with pytest.raises(SystemExit, match="docs/results.md: ptb_runs"):
        pages.main(["--check"])
    pages.main([])  # regenerated: the page now says 85.13
    page = (tmp_path / "docs" / "results.md").read_text(encoding="utf-8")
    assert "| softmax | early stop | 49 | 49 | 90.10 / 85.13 |" in page
    pages.main(["--check"])


def test_p_values_of_zero_are_reported_as_below_the_resolution(pages):
    assert pages.p_text("0.0", 10000) == "< 0.0001"
    assert pages.p_text("0.0842", 10000) == "0.0842"


def test_a_seed_level_p_keeps_the_digits_its_verdict_rests_on(pages):
    assert pages.optional("0.0489117773413824", ".3g") == "0.0489"  # not 0.05 beside "higher"
    assert pages.optional("", ".3g") == "–"  # no test: the file leaves it empty


def test_the_ar_tar_table_puts_each_rows_two_settings_side_by_side(pages):
    def seeds_row(variant, seeds, ratio, p="", verdict="baseline"):
        return {
            "variant": variant,
            "seeds": seeds,
            "ratio_to_baseline": ratio,
            "p_value": p,
            "verdict": verdict,
        }

    with_ar_tar = [
        seeds_row("softmax", "1 2 3", "1.0"),
        seeds_row("ct", "1", "1.0361", verdict="no test: one seed"),
    ]
    without = [
        seeds_row("softmax", "1 2 3", "1.0"),
        seeds_row("constant-0.5", "1 2 3", "0.97", "0.0412", "lower"),
    ]
    assert pages.ptb_ar_tar([with_ar_tar, without])[2:] == [
        "| softmax | 1 2 3 | 1.0000 | – | baseline | 1 2 3 | 1.0000 | – | baseline |",
        "| CT | 1 | 1.0361 | – | no test: one seed | not run | – | – | – |",
        "| constant τ = 0.5 | not run | – | – | – | 1 2 3 | 0.9700 | 0.0412 | lower |",
    ]


def test_the_clipping_table_compares_each_row_with_the_softmax_of_its_own_seed(pages):
    def run(variant, ppl, clipped="0.0"):
        return {"variant": variant, "epochs": "30", "test_ppl": ppl, "clipped_percent": clipped}

    def versus(variant, ratio):
        return {"variant": variant, "ppl_ratio": ratio, "ratio_low": "0.9", "ratio_high": "1.1"} | {
            "p_value": "0.01",
            "samples": "10000",
        }

    table = [
        run("softmax", "100"),
        run("constant-0.5", "90"),
        run("softmax@2", "110"),
        run("constant-0.5@2", "88"),
    ]
    # a seed's comparison file also compares the other seeds' runs with its softmax: not these rows
    seed1 = [versus("constant-0.5", "0.9"), versus("softmax@2", "1.1"), versus("constant-0.5@2", "0.88")]
    seed2 = [versus("constant-0.5@2", "0.8")]
    lines = pages.ptb_clipping([table, table, seed1, seed1, seed2, seed2])[2:]
    assert [line.split(" | ")[:5] for line in lines] == [
        ["| softmax", "1", "30", "100.00", "baseline"],
        ["| constant τ = 0.5", "1", "30", "90.00", "0.9000 (0.9000–1.1000)"],
        ["| softmax", "2", "30", "110.00", "baseline"],
        ["| constant τ = 0.5", "2", "30", "88.00", "0.8000 (0.9000–1.1000)"],
    ]


def test_the_glance_table_gives_each_system_of_a_seeds_file_its_rows_together(pages):
    def row(metric, t, mean, verdict, p="", interval=("", "")):
        return {"metric": metric, "variant": "transformer", "T": t, "seeds": "1 2 3", "mean": mean} | {
            "difference": str(float(mean) - (7.0 if "greedy" in metric else 8.0)),
            "ci_low": interval[0],
            "ci_high": interval[1],
            "p_value": p,
            "verdict": verdict,
        }

    seeds = [
        row("dev greedy BLEU", "1", "7.0", "baseline"),
        row("dev greedy BLEU", "2", "6.5", "inconclusive", "0.3", ("-1.2", "0.2")),
        row("dev beam BLEU (beam 4)", "1", "8.0", "baseline"),
        row("dev beam BLEU (beam 4)", "2", "7.5", "lower", "0.0123456", ("-0.8", "-0.2")),
        row("dev greedy BLEU", "3", "6.0", "lower", "0.01", ("-1.5", "-0.5")),
        row("dev beam BLEU (beam 4)", "3", "7.0", "no test: one seed"),
    ]
    evidence = pages.Evidence("alt", ("seeds.csv",), "ALT")
    rows = [(c[0], c[3], *c[5:]) for c in pages.alt_glance([seeds], evidence)]
    assert rows == [
        (
            "softmax tempering, T = 2",
            "dev greedy BLEU",
            "6.50 vs 7.00",
            "-0.50 (-1.20 to +0.20)",
            "0.3",
            "inconclusive",
        ),
        (
            "softmax tempering, T = 2",
            "dev beam BLEU (beam 4)",
            "7.50 vs 8.00",
            "-0.50 (-0.80 to -0.20)",
            "0.0123",
            "lower",
        ),
        (
            "softmax tempering, T = 3",
            "dev greedy BLEU",
            "6.00 vs 7.00",
            "-1.00 (-1.50 to -0.50)",
            "0.01",
            "lower",
        ),
        (
            "softmax tempering, T = 3",
            "dev beam BLEU (beam 4)",
            "7.00 vs 8.00",
            "-1.00",
            "–",
            "no test: one seed",
        ),
    ]


def test_the_glance_table_counts_the_seeds_in_which_post_hoc_scaling_lowers_the_ece(pages):
    def seed(before, after):
        return [
            {"system": "T = 1", "test ECE %": before},
            {"system": "T_opt = 2", "test ECE %": "9.9"},
            {"system": "T = 1 + post-hoc t*", "test ECE %": after},
        ]

    evidence = pages.Evidence("ece", ("a.csv", "b.csv"), "ALT")
    ((*_, seeds, values, difference, p, verdict),) = pages.ece_glance(
        [seed("12.7", "1.3"), seed("2.0", "2.5")], evidence
    )
    assert (seeds, values, difference, p) == ("1 2", "12.7 → 1.3, 2.0 → 2.5", "–", "–")
    assert verdict == "lower in 1 of 2 seeds"
    assert pages.evidence_links(("x/a.csv", "y/b.csv")) == "[seed 1](../x/a.csv), [2](../y/b.csv)"


def test_the_glance_table_shows_only_the_rows_asked_for_of_a_language_model_seeds_file(pages):
    def row(variant, geomean, ratio, verdict, p="", interval=("", "")):
        return {"variant": variant, "seeds": "1 2 3", "test_ppl_geomean": geomean} | {
            "ratio_to_baseline": ratio,
            "ratio_ci_low": interval[0],
            "ratio_ci_high": interval[1],
            "p_value": p,
            "verdict": verdict,
        }

    seeds = [
        row("ct", "104.5", "1.1", "higher", "0.0026", ("1.05", "1.15")),
        row("mos", "95.0", "1.0", "baseline"),
    ]
    seeds.append(row("softmax", "101.5", "1.07", "higher", "0.013", ("1.01", "1.13")))
    evidence = pages.Evidence("ptb", ("vs_mos.csv",), "PTB", ("ct",))
    assert list(pages.ptb_glance([seeds], evidence)) == [
        ("CT", "MoS (M = 2)", "PTB", "test perplexity (geometric mean)", "1 2 3", "104.50 vs 95.00")
        + ("× 1.1000 (1.0500–1.1500)", "0.0026", "higher")
    ]
    # a baseline of other seeds than the method's: the cell names both
    seeds[1]["seeds"] = "1 2"
    ((*_, seeds_cell, _, _, _, verdict),) = pages.ptb_glance([seeds], evidence)
    assert (seeds_cell, verdict) == ("1 2 3 vs 1 2", "higher")


def test_a_seeds_table_gives_each_difference_its_interval_where_a_test_was_made(pages):
    tested = {"difference": "-0.37", "ci_low": "-0.674", "ci_high": "-0.0649", "verdict": "lower"}
    untested = {"difference": "-1.0", "ci_low": "", "ci_high": "", "verdict": "no test: one seed"}
    assert pages.difference_cell(tested) == " (-0.37, -0.67 to -0.06)"
    assert pages.difference_cell(untested) == " (-1.00)"
    assert pages.difference_cell({"verdict": "baseline"}) == ""
    row = {"variant": "mos", "seeds": "1 2 3", "test_ppl_geomean": "88.57", "test_ppl_min": "88.35"}
    row |= {"test_ppl_max": "88.7", "ratio_to_baseline": "1.0313", "ratio_ci_low": "1.00031"}
    row |= {"ratio_ci_high": "1.0632", "welch_t": "4.1", "welch_df": "2.1", "p_value": "0.0489"}
    base = {"variant": "softmax", "seeds": "1 2 3", "test_ppl_geomean": "85.88", "test_ppl_min": "85.12"}
    base |= {
        "test_ppl_max": "87.14",
        "ratio_to_baseline": "1.0",
        "welch_t": "",
        "welch_df": "",
        "p_value": "",
    }
    lines = pages.ptb_seeds([[base | {"verdict": "baseline"}, row | {"verdict": "higher", "paired_p": ""}]])
    assert "| 1.0313 (1.0003–1.0632) |" in lines[3] and "| 1.0000 |" in lines[2]


def test_the_glance_table_tests_the_papers_claim_seed_by_seed(pages):
    def seed(t_opt, greedy, beam, p):
        return [
            {
                "T_opt": t_opt,
                "greedy T_opt": greedy,
                "beam T=1 (k, lp)": beam,
                "p greedy T_opt vs beam T=1": p,
            }
        ]

    read = [seed("2", "8.14", "9.09 (6, 1)", "0.0010"), seed("3", "8.27", "9.21 (4, 1.4)", "0.0700")]
    read.append(seed("2", "9.50", "9.21 (4, 1.4)", "0.0200"))
    ((method, _, _, _, seeds, values, _, p, verdict),) = pages.claim_glance(
        read, pages.Evidence("claim", (), "ALT")
    )
    assert method.startswith("greedy at T_opt = 2 / 3 ") and seeds == "1 2 3"
    assert values == "8.14 vs 9.09, 8.27 vs 9.21, 9.50 vs 9.21"
    assert p == "≤ 0.001 / 0.0700 / 0.0200 (per seed)"
    assert verdict == "lower in 1 of 3 seeds (p < 0.05)"  # not seed 2 (p), not seed 3 (higher)


def test_the_glance_table_takes_the_tuned_beam_rows_of_a_systems_seeds_file(pages):
    def row(metric, system, mean, verdict, difference="0.0", p=""):
        return {
            "metric": metric,
            "system": system,
            "seeds": "1 2",
            "mean": mean,
            "difference": difference,
        } | {
            "ci_low": "-0.1" if p else "",
            "ci_high": "0.6" if p else "",
            "p_value": p,
            "verdict": verdict,
        }

    seeds = [
        row("carved test greedy BLEU", "T = 1", "8.0", "baseline"),
        row("carved test greedy BLEU", "T = 1 + post-hoc t*", "8.0", "inconclusive", "0.0", "1.0"),
        row("carved test tuned beam BLEU", "T = 1", "9.0", "baseline"),
        row("carved test tuned beam BLEU", "T = 1 + post-hoc t*", "9.25", "inconclusive", "0.25", "0.09"),
    ]
    rows = list(pages.systems_glance([seeds], pages.Evidence("systems", (), "ALT")))
    assert rows == [
        ("post-hoc t* (fitted on dev)", "T = 1", "ALT", "test tuned beam BLEU", "1 2", "9.25 vs 9.00")
        + ("+0.25 (-0.10 to +0.60)", "0.09", "inconclusive")
    ]


def test_every_language_model_variant_of_the_recipes_has_a_name(pages):
    """The rows of the PTB tables name each variant of train.sh, with its seed."""
    names = {
        "softmax@2": "softmax, seed 2",
        "constant-0.5": "constant τ = 0.5",
        "ct-mos@3": "CT-MoS, seed 3",
        "mos-constant-2": "MoS (M = 2), constant τ = 2",
        "mos-constant-0.5@2": "MoS (M = 2), constant τ = 0.5, seed 2",
    }
    assert {run: pages.lm_label(run) for run in names} == names


def test_a_run_table_names_the_machine_where_the_runs_table_records_it(pages):
    row = {"variant": "softmax@3", "stopped_by": "early stop", "epochs": "40", "best_epoch": "37"}
    row |= {"valid_ppl": "107.1", "test_ppl": "99.2", "params": "1883928", "train_seconds": "7000"}
    recorded = row | {"trained_on": "CPU", "machines": "AMD EPYC (AVX512)"}
    earlier = row | {"trained_on": "CPU"}  # a table from before the column
    lines = pages.ptb_runs([[recorded, earlier]])
    assert lines[2].endswith("| 7,000 | CPU: AMD EPYC (AVX512) |")
    assert lines[3].endswith("| 7,000 | CPU |")
