"""ctemp-greedy-vs-beam and the decoding API under it (fairseq_ctemp.translate) on a tiny model
trained with tempered_ce at T=2 (untrained in all but name: the tests check the plumbing, not the
paper's claim). The API's hypotheses, scores and references are those of the real fairseq-generate
(one process runs its console entry point for every configuration); one run of the command (dev
grid, save dir, JSON) is shared by the checks; the error cases fail before any decoding."""

import contextlib
import errno
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, TINY_TRANSFORMER, python_script, run_fairseq
from sacrebleu.metrics import BLEU, CHRF

import fairseq_ctemp
from fairseq_ctemp import greedy_vs_beam as gvb
from fairseq_ctemp import translate
from fairseq_ctemp.cli import greedy_vs_beam as gvb_cli
from fairseq_ctemp.toy_data import write_corpus

pytestmark = pytest.mark.e2e
BIN = os.path.dirname(sys.executable)
USER_DIR = fairseq_ctemp.USER_DIR  # the package directory: the --user-dir
# Untrained models decode up to max length: keep that short so the suite stays fast.
GENERATE_ARGS = [
    "--cpu",
    "--batch-size",
    "64",
    "--num-workers",
    "0",
    "--max-len-a",
    "1.2",
    "--max-len-b",
    "10",
]
SIZES = (("train", 600), ("valid", 60), ("test", 60))


def run(command):
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(command)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """fairseq subprocesses on one thread: on 2 shared cores, 2 threads per tiny model decode up to
    10x slower (contention)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        yield


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, one_thread):
    """The toy corpus, raw and binarized, and a stand-in checkpoint for the cases that fail early."""
    root = tmp_path_factory.mktemp("greedy_vs_beam")
    raw, data = str(root / "raw"), str(root / "bin")
    write_corpus(raw, SIZES)
    run_fairseq(
        "fairseq-preprocess",
        "--source-lang",
        "src",
        "--target-lang",
        "tgt",
        "--joined-dictionary",
        "--workers",
        "1",
        "--trainpref",
        f"{raw}/train",
        "--validpref",
        f"{raw}/valid",
        "--testpref",
        f"{raw}/test",
        "--destdir",
        data,
    )
    (root / "never_loaded.pt").write_bytes(b"")
    return {"root": root, "raw": raw, "data": data, "checkpoint": str(root / "never_loaded.pt")}


@pytest.fixture(scope="module")
def tiny(corpus):
    """A 1-layer transformer trained for 3 epochs with tempered_ce at T=2 (in this process)."""
    ckpt = str(corpus["root"] / "ckpt")
    run_fairseq(
        "fairseq-train",
        corpus["data"],
        "--user-dir",
        USER_DIR,
        "--criterion",
        "tempered_ce",
        "--softmax-temperature",
        "2",
        "--label-smoothing",
        "0.1",
        "--cpu",
        *TINY_TRANSFORMER,
        "--optimizer",
        "adam",
        "--lr",
        "3e-3",
        "--max-tokens",
        "2000",
        "--max-epoch",
        "3",
        "--no-epoch-checkpoints",
        "--num-workers",
        "0",
        "--save-dir",
        ckpt,
        "--no-progress-bar",
    )
    return {**corpus, "checkpoint": f"{ckpt}/checkpoint_last.pt"}


@pytest.fixture(scope="module")
def grid_run(tiny):
    """The command end to end (in-process: a second fairseq import would cost ~6 s): a 1 x 2 grid on
    valid with a raw --dev-ref, then greedy and the grid's best on test, scored against the T- lines."""
    out = tiny["root"] / "out"
    argv = [
        tiny["data"],
        "--checkpoint",
        tiny["checkpoint"],
        "--grid-beams",
        "2",
        "--grid-lenpens",
        "0.5,3",
        "--dev-subset",
        "valid",
        "--dev-ref",
        f"{tiny['raw']}/valid.tgt",
        "--save-dir",
        str(out),
        "--json",
        str(out / "result.json"),
        "--",
        *GENERATE_ARGS,
    ]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert gvb_cli.main(argv) is None  # the console script exits with main()'s return value
    with open(out / "result.json") as f:
        return {"out": out, "stdout": stdout.getvalue(), "result": json.load(f)}


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


