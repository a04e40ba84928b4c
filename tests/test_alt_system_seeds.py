"""ctemp-alt-seeds --systems: the systems of systems.csv files (the tuned beam, the post-hoc system)
over their seeds against T = 1. The files are hand-made in the layout ctemp-alt-results writes;
Welch's and the paired test are checked against the textbook formulas of test_alt_seeds."""

import csv
import os

import pytest
from conftest import REPO, run_main
from test_alt_seeds import paired, refused, welch

from fairseq_ctemp.alt.systems import HEADER
from fairseq_ctemp.alt.tables import TRAINING_OPTIONS
from fairseq_ctemp.cli import alt_seeds

POSTHOC = "T = 1 + post-hoc t*"


def systems_csv(path, rows, setup="en-vi.mini.spm2000.test1000.n4000", scored_on="carved test"):
    """rows: (system, seed, greedy, beam, tuned); None: a cell the system does not have (the post-hoc
    system has no untuned beam, a variant no tuned one)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        for system, seed, greedy, beam, tuned in rows:
            cells = {"setup": setup, "system": system, "seed": seed, "scored on": scored_on}
            cells |= {"greedy BLEU": greedy, "beam BLEU": beam, "tuned beam BLEU": tuned}
            cells |= {
                "beam k": "" if beam is None else 4,
                "tuned beam (k, lp)": "" if tuned is None else "(6, 1)",
            }
            writer.writerow(["" if cells.get(c) is None else cells[c] for c in HEADER])
    return str(path)


@pytest.fixture
def three_seeds(tmp_path):
    """T = 1, T_opt = 2 and the post-hoc system in three seeds, a variant in seed 1 only."""
    files = []
    for seed, (t1, t2, posthoc) in enumerate(
        [((8.08, 9.10, 9.09), (8.14, 9.16, 9.36), 9.35), ((8.03, 9.07, 9.21), (8.27, 9.20, 9.51), 9.55)]
        + [((8.00, 9.30, 9.48), (7.95, 9.44, 9.36), 9.78)],
        1,
    ):
        rows = [("T = 1", seed, *t1), ("T_opt = 2", seed, *t2), (POSTHOC, seed, t1[0], None, posthoc)]
        rows += [("ct_transformer", 1, 7.9, 9.0, None)] if seed == 1 else []
        files.append(systems_csv(tmp_path / f"s{seed}.csv", rows))
    return tmp_path, files


def read_rows(prefix):
    with open(f"{prefix}.csv", newline="", encoding="utf-8") as f:
        return {(r["metric"], r["system"]): r for r in csv.DictReader(f)}


def test_each_system_against_t1_per_metric_it_has(three_seeds):
    tmp_path, files = three_seeds
    run_main(alt_seeds.main, "--systems", *files, "--output", tmp_path / "s")
    rows = read_rows(tmp_path / "s")
    tuned = rows["carved test tuned beam BLEU", POSTHOC]
    assert tuned["BLEU per seed"] == "9.35 9.55 9.78" and tuned["seeds"] == "1 2 3"
    t, df, p = welch([9.35, 9.55, 9.78], [9.09, 9.21, 9.48])
    assert float(tuned["welch_t"]) == pytest.approx(t) and float(tuned["welch_df"]) == pytest.approx(df)
    assert float(tuned["p_value"]) == pytest.approx(p) and tuned["verdict"] == "inconclusive"
    t, p = paired([9.35, 9.55, 9.78], [9.09, 9.21, 9.48])
    assert float(tuned["paired_t"]) == pytest.approx(t) and float(tuned["paired_p"]) == pytest.approx(p)
    beam = rows["carved test beam BLEU (beam 4)", "T_opt = 2"]
    assert float(beam["p_value"]) == pytest.approx(welch([9.16, 9.20, 9.44], [9.10, 9.07, 9.30])[2])
    # the post-hoc system has no untuned beam, the variant no tuned one; one seed: no test
    assert {s for m, s in rows if m.startswith("carved test beam")} == {
        "T = 1",
        "T_opt = 2",
        "ct_transformer",
    }
    assert {s for m, s in rows if m.startswith("carved test tuned")} == {"T = 1", "T_opt = 2", POSTHOC}
    assert rows["carved test greedy BLEU", "ct_transformer"]["verdict"] == "no test: one seed"
    assert rows["carved test greedy BLEU", "T = 1"]["verdict"] == "baseline"
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert "against T = 1 with the seed as the unit" in md and "decodes T = 1's own model" in md
    assert (
        "| carved test tuned beam BLEU | T = 1 + post-hoc t* | 1 2 3 | 9.35 9.55 9.78 | 9.56 | +0.30 |" in md
    )
    assert f"`{files[2]}`" in md  # the files it read


def test_systems_that_cannot_be_compared_are_refused(three_seeds):
    tmp_path, files = three_seeds
    out = ("--output", tmp_path / "out")
    assert "T = 1 seed 1 is there twice" in refused(tmp_path, "--systems", files[0], files[0], *out)
    dev = systems_csv(tmp_path / "dev.csv", [("T = 1", 4, 7.0, 8.0, 8.1)], scored_on="dev")
    assert refused(tmp_path, "--systems", files[0], dev, *out).endswith(
        "differ in scored on (carved test vs dev): compare the systems of one setup"
    )
    other = systems_csv(tmp_path / "other.csv", [("T = 1", 4, 7.0, 8.0, 8.1)], setup="vi-en.mini")
    assert "differ in setup (en-vi.mini.spm2000.test1000.n4000 vs vi-en.mini)" in refused(
        tmp_path, "--systems", files[0], other, *out
    )
    wide = tmp_path / "wide.csv"
    wide.write_text(open(files[1]).read().replace(",4,", ",6,"), encoding="utf-8")
    assert "differ in beam k (4 vs 6)" in refused(tmp_path, "--systems", files[0], str(wide), *out)
    no_t1 = systems_csv(tmp_path / "no-t1.csv", [("T_opt = 2", 1, 7.0, 8.0, 8.1)])
    assert "--systems: no 'T = 1' row to compare against" in refused(tmp_path, "--systems", no_t1, *out)
    untuned = systems_csv(
        tmp_path / "untuned.csv", [("T = 1", 1, 7.0, 8.0, None), (POSTHOC, 1, 7.0, None, 8.3)]
    )
    assert refused(tmp_path, "--systems", untuned, *out).endswith(
        "--systems: 'T = 1' has no tuned beam BLEU to compare against"
    )
    broken = tmp_path / "broken.csv"
    broken.write_text(open(files[0]).read().replace(",9.1,", ",910,"), encoding="utf-8")
    assert "line 2: beam BLEU is 910, not a BLEU score (0 to 100)" in refused(
        tmp_path, "--systems", str(broken), *out
    )
    runs = os.path.join(REPO, "examples", "alt", "results", "mini_en_vi_carved", "runs.csv")
    assert "is not a systems.csv of ctemp-alt-results with rows (no column 'system')" in refused(
        tmp_path, "--systems", runs, *out
    )
    for option, value in (("--split", "test"), ("--baseline", "transformer"), ("--variants", "transformer")):
        assert f"{option} applies to --runs only" in refused(
            tmp_path, "--systems", *files, option, value, *out
        )
    run_main(alt_seeds.main, "--systems", *files, *out)
    assert "out.csv exists; refusing to overwrite it (--force)" in refused(
        tmp_path, "--systems", *files, *out
    )
    assert f"is also --systems {files[0]}: an output never replaces an input" in refused(
        tmp_path, "--systems", files[0], "--output", files[0][: -len(".csv")], "--force"
    )


def test_the_seeds_of_a_system_trained_otherwise_are_refused(three_seeds):
    """systems.csv's fairseq-train options (of each system's run; the post-hoc system's: T = 1's):
    one system's seeds share them; a systems.csv from before the column is taken as it is."""
    tmp_path, files = three_seeds

    def with_patience(path, seed_patience):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            t = "2" if row["system"].startswith("T_opt") else "1"
            patience = seed_patience.get(row["seed"], 10)
            row[TRAINING_OPTIONS] = f"--softmax-temperature {t} --patience {patience}"
        new = tmp_path / f"options-{os.path.basename(path)}"
        with open(new, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=HEADER)
            writer.writeheader()
            writer.writerows(rows)
        return str(new)

    out = ("--output", tmp_path / "out")
    alike = [with_patience(path, {}) for path in files]
    run_main(alt_seeds.main, "--systems", *alike, *out)
    unlike = [*alike[:2], with_patience(files[2], {"3": 5})]
    line = refused(tmp_path, "--systems", *unlike, "--output", tmp_path / "unlike")
    assert "--systems: the seeds of T = 1 were trained with other fairseq-train options (" in line
    assert line.endswith("--softmax-temperature 1 --patience 5): compare runs of one setting")
    run_main(alt_seeds.main, "--systems", *alike[:2], files[2], "--output", tmp_path / "old")  # no column


def test_runs_and_systems_are_one_or_the_other(three_seeds, capsys):
    tmp_path, files = three_seeds
    proc = run_main(
        alt_seeds.main, "--runs", files[0], "--systems", files[1], "--output", tmp_path / "x", check=False
    )
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    assert not os.path.exists(tmp_path / "x.csv")


def test_a_systems_csv_of_the_older_layout_reads_its_columns(tmp_path):
    """systems.csv had no chrF columns at first: the BLEU it has is compared all the same."""
    folder = os.path.join(REPO, "examples", "alt", "results", "mini_en_vi_variants")
    files = [os.path.join(folder, seed, "systems.csv") for seed in ("seed1", "seed2")]
    with open(files[0], newline="", encoding="utf-8") as f:
        assert "greedy chrF" not in next(csv.reader(f))
    run_main(alt_seeds.main, "--systems", *files, "--output", tmp_path / "s")
    ct = read_rows(tmp_path / "s")["dev greedy BLEU", "ct_transformer"]
    assert ct["BLEU per seed"] == "6.63 6.89" and ct["verdict"] == "inconclusive: fewer than 3 seeds"
