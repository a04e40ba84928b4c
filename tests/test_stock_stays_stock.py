"""With the plugin imported, fairseq's own models decode as stock fairseq does: a SequenceGenerator
over stock models gets no attribute or method of the plugin, so TorchScript compiles it (fairseq's
deployment path, as fairseq's own test_sequence_generator scripts it) and the scripted generator
decodes as the eager one. A stock transformer trains, resumes, saves its configuration and decodes,
and a stock transformer_lm (softmax or adaptive softmax) is scored by fairseq-eval-lm, exactly as
without the plugin."""

import argparse
import importlib.util
import os
import subprocess

import pytest
import torch
from conftest import PLUGIN_DIR, TINY_LM, json_log_records, python_script, run_cli, run_fairseq
from fairseq.data.dictionary import Dictionary
from fairseq.models.transformer import TransformerModel
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator
from fairseq.tasks.fairseq_task import FairseqTask, LegacyFairseqTask

import fairseq_ctemp  # noqa: F401  (the plugin's patches, as --user-dir installs them)
from fairseq_ctemp import decoding


class DummyTask(LegacyFairseqTask):
    """fairseq's own test task (tests/test_sequence_generator.py): one 100-word dictionary."""

    def __init__(self, args):
        super().__init__(args)
        self.dictionary = Dictionary()
        for i in range(100):
            self.dictionary.add_symbol(str(i), 1000)

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary


@pytest.fixture(scope="module")
def stock():
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    DummyTask.add_args(parser)
    task = DummyTask.setup_task(parser.parse_args([]))
    TransformerModel.add_args(parser)
    args = parser.parse_args([])
    args.encoder_layers, args.decoder_layers = 2, 1
    torch.manual_seed(0)
    model = TransformerModel.build_model(args, task).eval()
    eos = task.target_dictionary.eos()
    src = torch.cat((torch.randint(4, 50, (2, 10)), torch.full((2, 1), eos)), -1)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.LongTensor([11, 11])}}
    return task, model, sample


# the TorchScript round trip through a file is what fairseq's scriptable generator offers; the
# deprecation of torch.jit.load (torch >= 2.13) is torch's, not the plugin's
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("temperature", [None, 1.7])
def test_a_generator_of_stock_models_is_stock_and_scriptable(stock, temperature, tmp_path):
    task, model, sample = stock
    kwargs = {} if temperature is None else {"temperature": temperature}
    # max_len_b: an untrained model decodes to the length limit (200 by default); 12 steps suffice
    generator = SequenceGenerator(
        [model], task.target_dictionary, beam_size=2, no_repeat_ngram_size=2, max_len_b=12, **kwargs
    )
    # nothing of the plugin on the generator or the model: fairseq divides the logits by X itself
    assert generator.temperature == (1.0 if temperature is None else temperature)
    assert not [k for k in vars(generator) if k.startswith("_ctemp") or k.startswith("ctemp")]
    assert not decoding.carries_temperature(model) and "get_normalized_probs" not in vars(model)
    assert type(generator.model).forward_decoder is EnsembleModel.forward_decoder
    scripted = torch.jit.script(generator)
    scripted.save(str(tmp_path / "generator.pt"))
    loaded = torch.jit.load(str(tmp_path / "generator.pt"))
    eager = generator.forward(sample)
    for other in (scripted(sample), loaded(sample)):
        for hypos, hypos_other in zip(eager, other):
            for h, g in zip(hypos, hypos_other):
                assert torch.equal(h["tokens"], g["tokens"])
                diff = (h["positional_scores"] - g["positional_scores"]).abs().max().item()
                assert diff < 1e-4, diff


def test_the_ensemble_model_of_stock_models_is_scriptable(stock):
    _, model, _ = stock
    torch.jit.script(EnsembleModel([model]))


def speech_dlm_generator_inputs():
    """A speech_dlm_task and a stand-in for its model, as far as its build_generator reads them."""
    from fairseq.tasks.speech_dlm_task import SpeechDLMTask

    class Decoder(torch.nn.Linear):
        def __init__(self):
            super().__init__(1, 1)
            self.args = argparse.Namespace(decoder_out_layers=["next"], duration_prediction=False)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = Decoder()

        def max_decoder_positions(self):
            return 100

    task = SpeechDLMTask.__new__(SpeechDLMTask)  # (its setup reads a data directory)
    task.output_dicts = {"unit": Dictionary()}
    return task, [Model()]


