"""The decoding-temperature rule on every path: the scores fairseq reports for the tokens it
produces (or scores) are log softmax(D / t) of a teacher-forced forward pass, computed here in
float64 from the raw outputs of models loaded by fairseq's own loader, with t = the training T by
default and t = X when a temperature X is given. Paths: fairseq-generate (beam, nbest, lenpen,
sampling, --score-reference, --print-alignment, --lm-path), fairseq-interactive, fairseq-eval-lm, the hub
(generate, sample, score, consecutive calls), SequenceGenerator / SequenceScorer built directly,
--eval-bleu's generator and ensembles, for a stock model, tempered_ce models and a
temperature-head LM."""

import json
import logging
import math
import os
import subprocess
import sys

import pytest
import torch
from conftest import (
    LM_COMMON,
    PLUGIN_DIR,
    T_A,
    T_B,
    T_LM,
    TINY_LM,
    TINY_TRANSFORMER,
    TRAIN_DEFAULTS,
    RawModel,
    assert_scored_at,
    cli_hypotheses,
    python_script,
    run_cli,
    run_fairseq,
)
from fairseq import checkpoint_utils
from fairseq.sequence_generator import SequenceGenerator
from fairseq.sequence_scorer import SequenceScorer

import fairseq_ctemp  # noqa: F401  (the rule applies in this process too, as for any user script)

pytestmark = pytest.mark.e2e
ATOL_CLI = 2e-3  # scores printed with 4 decimals in base 2


@pytest.fixture(scope="module")
def ckpt(toy_checkpoint):
    """Two tempered_ce translators (T=3, T=1.5), a stock one, a tempered_ce LM (T=2) and a
    contextual-temperature MoS LM (conftest.TOY_RUNS): {name: checkpoint path}."""
    return {name: toy_checkpoint(name) for name in "ABSLH"}


@pytest.fixture(scope="module")
def refs(ckpt, toy_data):
    return {
        name: RawModel(path, toy_data["lm_bin"] if name in "LH" else toy_data["bin"])
        for name, path in ckpt.items()
    }


# ------------------------------------------------------------------------------------ CLI output
def generate_argv(data, checkpoints, *extra, user_dir=True):
    plugin = ["--user-dir", PLUGIN_DIR] if user_dir else []
    return [
        data,
        "--path",
        ":".join(map(str, checkpoints)),
        *plugin,
        "--num-workers",
        "0",
        "--cpu",
        "--batch-size",
        "16",
        "--max-len-a",
        "1.2",
        "--max-len-b",
        "8",
        "--gen-subset",
        "test",
        "--max-sentences",
        "16",
        "--skip-invalid-size-inputs-valid-test",
        *extra,
    ]


def generate(data, checkpoints, *extra):
    """fairseq-generate's output, run in this process (conftest.run_fairseq)."""
    return run_fairseq("fairseq-generate", *generate_argv(data, checkpoints, *extra)).stdout


def check_cli(output, refs_and_t, n_expected, lm=False):
    hyps = cli_hypotheses(output, refs_and_t[0][0].dictionary)
    assert len(hyps) == n_expected, output[-3000:]
    for _, src, tokens, scores in hyps:
        assert_scored_at(scores, refs_and_t, tokens, None if lm else src, atol=ATOL_CLI, base=2)


@pytest.mark.parametrize("temperature", [None, 1.7])  # an explicit 1: test_interactive
def test_generate_beam_nbest_lenpen_alignment(toy_data, ckpt, refs, temperature):
    extra = [] if temperature is None else ["--temperature", temperature]
    out = generate(
        toy_data["bin"],
        [ckpt["A"]],
        "--beam",
        "3",
        "--nbest",
        "2",
        "--lenpen",
        "0.8",
        "--print-alignment",
        *extra,
    )
    t = T_A if temperature is None else temperature
    check_cli(out, [(refs["A"], t)], n_expected=160)
    assert "A-0\t" in out


