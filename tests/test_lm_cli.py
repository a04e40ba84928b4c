"""Contextual-temperature LMs through fairseq's CLIs: fairseq-train / fairseq-eval-lm /
fairseq-interactive / fairseq-generate with --user-dir, for every head; eval-lm's perplexity is
exp(unscaled NLL) of the normalised distribution over every corpus token; resume; 2-process CPU
training with c10d. The CLIs run in this process (conftest.run_fairseq) but for the 2 ranks, which
are processes of their own."""

import logging
import math
import re

import pytest
import torch
from conftest import PLUGIN_DIR, RawModel, cli, json_log_records, run_fairseq
from test_distributed_and_install import ONE_THREAD, assert_same_updates, train_on_two_ranks

from fairseq_ctemp import lm_eval
from fairseq_ctemp.models.temperature_head import TemperatureHeadDecoderMixin

pytestmark = pytest.mark.e2e
LM_TRAIN = [
    "--user-dir",
    PLUGIN_DIR,
    "--task",
    "language_modeling",
    "--tokens-per-sample",
    "64",
    "--cpu",
    "--optimizer",
    "adam",
    "--lr",
    "3e-3",
    "--max-tokens",
    "1000",
    "--seed",
    "1",
    "--log-format",
    "json",
    "--log-interval",
    "1",
    "--num-workers",
    "0",
    "--criterion",
    "ct_cross_entropy",
    "--best-checkpoint-metric",
    "nll_loss",
]
HEADS = {
    "transformer-adaptive-ct-learned": ["--arch", "ct_transformer_lm_tiny", "--ct-learn-alpha-beta"],
    "transformer-softmax-constant": [
        "--arch",
        "ct_transformer_lm_tiny",
        "--output-head",
        "softmax",
        "--ct-normalization",
        "constant",
        "--ct-constant",
        "2",
    ],
    "lstm-softmax-plain": ["--arch", "lstm_lm_tiny"],
    "lstm-mos-ct": ["--arch", "ct_mos_lstm_lm_tiny"],
}


def train(data, save_dir, *extra, epochs=1):
    return run_fairseq(
        "fairseq-train", data, *LM_TRAIN, "--save-dir", save_dir, "--max-epoch", epochs, *extra
    )


def eval_lm(data, checkpoint, *extra):
    out = run_fairseq(
        "fairseq-eval-lm",
        data,
        "--user-dir",
        PLUGIN_DIR,
        "--path",
        checkpoint,
        "--cpu",
        "--gen-subset",
        "test",
        "--max-tokens",
        "4000",
        "--num-workers",
        "0",
        *extra,
    ).stdout
    count = int(re.search(r"Evaluated ([\d,]+) tokens", out).group(1).replace(",", ""))
    loss, ppl = map(float, re.search(r"Loss \(base 2\): ([\d.]+), Perplexity: ([\d.]+)", out).groups())
    return out, count, loss, ppl


def corpus_tokens(path):
    """Words plus one end-of-sentence per line: what a language model is scored on."""
    lines = path.read_text().splitlines()
    return sum(len(line.split()) for line in lines) + len(lines)


@pytest.fixture(scope="module")
def trained(toy_data, tmp_path_factory):
    """Each head trained for 2 epochs once: {head: (save_dir, fairseq-train output)}."""
    runs = {}
    for head, args in HEADS.items():
        save_dir = tmp_path_factory.mktemp(head)
        runs[head] = (
            save_dir,
            train(toy_data["lm_bin"], save_dir, *args, "--no-epoch-checkpoints", epochs=2).stdout,
        )
    return runs


@pytest.mark.parametrize("head", sorted(HEADS))
def test_every_head_trains_and_eval_lm_scores_every_token_of_the_normalised_distribution(
    toy_data, trained, head
):
    save_dir, log = trained[head]
    valid = json_log_records(log, "valid")[-1]
    checkpoint = save_dir / "checkpoint_last.pt"
    out, count, loss, ppl = eval_lm(toy_data["lm_bin"], checkpoint, "--tokens-per-sample", "64")
    assert "skipping tokens with inf scores" not in out
    assert count == corpus_tokens(toy_data["raw"] / "test.tgt")  # nothing dropped
    # from the raw outputs of fairseq's own loader: no plugin decoding code
    expected, expected_count = RawModel(checkpoint, toy_data["lm_bin"], tokens_per_sample=64).lm_nll(
        "test", max_tokens=4000
    )
    assert expected_count == count
    assert abs(loss - expected) < 1e-3, (loss, expected)
    assert abs(ppl - 2**loss) < 0.01 * ppl
    # the loss scale never reaches reported perplexity: the trained (scaled) loss is another number
    scale = float(valid["valid_loss_scale"])
    if scale != 1.0:
        assert abs(float(valid["valid_loss"]) - scale * float(valid["valid_nll_loss"])) < 0.01 * float(
            valid["valid_loss"]
        )
        assert abs(float(valid["valid_ppl"]) - 2 ** float(valid["valid_nll_loss"])) < 0.01 * float(
            valid["valid_ppl"]
        )


