"""ct_transformer, the contextual-temperature translator: in process, the registered model against
float64 references (its head from the decoder state, normalisation, causality, incremental = full
decoding with beam reordering, tau = 1 equals fairseq's transformer on the same weights, the loss of
ct_cross_entropy on translation batches, the ALT presets, bad options); through fairseq's CLIs
(in this process, conftest.run_fairseq, but one fairseq-generate), training and exact resume, safe checkpoint loading, and every decoding path against the raw outputs
of fairseq's own loader (greedy = step-by-step argmax of full forward passes)."""

import argparse
import math
import os
import shutil
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from conftest import (
    FAST_DECODE,
    PLUGIN_DIR,
    TINY_DIMS,
    TRAIN_DEFAULTS,
    RawModel,
    assert_scored_at,
    cli_hypotheses,
    json_log_records,
    run_cli,
    run_fairseq,
)
from fairseq import options, tasks
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.data import Dictionary
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models.transformer import TransformerModel

from fairseq_ctemp.criterions.ct_cross_entropy import ContextualTemperatureCrossEntropy
from fairseq_ctemp.option_errors import is_option_error

TINY = ["--arch", "ct_transformer_tiny"]
VARIANTS = {
    "softmax-ct": TINY,
    "softmax-ct-shared-all-learned": [*TINY, "--share-all-embeddings", "--ct-learn-alpha-beta"],
    "softmax-tanh-plus-lambda-tied": [
        *TINY,
        "--share-decoder-input-output-embed",
        "--ct-normalization",
        "tanh_plus_lambda",
    ],
    "mos-lambda-tanh-tied": [
        *TINY,
        "--output-head",
        "mos",
        "--mos-components",
        "3",
        "--ct-normalization",
        "lambda_tanh",
        "--ct-lambda",
        "3",
        "--share-decoder-input-output-embed",
    ],
    "softmax-constant": [*TINY, "--ct-normalization", "constant", "--ct-constant", "1.7"],
    "softmax-none": [*TINY, "--ct-normalization", "none"],
}


def parse(data, *extra, criterion="ct_cross_entropy"):
    argv = [str(data), "--user-dir", PLUGIN_DIR, "--task", "translation", "--cpu", "--criterion", criterion]
    return options.parse_args_and_arch(options.get_training_parser(), [*argv, *extra])


def build(data, *extra, criterion="ct_cross_entropy", seed=1):
    """(options, task, model, criterion) through fairseq's argparse path (the CLIs' hydra path is
    driven by the end-to-end tests below)."""
    args = parse(data, *extra, criterion=criterion)
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    return args, task, task.build_model(args).eval(), task.build_criterion(args)


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request, toy_data):
    args, task, model, _ = build(toy_data["bin"], *VARIANTS[request.param])
    with torch.no_grad():  # away from the initialisation, so that tau and the MoS prior vary
        for p in model.decoder.output_head.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return request.param, args, task, model


def tokens(task, batch=3, length=9, seed=0):
    d = task.target_dictionary
    g = torch.Generator().manual_seed(seed)
    return torch.randint(d.nspecial, len(d), (batch, length), generator=g)


def source(task, batch=3, length=11):
    return tokens(task, batch, length, seed=100), torch.full((batch,), length)


def alpha_beta(model, args):
    """alpha, beta of the softmax normalisation: the options, or softplus of the learned raw values."""
    if not args.ct_learn_alpha_beta:
        return args.ct_alpha, args.ct_beta
    t = model.decoder.output_head.temperature
    return F.softplus(t.alpha_raw.detach().double()), F.softplus(t.beta_raw.detach().double())


