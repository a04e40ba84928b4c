"""ct_cross_entropy's loss scale mean_v(tau) is a detached weight: learned alpha and beta get the
gradient of the scaled cross-entropy through tau only (float64 reference), not the gradient that
would shrink the scale itself."""

import pytest
import torch
import torch.nn.functional as F
from test_chunked_head_loss import lm


def reference_alpha_beta_gradients(model, x, y, detach_scale=True):
    """d loss / d (alpha_raw, beta_raw) from the definition, float64: loss = sum_t s_t CE_t with
    tau = (softmax(h W1 W2) + alpha) / beta, CE_t = -log softmax(z_t / tau_t)(y_t), s_t = mean_v tau_t."""
    head = model.decoder.output_head
    t = head.temperature
    with torch.no_grad():
        h = model(x)[0].double()
    a = t.alpha_raw.detach().double().requires_grad_()
    b = t.beta_raw.detach().double().requires_grad_()
    z = h @ head.output.weight.double().T + head.output.bias.double()
    mu = h @ t.down.weight.double().T @ t.up.weight.double().T
    tau = (torch.softmax(mu, -1) + F.softplus(a)) / F.softplus(b)
    ce = -torch.log_softmax(z / tau, -1).gather(-1, y[..., None])[..., 0]
    scale = tau.mean(-1)
    loss = ((scale.detach() if detach_scale else scale) * ce).sum()
    return torch.autograd.grad(loss, (a, b))


def lstm_lm(toy_data, *head_options):
    """(task, lstm_lm_tiny in eval mode, ct_cross_entropy) on the toy LM data, seed 1."""
    return lm(toy_data, ["--arch", "lstm_lm_tiny", *head_options], "--tokens-per-sample", "32")


def test_learned_alpha_beta_gradients_come_from_the_cross_entropy_alone(toy_data):
    head = ["--ct-normalization", "softmax", "--ct-learn-alpha-beta", "--ct-alpha", "0.3", "--ct-beta", "0.8"]
    task, model, criterion = lstm_lm(toy_data, *head)
    g = torch.Generator().manual_seed(0)
    x, y = (
        torch.randint(task.dictionary.nspecial, len(task.dictionary), (3, 12), generator=g) for _ in range(2)
    )
    loss, _, _ = criterion(
        model,
        {
            "net_input": {"src_tokens": x, "src_lengths": torch.full((3,), 12)},
            "target": y,
            "ntokens": 36,
            "id": torch.arange(3),
        },
    )
    t = model.decoder.output_head.temperature
    got = torch.autograd.grad(loss, (t.alpha_raw, t.beta_raw))
    expected = reference_alpha_beta_gradients(model, x, y)
    for g_got, g_expected in zip(got, expected):
        torch.testing.assert_close(g_got.double(), g_expected, rtol=1e-4, atol=1e-6)
    undetached = reference_alpha_beta_gradients(model, x, y, detach_scale=False)
    assert all(abs(u - e) > 0.1 * abs(u) for u, e in zip(undetached, expected))  # tells them apart


@pytest.mark.parametrize("scaled", [True, False])
def test_the_scale_gives_the_logits_the_gradient_they_have_at_tau_1(toy_data, scaled):
    """For a constant tau, d(tau * CE(softmax(z / tau))) / dz = softmax(z / tau) - onehot(y): the
    form of tau = 1's gradient (what Eq. 8's scale is for); unscaled it is 1/tau of that. The logits
    z are the output layer's, caught by a hook; the reference is float64 from the definition."""
    constant = ["--ct-normalization", "constant", "--ct-constant", "2"]
    task, model, criterion = lstm_lm(toy_data, *constant, *([] if scaled else ["--no-loss-scaling"]))
    g = torch.Generator().manual_seed(0)
    x, y = (
        torch.randint(task.dictionary.nspecial, len(task.dictionary), (3, 12), generator=g) for _ in range(2)
    )
    caught = []

    def catch(module, inputs, z):  # the head divides its logits in place: it gets a copy
        caught.append(z)
        return z.clone()

    model.decoder.output_head.output.register_forward_hook(catch)
    sample = {"net_input": {"src_tokens": x, "src_lengths": torch.full((3,), 12)}, "target": y, "ntokens": 36}
    loss, _, _ = criterion(model, sample)
    (z,) = caught
    (got,) = torch.autograd.grad(loss, z)
    tau = 2.0
    expected = torch.softmax(z.detach().double() / tau, -1) - F.one_hot(y, z.size(-1)).double()
    torch.testing.assert_close(got.double(), expected if scaled else expected / tau, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "weights, expected", [((None, None), "both"), (("0", "0"), "none"), (("2", "0"), "ar")]
)
def test_ar_and_tar_are_switched_off_by_their_weights(toy_data, weights, expected):
    """The PTB recipe's AR_TAR=off trains with --activation-regularization 0
    --temporal-activation-regularization 0: the regularisation added to the loss is then 0, and
    with AR alone it is 2 x the mean square of the last layer's output (dropout off here)."""
    options_ = [
        "--ct-normalization",
        "constant",
        "--ct-constant",
        "2",
        "--dropout",
        "0",
        "--dropout-hidden",
        "0",
    ]
    for name, weight in zip(("--activation-regularization", "--temporal-activation-regularization"), weights):
        options_ += [name, weight] if weight is not None else []
    task, model, criterion = lstm_lm(toy_data, *options_)
    model.train()
    g = torch.Generator().manual_seed(0)
    x, y = (
        torch.randint(task.dictionary.nspecial, len(task.dictionary), (3, 12), generator=g) for _ in range(2)
    )
    sample = {"net_input": {"src_tokens": x, "src_lengths": torch.full((3,), 12)}, "target": y, "ntokens": 36}
    captured = []
    # the head's features: the input of its output layer (training scores without the head's forward)
    model.decoder.output_head.output.register_forward_pre_hook(
        lambda module, inputs: captured.append(inputs[0])
    )
    _, _, log = criterion(model, sample)
    regularization = float(log["regularization"]) / 36
    if expected == "none":
        assert regularization == 0.0
    elif expected == "ar":
        assert regularization == pytest.approx(2 * captured[0].double().pow(2).mean().item(), rel=1e-5)
    else:
        assert regularization > 2 * captured[0].double().pow(2).mean().item()  # AR and some TAR
