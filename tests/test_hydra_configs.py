"""The fairseq-hydra-train configs (fairseq_ctemp/config/*.yaml): each one is what
scripts/export_hydra_configs.py makes of its recipe today (ALT PRESETS, the LM and SACT shell
recipes' DRY_RUN command), fairseq-hydra-train reads it as fairseq-train reads the recipe's options,
alt_mini trains end to end through the real fairseq-hydra-train at an overridden T and label smoothing
exactly as fairseq-train trains the preset (same config, losses, weights), then decodes at that T,
and every fairseq-hydra-train command of the docs composes."""

import argparse
import functools
import math
import os
import shlex
import sys

import pytest
import torch
import yaml
from conftest import PLUGIN_DIR, REPO, RawModel, code_block_lines, json_log_records, run_cli, run_fairseq

from fairseq_ctemp import logs

sys.path.insert(0, os.path.join(REPO, "scripts"))
import export_hydra_configs as export  # noqa: E402

CONFIG_DIR = os.path.join(PLUGIN_DIR, "config")
# what the script makes of a recipe (several hydra compositions, seconds each): once per name here
rendered = functools.cache(export.rendered)


def render(name):
    return rendered(name)[0]


def committed(name):
    with open(os.path.join(CONFIG_DIR, name + ".yaml"), encoding="utf-8") as f:
        return f.read()


def test_every_shipped_config_has_a_recipe():
    shipped = sorted(f[: -len(".yaml")] for f in os.listdir(CONFIG_DIR) if f.endswith(".yaml"))
    assert shipped == sorted(export.CONFIGS)


@pytest.mark.parametrize("name", list(export.CONFIGS))
def test_config_is_what_its_recipe_gives(name):
    text = committed(name)
    from_recipe, cli = rendered(name)
    assert text == from_recipe, f"run scripts/export_hydra_configs.py {name}"
    # what the file says, read as fairseq-hydra-train reads it, against fairseq-train's own reading
    # of the recipe's options
    hydra = export.hydra_train_config(yaml.safe_load(text), export.FILLED)
    assert export.differences(cli, hydra) == []


