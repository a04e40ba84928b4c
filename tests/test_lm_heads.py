"""Contextual-temperature LMs, in process: the adaptive-softmax head against a slow reference, and
the guards against impossible perplexities on the real registered models (normalisation over the
full vocabulary for every head, causality, incremental = full decoding), the loss, bad options."""

import copy
import functools
import math
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import LM_HEAD_ARCHES, PLUGIN_DIR, TINY_LM
from fairseq import options, tasks
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.modules.adaptive_softmax import AdaptiveSoftmax

from fairseq_ctemp.modules import (
    AdaptiveSoftmaxHead,
    ContextualTemperature,
    MixtureOfSoftmaxesHead,
    TemperedSoftmaxHead,
)
from fairseq_ctemp.modules.adaptive_softmax_head import temperature_entries

NORMALIZATIONS = [None, "softmax", "lambda_tanh", "tanh_plus_lambda", "constant"]
V, D, CUTOFF = 50, 16, [10, 30]


def adaptive_head(normalization, learn=False):
    torch.manual_seed(0)
    softmax = AdaptiveSoftmax(V, D, list(CUTOFF), dropout=0.0)
    temperature = (
        None
        if normalization is None
        else ContextualTemperature(
            D,
            temperature_entries(V, CUTOFF),
            rank=4,
            normalization=normalization,
            alpha=0.3,
            beta=0.7,
            learn_alpha_beta=learn,
            lam=3.0,
            constant=1.7,
        )
    )
    return AdaptiveSoftmaxHead(softmax, temperature).eval()


def reference_log_probs(head, h):
    """The definition, one position and one word at a time, in probability space."""
    t, asm, c0 = head.temperature, head.adaptive_softmax, CUTOFF[0]
    bounds = CUTOFF + [V]
    out = []
    for x in h.reshape(-1, D):
        z_head = asm.head(x[None])[0]
        z_tail = [asm.tail[k](x[None])[0] for k in range(2)]
        if t is None:
            tau_head, tau_tail = torch.ones_like(z_head), [torch.ones_like(z) for z in z_tail]
        elif t.normalization == "constant":
            tau_head, tau_tail = torch.full_like(z_head, 1.7), [torch.full_like(z, 1.7) for z in z_tail]
        else:
            mu = x @ t.down.weight.t() @ t.up.weight.t()  # all V + 2 entries
            head_size = c0 + 2
            mu_head = mu[:head_size]
            mu_tail = [mu[head_size + bounds[k] - c0 : head_size + bounds[k + 1] - c0] for k in range(2)]
            if t.normalization == "softmax":
                alpha, beta = t.alpha_beta()
                q_head = torch.softmax(mu_head, 0)
                tau_head = (q_head + alpha) / beta
                tau_tail = [(q_head[c0 + k] * torch.softmax(mu_tail[k], 0) + alpha) / beta for k in range(2)]
            elif t.normalization == "lambda_tanh":
                tau_head, tau_tail = 3.0 ** torch.tanh(mu_head), [3.0 ** torch.tanh(m) for m in mu_tail]
            else:
                tau_head, tau_tail = torch.tanh(mu_head) + 3.0, [torch.tanh(m) + 3.0 for m in mu_tail]
        p_head = torch.softmax(z_head / tau_head, 0)
        p = []
        for v in range(V):
            if v < c0:
                p.append(p_head[v])
            else:
                k = 0 if v < bounds[1] else 1
                p.append(p_head[c0 + k] * torch.softmax(z_tail[k] / tau_tail[k], 0)[v - bounds[k]])
        out.append(torch.log(torch.stack(p)))
    return torch.stack(out).view(*h.shape[:-1], V)


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_adaptive_head_matches_the_slow_reference_in_value_and_gradient(normalization):
    head = adaptive_head(normalization, learn=normalization == "softmax")
    h = (torch.randn(2, 3, D) * 3).requires_grad_()
    target = torch.randint(0, V, (2, 3))
    ours, _ = head(h)
    ref = reference_log_probs(head, h)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    scores, _ = head.score(h, target)
    torch.testing.assert_close(scores, ref.gather(-1, target[..., None])[..., 0], atol=1e-5, rtol=1e-5)
    params = [h] + [p for p in head.parameters() if p.requires_grad]
    grads = torch.autograd.grad(scores.sum(), params, allow_unused=True)
    ref_grads = torch.autograd.grad(ref.gather(-1, target[..., None]).sum(), params, allow_unused=True)
    for g, r in zip(grads, ref_grads):
        if r is None:
            assert g is None or g.abs().max() == 0
        else:
            torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)


