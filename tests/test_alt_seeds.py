"""ctemp-alt-seeds: the systems of ALT sweeps over their seeds, against the baseline with the seed as
the unit. Welch's test is checked against the textbook formulas computed here; the runs.csv files
are hand-made in the layout ctemp-alt-results writes, and the committed ones of the mini
experiment are read as they are."""

import codecs
import csv
import math
import os
import statistics

import pytest
from conftest import REPO, run_main
from scipy.stats import t as student

from fairseq_ctemp.alt import seeds
from fairseq_ctemp.cli import alt_seeds

HEADER = "experiment,direction,variant,T,LS,SEM,seed,updates,stopped by,dev greedy,dev beam,beam k\n"
OLD_HEADER = (
    "experiment,direction,T,LS,SEM,updates,stopped by,dev greedy,dev beam,beam k\n"  # no variant, seed
)


def runs_csv(path, rows, header=HEADER):
    """rows: (variant, T, seed, greedy, beam) in one experiment of the mini setup; greedy None: a run
    not finished."""
    lines = []
    for variant, temperature, seed, greedy, beam in rows:
        experiment = "en-vi.mini.spm2000.n4000" + (f".seed{seed}" if seed != 1 else "")
        cells = ["", ""] if greedy is None else [greedy, beam]
        stop = "(not finished)" if greedy is None else "early stop"
        own = [variant, temperature, 0.1, 0, seed] if header == HEADER else [temperature, 0.1, 0]
        lines.append(",".join(map(str, [experiment, "en-vi", *own, 5000, stop, *cells, 4])))
    path.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_rows(prefix):
    with open(f"{prefix}.csv", newline="", encoding="utf-8") as f:
        return {(r["metric"].split()[1], r["variant"], r["T"]): r for r in csv.DictReader(f)}


def paired(a, b):
    """The paired t-test by its formula: the mean difference over its standard error."""
    d = [x - y for x, y in zip(a, b)]
    t = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(len(d)))
    return t, 2 * student.sf(abs(t), len(d) - 1)


def welch(a, b):
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.mean(a) - statistics.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return t, df, 2 * student.sf(abs(t), df)


def welch_interval(a, b):
    """The 95 % interval of mean(a) - mean(b): the difference +- Student's quantile at Welch's df
    times its standard error."""
    t, df, _ = welch(a, b)
    difference = statistics.mean(a) - statistics.mean(b)
    half = student.ppf(0.975, df) * difference / t
    return difference - abs(half), difference + abs(half)


@pytest.fixture
def three_seeds(tmp_path):
    """Seed 1 with a run of seed 2 not finished in its directory, seed 2 in a file from before
    runs.csv had a seed column, seed 3."""
    one = runs_csv(
        tmp_path / "one.csv",
        [
            ("transformer", 1, 1, 6.62, 7.90),
            ("transformer", 2, 1, 6.67, 7.71),
            ("transformer", 1, 2, None, None),
        ]
        + [("ct_transformer", 1, 1, 6.63, 7.94)],
    )
    two = runs_csv(tmp_path / "two.csv", [("", 1, 2, 7.16, 8.26), ("", 2, 2, 6.96, 7.84)], OLD_HEADER)
    three = runs_csv(
        tmp_path / "three.csv", [("transformer", 1, 3, 6.90, 8.10), ("transformer", 2, 3, 6.50, 7.60)]
    )
    return tmp_path, [str(one), f"{two}@2", str(three)]


