"""ctemp-alt-results' systems side by side: which numbers of which files land in which row (on
hand-made sweep results of two seeds; the pipeline that writes such files is tested end to end in
test_alt_recipes, test_alt_variants and test_alt_posthoc)."""

import csv
import json

import pytest
from conftest import calibration_json, experiment_json

from fairseq_ctemp.alt import posthoc as alt_posthoc
from fairseq_ctemp.alt import systems
from fairseq_ctemp.alt.common import fmt
from fairseq_ctemp.alt.records import (
    CalibrationSummary,
    Experiment,
    Posthoc,
    PosthocSystem,
    RunConfig,
    RunResult,
    Settings,
    SubsetEval,
    SystemRow,
    Tempering,
    TrainingSummary,
    TunedSystem,
)
from fairseq_ctemp.alt.tables import TRAINING_OPTIONS


def system_row(bleu, chrf, k):  # what the systems do not read: placeholders
    return SystemRow(
        k, 1.0, bleu, chrf, decode_seconds=1.0, sentences_per_second=1.0, decoding_temperature=1.0
    )


def scores(greedy, beam, k=4):  # chrF: a number of its own, here BLEU + 20
    return SubsetEval(system_row(greedy, greedy + 20, 1), system_row(beam, beam + 20, k), signature="BLEU")


def write_calibration(run_dir, ece, nll):
    path = run_dir / "eval" / "valid" / "calibration.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(calibration_json(ece=ece, nll=nll)))