# fairseq-generate's console entry point, run once per argv in one process (one start-up)
GENERATE_ALL = """
import json, sys
from fairseq_cli.generate import cli_main
for argv in json.loads(sys.argv[1]):
    sys.argv = ["fairseq-generate", *argv]
    cli_main()
"""
# (beam, lenpen, --temperature): greedy and beam with a length penalty, at the training T and at an
# explicit temperature (which changes beam search's choices and every score)
CONFIGS = [(1, 1.0, None), (3, 0.5, None), (1, 1.0, 0.5), (3, 0.5, 0.5)]


@pytest.fixture(scope="module")
def ensemble(tiny):
    """The tiny checkpoint and a second one: its weights moved by noise, its training T 1.5."""
    import torch

    state = torch.load(tiny["checkpoint"], map_location="cpu", weights_only=False)
    generator = torch.Generator().manual_seed(0)
    for name, weight in state["model"].items():
        if weight.is_floating_point():
            state["model"][name] = weight + 0.05 * torch.randn(weight.shape, generator=generator)
    state["cfg"]["criterion"]["softmax_temperature"] = 1.5
    second = tiny["root"] / "moved.pt"
    torch.save(state, second)
    return [tiny["checkpoint"], str(second)]


@pytest.fixture(scope="module")
def generated(tiny, ensemble):
    """{(beam, lenpen, temperature): fairseq-generate's output} of the test set of the tiny
    checkpoint, and {"ensemble": its output} of beam 3 and the ensemble; --user-dir fairseq_ctemp."""
    root = tiny["root"] / "generate"
    configs = [(*config, tiny["checkpoint"]) for config in CONFIGS] + [(3, 1.0, None, ":".join(ensemble))]
    argvs = []
    for n, (beam, lenpen, temperature, paths) in enumerate(configs):
        argvs.append(
            [tiny["data"], "--user-dir", USER_DIR, "--path", paths, "--gen-subset", "test"]
            + ["--beam", str(beam), "--lenpen", str(lenpen), "--results-path", str(root / str(n))]
            + (["--temperature", str(temperature)] if temperature else [])
            + ["--required-batch-size-multiple", "1", *GENERATE_ARGS]
        )
    run([*python_script(tiny["root"], "generate-all", GENERATE_ALL), json.dumps(argvs)])
    outputs = [(root / str(n) / "generate-test.txt").read_text(encoding="utf-8") for n in range(len(configs))]
    return {**dict(zip(CONFIGS, outputs)), "ensemble": outputs[-1]}


def tagged(log, tag):
    """The `tag`-N lines of fairseq-generate's output by N: (text, ...) or (score, text) of H/D."""
    found = {}
    for line in log.split("\n"):
        head, _, rest = line.partition("\t")
        if head[: len(tag) + 1] == tag + "-" and head[len(tag) + 1 :].isdigit():
            found[int(head[len(tag) + 1 :])] = rest
    return [found[i] for i in sorted(found)]


