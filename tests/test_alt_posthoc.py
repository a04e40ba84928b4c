"""Calibration in the ALT pipeline (fairseq_ctemp/alt/posthoc.py) end to end on the toy release of
test_alt_recipes: a sweep of T = 1 and T = 2 -> every run's ECE / NLL on dev and test, finalize's row
"T = 1 + post-hoc t*" and reliability diagrams -> ctemp-alt-results' tables. The numbers are checked
against test_calibrate's independent float64 reference (NLL(t), t* by grid search, ECE by
torchmetrics), computed one sample at a time from the raw outputs of the averaged checkpoints."""

import csv
import json

import pytest
from conftest import experiment_json, run_main
from test_alt_recipes import ENV, SWEEP_OPTIONS, TINY, VI_DATA, snapshot
from test_calibrate import Reference, reference_ece

from fairseq_ctemp.alt.common import Device
from fairseq_ctemp.alt.records import Settings
from fairseq_ctemp.cli import alt_data, alt_sweep
from fairseq_ctemp.cli import alt_results as results_command

pytestmark = pytest.mark.e2e
SYSTEM = "T = 1 + post-hoc t*"


def test_posthoc_row_calibration_columns_and_diagrams(tmp_path):
    work = tmp_path / "work"
    run_main(alt_data.main, "toy-release", tmp_path / "release", env=ENV)
    run_main(
        alt_data.main,
        "prepare",
        "vi-en",
        "--release",
        tmp_path / "release",
        "--work",
        work,
        *VI_DATA,
        env=ENV,
    )
    options = [
        "vi-en",
        "--work",
        str(work),
        "--jobs",
        "2",
        "--temperatures",
        "1,2",
        *VI_DATA,
        *SWEEP_OPTIONS,
        "--max-update",
        "12",
        "--",
        *TINY,
    ]
    run_main(alt_sweep.main, "run", *options, env=ENV)
    experiment = work / "sweep" / "vi-en.mini.bpe200.n52.seed2"
    data_bin = work / "data" / "en-vi.bpe200.n52" / "bin"
    final_dir = experiment / "final"
    final = json.loads((final_dir / "final.json").read_text())
    posthoc = json.loads((final_dir / "posthoc.json").read_text())
    assert final["t_opt"] == 2.0 and posthoc["t_opt"] == 2.0 and posthoc["scored_subset"] == "test"

    # every finished run: NLL and ECE of the distribution it decodes (softmax(D/T)), dev and test
    refs = {}
    for t in (1, 2):
        run_dir = experiment / f"T{t}-ls0.1-sem0"
        run = json.loads((run_dir / "run.json").read_text())
        for subset in ("valid", "test"):
            measured = json.loads((run_dir / "eval" / subset / "calibration.json").read_text())
            ref = refs[t, subset] = Reference.of(run_dir / "checkpoint_avg.pt", data_bin, subset, True)
            assert measured["decoding_temperature"] == t and measured["tokens"] == len(ref.y)
            assert measured["nll"] == pytest.approx(ref.nll(t), abs=1e-5)
            assert measured["ece"] == pytest.approx(reference_ece(ref.confidence(t), ref.correct), abs=1e-6)
            assert run["eval"][subset]["calibration"]["ece"] == measured["ece"]  # in run.json too

    # t*: the T = 1 run's dev NLL minimum (a dense grid search of the reference)
    t_star, _, step = refs[1, "valid"].grid_argmin()
    assert abs(posthoc["t_star"] - t_star) <= step and abs(t_star - 1) > 10 * step
    post = posthoc["systems"]["posthoc"]
    for subset in ("valid", "test"):  # its calibration at t*: on test held out (t* is dev's)
        ref = refs[1, subset]
        c = post["calibration"][subset]
        assert c["decoding_temperature"] == posthoc["t_star"]
        assert c["nll"] == pytest.approx(ref.nll(posthoc["t_star"]), abs=1e-5)
        assert c["ece"] == pytest.approx(
            reference_ece(ref.confidence(posthoc["t_star"]), ref.correct), abs=1e-6
        )
    # decoded at t*, greedy and with the dev grid's best beam / length penalty (first of equal maxima)
    assert post["greedy"]["decoding_temperature"] == pytest.approx(posthoc["t_star"])
    assert post["beam"]["decoding_temperature"] == pytest.approx(posthoc["t_star"])
    assert [(g["beam"], g["lenpen"]) for g in post["grid"]] == [(1, 0.5), (1, 2.0), (2, 0.5), (2, 2.0)]
    best = max(post["grid"], key=lambda g: g["bleu"])
    assert (post["beam"]["beam"], post["beam"]["lenpen"]) == (best["beam"], best["lenpen"])
    tune = final_dir / "tune-T1-posthoc"
    # greedy output cannot depend on t: the argmax of softmax(D/t) is that of D
    assert (tune / "greedy.hyp").read_text() == (final_dir / "tune-T1" / "greedy.hyp").read_text()
    assert set(posthoc["significance"]) == {
        "greedy_vs_untempered",
        "beam_vs_untempered",
        "greedy_vs_tempered",
        "beam_vs_tempered",
    }
    sig = posthoc["significance"]
    assert sig["greedy_vs_untempered"]["identical"] and sig["greedy_vs_untempered"]["bleu"]["p_value"] == 1
    assert sig["beam_vs_tempered"]["bleu"]["baseline"] == pytest.approx(
        final["systems"]["tempered"]["beam"]["bleu"]
    )
    assert sig["beam_vs_untempered"]["bleu"]["system"] == pytest.approx(post["beam"]["bleu"])
    assert (final_dir / "reliability.png").stat().st_size > 0

    # a rerun does nothing (finalize's log aside)
    before = snapshot(experiment)
    run_main(alt_sweep.main, "finalize", experiment, "--cpu", env=ENV)
    after = snapshot(experiment)
    log = str(experiment / "final.log")
    assert {k: v for k, v in after.items() if k != log} == {k: v for k, v in before.items() if k != log}

    # the tables: the ECE columns of every run, the row T = 1 + post-hoc t*, the diagrams
    run_main(results_command.main, "--work", work, env=ENV)
    out = work / "results"
    name = experiment.name
    assert (out / f"reliability.{name}.png").exists()
    rows = list(csv.DictReader((out / "table1_posthoc.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["system"] for r in rows] == ["T = 1", "T_opt = 2", SYSTEM]
    row = rows[2]
    assert row["t decoded at"] == f"{posthoc['t_star']:.4g}"
    assert row["test ECE %"] == f"{100 * post['calibration']['test']['ece']:.1f}"
    assert row["beam BLEU (k, lp)"].startswith(f"{post['beam']['bleu']:.2f} (")
    assert row["p beam vs T_opt"] == f"{sig['beam_vs_tempered']['bleu']['p_value']:.4f}"
    runs = {r["T"]: r for r in csv.DictReader((out / "runs.csv").read_text(encoding="utf-8").splitlines())}
    for t in (1, 2):
        measured = json.loads(
            (experiment / f"T{t}-ls0.1-sem0" / "eval" / "test" / "calibration.json").read_text()
        )
        assert runs[str(t)]["test ECE %"] == f"{100 * measured['ece']:.1f}"
    assert runs["1"]["dev t*"] == f"{posthoc['t_star']:.3f}"
    md = (out / "alt_results.md").read_text(encoding="utf-8")
    assert f"| {SYSTEM} |" in md and f"![reliability.{name}.png]" in md


def test_a_model_that_cannot_be_calibrated_is_recorded_once(tmp_path, monkeypatch):
    """calibrate_run writes {"error"} for a model without a finite t* (never retried); the tables
    leave its cells empty."""
    from fairseq_ctemp.alt import posthoc, posthoc_report
    from fairseq_ctemp.alt.common import RunFailed

    run_dir = tmp_path / "T1-ls0.1-sem0"
    (run_dir / "eval" / "valid").mkdir(parents=True)
    (run_dir / "run.json").write_text("{}")
    calls = []

    def fails(*args):
        calls.append(args)
        raise RunFailed("ctemp-calibrate: the NLL only falls as t grows")

    monkeypatch.setattr(posthoc, "measure", fails)
    exp = Settings(**experiment_json())
    assert posthoc.pending(str(tmp_path), exp)
    assert posthoc.calibrate_run(str(run_dir), exp, Device(cpu=True)) == {}
    assert "only falls" in json.loads((run_dir / "eval" / "valid" / "calibration.json").read_text())["error"]
    assert posthoc.calibrate_run(str(run_dir), exp, Device(cpu=True)) == {} and len(calls) == 1
    assert not posthoc.pending(str(tmp_path), exp)
    assert posthoc_report.run_cells(str(run_dir)) == [""] * len(posthoc_report.RUN_COLUMNS)


def test_a_calibration_json_of_another_tool_is_refused_in_one_line(tmp_path):
    from fairseq_ctemp.alt import posthoc
    from fairseq_ctemp.alt.common import AltError

    path = tmp_path / "eval" / "valid" / "calibration.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"ece": 0.1, "nll": 2.0}))
    with pytest.raises(AltError) as e:
        posthoc.measured(str(tmp_path), "valid")
    assert str(e.value) == (
        f"{path} lacks checkpoint, data, subset, samples, samples_skipped, tokens, accuracy, "
        "decoding_temperature, temperature_trained, temperature_calibrated, fitted_temperature, "
        "nll_fitted, ece_fitted, bins, bins_fitted, passes, signature: not a calibration JSON of ctemp-calibrate"
    )