def test_adaptive_head_without_temperature_is_fairseqs_adaptive_softmax():
    head = adaptive_head(None)
    h = torch.randn(4, 5, D)
    torch.testing.assert_close(head(h)[0], head.adaptive_softmax.get_log_prob(h, None))


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
def test_adaptive_head_loss_scale_and_tau_range(normalization):
    head = adaptive_head(normalization)
    h = torch.randn(3, 4, D) * 5
    _, stats = head(h)
    tau = head.temperatures(h)
    if normalization is None:
        assert tau is None and (stats.scale == 1).all()
        return
    assert tau.shape == (3, 4, V) and (tau > 0).all()
    if normalization == "softmax":  # q sums to 1 over V, so mean_v tau = (alpha + 1/V) / beta exactly
        torch.testing.assert_close(tau.mean(-1), torch.full((3, 4), (0.3 + 1 / V) / 0.7))
        torch.testing.assert_close(stats.scale, tau.mean(-1))
        assert tau.min() >= 0.3 / 0.7 - 1e-6 and tau.max() <= 1.3 / 0.7 + 1e-6
    assert stats.min <= tau.min() + 1e-6 and stats.max >= tau.max() - 1e-6


def test_adaptive_head_gives_every_tail_cluster_a_gradient_even_without_targets_in_it():
    head = adaptive_head("softmax").train()
    scores, _ = head.score(torch.randn(2, 3, D), torch.zeros(2, 3, dtype=torch.long))  # all shortlist
    scores.sum().backward()
    for k in range(2):
        assert all(p.grad is not None for p in head.adaptive_softmax.tail[k].parameters())


@pytest.mark.parametrize(
    "cutoff,message", [([30, 10], "strictly increasing"), ([10, 60], r"\[1, 50\]"), ([0, 10], r"\[1, 50\]")]
)
def test_bad_cutoffs_are_refused_with_the_option_name(cutoff, message):
    from fairseq_ctemp.modules.adaptive_softmax_head import check_cutoffs

    with pytest.raises(ValueError, match=r"--adaptive-softmax-cutoff must be .*" + message):
        check_cutoffs(cutoff, 50)


# ---- the registered models, built through fairseq's own argument parsing ----

ARCHES = LM_HEAD_ARCHES  # every head and normalisation (tests/conftest.py)


def parse(data, *extra, criterion="ct_cross_entropy"):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(
        parser,
        [
            str(data),
            "--user-dir",
            PLUGIN_DIR,
            "--task",
            "language_modeling",
            "--tokens-per-sample",
            "32",
            "--criterion",
            criterion,
            "--cpu",
            *extra,
        ],
    )


@functools.cache
def composed(data, extra, criterion):
    """fairseq's configuration of a command line (hydra: ~0.5 s each), composed once per line."""
    return convert_namespace_to_omegaconf(parse(data, *extra, criterion=criterion))


def build(data, *extra, criterion="ct_cross_entropy"):
    cfg = copy.deepcopy(composed(str(data), extra, criterion))  # building may write to it
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    return task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


@pytest.fixture(scope="module", params=sorted(ARCHES))
def lm(request, toy_data):
    task, model, criterion = build(toy_data["lm_bin"], *ARCHES[request.param])
    return request.param, task, model.eval(), criterion


def tokens(task, batch=3, length=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(task.dictionary.nspecial, len(task.dictionary), (batch, length), generator=g)


def test_every_head_is_normalised_over_the_full_vocabulary(lm):
    _, task, model, _ = lm
    with torch.no_grad():
        log_probs = model.get_normalized_probs(model(tokens(task)), log_probs=True)
    assert log_probs.shape[-1] == len(task.dictionary) and log_probs.dtype == torch.float32
    assert torch.isfinite(log_probs).all()
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(log_probs.shape[:-1]), atol=1e-4, rtol=0)