def test_generate_sampling_with_an_explicit_temperature(toy_data, ckpt, refs):
    out = generate(
        toy_data["bin"],
        [ckpt["A"]],
        "--sampling",
        "--sampling-topk",
        "5",
        "--beam",
        "1",
        "--temperature",
        "0.6",
        "--seed",
        "3",
    )
    check_cli(out, [(refs["A"], 0.6)], n_expected=80)


@pytest.mark.parametrize("temperature", [None, 2.0])
def test_score_reference(toy_data, ckpt, refs, temperature):
    extra = [] if temperature is None else ["--temperature", temperature]
    out = generate(toy_data["bin"], [ckpt["A"]], "--score-reference", *extra)
    check_cli(out, [(refs["A"], T_A if temperature is None else temperature)], n_expected=80)


def test_ensemble_of_checkpoints_with_different_training_temperatures(toy_data, ckpt, refs):
    out = generate(toy_data["bin"], [ckpt["A"], ckpt["B"]], "--beam", "2")
    check_cli(out, [(refs["A"], T_A), (refs["B"], T_B)], n_expected=80)
    explicit = generate(
        toy_data["bin"], [ckpt["A"], ckpt["B"], ckpt["S"]], "--beam", "2", "--temperature", "1.3"
    )
    check_cli(explicit, [(refs["A"], 1.3), (refs["B"], 1.3), (refs["S"], 1.3)], n_expected=80)


@pytest.fixture(scope="module")
def fusion(toy_data, tmp_path_factory):
    """For --lm-path: the translation data with the target dictionary as dict.txt (where
    fairseq-generate loads the LM's), and a tempered_ce LM (T_LM) trained on that dictionary."""
    root = tmp_path_factory.mktemp("fusion")
    data = root / "bin"
    data.mkdir()
    for f in toy_data["bin"].iterdir():
        (data / f.name).symlink_to(f)
    (data / "dict.txt").symlink_to(toy_data["bin"] / "dict.tgt.txt")
    raw = toy_data["raw"]
    run_fairseq(
        "fairseq-preprocess",
        *("--only-source", "--workers", "1", "--srcdict", data / "dict.txt"),
        *("--trainpref", raw / "train.tgt", "--validpref", raw / "valid.tgt", "--destdir", root / "lm-bin"),
    )
    run_fairseq(
        "fairseq-train",
        root / "lm-bin",
        *("--user-dir", PLUGIN_DIR, *LM_COMMON, *TINY_LM, "--save-dir", root / "lm"),
        *("--criterion", "tempered_ce", "--softmax-temperature", str(T_LM)),
    )
    return (
        data,
        root / "lm" / "checkpoint_last.pt",
        RawModel(root / "lm" / "checkpoint_last.pt", root / "lm-bin"),
    )


def fused_scores(translator_lp, lm_logits, weight, tokens):
    """Each token's score under shallow fusion, in base 2 (as fairseq-generate prints it)."""
    fused = translator_lp + weight * torch.log_softmax(lm_logits, dim=-1)
    return fused.gather(1, tokens[:, None])[:, 0] / math.log(2)