def test_translation_equals_fairseq_generate(tiny, generated):
    """Hypotheses (D- lines), their scores (H- lines, base 2) and references (T- lines) of the API
    are fairseq-generate's, at the checkpoint's training T and at an explicit temperature; BLEU too."""
    translator = translate.Translator(tiny["data"], [tiny["checkpoint"]])
    options = translate.decoding_options(GENERATE_ARGS).translate_options()
    scores = {}
    for beam, lenpen, temperature in CONFIGS:
        output = generated[beam, lenpen, temperature]
        out = translator.translate("test", beam=beam, lenpen=lenpen, temperature=temperature, **options)
        hyps = [rest.split("\t", 1)[1] for rest in tagged(output, "D")]
        assert len(hyps) == 60 and out.hypotheses == hyps
        assert out.references == tagged(output, "T")
        expected = [float(rest.split("\t")[0]) for rest in tagged(output, "H")]
        assert [s / math.log(2) for s in out.scores] == pytest.approx(expected, abs=1e-5)
        assert out.temperatures == [temperature or 2.0]
        bleu = BLEU(tokenize="none")
        assert (
            bleu.corpus_score(out.hypotheses, [out.references]).score
            == bleu.corpus_score(hyps, [tagged(output, "T")]).score
        )
        tokens = sum(len(rest.split("\t")[1].split()) + 1 for rest in tagged(output, "H"))  # + </s>
        assert out.n_tokens == tokens and out.n_sentences == 60 and out.decode_seconds > 0
        scores[beam, temperature] = out.scores
    # the explicit temperature made a difference the comparison could see
    assert scores[1, None] != pytest.approx(scores[1, 0.5]) and scores[3, None] != pytest.approx(
        scores[3, 0.5]
    )


def test_an_ensemble_translates_as_fairseq_generate_decodes_it(tiny, ensemble, generated):
    """An ensemble of two checkpoints trained at different T: each model decodes at its own T, and
    hypotheses and scores are those of fairseq-generate given the same two paths."""
    translator = translate.Translator(tiny["data"], ensemble)
    assert translator.temperatures() == [2.0, 1.5]
    output = generated["ensemble"]
    options = translate.decoding_options(GENERATE_ARGS).translate_options()
    out = translator.translate("test", beam=3, lenpen=1.0, **options)
    assert out.hypotheses == [rest.split("\t", 1)[1] for rest in tagged(output, "D")]
    expected = [float(rest.split("\t")[0]) for rest in tagged(output, "H")]
    assert [s / math.log(2) for s in out.scores] == pytest.approx(expected, abs=1e-5)
    alone = translate.Translator(tiny["data"], ensemble[:1]).translate("test", beam=3, lenpen=1.0, **options)
    assert out.scores != pytest.approx(alone.scores)  # the second model took part


