"""Per experiment, once its runs are done: T_opt, beam and length penalty tuned on dev for T_opt and
T=1, paired significance, greedy / beam timings -> final/final.json; each model variant against the
T=1 transformer -> final/compare-<run>.json."""

import dataclasses
import glob
import os

from .. import greedy_vs_beam as gvb
from ..outputs import write_json
from . import evaluate, posthoc
from .common import Lock, RunFailed, fmt, say
from .presets import DEFAULT_VARIANT, baseline_variant
from .records import (
    Comparison,
    Decodings,
    PairedTest,
    SystemRow,
    Tempering,
    TunedSystem,
    load_experiment,
    read_config,
    read_run,
    read_tempering,
)

COMPARED = ("greedy", "beam")  # a variant against T=1: greedy, and beam --eval-beam (untuned, both)


def primary_runs(exp_dir, exp):
    """The runs of the primary (LS, SEM) group: ({T: run dir} of the transformer variant, [run dirs
    of the other variants])."""
    tempered, variants = {}, []
    for run_dir, config in primary_configs(exp_dir, exp):
        if config.variant == DEFAULT_VARIANT:
            tempered[config.temperature] = run_dir
        else:
            variants.append(run_dir)
    return tempered, variants


def primary_configs(exp_dir, exp):
    """[(run dir, config)] of the primary (LS, SEM) group."""
    ls, sem = exp.primary
    found = []
    for path in sorted(glob.glob(os.path.join(exp_dir, "*", "config.json"))):
        config = read_config(path)
        if config.label_smoothing == ls and config.sem_weight == sem:
            found.append((os.path.dirname(path), config))
    return found


def baseline_run(exp_dir, exp, variant):
    """The run dir a variant is compared with: its baseline variant's T = 1 run (None: not planned)."""
    wanted = baseline_variant(variant)
    for run_dir, config in primary_configs(exp_dir, exp):
        if config.variant == wanted and config.temperature == 1.0:
            return run_dir
    return None


def comparison_path(exp_dir, run_dir):
    return os.path.join(exp_dir, "final", f"compare-{os.path.basename(run_dir)}.json")


def pending(exp_dir):
    """Whether finalize has something to do: final.json (T_opt vs T=1) or a variant's comparison."""
    exp = load_experiment(exp_dir)
    tempered, variants = primary_runs(exp_dir, exp)
    return (
        (
            1.0 in tempered
            and len(tempered) > 1
            and not os.path.exists(os.path.join(exp_dir, "final", "final.json"))
        )
        or any(
            not os.path.exists(comparison_path(exp_dir, d))
            and baseline_run(exp_dir, exp, read_config(os.path.join(d, "config.json")).variant)
            for d in variants
        )
        or posthoc.pending(exp_dir, exp)
    )


def finalize(exp_dir, device):
    """Softmax tempering: T_opt (best dev greedy BLEU among T != 1) and T=1 in the primary (LS, SEM)
    group; beam and length penalty tuned on dev, greedy and tuned beam on test (dev without a test
    split), paired significance (sacrebleu), greedy / beam timings. Then every other variant's run
    against its baseline's T=1 run (compare_variants). Returns final.json's Tempering, or None if
    runs are missing."""
    exp_dir = os.path.abspath(exp_dir)
    exp = load_experiment(exp_dir)
    group, variants = primary_runs(exp_dir, exp)
    result = tempering(exp_dir, exp, group, device, quiet=bool(variants))
    for variant_dir in variants:
        compare_variants(exp_dir, exp, variant_dir)
    posthoc.finalize(exp_dir, exp, group, device)  # ECE of every run; the row T = 1 + post-hoc t*
    return result


def paired_significance(baseline_dir, run_dir, subset, tokenize):
    """{system: ctemp-greedy-vs-beam compare's paired bootstrap} of each of COMPARED, a run's
    translations of `subset` against its baseline's."""
    significance = {}
    for system in COMPARED:
        try:
            paired = gvb.compare_systems(
                os.path.join(baseline_dir, "eval", subset, "ref"),
                os.path.join(baseline_dir, "eval", subset, f"{system}.hyp"),
                os.path.join(run_dir, "eval", subset, f"{system}.hyp"),
                "bs",
                None,
                tokenize,
            )
        except gvb.UsageError as e:
            raise RunFailed(f"significance test of {os.path.basename(run_dir)}: {e}") from None
        significance[system] = PairedTest.from_dict(paired)
    return significance