def head_reference(model, features, args):
    """log p of every position from the decoder's features, in float64, from the definitions
    (docs/contextual_temperature.md) and the head's weights, not from the head's code."""
    head, h = model.decoder.output_head, features.double()
    norm = args.ct_normalization
    if norm in ("none", "constant"):
        tau = 1.0 if norm == "none" else args.ct_constant
    else:
        t = head.temperature
        mu = h @ t.down.weight.double().t() @ t.up.weight.double().t()
        if norm == "softmax":
            alpha, beta = alpha_beta(model, args)
            tau = (torch.softmax(mu, -1) + alpha) / beta
        elif norm == "lambda_tanh":
            tau = args.ct_lambda ** torch.tanh(mu)
        else:
            tau = torch.tanh(mu) + args.ct_lambda
    weight = head.output.weight.double()
    if args.output_head == "softmax":
        return torch.log_softmax(h @ weight.t() / tau, -1)
    prior = torch.log_softmax(h @ head.prior.weight.double().t(), -1)  # (..., M)
    latent = torch.tanh(h @ head.latent.weight.double().t() + head.latent.bias.double())
    latent = latent.view(*h.shape[:-1], args.mos_components, -1)
    logits = latent @ weight.t()  # (..., M, V); no bias, as fairseq's output projection
    tau = tau.unsqueeze(-2) if torch.is_tensor(tau) else tau
    return torch.logsumexp(prior.unsqueeze(-1) + torch.log_softmax(logits / tau, -1), dim=-2)


# ------------------------------------------------------------------------------------- in process
def test_the_output_layer_is_the_heads_distribution_of_the_decoder_state(variant, toy_data):
    name, args, task, model = variant
    src, lengths = source(task)
    with torch.no_grad():
        out = model(src, lengths, tokens(task))
        log_probs = model.get_normalized_probs(out, log_probs=True)
    assert out[0].shape[-1] == model.decoder.output_embed_dim  # features, not logits
    assert log_probs.dtype == torch.float32 and log_probs.shape[-1] == len(task.target_dictionary)
    torch.testing.assert_close(log_probs.double(), head_reference(model, out[0], args), atol=1e-5, rtol=0)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(log_probs.shape[:-1]), atol=1e-5, rtol=0)
    embed = model.decoder.embed_tokens.weight
    tied = "tied" in name or "shared" in name
    assert (model.decoder.output_head.output.weight is embed) == tied
    assert (model.encoder.embed_tokens.weight is embed) == ("shared-all" in name)


def test_prediction_at_t_depends_only_on_target_tokens_before_t(variant):
    _, _, task, model = variant
    src, lengths = source(task)
    prev = tokens(task)
    with torch.no_grad():
        before = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
        for t in (1, 4, 8):
            changed = prev.clone()
            changed[:, t:] = tokens(task, length=prev.size(1) - t, seed=t + 1)
            after = model.get_normalized_probs(model(src, lengths, changed), log_probs=True)
            torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-5, rtol=1e-5)
            assert not torch.allclose(after[:, t:], before[:, t:])


def test_incremental_decoding_with_beam_reordering_gives_the_full_forward_distribution(variant):
    """Step by step with fairseq's incremental state, the hypotheses (4 beams of one sentence)
    reordered mid-way as beam search does, against full forward passes of the reordered prefixes."""
    _, _, task, model = variant
    src, lengths = (x[:1].expand(4, *x.shape[1:]) for x in source(task))
    prev = tokens(task, batch=4, length=7)
    order = torch.tensor([2, 0, 0, 3])  # hypotheses 0 and 1 continue hypothesis 0, ...
    with torch.no_grad():
        encoder_out = model.encoder(src, src_lengths=lengths)
        state, steps = {}, []
        for t in range(prev.size(1)):
            if t == 3:
                model.decoder.reorder_incremental_state_scripting(state, order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, order)
                steps = [step[order] for step in steps]
                prev = torch.cat([prev[order, :t], prev[:, t:]], 1)
            out = model.decoder(prev[:, : t + 1], encoder_out=encoder_out, incremental_state=state)
            steps.append(model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True))
        full = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


STOCK_EQUIVALENTS = {  # (ct_transformer options, the stock transformer's)
    "untied": (["--ct-normalization", "none"], []),
    "tied-tau-constant-1": (
        ["--ct-normalization", "constant", "--ct-constant", "1", "--share-decoder-input-output-embed"],
        ["--share-decoder-input-output-embed"],
    ),
    "shared-all": (["--ct-normalization", "none", "--share-all-embeddings"], ["--share-all-embeddings"]),
}