@pytest.mark.parametrize("head", sorted(HEADS))
def test_softmax_batch_scores_as_the_whole_batch(toy_data, trained, head):
    """fairseq-eval-lm --softmax-batch N normalises N positions at a time (it flattens net_output[0],
    our features, across the batch): every head is position-wise, so the loss is the reference's."""
    checkpoint = trained[head][0] / "checkpoint_last.pt"
    _, count, loss, _ = eval_lm(
        toy_data["lm_bin"], checkpoint, "--tokens-per-sample", "64", "--softmax-batch", "7"
    )
    expected, expected_count = RawModel(checkpoint, toy_data["lm_bin"], tokens_per_sample=64).lm_nll(
        "test", max_tokens=4000
    )
    assert count == expected_count == corpus_tokens(toy_data["raw"] / "test.tgt")
    assert abs(loss - expected) < 1e-3, (loss, expected)


def eval_lm_api(data, checkpoint):
    """lm_eval.evaluate: fairseq-eval-lm through its Python API, with its two guards' counts."""
    return lm_eval.evaluate(
        [str(data), "--user-dir", PLUGIN_DIR, "--path", str(checkpoint), "--cpu", "--gen-subset", "test"]
        + ["--max-tokens", "4000", "--num-workers", "0", "--tokens-per-sample", "64"]
    )


@pytest.mark.parametrize("head", sorted(HEADS))
def test_the_evaluation_guards_pass_for_every_head(toy_data, trained, head):
    result = eval_lm_api(toy_data["lm_bin"], trained[head][0] / "checkpoint_last.pt")
    expected = corpus_tokens(toy_data["raw"] / "test.tgt")
    lm_eval.check(result, expected, "test")  # raises if a guard fails
    assert result.tokens == expected and result.positions_checked >= expected
    assert result.max_log_normalizer < 1e-5 and result.tokens_not_finite == 0


def test_sentence_scores_are_the_lines_of_the_subset_and_add_up_to_the_perplexity(toy_data, trained):
    """lm_eval.evaluate(sentences=True): one (NLL, tokens) per line of the raw test text, with that
    line's words + </s>, summing to fairseq's loss over the whole subset."""
    head = sorted(HEADS)[0]
    argv = [
        str(toy_data["lm_bin"]),
        "--user-dir",
        PLUGIN_DIR,
        "--path",
        str(trained[head][0] / "checkpoint_last.pt"),
    ]
    argv += ["--cpu", "--gen-subset", "test", "--max-tokens", "4000", "--num-workers", "0"]
    result = lm_eval.evaluate([*argv, "--tokens-per-sample", "64", "--context-window", "16"], sentences=True)
    lines = (toy_data["raw"] / "test.tgt").read_text().splitlines()
    assert [n for _, n in result.sentences] == [len(line.split()) + 1 for line in lines]
    nll = sum(x for x, _ in result.sentences)
    assert nll / result.tokens / math.log(2) == pytest.approx(result.loss_base2, rel=1e-6)
    assert lm_eval.evaluate(argv + ["--tokens-per-sample", "64"]).sentences is None  # only when asked