def test_check_mode_fails_on_a_file_that_differs_from_its_recipe(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(export, "CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(export, "render", render)  # the recipe's text: test_config_is_what_its_recipe_gives
    stale = tmp_path / "alt_mini.yaml"
    stale.write_text(committed("alt_mini").replace("warmup_updates: 200", "warmup_updates: 100"))
    with pytest.raises(SystemExit, match=r"differ from their recipes .*alt_mini\.yaml"):
        export.main(["--check", "alt_mini"])
    assert "warmup_updates: 100" in stale.read_text()  # --check writes nothing
    export.main(["alt_mini"])  # rewrites it from the recipe
    assert stale.read_text() == committed("alt_mini")
    assert "wrote" in capsys.readouterr().out
    export.main(["--check", "alt_mini"])  # and now agrees


def documented_commands():
    """[(file, command words)] of every fairseq-hydra-train command in the docs and READMEs."""
    return [
        (path, shlex.split(line.replace("$(ctemp-user-dir)", PLUGIN_DIR)))
        for path, line in code_block_lines()
        if line.startswith("fairseq-hydra-train ")
    ]


def test_documented_commands_compose():
    """Every fairseq-hydra-train command of the docs names a shipped config and overrides that
    fairseq-hydra-train accepts, and each override reaches the composed config."""
    commands = documented_commands()
    assert {p for p, _ in commands} >= {
        "README.md",
        "docs/hydra.md",
        "examples/alt/README.md",
        "examples/language_model/README.md",
        "examples/sact/README.md",
    }
    for path, words in commands:
        options = dict(zip(words[1::2], words[2::2]))
        assert options.get("--config-dir") == CONFIG_DIR, (path, words)
        overrides = [w for w in words[1:] if "=" in w and not w.startswith("-")]
        assert {"common.user_dir=" + PLUGIN_DIR} <= set(overrides) and any(
            o.startswith("task.data=") for o in overrides
        )
        config = yaml.safe_load(committed(options["--config-name"]))
        composed = export.hydra_train_config(config, overrides)
        for override in overrides:
            key, value = override.lstrip("+").split("=", 1)
            group, field = key.split(".")
            if group in composed and field != "data":
                assert composed[group][field] == yaml.safe_load(value), (path, override)


def test_recipe_dry_runs_print_the_command_and_write_nothing(tmp_path):
    save = tmp_path / "save"
    for script, args in (
        (export.LM_TRAIN, ["ptb", "ct-mos", save]),
        (export.SACT_TRAIN, [tmp_path / "no-data", save, "sact"]),
    ):
        options = export.recipe_options(script, *map(str, args))
        assert "--criterion" in options and "--save-dir" not in options
    assert not save.exists() and os.listdir(tmp_path) == []


# ------------------------------------------------------------- alt_mini through fairseq-hydra-train
def hydra_log_records(output, kind):
    """--log-format json records of one kind ("train_inner", "valid") in fairseq-hydra-train's log,
    where hydra's logging writes them as `[time][train_inner][INFO] - {...}`: read as
    json_log_records reads fairseq-train's (fairseq_ctemp.logs, numbers as floats)."""
    marker = f"][{kind}][INFO] - "
    lines = [f"| {kind} | " + line.split(marker, 1)[1] for line in output.splitlines() if marker in line]
    return logs.parse(lines, kind)


T, LS = 2.5, 0.2
TINY = {  # a few updates on the toy corpus; everything else is the config's
    "optimization.max_update": "3",
    "common.log_interval": "1",
    "criterion.softmax_temperature": str(T),
    "criterion.label_smoothing": str(LS),
}


@pytest.fixture(scope="module")
def hydra_run(toy_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("hydra")  # the working directory (hydra.run.dir: .)
    overrides = {
        "task.data": toy_data["bin"],
        "common.user_dir": PLUGIN_DIR,
        "checkpoint.save_dir": work / "ckpt",
        **TINY,
    }
    proc = run_cli(
        "fairseq-hydra-train",
        "--config-dir",
        CONFIG_DIR,
        "--config-name",
        "alt_mini",
        *(f"{k}={v}" for k, v in overrides.items()),
        cwd=work,
    )
    return {"log": proc.stdout, "checkpoint": work / "ckpt" / "checkpoint_last.pt", "work": work}


@pytest.fixture(scope="module")
def cli_run(toy_data, tmp_path_factory):
    """The same run through fairseq-train: the preset's options, with TINY as options."""
    save = tmp_path_factory.mktemp("cli") / "ckpt"
    options = "--max-update 3 --log-interval 1 --softmax-temperature 2.5 --label-smoothing 0.2".split()
    proc = run_fairseq(
        "fairseq-train",
        toy_data["bin"],
        "--user-dir",
        PLUGIN_DIR,
        *export.alt_options("mini"),
        *options,
        "--save-dir",
        save,
    )
    return {"log": proc.stdout, "checkpoint": save / "checkpoint_last.pt"}


TIMINGS = ("wps", "ups", "wpb", "bsz", "train_wall", "wall", "gb_free")


@pytest.mark.e2e
def test_alt_mini_trains_with_tempered_ce_at_the_overridden_t(hydra_run, cli_run):
    inner = hydra_log_records(hydra_run["log"], "train_inner")
    assert [r["num_updates"] for r in inner] == [1, 2, 3]
    assert all("nll_loss_untempered" in r for r in inner)  # logged by tempered_ce only
    assert not (hydra_run["work"] / "outputs").exists()  # ran in the working directory
    hydra, cli = (
        torch.load(r["checkpoint"], map_location="cpu", weights_only=True) for r in (hydra_run, cli_run)
    )
    assert hydra["cfg"]["criterion"]["_name"] == "tempered_ce"
    assert hydra["cfg"]["criterion"]["softmax_temperature"] == T
    assert hydra["cfg"]["criterion"]["label_smoothing"] == LS
    # the run is fairseq-train's run of the preset with the same overrides as options: the same
    # configuration, losses and weights
    for group in ("model", "task", "criterion", "optimizer", "lr_scheduler", "optimization", "dataset"):
        ours, theirs = hydra["cfg"][group], cli["cfg"][group]
        if isinstance(theirs, argparse.Namespace):  # a legacy architecture's model: every option
            theirs = {k: getattr(theirs, k) for k in ours}
        assert ours == theirs, group
    losses = [{k: v for k, v in r.items() if k not in TIMINGS} for r in inner]
    assert losses == [
        {k: v for k, v in r.items() if k not in TIMINGS}
        for r in json_log_records(cli_run["log"], "train_inner")
    ]
    assert hydra["model"].keys() == cli["model"].keys()
    for name, weight in hydra["model"].items():
        assert torch.equal(weight, cli["model"][name]), name


@pytest.mark.e2e
def test_alt_mini_checkpoint_decodes_at_its_training_t(hydra_run, toy_data):
    out = run_fairseq(
        "fairseq-generate",
        toy_data["bin"],
        "--user-dir",
        PLUGIN_DIR,
        "--path",
        hydra_run["checkpoint"],
        "--cpu",
        "--beam",
        "1",
        "--max-len-a",
        "1.2",
        "--max-len-b",
        "8",
        "--gen-subset",
        "test",
        "--max-sentences",
        "8",
        "--num-workers",
        "0",
    ).stdout
    assert f"decoding at training temperature T={T:g}" in out
    # positional scores (base 2) of the greedy hypotheses against log softmax(D / T) of a teacher-
    # forced forward pass of the checkpoint loaded by fairseq's own loader
    ref = RawModel(hydra_run["checkpoint"], toy_data["bin"])
    lines = dict(line.split("\t", 1) for line in out.splitlines() if line[:2] in ("S-", "H-", "P-"))
    ids = [k[2:] for k in lines if k.startswith("H-")]
    assert len(ids) == 80
    encode = lambda s: ref.dictionary.encode_line(s, add_if_not_exist=False).long()  # noqa: E731
    for i in ids[:8]:
        src, hyp = encode(lines[f"S-{i}"]), encode(lines[f"H-{i}"].split("\t")[-1])
        prev = torch.cat([torch.tensor([ref.dictionary.eos()]), hyp[:-1]])
        logits = ref.log_probs(prev, src)
        scores = torch.tensor([float(x) for x in lines[f"P-{i}"].split()], dtype=torch.float64)

        def at(t):
            return torch.log_softmax(logits / t, -1).gather(1, hyp[:, None])[:, 0] / math.log(2)  # noqa: B023

        torch.testing.assert_close(scores, at(T), atol=2e-3, rtol=0)
        assert (at(1.0) - at(T)).abs().max() > 0.05  # the check tells T from 1