def test_the_temperature_is_the_models_own(tiny):
    """The temperature reported is read from the model, and is the one the generator applied: a
    model whose own temperature is changed decodes (and reports) as at that explicit temperature."""
    translator = translate.Translator(tiny["data"], [tiny["checkpoint"]])
    options = dict(translate.decoding_options(GENERATE_ARGS).translate_options(), beam=3)
    assert translator.temperatures() == [2.0] and translator.temperatures(0.7) == [0.7]
    at_two = translator.translate("test", **options)
    explicit = translator.translate("test", temperature=0.7, **options)
    translator.models[0].ctemp_training_temperature = 0.7
    own = translator.translate("test", **options)
    assert own.temperatures == explicit.temperatures == [0.7] and at_two.temperatures == [2.0]
    assert own.scores == explicit.scores and own.hypotheses == explicit.hypotheses
    assert own.scores != pytest.approx(at_two.scores)
    del translator.models[0].ctemp_training_temperature  # a stock model: its own temperature is 1
    assert translator.translate("test", **options).temperatures == [1.0]
    # nothing reads the decoding temperature from fairseq's log text any more
    for d, _, files in os.walk(os.path.join(REPO, "fairseq_ctemp")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    assert 're.compile(r"decoding at training temperature' not in f.read(), name


def test_scores_equal_sacrebleu_on_the_saved_files(grid_run, tiny, generated):
    result, out = grid_run["result"], grid_run["out"]
    refs = lines(out / "ref")
    assert refs == tagged(generated[1, 1.0, None], "T")  # fairseq-generate's T- lines, OOVs as <<unk>>
    assert result["tokenize"] == "none" and "tok:none" in result["signatures"]["bleu"]
    for name in ("greedy", "beam"):
        hyps = lines(out / f"{name}.hyp")
        assert len(hyps) == result["n_sentences"] == 60  # every sentence, not 56 (fairseq's batch bug)
        system = result["systems"][name]
        assert system["bleu"] == pytest.approx(BLEU(tokenize="none").corpus_score(hyps, [refs]).score)
        assert system["chrf"] == pytest.approx(CHRF().corpus_score(hyps, [refs]).score)
        assert system["decode_seconds"] > 0 and system["n_sentences"] == 60
    assert lines(out / "greedy.hyp") == [t.split("\t", 1)[1] for t in tagged(generated[1, 1.0, None], "D")]
    assert result["systems"]["greedy"]["beam"] == 1
    speeds = [result["systems"][name]["sentences_per_second"] for name in ("greedy", "beam")]
    assert result["speedup"] == pytest.approx(speeds[0] / speeds[1])
    assert "BLEU signature: nrefs:1" in grid_run["stdout"] and "speed: greedy decodes" in grid_run["stdout"]


def test_decodes_at_the_training_temperature(grid_run):
    for name in ("greedy", "beam"):
        assert grid_run["result"]["systems"][name]["decoding_temperature"] == 2.0
        assert grid_run["result"]["systems"][name]["decoding_temperatures"] == [2.0]
    assert ", T=2\n" in grid_run["stdout"]


def test_grid_picks_the_argmax_and_uses_it_on_test(grid_run, tiny):
    result = grid_run["result"]
    grid = result["grid"]
    assert [(row["beam"], row["lenpen"]) for row in grid] == [(2, 0.5), (2, 3.0)]
    assert result["dev_tokenize"] == "13a"  # --dev-ref: raw text, sacrebleu's default tokenizer
    dev_refs = lines(f"{tiny['raw']}/valid.tgt")
    for row, lenpen in zip(grid, ("0.5", "3")):
        hyps = lines(grid_run["out"] / f"grid.beam2.lenpen{lenpen}.hyp")
        assert len(hyps) == 60 and row["bleu"] == pytest.approx(BLEU().corpus_score(hyps, [dev_refs]).score)
    best = max(grid, key=lambda row: row["bleu"])
    assert result["grid_best"] == {"beam": best["beam"], "lenpen": best["lenpen"]}
    beam_system = result["systems"]["beam"]
    assert (beam_system["beam"], beam_system["lenpen"]) == (best["beam"], best["lenpen"])
    marked = [line for line in grid_run["stdout"].split("\n") if line.endswith(" *")]
    assert len(marked) == 1 and f"{best['bleu']:.2f}" in marked[0]


def test_compare_gives_a_p_value(grid_run, capsys):
    out = grid_run["out"]
    files = {"ref": str(out / "ref"), "baseline": str(out / "beam.hyp"), "system": str(out / "greedy.hyp")}
    for test in ("bs", "ar"):
        result = gvb.compare_systems(**files, test=test, n_samples=200, tokenize="none")
        assert 0.0 <= result["bleu"]["p_value"] <= 1.0 and 0.0 <= result["chrf"]["p_value"] <= 1.0
        assert result["bleu"]["baseline"] == pytest.approx(grid_run["result"]["systems"]["beam"]["bleu"])
        same = gvb.compare_systems(files["ref"], files["system"], files["system"], test, 200, "none")
        # sacrebleu alone says p = 1/(n+1) here ("significant"): no resampled difference is > 0
        assert same["identical"] and same["bleu"]["p_value"] == same["chrf"]["p_value"] == 1.0
    gvb_cli.main(
        [
            "compare",
            "--ref",
            files["ref"],
            "--baseline",
            files["baseline"],
            "--system",
            files["system"],
            "--n-samples",
            "100",
            "--sacrebleu-tokenize",
            "none",
        ]
    )
    assert "p_value" in capsys.readouterr().out


def test_a_compare_json_cut_short_by_a_full_disk_is_removed_again(grid_run, tmp_path, monkeypatch, capsys):
    """--json that cannot be written whole (here: the disk fills after its first bytes) is not left
    cut short: the rerun, which refuses an existing --json, would be refused for it."""
    out, target = grid_run["out"], tmp_path / "p.json"

    def full_disk(obj, f, **options):
        f.write('{"bleu": {"base')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(json, "dump", full_disk)
    argv = ["compare", "--ref", str(out / "ref"), "--baseline", str(out / "beam.hyp")]
    argv += ["--system", str(out / "greedy.hyp"), "--n-samples", "10", "--json", str(target)]
    last = error_of(argv, capsys)
    assert f"--json {target} could not be written ([Errno 28] No space left on device)" in last, last
    assert not target.exists()


def error_of(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gvb_cli.main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().split("\n")[-1]


def test_ref_with_the_wrong_number_of_lines_is_refused(corpus, tmp_path, capsys):
    short = tmp_path / "short.tgt"
    short.write_text("".join(line + "\n" for line in lines(f"{corpus['raw']}/test.tgt")[:-1]))
    message = error_of([corpus["data"], "--checkpoint", corpus["checkpoint"], "--ref", str(short)], capsys)
    assert "--ref" in message and "59 lines" in message and "60 sentences" in message
    message = error_of(
        ["compare", "--ref", f"{corpus['raw']}/test.tgt", "--baseline", str(short), "--system", str(short)],
        capsys,
    )
    assert "--baseline" in message and "59 lines" in message and "60 sentences" in message


def test_existing_outputs_are_not_overwritten(corpus, tmp_path, capsys):
    (tmp_path / "beam.hyp").write_text("keep me\n")
    base = [corpus["data"], "--checkpoint", corpus["checkpoint"]]
    message = error_of(base + ["--save-dir", str(tmp_path)], capsys)
    assert "beam.hyp already exists; refusing to overwrite it" in message
    message = error_of(base + ["--json", str(tmp_path / "beam.hyp")], capsys)
    assert "already exists" in message and (tmp_path / "beam.hyp").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--beam", "0"], "--beam must be an integer >= 1, got 0"),
        (["--lenpen", "0"], "--lenpen must be a finite number > 0, got 0.0"),
        (["--grid-beams", "4,0"], "--grid-beams must be integers >= 1, got 0"),
        (["--grid-lenpens", "1,-1"], "--grid-lenpens must be finite numbers > 0, got -1.0"),
        (["--temperature", "nan"], "--temperature must be finite and > 0, got nan"),
        (["--sacrebleu-tokenize", "moses"], "--sacrebleu-tokenize must be one of none, "),
        (["--", "--beam", "3"], "--beam cannot go after --: this command sets it"),
        (["--dev-ref", "x"], "--dev-ref is only used with --grid-beams"),
        (["--checkpoint", "missing.pt"], "--checkpoint missing.pt: no such file"),
    ],
)
def test_bad_options_name_the_option_and_range(corpus, args, expected, capsys):
    message = error_of([corpus["data"], "--checkpoint", corpus["checkpoint"], *args], capsys)
    assert message.startswith("ctemp-greedy-vs-beam: error: " + expected)


