"""ctemp-ct-analysis (fairseq_ctemp/cli/ct_analysis.py) on tiny models trained on the toy LM corpus (a CT-MoS LSTM for 3 epochs,
its no-temperature baseline and a CT transformer with adaptive softmax for 1 epoch each).

Each subcommand runs once: dump through the real command line (a subprocess), the others through
``main`` in this process (conftest.run_main: the console script's code path without a second
import); the numbers it writes are checked against tau / log-probabilities computed here
independently from the checkpoints, and against fairseq's own language-modeling samples (what
fairseq-eval-lm --sample-break-mode eos scores). The error cases run in-process through ``main``."""

import csv
import json
import math
import os
import subprocess

import numpy as np
import pytest
import torch
from conftest import PLUGIN_DIR, command, run_fairseq, run_main
from fairseq import checkpoint_utils

import fairseq_ctemp  # noqa: F401  (registers the models)
from fairseq_ctemp.cli import ct_analysis
from fairseq_ctemp.ct_analysis import dump

pytestmark = pytest.mark.e2e
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRAIN = [
    "--task",
    "language_modeling",
    "--criterion",
    "ct_cross_entropy",
    "--cpu",
    "--optimizer",
    "adam",
    "--lr",
    "3e-3",
    "--max-tokens",
    "2000",
    "--tokens-per-sample",
    "64",
    "--seed",
    "1",
    "--num-workers",
    "0",
    "--log-format",
    "simple",
]


def analysis(*args, check=True, process=False):
    """ctemp-ct-analysis in this process, or (process=True) the real command line on one thread
    (2 shared cores)."""
    if process:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.run(
            [*command("ctemp-ct-analysis"), *map(str, args)],
            env=env,
            text=True,
            capture_output=True,
        )
    else:
        proc = run_main(ct_analysis.main, *args, check=False)
    if check and proc.returncode != 0:
        pytest.fail(f"ctemp-ct-analysis {args[0]} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def error_of(capsys, *args):
    """Run main in-process, expecting the clean error exit; returns the message."""
    with pytest.raises(SystemExit) as exit_info:
        ct_analysis.main([str(a) for a in args])
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.fixture(scope="module")
def trained(toy_data, tmp_path_factory):
    """ct: CT-MoS LSTM, 3 epochs (checkpoint1-3.pt); baseline: the same without temperature;
    transformer: CT with adaptive softmax; 1 epoch each."""
    root = tmp_path_factory.mktemp("ct_analysis")
    runs = [
        [
            str(toy_data["lm_bin"]),
            "--user-dir",
            PLUGIN_DIR,
            "--arch",
            arch,
            *TRAIN,
            "--max-epoch",
            str(epochs),
            "--save-dir",
            str(root / name),
        ]
        for name, arch, epochs in (
            ("ct", "ct_mos_lstm_lm_tiny", 3),
            ("baseline", "lstm_lm_tiny", 1),
            ("transformer", "ct_transformer_lm_tiny", 1),
        )
    ]
    for argv in runs:  # in this process (conftest.run_fairseq)
        run_fairseq("fairseq-train", *argv, env={"OMP_NUM_THREADS": "1"})
    return {
        "root": root,
        "data": str(toy_data["lm_bin"]),
        "text": str(toy_data["raw"] / "test.tgt"),
        "ct": [str(root / "ct" / f"checkpoint{e}.pt") for e in (1, 2, 3)],
        "baseline": str(root / "baseline" / "checkpoint1.pt"),
        "transformer": str(root / "transformer" / "checkpoint1.pt"),
    }


_models = {}


def model_of(path, data, **overrides):
    key = (path, tuple(sorted(overrides.items())))
    if key not in _models:
        models, _, task = checkpoint_utils.load_model_ensemble_and_task(
            [path], arg_overrides={"data": data, **overrides}
        )
        _models[key] = (models[0].eval(), task)
    return _models[key]


def reference(path, data, words):
    """Independently: tau (T, V) and log-probs (T, V) for one line, its input [</s> w] and targets."""
    model, task = model_of(path, data)
    d = task.target_dictionary
    ids = [d.index(w) for w in words]
    tokens = torch.tensor([[d.eos()] + ids])
    with torch.no_grad():
        features, extra = model.decoder(tokens)
        tau = model.decoder.output_head.temperatures(features)
        lprobs = model.get_normalized_probs((features, extra), log_probs=True)
    return {
        "tau": None if tau is None else tau[0].numpy(),
        "lprobs": lprobs[0].numpy(),
        "targets": ids + [d.eos()],
        "dictionary": d,
    }


def text_lines(trained):
    with open(trained["text"], encoding="utf-8") as f:
        return [line.split() for line in f.read().splitlines()]


def read_table(path, delimiter=","):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter=delimiter))


