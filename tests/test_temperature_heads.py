"""Output heads with contextual temperature: normalised over the full vocabulary, per position,
and reducing to the plain softmax when they should (guards against impossible perplexities)."""

import pytest
import torch
import torch.nn.functional as F

from fairseq_ctemp.modules import ContextualTemperature, MixtureOfSoftmaxesHead, TemperedSoftmaxHead
from fairseq_ctemp.modules.temperature_heads import DividedLogSoftmax, MixtureTargetLogProb


def heads(dim=16, vocab=40):
    ct = lambda: ContextualTemperature(dim, vocab, rank=4, alpha=0.2, beta=0.5)  # noqa: E731
    return {
        "softmax": TemperedSoftmaxHead(dim, vocab),
        "ct-softmax": TemperedSoftmaxHead(dim, vocab, temperature=ct()),
        "mos": MixtureOfSoftmaxesHead(dim, vocab, n_components=3),
        "ct-mos": MixtureOfSoftmaxesHead(dim, vocab, n_components=3, temperature=ct()),
    }


@pytest.mark.parametrize("name", ["softmax", "ct-softmax", "mos", "ct-mos"])
def test_every_head_is_normalised_over_the_full_vocabulary(name):
    head = heads()[name]
    for scale in (1.0, 100.0):
        log_probs, _ = head(torch.randn(3, 7, 16) * scale)
        assert torch.isfinite(log_probs).all()
        torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(3, 7), atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["ct-softmax", "ct-mos"])
def test_distribution_at_a_position_depends_on_that_position_only(name):
    head = heads()[name]
    h = torch.randn(2, 6, 16)
    changed = h.clone()
    changed[:, 4:] += torch.randn(2, 2, 16)
    torch.testing.assert_close(head(h)[0][:, :4], head(changed)[0][:, :4])


def test_constant_temperature_one_is_the_plain_softmax():
    head = TemperedSoftmaxHead(
        16, 40, temperature=ContextualTemperature(16, 40, normalization="constant", constant=1.0)
    )
    h = torch.randn(5, 16)
    torch.testing.assert_close(head(h)[0], F.log_softmax(head.output(h), -1))


def test_mos_with_one_component_is_a_softmax_over_the_tanh_latent():
    head = MixtureOfSoftmaxesHead(16, 40, n_components=1)
    h = torch.randn(5, 16)
    expected = F.log_softmax(head.output(torch.tanh(head.latent(h))), -1)
    torch.testing.assert_close(head(h)[0], expected)


def test_mos_rejects_zero_components():
    with pytest.raises(ValueError, match=r"--mos-components \(M\) must be an integer >= 1"):
        MixtureOfSoftmaxesHead(16, 40, n_components=0)


def test_mos_latent_dropout_is_locked_over_time():
    """One dropout mask per sequence (the MoS reference's LockedDropout on the latent): the same
    input at every time step gives the same distribution at every step, and another per sequence."""
    torch.manual_seed(0)
    head = MixtureOfSoftmaxesHead(8, 20, n_components=3, latent_dropout=0.5).train()
    h = torch.randn(1, 1, 8).expand(4, 6, 8)  # 4 sequences x 6 steps, all the same vector
    log_probs, _ = head(h)
    torch.testing.assert_close(log_probs, log_probs[:, :1].expand_as(log_probs), rtol=0, atol=0)
    assert not torch.allclose(log_probs[0], log_probs[1])  # masks differ between sequences
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(4, 6), rtol=0, atol=1e-5)
    head.eval()
    assert torch.equal(head(h)[0][0], head(h)[0][1])


@pytest.mark.parametrize("tau_shape", [(3, 4, 7), (3, 1, 7)])  # per entry; shared by components (MoS)
def test_divided_log_softmax_against_numerical_gradients(tau_shape):
    """The fused log_softmax(z / tau): value against the unfused expression, gradients against
    finite differences, in float64."""
    g = torch.Generator().manual_seed(0)
    z = (torch.randn(3, 4, 7, generator=g, dtype=torch.float64) * 3).requires_grad_()
    tau = (torch.rand(tau_shape, generator=g, dtype=torch.float64) * 3 + 0.2).requires_grad_()
    fused = lambda z, tau: DividedLogSoftmax.apply(z.clone(), tau)  # noqa: E731  (it writes into z)
    torch.testing.assert_close(fused(z, tau), F.log_softmax(z / tau, -1), rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(fused, (z, tau))


@pytest.mark.parametrize("components", [2, 6])  # up to 4 summed in torch's order, beyond in another
def test_mixture_target_log_prob_against_numerical_gradients(components):
    """The fused log p(target) of a mixture whose components share one tau per word (CT-MoS):
    value against the unfused mixture, gradients of z, tau and log pi against finite differences,
    in float64."""
    g = torch.Generator().manual_seed(0)
    z = (torch.randn(2, 3, components, 7, generator=g, dtype=torch.float64) * 3).requires_grad_()
    tau = (torch.rand(2, 3, 1, 7, generator=g, dtype=torch.float64) * 3 + 0.2).requires_grad_()
    log_prior = F.log_softmax(torch.randn(2, 3, components, generator=g, dtype=torch.float64), -1)
    log_prior.requires_grad_()
    target = torch.randint(0, 7, (2, 3), generator=g)

    def fused(z, tau, log_prior):  # it writes into z
        return MixtureTargetLogProb.apply(z.clone(), tau, log_prior, target)[0]

    mixture = torch.logsumexp(log_prior.unsqueeze(-1) + F.log_softmax(z / tau, -1), dim=-2)
    expected = mixture.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(fused(z, tau, log_prior), expected, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(fused, (z, tau, log_prior))


def test_the_log_sum_exp_is_read_where_the_logit_is_largest():
    """The fused functions' backward recovers z / tau as out + lse, with lse read at each row's
    largest entry; it is found through amax of the log-probabilities, which must give exactly the
    entry at the argmax of z / tau (ties and all), as max() with its index did."""
    from fairseq_ctemp.modules.temperature_heads import _divided_log_softmax_

    g = torch.Generator().manual_seed(0)
    for scale in (1e-3, 1.0, 30.0):
        z = torch.randn(64, 500, generator=g) * scale
        z[:8, :3] = z[:8].max(-1, keepdim=True).values  # ties at the top of z / tau where tau is 2
        tau = torch.rand(64, 500, generator=g) + 0.5
        tau[:8] = 2.0
        y = z / tau
        top, where = y.max(dim=-1, keepdim=True)
        out, lse = _divided_log_softmax_(z.clone(), tau)
        assert torch.equal(lse, top - out.gather(-1, where))