def test_each_system_against_t1_with_the_seed_as_the_unit(three_seeds):
    tmp_path, runs = three_seeds
    proc = run_main(alt_seeds.main, "--runs", *runs, "--output", tmp_path / "s")
    rows = read_rows(tmp_path / "s")
    t2, t1 = rows["greedy", "transformer", "2"], rows["greedy", "transformer", "1"]
    assert t2["seeds"] == "1 2 3" and t2["BLEU per seed"] == "6.67 6.96 6.50"
    t, df, p = welch([6.67, 6.96, 6.50], [6.62, 7.16, 6.90])
    assert float(t2["welch_t"]) == pytest.approx(t) and float(t2["welch_df"]) == pytest.approx(df)
    assert float(t2["p_value"]) == pytest.approx(p) and t2["verdict"] == "inconclusive"
    assert float(t2["difference"]) == pytest.approx(
        statistics.mean([6.67, 6.96, 6.5]) - statistics.mean([6.62, 7.16, 6.9])
    )
    low, high = welch_interval([6.67, 6.96, 6.50], [6.62, 7.16, 6.90])
    assert (float(t2["ci_low"]), float(t2["ci_high"])) == (pytest.approx(low), pytest.approx(high))
    assert t1["ci_low"] == "" and low < float(t2["difference"]) < high
    assert t1["verdict"] == "baseline" and float(t1["mean"]) == pytest.approx(
        statistics.mean([6.62, 7.16, 6.9])
    )
    beam = rows["beam", "transformer", "2"]
    t, df, p = welch([7.71, 7.84, 7.60], [7.90, 8.26, 8.10])
    assert float(beam["p_value"]) == pytest.approx(p) and beam["verdict"] == (
        "lower" if p < 0.05 else "inconclusive"
    )
    assert rows["greedy", "ct_transformer", "1"]["verdict"] == "no test: one seed"
    # the check of the verdict: the paired test over the seeds both have
    t, p = paired([7.71, 7.84, 7.60], [7.90, 8.26, 8.10])
    assert (beam["paired_seeds"], float(beam["paired_t"])) == ("3", pytest.approx(t))
    assert float(beam["paired_p"]) == pytest.approx(p)
    ct = rows["greedy", "ct_transformer", "1"]
    assert (ct["paired_seeds"], ct["paired_t"], ct["paired_p"]) == ("1", "", "")
    assert t1["paired_seeds"] == t1["paired_p"] == ""  # the baseline itself
    assert "left out, not finished: transformer T=1 seed 2 (" in proc.stderr
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    low, high = welch_interval([7.71, 7.84, 7.60], [7.90, 8.26, 8.10])
    assert (
        f"| dev beam BLEU (beam 4) | transformer T=2 | 1 2 3 | 7.71 7.84 7.60 | 7.72 | -0.37 | "
        f"{low:+.2f} to {high:+.2f} |" in md
    )
    assert f"| {format(p, '.3g')} (3) |" in md and "| – (1) |" in md
    assert f"`{runs[1]}`" in md  # the files it read


def test_the_selection_and_the_baseline(three_seeds):
    tmp_path, runs = three_seeds
    run_main(alt_seeds.main, "--runs", *runs, "--temperatures", "1", "--output", tmp_path / "t1")
    assert {k[1:] for k in read_rows(tmp_path / "t1")} == {("transformer", "1"), ("ct_transformer", "1")}
    run_main(alt_seeds.main, "--runs", *runs, "--variants", "transformer", "--output", tmp_path / "tf")
    assert {k[1:] for k in read_rows(tmp_path / "tf")} == {("transformer", "1"), ("transformer", "2")}
    run_main(alt_seeds.main, "--runs", runs[0], "--baseline", "ct_transformer", "--output", tmp_path / "ct")
    assert read_rows(tmp_path / "ct")["greedy", "ct_transformer", "1"]["verdict"] == "baseline"


def test_a_runs_csv_saved_with_a_byte_order_mark_reads_as_without(three_seeds):
    """A runs.csv saved from a spreadsheet starts with a UTF-8 byte order mark: the same table."""
    tmp_path, runs = three_seeds
    marked = tmp_path / "three-marked.csv"
    marked.write_bytes(codecs.BOM_UTF8 + (tmp_path / "three.csv").read_bytes())
    run_main(alt_seeds.main, "--runs", *runs, "--output", tmp_path / "plain")
    run_main(alt_seeds.main, "--runs", *runs[:2], str(marked), "--output", tmp_path / "marked")
    assert read_rows(tmp_path / "marked") == read_rows(tmp_path / "plain")


def refused(tmp_path, *args):
    before = sorted(os.listdir(tmp_path))
    proc = run_main(alt_seeds.main, *args, check=False)
    assert proc.returncode == 2 and sorted(os.listdir(tmp_path)) == before  # nothing written
    (line,) = proc.stderr.strip().splitlines()
    return line