def assert_png(path):
    with open(path, "rb") as f:
        assert f.read(8) == PNG_MAGIC
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


@pytest.fixture(scope="module")
def dumped(trained):
    out = trained["root"] / "out"
    analysis(
        "dump",
        "--path",
        trained["ct"][-1],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--output",
        out / "dump.tsv",
        "--full",
        out / "tau.npy",
        "--cpu",
        process=True,
    )
    return {"rows": read_table(out / "dump.tsv", "\t"), "full": np.load(out / "tau.npy"), "dir": out}


def test_dump_matches_the_model_position_by_position(trained, dumped):
    rows, lines = dumped["rows"], text_lines(trained)
    assert len(rows) == sum(len(w) + 1 for w in lines) == len(dumped["full"])
    V = dumped["full"].shape[1]
    index = 0
    for number, words in enumerate(lines, start=1):
        ref = reference(trained["ct"][-1], trained["data"], words)
        d = ref["dictionary"]
        assert V == len(d)
        for i, target in enumerate(ref["targets"]):
            row = rows[index]
            assert (int(row["line"]), int(row["pos"])) == (number, i + 1)
            assert row["input"] == (d.eos_word if i == 0 else words[i - 1])
            assert row["target"] == d[target]
            tau = ref["tau"][i]
            assert float(row["tau_target"]) == pytest.approx(tau[target], abs=1e-6)
            assert float(row["tau_mean"]) == pytest.approx(tau.mean(), abs=1e-6)
            assert float(row["tau_min"]) == pytest.approx(tau.min(), abs=1e-6)
            assert float(row["tau_max"]) == pytest.approx(tau.max(), abs=1e-6)
            assert tau[d.index(row["tau_argmax"])] == pytest.approx(tau.max(), abs=1e-6)
            assert float(row["logp_target"]) == pytest.approx(ref["lprobs"][i, target], abs=1e-5)
            assert float(row["p_target"]) == pytest.approx(math.exp(ref["lprobs"][i, target]), rel=1e-5)
            np.testing.assert_allclose(dumped["full"][index], tau, atol=1e-6)
            index += 1


def test_dump_mean_tau_is_the_softmax_normalisation_constant(dumped):
    V = dumped["full"].shape[1]
    expected = (1.0 + 1.0 / V) / 0.5  # (alpha + 1/V) / beta, the defaults alpha = 1, beta = 0.5
    means = np.array([float(r["tau_mean"]) for r in dumped["rows"]])
    np.testing.assert_allclose(means, expected, atol=1e-5)
    assert all(2.0 <= float(r["tau_min"]) <= float(r["tau_max"]) <= 4.0 for r in dumped["rows"])


def test_dump_probabilities_are_those_of_fairseqs_own_lm_samples(trained, dumped):
    """fairseq's language_modeling dataset with --sample-break-mode eos (what fairseq-eval-lm
    scores line by line): its source/target are the dump's input/target columns, and the model's
    log-probability of each target is the dump's logp_target."""
    model, task = model_of(trained["ct"][-1], trained["data"], sample_break_mode="eos")
    task.load_dataset("test")
    dataset = task.dataset("test")
    d = task.target_dictionary
    rows = iter(dumped["rows"])
    for i in range(len(dataset)):
        item = dataset[i]
        with torch.no_grad():
            net_output = model(item["source"].unsqueeze(0))
            lprobs = model.get_normalized_probs(net_output, log_probs=True)[0]
        for t, (source, target) in enumerate(zip(item["source"].tolist(), item["target"].tolist())):
            row = next(rows)
            assert (row["input"], row["target"]) == (d[source], d[target])
            assert float(row["logp_target"]) == pytest.approx(lprobs[t, target].item(), abs=1e-5)
    assert next(rows, None) is None