@pytest.mark.parametrize("translator, temperature", [("A", None), ("A", 1.7), ("S", 1.7)])
def test_an_lm_fused_by_lm_path_decodes_at_its_own_temperature(ckpt, refs, fusion, translator, temperature):
    """Shallow fusion: each step scores log softmax(D_tm / t) + w log softmax(D_lm / T_LM). An
    explicit temperature is the translator's, as fairseq applies it, for a tempered translator as
    for a stock one; the LM keeps its training T."""
    data, lm, lm_ref = fusion
    weight = 0.5
    extra = [] if temperature is None else ["--temperature", temperature]
    out = generate(data, [ckpt[translator]], "--beam", "2", "--lm-path", lm, "--lm-weight", weight, *extra)
    t = temperature or T_A
    hyps = cli_hypotheses(out, refs[translator].dictionary)
    assert len(hyps) == 80, out[-3000:]
    eos = lm_ref.dictionary.eos()
    for _, src, tokens, scores in hyps:
        prev = torch.cat([torch.tensor([eos]), tokens[:-1]])
        translator_lp = torch.log_softmax(refs[translator].log_probs(prev, src) / t, dim=-1)
        lm_logits = lm_ref.log_probs(prev)
        expected = fused_scores(translator_lp, lm_logits / T_LM, weight, tokens)
        lm_at_t = fused_scores(translator_lp, lm_logits / t, weight, tokens)
        torch.testing.assert_close(torch.tensor(scores, dtype=torch.float64), expected, atol=ATOL_CLI, rtol=0)
        assert (lm_at_t - expected).abs().max() > 20 * ATOL_CLI  # the LM at t would be told apart


STOCK_TEMPERATURES = [None, 1.7]
# fairseq-generate's beam search and sampling divide the logits by --temperature; its
# --score-reference scorer takes none, so stock fairseq scores at 1 whatever --temperature says
STOCK_DECODINGS = {
    "beam": ["--beam", "3", "--nbest", "2"],
    "sampling": ["--sampling", "--sampling-topk", "5", "--beam", "1", "--seed", "3"],
    "score-reference": ["--score-reference"],
}
STOCK_CASES = [(mode, t) for mode in STOCK_DECODINGS for t in STOCK_TEMPERATURES]
# fairseq-generate's cli_main on each argv, in one process
GENERATE_EACH = """
import json, sys
from fairseq_cli.generate import cli_main
for argv in json.loads(sys.argv[1]):
    sys.argv = ["fairseq-generate", *argv]
    cli_main()
"""


def stock_decoding(mode, temperature):
    return STOCK_DECODINGS[mode] + ([] if temperature is None else ["--temperature", str(temperature)])