def test_prediction_at_t_depends_only_on_tokens_before_t(lm):
    _, task, model, _ = lm
    x = tokens(task, length=12)
    with torch.no_grad():
        before = model.get_normalized_probs(model(x), log_probs=True)
        for t in (0, 5, 11):  # change tokens t.. : p(. | x_<=t-1) at positions < t must not move
            changed = x.clone()
            changed[:, t:] = tokens(task, length=12 - t, seed=t + 1)
            after = model.get_normalized_probs(model(changed), log_probs=True)
            torch.testing.assert_close(after[:, :t], before[:, :t], atol=1e-5, rtol=1e-5)
            assert not torch.allclose(after[:, t:], before[:, t:])


def test_incremental_decoding_gives_the_full_forward_distribution(lm):
    _, task, model, _ = lm
    x = tokens(task, batch=2, length=7)
    with torch.no_grad():
        full = model.get_normalized_probs(model(x), log_probs=True)
        state, steps = {}, []
        for t in range(x.size(1)):
            out = model.decoder(x[:, : t + 1], incremental_state=state)
            steps.append(model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True))
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def loss_scale(args, model, features, vocab):
    """The papers' loss scale mean_v tau per position, in float64, from the options and the
    temperature's weights (not from the head's own statistics)."""
    shape, norm = features.shape[:-1], args.ct_normalization
    if norm == "none":
        return torch.ones(shape, dtype=torch.float64)
    if norm == "constant":
        return torch.full(shape, args.ct_constant, dtype=torch.float64)
    t = model.decoder.output_head.temperature
    if norm == "softmax":  # tau = (q + alpha) / beta with q summing to 1 over the V words
        alpha, beta = (
            (F.softplus(t.alpha_raw.double()), F.softplus(t.beta_raw.double()))
            if args.ct_learn_alpha_beta
            else (args.ct_alpha, args.ct_beta)
        )
        return torch.ones(shape, dtype=torch.float64) * (1.0 / vocab + alpha) / beta
    mu = features.double() @ t.down.weight.double().t() @ t.up.weight.double().t()
    tau = args.ct_lambda ** torch.tanh(mu) if norm == "lambda_tanh" else torch.tanh(mu) + args.ct_lambda
    return tau.mean(-1)


