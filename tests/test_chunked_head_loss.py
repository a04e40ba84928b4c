"""ct_cross_entropy --loss-chunk-tokens: the head and the loss run chunk by chunk of sequences,
against a float64 reference written from the definitions (the heads' formulas, fairseq's label
smoothing, the detached scale mean_v tau, autograd), through the real models; and refused where
the head never holds the batch x vocabulary logits."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import LM_HEAD_ARCHES, PLUGIN_DIR, json_log_records, run_cli
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_ctemp.errors import OptionError


def reference_tau(temperature, h):
    """tau (..., V) of a ContextualTemperature from its normalisation's formula, float64."""
    if temperature.normalization == "constant":
        return torch.full((*h.shape[:-1], temperature.vocab_size), float(temperature.constant), dtype=h.dtype)
    mu = h @ temperature.down.weight.double().T @ temperature.up.weight.double().T
    if temperature.normalization == "softmax":
        if temperature.learn_alpha_beta:
            alpha, beta = (F.softplus(p.double()) for p in (temperature.alpha_raw, temperature.beta_raw))
        else:
            alpha, beta = temperature.alpha_value, temperature.beta_value
        return (torch.softmax(mu, -1) + alpha) / beta
    assert temperature.normalization == "lambda_tanh"
    return temperature.lam ** torch.tanh(mu)


def reference_log_probs(head, h):
    """(log p (..., V), tau) of a softmax or MoS head, float64, from the formulas of temperature_heads.py."""
    tau = None if head.temperature is None else reference_tau(head.temperature, h)
    out_w = head.output.weight.double()
    out_b = 0 if head.output.bias is None else head.output.bias.double()
    if not hasattr(head, "n_components"):
        z = h @ out_w.T + out_b
        return torch.log_softmax(z if tau is None else z / tau, -1), tau
    log_prior = torch.log_softmax(h @ head.prior.weight.double().T, -1)
    latent = torch.tanh(h @ head.latent.weight.double().T + head.latent.bias.double())
    z = latent.view(*h.shape[:-1], head.n_components, -1) @ out_w.T + out_b
    components = torch.log_softmax(z if tau is None else z / tau.unsqueeze(-2), -1)
    return torch.logsumexp(log_prior.unsqueeze(-1) + components, -2), tau


def reference_loss(head, h, target, keep, eps):
    """sum over kept positions of mean_v(tau) (detached) * fairseq's label-smoothed CE, float64."""
    log_p, tau = reference_log_probs(head, h)
    nll = -log_p.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    eps_i = eps / (log_p.size(-1) - 1)
    ce = (1 - eps - eps_i) * nll + eps_i * -log_p.sum(-1)
    scale = torch.ones_like(nll) if tau is None else tau.mean(-1).detach()
    return (scale * ce)[keep].sum(), nll[keep].sum()


def lm(toy_data, arch, *criterion_options):
    """(task, model in eval mode, ct_cross_entropy) on the toy LM data, seed 1."""
    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [
            *(str(toy_data["lm_bin"]), "--user-dir", PLUGIN_DIR, "--task", "language_modeling"),
            *("--tokens-per-sample", "16", "--criterion", "ct_cross_entropy", "--cpu", *arch),
            *criterion_options,
        ],
    )
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    return task, task.build_model(cfg.model).eval(), task.build_criterion(cfg.criterion)