def compare_variants(exp_dir, exp, run_dir):
    """A variant's greedy and beam (--eval-beam) translations of the scored subset against those of
    its baseline's T=1 run (the transformer's, or e.g. lstm's for sact_lstm), from the files of their
    runs (no decoding): paired bootstrap (sacrebleu) -> final/compare-<run>.json, written once."""
    name = os.path.basename(exp_dir)
    if os.path.exists(comparison_path(exp_dir, run_dir)):
        return
    config = read_config(os.path.join(run_dir, "config.json"))
    baseline_dir = baseline_run(exp_dir, exp, config.variant)
    baseline = read_run(baseline_dir) if baseline_dir else None
    if baseline_dir is None:  # e.g. lstm in a sweep of lstm,sact_lstm: the baseline of sact_lstm only
        say(
            f"{name}: {os.path.basename(run_dir)} is not compared: no T=1 "
            f"{baseline_variant(config.variant)} run in this experiment"
        )
        return
    if baseline is None:
        say(
            f"{name}: the comparison of {os.path.basename(run_dir)} waits for the T=1 "
            f"{baseline_variant(config.variant)} run ({os.path.basename(baseline_dir)})"
        )
        return
    run = read_run(run_dir)
    if run is None:
        say(f"{name}: the comparison of {os.path.basename(run_dir)} waits for its run")
        return
    subset = "test" if "test" in exp.subsets else "valid"
    final_dir = os.path.join(exp_dir, "final")
    os.makedirs(final_dir, exist_ok=True)
    with Lock(final_dir, RunFailed):
        significance = paired_significance(baseline_dir, run_dir, subset, exp.bleu_tokenize)
        result = Comparison(
            direction=f"{exp.src}-{exp.tgt}",
            experiment=name,
            variant=config.variant,
            temperature=config.temperature,
            run=os.path.basename(run_dir),
            baseline=os.path.basename(baseline_dir),
            baseline_variant=baseline_variant(config.variant),
            scored_subset=subset,
            systems={
                "baseline": decodings(baseline.eval[subset]),
                "variant": decodings(run.eval[subset]),
            },
            significance=significance,
        )
        write_json(comparison_path(exp_dir, run_dir), dataclasses.asdict(result))
    v, b = result.systems["variant"], result.systems["baseline"]
    say(
        f"{name}: {config.variant} {subset} BLEU greedy {v.greedy.bleu:.2f} vs {b.greedy.bleu:.2f} "
        f"({result.baseline_variant} T=1, p = {significance['greedy'].bleu.p_value:.4f}), beam "
        f"{v.beam.bleu:.2f} vs {b.beam.bleu:.2f} (p = {significance['beam'].bleu.p_value:.4f})"
    )


def decodings(subset_eval):
    """The greedy and beam rows of a run's evaluation on one subset (records.SubsetEval)."""
    return Decodings(greedy=subset_eval.greedy, beam=subset_eval.beam)