def test_missing_data_dir_is_named(corpus, capsys):
    message = error_of([str(corpus["root"] / "nope"), "--checkpoint", corpus["checkpoint"]], capsys)
    assert "DATA" in message and "no such directory" in message


def test_a_language_models_checkpoint_is_refused_before_any_decoding(toy_data, toy_checkpoint, capsys):
    """One line naming the checkpoint, where fairseq's generator stopped in an assert, whatever DATA
    is (with a translation's, the language-modelling task would first miss DATA/dict.txt), and
    in an ensemble the member that is a language model."""
    lm = toy_checkpoint("L")  # a tempered_ce transformer_lm of conftest.TOY_RUNS
    expected = (
        f"ctemp-greedy-vs-beam: error: --checkpoint {lm} is a language model (task language_modeling): "
        "only a translation model's checkpoint translates"
    )
    for data in (toy_data["lm_bin"], toy_data["bin"]):
        assert error_of([str(data), "--checkpoint", str(lm), "--subset", "valid"], capsys) == expected
    ensemble = f"{toy_checkpoint('S')}:{lm}"  # a stock translator first
    assert error_of([str(toy_data["bin"]), "--checkpoint", ensemble, "--subset", "valid"], capsys) == expected


def test_a_checkpoint_of_another_vocabulary_than_datas_is_refused_in_one_line(tiny, tmp_path, capsys):
    """DATA whose dictionaries are not the checkpoint's (two words more): fairseq fails to load the
    embeddings with a traceback; the command says which checkpoint and which data, in one line."""
    data = tmp_path / "bin"
    shutil.copytree(tiny["data"], data)
    for side in ("src", "tgt"):
        with open(data / f"dict.{side}.txt", "a", encoding="utf-8") as f:
            f.write("unseen1 1\nunseen2 1\n")
    message = error_of([str(data), "--checkpoint", tiny["checkpoint"], "--subset", "valid"], capsys)
    assert message.startswith(
        f"ctemp-greedy-vs-beam: error: could not load --checkpoint {tiny['checkpoint']} with the data {data}: "
        "RuntimeError: Error(s) in loading state_dict for TransformerModel: size mismatch for "
    ), message
    assert "the shape in current model is torch.Size([666, 32])" in message and message.endswith(" more)")
    assert not (tmp_path / "eval").exists()