def batch(task, rows=5, length=16):
    """Random targets with padding at the end of two rows."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(task.dictionary.nspecial, len(task.dictionary), (rows, length), generator=g)
    target = tokens.clone()
    target[1, -3:] = target[3, -7:] = task.dictionary.pad()
    net_input = {"src_tokens": tokens, "src_lengths": torch.full((rows,), length)}
    return {
        "net_input": net_input,
        "target": target,
        "ntokens": int(target.ne(1).sum()),
        "id": torch.arange(rows),
    }


HEADS = ["lstm-softmax-ct", "lstm-mos-ct-learned", "lstm-softmax-constant", "transformer-mos-ct-lambda"]


# chunks of one sequence without label smoothing, of two (the last chunk one) with it
@pytest.mark.parametrize("chunk, eps", [(16, 0.0), (40, 0.1)])
@pytest.mark.parametrize("arch", HEADS)
def test_the_chunked_loss_against_the_float64_reference(toy_data, arch, chunk, eps):
    task, model, criterion = lm(
        toy_data, LM_HEAD_ARCHES[arch], "--loss-chunk-tokens", str(chunk), "--label-smoothing", str(eps)
    )
    rows_seen = []
    model.decoder.output_head.output.register_forward_pre_hook(lambda m, i: rows_seen.append(i[0].size(0)))
    sample = batch(task)
    (loss, nll, grads), (ref_loss, ref_nll, ref_grads) = chunked_and_reference(model, criterion, sample, eps)
    assert max(rows_seen) == chunk // 16 < 5  # never the batch at once
    assert loss == pytest.approx(ref_loss, rel=1e-5, abs=ref_loss * 1e-6 + 1e-6)
    assert nll == pytest.approx(ref_nll, rel=1e-5)
    assert grads.keys() == ref_grads.keys() and "features" in grads
    for name, ref in ref_grads.items():
        torch.testing.assert_close(
            grads[name], ref, rtol=1e-4, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}"
        )


def chunked_and_reference(model, criterion, sample, eps):
    """((loss, nll, {name: gradient}) of the criterion on the model, (the same) of reference_loss
    in float64 on the CPU): gradients of the decoder's features and of the head's parameters (a
    weight tied to the embedding: its head part, the body's part through the features taken off)."""
    features = []

    def keep_features(module, inputs, out):  # returns None: the output stays as it is
        out[0].retain_grad()
        features.append(out[0])

    hook = model.decoder.register_forward_hook(keep_features)
    loss, _, log = criterion(model, sample)
    hook.remove()
    loss.backward(retain_graph=True)
    head = model.decoder.output_head
    feature_grad = features[0].grad.clone()
    grads = {"features": feature_grad.double().cpu()}
    for name, p in head.named_parameters():
        if p.grad is not None:
            body = torch.autograd.grad(features[0], p, feature_grad, retain_graph=True, allow_unused=True)[0]
            grads[name] = (p.grad if body is None else p.grad - body).double().cpu()
    reference_head = copy.deepcopy(head).cpu().double()
    h = features[0].detach().double().cpu().requires_grad_()
    target = sample["target"].cpu()
    ref_loss, ref_nll = reference_loss(reference_head, h, target, target.ne(criterion.padding_idx), eps)
    named = [(k, p) for k, p in reference_head.named_parameters() if k in grads]
    ref_grads = torch.autograd.grad(ref_loss, [h, *(p for _, p in named)])
    reference = dict(zip(["features", *(k for k, _ in named)], ref_grads))
    chunked = (loss.item(), float(log["nll_loss"]), grads)
    return chunked, (ref_loss.item(), ref_nll.item(), reference)


@pytest.mark.parametrize("arch", ["lstm-softmax-ct", "transformer-mos-ct-lambda"])
def test_logs_and_gradients_equal_the_unchunked_criterions(toy_data, arch):
    """Every logged value and every parameter's gradient (the body's, through the features, and a
    tied embedding's) as without chunks; and in validation (no gradients) the same loss."""
    task, model, plain = lm(toy_data, LM_HEAD_ARCHES[arch])
    chunked = lm(toy_data, LM_HEAD_ARCHES[arch], "--loss-chunk-tokens", "32")[2]
    sample = batch(task)
    results = {}
    for name, criterion in (("plain", plain), ("chunked", chunked)):
        model.zero_grad()
        loss, _, log = criterion(model, sample)
        loss.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        with torch.no_grad():
            valid_loss = criterion(model, sample)[0]
        results[name] = (loss.detach(), log, grads, valid_loss)
    (loss_p, log_p, grads_p, valid_p), (loss_c, log_c, grads_c, valid_c) = results.values()
    torch.testing.assert_close(loss_c, loss_p.to(loss_c.dtype), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(valid_c, valid_p.to(valid_c.dtype), rtol=1e-5, atol=1e-5)
    assert log_c.keys() == log_p.keys()
    for key in log_p:
        assert float(log_c[key]) == pytest.approx(float(log_p[key]), rel=1e-5, abs=1e-6), key
    assert grads_c.keys() == grads_p.keys() and len(grads_p) == len(list(model.parameters()))
    for key, grad in grads_p.items():
        torch.testing.assert_close(grads_c[key], grad, rtol=1e-4, atol=1e-6, msg=key)


def test_the_adaptive_softmax_is_refused(toy_data):
    with pytest.raises(OptionError, match="--loss-chunk-tokens needs a head with the full distribution"):
        lm(toy_data, LM_HEAD_ARCHES["transformer-adaptive-ct"], "--loss-chunk-tokens", "32")


def test_fairseq_train_with_chunks_trains_as_without(toy_data, tmp_path):
    """fairseq-train, 6 updates of a CT LSTM LM (no dropout in its head): the same losses."""
    losses = {}
    for name, extra in (("plain", []), ("chunked", ["--loss-chunk-tokens", "64"])):
        out = run_cli(
            "fairseq-train",
            *(toy_data["lm_bin"], "--user-dir", PLUGIN_DIR, "--task", "language_modeling", "--cpu"),
            *(*LM_HEAD_ARCHES["lstm-softmax-ct"], "--criterion", "ct_cross_entropy", *extra),
            *("--tokens-per-sample", "32", "--max-tokens", "256", "--optimizer", "adam", "--lr", "3e-3"),
            *("--max-update", "6", "--log-format", "json", "--log-interval", "1", "--no-save", "--seed", "3"),
            *("--save-dir", tmp_path / name, "--num-workers", "0", "--disable-validation"),
        )
        losses[name] = [r["loss"] for r in json_log_records(out.stdout, "train_inner")]
    assert len(losses["plain"]) == 6 and all(math.isfinite(x) for x in losses["plain"])
    assert losses["chunked"] == pytest.approx(losses["plain"], abs=2e-3)