def test_loss_is_the_scaled_nll_and_nll_is_unscaled(lm, toy_data):
    name, task, model, criterion = lm
    args = parse(toy_data["lm_bin"], *ARCHES[name])
    task.load_dataset("valid")
    batch = next(
        iter(task.get_batch_iterator(task.dataset("valid"), max_tokens=400).next_epoch_itr(shuffle=False))
    )
    with torch.no_grad():
        loss, sample_size, log = criterion(model, batch)
        net_output = model(**batch["net_input"])
        lprobs = model.get_normalized_probs(net_output, log_probs=True)
        scale = loss_scale(args, model, net_output[0], len(task.dictionary))
    target = batch["target"]
    keep = target.ne(task.dictionary.pad())
    nll = -lprobs.gather(-1, target[..., None])[..., 0]
    torch.testing.assert_close(log["nll_loss"], nll[keep].sum(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(loss.double(), (nll.double() * scale)[keep].sum(), rtol=1e-5, atol=1e-4)
    if "ct" in name.split("-") or "constant" in name:
        assert not math.isclose(loss.item(), log["nll_loss"].item(), rel_tol=1e-3)


def test_label_smoothing_is_fairseqs_times_the_scale(toy_data):
    task, model, criterion = build(
        toy_data["lm_bin"],
        "--arch",
        "lstm_lm_tiny",
        "--ct-normalization",
        "softmax",
        "--label-smoothing",
        "0.1",
    )
    model.eval()
    x = tokens(task, batch=2, length=9)
    sample = {
        "net_input": {"src_tokens": x, "src_lengths": torch.full((2,), 9)},
        "target": x.roll(-1, 1),
        "ntokens": 18,
    }
    with torch.no_grad():
        loss, _, log = criterion(model, sample)
        lprobs = model.get_normalized_probs(model(x), log_probs=True)
    ref, ref_nll = label_smoothed_nll_loss(
        lprobs.view(-1, lprobs.size(-1)),
        sample["target"].view(-1),
        0.1,
        ignore_index=task.dictionary.pad(),
        reduce=False,
    )
    scale = (1 / len(task.dictionary) + 1.0) / 0.5  # mean_v tau at the defaults alpha = 1, beta = 0.5
    torch.testing.assert_close(loss, (ref.view(2, 9) * scale).sum())
    torch.testing.assert_close(log["nll_loss"], ref_nll.sum())


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--ct-alpha", "-0.1"], "--ct-alpha must be a finite number >= 0"),
        (["--ct-beta", "0"], "--ct-beta must be a finite number > 0"),
        (
            ["--ct-normalization", "lambda_tanh", "--ct-lambda", "1"],
            "--ct-lambda must be a finite number > 1",
        ),
        (["--ct-rank", "0"], r"--ct-rank \(Q\) must be an integer >= 1"),
        (
            ["--ct-normalization", "constant", "--ct-constant", "0"],
            "--ct-constant must be a finite number > 0",
        ),
        (
            ["--output-head", "mos", "--mos-components", "0"],
            r"--mos-components \(M\) must be an integer >= 1",
        ),
        (
            ["--adaptive-softmax-cutoff", "60,20", "--adaptive-input-cutoff", "60,20"],
            "--adaptive-softmax-cutoff must be strictly increasing",
        ),
        (
            ["--adaptive-softmax-cutoff", "20,100000", "--adaptive-input-cutoff", "20,100000"],
            r"--adaptive-softmax-cutoff must be .* in \[1, ",
        ),
        (
            ["--output-head", "softmax", "--adaptive-softmax-cutoff", "20"],
            "only used by --output-head adaptive",
        ),
        (["--adaptive-softmax-cutoff", ""], r"^--output-head adaptive needs --adaptive-softmax-cutoff"),
        (
            ["--output-head", "softmax", "--tie-adaptive-weights"],
            "^--tie-adaptive-weights needs --output-head adaptive$",
        ),
        (
            ["--share-decoder-input-output-embed"],
            "^--share-decoder-input-output-embed does not apply to --output-head adaptive",
        ),
        (
            ["--ct-normalization", "lambda_tanh", "--ct-alpha", "2"],
            "^--ct-alpha 2.0 is only used with --ct-normalization softmax, not lambda_tanh$",
        ),
    ],
)
def test_bad_options_fail_at_model_build(toy_data, extra, message):
    with pytest.raises(ValueError, match=message):
        build(toy_data["lm_bin"], "--arch", "ct_transformer_lm_tiny", *extra)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--weight-dropout", "1"], r"--weight-dropout must be in \[0, 1\)"),
        (["--lstm-hidden-sizes", "32,x"], "--lstm-hidden-sizes must be comma-separated integers"),
        (["--output-head", "adaptive"], "ct_lstm_lm supports --output-head softmax or mos"),
        (["--embed-dim", "0"], r"^--embed-dim must be >= 1, got 0$"),
        (
            ["--temporal-activation-regularization", "-1"],
            r"^--temporal-activation-regularization must be >= 0",
        ),
        (["--untie-embeddings", "--output-head", "softmax", "--lstm-hidden-sizes", "40"], None),
    ],
)
def test_bad_lstm_options_fail_at_model_build(toy_data, extra, message):
    if message is None:  # untied embeddings may have any output size
        build(toy_data["lm_bin"], "--arch", "lstm_lm_tiny", *extra)
        return
    with pytest.raises(ValueError, match=message):
        build(toy_data["lm_bin"], "--arch", "lstm_lm_tiny", *extra)


# The Mixture-of-Softmaxes settings of Yang et al. (2018), "Breaking the Softmax Bottleneck", ICLR
# (their code's PTB and WikiText-2 commands: emsize, nhid/nhidlast, dropout, dropouti, dropouth,
# n_experts 15, dropoutl 0.29), on which the contextual-temperature paper's CT-MoS is built.
MOS_PAPER = {
    "ptb": {
        "embed_dim": 280,
        "lstm_hidden_sizes": "960,960,620",
        "dropout_input": 0.4,
        "dropout_hidden": 0.225,
    },
    "wt2": {
        "embed_dim": 300,
        "lstm_hidden_sizes": "1150,1150,650",
        "dropout_input": 0.55,
        "dropout_hidden": 0.2,
    },
}


