"""Model variants in the ALT sweep (ctemp-alt-sweep run --variants): a tiny sweep of the transformer,
ct_transformer and sact_transformer through the real commands (the sweep, its run-one and
fairseq-train processes, finalize, ctemp-alt-results), the runs' options, the comparison against
the T=1 transformer (recomputed here with sacrebleu from the runs' translations), the tables and
plots, nothing redone, a run directory of a sweep before variants reused; the plan of a sweep over
T with variants; and the fairseq-train options of every variant build their model and criterion."""

import csv
import json
import os
import random
import shlex
import sys

import pytest
import sacrebleu
from conftest import BIN_DIR, TINY_DIMS, calibration_json, experiment_json, run_main
from fairseq import options, tasks
from fairseq.models import ARCH_MODEL_REGISTRY
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest

from fairseq_ctemp.alt import finalize, posthoc
from fairseq_ctemp.alt.common import Device
from fairseq_ctemp.alt.data import toy_language_pair
from fairseq_ctemp.alt.presets import variant_names
from fairseq_ctemp.alt.records import RunResult, Settings, SubsetEval, SystemRow, TrainingSummary
from fairseq_ctemp.cli import alt_data, alt_sweep
from fairseq_ctemp.cli import alt_results as results_command
from fairseq_ctemp.cli import alt_seeds as seeds_command

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
    "transformer,ct_transformer,sact_transformer",
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
RUNS = ("T1-ls0.1-sem0", "ct_transformer-T1-ls0.1-sem0", "sact_transformer-T1-ls0.1-sem0")
ARCHS = ("transformer", "ct_transformer_alt_mini", "sact_transformer_alt_mini")
MODELS = ("TransformerModel", "CTTransformerModel", "SactTransformerModel")


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


def read_lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def expected_comparison(baseline_dir, run_dir, system):
    """BLEU of both systems and the paired bootstrap p-value (BLEU), from sacrebleu directly."""
    refs = read_lines(baseline_dir / "eval" / "valid" / "ref")
    hyps = [read_lines(d / "eval" / "valid" / f"{system}.hyp") for d in (baseline_dir, run_dir)]
    bleu = [sacrebleu.corpus_bleu(h, [refs], tokenize="13a").score for h in hyps]
    _, scores = PairedTest(
        [("baseline", hyps[0]), ("system", hyps[1])],
        {"bleu": BLEU(tokenize="13a"), "chrf": CHRF()},
        [refs],
        test_type="bs",
        n_samples=0,
    )()
    p = 1.0 if bleu[0] == bleu[1] else next(v for k, v in scores.items() if k != "System")[1].p_value
    return bleu, p


EXP_FILE = experiment_json(data="../../data/en-vi.bpe200", data_tag="bpe200")
EXP = Settings(**EXP_FILE)


def finished_runs(exp_dir, variants):
    """Run directories of an experiment as finished runs leave them for finalize (config, dev
    translations, run.json, calibration), each (variant, T) translating the same references with
    its own errors: {(variant, T): run dir}."""
    words = "the a cat dog sat ran on under mat rug red big small".split()
    rng = random.Random(1)
    refs = [" ".join(rng.choices(words, k=8)) for _ in range(30)]
    runs = {}
    for variant, t in variants:
        name = f"{variant}-T{t:g}-ls0.1-sem0"
        run_dir = runs[variant, t] = exp_dir / name
        (run_dir / "eval" / "valid").mkdir(parents=True)
        config = {"name": name, "variant": variant, "seed": 1, "temperature": t}
        (run_dir / "config.json").write_text(
            json.dumps({**config, "label_smoothing": 0.1, "sem_weight": 0.0, "train_args": ["--seed", "1"]})
        )
        (run_dir / "eval" / "valid" / "ref").write_text("".join(r + "\n" for r in refs))
        evals = {}
        for system in ("greedy", "beam"):  # each reference with some words replaced
            hyps = [" ".join(w if rng.random() < 0.7 else rng.choice(words) for w in r.split()) for r in refs]
            (run_dir / "eval" / "valid" / f"{system}.hyp").write_text("".join(h + "\n" for h in hyps))
            bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
            evals[system] = SystemRow(1 if system == "greedy" else 4, 1.0, bleu, 0.0, 1.0, 1.0, t)
        result = RunResult(
            **config,
            direction="en-vi",
            label_smoothing=0.1,
            sem_weight=0.0,
            training=TrainingSummary(8, "early stop", 10, 2, 1.0, 8, [[4, 0.5], [8, 1.0]]),
            eval={"valid": SubsetEval(evals["greedy"], evals["beam"], signature="BLEU")},
        )
        (run_dir / "run.json").write_text(json.dumps(result.to_dict()))
        (run_dir / "eval" / "valid" / posthoc.CALIBRATION).write_text(json.dumps(calibration_json()))
    (exp_dir / "experiment.json").write_text(json.dumps(EXP_FILE))
    return runs


