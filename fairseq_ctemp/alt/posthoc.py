"""Calibration in the ALT pipeline (ctemp-calibrate's Python API, fairseq_ctemp.calibration):

- every finished run: NLL and ECE of the distribution it decodes (softmax(D/T) at its training T),
  teacher forced on dev, and on test when there is a test split -> RUN_DIR/eval/<subset>/
  calibration.json (ctemp-calibrate's JSON), written once;
- finalize: the row "T = 1 + post-hoc t*" of Table 1. t* is the T = 1 run's temperature that
  minimises its dev NLL; a copy of its averaged checkpoint that decodes at t* (final/T1-posthoc.pt)
  is decoded greedy and with the beam / length penalty tuned on dev over the grid every system is
  tuned on (final/tune-T1-posthoc), paired bootstrap against T = 1 and T_opt
  (final/significance-posthoc-*.json), the reliability diagrams of T = 1, T_opt and T = 1 + t*
  (final/reliability.png) -> final/posthoc.json, written once.

Each step is skipped when its file is there; nothing finished is rewritten. ctemp-alt-results shows
the ECE as columns of its tables, the row under Table 1 and the diagrams next to its other figures.
"""

import dataclasses
import glob
import os

from .. import calibration, plotting
from ..outputs import write_json
from . import evaluate
from .common import Lock, RunFailed, fmt, read_json, say
from .records import (
    CalibrationSummary,
    NotCalibrated,
    PairedTest,
    Posthoc,
    PosthocSystem,
    SystemRow,
    complete,
    prepared,
    read_calibration,
    read_tempering,
)

CALIBRATION = "calibration.json"  # in RUN_DIR/eval/<subset>/, next to the decoding's result.json
POSTHOC = "posthoc.json"  # in EXPERIMENT/final/
CHECKPOINT = "T1-posthoc.pt"  # the T = 1 run's averaged checkpoint, decoding at t*
SYSTEMS = (("untempered", "T = 1"), ("tempered", "T_opt"), ("posthoc", "T = 1 + post-hoc t*"))
# paired bootstrap of the post-hoc system against (final.json system, hypothesis file)
COMPARISONS = {
    "greedy_vs_untempered": ("untempered", "greedy.hyp"),
    "beam_vs_untempered": ("untempered", "beam.hyp"),
    "greedy_vs_tempered": ("tempered", "greedy.hyp"),
    "beam_vs_tempered": ("tempered", "beam.hyp"),
}
LABEL = {"valid": "dev", "test": "test"}


# ----------------------------------------------------------------------------- every run
def calibration_path(run_dir, subset):
    return os.path.join(run_dir, "eval", subset, CALIBRATION)


def measured(run_dir, subset):
    """The run's Calibration on subset; None where it was not (or could not be) measured."""
    c = read_calibration(calibration_path(run_dir, subset))
    return None if isinstance(c, NotCalibrated) else c


def measure(checkpoint, exp, subset, device):
    """ctemp-calibrate's measurement (Calibration) of `checkpoint` on `subset` of the
    experiment's data, at the temperature the checkpoint decodes at."""
    data = prepared(exp.data)
    try:
        result = calibration.calibrate(
            checkpoint,
            data.bin,
            subset,
            overrides={"source_lang": exp.src, "target_lang": exp.tgt},
            batch_size=exp.decode_batch,
            cpu=device.cpu,
        )
    except calibration.CalibrationError as e:
        raise RunFailed(f"ctemp-calibrate: {e}") from None
    return result


def calibrate_run(run_dir, exp, device):
    """The run's eval/<subset>/calibration.json for each subset it was decoded on, measured when
    missing (the caller holds the run's lock). Returns {subset: summary} of those measured. A
    model that cannot be measured (no finite t* minimises its NLL: no better than uniform, or
    every prediction right) gets {"error": why} there instead, so that it is not tried again."""
    out = {}
    for subset in exp.subsets:
        path = calibration_path(run_dir, subset)
        if not os.path.exists(path):
            say(f"  calibration of {os.path.basename(run_dir)} on {subset}")
            try:
                measured = measure(os.path.join(run_dir, "checkpoint_avg.pt"), exp, subset, device)
            except RunFailed as e:
                say(f"{os.path.basename(run_dir)}: no calibration on {subset}: {e}")
                measured = NotCalibrated(str(e))
            write_json(path, dataclasses.asdict(measured))
        measured = read_calibration(path)
        if not isinstance(measured, NotCalibrated):
            out[subset] = summary(measured)
    return out


def summary(result, fitted=False):
    """The numbers of a Calibration the tables use; `fitted`: at its t* instead."""
    s = {f.name: getattr(result, f.name) for f in dataclasses.fields(CalibrationSummary)}
    if fitted:
        s.update(
            decoding_temperature=result.fitted_temperature,
            nll=result.nll_fitted,
            ece=result.ece_fitted,
            bins=result.bins_fitted,
        )
    return CalibrationSummary(**s)


