"""ctemp-calibrate and fairseq_ctemp.calibration against independent float64 references: NLL(t) and
the top-1 confidences computed slowly, one sample at a time, from the raw outputs of models loaded by
fairseq's own loader (conftest.RawModel); t* against a dense grid search of that NLL; ECE against
torchmetrics' binary_calibration_error and the bins against numpy's histogram. A stock translator, a
tempered_ce translator (t* replaces its T) and a contextual-temperature MoS LM; the checkpoint it
writes decodes at t* through fairseq-generate and fairseq-eval-lm, and the original is untouched."""

import argparse
import contextlib
import dataclasses
import hashlib
import io
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import BIN_DIR, PLUGIN_DIR, T_A, RawModel, hypotheses, run_fairseq

from fairseq_ctemp import calibration
from fairseq_ctemp.calibration.fitting import GRID
from fairseq_ctemp.cli import calibrate as calibrate_cli

pytestmark = pytest.mark.e2e
ATOL = 1e-5  # batched float32 model outputs (the tool) vs one sample at a time (the reference)


# ---------------------------------------------------------------------- the independent reference
class Reference:
    """NLL(t), confidences and a grid search over t of scores D (float64 (N, V)) of targets y."""

    def __init__(self, D, y):
        self.D, self.y, self.correct = D, y, D.argmax(-1) == y

    @classmethod
    def of(cls, checkpoint, data, subset, translation):
        """Every target token of a subset, one sample at a time through RawModel: D are logits, or
        the log of a temperature head's distribution."""
        raw = RawModel(checkpoint, data)
        raw.task.load_dataset(subset)
        dataset, eos, pad = raw.task.dataset(subset), raw.dictionary.eos(), raw.dictionary.pad()
        rows, targets = [], []
        for i in range(len(dataset)):
            item = dataset[i]
            target = item["target"]
            if translation:  # teacher forcing: <eos> then the target shifted right
                prev, src = torch.cat([torch.tensor([eos]), target[:-1]]), item["source"]
            else:
                prev, src = item["source"], None
            keep = target.ne(pad)
            rows.append(raw.log_probs(prev, src)[keep])
            targets.append(target[keep])
        return cls(torch.cat(rows), torch.cat(targets))

    def nll(self, t):
        return -torch.log_softmax(self.D / t, -1).gather(1, self.y[:, None]).mean().item()

    def confidence(self, t):
        return torch.softmax(self.D / t, -1).max(-1).values

    def grid_argmin(self):
        """(t, NLL at t, grid step) of a dense grid search: 121 points from 0.01 to 100, then 201
        between the neighbours of the best (a step of 0.08 % of t)."""
        coarse = torch.logspace(-2, 2, 121, dtype=torch.float64)
        i = min(range(len(coarse)), key=lambda j: self.nll(coarse[j]))
        assert 0 < i < len(coarse) - 1, "the minimum is at the edge of the grid"
        fine = torch.linspace(coarse[i - 1].item(), coarse[i + 1].item(), 201, dtype=torch.float64)
        values = [self.nll(t) for t in fine]
        j = min(range(len(fine)), key=values.__getitem__)
        return fine[j].item(), values[j], (fine[1] - fine[0]).item()


def reference_ece(confidence, correct):
    # imported here: pytest-xdist's workers all collect this file, one runs it (~1.2 s import)
    from torchmetrics.functional.classification import binary_calibration_error

    return binary_calibration_error(confidence, correct.long(), n_bins=15, norm="l1").item()


def assert_bins(bins, confidence, correct):
    """count, mean confidence and accuracy per bin against numpy's histogram on [0, 1]."""
    count, edges = np.histogram(confidence.numpy(), bins=15, range=(0, 1))
    conf_sum = np.histogram(confidence.numpy(), bins=15, range=(0, 1), weights=confidence.numpy())[0]
    right = np.histogram(confidence.numpy(), bins=15, range=(0, 1), weights=correct.double().numpy())[0]
    assert [b["count"] for b in bins] == count.tolist()
    for b, n, lo, hi, c, r in zip(bins, count, edges[:-1], edges[1:], conf_sum, right):
        assert b["range"] == pytest.approx([lo, hi], abs=1e-12)
        assert (b["confidence"], b["accuracy"]) == ((None, None) if n == 0 else pytest.approx((c / n, r / n)))