def test_each_variant_is_compared_with_the_t1_run_of_its_baseline(tmp_path):
    """finalize's comparison from the runs' files: sact_lstm against lstm (the same model without
    the attention temperature), lstm and sact_transformer at T = 2 against the T = 1 transformer;
    BLEU and p-values as sacrebleu gives them."""
    exp_dir = tmp_path / "en-vi.mini.bpe200"
    runs = finished_runs(
        exp_dir, (("transformer", 1.0), ("lstm", 1.0), ("sact_lstm", 1.0), ("sact_transformer", 2.0))
    )
    for variant, t, baseline in (
        ("sact_lstm", 1.0, ("lstm", 1.0)),
        ("lstm", 1.0, ("transformer", 1.0)),
        ("sact_transformer", 2.0, ("transformer", 1.0)),
    ):
        finalize.compare_variants(str(exp_dir), EXP, str(runs[variant, t]))
        compared = json.loads((exp_dir / "final" / f"compare-{runs[variant, t].name}.json").read_text())
        assert (compared["baseline"], compared["baseline_variant"]) == (runs[baseline].name, baseline[0])
        for system in ("greedy", "beam"):
            (bleu_baseline, bleu_variant), p = expected_comparison(runs[baseline], runs[variant, t], system)
            assert compared["systems"]["baseline"][system]["bleu"] == pytest.approx(bleu_baseline)
            assert compared["systems"]["variant"][system]["bleu"] == pytest.approx(bleu_variant)
            assert compared["significance"][system]["bleu"]["p_value"] == pytest.approx(p)


def test_a_sweep_of_lstm_and_sact_lstm_compares_sact_lstm_with_lstm(tmp_path, capsys):
    """Without the transformer, lstm is sact_lstm's baseline only: finalize compares sact_lstm with
    it, says lstm is not compared, and has nothing left to do."""
    exp_dir = tmp_path / "sweep" / "en-vi.mini.bpe200"
    runs = finished_runs(exp_dir, (("lstm", 1.0), ("sact_lstm", 1.0)))
    assert finalize.pending(str(exp_dir))
    finalize.finalize(str(exp_dir), Device(cpu=True))
    compared_name = f"compare-{runs['sact_lstm', 1.0].name}.json"
    compared = json.loads((exp_dir / "final" / compared_name).read_text())
    assert compared["baseline"] == runs["lstm", 1.0].name
    assert [f for f in os.listdir(exp_dir / "final") if not f.startswith(".")] == [compared_name]
    err = capsys.readouterr().err
    assert f"{runs['lstm', 1.0].name} is not compared: no T=1 transformer run in this experiment" in err
    assert "no finalize" not in err
    assert not finalize.pending(str(exp_dir))