def test_runs_that_cannot_be_compared_are_refused(three_seeds):
    tmp_path, runs = three_seeds
    one, two, three = runs
    out = ("--output", tmp_path / "out")
    assert "is there twice" in refused(tmp_path, "--runs", one, one, *out)
    assert f"has no seed column (written before it had one): give it as {two[:-2]}@SEED" in refused(
        tmp_path, "--runs", two[:-2], *out
    )
    assert "the row's seed is 1, the file was given as @3" in refused(tmp_path, "--runs", f"{one}@3", *out)
    assert "FILE@SEED wants an integer seed" in refused(tmp_path, "--runs", f"{one}@x", *out)
    no_seed = tmp_path / "no-seed.csv"
    no_seed.write_text(open(three).read().replace(",0.1,0,3,", ",0.1,0,,", 1), encoding="utf-8")
    assert "line 2: the row has no seed: give the file as FILE@SEED" in refused(
        tmp_path, "--runs", str(no_seed), *out
    )
    smoothed = tmp_path / "smoothed.csv"
    smoothed.write_text(open(three).read().replace(",0.1,0,", ",0.2,0,"), encoding="utf-8")
    line = refused(tmp_path, "--runs", one, str(smoothed), *out)
    assert line.endswith("differ in LS (0.1 vs 0.2): compare runs of one setting")
    assert "--baseline lstm: no finished run of it at T=1" in refused(
        tmp_path, "--runs", one, "--baseline", "lstm", *out
    )
    assert "leaves out the --baseline transformer" in refused(
        tmp_path, "--runs", one, "--variants", "ct_transformer", *out
    )
    assert "--variants sact_transformer: no finished run of it in --runs" in refused(
        tmp_path, "--runs", one, "--variants", "transformer,sact_transformer", *out
    )
    assert "--temperatures 3: no finished run of it in --runs" in refused(
        tmp_path, "--runs", one, "--temperatures", "1,3", *out
    )
    assert "--temperatures must include 1" in refused(tmp_path, "--runs", one, "--temperatures", "2", *out)
    table1 = tmp_path / "table1.csv"
    table1.write_text("direction,experiment,T_opt\nen-vi,x,2\n", encoding="utf-8")
    assert "is not a runs.csv of ctemp-alt-results" in refused(tmp_path, "--runs", str(table1), *out)
    run_main(alt_seeds.main, "--runs", one, *out)
    written = (tmp_path / "out.md").read_text(encoding="utf-8")
    assert "out.csv exists; refusing to overwrite it (--force)" in refused(tmp_path, "--runs", two, *out)
    run_main(alt_seeds.main, "--runs", two, *out, "--force")
    assert (tmp_path / "out.md").read_text(encoding="utf-8") != written


def test_the_seeds_of_a_system_trained_otherwise_are_refused(three_seeds):
    """runs.csv's fairseq-train options (but --seed, --max-update): the seeds of one system share them
    (a sweep with another --patience, --interval or options after -- in another work directory would
    otherwise pass for the same system); other systems may differ, and a runs.csv from before the
    column is taken as it is."""
    tmp_path, runs = three_seeds
    one, _, three = runs
    column = '"fairseq-train options but --seed, --max-update"'

    def with_options(path, options):
        lines = open(path, encoding="utf-8").read().splitlines()
        rows = [f"{line},{options(line)}" for line in lines[1:]]
        new = tmp_path / f"options-{os.path.basename(path)}"
        new.write_text("\n".join([f"{lines[0]},{column}", *rows]) + "\n", encoding="utf-8")
        return str(new)

    arch = lambda line: "--arch ct_transformer" if ",ct_transformer," in line else "--arch transformer"  # noqa: E731
    out = ("--output", tmp_path / "out")
    one_patience_10 = with_options(one, lambda line: f"{arch(line)} --patience 10")
    three_patience_5 = with_options(three, lambda line: f"{arch(line)} --patience 5")
    line = refused(tmp_path, "--runs", one_patience_10, three_patience_5, *out)
    assert "the seeds of transformer T=1 were trained with other fairseq-train options (" in line
    assert line.endswith("--arch transformer --patience 5): compare runs of one setting")
    three_patience_10 = with_options(three, lambda line: f"{arch(line)} --patience 10")
    run_main(alt_seeds.main, "--runs", one_patience_10, three_patience_10, *out)  # ct_transformer differs
    run_main(alt_seeds.main, "--runs", one_patience_10, three, "--output", tmp_path / "old", "--force")


def test_the_test_split_and_the_runs_without_its_bleu(tmp_path):
    """--split test reads the test BLEU; a run finished on dev but not scored on a test split, and
    one not finished, are left out and named each with why; a file with no test BLEU at all is
    refused as such."""
    head = HEADER.rstrip("\n") + ",test greedy,test beam\n"
    scored = tmp_path / "scored.csv"
    scored.write_text(
        head
        + "en-vi.m,en-vi,transformer,1,0.1,0,1,900,early stop,6.6,7.9,4,5.1,6.2\n"
        + "en-vi.m,en-vi,transformer,2,0.1,0,1,900,early stop,6.7,7.7,4,,\n"
        + "en-vi.m,en-vi,ct_transformer,1,0.1,0,1,300,(not finished),,,4,,\n",
        encoding="utf-8",
    )
    proc = run_main(alt_seeds.main, "--runs", scored, "--split", "test", "--output", tmp_path / "t")
    rows = read_rows(tmp_path / "t")
    assert set(rows) == {("greedy", "transformer", "1"), ("beam", "transformer", "1")}
    assert rows["greedy", "transformer", "1"]["metric"] == "test greedy BLEU"
    assert (
        rows["greedy", "transformer", "1"]["mean"] == "5.1"
        and rows["beam", "transformer", "1"]["mean"] == "6.2"
    )
    assert f"left out, no test BLEU: transformer T=2 seed 1 ({scored} line 3)" in proc.stderr
    assert f"left out, not finished: ct_transformer T=1 seed 1 ({scored} line 4)" in proc.stderr
    dev_only = tmp_path / "dev-only.csv"
    dev_only.write_text(head + "en-vi.m,en-vi,transformer,1,0.1,0,1,900,early stop,6.6,7.9,4,,\n")
    assert "--split test: no run of --runs has test BLEU" in refused(
        tmp_path, "--runs", str(dev_only), "--split", "test", "--output", tmp_path / "d"
    )