def test_refuses_sentences_too_long_for_the_model(tiny, tmp_path):
    """A sentence longer than the model's positions cannot be translated (fairseq-generate would
    skip it with --skip-invalid-size-inputs-valid-test): the command refuses to score the others and
    writes nothing."""
    lengths = [len(line.split()) + 1 for line in lines(f"{tiny['raw']}/test.src")]  # + </s>
    limit = max(lengths) - 1
    too_long = sum(n > limit for n in lengths)
    assert 0 < too_long < 60
    translator = gvb.load_translator(tiny["data"], tiny["checkpoint"], GENERATE_ARGS)
    translator.models[0].encoder.max_source_positions = limit
    with pytest.raises(gvb.UsageError, match=f"{too_long} of the 60 sentences of test are longer than"):
        request = gvb.Request(
            tiny["data"], tiny["checkpoint"], beam=2, extra_args=GENERATE_ARGS, save_dir=str(tmp_path / "out")
        )
        gvb.run_greedy_vs_beam(request, translator=translator, verbose=False)
    assert not (tmp_path / "out").exists()


def test_refuses_a_max_tokens_below_the_longest_sentence(tiny, tmp_path):
    """fairseq batches a pair by its longer side (+ </s>); a --max-tokens below the longest is
    refused in one line (fairseq: an AssertionError's traceback); at the longest it decodes."""
    sides = [lines(f"{tiny['raw']}/test.{side}") for side in ("src", "tgt")]
    longest = max(max(len(s.split()), len(t.split())) + 1 for s, t in zip(*sides))
    for max_tokens, refused in ((longest - 1, True), (longest, False)):
        request = gvb.Request(
            tiny["data"], tiny["checkpoint"], beam=2, save_dir=str(tmp_path / f"out{max_tokens}"),
            extra_args=[*GENERATE_ARGS, "--max-tokens", str(max_tokens)],
        )  # fmt: skip
        if not refused:
            assert gvb.run_greedy_vs_beam(request, verbose=False)
            continue
        expected = f"--max-tokens {max_tokens} is below the longest sentence of test ({longest} tokens"
        with pytest.raises(gvb.UsageError, match=re.escape(expected)):
            gvb.run_greedy_vs_beam(request, verbose=False)
        assert not (tmp_path / f"out{max_tokens}").exists()