@pytest.fixture(scope="module")
def without_plugin(toy_data, ckpt, tmp_path_factory):
    """{(mode, temperature): fairseq-generate's output} of the stock checkpoint without --user-dir,
    from a process of its own, where the plugin is never imported."""
    root = tmp_path_factory.mktemp("without-plugin")
    argvs = [
        generate_argv(
            toy_data["bin"],
            [ckpt["S"]],
            *stock_decoding(mode, t),
            "--results-path",
            root / f"{mode}-{t}",
            user_dir=False,
        )
        for mode, t in STOCK_CASES
    ]
    proc = subprocess.run(
        [
            *python_script(root, "generate-each", GENERATE_EACH),
            json.dumps([list(map(str, a)) for a in argvs]),
        ],
        env=dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    return {(mode, t): (root / f"{mode}-{t}" / "generate-test.txt").read_text() for mode, t in STOCK_CASES}


@pytest.mark.parametrize("mode, temperature", STOCK_CASES)
def test_stock_checkpoint_decodes_exactly_as_without_the_plugin(
    toy_data, ckpt, refs, without_plugin, mode, temperature
):
    with_plugin = generate(toy_data["bin"], [ckpt["S"]], *stock_decoding(mode, temperature))
    without = without_plugin[mode, temperature]
    assert [line for line in with_plugin.splitlines() if line[:2] in ("H-", "P-")] == [
        line for line in without.splitlines() if line[:2] in ("H-", "P-")
    ]
    scored_at = 1.0 if mode == "score-reference" else temperature or 1.0
    check_cli(with_plugin, [(refs["S"], scored_at)], n_expected=160 if mode == "beam" else 80)


# a user's --user-dir: the plugin and a task whose generator of its own takes a number, no None (as
# fairseq's speech_dlm_task's), registered after the plugin or before it
OWN_GENERATOR_TASK = """
import sys
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

@register_task("own_generator_translation", dataclass=TranslationConfig)
class OwnGeneratorTranslation(TranslationTask):
    def build_generator(self, models, args, **kwargs):
        assert "fairseq_ctemp" in sys.modules
        if not isinstance(args.temperature, float):
            raise TypeError(f"this generator takes a number, not {args.temperature!r}")
        return super().build_generator(models, args, **kwargs)
"""


@pytest.mark.parametrize("plugin_first", [True, False])
def test_a_users_task_with_its_own_generator_decodes_stock_models_as_without_the_plugin(
    toy_data, ckpt, without_plugin, tmp_path, plugin_first
):
    """--temperature defaults to the plugin's None: a task registered by the user's --user-dir,
    which imports the plugin too, is given stock fairseq's 1.0 for stock models, as fairseq's own
    tasks are, whether it is registered after the plugin or before."""
    user_dir = tmp_path / "own_generator_user_dir"
    user_dir.mkdir()
    plugin = "import fairseq_ctemp  # noqa\n"
    code = plugin + OWN_GENERATOR_TASK if plugin_first else OWN_GENERATOR_TASK + plugin
    (user_dir / "__init__.py").write_text(code)
    argv = generate_argv(toy_data["bin"], [ckpt["S"]], *stock_decoding("beam", None), user_dir=False)
    argv += ["--user-dir", user_dir, "--task", "own_generator_translation"]
    proc = subprocess.run(
        [*python_script(tmp_path, "generate-own-task", GENERATE_EACH), json.dumps([list(map(str, argv))])],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    hypotheses = [line for line in proc.stdout.splitlines() if line[:2] in ("H-", "P-")]
    without = without_plugin["beam", None]
    assert hypotheses and hypotheses == [line for line in without.splitlines() if line[:2] in ("H-", "P-")]


# the hub of a checkpoint, in a process of its own: {case: [(tokens, positional scores)]}
HUB_EACH = """
import json, sys, torch
from fairseq.models.transformer import TransformerModel
folder, name, data, user_dir = sys.argv[1:]
hub = TransformerModel.from_pretrained(folder, name, data, **({"user_dir": user_dir} if user_dir else {}))
tokens = hub.encode("s1 s2 s3 s4")
cases = {"beam": {"beam": 3}, "beam at 1.7": {"beam": 3, "temperature": 1.7},
         "sampling at 0.6": {"beam": 1, "sampling": True, "sampling_topk": 5, "temperature": 0.6}}
out = {}
for case, options in cases.items():
    torch.manual_seed(3)
    hypos = hub.generate([tokens], max_len_a=1.2, max_len_b=8, **options)[0]
    out[case] = [(h["tokens"].tolist(), h["positional_scores"].tolist()) for h in hypos]
print(json.dumps(out))
"""


def test_stock_checkpoint_through_the_hub_exactly_as_without_the_plugin(ckpt, toy_data, tmp_path):
    """The hub (from_pretrained, generate) of a stock checkpoint: the same hypotheses and scores
    with user_dir=the plugin as without it, by default, at an explicit temperature and sampling."""
    outputs = []
    for user_dir in (PLUGIN_DIR, ""):
        command = python_script(tmp_path, f"hub-each-{bool(user_dir)}", HUB_EACH)
        folder, name = str(ckpt["S"].parent), ckpt["S"].name
        proc = subprocess.run(
            [*command, folder, name, str(toy_data["bin"]), user_dir],
            env=dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"),
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outputs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    with_plugin, without = outputs
    assert with_plugin == without
    assert with_plugin["beam"] != with_plugin["beam at 1.7"]  # the temperature reached both


def interactive(data, checkpoint, *extra, input, process=False):
    """fairseq-interactive's output on `input`: in this process (conftest.run_fairseq), or with
    process=True the installed console script as a process of its own."""
    argv = [data, "--path", checkpoint, "--user-dir", PLUGIN_DIR, "--cpu", "--max-len-b", "8", *extra]
    if process:
        return run_cli("fairseq-interactive", *argv, input=input).stdout
    return run_fairseq("fairseq-interactive", *argv, input=input).stdout


def test_interactive(toy_data, ckpt, refs):
    source = "\n".join((toy_data["raw"] / "test.src").read_text().splitlines()[:4]) + "\n"
    for extra, t, process in (([], T_A, True), (["--temperature", "1"], 1.0, False)):
        out = interactive(
            toy_data["bin"],
            ckpt["A"],
            *("--source-lang", "src", "--target-lang", "tgt", "--beam", "2", "--max-len-a", "1.2"),
            *extra,
            input=source,
            process=process,
        )
        check_cli(out, [(refs["A"], t)], n_expected=4)


@pytest.mark.parametrize("extra", [[], ["--temperature", "1.7"]])
def test_stock_checkpoint_in_fairseq_interactive_exactly_as_without_the_plugin(toy_data, ckpt, extra):
    source = "\n".join((toy_data["raw"] / "test.src").read_text().splitlines()[:4]) + "\n"
    argv = [toy_data["bin"], "--path", ckpt["S"], "--cpu", "--beam", "2", "--nbest", "2", *extra]
    argv += ["--source-lang", "src", "--target-lang", "tgt", "--max-len-a", "1.2", "--max-len-b", "8"]
    env = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # (stock fairseq 0.12 loads on this torch)
    outputs = [
        run_cli("fairseq-interactive", *argv, *user_dir, input=source, env=env).stdout
        for user_dir in (["--user-dir", PLUGIN_DIR], [])
    ]
    with_plugin, without = (
        [line for line in out.splitlines() if line[:2] in ("H-", "P-")] for out in outputs
    )
    assert len(with_plugin) == 16 and with_plugin == without


def test_interactive_lm_sampling_at_an_explicit_temperature_on_the_head(toy_data, ckpt, refs):
    prompts = (
        "\n".join(
            " ".join(line.split()[:3]) for line in (toy_data["raw"] / "test.tgt").read_text().splitlines()[:4]
        )
        + "\n"
    )
    for name, extra, t in (
        ("H", ["--sampling", "--beam", "1", "--temperature", "0.7", "--seed", "2"], 0.7),
        ("H", ["--beam", "2"], 1.0),
        ("L", ["--beam", "2"], T_LM),
    ):
        out = interactive(
            toy_data["lm_bin"], ckpt[name], "--task", "language_modeling", *extra, input=prompts
        )
        check_cli(out, [(refs[name], t)], n_expected=4, lm=True)


@pytest.mark.parametrize("name, t", [("L", T_LM), ("H", 1.0)])
def test_eval_lm_scores_at_the_training_temperature(toy_data, ckpt, refs, name, t):
    run = run_cli if name == "L" else run_fairseq  # the installed console script once
    out = run(
        "fairseq-eval-lm",
        toy_data["lm_bin"],
        "--path",
        ckpt[name],
        "--user-dir",
        PLUGIN_DIR,
        "--cpu",
        "--gen-subset",
        "test",
        "--tokens-per-sample",
        "32",
        "--max-tokens",
        "1024",
    ).stdout
    loss = float(out.split("Loss (base 2): ")[1].split(",")[0])
    assert abs(loss - refs[name].lm_nll("test", t)[0]) < 1e-3
    if name == "L":
        assert abs(loss - refs[name].lm_nll("test", 1.8)[0]) > 1e-2  # a wrong T would show


# ------------------------------------------------------------------------------ Python API paths
@pytest.fixture(scope="module")
def hub(ckpt, toy_data):
    from fairseq.models.transformer import TransformerModel

    return TransformerModel.from_pretrained(
        str(ckpt["A"].parent), ckpt["A"].name, str(toy_data["bin"]), user_dir=PLUGIN_DIR
    )


def hub_hypos(hub, sentence, **kwargs):
    tokens = hub.encode(sentence)
    return tokens, hub.generate([tokens], max_len_a=1.2, max_len_b=8, **kwargs)[0]


def check_hypos(hypos, refs_and_t, src=None):
    assert hypos
    for hypo in hypos:
        assert_scored_at(hypo["positional_scores"], refs_and_t, hypo["tokens"], src)


def test_hub_generate_default_explicit_untempered_and_no_leak(hub, refs, monkeypatch):
    sentence = "s1 s2 s3 s4"
    src, hypos = hub_hypos(hub, sentence, beam=3)
    check_hypos(hypos, [(refs["A"], T_A)], src)
    check_hypos(hub_hypos(hub, sentence, beam=1)[1], [(refs["A"], T_A)], src)  # greedy
    for t in (1.0, 1.7):  # 1.0: the documented way to decode untempered
        check_hypos(hub_hypos(hub, sentence, beam=3, temperature=t)[1], [(refs["A"], t)], src)
        check_hypos(hub_hypos(hub, sentence, beam=3)[1], [(refs["A"], T_A)], src)  # no leak
    check_hypos(hub_hypos(hub, sentence, beam=1, sampling=True, temperature=0.5)[1], [(refs["A"], 0.5)], src)
    # a host program's own command line is not a decoding option
    monkeypatch.setattr(sys, "argv", ["host-program", "--temperature", "5"])
    check_hypos(hub_hypos(hub, sentence, beam=3)[1], [(refs["A"], T_A)], src)


def lm_hub(ckpt, toy_data, name):
    from fairseq.models.fairseq_model import BaseFairseqModel

    return BaseFairseqModel.from_pretrained(
        str(ckpt[name].parent), ckpt[name].name, str(toy_data["lm_bin"]), user_dir=PLUGIN_DIR
    )


def test_lm_hub_score_default_explicit_and_no_leak(ckpt, toy_data, refs):
    hub = lm_hub(ckpt, toy_data, "L")
    sentence = " ".join((toy_data["raw"] / "test.tgt").read_text().split()[:6])
    for kwargs, t in (({}, T_LM), ({"temperature": 1.0}, 1.0), ({}, T_LM), ({"temperature": 3.5}, 3.5)):
        scored = hub.score(sentence, **kwargs)
        assert_scored_at(scored["positional_scores"], [(refs["L"], t)], scored["tokens"])


def test_hub_from_pretrained_with_an_explicit_temperature(ckpt, toy_data, refs):
    from fairseq.models.transformer import TransformerModel

    hub = TransformerModel.from_pretrained(
        str(ckpt["A"].parent), ckpt["A"].name, str(toy_data["bin"]), user_dir=PLUGIN_DIR, temperature=1.2
    )
    src, hypos = hub_hypos(hub, "s5 s6 s7", beam=2)
    check_hypos(hypos, [(refs["A"], 1.2)], src)


def test_an_explicit_hub_temperature_leaves_the_recorded_t_star(ckpt, toy_data, refs, tmp_path):
    """fairseq's overrides set every option of the name: from_pretrained(temperature=X) used to
    rewrite the t* that ctemp-calibrate records, logged and kept as the model's own. It decodes at
    X; the model keeps t*, at which a generator built without a temperature decodes."""
    from fairseq.models.transformer import TransformerModel

    from fairseq_ctemp import decoding

    state = torch.load(ckpt["A"], weights_only=False)
    state["cfg"]["ctemp_calibration"] = {"temperature": 1.7, "signature": "x"}  # as --write-checkpoint
    torch.save(state, tmp_path / "calibrated.pt")
    hub = TransformerModel.from_pretrained(
        str(tmp_path), "calibrated.pt", str(toy_data["bin"]), user_dir=PLUGIN_DIR, temperature=1.2
    )
    src, hypos = hub_hypos(hub, "s5 s6 s7", beam=2)
    check_hypos(hypos, [(refs["A"], 1.2)], src)
    (model,) = hub.models
    assert model.ctemp_calibrated_temperature == 1.7 and decoding.own_temperature(model) == 1.7
    assert state["cfg"]["criterion"]["softmax_temperature"] == T_A  # (what it was trained at)


def test_a_model_override_of_the_training_temperature_is_said_as_such(ckpt, toy_data, caplog):
    """softmax_temperature in fairseq's overrides (--model-overrides; fairseq-validate passes its
    command line) applies, as fairseq applies it: the model decodes at it. The log says the T it
    was trained at and the override, not that it was trained at the override. A stock
    checkpoint, which has no such option, loads as fairseq loads it."""
    from fairseq_ctemp import decoding

    overrides = {"data": str(toy_data["bin"]), "softmax_temperature": 5.0}
    with caplog.at_level(logging.INFO, logger="fairseq_ctemp.decoding"):
        (model,), _, _ = checkpoint_utils.load_model_ensemble_and_task(
            [str(ckpt["A"])], arg_overrides=overrides
        )
    assert decoding.own_temperature(model) == 5.0
    assert (
        f"trained with tempered_ce at T={T_A:g}, softmax_temperature 5 by the model overrides" in caplog.text
    )
    assert decoding.own_temperature_source(model) == (
        "temperature T=5 (the model overrides' softmax_temperature)"
    )
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(ckpt["S"])], arg_overrides=overrides)
    assert len(models) == 1 and decoding.own_temperature(models[0]) == 1.0


def test_lm_hub_sample_then_score_does_not_leak(ckpt, toy_data, refs):
    hub = lm_hub(ckpt, toy_data, "H")
    prompt = " ".join((toy_data["raw"] / "test.tgt").read_text().split()[:3])
    before = hub.score(prompt)["positional_scores"].clone()
    tokens = hub.encode(prompt)
    hypos = hub.generate([tokens], beam=1, sampling=True, temperature=0.5, max_len_b=6, seed=1)[0]
    check_hypos(hypos, [(refs["H"], 0.5)])
    after = hub.score(prompt)
    assert_scored_at(after["positional_scores"], [(refs["H"], 1.0)], after["tokens"])
    assert torch.equal(before, after["positional_scores"])


@pytest.mark.parametrize("temperature", [None, 2.0])
def test_generator_and_scorer_built_directly(ckpt, toy_data, refs, temperature):
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(ckpt["A"])], arg_overrides={"data": str(toy_data["bin"])}
    )
    kwargs = {} if temperature is None else {"temperature": temperature}
    t = T_A if temperature is None else temperature
    src = task.source_dictionary.encode_line("s1 s2 s3 s4", add_if_not_exist=False).long()
    sample = {"net_input": {"src_tokens": src[None], "src_lengths": torch.tensor([len(src)])}}
    generator = SequenceGenerator(
        [m.eval() for m in models], task.target_dictionary, beam_size=2, max_len_b=8, **kwargs
    )
    check_hypos(generator.generate(models, sample)[0], [(refs["A"], t)], src)
    target = task.target_dictionary.encode_line("s1 s2", add_if_not_exist=False).long()
    sample["target"] = target[None]
    sample["net_input"]["prev_output_tokens"] = torch.cat([target[-1:], target[:-1]])[None]
    scored = SequenceScorer(task.target_dictionary, **kwargs).generate(models, sample)[0][0]
    assert_scored_at(scored["positional_scores"], [(refs["A"], t)], target, src)


