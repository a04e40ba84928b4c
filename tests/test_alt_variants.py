"""Model variants in the ALT sweep (ctemp-alt-sweep run --variants): a tiny sweep of the transformer
and ct_transformer through the real commands (the sweep, its run-one and fairseq-train processes,
finalize, ctemp-alt-results), the runs' options, the comparison against the T=1 transformer, the
tables and plots, nothing redone, a run directory of a sweep before variants reused; and the
fairseq-train options of every variant build their model and criterion."""

import csv
import json
import os
import shlex
import sys

import pytest
from conftest import BIN_DIR, TINY_DIMS, run_main
from fairseq import options, tasks
from fairseq.models import ARCH_MODEL_REGISTRY

from fairseq_ctemp.alt.data import toy_language_pair
from fairseq_ctemp.alt.presets import VARIANTS
from fairseq_ctemp.cli import alt_data, alt_sweep
from fairseq_ctemp.cli import alt_results as results_command

pytestmark = pytest.mark.e2e
ENV = dict(
    os.environ, PATH=BIN_DIR + os.pathsep + os.environ["PATH"], OMP_NUM_THREADS="1", PYTHON=sys.executable
)
for key in ("ALT_RELEASE", "ALT_LOCAL", "ALT_WORK"):
    ENV.pop(key, None)
# the mini preset shrunk to 8 updates a run (a validation every 4), one dev decoding of each
SWEEP = [
    "en-vi",
    "--subwords",
    "bpe",
    "--vocab",
    "200",
    "--preset",
    "mini",
    "--temperatures",
    "1",
    "--variants",
    "transformer,ct_transformer",
    "--interval",
    "4",
    "--patience",
    "3",
    "--average",
    "2",
    "--max-update",
    "8",
    "--log-interval",
    "2",
    "--eval-beam",
    "2",
    "--jobs",
    "2",
    "--decode-args",
    "--max-len-a 1.2 --max-len-b 5",
]
TINY = [*TINY_DIMS, "--max-tokens", "120", "--warmup-updates", "4", "--lr", "1e-2"]
RUNS = ("T1-ls0.1-sem0", "ct_transformer-T1-ls0.1-sem0")


def sweep(*args, check=True):
    return run_main(alt_sweep.main, "run", *args, check=check, env=ENV)