def test_a_task_whose_own_generator_takes_no_none_gets_fairseqs_default_temperature():
    """The plugin's --temperature defaults to None (the model's own); fairseq's speech_dlm_task
    builds a generator of its own, which refuses None: for stock models it gets stock fairseq's
    1.0, from a copy of the options (the caller's keep their None)."""
    from fairseq import options

    task, models = speech_dlm_generator_inputs()
    args = options.parse_args_and_arch(options.get_generation_parser(), ["data", "--task", "speech_dlm_task"])
    assert args.temperature is None  # the plugin's default
    generator = task.build_generator(models, args)
    assert generator.temperature == {"unit": 1.0}
    assert args.temperature is None
    args.temperature = 0.5  # an explicit temperature reaches it as given
    assert task.build_generator(models, args).temperature == {"unit": 0.5}


def test_every_task_with_its_own_generator_is_given_fairseqs_default():
    from fairseq.tasks import TASK_REGISTRY

    from fairseq_ctemp import patches

    own = {
        cls
        for task in TASK_REGISTRY.values()
        for cls in task.__mro__
        if "build_generator" in vars(cls) and cls is not FairseqTask
    }
    assert len(own) >= 2
    assert all(patches.installed(cls, "build_generator") for cls in own)


def test_a_generation_config_left_at_none_reaches_a_stock_generator_as_1_and_stays_none(stock):
    """fairseq-generate's cfg.generation (an OmegaConf config) at the plugin's None: the stock
    models' generator gets fairseq's 1.0 from a copy; the caller's config is not changed."""
    from fairseq.dataclass.configs import GenerationConfig
    from omegaconf import OmegaConf

    task, model, _ = stock
    cfg = OmegaConf.structured(GenerationConfig(temperature=None))
    generator = task.build_generator([model], cfg)
    assert generator.temperature == 1.0 and cfg.temperature is None


def test_fairseqs_build_generator_called_by_a_tasks_own_one_takes_its_1_for_no_temperature(stock):
    """A task's own build_generator that calls FairseqTask's, with the copy at 1.0 it was given
    for stock models: FairseqTask's takes it for the default it stands for, so --score-reference
    scores stock models as stock fairseq does (no temperature: they are left as they are)."""
    from fairseq.sequence_scorer import SequenceScorer

    task, model, _ = stock

    def own_build_generator(self, models, args):
        return LegacyFairseqTask.build_generator(self, models, args)

    build = decoding.task_build_generator(own_build_generator)
    args = argparse.Namespace(score_reference=True, temperature=None)
    scorer = build(task, [model], args)
    assert isinstance(scorer, SequenceScorer) and scorer.temperature is None
    assert args.temperature is None
    args.temperature = 1.0  # given: the rule's explicit 1
    assert build(task, [model], args).temperature == 1.0


@pytest.mark.parametrize(
    "model, owned",
    [
        ({"_name": "transformer"}, False),
        ({"_name": "transformer_lm", "arch": "transformer_lm"}, False),
        ({"_name": "ct_transformer", "arch": "ct_transformer_tiny"}, True),
        ({"_name": "sact_lstm"}, True),
    ],
)
def test_only_the_plugins_checkpoints_have_their_task_checked(model, owned):
    """checkpoint_task refuses a checkpoint of the other task kind only for the plugin's own models
    (or a stored tempered_ce T); a stock model keeps fairseq's behaviour, whatever it is."""
    from fairseq_ctemp import checkpoint_task

    assert checkpoint_task.owns_model({"model": model}) is owned


def test_a_stock_checkpoint_keeps_its_saved_decoding_temperature(toy_checkpoint, toy_data, tmp_path):
    """A stock checkpoint whose saved generation config says temperature 0.7 (a hydra run can save
    one) loads with it, as through stock fairseq's loader (the hub decodes with that config)."""
    from fairseq import checkpoint_utils

    state = checkpoint_utils.load_checkpoint_to_cpu(toy_checkpoint("S"))
    state["cfg"]["generation"]["temperature"] = 0.7
    path = tmp_path / "stock.pt"
    torch.save(state, path)
    overrides = {"data": str(toy_data["bin"])}
    _, stock_cfg, _ = decoding._load_model_ensemble_and_task([str(path)], arg_overrides=overrides)
    _, cfg, _ = checkpoint_utils.load_model_ensemble_and_task([str(path)], arg_overrides=overrides)
    assert checkpoint_utils.load_model_ensemble_and_task is decoding.load_model_ensemble_and_task
    assert cfg.generation.temperature == stock_cfg.generation.temperature == 0.7