def test_dump_json_lines_adaptive_softmax_and_batching(trained, tmp_path):
    """The transformer (adaptive softmax, CT over words + cluster entries): JSON lines, tau and
    p as computed independently, mean tau still (alpha + 1/V)/beta, and batching (padding) changes
    nothing."""
    one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"
    common = [
        "dump",
        "--path",
        trained["transformer"],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--cpu",
    ]
    ct_analysis.main(common + ["--output", str(one), "--batch-size", "1"])
    ct_analysis.main(common + ["--output", str(many), "--batch-size", "32"])
    rows = [json.loads(line) for line in one.read_text().splitlines()]
    batched = [json.loads(line) for line in many.read_text().splitlines()]
    assert len(rows) == len(batched)
    for a, b in zip(rows, batched):
        assert (a["line"], a["pos"], a["target"]) == (b["line"], b["pos"], b["target"])
        for key in ("tau_target", "tau_mean", "tau_max", "logp_target"):
            assert a[key] == pytest.approx(b[key], abs=1e-5)
    words = text_lines(trained)[4]
    ref = reference(trained["transformer"], trained["data"], words)
    V = len(ref["dictionary"])
    line5 = [r for r in rows if r["line"] == 5]
    assert len(line5) == len(words) + 1
    for i, row in enumerate(line5):
        target = ref["targets"][i]
        assert row["tau_target"] == pytest.approx(float(ref["tau"][i, target]), abs=1e-5)
        assert row["logp_target"] == pytest.approx(float(ref["lprobs"][i, target]), abs=1e-5)
    np.testing.assert_allclose([r["tau_mean"] for r in rows], (1 + 1 / V) / 0.5, atol=1e-5)


def relative_bins(length, bins):
    return [min(int(p / max(length - 1, 1) * bins), bins - 1) for p in range(length)]


def test_positions_curves_and_confidence_intervals(trained, dumped):
    out = dumped["dir"] / "positions.png"
    analysis(
        "positions",
        "--path",
        trained["ct"][0],
        trained["ct"][-1],
        "--labels",
        "ep1",
        "ep3",
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--output",
        out,
        "--stats",
        "mean",
        "target",
        "--bins",
        4,
        "--cpu",
    )
    assert_png(out)
    rows = read_table(dumped["dir"] / "positions.csv")
    assert len(rows) == 2 * 2 * 4
    V = dumped["full"].shape[1]
    for row in rows:
        if row["stat"] == "mean":
            assert float(row["mean"]) == pytest.approx((1 + 1 / V) / 0.5, abs=1e-5)
        assert float(row["ci_low"]) <= float(row["mean"]) <= float(row["ci_high"])
        assert int(row["n_sentences"]) == 80
    # ep3's target curve from the dump of the same checkpoint: per-sentence bin means, then the
    # mean and Student-t 95% CI across sentences
    from scipy import stats

    per_bin = [[] for _ in range(4)]
    by_line = {}
    for r in dumped["rows"]:
        by_line.setdefault(int(r["line"]), []).append(float(r["tau_target"]))
    for values in by_line.values():
        which = np.array(relative_bins(len(values), 4))
        for b in range(4):
            per_bin[b].append(np.mean(np.array(values)[which == b]))
    target_rows = [r for r in rows if (r["label"], r["stat"]) == ("ep3", "target")]
    for b, row in enumerate(target_rows):
        values = np.array(per_bin[b])
        half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
        assert float(row["mean"]) == pytest.approx(values.mean(), abs=1e-6)
        assert float(row["ci_high"]) - float(row["ci_low"]) == pytest.approx(2 * half, rel=1e-3)