def snapshot(path):
    return {
        os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
        for d, _, files in os.walk(path)
        for f in files
    }


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A prepared en-vi copy without a test split (train 60, dev 12 pairs)."""
    root = tmp_path_factory.mktemp("alt-variants")
    toy, local = toy_language_pair(seed=3), root / "local"
    local.mkdir()
    for split, count in (("train", 60), ("dev", 12)):
        pairs = [toy.sentence_pair(3, 8) for _ in range(count)]
        for lang, side in (("en", 0), ("vi", 1)):
            (local / f"{split}.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    work = root / "work"
    run_main(alt_data.main, "prepare", "en-vi", "--local", local, "--work", work, *SWEEP[1:5], env=ENV)
    return work


@pytest.fixture(scope="module")
def swept(work):
    proc = sweep(*SWEEP, "--work", work, "--", *TINY)
    return {"work": work, "exp": work / "sweep" / "en-vi.mini.bpe200", "proc": proc}


def test_variants_train_evaluate_and_compare_with_t1(swept):
    exp = swept["exp"]
    assert sorted(p.name for p in exp.iterdir() if (p / "config.json").exists()) == sorted(RUNS)
    configs = {name: json.loads((exp / name / "config.json").read_text()) for name in RUNS}
    assert [(c["variant"], c["seed"], c["temperature"]) for c in configs.values()] == [
        ("transformer", 1, 1.0),
        ("ct_transformer", 1, 1.0),
    ]
    base, ct = (configs[name]["train_args"] for name in RUNS)
    # the same options but the architecture and the criterion (ct_cross_entropy: no T, no SEM)
    assert base[:2] == ["--arch", "transformer"] and ct[:2] == ["--arch", "ct_transformer_alt_mini"]
    criterion = ["--criterion", "tempered_ce", "--softmax-temperature", "1", "--label-smoothing", "0.1"]
    i = base.index("--criterion")
    assert base[i : i + 6] == criterion and base[i + 6 : i + 8] == ["--sem-weight", "0"]
    j = ct.index("--criterion")
    assert ct[j : j + 4] == ["--criterion", "ct_cross_entropy", "--label-smoothing", "0.1"]
    assert base[2:i] == ct[2:j] and base[i + 8 :] == ct[j + 4 :]
    assert "CTTransformerModel" in (exp / RUNS[1] / "train.log").read_text()
    runs = {name: json.loads((exp / name / "run.json").read_text()) for name in RUNS}
    for name, run in runs.items():
        assert run["variant"] == configs[name]["variant"] and run["training"]["num_updates"] > 0
        assert run["eval"]["valid"]["greedy"]["decoding_temperature"] == 1.0
    # finalize: no T_opt (only T=1), the variant against the T=1 transformer on dev (no test split)
    assert not (exp / "final" / "final.json").exists()
    compared = json.loads((exp / "final" / f"compare-{RUNS[1]}.json").read_text())
    assert (compared["variant"], compared["baseline"], compared["scored_subset"]) == (
        "ct_transformer",
        RUNS[0],
        "valid",
    )
    for key, name in (("baseline", RUNS[0]), ("variant", RUNS[1])):
        for system in ("greedy", "beam"):
            assert compared["systems"][key][system] == runs[name]["eval"]["valid"][system]
    for system in ("greedy", "beam"):
        assert 0 < compared["significance"][system]["bleu"]["p_value"] <= 1
    assert "note: ct_transformer: one run each, at T=1" in swept["proc"].stdout


def test_results_have_the_variants(swept):
    work, out = swept["work"], swept["work"] / "results"
    run_main(results_command.main, "--work", work, env=ENV)
    runs_csv = list(csv.DictReader(open(out / "runs.csv", encoding="utf-8")))
    assert [(r["variant"], r["T"], r["seed"]) for r in runs_csv] == [
        ("transformer", "1", "1"),
        ("ct_transformer", "1", "1"),
    ]
    variants = list(csv.DictReader(open(out / "variants.csv", encoding="utf-8")))
    compared = json.loads((swept["exp"] / "final" / f"compare-{RUNS[1]}.json").read_text())
    assert [(r["variant"], r["run"], r["scored on"]) for r in variants] == [
        ("ct_transformer", RUNS[1], "dev")
    ]
    assert variants[0]["greedy T=1"] == f"{compared['systems']['baseline']['greedy']['bleu']:.2f}"
    assert variants[0]["p beam"] == f"{compared['significance']['beam']['bleu']['p_value']:.4f}"
    table34 = list(csv.DictReader(open(out / "table34.csv", encoding="utf-8")))
    assert [r["runs searched"] for r in table34] == ["1"]  # the transformer's runs only
    names = set(os.listdir(out))
    assert {"bleu_vs_T.en-vi.mini.bpe200.png", "curves.en-vi.mini.bpe200.png"} <= names
    assert "## Model variants against the T=1 transformer" in (out / "alt_results.md").read_text()


def test_a_finished_sweep_is_not_redone_and_older_run_directories_are_reused(swept):
    exp, before = swept["exp"], snapshot(swept["exp"])
    # a run directory written before variants: its config.json names no variant and no seed
    config_path = exp / RUNS[0] / "config.json"
    config = json.loads(config_path.read_text())
    older = {k: v for k, v in config.items() if k not in ("variant", "seed")}
    config_path.write_text(json.dumps(older, indent=2) + "\n")
    before[str(config_path)] = config_path.stat().st_mtime_ns
    proc = sweep(*SWEEP, "--work", swept["work"], "--", *TINY)
    assert "2 runs, 0 to do" in proc.stdout and "started" not in proc.stderr
    assert snapshot(exp) == before  # nothing rewritten: not the older config.json either
    # another seed is a separate experiment, planned next to the first
    proc = sweep(*SWEEP, "--work", swept["work"], "--seed", "1,2", "--dry-run", "--", *TINY)
    assert f"{exp.name}.seed2  (" in proc.stdout and "2 runs, 2 to do" in proc.stdout


def dry_run_commands(work, variants):
    """{run: its fairseq-train argv} of a dry run with the given variants."""
    # (seed 3: an experiment of its own, not the one the tests above trained with other options)
    proc = sweep(*SWEEP, "--variants", variants, "--seed", "3", "--work", work, "--dry-run", "--no-finalize")
    lines = proc.stdout.splitlines()
    return {
        line.split("fairseq-train of ")[1].split(" ")[0].rstrip(":"): shlex.split(lines[i + 1])
        for i, line in enumerate(lines)
        if "fairseq-train of " in line
    }


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_builds_its_model_and_criterion(work, variant):
    """The fairseq-train options a variant's run gets (as the plan prints them) parse, and build the
    model and the criterion (a variant whose architecture is not registered: skipped)."""
    from fairseq_ctemp.alt.presets import variant_model

    if variant_model(variant, "mini")[1] not in ARCH_MODEL_REGISTRY:
        pytest.skip(f"{variant}: --arch {variant_model(variant, 'mini')[1]} is not registered")
    variants = "transformer" if variant == "transformer" else f"transformer,{variant}"
    name = "T1-ls0.1-sem0" if variant == "transformer" else f"{variant}-T1-ls0.1-sem0"
    argv = dry_run_commands(work, variants)[name]
    assert argv[0] == "fairseq-train"
    args = options.parse_args_and_arch(options.get_training_parser(), argv[1:])
    task = tasks.setup_task(args)
    model, criterion = task.build_model(args), task.build_criterion(args)
    expected = {"lstm": "none", "sact_lstm": "sact"}
    if variant in expected:
        assert type(model).__name__ == "SactLSTMModel" and args.attention_temperature == expected[variant]
    assert type(criterion).__name__ == (
        "ContextualTemperatureCrossEntropy"
        if variant == "ct_transformer"
        else "TemperedCrossEntropyCriterion"
    )
