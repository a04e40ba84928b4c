"""One run of a sweep, resumable: train (fairseq-train with tempered_ce, or ct_cross_entropy for
ct_transformer; early stopping) -> average the checkpoints of the last validations -> greedy and beam
on dev (and test) -> run.json."""

import dataclasses
import datetime
import os

import torch

from .. import averaging, provenance
from ..outputs import write_json
from . import evaluate, gpus, posthoc, training
from .common import (
    Lock,
    RunFailed,
    RunHeld,
    read_json,
    say,
)
from .records import (
    CalibrationRow,
    RunResult,
    SubsetEval,
    SystemRow,
    TrainingSummary,
    load_experiment,
    prepared,
    read_config,
    read_run,
)


def run_one(run_dir, device):
    """Train -> average -> decode one run; idempotent and resumable. Returns its RunResult
    (run.json)."""
    run_dir = os.path.abspath(run_dir)
    if os.path.exists(os.path.join(run_dir, "run.json")):
        return read_run(run_dir)
    config = read_config(os.path.join(run_dir, "config.json"))
    if config is None:
        raise RunFailed(f"{run_dir} has no config.json: plan it with `ctemp-alt-sweep run` first")
    exp = load_experiment(os.path.dirname(run_dir))
    data = prepared(exp.data)
    if not device.cpu:
        gpus.require(device.gpus_per_run, "run-one", "fairseq would train on the CPU")
    if device.threads:  # training and decoding in this process (a sweep's --threads)
        torch.set_num_threads(device.threads)
    with Lock(run_dir, RunHeld):
        summary = train(run_dir, exp, config, device)
        average, averaged = average_checkpoints(run_dir, exp, config)
        evals = evaluate_average(run_dir, exp, average, device)
        result = RunResult(
            name=config.name,
            direction=f"{exp.src}-{exp.tgt}",
            variant=config.variant,
            seed=config.seed,
            temperature=config.temperature,
            label_smoothing=config.label_smoothing,
            sem_weight=config.sem_weight,
            training=summary,
            averaged=averaged,
            eval=evals,
            has_test=data.has_test,
            dir=run_dir,
        )
        write_json(os.path.join(run_dir, "run.json"), result.to_dict())
        return result


def train(run_dir, exp, config, device):
    """fairseq-train to early stopping (resumed where it was interrupted, with its patience count)
    -> train.json; skipped when train.json is there."""
    train_json = os.path.join(run_dir, "train.json")
    if not os.path.exists(train_json):
        training.repair_last_checkpoint(run_dir)
        resume = (
            training.patience_state(run_dir)
            if os.path.exists(os.path.join(run_dir, "checkpoint_last.pt"))
            else None
        )
        argv = training.train_argv(exp, run_dir, config, device)
        patience = None
        if resume:
            last, best, since = resume
            patience = best, since
            say(
                f"{config.name}: resuming from checkpoint_last.pt (update {last}; best dev "
                f"BLEU {best:g}, {since} validation(s) without improvement)"
            )
        start = datetime.datetime.now()
        training.train_in_this_process(argv, os.path.join(run_dir, "train.log"), patience)
        summary = training.training_summary(run_dir, exp.patience)
        summary.finished = f"{datetime.datetime.now():%Y-%m-%d %H:%M:%S}"
        summary.last_session_seconds = (datetime.datetime.now() - start).total_seconds()
        summary.code, summary.torch = provenance.code_commit(), torch.__version__
        write_json(train_json, dataclasses.asdict(summary))
    return TrainingSummary.from_dict(read_json(train_json))


def average_checkpoints(run_dir, exp, config):
    """checkpoint_avg.pt of the checkpoints of the last validations, and their file names
    (average.json, written last)."""
    average = os.path.join(run_dir, "checkpoint_avg.pt")
    average_json = os.path.join(run_dir, "average.json")
    if not os.path.exists(average_json):
        inputs = training.last_validation_checkpoints(run_dir, exp.average)
        say(
            f"{config.name}: averaging the checkpoints of the last {len(inputs)} validations: "
            + ", ".join(os.path.basename(p) for p in inputs)
        )
        if os.path.exists(average):
            os.remove(average)  # an average without average.json is from an interrupted try
        try:  # ctemp-average-checkpoints, in this process (it writes atomically)
            averaging.write_average(inputs, average)
        except averaging.AverageError as e:
            raise RunFailed(f"ctemp-average-checkpoints: {e}") from None
        write_json(average_json, {"inputs": [os.path.basename(p) for p in inputs], "requested": exp.average})
    return average, read_json(average_json)["inputs"]


def evaluate_average(run_dir, exp, average, device):
    """{subset: SubsetEval} of the averaged checkpoint: greedy and beam, and its calibration."""
    evals, decoder = {}, evaluate.Decoder(exp, average, device)
    for subset in exp.subsets:
        result = decoder.greedy_vs_beam(os.path.join(run_dir, "eval", subset), subset, exp.eval_beam)
        evals[subset] = SubsetEval(
            greedy=SystemRow.of(result.systems["greedy"]),
            beam=SystemRow.of(result.systems["beam"]),
            signature=result.signatures["bleu"],
            n_sentences=result.n_sentences,
        )
    for subset, measured in posthoc.calibrate_run(run_dir, exp, device).items():  # ECE, NLL
        evals[subset].calibration = CalibrationRow(measured.nll, measured.ece, measured.decoding_temperature)
    return evals