def finished_runs(exp_dir):
    return sorted(os.path.dirname(p) for p in glob.glob(os.path.join(exp_dir, "*", "run.json")))


def pending(exp_dir, exp):
    """Whether a finished run lacks its calibration, or final.json its post-hoc row."""
    final_dir = os.path.join(exp_dir, "final")
    return any(
        not os.path.exists(calibration_path(d, s)) for d in finished_runs(exp_dir) for s in exp.subsets
    ) or (
        os.path.exists(os.path.join(final_dir, "final.json"))
        and not os.path.exists(os.path.join(final_dir, POSTHOC))
    )


# ------------------------------------------------------------------------------- finalize
def finalize(exp_dir, exp, group, device):
    """Calibration of every finished run, then (once final.json is there) the post-hoc row ->
    final/posthoc.json. `group`: {T: run dir} of the primary (LS, SEM) transformer runs."""
    for run_dir in finished_runs(exp_dir):
        if not all(os.path.exists(calibration_path(run_dir, s)) for s in exp.subsets):
            with Lock(run_dir, RunFailed):
                calibrate_run(run_dir, exp, device)
    final_dir = os.path.join(exp_dir, "final")
    if os.path.exists(os.path.join(final_dir, POSTHOC)):
        return load(exp_dir)
    final = read_tempering(exp_dir)
    if final is None:
        return None
    with Lock(final_dir, RunFailed):
        return posthoc_row(exp_dir, exp, group, device, final)


def posthoc_row(exp_dir, exp, group, device, final):
    name, final_dir = os.path.basename(exp_dir), os.path.join(exp_dir, "final")
    subset, t_opt = final.scored_subset, final.t_opt
    dirs = {"untempered": group[1.0], "tempered": group[t_opt]}
    runs = ready_calibrations(name, final_dir, exp, dirs)
    if runs is None:
        return None
    dev = runs["untempered"]["valid"]
    t_star = dev.fitted_temperature
    checkpoint = calibrated_checkpoint(name, final_dir, dirs["untempered"], dev)
    decoder = evaluate.Decoder(exp, checkpoint, device)
    tuned = decoder.greedy_vs_beam(
        os.path.join(final_dir, "tune-T1-posthoc"),
        subset,
        exp.eval_beam,
        grid=(exp.grid_beams, exp.grid_lenpens),
    )
    decoded_at = tuned.systems["greedy"].decoding_temperature
    if decoded_at is None or abs(decoded_at - t_star) > 1e-6 * t_star:
        raise RunFailed(f"{checkpoint} decoded at t={decoded_at}, not at t*={t_star}")
    # calibration of T = 1 + t*: on dev the T = 1 run's own measurement at t*; on test measured
    posthoc_calibration = {"valid": summary(dev, fitted=True)}
    for other in exp.subsets:
        if other != "valid":
            path = os.path.join(final_dir, f"calibration-T1-posthoc.{other}.json")
            if not os.path.exists(path):
                write_json(path, measure(checkpoint, exp, other, device).to_dict())
            posthoc_calibration[other] = summary(read_calibration(path))
    significance = posthoc_significance(final_dir, exp, t_opt, tuned)
    systems = {
        label: PosthocSystem(
            temperature=1.0 if label == "untempered" else t_opt,
            run=os.path.basename(dirs[label]),
            calibration={s: summary(r) for s, r in runs[label].items()},
        )
        for label in ("untempered", "tempered")
    }
    systems["posthoc"] = PosthocSystem(
        temperature=t_star,
        run=os.path.basename(dirs["untempered"]),
        calibration=posthoc_calibration,
        greedy=SystemRow.of(tuned.systems["greedy"]),
        beam=SystemRow.of(tuned.systems["beam"]),
        grid=evaluate.grid_rows(tuned),
        signature=tuned.signatures["bleu"],
    )
    result = Posthoc(
        direction=final.direction,
        experiment=name,
        scored_subset=subset,
        tuned_on="valid",
        t_opt=t_opt,
        t_star=t_star,
        t_star_fitted_on="dev NLL of the T=1 run (ctemp-calibrate)",
        checkpoint=os.path.relpath(checkpoint, exp_dir),
        systems=systems,
        significance=significance,
    )
    write_posthoc(final_dir, result, tuned, runs)
    return result