def test_every_change_the_plugin_makes_is_listed_in_design_md(tmp_path):
    """What a fresh `import fairseq_ctemp` changes outside the package (patches.INSTALLED) is the
    table of docs/design.md, entry for entry, each with its reason; nothing is patched twice."""
    import json
    import os
    import re
    import subprocess

    from conftest import REPO, python_script

    code = (
        "import json, fairseq_ctemp, importlib\n"
        "from fairseq_ctemp import patches, compat, decoding, option_errors\n"
        "before = dict(patches.INSTALLED)\n"
        "compat.apply(); decoding.apply(); option_errors.install()  # as a second import would\n"
        "assert patches.INSTALLED == before\n"
        "print(json.dumps(before))\n"
    )
    command = python_script(tmp_path, "patches", code)
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=True)
    installed = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(os.path.join(REPO, "docs", "design.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Everything importing the plugin changes", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, re.M))
    assert installed == documented
    assert all(why.strip() for why in installed.values())


@pytest.mark.skipif(
    importlib.util.find_spec("tensorboardX") is not None, reason="tensorboardX is installed: no notice"
)
def test_the_tensorboardx_notice_is_left_out_where_the_plugin_is_imported_first():
    """fairseq's 'Please install tensorboardX' line, logged at its import: not before the output of
    the plugin's commands; fairseq's own commands (which import fairseq before the plugin) print it
    as they do without the plugin."""
    notice = "Please install tensorboardX"
    assert notice not in run_cli("ctemp-calibrate", "--help").stdout
    assert notice in run_cli("fairseq-generate", "--help", "--user-dir", PLUGIN_DIR).stdout


# --------------------------------------- stock fairseq-train / fairseq-generate, with and without
STOCK_RUN = [
    *("--arch", "transformer", "--encoder-layers", "1", "--decoder-layers", "1"),
    *("--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64"),
    *("--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"),
    *("--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--optimizer", "adam"),
    *("--lr", "3e-3", "--lr-scheduler", "reduce_lr_on_plateau", "--lr-shrink", "0.5", "--lr-patience", "0"),
    *("--max-tokens", "1000", "--seed", "1", "--cpu", "--num-workers", "0", "--log-format", "json"),
    *("--log-interval", "1", "--save-interval-updates", "4", "--no-epoch-checkpoints"),
]
TIMES = ("wps", "ups", "wall", "train_wall", "gb_free")  # what differs between two runs of one thing


def stock_or_plugin_run(data, save_dir, plugin):
    """fairseq-train stopped at the end of epoch 1, resumed and stopped mid-epoch 2 (update 9),
    resumed to the end of epoch 3, then fairseq-generate of its last checkpoint: (log records,
    weights, hypotheses). Both sides load checkpoints with torch's old default (weights_only off), which stock
    fairseq 0.12 needs to resume at all on this torch."""
    user_dir = ["--user-dir", PLUGIN_DIR] if plugin else []
    env = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "CTEMP_EXACT_RESUME": "0"}
    records = []
    for stop in (["--max-epoch", "1"], ["--max-update", "9"], ["--max-epoch", "3"]):  # 6 updates an epoch
        train = [data, *user_dir, *STOCK_RUN, *stop, "--save-dir", save_dir]
        proc = run_cli("fairseq-train", *train, env=env, check=False)
        out = proc.stdout
        # stock fairseq may abort at exit after a mid-epoch stop, its work done (compat.py's batch thread)
        aborted_after_its_work = not plugin and proc.returncode in (-6, 134) and "done training" in out
        assert proc.returncode == 0 or aborted_after_its_work, out[-3000:]
        for kind in ("train_inner", "train", "valid"):
            records += [
                (kind, {k: v for k, v in r.items() if k.removeprefix(kind + "_") not in TIMES})
                for r in json_log_records(out, kind)
            ]
    state = torch.load(save_dir / "checkpoint_last.pt", weights_only=False)
    generate = [data, *user_dir, "--path", save_dir / "checkpoint_last.pt", "--beam", "2", "--cpu"]
    out = run_cli("fairseq-generate", *generate, "--max-len-b", "10", "--batch-size", "40", env=env).stdout
    cfg = state["cfg"]  # (fairseq saves it as plain containers, the model's as a Namespace)
    cfg["model"] = vars(cfg["model"])
    for group in ("common", "checkpoint", "model"):  # the two that differ by design
        cfg[group].pop("user_dir", None), cfg[group].pop("save_dir", None)
    return (
        records,
        state["model"],
        sorted(line for line in out.splitlines() if line[:2] in ("H-", "D-", "P-")),
        cfg,
    )


