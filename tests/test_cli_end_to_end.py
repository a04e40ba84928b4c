"""fairseq's CLIs with --user-dir on tiny generated data: train (with --eval-bleu) -> resume
-> average -> generate; bad options; the training log read back (fairseq_ctemp.logs). Decoding
temperatures on every path: test_decoding_temperature. The CLIs run in this process
(conftest.run_fairseq), but for a bad option of each of fairseq-train and fairseq-generate, which
the installed console scripts refuse as processes of their own."""

import collections
import io
import json
import logging
import math

import pytest
import torch
from conftest import (
    FAST_DECODE,
    PLUGIN_DIR,
    TINY_LM,
    TINY_TRANSFORMER,
    TRAIN_DEFAULTS,
    hypotheses,
    json_log_records,
    run_cli,
    run_fairseq,
    run_main,
)

from fairseq_ctemp import logs
from fairseq_ctemp.cli import average_checkpoints
from fairseq_ctemp.cli import train as ctemp_train

pytestmark = pytest.mark.e2e
T_TRAIN = 3.0


def train(
    data,
    save_dir,
    *extra,
    epochs=4,
    criterion=(
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        str(T_TRAIN),
        "--label-smoothing",
        "0.1",
    ),
    check=True,
    subprocess=False,
):
    return (run_cli if subprocess else run_fairseq)(
        "fairseq-train",
        data,
        "--user-dir",
        PLUGIN_DIR,
        *TINY_TRANSFORMER,
        *TRAIN_DEFAULTS,
        *criterion,
        "--max-epoch",
        epochs,
        "--save-dir",
        save_dir,
        *extra,
        check=check,
    )


def generate(data, checkpoint, *extra):
    return run_fairseq(
        "fairseq-generate",
        data,
        "--path",
        checkpoint,
        "--user-dir",
        PLUGIN_DIR,
        *FAST_DECODE,
        "--gen-subset",
        "test",
        "--num-workers",
        "0",
        *extra,
    ).stdout


EVAL_BLEU = [
    "--eval-bleu",
    "--eval-bleu-args",
    '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}',
    "--best-checkpoint-metric",
    "bleu",
    "--maximize-best-checkpoint-metric",
]


@pytest.fixture(scope="module")
def tempered_run(toy_data, tmp_path_factory):
    """4 epochs of tempered_ce with --eval-bleu (numpy BLEU state inside the checkpoints)."""
    save_dir = tmp_path_factory.mktemp("tempered")
    output = train(toy_data["bin"], save_dir, *EVAL_BLEU).stdout
    return {"dir": save_dir, "log": output, "data": toy_data["bin"]}


def test_validation_bleu_decodes_at_the_training_temperature(tempered_run):
    assert f"validation generator: decoding at training temperature T={T_TRAIN:g}" in tempered_run["log"]
    valid = json_log_records(tempered_run["log"], "valid")
    assert len(valid) == 4 and all("valid_bleu" in r for r in valid)
    train_stats = json_log_records(tempered_run["log"], "train")[-1]
    for key in (
        "train_nll_loss_untempered",
        "train_entropy",
        "train_entropy_untempered",
        "train_ppl_untempered",
    ):
        assert key in train_stats


def reference_records(text, kind):
    """The json records of one kind, parsed line by line here (the slow, obvious way)."""
    found = []
    for line in text.split("\n"):
        fields = line.split(" | ")
        if len(fields) == 4 and fields[2] == kind and fields[3].startswith("{"):
            found.append({k: float(v) for k, v in json.loads(fields[3]).items()})
    return found