@pytest.mark.parametrize("case", sorted(STOCK_EQUIVALENTS))
def test_without_contextual_temperature_it_is_fairseqs_transformer_on_the_same_weights(toy_data, case):
    ours, theirs = STOCK_EQUIVALENTS[case]
    _, task, stock, _ = build(
        toy_data["bin"], "--arch", "transformer", *TINY_DIMS, *theirs, criterion="cross_entropy"
    )
    _, _, model, _ = build(toy_data["bin"], "--arch", "ct_transformer", *TINY_DIMS, *ours, seed=2)
    state = stock.state_dict()
    state["decoder.output_head.output.weight"] = state.pop("decoder.output_projection.weight")
    model.load_state_dict(state)  # strict: the same body, parameter for parameter
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in stock.parameters())
    src, lengths = source(task)
    prev = tokens(task)
    with torch.no_grad():
        expected = stock.get_normalized_probs(stock(src, lengths, prev), log_probs=True)
        got = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_fairseqs_default_initialisation_of_the_untied_projection(toy_data):
    _, _, model, _ = build(toy_data["bin"], *TINY, "--ct-normalization", "none", seed=3)
    weight = model.decoder.output_head.output.weight
    assert abs(weight.std().item() - weight.size(1) ** -0.5) < 0.02  # normal(0, d^-0.5)