@pytest.mark.parametrize("corpus", sorted(MOS_PAPER))
@pytest.mark.parametrize("prefix", ["ct_", ""])
def test_the_mos_architectures_are_the_mos_papers_settings(toy_data, corpus, prefix):
    arch = f"{prefix}mos_lstm_lm_{corpus}"
    args = parse(toy_data["lm_bin"], "--arch", arch)
    expected = {
        **MOS_PAPER[corpus],
        **{"dropout": 0.4, "output_head": "mos", "mos_components": 15, "mos_latent_dropout": 0.29},
        "ct_normalization": "softmax" if prefix else "none",  # mos_*: no temperature (tau = 1)
    }
    assert {key: getattr(args, key) for key in expected} == expected
    # what the command line gives wins over the preset
    args = parse(
        toy_data["lm_bin"], "--arch", arch, "--mos-components", "4", "--ct-normalization", "lambda_tanh"
    )
    assert (args.mos_components, args.ct_normalization) == (4, "lambda_tanh")


def test_tied_softmax_needs_matching_sizes(toy_data):
    with pytest.raises(
        ValueError, match=r"^--lstm-hidden-sizes 40 ends with 40: .* needs --embed-dim 40, not 32$"
    ):
        build(toy_data["lm_bin"], "--arch", "lstm_lm_tiny", "--lstm-hidden-sizes", "40")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_heads_compute_in_fp32_under_half_precision_and_extreme_inputs(toy_data, dtype):
    for arch in (ARCHES["transformer-adaptive-ct"], ARCHES["lstm-mos-ct"], ARCHES["transformer-softmax-ct"]):
        _, model, _ = build(toy_data["lm_bin"], *arch)
        head = model.decoder.output_head.eval().to(dtype)
        dim = model.decoder.output_head.temperature.down.in_features
        for scale in (1.0, 1e3):
            with torch.no_grad():
                log_probs, stats = head(torch.randn(2, 5, dim).mul(scale).to(dtype))
            assert log_probs.dtype == torch.float32 and torch.isfinite(log_probs).all()
            torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2, 5), atol=1e-4, rtol=0)
            assert torch.isfinite(stats.scale).all()


def test_an_explicit_temperature_acts_on_the_final_distribution_and_only_while_given(toy_data):
    from fairseq_ctemp import decoding

    task, model, _ = build(toy_data["lm_bin"], *ARCHES["lstm-mos-ct"])
    decoding.follow_the_rule(model.eval())
    x = tokens(task)
    with torch.no_grad():
        out = model(x)
        base, _ = model.decoder.output_head(out[0])  # the head's own distribution, no rule
        with decoding.explicit_temperature(0.5):
            sharp = model.get_normalized_probs(out, log_probs=True)
        after = model.get_normalized_probs(out, log_probs=True)
    torch.testing.assert_close(sharp, F.log_softmax(base.double() / 0.5, -1).float())
    torch.testing.assert_close(after, base, rtol=0, atol=0)


def test_tempered_ce_refuses_temperature_head_models_when_it_is_built(toy_data):
    for arch in ("lstm_lm_tiny", "ct_transformer_lm_tiny"):
        with pytest.raises(ValueError, match="use --criterion ct_cross_entropy"):
            build(toy_data["lm_bin"], "--arch", arch, criterion="tempered_ce")


def lm_sample(task, batch=2, length=8):
    x = tokens(task, batch, length + 1)
    return {
        "net_input": {"src_tokens": x[:, :-1], "src_lengths": torch.full((batch,), length)},
        "target": x[:, 1:],
        "ntokens": batch * length,
    }


STOCK_LSTM_LM = (
    "--arch lstm_lm --decoder-embed-dim 16 --decoder-hidden-size 16 --decoder-out-embed-dim 16".split()
)


@pytest.mark.parametrize(
    "criterion,built_for,given,message",
    [
        (
            "ct_cross_entropy",
            ARCHES["transformer-softmax-ct"],
            ("cross_entropy", TINY_LM),
            "needs a model with a temperature head",
        ),
        (
            "ct_cross_entropy",
            [*ARCHES["transformer-softmax-ct"], "--loss-chunk-tokens", "8"],
            ("ct_cross_entropy", ARCHES["transformer-adaptive-ct"]),
            "--loss-chunk-tokens needs a head with the full distribution",
        ),
        (
            "ct_cross_entropy",
            [*ARCHES["transformer-softmax-ct"], "--label-smoothing", "0.1"],
            ("ct_cross_entropy", ARCHES["transformer-adaptive-ct"]),
            "--label-smoothing needs the full distribution",
        ),
        (
            "tempered_ce",
            TINY_LM,
            ("ct_cross_entropy", ARCHES["transformer-softmax-ct"]),
            "has a temperature head",
        ),
        (
            "tempered_ce",
            [*TINY_LM, "--loss-chunk-tokens", "8"],
            ("cross_entropy", STOCK_LSTM_LM),
            "--loss-chunk-tokens needs a decoder whose output layer is one linear projection",
        ),
    ],
)
def test_a_criterion_given_a_model_its_options_did_not_describe_refuses_it_in_the_first_step(
    toy_data, criterion, built_for, given, message
):
    """build_criterion refuses from the command line what it can; a model that reaches the criterion
    otherwise (built by other code, the hub) is refused by its first forward, before the model runs."""
    task, _, built = build(toy_data["lm_bin"], *built_for, criterion=criterion)
    _, model, _ = build(toy_data["lm_bin"], *given[1], criterion=given[0])
    calls = []
    model.register_forward_pre_hook(lambda *_: calls.append(1))
    with pytest.raises(ValueError, match=re.escape(message)):
        built(model, lm_sample(task))
    assert calls == []