def test_the_evaluation_refuses_unnormalised_or_zero_probabilities(toy_data, trained, monkeypatch, caplog):
    """A head whose log-probabilities are off by a constant (a temperature or normaliser applied
    after the log-softmax) is caught, by how much it is off; so is one that gives a target
    probability 0 (fairseq-eval-lm would leave it out of the perplexity, printing the tokens it
    skips: lm_eval.evaluate makes that message printable while it runs, and only then), and NaN."""
    original = TemperatureHeadDecoderMixin.get_normalized_probs

    def off_by_a_constant(self, net_output, log_probs, sample=None):
        lprobs = original(self, net_output, True, sample) + 0.01
        return lprobs if log_probs else lprobs.exp()

    monkeypatch.setattr(TemperatureHeadDecoderMixin, "get_normalized_probs", off_by_a_constant)
    result = eval_lm_api(toy_data["lm_bin"], trained["lstm-mos-ct"][0] / "checkpoint_last.pt")
    assert result.max_log_normalizer == pytest.approx(0.01, abs=1e-5)
    with pytest.raises(ValueError, match=r"do not sum to 1: \|log sum_v p\(v\)\| reaches 0.01 nats"):
        lm_eval.check(result, result.tokens, "test")
    with pytest.raises(ValueError, match="evaluated .* tokens but test has"):
        lm_eval.check(result, result.tokens + 1, "test")

    # a normalised distribution that gives </s> probability 0: fairseq would leave every </s> out
    def no_end_of_sentence(self, net_output, log_probs, sample=None):
        lprobs = original(self, net_output, True, sample)
        lprobs[..., self.dictionary.eos()] = float("-inf")
        lprobs = lprobs.log_softmax(-1)
        return lprobs if log_probs else lprobs.exp()

    monkeypatch.setattr(TemperatureHeadDecoderMixin, "get_normalized_probs", no_end_of_sentence)
    eval_lm_logger = logging.getLogger("fairseq_cli.eval_lm")
    assert not eval_lm_logger.filters  # the plugin imported: stock's logger as it was
    with caplog.at_level(logging.INFO, logger="fairseq_cli.eval_lm"):
        result = eval_lm_api(toy_data["lm_bin"], trained["lstm-mos-ct"][0] / "checkpoint_last.pt")
    skipped = [m for m in caplog.messages if m.startswith("skipping tokens with inf scores:")]
    assert skipped  # fairseq's message, formatted (its tokens are </s>, which fairseq prints as "")
    assert not eval_lm_logger.filters  # stock fairseq-eval-lm afterwards: its own message again
    lines = len((toy_data["raw"] / "test.tgt").read_text().splitlines())
    assert result.max_log_normalizer < 1e-5 and result.tokens_not_finite == lines
    with pytest.raises(ValueError, match=f"{lines} of the {result.tokens} tokens have probability 0 or NaN"):
        lm_eval.check(result, result.tokens, "test")

    # a NaN anywhere is reported as NaN and refused
    monkeypatch.setattr(
        TemperatureHeadDecoderMixin,
        "get_normalized_probs",
        lambda self, net_output, log_probs, sample=None: (
            original(self, net_output, log_probs, sample) * float("nan")
        ),
    )
    result = eval_lm_api(toy_data["lm_bin"], trained["lstm-mos-ct"][0] / "checkpoint_last.pt")
    assert math.isnan(result.max_log_normalizer) and result.tokens_not_finite == result.tokens
    with pytest.raises(
        ValueError, match=f"{result.tokens} of the {result.tokens} tokens have probability 0 or NaN"
    ):
        lm_eval.check(result, result.tokens, "test")
    with pytest.raises(ValueError, match="reaches nan nats"):
        lm_eval.check(result._replace(tokens_not_finite=0), result.tokens, "test")


def test_a_context_window_changes_the_conditioning_not_the_scored_tokens(toy_data, trained):
    checkpoint = trained["lstm-mos-ct"][0] / "checkpoint_last.pt"
    _, count, loss, _ = eval_lm(toy_data["lm_bin"], checkpoint, "--tokens-per-sample", "64")
    _, windowed, windowed_loss, _ = eval_lm(
        toy_data["lm_bin"], checkpoint, "--tokens-per-sample", "64", "--context-window", "32"
    )
    assert windowed == count and windowed_loss != loss


def test_learned_alpha_beta_move_and_stay_valid(trained):
    save_dir, _ = trained["transformer-adaptive-ct-learned"]
    state = torch.load(save_dir / "checkpoint_last.pt", weights_only=False)["model"]
    raw = {k: v for k, v in state.items() if k.endswith(("alpha_raw", "beta_raw"))}
    assert len(raw) == 2
    alpha, beta = (torch.nn.functional.softplus(raw[k]).item() for k in sorted(raw))
    assert alpha > 0 and beta > 0 and (abs(alpha - 1.0) > 1e-4 or abs(beta - 0.5) > 1e-4)


