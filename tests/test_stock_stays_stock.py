"""With the plugin imported, fairseq's own models decode as stock fairseq does: a SequenceGenerator
over stock models gets no attribute or method of the plugin, so TorchScript compiles it (fairseq's
deployment path, as fairseq's own test_sequence_generator scripts it) and the scripted generator
decodes as the eager one."""

import argparse

import pytest
import torch
from fairseq.data.dictionary import Dictionary
from fairseq.models.transformer import TransformerModel
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator
from fairseq.tasks.fairseq_task import LegacyFairseqTask

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


@pytest.mark.parametrize("temperature", [None, 1.7])
def test_a_generator_of_stock_models_is_stock_and_scriptable(stock, temperature, tmp_path):
    task, model, sample = stock
    kwargs = {} if temperature is None else {"temperature": temperature}
    generator = SequenceGenerator(
        [model], task.target_dictionary, beam_size=2, no_repeat_ngram_size=2, **kwargs
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


def test_every_change_the_plugin_makes_is_listed_in_design_md():
    """What a fresh `import fairseq_ctemp` changes outside the package (patches.INSTALLED) is the
    table of docs/design.md, entry for entry, each with its reason; nothing is patched twice."""
    import json
    import os
    import re
    import subprocess
    import sys

    from conftest import REPO

    code = (
        "import json, fairseq_ctemp, importlib\n"
        "from fairseq_ctemp import patches, compat, decoding, option_errors\n"
        "before = dict(patches.INSTALLED)\n"
        "compat.apply(); decoding.apply(); option_errors.install()  # as a second import would\n"
        "assert patches.INSTALLED == before\n"
        "print(json.dumps(before))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    installed = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(os.path.join(REPO, "docs", "design.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Everything importing the plugin changes", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, re.M))
    assert installed == documented
    assert all(why.strip() for why in installed.values())