def run(tmp_path, exp, name, variant, t, seed, greedy, beam, ls=0.1, calibration=None):
    run_dir = tmp_path / exp / name
    run_dir.mkdir(parents=True)
    if calibration:
        write_calibration(run_dir, *calibration)
    train_args = [
        "--arch",
        variant,
        "--softmax-temperature",
        fmt(t),
        "--seed",
        str(seed),
        "--max-update",
        "9",
    ]
    config = RunConfig(name, variant, seed, t, ls, 0.0, train_args)
    (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
    return RunResult(
        name=name,
        direction="en-vi",
        variant=variant,
        seed=seed,
        temperature=t,
        label_smoothing=ls,
        sem_weight=0.0,
        training=TrainingSummary(0, "early stop", 10, 0, None, None, []),
        eval={"valid": scores(greedy, beam)},
        dir=str(run_dir),
    )


def tuned(bleu, chrf, k, lenpen):  # finalize's tuned beam (its greedy is not read here)
    beam = SystemRow(
        k, lenpen, bleu, chrf, decode_seconds=1.0, sentences_per_second=1.0, decoding_temperature=1.0
    )
    return TunedSystem(system_row(0.0, 0.0, 1), beam, temperature=1.0, files={}, grid=[], signature="BLEU")


def experiment(name, runs, t_opt=None, posthoc=None):
    final = None
    if t_opt is not None:
        final = Tempering(
            *("en-vi", name, "mini", 0.1, 0.0, t_opt, "dev greedy BLEU among T != 1", {}, "valid", "valid"),
            systems={"untempered": tuned(8.25, 28.5, 6, 1.4), "tempered": tuned(7.87, 27.5, 4, 1.2)},
            speed={},
            significance={},
        )
    return Experiment(name, name, Settings(**experiment_json()), runs, [], final=final, posthoc=posthoc)


@pytest.fixture
def sweeps(tmp_path):
    dev = CalibrationSummary(
        tokens=1000, decoding_temperature=1.2, accuracy=0.3, nll=3.825, ece=0.019, signature="", bins=[]
    )
    system = PosthocSystem(
        1.2, "T1-ls0.1-sem0", {"valid": dev}, greedy=system_row(6.62, 26.1, 1), beam=system_row(8.3, 28.9, 8)
    )
    posthoc = Posthoc(
        *("en-vi", "en-vi.mini.spm2000.n4000", "valid", "valid", 2.0, 1.2, "dev NLL", "final/T1-posthoc.pt"),
        systems={"posthoc": system},
        significance={},
    )
    seed1 = "en-vi.mini.spm2000.n4000"
    seed2 = seed1 + ".seed2"
    return [
        experiment(
            seed1,
            [
                run(
                    tmp_path,
                    seed1,
                    "T1-ls0.1-sem0",
                    "transformer",
                    1.0,
                    1,
                    6.62,
                    7.90,
                    calibration=(0.145, 3.958),
                ),
                run(
                    tmp_path,
                    seed1,
                    "T2-ls0.1-sem0",
                    "transformer",
                    2.0,
                    1,
                    6.67,
                    7.71,
                    calibration=(0.153, 4.004),
                ),
                # neither T = 1 nor T_opt, and another label smoothing: not a system of the figure
                run(tmp_path, seed1, "T3-ls0.1-sem0", "transformer", 3.0, 1, 6.0, 7.0),
                run(tmp_path, seed1, "T1-ls0-sem0", "transformer", 1.0, 1, 5.0, 6.0, ls=0.0),
                run(tmp_path, seed1, "ct_transformer-T1-ls0.1-sem0", "ct_transformer", 1.0, 1, 7.0, 8.0),
            ],
            t_opt=2.0,
            posthoc=posthoc,
        ),
        experiment(
            seed2,
            [
                run(tmp_path, seed2, "T1-ls0.1-sem0", "transformer", 1.0, 2, 7.16, 8.26),
                run(tmp_path, seed2, "sact_lstm-T1-ls0.1-sem0", "sact_lstm", 1.0, 2, 5.5, 6.5),
            ],
        ),
    ]


def test_points_of_two_seeds_are_one_setup(sweeps):
    setups = systems.points(sweeps)
    assert list(setups) == ["en-vi.mini.spm2000.n4000"]
    got = [
        (p["system"], p["seed"], p["greedy"], p["beam"], p["tuned"], p["ece"])
        for p in setups["en-vi.mini.spm2000.n4000"]
    ]
    assert got == [
        ("T = 1", 1, 6.62, 7.90, 8.25, 0.145),
        ("T = 1", 2, 7.16, 8.26, None, None),  # no finalize in seed 2 (no other T): not tuned
        ("T_opt = 2", 1, 6.67, 7.71, 7.87, 0.153),
        ("T = 1 + post-hoc t*", 1, 6.62, None, 8.3, 0.019),
        ("ct_transformer", 1, 7.0, 8.0, None, None),
        ("sact_lstm T=1", 2, 5.5, 6.5, None, None),
    ]
    chrf = [(p["greedy_chrf"], p["beam_chrf"], p["tuned_chrf"]) for p in setups["en-vi.mini.spm2000.n4000"]]
    assert chrf[0] == (26.62, 27.9, 28.5) and chrf[2] == (26.67, 27.71, 27.5)
    assert chrf[3] == (26.1, None, 28.9)  # the post-hoc row: greedy and tuned beam only


def test_a_failed_calibration_or_post_hoc_row_is_left_out(sweeps, tmp_path):
    (
        tmp_path / "en-vi.mini.spm2000.n4000" / "T1-ls0.1-sem0" / "eval" / "valid" / "calibration.json"
    ).write_text(json.dumps({"error": "non-finite logits"}))
    failed = tmp_path / "en-vi.mini.spm2000.n4000" / "final" / "posthoc.json"  # as posthoc.py records it
    failed.parent.mkdir()
    failed.write_text(json.dumps({"experiment": "en-vi.mini.spm2000.n4000", "error": "no calibration"}))
    sweeps[0].posthoc = alt_posthoc.load(str(failed.parent.parent))
    ps = systems.points(sweeps)["en-vi.mini.spm2000.n4000"]
    assert [p["system"] for p in ps].count("T = 1 + post-hoc t*") == 0
    assert next(p for p in ps if p["system"] == "T = 1" and p["seed"] == 1)["ece"] is None


def test_report_writes_the_csv_and_one_figure_per_setup(sweeps, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    md = systems.report(sweeps, str(out))
    with open(out / "systems.csv", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    posthoc = next(r for r in table if r["system"] == "T = 1 + post-hoc t*")
    assert (posthoc["tuned beam BLEU"], posthoc["tuned beam (k, lp)"], posthoc["dev ECE %"]) == (
        "8.30",
        "(8, 1)",
        "1.9",
    )
    assert posthoc["beam BLEU"] == "" and posthoc["scored on"] == "dev"
    assert (posthoc["greedy chrF"], posthoc["tuned beam chrF"]) == ("26.10", "28.90")
    assert len(table) == 6
    # each system's run's fairseq-train options but --seed and --max-update; post-hoc: T = 1's
    options = {(r["system"], r["seed"]): r[TRAINING_OPTIONS] for r in table}
    assert options["T = 1", "1"] == options["T = 1", "2"] == "--arch transformer --softmax-temperature 1"
    assert options["T = 1 + post-hoc t*", "1"] == options["T = 1", "1"]
    assert options["T_opt = 2", "1"] == "--arch transformer --softmax-temperature 2"
    assert TRAINING_OPTIONS not in md  # a column of the CSV only
    png = out / "systems.en-vi.mini.spm2000.n4000.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![systems.en-vi.mini.spm2000.n4000.png]" in md


def test_the_legend_names_every_seed_even_one_the_first_system_lacks(sweeps):
    ps = [
        p
        for p in systems.points(sweeps)["en-vi.mini.spm2000.n4000"]
        if p["seed"] == 2 or p["system"] != "T = 1"
    ]
    assert {p["seed"] for p in ps if p["system"] == "T = 1"} == {2}  # the first system: seed 2 only
    fig = systems.figure("en-vi.mini.spm2000.n4000", ps)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["seed 1", "seed 2"]


def test_no_finished_run_no_section(tmp_path):
    assert systems.report([experiment("en-vi.x", [])], str(tmp_path)) == ""