def test_a_comparison_waits_for_an_unfinished_run_and_its_baseline(tmp_path, capsys):
    """finalize before a run or its baseline has finished (a SLURM finalize job after a failed
    array task, say): it names what the comparison waits for, writes nothing, and stays pending;
    once both runs are there it compares them."""
    exp_dir = tmp_path / "sweep" / "en-vi.mini.bpe200"
    runs = finished_runs(exp_dir, (("lstm", 1.0), ("sact_lstm", 1.0)))
    lstm, sact = runs["lstm", 1.0], runs["sact_lstm", 1.0]
    for unfinished, waits in (
        (lstm, f"the comparison of {sact.name} waits for the T=1 lstm run ({lstm.name})"),
        (sact, f"the comparison of {sact.name} waits for its run"),
    ):
        (unfinished / "run.json").rename(unfinished / "run.json.done")
        finalize.finalize(str(exp_dir), Device(cpu=True))
        assert f"{exp_dir.name}: {waits}" in capsys.readouterr().err
        assert not os.path.exists(finalize.comparison_path(str(exp_dir), str(sact)))
        assert finalize.pending(str(exp_dir))
        (unfinished / "run.json.done").rename(unfinished / "run.json")
    finalize.finalize(str(exp_dir), Device(cpu=True))
    assert os.path.exists(finalize.comparison_path(str(exp_dir), str(sact)))
    assert not finalize.pending(str(exp_dir))


def test_variants_train_evaluate_and_compare_with_t1(swept):
    exp = swept["exp"]
    assert sorted(p.name for p in exp.iterdir() if (p / "config.json").exists()) == sorted(RUNS)
    configs = {name: json.loads((exp / name / "config.json").read_text()) for name in RUNS}
    assert [(c["variant"], c["seed"], c["temperature"]) for c in configs.values()] == [
        ("transformer", 1, 1.0),
        ("ct_transformer", 1, 1.0),
        ("sact_transformer", 1, 1.0),
    ]
    base, ct, sact = (configs[name]["train_args"] for name in RUNS)
    for argv, arch in zip((base, ct, sact), ARCHS):
        assert argv[:2] == ["--arch", arch]
    # the same options but the architecture and the criterion (ct_cross_entropy: no T, no SEM)
    criterion = ["--criterion", "tempered_ce", "--softmax-temperature", "1", "--label-smoothing", "0.1"]
    i = base.index("--criterion")
    assert base[i : i + 6] == criterion and base[i + 6 : i + 8] == ["--sem-weight", "0"]
    j = ct.index("--criterion")
    assert ct[j : j + 4] == ["--criterion", "ct_cross_entropy", "--label-smoothing", "0.1"]
    assert base[2:i] == ct[2:j] and base[i + 8 :] == ct[j + 4 :]
    assert base[2:] == sact[2:]
    for name, model in zip(RUNS, MODELS):
        assert f"model: {model}" in (exp / name / "train.log").read_text()
    runs = {name: json.loads((exp / name / "run.json").read_text()) for name in RUNS}
    for name, run in runs.items():
        assert run["variant"] == configs[name]["variant"] and run["training"]["num_updates"] > 0
        assert run["eval"]["valid"]["greedy"]["decoding_temperature"] == 1.0
    # finalize: no T_opt (only T=1), each variant against the T=1 transformer on dev (no test split)
    assert not (exp / "final" / "final.json").exists()
    for name, variant in zip(RUNS[1:], ("ct_transformer", "sact_transformer")):
        compared = json.loads((exp / "final" / f"compare-{name}.json").read_text())
        assert (compared["variant"], compared["temperature"], compared["baseline"]) == (variant, 1.0, RUNS[0])
        assert compared["baseline_variant"] == "transformer"
        assert compared["scored_subset"] == "valid"
        for system in ("greedy", "beam"):
            (bleu_t1, bleu_variant), p = expected_comparison(exp / RUNS[0], exp / name, system)
            assert compared["systems"]["baseline"][system]["bleu"] == pytest.approx(bleu_t1)
            assert compared["systems"]["variant"][system]["bleu"] == pytest.approx(bleu_variant)
            assert compared["significance"][system]["bleu"]["p_value"] == pytest.approx(p)
    assert (
        "note: ct_transformer, sact_transformer: at label smoothing 0.1, SEM 0 only" in swept["proc"].stdout
    )