def ready_calibrations(name, final_dir, exp, dirs):
    """{label: {subset: Calibration}} of the T = 1 and T_opt runs; None (said why, and a
    failed calibration recorded in posthoc.json, so that finalize is not pending for ever) when
    one is missing or failed."""
    runs = {
        label: {s: read_calibration(calibration_path(d, s)) for s in exp.subsets} for label, d in dirs.items()
    }
    missing = [
        f"{os.path.basename(dirs[k])} ({s})" for k, r in runs.items() for s, c in r.items() if c is None
    ]
    if missing:
        say(f"{name}: the post-hoc row waits for the calibration of {', '.join(missing)}")
        return None
    failed = [
        f"{os.path.basename(dirs[k])} ({s}): {c.error}"
        for k, r in runs.items()
        for s, c in r.items()
        if isinstance(c, NotCalibrated)
    ]
    if failed:
        say(f"{name}: no post-hoc row: no calibration of {'; '.join(failed)}")
        write_json(os.path.join(final_dir, POSTHOC), {"experiment": name, "error": "; ".join(failed)})
        return None
    return runs


def calibrated_checkpoint(name, final_dir, untempered_dir, dev):
    """final/T1-posthoc.pt: the T = 1 run's averaged checkpoint, decoding at its dev t*."""
    t_star = dev.fitted_temperature
    checkpoint = os.path.join(final_dir, CHECKPOINT)
    if not os.path.exists(checkpoint):  # written under a temporary name: complete when there
        say(f"{name}: t* = {t_star:.4g} (dev NLL of T=1 {dev.nll:.4f} -> {dev.nll_fitted:.4f})")
        try:  # ctemp-calibrate --write-checkpoint
            calibration.write_calibrated_checkpoint(
                os.path.join(untempered_dir, "checkpoint_avg.pt"), checkpoint, t_star, dev.signature
            )
        except calibration.CalibrationError as e:
            raise RunFailed(f"ctemp-calibrate: {e}") from None
    return checkpoint


def posthoc_significance(final_dir, exp, t_opt, tuned):
    """Paired bootstrap of the post-hoc system (tuned) against T = 1 and T_opt (COMPARISONS)."""
    significance = {}
    for key, (base, hyp) in COMPARISONS.items():
        path = os.path.join(final_dir, f"significance-posthoc-{key}.json")
        t = 1.0 if base == "untempered" else t_opt
        files = evaluate.moved_result(os.path.join(final_dir, f"tune-T{fmt(t)}")).files
        paired = evaluate.paired_test(path, tuned.files["ref"], files[hyp], tuned.files[hyp], exp)
        significance[key] = PairedTest.from_dict(paired)
    return significance


def write_posthoc(final_dir, result, tuned, runs):
    """final/reliability.png and final/posthoc.json, and the row in a line."""
    name, subset, t_star = result.experiment, result.scored_subset, result.t_star
    significance, dev = result.significance, runs["untempered"]["valid"]
    try:
        plot_reliability(result, os.path.join(final_dir, "reliability.png"))
    except ImportError:
        say(f"{name}: no reliability diagrams (matplotlib is not installed)")
    write_json(os.path.join(final_dir, POSTHOC), dataclasses.asdict(result))
    p = significance["beam_vs_untempered"].bleu.p_value
    q = significance["beam_vs_tempered"].bleu.p_value
    say(
        f"{name}: T=1 + post-hoc t*={t_star:.4g}: {subset} BLEU greedy {tuned.systems['greedy'].bleu:.2f}, "
        f"tuned beam {tuned.systems['beam'].bleu:.2f} (p = {p:.4f} vs T=1, {q:.4f} vs T_opt); dev ECE "
        f"{100 * dev.ece:.1f}% (T=1) -> {100 * dev.ece_fitted:.1f}%, "
        f"T_opt {100 * runs['tempered']['valid'].ece:.1f}%"
    )


# --------------------------------------------------------------------------------- outputs
def plot_reliability(posthoc, path):
    """Reliability diagrams of T = 1, T_opt and T = 1 + t*: a column each, a row per subset."""
    plt = plotting.pyplot()

    systems = posthoc.systems
    subsets = [s for s in ("valid", "test") if s in systems["posthoc"].calibration]
    fig, axes = plt.subplots(
        len(subsets), len(SYSTEMS), figsize=(4 * len(SYSTEMS), 3.8 * len(subsets)), squeeze=False, sharey=True
    )
    for row, subset in zip(axes, subsets):
        for ax, (key, label) in zip(row, SYSTEMS):
            c = systems[key].calibration[subset]
            calibration.draw_reliability(ax, c.bins)
            ax.set_title(
                f"{label}, t={c.decoding_temperature:.4g} ({LABEL[subset]})\n"
                f"ECE {100 * c.ece:.1f}%, NLL {c.nll:.3f} nats/token",
                fontsize=9,
            )
        row[0].set_ylabel("accuracy")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"{posthoc.experiment}: reliability (15 bins, teacher forced)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load(exp_dir):
    """An experiment's final/posthoc.json (Posthoc); None while there is none, or where the row
    could not be made (the file then says why: a failed calibration)."""
    path = os.path.join(exp_dir, "final", POSTHOC)
    d = read_json(path)
    if d is None or "error" in d:
        return None
    complete(Posthoc, d, path, "a posthoc.json of `ctemp-alt-sweep finalize`")
    return Posthoc.from_dict(d)