def test_a_tied_softmax_head_loads_its_own_state_dict(toy_data):
    """fairseq's transformer decoder adds output_projection.weight to a tied state dict on load."""
    _, model, _ = build(
        toy_data["lm_bin"],
        *ARCHES["transformer-softmax-ct"],
        "--share-decoder-input-output-embed",
    )
    head = model.decoder.output_head
    assert head.output.weight is model.decoder.embed_tokens.weight
    state = {k: v + 1 for k, v in model.state_dict().items()}
    model.load_state_dict(state)  # strict, after fairseq's upgrade_state_dict
    torch.testing.assert_close(head.output.weight, state["decoder.embed_tokens.weight"], rtol=0, atol=0)


def temperature_head(kind, normalization):
    """A softmax or MoS (3 components) head with the given temperature normalisation."""
    torch.manual_seed(0)
    temperature = (
        None
        if normalization is None
        else ContextualTemperature(
            D,
            V,
            rank=4,
            normalization=normalization,
            alpha=0.3,
            beta=0.7,
            learn_alpha_beta=normalization == "softmax",
            lam=3.0,
            constant=1.7,
        )
    )
    if kind == "softmax":
        return TemperedSoftmaxHead(D, V, temperature).eval()
    return MixtureOfSoftmaxesHead(D, V, 3, latent_dim=6, temperature=temperature).eval()


def reference_head_log_probs(head, h):
    """The definition in float64 and probability space: log sum_m pi_m softmax(z_m / tau) (one
    component of weight 1 for the softmax head)."""
    h = h.double()
    if isinstance(head, MixtureOfSoftmaxesHead):
        prior = torch.softmax(h @ head.prior.weight.double().t(), -1)
        latent = torch.tanh(h @ head.latent.weight.double().t() + head.latent.bias.double())
        latent = latent.view(*h.shape[:-1], head.n_components, -1)
    else:
        prior, latent = torch.ones(*h.shape[:-1], 1, dtype=torch.float64), h.unsqueeze(-2)
    z = latent @ head.output.weight.double().t() + head.output.bias.double()
    t = head.temperature
    if t is None:
        tau = torch.ones(*h.shape[:-1], V, dtype=torch.float64)
    elif t.normalization == "constant":
        tau = torch.full((*h.shape[:-1], V), 1.7, dtype=torch.float64)
    else:
        mu = h @ t.down.weight.double().t() @ t.up.weight.double().t()
        if t.normalization == "softmax":
            alpha, beta = (x.double() for x in t.alpha_beta())
            tau = (torch.softmax(mu, -1) + alpha) / beta
        else:
            tau = 3.0 ** torch.tanh(mu)
    p = (prior.unsqueeze(-1) * torch.softmax(z / tau.unsqueeze(-2), -1)).sum(-2)
    return torch.log(p)


@pytest.mark.parametrize("normalization", [None, "softmax", "lambda_tanh", "constant"])
@pytest.mark.parametrize("kind", ["softmax", "mos"])
def test_training_score_matches_the_float64_definition(kind, normalization):
    """The heads' training path (for MoS: the target's mixture only, never the full mixture) gives
    the log-probabilities and the gradients of every parameter of the full distribution."""
    head = temperature_head(kind, normalization)
    h = (torch.randn(2, 5, D) * 3).requires_grad_()
    target = torch.randint(0, V, (2, 5))
    scores, stats = head.score(h, target)
    ref = reference_head_log_probs(head, h).gather(-1, target[..., None])[..., 0]
    torch.testing.assert_close(scores.double(), ref, atol=1e-5, rtol=1e-5)
    full, full_stats = head(h)  # the decoding path gives the same numbers and statistics
    torch.testing.assert_close(full.gather(-1, target[..., None])[..., 0], scores, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(stats.scale, full_stats.scale)
    params = [h] + [p for p in head.parameters() if p.requires_grad]
    grads = torch.autograd.grad(scores.sum(), params)
    ref_grads = torch.autograd.grad(ref.sum(), params)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, atol=1e-5, rtol=1e-4)