def assert_matches_reference(result, ref, own_temperature):
    """Every number of a Calibration (or its JSON) against the reference."""
    get = result.get if isinstance(result, dict) else result.__getattribute__
    assert get("tokens") == len(ref.y)
    assert get("decoding_temperature") == own_temperature
    assert get("accuracy") == pytest.approx(ref.correct.double().mean().item(), abs=1e-12)
    assert get("nll") == pytest.approx(ref.nll(own_temperature), abs=ATOL)
    t_star, best_on_grid, step = ref.grid_argmin()
    assert abs(get("fitted_temperature") - t_star) <= step
    assert ref.nll(get("fitted_temperature")) <= best_on_grid + 1e-12  # as good as any grid point
    assert get("nll_fitted") == pytest.approx(ref.nll(get("fitted_temperature")), abs=ATOL)
    for t, ece, bins in (
        (own_temperature, get("ece"), get("bins")),
        (get("fitted_temperature"), get("ece_fitted"), get("bins_fitted")),
    ):
        confidence = ref.confidence(t)
        assert ece == pytest.approx(reference_ece(confidence, ref.correct), abs=1e-6)
        assert_bins(bins, confidence, ref.correct)
    # the check can tell t* from the decoding temperature
    assert ref.nll(own_temperature) - ref.nll(get("fitted_temperature")) > 20 * ATOL


# ------------------------------------------------------------------------------------ the math
def test_bins_and_ece_against_numpy_and_torchmetrics():
    g = torch.Generator().manual_seed(0)
    confidence = torch.rand(5000, generator=g, dtype=torch.float64)
    edges = torch.linspace(0, 1, 16, dtype=torch.float64)
    confidence[:15] = edges[:15]  # on the bin edges: each one starts a bin
    correct = torch.rand(5000, generator=g) < confidence.float() ** 0.7
    bins = calibration.reliability_bins(confidence, correct)
    assert_bins(bins, confidence, correct)
    assert calibration.expected_calibration_error(bins) == pytest.approx(
        reference_ece(confidence, correct), abs=1e-12
    )
    # 1 is in the last bin (numpy's closed last bin; torchmetrics gives it a bin of its own)
    confidence = torch.cat([confidence, torch.ones(3, dtype=torch.float64)])
    correct = torch.cat([correct, torch.ones(3, dtype=torch.bool)])
    assert_bins(calibration.reliability_bins(confidence, correct), confidence, correct)


def synthetic(scale, n=3000, v=20, seed=0):
    """Scores D = scale * Z of targets drawn from softmax(Z): t* is about scale."""
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(n, v, generator=g, dtype=torch.float64) * 2
    y = torch.multinomial(torch.softmax(Z, -1), 1, generator=g)[:, 0]
    return scale * Z, y


def fit_in_chunks(D, y, rows=128):
    chunks = lambda: ((D[i : i + rows], y[i : i + rows]) for i in range(0, len(y), rows))  # noqa: E731
    first = calibration.scan(chunks(), [1.0, *GRID], 1.0)
    passes = [first]

    def evaluate(beta):
        passes.append(calibration.scan(chunks(), [beta], beta))
        return passes[-1]

    beta, at = calibration.fit(first, evaluate)
    return 1 / beta, at, len(passes)


@pytest.mark.parametrize("scale", [1.0, 0.02, 40.0])  # t* inside the first grid, below and above it
def test_fit_against_a_dense_grid_on_synthetic_scores(scale):
    D, y = synthetic(scale)
    t_fit, at, passes = fit_in_chunks(D, y)
    ref = Reference(D, y)
    ts = torch.logspace(math.log10(scale / 4), math.log10(scale * 4), 801, dtype=torch.float64)
    values = [ref.nll(t) for t in ts]
    best = min(range(len(ts)), key=values.__getitem__)
    assert 0 < best < len(ts) - 1
    assert abs(t_fit - ts[best].item()) <= (ts[best + 1] - ts[best]).item()
    assert ref.nll(t_fit) <= values[best] + 1e-12
    assert at.nll[0].item() / len(y) == pytest.approx(ref.nll(t_fit), abs=1e-12)
    assert torch.allclose(at.confidence, ref.confidence(t_fit), atol=1e-12, rtol=0)
    assert passes <= 12