def test_eval_bleu_generator_decodes_at_the_training_temperature(ckpt, toy_data, refs):
    """The generator --eval-bleu builds with the model (before the criterion exists)."""
    from fairseq import tasks

    state = checkpoint_utils.load_checkpoint_to_cpu(str(ckpt["A"]))
    for eval_args, t in (
        ('{"beam": 2, "max_len_b": 8}', T_A),
        ('{"beam": 2, "max_len_b": 8, "temperature": 1.4}', 1.4),
    ):
        cfg = state["cfg"]
        cfg.task.data, cfg.task.eval_bleu, cfg.task.eval_bleu_args = str(toy_data["bin"]), True, eval_args
        task = tasks.setup_task(cfg.task)
        model = task.build_model(cfg.model)
        model.load_state_dict(state["model"])
        task.build_criterion(cfg.criterion)
        src = task.source_dictionary.encode_line("s1 s2 s3", add_if_not_exist=False).long()
        sample = {"net_input": {"src_tokens": src[None], "src_lengths": torch.tensor([len(src)])}}
        check_hypos(
            task.inference_step(task.sequence_generator, [model.eval()], sample)[0], [(refs["A"], t)], src
        )


def test_lm_ensemble_mixing_a_head_and_a_logits_model(ckpt, toy_data, refs):
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(ckpt["H"]), str(ckpt["L"])], arg_overrides={"data": str(toy_data["lm_bin"])}
    )
    prompt = task.source_dictionary.encode_line(
        " ".join((toy_data["raw"] / "test.tgt").read_text().split()[:3]),
        add_if_not_exist=False,
        append_eos=False,
    ).long()
    sample = {"net_input": {"src_tokens": prompt[None], "src_lengths": torch.tensor([len(prompt)])}}
    for kwargs, ts in (({}, (1.0, T_LM)), ({"temperature": 0.8}, (0.8, 0.8))):
        generator = SequenceGenerator(
            [m.eval() for m in models], task.target_dictionary, beam_size=2, max_len_b=6, **kwargs
        )
        hypos = generator.generate(
            models, sample, prefix_tokens=prompt[None], bos_token=task.source_dictionary.eos()
        )[0]
        check_hypos(hypos, [(refs["H"], ts[0]), (refs["L"], ts[1])])


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "warm"])
def test_bad_temperatures_are_refused_with_a_clear_error(ckpt, toy_data, bad):
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(ckpt["A"])], arg_overrides={"data": str(toy_data["bin"])}
    )
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        SequenceGenerator(models, task.target_dictionary, temperature=bad)