def test_training_log_read_back(tempered_run):
    """fairseq_ctemp.logs on a real fairseq-train log: every record, numbers as numbers, and the
    log's own bookkeeping: one train_inner record per update, epoch records at the epochs' ends."""
    text = tempered_run["log"]
    for kind in logs.KINDS:
        assert logs.parse(text, kind) == reference_records(text, kind) != []
    inner, train, valid = (logs.parse(text.splitlines(True), kind) for kind in logs.KINDS)
    assert [r["num_updates"] for r in inner] == list(range(1, len(inner) + 1))
    assert [r["epoch"] for r in train] == [r["epoch"] for r in valid] == [1, 2, 3, 4]
    ends = [max(r["num_updates"] for r in inner if r["epoch"] == e) for e in (1, 2, 3, 4)]
    assert [r["train_num_updates"] for r in train] == [r["valid_num_updates"] for r in valid] == ends
    assert all(isinstance(r["valid_bleu"], float) for r in valid)
    path = tempered_run["dir"] / "copy.log"
    path.write_text(text + '2024-01-01 00:00:00 | INFO | valid | {"epoch": 5, "valid_lo', encoding="utf-8")
    assert logs.read(path, "valid") == valid  # a line cut by a kill is skipped
    # a run resumed from an earlier checkpoint logs updates again: the latest record of each wins
    again = [dict(r, loss=r["loss"] + 1) for r in inner[len(inner) // 2 :]]
    latest = logs.by_update(inner + again, "num_updates")
    assert latest == inner[: len(inner) // 2] + again
    with pytest.raises(ValueError, match="kind must be one of train_inner, train, valid"):
        logs.parse(text, "validation")


def test_simple_format_reads_as_json(tempered_run):
    """A validation printed by fairseq's own progress bars in --log-format simple reads back as the
    same record as in json (the SACT recipe's logs are simple)."""
    from fairseq.logging import progress_bar

    record = logs.parse(tempered_run["log"], "valid")[-1]
    stats = collections.OrderedDict((k[len("valid_") :], v) for k, v in record.items() if k != "epoch")
    lines = {}
    for log_format in ("json", "simple"):
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(name)s | %(message)s"))
        logger = logging.getLogger(progress_bar.__name__)
        level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            bar = progress_bar.progress_bar(
                [], log_format=log_format, epoch=int(record["epoch"]), prefix="valid on 'valid' subset"
            )
            bar.print(stats, tag="valid", step=int(record["valid_num_updates"]))
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
        lines[log_format] = stream.getvalue()
    assert "| valid | epoch 004 | valid on 'valid' subset | loss " in lines["simple"]
    assert logs.parse(lines["simple"], "valid") == logs.parse(lines["json"], "valid") == [record]


def test_bad_decoding_temperature_is_refused(tempered_run):
    proc = run_cli(
        "fairseq-generate",
        tempered_run["data"],
        "--path",
        tempered_run["dir"] / "checkpoint_last.pt",
        "--user-dir",
        PLUGIN_DIR,
        *FAST_DECODE,
        "--temperature",
        "0",
        check=False,
    )
    assert proc.returncode != 0
    assert "--temperature must be a finite number > 0" in proc.stdout and "got 0" in proc.stdout


def test_resume_from_checkpoint_last_gives_the_same_losses(toy_data, tempered_run, tmp_path, monkeypatch):
    monkeypatch.setenv("CTEMP_EXACT_RESUME", "1")  # the plugin's exact resume (opt-in)
    first = train(toy_data["bin"], tmp_path, *EVAL_BLEU, epochs=2).stdout
    resumed = train(toy_data["bin"], tmp_path, *EVAL_BLEU, epochs=4).stdout
    assert "Loaded checkpoint" in resumed and "(epoch 3 @" in resumed
    uninterrupted = json_log_records(tempered_run["log"], "train")
    interrupted = json_log_records(first, "train") + json_log_records(resumed, "train")
    assert [r["epoch"] for r in interrupted] == [1, 2, 3, 4]
    for a, b in zip(uninterrupted, interrupted):
        for key in ("train_loss", "train_nll_loss", "train_entropy", "train_nll_loss_untempered"):
            assert a[key] == b[key], (a["epoch"], key)


def test_averaged_checkpoints_generate(tempered_run, tmp_path):
    out = tmp_path / "avg.pt"
    run_main(
        average_checkpoints.main,
        "--inputs",
        tempered_run["dir"],
        "--num-epoch-checkpoints",
        "2",
        "--output",
        out,
    )
    last = [torch.load(tempered_run["dir"] / f"checkpoint{e}.pt")["model"] for e in (3, 4)]
    averaged = torch.load(out)["model"]
    for key, value in averaged.items():
        torch.testing.assert_close(value, (last[0][key] + last[1][key]) / 2)
    output = generate(tempered_run["data"], out, "--beam", "2")
    assert f"trained with tempered_ce at T={T_TRAIN:g}" in output
    assert len(hypotheses(output)) == 80
    again = run_main(
        average_checkpoints.main,
        "--inputs",
        tempered_run["dir"],
        "--num-epoch-checkpoints",
        "2",
        "--output",
        out,
        check=False,
    )
    assert again.returncode != 0 and "already exists; refusing to overwrite" in again.stderr


def test_bad_training_options_fail_before_any_training_step(toy_data, tmp_path):
    for option, value, message, subprocess in [
        ("--softmax-temperature", "0", "--softmax-temperature must be a finite number > 0", True),
        ("--sem-weight", "2", "--sem-weight must be in [0, 1)", False),
        ("--sem-weight", "1", "--sem-weight must be in [0, 1), got 1.0", False),
    ]:
        proc = train(
            toy_data["bin"],
            tmp_path / option.strip("-"),
            epochs=1,
            check=False,
            criterion=("--criterion", "tempered_ce", option, value),
            subprocess=subprocess,
        )
        assert proc.returncode != 0 and message in proc.stdout
        assert "begin training epoch" not in proc.stdout
        if subprocess:  # the plugin's exit hook: one line, no traceback
            assert f"fairseq-train: error: {message}" in proc.stdout and "Traceback" not in proc.stdout


def test_shards_are_checked_for_the_first_shards_dictionaries(toy_data, tmp_path):
    """fairseq reads every DATA shard with the first shard's dictionaries: a shard with the same
    entries passes, one without dictionary files too (fairseq does not read them), one whose
    entries come in another order (other word ids) is named."""
    import shutil

    from fairseq_ctemp import training_options

    first, shard = str(toy_data["bin"]), tmp_path / "shard2"
    shutil.copytree(first, shard)
    assert training_options.other_dictionary([first, str(shard)], ("src", "tgt")) is None
    (shard / "dict.src.txt").unlink()
    assert training_options.other_dictionary([first, str(shard)], ("src", "tgt")) is None
    lines = (shard / "dict.tgt.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    (shard / "dict.tgt.txt").write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    problem = training_options.other_dictionary([first, str(shard)], ("src", "tgt"))
    assert problem.startswith(f"DATA {shard} has another dict.tgt.txt than the first shard {first}:")


def test_what_a_run_starts_from_passes_where_fairseq_does_as_asked(tmp_path):
    """ctemp-train's refusals of --restore-file, --continue-once and --finetune-from-model leave
    alone what fairseq does as asked: the default (--save-dir's last), a --restore-file that is
    that last checkpoint, and, once --save-dir has one, a --continue-once or --finetune-from-model
    that is gone (fairseq then resumes the last and reads neither)."""
    import argparse

    from fairseq_ctemp.training_options import restore_problem

    save = tmp_path / "run"
    save.mkdir()

    def problem(**given):
        options = dict(restore_file="checkpoint_last.pt", continue_once=None, finetune_from_model=None)
        fixed = dict(
            save_dir=str(save), checkpoint_suffix="", checkpoint_shard_count=1, model_parallel_size=1
        )
        return restore_problem(argparse.Namespace(**fixed, **{**options, **given}))

    gone = str(tmp_path / "gone.pt")
    assert problem() is None
    assert problem(continue_once=gone).startswith(f"--continue-once {gone}: no such file")
    assert problem(finetune_from_model=gone) == f"--finetune-from-model {gone}: no such file"
    (save / "checkpoint_last.pt").write_bytes(b"a run's last checkpoint")
    assert problem() is None and problem(restore_file=str(save / "checkpoint_last.pt")) is None
    assert problem(continue_once=gone) is None and problem(finetune_from_model=gone) is None


def test_ctemp_train_takes_a_save_dir_relative_to_the_working_folder(toy_data, tmp_path, monkeypatch, capsys):
    """fairseq's default --save-dir, checkpoints, is a bare relative name: ctemp-train's check of it
    before training ends (a missing one is made by fairseq; the installed command, with a time
    limit), and one under a file is refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    argv = [str(toy_data["bin"]), "--user-dir", PLUGIN_DIR, *TINY_TRANSFORMER, *TRAIN_DEFAULTS]
    with pytest.raises(SystemExit):
        ctemp_train.main([*argv, "--save-dir", "a-file/checkpoints"])
    refusal = f"--save-dir a-file/checkpoints cannot be made: {tmp_path}/a-file is not a folder"
    assert capsys.readouterr().err == f"ctemp-train: error: {refusal}\n"
    run_cli("ctemp-train", *argv, "--max-update", "1", "--criterion", "tempered_ce", timeout=120)
    assert (tmp_path / "checkpoints" / "checkpoint_last.pt").is_file()


def test_tempered_ce_refuses_an_adaptive_softmax_before_any_update(toy_data, tmp_path):
    lm = [
        "--task",
        "language_modeling",
        *TINY_LM,
        "--tokens-per-sample",
        "32",
        "--cpu",
        "--optimizer",
        "adam",
        "--lr",
        "3e-3",
        "--max-tokens",
        "1024",
        "--max-epoch",
        "1",
        "--user-dir",
        PLUGIN_DIR,
    ]
    refused = run_fairseq(
        "fairseq-train",
        toy_data["lm_bin"],
        *lm,
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        "2",
        "--adaptive-softmax-cutoff",
        "20,40",
        "--save-dir",
        tmp_path / "adaptive",
        check=False,
    )
    assert refused.returncode != 0
    assert "tempered_ce needs a full softmax output layer" in refused.stdout
    assert "num_updates" not in refused.stdout  # no update happened


def test_bf16_trains_in_bfloat16_without_torch_xla(toy_data, tmp_path):
    """fairseq 0.12 makes --bf16 imply --tpu; without torch_xla the plugin undoes that (compat.py),
    so --bf16 trains in bfloat16 (fairseq's Trainer casts the model when bf16 is set) on the device
    given, here --cpu, instead of failing (it asked torch_xla for a TPU)."""
    proc = train(toy_data["bin"], tmp_path, "--bf16", "--max-update", "3", "--disable-validation")
    records = json_log_records(proc.stdout, "train_inner")
    assert records[-1]["num_updates"] == 3 and all(math.isfinite(r["loss"]) for r in records)
    common = torch.load(tmp_path / "checkpoint_last.pt")["cfg"]["common"]  # saved in fp32 by fairseq
    assert common["bf16"] is True and common["tpu"] is False and common["cpu"] is True


def test_bf16_keeps_its_tpu_where_torch_xla_is_installed(monkeypatch):
    import importlib.util
    from types import SimpleNamespace

    from fairseq_ctemp import compat

    cfg = SimpleNamespace(common=SimpleNamespace(bf16=True, tpu=True))
    assert compat.bf16_is_not_tpu(cfg).common.tpu is False  # no torch_xla installed
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: name == "torch_xla" or find_spec(name))
    cfg.common.tpu = True
    assert compat.bf16_is_not_tpu(cfg).common.tpu is True
    fp32 = SimpleNamespace(common=SimpleNamespace(bf16=False, tpu=True))  # an explicit --tpu
    assert compat.bf16_is_not_tpu(fp32).common.tpu is True


def validation_reference(checkpoint, data, t, eps):
    """(loss, nll_loss) per target token in base 2 of the valid subset, teacher forced, from the
    model of fairseq's own loader: log_softmax(D / t), fairseq's label smoothing written out (gold
    1 - eps, each other word eps / (V - 1)), the loss times t."""
    from conftest import RawModel

    raw = RawModel(checkpoint, data)
    raw.task.load_dataset("valid")
    dataset, eos = raw.task.dataset("valid"), raw.dictionary.eos()
    loss = nll = tokens = 0.0
    for i in range(len(dataset)):
        src, target = dataset[i]["source"], dataset[i]["target"]
        prev = torch.cat([torch.tensor([eos]), target[:-1]])
        lp = torch.log_softmax(raw.log_probs(prev, src) / t, dim=-1)
        gold = -lp.gather(1, target[:, None])[:, 0]
        others = -lp.sum(-1) - gold
        loss += t * ((1 - eps) * gold + eps / (lp.size(1) - 1) * others).sum().item()
        nll += gold.sum().item()
        tokens += len(target)
    return loss / tokens / math.log(2), nll / tokens / math.log(2)


def test_fairseq_validate_reports_the_checkpoints_tempered_loss(toy_data, toy_checkpoint):
    """fairseq-validate with --user-dir builds the criterion the checkpoint was trained with
    (tempered_ce, T = 3, label smoothing 0.1) and reports its validation loss and NLL: those of
    the reference above at T = 3, to the 3 decimals fairseq prints, and measurably not at T = 1."""
    from conftest import T_A

    checkpoint, data = toy_checkpoint("A"), toy_data["bin"]
    output = run_fairseq(
        "fairseq-validate", data, "--task", "translation", "--path", checkpoint, "--user-dir", PLUGIN_DIR, "--cpu",
        "--valid-subset", "valid", "--max-tokens", "4000", "--num-workers", "0", "--log-format", "json",
    ).stdout  # fmt: skip
    (record,) = json_log_records(output, "valid")
    loss, nll = validation_reference(checkpoint, data, T_A, 0.1)
    assert record["valid_loss"] == pytest.approx(loss, abs=6e-4)
    assert record["valid_nll_loss"] == pytest.approx(nll, abs=6e-4)
    assert abs(validation_reference(checkpoint, data, 1.0, 0.1)[0] - loss) > 0.01  # T counts