def tempering(exp_dir, exp, group, device, quiet=False):
    """T_opt against T=1 (see finalize) -> final/final.json. quiet: no word when the sweep has no
    other T (it compares model variants only)."""
    final_dir = os.path.join(exp_dir, "final")
    if os.path.exists(os.path.join(final_dir, "final.json")):
        return read_tempering(exp_dir)
    ls, sem = exp.primary
    if 1.0 not in group or len(group) < 2:
        if quiet and (1.0 in group or not group):  # a sweep of variants only: nothing to temper
            return None
        say(
            f"{os.path.basename(exp_dir)}: no finalize: it needs T=1 and another T at label smoothing "
            f"{fmt(ls)}, SEM weight {fmt(sem)}"
        )
        return None
    runs = {t: read_run(d) for t, d in group.items()}
    missing = [os.path.basename(group[t]) for t, r in runs.items() if r is None]
    if missing:
        say(f"{os.path.basename(exp_dir)}: finalize waits for {', '.join(sorted(missing))}")
        return None
    tempered = {t: r for t, r in runs.items() if t != 1.0}
    t_opt = max(sorted(tempered), key=lambda t: tempered[t].eval["valid"].greedy.bleu)
    subset = "test" if "test" in exp.subsets else "valid"
    os.makedirs(final_dir, exist_ok=True)
    with Lock(final_dir, RunFailed):
        systems, speed = tuned_systems(final_dir, exp, group, subset, t_opt, device)
        significance = tempering_significance(final_dir, exp, systems)
        result = Tempering(
            direction=f"{exp.src}-{exp.tgt}",
            experiment=os.path.basename(exp_dir),
            preset=exp.preset,
            label_smoothing=ls,
            sem_weight=sem,
            t_opt=t_opt,
            t_opt_chosen_by="dev greedy BLEU among T != 1",
            dev_greedy_bleu={fmt(t): r.eval["valid"].greedy.bleu for t, r in sorted(runs.items())},
            scored_subset=subset,
            tuned_on="valid",
            systems=systems,
            speed=speed,
            significance=significance,
        )
        write_json(os.path.join(final_dir, "final.json"), dataclasses.asdict(result))
        tempered, untempered = systems["tempered"], systems["untempered"]
        say(
            f"{os.path.basename(exp_dir)}: T_opt = {fmt(t_opt)}; {subset} BLEU greedy "
            f"{tempered.greedy.bleu:.2f} vs {untempered.greedy.bleu:.2f} (T=1), "
            f"tuned beam {tempered.beam.bleu:.2f} vs {untempered.beam.bleu:.2f}"
        )
        return result


def tuned_systems(final_dir, exp, group, subset, t_opt, device):
    """T = 1 and T_opt decoded greedy and with the beam and length penalty tuned on dev, and the
    timings of greedy against each beam of exp.speed_beams: (systems, speed) of final.json."""
    systems, speed = {}, {}
    for label, t in (("untempered", 1.0), ("tempered", t_opt)):
        # one loaded checkpoint for the grid and the timings
        decoder = evaluate.Decoder(exp, os.path.join(group[t], "checkpoint_avg.pt"), device)
        tuned = decoder.greedy_vs_beam(
            os.path.join(final_dir, f"tune-T{fmt(t)}"),
            subset,
            exp.eval_beam,
            grid=(exp.grid_beams, exp.grid_lenpens),
        )
        systems[label] = TunedSystem(
            greedy=SystemRow.of(tuned.systems["greedy"]),
            beam=SystemRow.of(tuned.systems["beam"]),
            temperature=t,
            files=tuned.files,
            grid=evaluate.grid_rows(tuned),
            signature=tuned.signatures["bleu"],
        )
        speed[label] = {"temperature": t, "greedy_seconds": tuned.systems["greedy"].decode_seconds}
        for beam in exp.speed_beams:
            timed = decoder.greedy_vs_beam(
                os.path.join(final_dir, f"speed-T{fmt(t)}-beam{beam}"), subset, beam
            )
            speed[label][f"beam{beam}_seconds"] = timed.systems["beam"].decode_seconds
            speed[label][f"greedy_seconds_with_beam{beam}"] = timed.systems["greedy"].decode_seconds
    return systems, speed


def tempering_significance(final_dir, exp, systems):
    """Paired bootstrap of T_opt against T = 1, greedy and tuned beam (final/significance-*.json)."""
    significance = {}  # sacrebleu's paired bootstrap resampling (1000 samples)
    comparisons = {
        "greedy": ("untempered", "greedy.hyp", "tempered", "greedy.hyp"),
        "beam": ("untempered", "beam.hyp", "tempered", "beam.hyp"),
        "tempered_greedy_vs_untempered_beam": ("untempered", "beam.hyp", "tempered", "greedy.hyp"),
    }
    for name, (base, base_file, other, other_file) in comparisons.items():
        path = os.path.join(final_dir, f"significance-{name}.json")
        files = systems[base].files
        paired = evaluate.paired_test(
            path, files["ref"], files[base_file], systems[other].files[other_file], exp
        )
        significance[name] = PairedTest.from_dict(paired)
    return significance