def test_a_head_that_defines_only_its_distribution_scores_by_it():
    """TemperatureHead's own score, what a new head inherits until it has a faster one: log
    p(target) of the head's distribution, with its gradient (here against a float64 softmax written
    out, exp over the sum of exps)."""
    from fairseq_ctemp.modules.temperature_heads import TemperatureHead

    class Plain(TemperatureHead):
        def __init__(self):
            super().__init__()
            self.output, self.temperature = torch.nn.Linear(D, V), None

        def forward(self, h):
            return F.log_softmax(self.output(h).float(), -1), None

    head = Plain()
    h = torch.randn(2, 5, D, requires_grad=True)
    target = torch.randint(0, V, (2, 5))
    scores, stats = head.score(h, target)
    z = h.double() @ head.output.weight.double().t() + head.output.bias.double()
    ref = torch.log(z.exp().gather(-1, target[..., None])[..., 0] / z.exp().sum(-1))
    torch.testing.assert_close(scores.double(), ref, atol=1e-5, rtol=1e-5)
    assert stats is None and head.temperatures(h) is None
    (grad,) = torch.autograd.grad(scores.sum(), h)
    (ref_grad,) = torch.autograd.grad(ref.sum(), h)
    torch.testing.assert_close(grad, ref_grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "kind, normalization",
    [("mos", None), ("mos", "softmax"), ("softmax", "softmax"), ("softmax", "constant")],
)
def test_training_backward_makes_no_zero_filled_vocabulary_sized_gradient(kind, normalization):
    """The training scoring of MoS and of a tempered softmax returns the full log-probabilities
    beside log p(target); nothing takes their gradient, and the backward must not zero-fill a
    tensor of their shape, neither for them (autograd's default) nor for a gather's backward
    (docs/speed.md: what each cost). The operators of the backward, recorded: no zeros of it."""
    from torch.profiler import ProfilerActivity, profile

    head = temperature_head(kind, normalization)
    h = torch.randn(2, 5, D, requires_grad=True)
    scores, _ = head.score(h, torch.randint(0, V, (2, 5)))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        scores.sum().backward()
    shape = [2, 5, head.n_components, V] if kind == "mos" else [2, 5, V]
    zeros = [
        e for e in prof.events() if e.name == "aten::zeros" and shape in [list(s) for s in e.input_shapes]
    ]
    zeros += [
        e for e in prof.events() if e.name in ("aten::zero_", "aten::fill_") and e.input_shapes[:1] == [shape]
    ]
    assert not zeros, [(e.name, e.input_shapes) for e in zeros]
    assert h.grad is not None and torch.isfinite(h.grad).all()


def test_adaptive_input_runs_under_autocast_in_our_model_only(toy_data):
    """--amp: ct_transformer_lm's adaptive input runs with autocast off (fairseq's
    refuses the half-precision rows autocast makes); the same weights, so the same function as
    fairseq's outside autocast; fairseq's own module is left as it is."""
    from fairseq.modules import AdaptiveInput

    from fairseq_ctemp.modules.autocast_adaptive_input import AutocastAdaptiveInput

    task, model, _ = build(toy_data["lm_bin"], *LM_HEAD_ARCHES["transformer-adaptive-ct"])
    embed = model.decoder.embed_tokens
    assert type(embed) is AutocastAdaptiveInput
    x = tokens(task)
    stock = copy.deepcopy(embed)
    stock.__class__ = AdaptiveInput  # fairseq's module with the same parameters
    torch.testing.assert_close(embed(x), stock(x), rtol=0, atol=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rows = embed(x)
        with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
            stock(x)
    assert rows.dtype == torch.float32
    torch.testing.assert_close(rows, stock(x), rtol=2.0**-7, atol=2.0**-7)