def test_resume_reproduces_the_uninterrupted_run(toy_data, trained, tmp_path, monkeypatch):
    monkeypatch.setenv("CTEMP_EXACT_RESUME", "1")  # the plugin's exact resume (opt-in)
    _, whole = trained["lstm-mos-ct"]
    args = HEADS["lstm-mos-ct"] + ["--no-epoch-checkpoints"]
    train(toy_data["lm_bin"], tmp_path, *args, epochs=1)
    resumed = train(toy_data["lm_bin"], tmp_path, *args, epochs=2).stdout
    assert "Loaded checkpoint" in resumed
    a, b = json_log_records(whole, "train")[-1], json_log_records(resumed, "train")[-1]
    assert a["epoch"] == b["epoch"] == 2
    for key in ("train_loss", "train_nll_loss", "train_tau_mean", "train_regularization"):
        assert a[key] == b[key], key


def test_two_process_cpu_training_with_c10d_matches_update_freq_2(toy_data, tmp_path):
    """The adaptive CT head runs every tail cluster at every step, so torch DDP (c10d) needs no
    unused-parameter search; fairseq's own adaptive_loss needs --ddp-backend legacy_ddp."""
    args = [
        cli("fairseq-train"),
        str(toy_data["lm_bin"]),
        *LM_TRAIN,
        *HEADS["transformer-adaptive-ct-learned"],
        "--dropout",
        "0",
        "--max-epoch",
        "1",
        "--no-save",
        "--save-dir",  # made even with --no-save: not in the working directory
        str(tmp_path),
    ]
    two = json_log_records(train_on_two_ranks(args, ["--ddp-backend", "pytorch_ddp"]), "train_inner")
    one = json_log_records(
        run_fairseq("fairseq-train", *args[1:], "--update-freq", "2", env=ONE_THREAD).stdout, "train_inner"
    )
    assert len(two) > 3
    assert_same_updates(two, one, ("loss", "nll_loss", "tau_mean", "tau_min", "tau_max", "gnorm"))


def test_interactive_and_generate_with_a_prefix(toy_data, trained):
    """Scores of sampled / searched tokens against an independent computation, at default and
    explicit temperatures: test_decoding_temperature."""
    prompts = (
        "\n".join(
            " ".join(line.split()[:3]) for line in (toy_data["raw"] / "test.tgt").read_text().splitlines()[:3]
        )
        + "\n"
    )
    checkpoint = trained["lstm-mos-ct"][0] / "checkpoint_last.pt"
    proc = run_fairseq(
        "fairseq-interactive",
        toy_data["lm_bin"],
        *("--user-dir", PLUGIN_DIR, "--task", "language_modeling", "--path", checkpoint),
        *("--cpu", "--max-len-b", "8", "--beam", "2"),
        input=prompts,
    )
    assert sum(line.startswith("H-") for line in proc.stdout.splitlines()) == 3
    generated = run_fairseq(
        "fairseq-generate",
        toy_data["lm_bin"],
        "--user-dir",
        PLUGIN_DIR,
        "--task",
        "language_modeling",
        "--path",
        checkpoint,
        "--cpu",
        "--sampling",
        "--beam",
        "1",
        "--prefix-size",
        "3",
        "--max-len-b",
        "8",
        "--batch-size",
        "16",
        "--gen-subset",
        "test",
        "--sample-break-mode",
        "eos",
        "--required-batch-size-multiple",
        "1",
        "--num-workers",
        "0",
    ).stdout
    assert sum(line.startswith("H-") for line in generated.splitlines()) == 80


def test_ct_cross_entropy_refuses_a_stock_model_before_training(toy_data, tmp_path):
    proc = run_fairseq(
        "fairseq-train",
        toy_data["lm_bin"],
        *LM_TRAIN,
        "--arch",
        "transformer_lm",
        "--decoder-layers",
        "1",
        "--decoder-embed-dim",
        "32",
        "--decoder-ffn-embed-dim",
        "64",
        "--decoder-attention-heads",
        "2",
        "--max-epoch",
        "1",
        "--save-dir",
        tmp_path,
        check=False,
    )
    assert proc.returncode != 0
    assert "--criterion ct_cross_entropy needs a model with a temperature head" in proc.stdout
    assert "train_inner" not in proc.stdout and not list(tmp_path.glob("*.pt"))  # no crash.pt


def test_bad_option_stops_fairseq_train_before_any_step(toy_data, tmp_path):
    proc = run_fairseq(
        "fairseq-train",
        toy_data["lm_bin"],
        *LM_TRAIN,
        "--arch",
        "ct_transformer_lm_tiny",
        "--ct-beta",
        "0",
        "--max-epoch",
        "1",
        "--save-dir",
        tmp_path,
        check=False,
    )
    assert proc.returncode != 0 and "--ct-beta must be a finite number > 0, got 0" in proc.stdout
    assert not list(tmp_path.glob("*.pt"))
