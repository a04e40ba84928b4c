"""ctemp-train: a run interrupted after its best validation and resumed stops where the same run
uninterrupted stops (fairseq's --patience count is carried in the checkpoints), where plain
fairseq-train, resumed the same way, counts anew and trains on."""

import os
import shutil

import torch
from conftest import PLUGIN_DIR, TINY_LM, json_log_records, run_cli, run_fairseq

from fairseq_ctemp import early_stopping

# A tiny LM that overfits the toy corpus fast at this learning rate: its validation loss is best at
# epoch 9 and early stopping (patience 2) ends it at epoch 11.
TRAIN = [
    *("--user-dir", PLUGIN_DIR, "--task", "language_modeling", "--tokens-per-sample", "32", "--cpu"),
    *("--optimizer", "adam", "--lr", "3e-2", "--max-tokens", "1024", "--seed", "1", "--num-workers", "0"),
    *("--log-format", "json", "--patience", "2", *TINY_LM),
]


def train(program, data, save_dir, max_epoch, checkpoints=("--no-epoch-checkpoints",)):
    options = [*checkpoints, "--save-dir", save_dir, "--max-epoch", max_epoch]
    log = run_fairseq(program, data, *TRAIN, *options).stdout
    return log, [(int(r["epoch"]), r["valid_loss"]) for r in json_log_records(log, "valid")]


def test_a_resumed_run_stops_where_the_uninterrupted_run_stops(toy_data, tmp_path):
    data = toy_data["lm_bin"]
    log, full = train("ctemp-train", data, tmp_path / "full", 40, ("--keep-last-epochs", "3"))
    assert "early stop since valid performance hasn't improved for last 2 runs" in log
    losses = [loss for _, loss in full]
    best = losses.index(min(losses))
    stop = len(full)
    assert stop == best + 3 < 40  # the stop is by patience, after the best and two worse epochs
    interrupt = best + 2  # after the best and one worse validation: one left before the stop

    # Interrupted at `interrupt` (its checkpoint of that epoch), then the same command with the full
    # budget: the same validations, and the stop after the same epoch.
    (tmp_path / "resumed").mkdir()
    shutil.copy(tmp_path / "full" / f"checkpoint{interrupt}.pt", tmp_path / "resumed" / "checkpoint_last.pt")
    state = torch.load(tmp_path / "resumed" / "checkpoint_last.pt", weights_only=False)["extra_state"]
    assert early_stopping.saved_state(state)["num_runs"] == 1
    shutil.copytree(tmp_path / "resumed", tmp_path / "plain")
    log, rest = train("ctemp-train", data, tmp_path / "resumed", 40)
    assert "early stopping resumed" in log and "early stop since" in log
    assert rest == full[interrupt:]  # the validations after the interruption, and the same stop

    # Resumed from the checkpoint saved at the stop itself (the run had ended, but, say, its
    # recipe was killed before it recorded that): nothing more is trained, the checkpoint is kept.
    (tmp_path / "ended").mkdir()
    shutil.copy(tmp_path / "full" / "checkpoint_last.pt", tmp_path / "ended" / "checkpoint_last.pt")
    before = (tmp_path / "ended" / "checkpoint_last.pt").read_bytes()
    log, after_stop = train("ctemp-train", data, tmp_path / "ended", 40)
    assert after_stop == [] and "early stopping had already ended this run" in log
    assert (tmp_path / "ended" / "checkpoint_last.pt").read_bytes() == before

    # fairseq-train, resumed from the same checkpoint, counts its patience anew from the first
    # validation after the resume (worse than the best) and trains beyond the stop.
    log, plain_rest = train("fairseq-train", data, tmp_path / "plain", stop + 1)
    assert "early stop since" not in log and plain_rest[-1][0] == stop + 1


def test_a_checkpoint_without_the_count_is_resumed_with_a_warning(toy_data, tmp_path):
    train("fairseq-train", toy_data["lm_bin"], tmp_path, 1)
    log, resumed = train("ctemp-train", toy_data["lm_bin"], tmp_path, 2)
    assert "holds no early-stopping count (not written by ctemp-train)" in log
    assert [epoch for epoch, _ in resumed] == [2]


def test_the_alt_pipeline_carries_the_count_and_keeps_a_replayed_one_for_older_checkpoints(
    toy_data, tmp_path
):
    """The ALT pipeline trains in its own process with the count carried in the checkpoints; a count
    it replayed from the log (`patience`) serves only a checkpoint that holds none."""
    from conftest import reset_fairseq_train_state

    from fairseq_ctemp.alt import training

    data = toy_data["lm_bin"]
    train("fairseq-train", data, tmp_path, 1)  # a checkpoint without the count

    def alt_train(max_epoch, patience):
        args = [
            str(data),
            *TRAIN,
            "--no-epoch-checkpoints",
            "--save-dir",
            str(tmp_path),
            "--max-epoch",
            str(max_epoch),
        ]
        reset_fairseq_train_state()
        try:
            training.train_in_this_process(args, str(tmp_path / "alt.log"), patience)
        finally:
            reset_fairseq_train_state()
        checkpoint = torch.load(tmp_path / "checkpoint_last.pt", weights_only=False)
        return (tmp_path / "alt.log").read_text(), early_stopping.saved_state(checkpoint["extra_state"])

    # A validation loss of 0 is never beaten: epoch 2 adds one validation without improvement.
    log, state = alt_train(2, patience=(0.0, 1))
    assert "holds no early-stopping count: keeping the one restored before (best 0, 1 validation(s)" in log
    assert state == {"best": 0.0, "num_runs": 2}
    # The checkpoint's count wins over a replayed one: it holds 2 validations without improvement,
    # patience 2, so early stopping had ended the run at epoch 2 and nothing more is trained (the
    # replayed count, 0, would have trained epoch 3).
    log, state = alt_train(3, patience=(99.0, 0))
    assert "early stopping resumed: best 0, 2 validation(s) without improvement" in log
    assert "early stopping had already ended this run (2 validation(s) without improvement" in log
    assert state == {"best": 0.0, "num_runs": 2}


def test_a_fresh_process_under_ctemp_train_carries_the_count(toy_data, tmp_path, monkeypatch):
    """A worker that fairseq's multi-GPU training spawns is a fresh interpreter with ctemp-train's
    environment, importing the plugin for --user-dir: plain fairseq-train in such a process carries
    the count; without the variable it does not."""
    monkeypatch.delenv(early_stopping.ENV, raising=False)
    with early_stopping.carried_in_checkpoints():
        env = {early_stopping.ENV: os.environ[early_stopping.ENV]}
    assert early_stopping.ENV not in os.environ  # set for the processes started inside only
    for carried, variables in ((True, env), (False, {early_stopping.ENV: ""})):
        save = tmp_path / str(carried)
        run_cli(
            "fairseq-train",
            toy_data["lm_bin"],
            *TRAIN,
            "--no-epoch-checkpoints",
            "--max-epoch",
            "1",
            "--save-dir",
            save,
            env=variables,
        )
        state = torch.load(save / "checkpoint_last.pt", weights_only=False)["extra_state"]
        assert (early_stopping.saved_state(state) is not None) is carried