def test_results_have_the_variants(swept):
    work, out, exp = swept["work"], swept["work"] / "results", swept["exp"]
    run_main(results_command.main, "--work", work, env=ENV)
    runs_csv = list(csv.DictReader((out / "runs.csv").read_text(encoding="utf-8").splitlines()))
    assert [(r["variant"], r["T"], r["seed"]) for r in runs_csv] == [
        ("transformer", "1", "1"),
        ("ct_transformer", "1", "1"),
        ("sact_transformer", "1", "1"),
    ]
    variants = list(csv.DictReader((out / "variants.csv").read_text(encoding="utf-8").splitlines()))
    assert [(r["variant"], r["T"], r["run"], r["baseline"], r["scored on"]) for r in variants] == [
        ("ct_transformer", "1", RUNS[1], "transformer", "dev"),
        ("sact_transformer", "1", RUNS[2], "transformer", "dev"),
    ]
    for row, name in zip(variants, RUNS[1:]):
        (bleu_t1, bleu_variant), p = expected_comparison(exp / RUNS[0], exp / name, "beam")
        assert row["beam T=1"] == f"{bleu_t1:.2f}" and row["beam"].rstrip("†") == f"{bleu_variant:.2f}"
        assert row["p beam"] == f"{p:.4f}"
    table34 = list(csv.DictReader((out / "table34.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["runs searched"] for r in table34] == ["1"]  # the transformer's runs only
    names = set(os.listdir(out))
    assert {"bleu_vs_T.en-vi.mini.bpe200.png", "curves.en-vi.mini.bpe200.png"} <= names
    assert "## Model variants against their baselines" in (out / "alt_results.md").read_text()
    # the systems side by side: the same runs, their greedy and beam BLEU as runs.csv has them
    systems = list(csv.DictReader(open(out / "systems.csv", encoding="utf-8")))
    assert [(r["system"], r["seed"]) for r in systems] == [
        ("T = 1", "1"),
        ("ct_transformer", "1"),
        ("sact_transformer T=1", "1"),
    ]
    assert [(r["greedy BLEU"], r["beam BLEU"]) for r in systems] == [
        (r["dev greedy"], r["dev beam"]) for r in runs_csv
    ]
    assert "systems.en-vi.mini.bpe200.png" in names
    # ctemp-alt-seeds reads the runs.csv that ctemp-alt-results writes (one seed here: no test)
    run_main(seeds_command.main, "--runs", out / "runs.csv", "--output", work / "seeds", env=ENV)
    over_seeds = list(csv.DictReader(open(work / "seeds.csv", encoding="utf-8")))
    assert [(r["metric"], r["variant"], r["verdict"]) for r in over_seeds[:3]] == [
        ("dev greedy BLEU", "transformer", "baseline"),
        ("dev greedy BLEU", "ct_transformer", "no test: one seed"),
        ("dev greedy BLEU", "sact_transformer", "no test: one seed"),
    ]
    assert [r["BLEU per seed"] for r in over_seeds] == [r["dev greedy"] for r in runs_csv] + [
        r["dev beam"] for r in runs_csv
    ]

    # a part of the directory: the transformer and sact_transformer, as a sweep of those two gives
    part = swept["work"] / "results-part"
    run_main(
        results_command.main, "--work", work, "--out", part, "--experiments", exp.name,
        "--variants", "transformer,sact_transformer", env=ENV,
    )  # fmt: skip
    part_runs = list(csv.DictReader((part / "runs.csv").read_text(encoding="utf-8").splitlines()))
    assert part_runs == [r for r in runs_csv if r["variant"] != "ct_transformer"]
    part_variants = list(csv.DictReader((part / "variants.csv").read_text(encoding="utf-8").splitlines()))
    assert part_variants == [variants[1]]
    part_systems = list(csv.DictReader(open(part / "systems.csv", encoding="utf-8")))
    assert part_systems == [systems[0], systems[2]]


def test_a_finished_sweep_is_not_redone_and_older_run_directories_are_reused(swept):
    exp, before = swept["exp"], snapshot(swept["exp"])
    # a run directory written before variants: its config.json names no variant and no seed
    config_path = exp / RUNS[0] / "config.json"
    config = json.loads(config_path.read_text())
    older = {k: v for k, v in config.items() if k not in ("variant", "seed")}
    config_path.write_text(json.dumps(older, indent=2) + "\n")
    before[str(config_path)] = config_path.stat().st_mtime_ns
    proc = sweep(*SWEEP, "--work", swept["work"], "--", *TINY)
    assert "3 runs, 0 to do" in proc.stdout and "started" not in proc.stderr
    assert snapshot(exp) == before  # nothing rewritten: not the older config.json either
    # another seed is a separate experiment, planned next to the first
    proc = sweep(*SWEEP, "--work", swept["work"], "--seed", "1,2", "--dry-run", "--", *TINY)
    assert f"{exp.name}.seed2  (" in proc.stdout and "3 runs, 3 to do" in proc.stdout


def dry_run_commands(work, variants, temperatures="1"):
    """{run: its fairseq-train argv} of a dry run with the given variants (the plan prints the command
    of the first run to do of each variant)."""
    # (seed 3: an experiment of its own, not the one the tests above trained with other options)
    proc = sweep(
        *SWEEP,
        "--variants",
        variants,
        "--temperatures",
        temperatures,
        "--seed",
        "3",
        "--work",
        work,
        "--dry-run",
        "--no-finalize",
    )
    lines = proc.stdout.splitlines()
    commands = {
        line.split("fairseq-train of ")[1].split(" ")[0].rstrip(":"): shlex.split(lines[i + 1])
        for i, line in enumerate(lines)
        if "fairseq-train of " in line
    }
    planned = [line.split()[0] for line in lines if line.startswith("    ") and line.endswith(" to train")]
    return commands, planned


def test_a_sweep_over_t_trains_the_tempered_variants_at_every_t(work):
    """transformer at every T x LS, sact_transformer at every T (primary LS and SEM), ct_transformer
    at T=1 only."""
    commands, planned = dry_run_commands(
        work, "sact_transformer,ct_transformer,transformer", temperatures="1,2.5"
    )
    assert planned == [
        "sact_transformer-T1-ls0.1-sem0",
        "sact_transformer-T2.5-ls0.1-sem0",
        "ct_transformer-T1-ls0.1-sem0",
        "T1-ls0.1-sem0",
        "T2.5-ls0.1-sem0",
    ]
    argv = commands["sact_transformer-T1-ls0.1-sem0"]
    assert argv[argv.index("--softmax-temperature") + 1] == "1"
    assert argv[argv.index("--arch") + 1] == "sact_transformer_alt_mini"


def test_the_plan_of_lstm_and_sact_lstm_alone_names_the_one_comparison(work):
    """lstm,sact_lstm without the transformer: the two runs, sact_lstm against lstm; --no-finalize
    plans no finalize."""
    plan = [*SWEEP, "--seed", "4", "--work", work, "--dry-run"]
    plan[plan.index("--variants") + 1] = "lstm,sact_lstm,fixed_lstm:2.0"  # named as fixed_lstm:2
    stdout = sweep(*plan).stdout
    planned = [line.split()[0] for line in stdout.splitlines() if line.endswith(" to train")]
    assert planned == ["lstm-T1-ls0.1-sem0", "sact_lstm-T1-ls0.1-sem0", "fixed_lstm-tau2-T1-ls0.1-sem0"]
    assert (
        "  then finalize: sact_lstm against lstm T=1, fixed_lstm:2 against lstm T=1 (greedy and beam 2, "
        "paired bootstrap)\n"
    ) in stdout
    stdout = sweep(*plan, "--no-finalize").stdout
    assert "  no finalize (--no-finalize)\n" in stdout and "then finalize" not in stdout


def test_a_started_sweep_takes_a_larger_max_update_and_nothing_else(work, monkeypatch):
    """--max-update may be raised for a started experiment: unfinished runs resume under the new
    cap, a run early stopping ended keeps its config; a lower cap, another option, or a run the
    old cap stopped is refused, and a refused command writes nothing."""
    monkeypatch.setattr(alt_sweep, "execute_local", lambda *args: None)  # plan and write, train nothing
    base = [*SWEEP, "--seed", "5", "--work", work, "--no-finalize"]
    i = base.index("--max-update") + 1
    exp = work / "sweep" / "en-vi.mini.bpe200.seed5"

    def started(cap, *more, check=True):
        return sweep(*base[:i], cap, *base[i + 1 :], *more, check=check)

    def cap_of(name):
        argv = json.loads((exp / name / "config.json").read_text())["train_args"]
        return argv[argv.index("--max-update") + 1]

    started("8")
    assert [cap_of(name) for name in RUNS] == ["8", "8", "8"]
    (exp / RUNS[0] / "train.json").write_text(json.dumps({"stop_reason": "early stop"}))
    started("20")
    assert [cap_of(name) for name in RUNS] == ["8", "20", "20"]  # the early-stopped run keeps its own
    assert json.loads((exp / "experiment.json").read_text())["max_update"] == 20
    before = snapshot(exp)
    for cap, more, message in (
        ("10", [], "was started with other settings (max_update"),
        ("30", ["--patience", "4"], "was started with other settings (max_update, patience"),
    ):
        assert message in started(cap, *more, check=False).stderr
    assert snapshot(exp) == before
    (exp / RUNS[2] / "train.json").write_text(json.dumps({"stop_reason": "max update"}))
    before = snapshot(exp)
    proc = started("30", check=False)
    assert (
        proc.returncode != 0
        and (
            f"--max-update: {exp / RUNS[2]} stopped at --max-update 20 (max update), and its averaged "
            "checkpoint and scores are final; train longer in another --work"
        )
        in proc.stderr
    )
    assert snapshot(exp) == before


@pytest.mark.parametrize("variant", sorted(v.replace(":TAU", ":0.5") for v in variant_names()))
def test_every_variant_builds_its_model_and_criterion(work, variant):
    """The fairseq-train options a variant's run gets (as the plan prints them) parse, and build the
    model and the criterion."""
    from fairseq_ctemp.alt.presets import variant_model

    assert variant_model(variant, "mini")[1] in ARCH_MODEL_REGISTRY
    variants = "transformer" if variant == "transformer" else f"transformer,{variant}"
    name = "T1-ls0.1-sem0" if variant == "transformer" else f"{variant.replace(':', '-tau')}-T1-ls0.1-sem0"
    argv = dry_run_commands(work, variants)[0][name]
    assert argv[0] == "fairseq-train"
    args = options.parse_args_and_arch(options.get_training_parser(), argv[1:])
    task = tasks.setup_task(args)
    model, criterion = task.build_model(args), task.build_criterion(args)
    expected = {"lstm": "none", "sact_lstm": "sact", "fixed_lstm:0.5": "fixed"}
    if variant in expected:
        assert type(model).__name__ == "SactLSTMModel" and args.attention_temperature == expected[variant]
    if variant == "fixed_lstm:0.5":
        assert args.fixed_attention_temperature == 0.5
    if variant.startswith("sact_transformer"):
        assert type(model).__name__ == "SactTransformerModel"
        mode = "tempered" if variant == "sact_transformer_tempered" else None  # None: the default
        assert args.sact_previous_context == mode
    assert type(criterion).__name__ == (
        "ContextualTemperatureCrossEntropy"
        if variant == "ct_transformer"
        else "TemperedCrossEntropyCriterion"
    )


def valid_pairs(work, n):
    """The first n dev pairs of the prepared data, as subword tokens (what the models read)."""
    from fairseq.data import Dictionary, data_utils

    bin_dir = work / "data" / "en-vi.bpe200" / "bin"
    pairs = []
    for lang in ("en", "vi"):
        d = Dictionary.load(str(bin_dir / f"dict.{lang}.txt"))
        dataset = data_utils.load_indexed_dataset(str(bin_dir / f"valid.en-vi.{lang}"), d)
        pairs.append([d.string(dataset[i][:-1]) for i in range(n)])
    return bin_dir, list(zip(*pairs))


def test_tau_per_target_token_of_the_variants(swept, tmp_path):
    """ctemp-ct-analysis dump (--source) on the ct_transformer run: per target token the tau and
    p of one teacher-forced batch equal those of step-by-step incremental decoding; ctemp-sact-heatmaps
    on the sact_transformer run: a tau row per target token."""
    import torch
    from fairseq import checkpoint_utils

    from fairseq_ctemp.cli import ct_analysis, sact_heatmaps

    exp, (bin_dir, pairs) = swept["exp"], valid_pairs(swept["work"], 3)
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    checkpoint = exp / RUNS[1] / "checkpoint_avg.pt"
    run_main(
        ct_analysis.main,
        "dump",
        "--path",
        checkpoint,
        "--data",
        bin_dir,
        "--source",
        tmp_path / "src.txt",
        "--text",
        tmp_path / "tgt.txt",
        "--output",
        tmp_path / "tau.jsonl",
        "--cpu",
    )
    rows = [json.loads(line) for line in (tmp_path / "tau.jsonl").read_text().splitlines()]
    assert len(rows) == sum(len(t.split()) + 1 for _, t in pairs)
    # a --source of no word of the source dictionary (another language, or --text given twice) is refused
    (tmp_path / "foreign.txt").write_text("zzq\n" * len(pairs), encoding="utf-8")
    proc = run_main(
        ct_analysis.main,
        *("dump", "--path", checkpoint, "--data", bin_dir, "--source", tmp_path / "foreign.txt"),
        *("--text", tmp_path / "tgt.txt", "--output", tmp_path / "foreign.jsonl", "--cpu"),
        check=False,
    )
    assert (
        proc.returncode == 2
        and f"--source: none of its {len(pairs)} words is in the dictionary" in proc.stderr
    )
    assert not (tmp_path / "foreign.jsonl").exists()

    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], {"data": str(bin_dir)})
    model = models[0].eval()
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    expected = []
    with torch.no_grad():
        for line, (source, target) in enumerate(pairs, 1):
            src = torch.tensor([[src_dict.index(w) for w in source.split()] + [src_dict.eos()]])
            encoder_out = model.encoder(src, src_lengths=torch.tensor([src.size(1)]))
            targets = [tgt_dict.index(w) for w in target.split()] + [tgt_dict.eos()]
            prev, state = [tgt_dict.eos()], {}
            for pos, t in enumerate(targets, 1):
                features, _ = model.decoder(
                    torch.tensor([prev]), encoder_out=encoder_out, incremental_state=state
                )
                logp = model.decoder.get_normalized_probs((features, None), log_probs=True)[0, -1, t]
                tau = model.decoder.output_head.temperatures(features)[0, -1, t]
                expected.append((line, pos, tgt_dict[t], float(logp), float(tau)))
                prev.append(t)
    got = [(r["line"], r["pos"], r["target"], r["logp_target"], r["tau_target"]) for r in rows]
    assert [g[:3] for g in got] == [e[:3] for e in expected]
    assert [x for g in got for x in g[3:]] == pytest.approx([x for e in expected for x in e[3:]], abs=1e-4)
    assert len({round(g[4], 6) for g in got}) > 1  # tau varies with the context

    out = tmp_path / "sact"
    (tmp_path / "src2.txt").write_text("".join(s + "\n" for s, _ in pairs[:2]), encoding="utf-8")
    (tmp_path / "tgt2.txt").write_text("".join(t + "\n" for _, t in pairs[:2]), encoding="utf-8")
    run_main(
        sact_heatmaps.main,
        bin_dir,
        "--path",
        exp / RUNS[2] / "checkpoint_avg.pt",
        "--input",
        tmp_path / "src2.txt",
        "--references",
        tmp_path / "tgt2.txt",
        "--out-dir",
        out,
        "-s",
        "en",
        "-t",
        "vi",
    )
    dumped = json.loads((out / "sact_attention.json").read_text())
    for sentence, (_, target) in zip(dumped["sentences"], pairs):
        assert sentence["target_tokens"][: len(target.split())] == target.split()
        assert len(sentence["tau"]) == len(sentence["target_tokens"])
    assert sorted(p.name for p in out.glob("*.png")) == ["sentence1.png", "sentence2.png"]
    # references of no word of the target dictionary are refused before anything is written
    (tmp_path / "foreign2.txt").write_text("zzq\nzzq zzq\n", encoding="utf-8")
    refused = tmp_path / "refused"
    proc = run_main(
        sact_heatmaps.main,
        *(bin_dir, "--path", exp / RUNS[2] / "checkpoint_avg.pt", "--input", tmp_path / "src2.txt"),
        *("--references", tmp_path / "foreign2.txt", "--out-dir", refused, "-s", "en", "-t", "vi"),
        check=False,
    )
    assert proc.returncode != 0 and "--references: none of its 3 words is in the dictionary" in proc.stderr
    assert not list(refused.glob("*"))