@pytest.mark.parametrize("beta_star", [3.0, 100.0])  # inside the first grid, and beyond it
def test_fit_bisects_where_newton_overshoots(beta_star):
    """On f(beta) = sqrt(s^2 + (beta - beta*)^2) Newton jumps to -x^3 / s^2: only the bracket
    brings it back. Far below beta* the curvature is 0 (as for one-hot distributions): no Newton
    step at all there."""
    s = 0.01

    def at(betas):
        x = torch.tensor(betas, dtype=torch.float64) - beta_star
        r = torch.sqrt(s**2 + x**2)
        curv = torch.where(x < -50, 0.0, s**2 / r**3)
        no_tokens = torch.zeros(0)
        return calibration.Pass(list(betas), 1, r, x / r, curv, 1.0, no_tokens, no_tokens.bool())

    passes = []
    beta, fitted = calibration.fit(at([1.0, *GRID]), lambda b: passes.append(b) or at([b]))
    assert beta == pytest.approx(beta_star, rel=1e-6) and fitted.betas == [beta]
    assert len(passes) <= 25  # each is a pass over the subset: bisect decades geometrically


@pytest.mark.parametrize(
    "case, message",
    [("all right", "every top-1 prediction of the subset is right"), ("worse", "no better than the uniform")],
)
def test_no_finite_temperature_is_refused(case, message):
    D, y = synthetic(1.0)
    y = D.argmax(-1) if case == "all right" else D.argmin(-1)
    with pytest.raises(calibration.CalibrationError, match=message):
        fit_in_chunks(D, y)


# --------------------------------------------------------------------------- real checkpoints
SUBSET = "valid"


@pytest.fixture(scope="module")
def reference(toy_checkpoint, toy_data):
    made = {}

    def get(name):
        if name not in made:
            translation = name in "AS"
            data = toy_data["bin"] if translation else toy_data["lm_bin"]
            made[name] = Reference.of(toy_checkpoint(name), data, SUBSET, translation)
        return made[name]

    return get


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("name", ["S", "H"])  # A: through the command, below
def test_calibrate_matches_the_reference(toy_checkpoint, toy_data, reference, name):
    data = toy_data["bin"] if name == "S" else toy_data["lm_bin"]
    result = calibration.calibrate(str(toy_checkpoint(name)), str(data), SUBSET, max_tokens=300)
    assert result.temperature_trained is None
    assert_matches_reference(result, reference(name), 1.0)
    assert result.samples_skipped == 0 and f"tokens:{result.tokens}|" in result.signature


def test_held_out_numbers_are_the_references_on_the_report_subset(toy_checkpoint, toy_data, reference):
    """--report-subset: t* fitted on valid as without it, then NLL, ECE and bins on test at the
    decoding temperature and at that t*, against the reference computed on test."""
    checkpoint, data = str(toy_checkpoint("S")), str(toy_data["bin"])
    result = calibration.calibrate(checkpoint, data, SUBSET, max_tokens=300, report_subset="test")
    assert_matches_reference(result, reference("S"), 1.0)  # the fit on valid is unchanged
    held, h = Reference.of(toy_checkpoint("S"), toy_data["bin"], "test", True), result.held_out
    assert h.subset == "test" and h.tokens == len(held.y) and h.samples == 80 and h.samples_skipped == 0
    assert h.accuracy == pytest.approx(held.correct.double().mean().item(), abs=1e-12)
    for t, nll, ece, bins in (
        (1.0, h.nll, h.ece, h.bins),
        (result.fitted_temperature, h.nll_fitted, h.ece_fitted, h.bins_fitted),
    ):
        assert nll == pytest.approx(held.nll(t), abs=ATOL)
        confidence = held.confidence(t)
        assert ece == pytest.approx(reference_ece(confidence, held.correct), abs=1e-6)
        assert_bins(bins, confidence, held.correct)
    assert abs(h.nll - h.nll_fitted) > 20 * ATOL  # the two temperatures give different numbers
    assert result.to_dict()["held_out"]["subset"] == "test"  # in the JSON
    written = json.loads(json.dumps(result.to_dict()))  # and read back from it, as it was
    assert calibration.Calibration.from_dict(written) == result
    del written["held_out"]  # a file written before --report-subset
    assert calibration.Calibration.from_dict(written) == dataclasses.replace(result, held_out=None)