def test_positions_segments_and_bootstrap(trained, tmp_path, capsys):
    """The papers' normalised sentence (first / middle / last S positions) with bootstrap CIs; the
    sentences used, of those of --text, are said."""
    out = tmp_path / "segments.png"
    ct_analysis.main(
        [
            "positions",
            "--path",
            trained["ct"][-1],
            "--data",
            trained["data"],
            "--text",
            trained["text"],
            "--output",
            str(out),
            "--segment",
            "3",
            "--ci",
            "bootstrap",
            "--stats",
            "target",
            "--min-len",
            "8",
            "--cpu",
        ]
    )
    assert_png(out)
    rows = read_table(tmp_path / "segments.csv")
    assert [int(r["bin"]) for r in rows] == list(range(9))
    eligible = sum(1 for words in text_lines(trained) if len(words) >= 8)
    assert all(int(r["n_sentences"]) == eligible for r in rows)
    assert 0 < eligible < len(text_lines(trained))
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith(
            f"{eligible} of the {len(text_lines(trained))} sentences of {trained['text']} (the others left out "
            "by --min-len / --max-len, --segment or --skip-long), 1 curves -> "
        )
    )
    assert all(float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"]) for r in rows)


def test_trajectories_over_epoch_checkpoints(trained, dumped):
    out = dumped["dir"] / "trajectories.png"
    tokens = ["t0a", "t1", "</s>"]
    analysis(
        "trajectories",
        "--path",
        *reversed(trained["ct"]),
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--tokens",
        *tokens,
        "--output",
        out,
        "--cpu",
    )
    assert_png(out)
    rows = read_table(dumped["dir"] / "trajectories.csv")
    assert len(rows) == 3 * len(tokens)
    assert sorted({(int(r["epoch"]), int(r["num_updates"])) for r in rows})[0][0] == 1
    assert sorted({int(r["epoch"]) for r in rows}) == [1, 2, 3]
    updates = {int(r["epoch"]): int(r["num_updates"]) for r in rows}
    assert updates[1] < updates[2] < updates[3]
    for token in tokens:  # epoch 3: the mean of the dump's tau_target over the token's occurrences
        occurrences = [float(r["tau_target"]) for r in dumped["rows"] if r["target"] == token]
        row = next(r for r in rows if r["epoch"] == "3" and r["token"] == token)
        assert int(row["occurrences"]) == len(occurrences)
        assert float(row["tau"]) == pytest.approx(np.mean(occurrences), abs=1e-6)


def test_heatmap_of_one_sentence(trained, dumped):
    out = dumped["dir"] / "heatmap.png"
    analysis(
        "heatmap",
        "--path",
        trained["ct"][-1],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--line",
        3,
        "--vocab-k",
        12,
        "--output",
        out,
        "--cpu",
    )
    assert_png(out)
    words = text_lines(trained)[2]
    ref = reference(trained["ct"][-1], trained["data"], words)
    d = ref["dictionary"]
    with open(dumped["dir"] / "heatmap.csv", newline="") as f:
        header, *rows = list(csv.reader(f))
    assert header[1:] == [f"{i + 1}:{w}" for i, w in enumerate([d.eos_word] + words)]
    assert [r[0] for r in rows] == [d[i] for i in range(d.nspecial, d.nspecial + 12)]
    for row in rows:
        np.testing.assert_allclose([float(v) for v in row[1:]], ref["tau"][:, d.index(row[0])], atol=1e-6)


def test_case_study_against_the_baseline(trained, dumped):
    out = dumped["dir"] / "case.md"
    proc = analysis(
        "case-study",
        "--path",
        trained["ct"][-1],
        "--baseline-path",
        trained["baseline"],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--line",
        2,
        5,
        "--positions",
        1,
        3,
        "-k",
        3,
        "--labels",
        "CT-MoS",
        "MoS",
        "--output",
        out,
        "--cpu",
    )
    table = out.read_text()
    assert table.strip() == proc.stdout.strip()
    assert table.count("### line ") == 2 and "CT-MoS top-3 (p, τ)" in table and "MoS top-3 (p)" in table
    rows = [line for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [int(r.split("|")[1]) for r in rows] == [1, 3, 1, 3]
    words = text_lines(trained)[1]
    ct, base = (reference(p, trained["data"], words) for p in (trained["ct"][-1], trained["baseline"]))
    cells = [c.strip() for c in rows[1].split("|")[1:-1]]  # line 2, position 3
    d = ct["dictionary"]
    top = np.argsort(-ct["lprobs"][2])[:3]
    expected = [f"{d[t]} {math.exp(ct['lprobs'][2, t]):.3f} (τ={ct['tau'][2, t]:.4g})" for t in top]
    assert cells[3].replace("**", "") == "; ".join(expected)
    top_base = np.argsort(-base["lprobs"][2])[:3]
    assert cells[4].replace("**", "") == "; ".join(
        f"{d[t]} {math.exp(base['lprobs'][2, t]):.3f}" for t in top_base
    )
    assert cells[2] == words[2]
    assert float(cells[5]) == pytest.approx(math.exp(ct["lprobs"][2, ct["targets"][2]]), abs=1e-3)


def test_errors(trained, tmp_path, capsys):
    data, text, ct = trained["data"], trained["text"], trained["ct"][-1]
    common = ["--data", data, "--text", text, "--cpu"]
    message = error_of(capsys, "dump", "--path", trained["baseline"], *common, "--output", tmp_path / "x.tsv")
    assert "this model has no temperature (--ct-normalization none" in message
    assert not (tmp_path / "x.tsv").exists()
    message = error_of(
        capsys, "case-study", "--path", trained["baseline"], "--baseline-path", ct, *common, "--line", 1
    )
    assert "no temperature" in message
    message = error_of(
        capsys,
        "heatmap",
        "--path",
        ct,
        *common,
        "--line",
        1,
        "--tokens",
        "t1",
        "nosuchword",
        "zz",
        "--output",
        tmp_path / "h.png",
    )
    assert "not in the dictionary: nosuchword, zz" in message
    message = error_of(capsys, "heatmap", "--path", ct, *common, "--line", 81, "--output", tmp_path / "h.png")
    assert "--line 81 is out of range" in message and "80 lines" in message
    message = error_of(
        capsys, "case-study", "--path", ct, "--baseline-path", trained["baseline"], *common, "--line", 0
    )
    assert "--line 0 is out of range" in message
    message = error_of(
        capsys,
        "case-study",
        "--path",
        ct,
        "--baseline-path",
        trained["baseline"],
        *common,
        "--line",
        1,
        "--positions",
        99,
    )
    assert "--positions 99 is out of range" in message
    d = model_of(ct, data)[1].target_dictionary
    in_text = {w for words in text_lines(trained) for w in words}
    absent = next(d[i] for i in range(d.nspecial, len(d)) if d[i] not in in_text)
    message = error_of(
        capsys,
        "trajectories",
        "--path",
        ct,
        *common,
        "--tokens",
        "t1",
        absent,
        "--output",
        tmp_path / "t.png",
    )
    assert f"never a target in {text}: {absent}" in message and "--over all" in message
    long_text = tmp_path / "long.txt"  # the transformer takes 64 positions (--tokens-per-sample)
    long_text.write_text(" ".join(["t1"] * 70) + "\n\nt1 t2\n")
    message = error_of(
        capsys,
        "heatmap",
        "--path",
        ct,
        "--data",
        data,
        "--text",
        long_text,
        "--line",
        2,
        "--output",
        tmp_path / "h.png",
    )
    assert f"--line 2 of {long_text} is blank" in message
    message = error_of(
        capsys,
        "dump",
        "--path",
        trained["transformer"],
        "--data",
        data,
        "--text",
        long_text,
        "--output",
        tmp_path / "long.tsv",
    )
    assert "line 1 has 71 positions; the model takes at most 64" in message
    ct_analysis.main(
        [
            "dump",
            "--path",
            trained["transformer"],
            "--data",
            data,
            "--text",
            str(long_text),
            "--output",
            str(tmp_path / "long.tsv"),
            "--skip-long",
        ]
    )
    assert [r["line"] for r in read_table(tmp_path / "long.tsv", "\t")] == ["3", "3", "3"]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    message = error_of(
        capsys, "dump", "--path", ct, "--data", data, "--text", empty, "--output", tmp_path / "e.tsv"
    )
    assert "is empty" in message


def test_words_outside_the_dictionary_are_counted_and_a_text_of_none_else_refused(trained, tmp_path, capsys):
    with open(os.path.join(trained["data"], "dict.txt"), encoding="utf-8") as f:
        known = [line.split()[0] for line in f][:5]
    texts = {  # a literal <unk> is a word of the dictionary (PTB's text has them)
        "known": " ".join(known),
        "mixed": " ".join(known) + " <unk> not-a-word neither",
        "foreign": "not-a-word neither\nnor",
    }
    for name, text in texts.items():
        (tmp_path / f"{name}.txt").write_text(text + "\n")
    common = ["--path", trained["ct"][-1], "--data", trained["data"], "--cpu"]
    proc = analysis("dump", *common, "--text", tmp_path / "known.txt", "--output", tmp_path / "k.tsv")
    assert "not in the dictionary" not in proc.stderr
    proc = analysis("dump", *common, "--text", tmp_path / "mixed.txt", "--output", tmp_path / "m.tsv")
    note = f"--text: 2 of 8 words (25.0%) are not in the dictionary of {trained['ct'][-1]}: scored as <unk>"
    assert proc.stderr.count(note) == 1  # once (it was noted again as the scoring began)
    for subcommand, output, words in (("dump", "f.tsv", 3), ("heatmap", "f.png", 2)):
        line = ["--line", "1"] if subcommand == "heatmap" else []  # (its first line: 2 words)
        foreign = ["--text", tmp_path / "foreign.txt", "--output", tmp_path / output]
        message = error_of(capsys, subcommand, *common, *line, *foreign)
        assert f"--text: none of its {words} words is in the dictionary of {trained['ct'][-1]}" in message
        assert not (tmp_path / output).exists()
    # a language model given source sentences, as a translation model would be
    message = error_of(
        capsys, "dump", *common, "--text", tmp_path / "known.txt", "--source", tmp_path / "known.txt",
        "--output", tmp_path / "s.tsv",
    )  # fmt: skip
    assert (
        message
        == f"ctemp-ct-analysis dump: error: --source is for translation models; {trained['ct'][-1]} is a language model\n"
    )
    assert not (tmp_path / "s.tsv").exists()


def test_refuses_to_overwrite_unless_forced(trained, tmp_path, capsys):
    out = tmp_path / "pos.png"
    out.write_bytes(b"keep me")
    proc = analysis(
        "positions",
        "--path",
        trained["ct"][-1],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--output",
        out,
        "--cpu",
        check=False,
    )
    assert proc.returncode == 2 and "exists; refusing to overwrite it (--force)" in proc.stderr
    assert out.read_bytes() == b"keep me" and not (tmp_path / "pos.csv").exists()
    (tmp_path / "other.png").write_bytes(b"")
    (tmp_path / "other.csv").write_bytes(b"keep me too")  # the CSV next to a PNG counts as well
    message = error_of(
        capsys,
        "trajectories",
        "--path",
        trained["ct"][-1],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--output",
        tmp_path / "other.png",
        "--cpu",
    )
    assert "other.png exists" in message
    (tmp_path / "other.png").unlink()
    message = error_of(
        capsys,
        "trajectories",
        "--path",
        trained["ct"][-1],
        "--data",
        trained["data"],
        "--text",
        trained["text"],
        "--output",
        tmp_path / "other.png",
        "--cpu",
    )
    assert "other.csv exists" in message
    ct_analysis.main(
        [
            "positions",
            "--path",
            trained["ct"][-1],
            "--data",
            trained["data"],
            "--text",
            trained["text"],
            "--output",
            str(out),
            "--cpu",
            "--force",
        ]
    )
    assert_png(out)


def test_a_failed_dump_leaves_no_partial_file(trained, tmp_path, monkeypatch):
    def failing(scores):
        for n, item in enumerate(real(scores)):
            if n == 5:
                raise RuntimeError("interrupted")
            yield item

    real = dump.dump_rows
    monkeypatch.setattr(dump, "dump_rows", failing)
    with pytest.raises(RuntimeError, match="interrupted"):
        ct_analysis.main(
            [
                "dump",
                "--path",
                trained["ct"][-1],
                "--data",
                trained["data"],
                "--text",
                trained["text"],
                "--output",
                str(tmp_path / "d.tsv"),
                "--full",
                str(tmp_path / "d.npy"),
                "--cpu",
            ]
        )
    assert os.listdir(tmp_path) == []


def test_outputs_are_removed_again_when_the_figure_fails(tmp_path):
    """A CSV written before its figure failed is removed again (the rerun is not refused for it);
    a file that existed before (overwritten under --force) is left."""
    from fairseq_ctemp.ct_analysis.outputs import write_csv
    from fairseq_ctemp.outputs import all_or_none

    csv_path, png, forced = tmp_path / "out.csv", tmp_path / "out.png", tmp_path / "forced.csv"
    forced.write_text("an earlier result\n")
    with pytest.raises(RuntimeError, match="no figure"):
        with all_or_none([str(csv_path), str(png), str(forced)]):
            write_csv(str(csv_path), ["token", "tau"], [["a", "1.5"]])
            write_csv(str(forced), ["token", "tau"], [["b", "2.5"]])
            raise RuntimeError("no figure")
    assert sorted(os.listdir(tmp_path)) == ["forced.csv"]