def test_refuses_output_lengths_the_shortest_sentence_cannot_have(tiny, tmp_path):
    """fairseq bounds an output by --max-len-a * source length (+ </s>) + --max-len-b and asserts
    that bound >= --min-len (a traceback, where the sentence's batch is no longer than it); a bound
    below --min-len for the shortest test sentence, counted by hand, is refused in one line before
    any decoding; at --min-len equal to the bound it decodes."""
    shortest = min(len(line.split()) + 1 for line in lines(f"{tiny['raw']}/test.src"))  # + </s>
    bound = shortest // 2  # int(0.5 * shortest + 0)
    for min_len, refused in ((bound + 1, True), (bound, False)):
        options = ["--max-len-a", "0.5", "--max-len-b", "0", "--min-len", str(min_len)]
        request = gvb.Request(
            tiny["data"], tiny["checkpoint"], beam=2, save_dir=str(tmp_path / f"out{min_len}"),
            extra_args=[*GENERATE_ARGS, *options, "--batch-size", "1"],
        )  # fmt: skip
        if not refused:
            assert gvb.run_greedy_vs_beam(request, verbose=False)
            continue
        expected = (
            f"cannot decode test: --max-len-a 0.5 --max-len-b 0 allow at most {bound} target tokens for "
            f"the shortest source sentence of test of {tiny['data']} ({shortest} tokens with its </s>), "
            f"fewer than the shortest output fairseq allows (--min-len {min_len})"
        )
        with pytest.raises(gvb.UsageError, match=re.escape(expected)):
            gvb.run_greedy_vs_beam(request, verbose=False)
        assert not (tmp_path / f"out{min_len}").exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--sampling"], "--sampling is not a decoding option this tool passes on to fairseq's API"),
        (
            ["--skip-invalid-size-inputs-valid-test"],
            "--skip-invalid-size-inputs-valid-test is not a decoding",
        ),
        (["--remove-bpe", "bytes"], "--remove-bpe bytes: not one of fairseq's post-processing options"),
        (["--max-len-a", "x"], "argument --max-len-a: invalid float value: 'x'"),
        (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    ],
)
def test_decoding_options_outside_the_api_are_refused(corpus, args, expected, capsys):
    message = error_of([corpus["data"], "--checkpoint", corpus["checkpoint"], "--", *args], capsys)
    assert message.startswith("ctemp-greedy-vs-beam: error: after --: " + expected)


def test_decoding_options_map_onto_the_api():
    options = translate.decoding_options(
        [
            "-s",
            "en",
            "--target-lang=vi",
            "--cpu",
            "--remove-bpe",
            "--max-len-a",
            "1.5",
            "--max-sentences",
            "8",
        ]
    )
    assert options == translate.DecodingOptions(
        source_lang="en", target_lang="vi", cpu=True, post_process="subword_nmt", max_len_a=1.5, batch_size=8
    )
    assert translate.decoding_options(["--remove-bpe", "sentencepiece"]).post_process == "sentencepiece"
    assert translate.decoding_options([]) == translate.DecodingOptions()


def test_outputs_that_cannot_all_be_written_are_removed_again(tmp_path):
    """A file that cannot be written (here: its directory is a file) leaves none of the others
    behind, so that the rerun is not refused for them, and the error names it."""
    from fairseq_ctemp.greedy_vs_beam.run import write_outputs

    (tmp_path / "blocker").write_text("a file where a directory should be\n")
    files = {
        "greedy.hyp": str(tmp_path / "out" / "greedy.hyp"),
        "beam.hyp": str(tmp_path / "blocker" / "beam.hyp"),
    }
    with pytest.raises(gvb.UsageError, match=r"beam.hyp could not be written .*greedy.hyp removed again"):
        write_outputs(files, None, {"greedy.hyp": ["a"], "beam.hyp": ["b"]})
    assert os.listdir(tmp_path / "out") == []