def test_the_output_folder_is_made_or_refused_before_any_work(three_seeds):
    tmp_path, runs = three_seeds
    run_main(alt_seeds.main, "--runs", *runs, "--output", tmp_path / "new" / "folder" / "s")
    assert sorted(os.listdir(tmp_path / "new" / "folder")) == ["s.csv", "s.md"]
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    assert refused(tmp_path, "--runs", *runs, "--output", tmp_path / "a-file" / "s").endswith(
        f"is in {tmp_path / 'a-file'}, which is not a folder"
    )


def test_a_failed_write_leaves_neither_file(three_seeds, monkeypatch):
    """The .md cannot be written (a full disk, say): the .csv made before it is removed again, so
    that the rerun is not refused for it."""
    tmp_path, runs = three_seeds

    def full_disk(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(seeds, "write_text", full_disk)
    with pytest.raises(OSError):
        run_main(alt_seeds.main, "--runs", *runs, "--output", tmp_path / "s")
    assert not os.path.exists(tmp_path / "s.csv") and not os.path.exists(tmp_path / "s.md")
    monkeypatch.undo()
    run_main(alt_seeds.main, "--runs", *runs, "--output", tmp_path / "s")
    assert os.path.exists(tmp_path / "s.csv") and os.path.exists(tmp_path / "s.md")


def test_the_committed_runs_of_two_seeds_as_their_files_give_them(tmp_path):
    """The mini experiment's learned-temperature Transformers, seeds 1 and 2: each number is the
    runs.csv cell (read here with the csv module) or their mean."""
    folder = os.path.join(REPO, "examples", "alt", "results", "mini_en_vi_variants")
    files = [os.path.join(folder, seed, "runs.csv") for seed in ("seed1", "seed2")]
    cells = {}
    for path in files:
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r["dev greedy"] and r["variant"] in ("transformer", "ct_transformer") and r["T"] == "1":
                    cells.setdefault(r["variant"], []).append(float(r["dev greedy"]))
    run_main(
        alt_seeds.main,
        "--runs",
        *files,
        "--variants",
        "transformer,ct_transformer",
        "--temperatures",
        "1",
        "--output",
        tmp_path / "s",
    )
    rows = read_rows(tmp_path / "s")
    for variant, values in cells.items():
        assert len(values) == 2 and float(rows["greedy", variant, "1"]["mean"]) == pytest.approx(
            statistics.mean(values)
        )
    assert rows["greedy", "ct_transformer", "1"]["verdict"] == "inconclusive: fewer than 3 seeds"


def test_the_paired_check_takes_only_the_seeds_both_systems_have(tmp_path):
    """T=2 has seeds 1, 2, 4 and T=1 seeds 1, 2, 3: Welch's test takes every seed of each, the paired
    test seeds 1 and 2 only."""
    runs = runs_csv(
        tmp_path / "r.csv",
        [
            ("transformer", 1, 1, 6.0, 7.0),
            ("transformer", 1, 2, 6.5, 7.4),
            ("transformer", 1, 3, 6.2, 7.1),
            ("transformer", 2, 1, 5.0, 6.8),
            ("transformer", 2, 2, 6.1, 7.0),
            ("transformer", 2, 4, 5.9, 6.9),
        ],
    )
    run_main(alt_seeds.main, "--runs", runs, "--output", tmp_path / "s")
    greedy = read_rows(tmp_path / "s")["greedy", "transformer", "2"]
    t, df, p = welch([5.0, 6.1, 5.9], [6.0, 6.5, 6.2])
    assert float(greedy["p_value"]) == pytest.approx(p)
    t, p = paired([5.0, 6.1], [6.0, 6.5])
    assert greedy["paired_seeds"] == "2" and float(greedy["paired_p"]) == pytest.approx(p)


def test_no_paired_test_from_one_seed_or_from_differences_without_spread():
    from fairseq_ctemp.seed_test import paired_seed_test

    assert paired_seed_test({1: 7.0}, {2: 7.5}) == {"paired_seeds": 0}
    assert paired_seed_test({1: 7.0}, {1: 7.5}) == {"paired_seeds": 1}
    assert paired_seed_test({1: 7.0, 2: 8.0}, {1: 7.5, 2: 8.5}) == {"paired_seeds": 2}  # t infinite: no p
    # equal differences up to float rounding (7.74 - 7.97 and 7.92 - 8.15): no p of 1e-15 either
    assert paired_seed_test({3: 7.74, 4: 7.92}, {3: 7.97, 4: 8.15}) == {"paired_seeds": 2}