@pytest.mark.e2e
def test_stock_transformer_trains_resumes_and_decodes_as_stock_fairseq(toy_data, tmp_path):
    """A stock transformer with label_smoothed_cross_entropy and reduce_lr_on_plateau, resumed
    mid-epoch and trained across epoch boundaries, then decoded: with --user-dir fairseq_ctemp the
    logs, the weights, the saved configuration and the hypotheses are those of fairseq without it,
    exactly."""
    stock = stock_or_plugin_run(toy_data["bin"], tmp_path / "stock", plugin=False)
    plugin = stock_or_plugin_run(toy_data["bin"], tmp_path / "plugin", plugin=True)
    assert len(stock[0]) > 20 and stock[0] == plugin[0]  # every log record (learning rates included)
    assert stock[1].keys() == plugin[1].keys()
    assert all(torch.equal(stock[1][k], plugin[1][k]) for k in stock[1])
    assert len(stock[2]) > 100 and stock[2] == plugin[2]
    assert stock[3] == plugin[3]  # the configuration the checkpoint saves, which the hub decodes with


# fairseq-eval-lm without the plugin: stock fairseq, with only numpy 2's missing np.compat.long put
# back (which fairseq 0.12's LM inference needs to run at all; the plugin's compat.py does the same)
EVAL_LM_WITHOUT_PLUGIN = """
import sys, types
import numpy as np
if not hasattr(np, "compat"):
    np.compat = types.SimpleNamespace(long=np.int64)
from fairseq_cli.eval_lm import cli_main
sys.argv = ["fairseq-eval-lm", *sys.argv[1:]]
cli_main()
"""


def eval_lm_lines(output):
    """fairseq-eval-lm's own log lines but its timing, with the --user-dir of its config left out."""
    lines = [
        line.split("fairseq_cli.eval_lm", 1)[1]
        for line in output.splitlines()
        if "fairseq_cli.eval_lm" in line
    ]
    return [
        line.replace(f"'user_dir': '{PLUGIN_DIR}'", "'user_dir': None")
        for line in lines
        if "Evaluated" not in line
    ]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "head",
    [
        ["--criterion", "cross_entropy"],
        [
            "--criterion",
            "adaptive_loss",
            "--adaptive-softmax-cutoff",
            "20,100",
            "--ddp-backend",
            "legacy_ddp",
        ],
    ],
    ids=["softmax", "adaptive-softmax"],
)
def test_stock_language_model_scores_as_stock_fairseq(toy_data, tmp_path, head):
    """fairseq's transformer_lm trained with the plugin loaded: fairseq-eval-lm with --user-dir gives
    the configuration, the loss and every word's log-probability that it gives without the plugin."""
    save = tmp_path / "lm"
    train = [toy_data["lm_bin"], "--user-dir", PLUGIN_DIR, "--task", "language_modeling", *TINY_LM, *head]
    train += ["--tokens-per-sample", "32", "--optimizer", "adam", "--lr", "3e-3", "--max-tokens", "1024"]
    run_fairseq(
        "fairseq-train", *train, "--max-update", "5", "--cpu", "--save-dir", save, "--num-workers", "0"
    )
    score = [toy_data["lm_bin"], "--path", save / "checkpoint_last.pt", "--cpu", "--output-word-probs"]
    score += ["--tokens-per-sample", "32", "--context-window", "16", "--num-workers", "0"]
    with_plugin = run_cli("fairseq-eval-lm", *score, "--user-dir", PLUGIN_DIR).stdout
    without = subprocess.run(
        [*python_script(tmp_path, "eval-lm", EVAL_LM_WITHOUT_PLUGIN), *map(str, score)],
        env=dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert without.returncode == 0, without.stdout[-3000:]
    lines = eval_lm_lines(with_plugin)
    assert sum("Loss (base 2)" in line for line in lines) == 1 and sum(" [-" in line for line in lines) > 10
    assert eval_lm_lines(with_plugin) == eval_lm_lines(without.stdout)
