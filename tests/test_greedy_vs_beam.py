"""ctemp-greedy-vs-beam on a tiny model trained with tempered_ce at T=2 (untrained in all but name:
the tests check the plumbing, not the paper's claim). One run of the command (dev grid, save dir,
JSON) is shared by the checks; the error cases fail before any decoding."""

import contextlib
import io
import json
import os
import runpy
import subprocess
import sys

import pytest
from conftest import TINY_TRANSFORMER
from sacrebleu.metrics import BLEU, CHRF

from fairseq_ctemp.cli import greedy_vs_beam as gvb
from fairseq_ctemp.cli.toy_translation import write_corpus

pytestmark = pytest.mark.e2e
BIN = os.path.dirname(sys.executable)
USER_DIR = gvb.PACKAGE_DIR  # the fairseq_ctemp package directory
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
    run(
        [
            f"{BIN}/fairseq-preprocess",
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
        ]
    )
    (root / "never_loaded.pt").write_bytes(b"")
    return {"root": root, "raw": raw, "data": data, "checkpoint": str(root / "never_loaded.pt")}


@pytest.fixture(scope="module")
def tiny(corpus):
    """A 1-layer transformer trained for 3 epochs with tempered_ce at T=2."""
    ckpt = str(corpus["root"] / "ckpt")
    run(
        [
            f"{BIN}/fairseq-train",
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
        ]
    )
    return {**corpus, "checkpoint": f"{ckpt}/checkpoint_last.pt"}


@pytest.fixture(scope="module")
def grid_run(tiny):
    """The command end to end (in-process: a second fairseq import would cost ~6 s; decoding is the
    real fairseq-generate): a 1 x 2 grid on valid with a raw --dev-ref, then greedy and the grid's
    best on test, scored against the T- lines."""
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
        assert gvb.main(argv) is None  # the console script exits with main()'s return value
    with open(out / "result.json") as f:
        return {"out": out, "stdout": stdout.getvalue(), "result": json.load(f)}


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def tagged(log, tag):
    """Text of the `tag`-N lines of a fairseq-generate log, by N (an independent parse)."""
    found = {}
    for line in log.split("\n"):
        if line.startswith(tag + "-") and line.split("\t")[0][len(tag) + 1 :].isdigit():
            found.setdefault(int(line.split("\t")[0][len(tag) + 1 :]), line.split("\t")[-1])
    return [found[i] for i in sorted(found)]


def test_scores_equal_sacrebleu_on_the_saved_files(grid_run, tiny):
    result, out = grid_run["result"], grid_run["out"]
    refs = lines(out / "ref")
    assert refs == tagged((out / "greedy.log").read_text(encoding="utf-8"), "T")  # OOVs: <<unk>>
    assert result["tokenize"] == "none" and "tok:none" in result["signatures"]["bleu"]
    for name in ("greedy", "beam"):
        hyps = lines(out / f"{name}.hyp")
        assert len(hyps) == result["n_sentences"] == 60  # every sentence, not 56 (fairseq's batch bug)
        assert hyps == tagged((out / f"{name}.log").read_text(encoding="utf-8"), "D")
        system = result["systems"][name]
        assert system["bleu"] == pytest.approx(BLEU(tokenize="none").corpus_score(hyps, [refs]).score)
        assert system["chrf"] == pytest.approx(CHRF().corpus_score(hyps, [refs]).score)
        assert system["decode_seconds"] > 0 and system["n_sentences"] == 60
    assert result["systems"]["greedy"]["beam"] == 1
    speeds = [result["systems"][name]["sentences_per_second"] for name in ("greedy", "beam")]
    assert result["speedup"] == pytest.approx(speeds[0] / speeds[1])
    assert "BLEU signature: nrefs:1" in grid_run["stdout"] and "speed: greedy decodes" in grid_run["stdout"]


def test_decodes_at_the_training_temperature(grid_run):
    for name in ("greedy", "beam"):
        assert "decoding at training temperature T=2" in (grid_run["out"] / f"{name}.log").read_text()
        assert grid_run["result"]["systems"][name]["decoding_temperature"] == 2.0


def test_grid_picks_the_argmax_and_uses_it_on_test(grid_run, tiny):
    result = grid_run["result"]
    grid = result["grid"]
    assert [(row["beam"], row["lenpen"]) for row in grid] == [(2, 0.5), (2, 3.0)]
    assert result["dev_tokenize"] == "13a"  # --dev-ref: raw text, sacrebleu's default tokenizer
    dev_refs = lines(f"{tiny['raw']}/valid.tgt")
    for row, lenpen in zip(grid, ("0.5", "3")):
        hyps = tagged((grid_run["out"] / f"grid.beam2.lenpen{lenpen}.log").read_text(encoding="utf-8"), "D")
        assert row["bleu"] == pytest.approx(BLEU().corpus_score(hyps, [dev_refs]).score)
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
    gvb.main(
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


def error_of(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gvb.main(argv)
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
        (["--", "--beam", "3"], "--beam cannot go to fairseq-generate after --"),
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


def test_script_runs_from_a_checkout(monkeypatch):
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "greedy_vs_beam.py")
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(script, run_name="__main__")
    assert exit_info.value.code == 0


def test_in_process_decoding_equals_the_console_script(tiny):
    """decode(in_process=True), which the ALT sweep uses for its grids, is fairseq-generate itself:
    the same hypotheses, references and training-temperature decoding as the subprocess."""
    args = (tiny["data"], tiny["checkpoint"], "test", 2, 1.0, GENERATE_ARGS)
    console, in_process = gvb.decode(*args), gvb.decode(*args, in_process=True)
    assert in_process["hyps"] == console["hyps"] and in_process["refs"] == console["refs"]
    assert in_process["decoding_temperature"] == console["decoding_temperature"] == 2.0
    assert in_process["n_sentences"] == console["n_sentences"] == 60
    with pytest.raises(gvb.UsageError, match="fairseq-generate failed"):  # a failure is an error, not an exit
        gvb.decode(tiny["data"], tiny["checkpoint"], "no_such_subset", 1, 1.0, GENERATE_ARGS, in_process=True)


def test_refuses_to_score_when_fairseq_drops_sentences(tiny, tmp_path):
    """With --skip-invalid-size-inputs-valid-test fairseq-generate silently skips the sentences
    longer than --max-source-positions: the command refuses to score the others, writes nothing."""
    lengths = [len(line.split()) + 1 for line in lines(f"{tiny['raw']}/test.src")]  # + </s>
    limit = max(lengths) - 1
    dropped = sum(n > limit for n in lengths)
    assert 0 < dropped < 60
    extra = GENERATE_ARGS + ["--skip-invalid-size-inputs-valid-test", "--max-source-positions", str(limit)]
    with pytest.raises(
        gvb.UsageError, match=f"fairseq-generate translated {60 - dropped} of the 60 sentences of test"
    ):
        gvb.run_greedy_vs_beam(
            tiny["data"],
            tiny["checkpoint"],
            beam=2,
            extra_args=extra,
            save_dir=str(tmp_path / "out"),
            verbose=False,
            in_process=True,
        )
    assert not (tmp_path / "out").exists()
