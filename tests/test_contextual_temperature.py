"""The contextual-temperature layer: ranges, validity, fp32, bad options."""

import pytest
import torch

from fairseq_ctemp.modules import ContextualTemperature


@pytest.mark.parametrize("alpha,beta", [(0.0, 1.0), (0.5, 2.0), (1e-3, 0.01)])
def test_softmax_normalisation_stays_in_its_range_and_matches_the_formula(alpha, beta):
    layer = ContextualTemperature(16, 50, rank=8, alpha=alpha, beta=beta)
    h = torch.randn(3, 5, 16) * 10
    tau = layer(h)
    assert tau.shape == (3, 5, 50) and tau.dtype == torch.float32
    mu = h @ layer.down.weight.t() @ layer.up.weight.t()
    torch.testing.assert_close(tau, (torch.softmax(mu, -1) + alpha) / beta)
    low, high = alpha / beta, (1 + alpha) / beta
    assert tau.min() >= low * (1 - 1e-6) and tau.max() <= high * (1 + 1e-6)
    # mean over the vocabulary is the constant (alpha + 1/V) / beta with fixed alpha, beta
    torch.testing.assert_close(tau.mean(-1), torch.full((3, 5), (alpha + 1 / 50) / beta))


def test_learned_alpha_beta_start_at_their_values_and_stay_valid():
    layer = ContextualTemperature(8, 20, rank=4, alpha=0.3, beta=1.5, learn_alpha_beta=True)
    alpha, beta = layer.alpha_beta()
    assert abs(alpha.item() - 0.3) < 1e-6 and abs(beta.item() - 1.5) < 1e-6
    with torch.no_grad():
        layer.alpha_raw.fill_(-50.0)
        layer.beta_raw.fill_(-50.0)
    tau = layer(torch.randn(2, 8))
    assert torch.isfinite(tau).all() and (tau > 0).all()
    tau.sum().backward()
    assert layer.alpha_raw.grad is not None and layer.beta_raw.grad is not None


@pytest.mark.parametrize("normalization,low,high", [("lambda_tanh", 1 / 3, 3), ("tanh_plus_lambda", 2, 4)])
def test_alternative_normalisations_stay_in_their_ranges(normalization, low, high):
    layer = ContextualTemperature(8, 30, rank=4, normalization=normalization, lam=3.0)
    tau = layer(torch.randn(4, 8) * 1e4)  # extreme mu saturates tanh, never overflows
    assert torch.isfinite(tau).all() and tau.min() >= low - 1e-6 and tau.max() <= high + 1e-6


def test_constant_temperature_has_no_parameters():
    layer = ContextualTemperature(8, 30, normalization="constant", constant=2.0)
    assert list(layer.parameters()) == []
    assert torch.equal(layer(torch.randn(2, 3, 8)), torch.full((2, 3, 30), 2.0))


def test_half_precision_input_gives_fp32_temperature():
    layer = ContextualTemperature(8, 30, rank=4)
    tau = layer(torch.randn(2, 8).half())
    assert tau.dtype == torch.float32 and torch.isfinite(tau).all()


def test_temperature_of_a_position_depends_on_that_position_only():
    layer = ContextualTemperature(8, 30, rank=4)
    h = torch.randn(1, 6, 8)
    changed = h.clone()
    changed[:, 3:] = torch.randn(1, 3, 8)
    torch.testing.assert_close(layer(h)[:, :3], layer(changed)[:, :3])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"alpha": -0.1}, r"--ct-alpha must be a finite number >= 0"),
        ({"alpha": 0.0, "learn_alpha_beta": True}, r"--ct-alpha must be a finite number > 0 when learned"),
        ({"beta": 0.0}, r"--ct-beta must be a finite number > 0"),
        ({"normalization": "lambda_tanh", "lam": 1.0}, r"--ct-lambda must be a finite number > 1"),
        ({"normalization": "tanh_plus_lambda", "lam": 0.5}, r"--ct-lambda must be a finite number > 1"),
        ({"rank": 0}, r"--ct-rank \(Q\) must be an integer >= 1"),
        ({"normalization": "constant", "constant": 0.0}, r"--ct-constant must be a finite number > 0"),
        ({"normalization": "sigmoid"}, r"--ct-normalization must be one of"),
    ],
)
def test_bad_options_are_refused_at_build_time(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ContextualTemperature(8, 30, **kwargs)


def test_the_fused_softmax_temperature_against_numerical_gradients():
    """tau = (softmax(mu) + alpha) / beta computed in mu's buffer: value against the formula,
    gradient against finite differences, in float64."""
    from fairseq_ctemp.modules.contextual_temperature import SoftmaxTemperature

    mu = (torch.randn(3, 4, 9, dtype=torch.float64) * 3).requires_grad_()
    fused = lambda mu: SoftmaxTemperature.apply(mu.clone(), 0.3, 0.7)  # noqa: E731  (it writes into mu)
    torch.testing.assert_close(fused(mu), (torch.softmax(mu, -1) + 0.3) / 0.7, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(fused, (mu,))