def calibrate_command():
    """The installed console script, or (in a checkout not installed) its module."""
    script = os.path.join(BIN_DIR, "ctemp-calibrate")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "fairseq_ctemp.cli.calibrate"]


@pytest.fixture(scope="module")
def command_run(toy_checkpoint, toy_data, tmp_path_factory):
    """ctemp-calibrate on the tempered_ce translator A with --json, --plot and --write-checkpoint."""
    out = tmp_path_factory.mktemp("calibrate-A")
    checkpoint = toy_checkpoint("A")
    before = sha256(checkpoint)
    proc = subprocess.run(
        [
            *calibrate_command(),
            str(toy_data["bin"]),
            "--user-dir",
            PLUGIN_DIR,
            "--path",
            str(checkpoint),
            "--max-tokens",
            "500",
            "--json",
            str(out / "a.json"),
            "--plot",
            str(out / "a.png"),
            "--write-checkpoint",
            str(out / "calibrated.pt"),
        ],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    return {"out": out, "stdout": proc.stdout, "before": before, "checkpoint": checkpoint}


def test_the_command_on_a_tempered_checkpoint(command_run, reference):
    with open(command_run["out"] / "a.json", encoding="utf-8") as f:
        result = json.load(f)
    assert set(result) >= {"tokens", "nll", "ece", "fitted_temperature", "nll_fitted", "ece_fitted"}
    assert set(result) >= {"temperature_trained", "signature", "bins", "bins_fitted"}
    assert result["temperature_trained"] == T_A
    assert_matches_reference(result, reference("A"), T_A)  # t* is absolute: it replaces T
    assert result["signature"].startswith(
        f"subset:valid|samples:80|tokens:{result['tokens']}|bins:15|eos:yes"
    )
    from matplotlib.image import imread

    assert imread(command_run["out"] / "a.png").shape[:2] == (528, 1080)  # 9 x 4.4 inches at 120 dpi
    summary = command_run["stdout"]
    assert f"{result['fitted_temperature']:>9.4f} {result['nll_fitted']:>13.4f}" in summary
    assert f"wrote --write-checkpoint {command_run['out'] / 'calibrated.pt'}" in summary
    assert sha256(command_run["checkpoint"]) == command_run["before"]


def generate(data, checkpoint, *extra):
    """(output with the log, H- and P- lines) of fairseq-generate run in this process
    (conftest.run_fairseq), without a start-up per run."""
    command = [
        data,
        "--path",
        checkpoint,
        "--user-dir",
        PLUGIN_DIR,
        "--gen-subset",
        "test",
        "--num-workers",
        "0",
    ]
    command += ["--cpu", "--beam", "2", "--max-len-a", "1.2", "--max-len-b", "8", *extra]
    out = run_fairseq("fairseq-generate", *command).stdout
    return out, [line for line in out.splitlines() if line[:2] in ("H-", "P-")]


def test_the_written_checkpoint_decodes_at_t_star_through_fairseq_generate(command_run, toy_data):
    with open(command_run["out"] / "a.json", encoding="utf-8") as f:
        t_star = json.load(f)["fitted_temperature"]
    new, original = command_run["out"] / "calibrated.pt", command_run["checkpoint"]
    log, calibrated = generate(toy_data["bin"], new)
    assert f"decoding at calibrated temperature t*={t_star:g} (ctemp-calibrate)" in log
    assert calibrated == generate(toy_data["bin"], original, "--temperature", repr(t_star))[1]
    assert len(hypotheses(log)) == 80
    assert calibrated != generate(toy_data["bin"], original)[1]  # at T: the check can tell
    explicit = generate(toy_data["bin"], new, "--temperature", "1.7")
    assert "explicit temperature 1.7 replaces its calibrated temperature" in explicit[0]
    assert explicit[1] == generate(toy_data["bin"], original, "--temperature", "1.7")[1]
    assert sha256(original) == command_run["before"]


def test_a_written_head_lm_checkpoint_scores_at_t_star_in_eval_lm(toy_checkpoint, toy_data, tmp_path):
    checkpoint = toy_checkpoint("H")
    before = sha256(checkpoint)
    result = calibration.calibrate(str(checkpoint), str(toy_data["lm_bin"]), "test")
    new = tmp_path / "h.pt"
    calibration.write_calibrated_checkpoint(
        str(checkpoint), str(new), result.fitted_temperature, result.signature
    )
    out = run_fairseq(
        "fairseq-eval-lm",
        toy_data["lm_bin"],
        "--path",
        new,
        "--user-dir",
        PLUGIN_DIR,
        "--cpu",
        "--gen-subset",
        "test",
        "--tokens-per-sample",
        "32",
        "--max-tokens",
        "1024",
        "--num-workers",
        "0",
    ).stdout
    assert f"calibrated by ctemp-calibrate at t*={result.fitted_temperature:g}" in out
    loss = float(out.split("Loss (base 2): ")[1].split(",")[0])
    raw = RawModel(checkpoint, toy_data["lm_bin"])
    assert abs(loss - raw.lm_nll("test", result.fitted_temperature)[0]) < 1e-3
    assert abs(loss - raw.lm_nll("test", 1.0)[0]) > 1e-2  # the check can tell t* from t = 1
    assert sha256(checkpoint) == before


# ------------------------------------------------------------------------------------ bad input
def run_main(argv):
    """(exit status, output) of ctemp-calibrate's main(argv) in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            calibrate_cli.main([str(a) for a in argv])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) or e.code is None else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)
    return code or 0, out.getvalue()


def tree(root):
    """{path: sha256} of every file under root."""
    return {os.path.join(d, f): sha256(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files}


@pytest.fixture(scope="module")
def bad(toy_checkpoint, toy_data, tmp_path_factory):
    """A copy of the toy data with an empty subset (as fairseq-preprocess writes an empty file), and
    the MoS LM with untied embeddings whose input embedding of one rare word is NaN."""
    from fairseq.data import indexed_dataset

    root = tmp_path_factory.mktemp("calibrate-bad")
    shutil.copytree(toy_data["bin"], root / "bin")
    for side in ("src", "tgt"):
        prefix = str(root / "bin" / f"empty.src-tgt.{side}")
        indexed_dataset.make_builder(prefix + ".bin", impl="mmap").finalize(prefix + ".idx")
    torch.save({"w": torch.ones(2)}, root / "weights.pt")  # a torch file, not a fairseq checkpoint
    shutil.copytree(toy_data["bin"], root / "wider")  # dictionaries of two words more
    for side in ("src", "tgt"):
        with open(root / "wider" / f"dict.{side}.txt", "a", encoding="utf-8") as f:
            f.write("unseen1 1\nunseen2 1\n")
    state = torch.load(toy_checkpoint("H"), map_location="cpu")
    state["cfg"]["model"]["untie_embeddings"] = True
    model = state["model"]
    model["decoder.embed_tokens.weight"] = model["decoder.embed_tokens.weight"].clone()
    raw = RawModel(toy_checkpoint("H"), toy_data["lm_bin"])
    raw.task.load_dataset("valid")
    blocks = [raw.task.dataset("valid")[i]["source"] for i in range(len(raw.task.dataset("valid")))]
    counts = torch.bincount(torch.cat([b.unique() for b in blocks]), minlength=len(raw.dictionary))
    counts[: raw.dictionary.nspecial] = 0
    word = int(torch.where(counts > 0, counts, len(blocks) + 1).argmin())  # in the fewest blocks
    model["decoder.embed_tokens.weight"][word] = float("nan")
    torch.save(state, root / "nan.pt")
    with_word = [i for i, b in enumerate(blocks) if (b == word).any()]
    return {"root": root, "with_word": with_word, "n_blocks": len(blocks)}


BAD = [
    (
        "no such subset",
        ["{bin}", "--path", "{S}", "--gen-subset", "nosuch"],
        "--gen-subset nosuch: no such subset in {bin} (found: empty, test, train, valid)",
    ),
    (
        "empty subset",
        ["{bin}", "--path", "{S}", "--gen-subset", "empty"],
        "--gen-subset empty of {bin} is empty",
    ),
    (
        "another task",
        ["{lm}", "--path", "{S}", "--task", "language_modeling"],
        "--task language_modeling, but --path {S} is a checkpoint of task translation",
    ),
    (
        "data of another task",
        ["{lm}", "--path", "{S}"],
        "--path {S} cannot be loaded with DATA {lm} (task translation)",
    ),
    (
        "no such DATA",
        ["{bin}/nope", "--path", "{S}"],
        "DATA {bin}/nope: no such directory",
    ),
    (
        "not a fairseq checkpoint",
        ["{bin}", "--path", "{weights}"],
        "--path {weights} is not a checkpoint of fairseq-train (it has no 'best_loss'): a torch.save file of "
        "something else?",
    ),
    (
        "dictionaries of other data",
        ["{wider}", "--path", "{S}"],
        "--path {S} cannot be loaded with DATA {wider} (task translation): Error(s) in loading state_dict "
        "for TransformerModel: size mismatch for ",
    ),
    (
        "report on the subset t* is fitted on",
        ["{bin}", "--path", "{S}", "--report-subset", "valid"],
        "--report-subset valid is the subset t* is fitted on (--gen-subset)",
    ),
    (
        "no such report subset",
        ["{bin}", "--path", "{S}", "--report-subset", "nosuch"],
        "--report-subset nosuch: no such subset in {bin}",
    ),
    (
        "empty report subset",
        ["{bin}", "--path", "{S}", "--report-subset", "empty"],
        "--report-subset empty of {bin} is empty",
    ),
    (
        "a fairseq batching option it would ignore",
        ["{bin}", "--path", "{S}", "--required-batch-size-multiple", "8"],
        "--required-batch-size-multiple is a fairseq option ctemp-calibrate does not use (it works as "
        "--required-batch-size-multiple 1): it scores every sentence of --gen-subset",
    ),
    (
        "a fairseq validation option it would ignore",
        ["{bin}", "--path", "{S}", "--max-tokens-valid", "100"],
        "--max-tokens-valid is a fairseq option ctemp-calibrate does not use: it scores every sentence",
    ),
    (
        "another criterion, whose temperature the model would be scored at",
        ["{bin}", "--path", "{S}", "--criterion", "tempered_ce", "--softmax-temperature", "5"],
        "--criterion tempered_ce: the criterion and its options are the checkpoint's, what it was trained "
        "with (its temperature comes from them); ctemp-calibrate reads them from --path",
    ),
    (
        "a fairseq common option it would ignore",
        ["{bin}", "--path", "{S}", "--seed", "3"],
        "--seed is a fairseq option ctemp-calibrate does not use: it trains, decodes and logs nothing",
    ),
    (
        "a fairseq registry option it would ignore",
        ["{bin}", "--path", "{S}", "--optimizer", "adam"],
        "--optimizer is a fairseq option ctemp-calibrate does not use: it trains, decodes and logs nothing",
    ),
    (
        "--max-tokens below the longest sentence",  # (fairseq: an AssertionError)
        ["{bin}", "--path", "{S}", "--max-tokens", "3"],
        "--max-tokens 3 is below the longest sentence of valid (",
    ),
]


@pytest.mark.parametrize("case, argv, expected", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_one_line_before_any_work(bad, toy_checkpoint, toy_data, case, argv, expected):
    places = {"bin": bad["root"] / "bin", "wider": bad["root"] / "wider", "lm": toy_data["lm_bin"]}
    places["weights"] = bad["root"] / "weights.pt"
    places["S"] = toy_checkpoint("S")
    argv = [a.format(**places) for a in argv] + ["--json", bad["root"] / "out.json"]
    before = tree(bad["root"])
    code, output = run_main(argv)
    assert code != 0 and "Traceback" not in output
    last = output.strip().splitlines()[-1]
    assert last.startswith("ctemp-calibrate: error: " + expected.format(**places)), last
    assert "pass 1" not in output and tree(bad["root"]) == before  # no pass began


def test_a_non_finite_output_names_the_checkpoint_and_the_sample(bad, toy_data):
    nan = bad["root"] / "nan.pt"
    argv = [toy_data["lm_bin"], "--path", nan, "--batch-size", "4", "--json", bad["root"] / "nan.json"]
    before = tree(bad["root"])
    code, output = run_main(argv)
    last = output.strip().splitlines()[-1]
    assert code != 0 and "Traceback" not in output
    assert f"--path {nan}: the model's output is not finite (NaN or inf) for sample id" in last
    named = int(last.split("sample id ")[1].split(":")[0])
    assert named in bad["with_word"] and len(bad["with_word"]) < bad["n_blocks"] / 2
    assert tree(bad["root"]) == before


def test_a_full_disk_removes_what_the_run_wrote_and_names_the_file(
    toy_checkpoint, toy_data, tmp_path, monkeypatch
):
    """A fault while the outputs are written (here torch.save's, as its zip writer reports a full
    disk) leaves none of them, so the corrected rerun is not refused for an existing --json."""

    def full_disk(obj, f, *args, **kwargs):
        f.write(b"the first bytes")
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    out = tmp_path / "out"
    out.mkdir()
    argv = [toy_data["bin"], "--path", toy_checkpoint("A"), "--gen-subset", "valid", "--cpu"]
    argv += ["--json", out / "r.json", "--plot", out / "r.png", "--write-checkpoint", out / "t.pt"]
    monkeypatch.setattr(torch, "save", full_disk)
    code, output = run_main(argv)
    last = output.strip().splitlines()[-1]
    assert code == 1 and "Traceback" not in output
    assert last.startswith(
        f"ctemp-calibrate: error: --write-checkpoint {out / 't.pt'} could not be written ("
    ), last
    assert last.endswith(f"{out / 'r.json'}, {out / 'r.png'} removed again"), last
    assert os.listdir(out) == []
    monkeypatch.undo()
    code, output = run_main(argv)  # the rerun
    assert code == 0 and sorted(os.listdir(out)) == ["r.json", "r.png", "t.pt"], output[-2000:]


def test_only_fairseq_dataset_options_it_ignores_are_refused():
    """Each name is one of fairseq's dataset options (a misspelt one would never match); those
    given at the value calibration works as pass, as do the options it reads."""
    from fairseq.dataclass.configs import DatasetConfig

    fields = {f.name for f in dataclasses.fields(DatasetConfig)}
    assert set(calibrate_cli.UNUSED_DATASET_OPTIONS) <= fields
    read = {
        "max_tokens": 100,
        "batch_size": 4,
        "gen_subset": "test",
        "skip_invalid_size_inputs_valid_test": True,
    }
    calibrate_cli.check_unused(argparse.Namespace(num_workers=0, required_batch_size_multiple=1, **read))
    with pytest.raises(
        calibration.CalibrationError, match="--num-workers is a fairseq option .* as --num-workers 0"
    ):
        calibrate_cli.check_unused(argparse.Namespace(num_workers=2))
    with pytest.raises(
        calibration.CalibrationError, match="^--shard-id is a fairseq option ctemp-calibrate does not use:"
    ):
        calibrate_cli.check_unused(argparse.Namespace(shard_id=0))


def test_the_fairseq_options_it_reads_or_refuses_are_fairseqs():
    """The common options it reads are fields of fairseq's CommonConfig, and the registries it
    refuses are options of its parser (a misspelt name would leave one accepted and ignored)."""
    from fairseq.dataclass.configs import CommonConfig

    assert set(calibrate_cli.USED_COMMON) <= {f.name for f in dataclasses.fields(CommonConfig)}
    dests = {action.dest for action in calibrate_cli.fairseq_parser("translation")._actions}
    assert set(calibrate_cli.UNUSED_CHOICES) | {"criterion"} <= dests