def batch(task, subset="valid"):
    task.load_dataset(subset)
    itr = task.get_batch_iterator(task.dataset(subset), max_tokens=300).next_epoch_itr(shuffle=False)
    return next(iter(itr))


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_ct_cross_entropy_on_translation_batches(variant, toy_data, label_smoothing):
    _, args, task, model = variant
    criterion = ContextualTemperatureCrossEntropy(task, label_smoothing=label_smoothing)
    sample = batch(task)
    with torch.no_grad():
        loss, sample_size, log = criterion(model, sample)
        features = model(**sample["net_input"])[0]
    reference = head_reference(model, features, args)
    target, pad = sample["target"], task.target_dictionary.pad()
    keep = target.ne(pad)
    nll = -reference.gather(-1, target[..., None])[..., 0]
    smoothed, _ = label_smoothed_nll_loss(
        reference, target[..., None], label_smoothing, ignore_index=pad, reduce=False
    )
    # the papers' loss scale, mean_v tau, from the options and the weights
    norm, V = args.ct_normalization, len(task.target_dictionary)
    if norm == "none":
        scale = torch.ones_like(nll)
    elif norm == "constant":
        scale = torch.full_like(nll, args.ct_constant)
    elif norm == "softmax":  # q sums to 1 over the V words
        alpha, beta = alpha_beta(model, args)
        scale = torch.full_like(nll, float((alpha + 1 / V) / beta))
    else:
        t = model.decoder.output_head.temperature
        mu = features.double() @ t.down.weight.double().t() @ t.up.weight.double().t()
        tau = 3.0 ** torch.tanh(mu) if norm == "lambda_tanh" else torch.tanh(mu) + args.ct_lambda
        scale = tau.mean(-1)
    assert sample_size == sample["ntokens"] == int(keep.sum())
    torch.testing.assert_close(log["nll_loss"].double(), nll[keep].sum(), rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(loss.double(), (smoothed[..., 0] * scale)[keep].sum(), rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(log["tau_mean"].double(), scale[keep].sum(), rtol=1e-5, atol=1e-3)
    if norm not in ("none", "constant"):
        assert 0 < log["tau_min"] < log["tau_max"]


# The ALT recipe's presets (fairseq_ctemp/alt/presets.py) and the ct_transformer architectures named after them
PRESET_ARCHES = {"mini": "ct_transformer_alt_mini", "base": "ct_transformer_alt_base"}


def alt_presets():
    from fairseq_ctemp.alt.presets import PRESETS

    return PRESETS


@pytest.mark.parametrize("preset", sorted(PRESET_ARCHES))
def test_alt_architectures_are_the_alt_recipes_transformers(toy_data, preset):
    """Every option of fairseq's transformer takes the same value under --arch ct_transformer_alt_*
    as under the ALT preset's own fairseq-train options."""
    model_options = argparse.ArgumentParser()
    TransformerModel.add_args(model_options)
    train = list(alt_presets()[preset].train)
    rest, i = [], 0  # the preset's options that are not the model's: optimizer, batches, ...
    while i < len(train):
        action = model_options._option_string_actions.get(train[i])
        if train[i] == "--arch":
            i += 2
        elif action is not None:
            i += 1 + (action.nargs != 0)
        else:
            rest.append(train[i])
            i += 1
    stock = parse(toy_data["bin"], *train, criterion="cross_entropy")
    ours = parse(toy_data["bin"], "--arch", PRESET_ARCHES[preset], *rest)
    assert stock.arch == "transformer" and len(rest) < len(train) - 6
    differ = {
        a.dest: (getattr(stock, a.dest), getattr(ours, a.dest))
        for a in model_options._actions
        if a.dest != "help" and getattr(stock, a.dest, None) != getattr(ours, a.dest, None)
    }
    assert not differ, differ


def other_dictionary_task(toy_data):
    """A translation task whose source dictionary is not the target's."""
    args = parse(toy_data["bin"], *TINY)
    task = tasks.setup_task(args)
    src = Dictionary.load(str(toy_data["bin"] / "dict.src.txt"))
    src.add_symbol("only-in-the-source")
    return type(task)(task.cfg, src, task.target_dictionary), args


BAD_OPTIONS = [
    (["--output-head", "adaptive"], "--output-head must be one of softmax, mos for ct_transformer"),
    (
        ["--output-head", "mos", "--adaptive-softmax-cutoff", "50,100"],
        "--adaptive-softmax-cutoff is not used by ct_transformer",
    ),
    (
        ["--share-all-embeddings", "--decoder-embed-dim", "48", "--decoder-attention-heads", "2"],
        r"--share-all-embeddings needs --encoder-embed-dim \(32\) equal to --decoder-embed-dim \(48\)",
    ),
    (
        ["--share-decoder-input-output-embed", "--decoder-output-dim", "48"],
        r"--share-decoder-input-output-embed needs --decoder-output-dim \(48\) equal to --decoder-embed-dim \(32\)",
    ),
    (
        ["--encoder-attention-heads", "3"],
        r"--encoder-embed-dim 32 must be a multiple of --encoder-attention-heads 3 \(an integer >= 1\)",
    ),
    (["--ct-rank", "0"], r"--ct-rank \(Q\) must be an integer >= 1, got 0"),
    (["--ct-beta", "-1"], "--ct-beta must be a finite number > 0, got -1"),
    (
        ["--output-head", "mos", "--mos-latent-dropout", "1"],
        r"--mos-latent-dropout must be in \[0, 1\), got 1",
    ),
]


@pytest.mark.parametrize("extra, message", BAD_OPTIONS, ids=[m[:40] for _, m in BAD_OPTIONS])
def test_bad_options_are_one_line_errors_when_the_model_is_built(toy_data, extra, message):
    with pytest.raises(ValueError, match=message) as error:
        build(toy_data["bin"], *TINY, *extra)
    assert is_option_error(error.value)  # what fairseq's CLIs print as one line


def test_shared_embeddings_need_one_dictionary(toy_data):
    task, args = other_dictionary_task(toy_data)
    args.share_all_embeddings = True
    with pytest.raises(
        ValueError, match=r"--share-all-embeddings needs one dictionary .*--joined-dictionary"
    ) as e:
        task.build_model(args)
    assert is_option_error(e.value)
    args.share_all_embeddings = False
    assert task.build_model(args) is not None  # separate dictionaries are fine otherwise


@pytest.mark.parametrize(
    "arch, criterion, message",
    [
        (TINY, "tempered_ce", "--criterion tempered_ce needs .* use --criterion ct_cross_entropy"),
        (
            ["--arch", "transformer", *TINY_DIMS],
            "ct_cross_entropy",
            "--criterion ct_cross_entropy needs a model with a temperature head: --arch ct_transformer",
        ),
    ],
)
def test_criteria_refuse_the_wrong_model_when_they_are_built(toy_data, arch, criterion, message):
    args = convert_namespace_to_omegaconf(parse(toy_data["bin"], *arch, criterion=criterion))
    task = tasks.setup_task(args.task)
    with pytest.raises(ValueError, match=message) as error:
        task.build_criterion(args.criterion)
    assert is_option_error(error.value)


def test_an_unknown_normalisation_is_refused_by_the_parser(toy_data, capsys):
    with pytest.raises(SystemExit):
        parse(toy_data["bin"], *TINY, "--ct-normalization", "sigmoid")
    assert "argument --ct-normalization: invalid choice: 'sigmoid'" in capsys.readouterr().err


# ---------------------------------------------------------------------------- through the real CLIs
TRAIN = [
    "--user-dir",
    PLUGIN_DIR,
    *TINY,
    "--share-all-embeddings",
    # tau in (1/4, 4), varying from the start: decoding at an explicit X by p^(1/X) can be told
    # apart from dividing the decoder's features by X (with the softmax normalisation's
    # tau = (q + 1) / 0.5 and a near-uniform q, tau is almost the constant 2, and the two agree)
    "--ct-normalization",
    "lambda_tanh",
    "--ct-lambda",
    "4",
    "--criterion",
    "ct_cross_entropy",
    "--label-smoothing",
    "0.1",
    *TRAIN_DEFAULTS,
]
ATOL_CLI = 2e-3  # scores printed with 4 decimals in base 2


def train(data, save_dir, epochs):
    return run_fairseq("fairseq-train", data, *TRAIN, "--max-epoch", epochs, "--save-dir", save_dir).stdout


EPOCHS, RESUME_AT = 8, 4  # after 8 epochs (~50 updates) most greedy translations end before max_len


@pytest.fixture(scope="module")
def trained(toy_data, tmp_path_factory):
    """ct_transformer_tiny trained for EPOCHS epochs, and resumed from a copy of the checkpoint that
    run saved after epoch RESUME_AT, as checkpoint_last.pt: {name: (save dir, fairseq-train output)}."""
    whole, resumed = tmp_path_factory.mktemp("ct-whole"), tmp_path_factory.mktemp("ct-resumed")
    whole_log = train(toy_data["bin"], whole, EPOCHS)
    shutil.copyfile(whole / f"checkpoint{RESUME_AT}.pt", resumed / "checkpoint_last.pt")
    with mock.patch.dict(os.environ, {"CTEMP_EXACT_RESUME": "1"}):  # the plugin's exact resume (opt-in)
        resumed_log = train(toy_data["bin"], resumed, EPOCHS)
    return {"whole": (whole, whole_log), "resumed": (resumed, resumed_log)}


@pytest.mark.e2e
def test_training_logs_the_loss_scale_and_tau_and_resumes_exactly(trained):
    _, whole = trained["whole"]
    _, resumed = trained["resumed"]
    assert "Loaded checkpoint" in resumed and "Loaded checkpoint" not in whole
    saved = json_log_records(whole, "train")[RESUME_AT - 1]
    first = json_log_records(resumed, "train_inner")[0]
    assert saved["epoch"] == RESUME_AT and first["epoch"] == RESUME_AT + 1
    assert int(first["num_updates"]) == int(saved["train_num_updates"]) + 1
    a, b = json_log_records(whole, "train")[-1], json_log_records(resumed, "train")[-1]
    assert a["epoch"] == b["epoch"] == EPOCHS
    for key in ("loss", "nll_loss", "loss_scale", "tau_mean", "tau_min", "tau_max"):
        assert a[f"train_{key}"] == b[f"train_{key}"], key
    weights = [torch.load(trained[n][0] / "checkpoint_last.pt", weights_only=True)["model"] for n in trained]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    valid = json_log_records(whole, "valid")[-1]
    assert (
        1 / 4
        < float(valid["valid_tau_min"])
        < float(valid["valid_tau_mean"])
        < float(valid["valid_tau_max"])
        < 4
    )
    assert float(valid["valid_loss_scale"]) == pytest.approx(float(valid["valid_tau_mean"]))
    assert float(valid["valid_ppl"]) == pytest.approx(2 ** float(valid["valid_nll_loss"]), rel=0.01)


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["checkpoint_last.pt", "checkpoint_best.pt"])
def test_checkpoints_load_under_torchs_safe_loading(trained, name):
    state = torch.load(trained["resumed"][0] / name, weights_only=True)  # both written by a resumed run
    assert state["args"] is None and state["cfg"]["model"].arch == "ct_transformer_tiny"
    assert "decoder.output_head.temperature.up.weight" in state["model"]


@pytest.fixture(scope="module")
def checkpoint(trained):
    return trained["whole"][0] / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def reference(checkpoint, toy_data):
    """The checkpoint through fairseq's own loader; its float64 log-probabilities of a (target
    prefix, source) pair are computed once (each is checked at several temperatures)."""
    reference, cache = RawModel(checkpoint, toy_data["bin"]), {}
    log_probs = reference.log_probs

    def cached(prev, src=None):
        key = (tuple(prev.tolist()), None if src is None else tuple(src.tolist()))
        if key not in cache:
            cache[key] = log_probs(prev, src)
        return cache[key]

    reference.log_probs = cached
    return reference


def in_process(command, argv):
    """stdout of a fairseq console script run in this process (conftest.run_fairseq; a subprocess
    costs a Python + torch + fairseq start, ~5 s; one path below runs as a subprocess)."""
    return run_fairseq(command, *argv).stdout


def generate(toy_data, checkpoint, *extra, subprocess=False):
    argv = [toy_data["bin"], "--path", checkpoint, "--user-dir", PLUGIN_DIR, "--gen-subset", "test"]
    argv += [*FAST_DECODE, "--num-workers", "0", *extra]  # no loader process forked from this one
    if subprocess:
        return run_cli("fairseq-generate", *argv).stdout
    return in_process("fairseq-generate", argv)


def features_divided(reference, tokens, src, t):
    """log2 p of ``tokens`` if X divided the decoder's output (features, for this model) as fairseq
    alone would do: the head's distribution of features / X, not p^(1/X)."""
    prev = torch.cat([torch.tensor([reference.dictionary.eos()]), tokens[:-1]])
    with torch.no_grad():
        features = reference.model(src[None], torch.tensor([len(src)]), prev[None])[0]
        log_probs = reference.model.decoder.output_head(features / t)[0][0].double()
    return log_probs.gather(1, tokens[:, None])[:, 0] / math.log(2)


def check_scores(output, reference, t, n_expected):
    """Every token fairseq reports is scored at log softmax(log p / t) of the float64 reference,
    measurably not at t * 1.5 or 1 and not at the head's distribution of the features / t."""
    hypos = cli_hypotheses(output, reference.dictionary)
    assert len(hypos) == n_expected, output[-3000:]
    for _, src, tokens, scores in hypos:
        assert_scored_at(scores, [(reference, t)], tokens, src, atol=ATOL_CLI, base=2)
    if t != 1:
        wrong = [
            torch.tensor(scores) - features_divided(reference, tokens, src, t)
            for _, src, tokens, scores in hypos
        ]
        assert torch.cat(wrong).abs().max() > 20 * ATOL_CLI, "the check cannot tell the paths apart"
    return hypos


GENERATE = {  # name: (options, temperature of the rule, hypotheses)
    "beam-nbest": (["--beam", "4", "--nbest", "2"], 1.0, 160),
    "beam-explicit": (["--beam", "4", "--temperature", "0.5"], 0.5, 80),
    "sampling-explicit": (
        ["--sampling", "--sampling-topk", "5", "--beam", "1", "--temperature", "1.6", "--seed", "3"],
        1.6,
        80,
    ),
    "score-reference-explicit": (["--score-reference", "--temperature", "2"], 2.0, 80),
}


@pytest.mark.e2e
@pytest.mark.parametrize("path", sorted(GENERATE))
def test_fairseq_generate_follows_the_decoding_rule(toy_data, checkpoint, reference, path):
    extra, t, n = GENERATE[path]
    output = generate(toy_data, checkpoint, *extra, subprocess=path == "beam-nbest")
    check_scores(output, reference, t, n)


def greedy_reference(reference, src, max_len):
    """Greedy decoding by full forward passes of the growing prefix (no incremental state), with
    fairseq's constraints: never pad, no end before the first token, end at max_len."""
    d = reference.dictionary
    prefix = [d.eos()]
    for step in range(max_len + 1):
        log_probs = reference.log_probs(torch.tensor(prefix), src)[-1].clone()
        log_probs[d.pad()] = -math.inf
        if step == 0:
            log_probs[d.eos()] = -math.inf
        if step >= max_len:
            log_probs[torch.arange(len(d)) != d.eos()] = -math.inf
        prefix.append(int(log_probs.argmax()))
        if prefix[-1] == d.eos():
            break
    return prefix[1:]


@pytest.mark.e2e
def test_greedy_fairseq_generate_is_the_step_by_step_argmax_of_full_forward_passes(
    toy_data, checkpoint, reference
):
    max_len = 30
    out = generate(toy_data, checkpoint, "--beam", "1", "--max-len-a", "0", "--max-len-b", max_len)
    hypos = check_scores(out, reference, 1.0, 80)
    for i, src, tokens, _ in hypos:
        assert tokens.tolist() == greedy_reference(reference, src, max_len), i
    ended = sum(len(tokens) <= max_len for _, _, tokens, _ in hypos)  # chose </s> (batch shrinks)
    assert 40 <= ended < 80, ended  # and some ran to max_len


@pytest.mark.e2e
def test_fairseq_interactive_follows_the_decoding_rule(toy_data, checkpoint, reference, tmp_path):
    source = tmp_path / "input.src"
    source.write_text("\n".join((toy_data["raw"] / "test.src").read_text().splitlines()[:4]) + "\n")
    argv = [toy_data["bin"], "--path", checkpoint, "--user-dir", PLUGIN_DIR, "-s", "src", "-t", "tgt"]
    argv += ["--input", source, "--cpu", "--num-workers", "0", "--max-len-b", "10", "--beam", "2"]
    argv += ["--temperature", "1.5"]
    check_scores(in_process("fairseq-interactive", argv), reference, 1.5, 4)


@pytest.mark.e2e
def test_the_hub_follows_the_decoding_rule_call_by_call(toy_data, checkpoint, reference):
    hub = TransformerModel.from_pretrained(
        str(checkpoint.parent), checkpoint.name, str(toy_data["bin"]), user_dir=PLUGIN_DIR
    )
    src = hub.encode("s1 s2 s3 s4 s5")
    for kwargs, t in (
        ({}, 1.0),
        ({"temperature": 0.7}, 0.7),
        ({}, 1.0),
        ({"beam": 1, "sampling": True, "temperature": 2.5}, 2.5),
    ):
        hypos = hub.generate([src], **{"beam": 3, "max_len_b": 8, **kwargs})[0]
        for hypo in hypos:
            scores, tokens = hypo["positional_scores"].double(), hypo["tokens"]
            assert_scored_at(scores, [(reference, t)], tokens, src)
            if t != 1:  # natural log here: the features-divided path is measurably elsewhere
                wrong = scores - features_divided(reference, tokens, src, t) * math.log(2)
                assert wrong.abs().max() > 20 * 1e-4
    assert isinstance(hub.translate("s1 s2 s3"), str)