def test_a_bad_eval_bleu_args_temperature_stops_training_before_any_step(toy_data, tmp_path):
    proc = run_fairseq(
        "fairseq-train",
        toy_data["bin"],
        "--user-dir",
        PLUGIN_DIR,
        *TINY_TRANSFORMER,
        *TRAIN_DEFAULTS,
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        "3",
        "--eval-bleu",
        "--eval-bleu-args",
        '{"beam": 1, "temperature": 0}',
        "--max-epoch",
        "1",
        "--save-dir",
        tmp_path,
        check=False,
    )
    assert proc.returncode != 0
    assert "--temperature must be a finite number > 0" in proc.stdout and "--eval-bleu-args" in proc.stdout
    assert "begin training epoch" not in proc.stdout and not list(tmp_path.glob("*.pt"))


@pytest.mark.parametrize(
    "key, value, what",
    [
        ("softmax_temperature", -1.0, "tempered_ce training temperature is -1"),
        ("softmax_temperature", float("nan"), "tempered_ce training temperature is nan"),
        ("ctemp_calibration", {"temperature": 0.0, "signature": "x"}, "calibrated t* is 0"),
    ],
)
def test_a_checkpoint_with_a_damaged_stored_temperature_is_refused(
    ckpt, toy_data, tmp_path, key, value, what
):
    """A checkpoint decodes at its stored T (or t*): a value that is not a finite number > 0 would
    decode an inverted or undefined distribution. fairseq-generate refuses it in one line."""
    state = torch.load(ckpt["A"], weights_only=False)
    if key == "ctemp_calibration":
        state["cfg"][key] = value
    else:
        state["cfg"]["criterion"][key] = value
    damaged = tmp_path / "damaged.pt"
    torch.save(state, damaged)
    proc = run_fairseq("fairseq-generate", *generate_argv(toy_data["bin"], [damaged]), check=False)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode != 0 and "Traceback" not in proc.stdout, proc.stdout[-2000:]
    assert last.startswith("fairseq-generate: error: --path") and what in last, last
