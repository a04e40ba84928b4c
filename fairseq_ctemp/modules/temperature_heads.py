"""Output heads that divide logits by a (contextual) temperature and return normalised
log-probabilities over the whole vocabulary. Plain nn.Modules.

    softmax head:  log p_t = log_softmax(z_t / tau_t),                z_t = W h_t + b
    MoS head:      log p_t = logsumexp_m(log pi_{t,m} + log_softmax(z_{t,m} / tau_t))
                   pi_t = softmax(W_pi h_t),  z_{t,m} = W tanh(W_m h_t) + b   (Yang et al., 2018)

tau_t comes from a ``ContextualTemperature`` on h_t (or None: tau = 1). All in fp32. Inputs h are
(batch, time, dim) (or any (..., dim) at inference).

Every head (these two and ``AdaptiveSoftmaxHead``) has the same interface:
    head(h)                -> (log_probs (..., V), TauStats)   the full distribution
    head.score(h, target)  -> (log p(target) (...), TauStats)  what training needs
    head.temperatures(h)   -> tau of every word (..., V), or None (analysis)
"""

from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import OptionError


class TauStats(NamedTuple):
    """Summary of the temperatures a head used: ``scale`` is, per position, the mean of tau over
    the vocabulary (the papers' loss scale); ``min``/``max`` are over every tau computed."""

    scale: torch.Tensor
    min: torch.Tensor
    max: torch.Tensor

    @classmethod
    def of(cls, tau, positions_shape, device):
        if tau is None:  # no temperature: tau = 1 everywhere
            one = torch.ones((), device=device)
            return cls(torch.ones(positions_shape, device=device), one, one)
        low, high = torch.aminmax(tau.detach())  # one pass over the (tokens x V) temperatures
        return cls(tau.mean(-1), low, high)


def _divided_log_softmax_(z, tau):
    """log_softmax(z / tau) written into z (tau None: log_softmax(z)), and each row's log-sum-exp
    of z / tau (z / tau = out + lse; None without tau): the forward of the functions below."""
    if tau is None:
        return torch._log_softmax(z, -1, False, out=z), None
    y = z.div_(tau)
    top = y.amax(dim=-1, keepdim=True)
    out = torch._log_softmax(y, -1, False, out=y)  # row-wise, in place
    # lse = y - out at the row's largest entry (the most accurate place). out is y less a row
    # constant, rounded, so it is largest there too: out's amax is that entry, found without
    # max()'s index (3x slower on a CPU)
    return out, top - out.amax(dim=-1, keepdim=True)


def _through_division(grad_y, out, tau, lse, needs_tau):
    """(grad of z, grad of tau or None) from grad_y, the gradient of y = z / tau (written over)."""
    grad_z = grad_y.div_(tau)  # d/dz (z / tau) = 1 / tau
    if not needs_tau:
        return grad_z, None
    # d/dtau (z / tau) = -(z / tau) / tau, and -(z / tau) = -lse - out
    if out.dim() >= 2 and out.shape[-2] > 1 and tau.shape == (*out.shape[:-2], 1, out.shape[-1]):  # CT-MoS
        return grad_z, _summed_over_components(lse, out, grad_z)
    return grad_z, torch.sub(-lse, out).mul_(grad_z).sum_to_size(tau.shape)


def _summed_over_components(lse, out, grad_z):
    """sum_m (-lse - out) * grad_z over the components m of (..., M, V), as (..., 1, V), added up
    in place: no (..., M, V) product and no zero-filled sum (for M <= 4 in the order of torch's
    sum over M, so the same numbers)."""
    total = None
    for m in range(out.shape[-2]):
        term = torch.sub(-lse[..., m, :], out[..., m, :]).mul_(grad_z[..., m, :])
        total = term if total is None else total.add_(term)
    return total.unsqueeze(-2)


def _one_hot_backward(out, g, index):
    """The log_softmax backward of a gradient g (..., 1) on the entries at index only: what a
    gather's backward followed by log_softmax's would give, without a zero-filled (..., V) one."""
    return out.exp().mul_(-g).scatter_add_(-1, index, g)


class DividedLogSoftmax(torch.autograd.Function):
    """log_softmax(z / tau) over the last dimension (tau broadcast to z), written into z, with one
    backward for both inputs. Autograd through ``z / tau`` and ``log_softmax`` allocates several
    vocabulary-sized tensors each way, and on CPU a fresh one costs as much as the arithmetic on it
    (its pages are faulted in): measured, a third of a ct_transformer training step. Saves the
    output, tau and each row's log-sum-exp."""

    @staticmethod
    def forward(ctx, z, tau):
        out, lse = _divided_log_softmax_(z, tau)
        ctx.mark_dirty(z)
        ctx.save_for_backward(out, tau, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, tau, lse = ctx.saved_tensors
        grad_y = out.exp().mul_(-grad.sum(-1, keepdim=True)).add_(grad)  # log_softmax backward
        return _through_division(grad_y, out, tau, lse, ctx.needs_input_grad[1])


class DividedTargetLogProb(torch.autograd.Function):
    """log_softmax(z / tau)[target] with z written over by the full log-probabilities (returned
    too, without gradient) and one backward for z and tau: the gradient of the one-hot selection
    is added at the target, where gathering from DividedLogSoftmax's output hands its backward a
    zero-filled (..., V) gradient and sums it (three passes over the logits fewer). The same
    arithmetic per entry as that gather, so the same numbers. (Without a temperature the head
    keeps torch's log_softmax and its gather: torch's fused backward rounds differently.)"""

    @staticmethod
    def forward(ctx, z, tau, target):
        out, lse = _divided_log_softmax_(z, tau)
        index = target.unsqueeze(-1)
        ctx.mark_dirty(z)
        ctx.mark_non_differentiable(out)
        ctx.set_materialize_grads(False)  # out gets no gradient: no zero-filled one for it
        ctx.save_for_backward(out, tau, lse, index)
        return out.gather(-1, index).squeeze(-1), out

    @staticmethod
    def backward(ctx, grad, _grad_out):
        if grad is None:  # log p(target) was not used
            return None, None, None
        out, tau, lse, index = ctx.saved_tensors
        grad_y = _one_hot_backward(out, grad.unsqueeze(-1), index)
        return (*_through_division(grad_y, out, tau, lse, ctx.needs_input_grad[1]), None)


def divided_log_softmax(logits, tau, index=None):
    """log_softmax(logits / tau) in fp32 (tau None: log_softmax(logits)); with ``index`` (..., 1)
    only its entries (...), without a gather's vocabulary-sized gradient where there is a tau
    (DividedTargetLogProb). Overwrites ``logits`` when it is fp32 already: pass a tensor nothing
    else reads (a layer's fresh output)."""
    if tau is None:
        log_probs = F.log_softmax(logits.float(), dim=-1)
        return log_probs if index is None else log_probs.gather(-1, index).squeeze(-1)
    if index is None:
        return DividedLogSoftmax.apply(logits.float(), tau.float())
    return DividedTargetLogProb.apply(logits.float(), tau.float(), index.squeeze(-1))[0]


class MixtureTargetLogProb(torch.autograd.Function):
    """log p(target) of a mixture of softmaxes, logsumexp_m(log pi_m + log_softmax(z_m / tau)[target]),
    with z (..., M, V) written over by the components' log-probabilities and one backward for every
    input. What training needs, without the full mixture (a logsumexp across the M components at
    every word). Measured on a CPU at V = 10k, M = 2, one thread: the head's training step is 2.8x
    faster than gathering from the full distribution (a whole PTB LSTM training step: 1.9x). The
    tempered softmax head (M = 1) has its own, DividedTargetLogProb."""

    @staticmethod
    def forward(ctx, z, tau, log_prior, target):
        out, lse = _divided_log_softmax_(z, tau)  # each component
        index = target[..., None, None].expand(*out.shape[:-1], 1)
        joint = log_prior + out.gather(-1, index).squeeze(-1)  # (..., M)
        log_p = torch.logsumexp(joint, dim=-1)
        posterior = torch.exp(joint - log_p.unsqueeze(-1))  # of each component given the target
        ctx.mark_dirty(z)
        ctx.mark_non_differentiable(out)
        # out gets no gradient: without this autograd hands backward a zero-filled (..., M, V)
        # tensor for it (the PTB LSTM with MoS trains at 9 % more words/s without: docs/speed.md)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(out, tau, lse, posterior, index)
        return log_p, out

    @staticmethod
    def backward(ctx, grad, _grad_out):
        if grad is None:  # log_p was not used
            return None, None, None, None
        out, tau, lse, posterior, index = ctx.saved_tensors
        g = grad.unsqueeze(-1) * posterior  # d/d log_softmax(z_m / tau)[target], (..., M)
        grad_y = _one_hot_backward(out, g.unsqueeze(-1), index)
        if tau is None:
            return grad_y, None, g, None
        return (*_through_division(grad_y, out, tau, lse, ctx.needs_input_grad[1]), g, None)


def locked_dropout(x, p, training):
    """Dropout with one mask per sequence, shared over time (dim 1 of (batch, time, ...)): the
    MoS reference's LockedDropout on the latent ("dropoutl"). Inputs without a time axis get
    ordinary dropout."""
    if not training or p == 0:
        return x
    if x.dim() < 3:
        return F.dropout(x, p, training)
    mask = x.new_empty(x.size(0), 1, *x.shape[2:]).bernoulli_(1 - p) / (1 - p)
    return x * mask


class TemperatureHead(nn.Module):
    """Shared ``score``: heads that compute the full distribution anyway just gather from it."""

    def score(self, h, target):
        log_probs, stats = self(h)
        return log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1), stats

    def temperatures(self, h):
        """tau of every word, (..., V) fp32, for analysis; None when the head has no temperature."""
        return None if self.temperature is None else self.temperature(h)


class TemperedSoftmaxHead(TemperatureHead):
    def __init__(self, input_dim, vocab_size, temperature=None, bias=True):
        super().__init__()
        self.output = nn.Linear(input_dim, vocab_size, bias=bias)
        self.temperature = temperature

    def forward(self, h):
        """h: (..., input_dim) -> (log_probs (..., V) fp32, TauStats)."""
        tau = self.temperature(h) if self.temperature is not None else None
        log_probs = divided_log_softmax(self.output(h), tau)
        return log_probs, TauStats.of(tau, h.shape[:-1], h.device)

    def score(self, h, target):
        """log p(target); with a temperature without the gather's backward over the vocabulary."""
        tau = self.temperature(h) if self.temperature is not None else None
        log_p = divided_log_softmax(self.output(h), tau, target.unsqueeze(-1))
        return log_p, TauStats.of(tau, h.shape[:-1], h.device)


class MixtureOfSoftmaxesHead(TemperatureHead):
    def __init__(
        self,
        input_dim,
        vocab_size,
        n_components=15,
        latent_dim=None,
        temperature=None,
        bias=True,
        latent_dropout=0.0,
    ):
        super().__init__()
        if int(n_components) != n_components or n_components < 1:
            raise OptionError(f"--mos-components (M) must be an integer >= 1, got {n_components}")
        latent_dim = latent_dim or input_dim
        self.n_components = n_components
        self.prior = nn.Linear(input_dim, n_components, bias=False)
        self.latent = nn.Linear(input_dim, n_components * latent_dim)
        self.latent_dropout = latent_dropout
        self.output = nn.Linear(latent_dim, vocab_size, bias=bias)
        self.temperature = temperature

    def mixture(self, h):
        """log pi (..., M), the components' logits (..., M, V) and tau (..., V) or None, all fp32."""
        log_prior = F.log_softmax(self.prior(h).float(), dim=-1)
        latent = torch.tanh(self.latent(h)).view(*h.shape[:-1], self.n_components, -1)
        latent = locked_dropout(latent, self.latent_dropout, self.training)
        tau = self.temperature(h) if self.temperature is not None else None
        return log_prior, self.output(latent).float(), tau

    def forward(self, h):
        """h: (..., input_dim) -> (log_probs (..., V) fp32, TauStats)."""
        log_prior, logits, tau = self.mixture(h)
        # one temperature per position, shared by the components
        components = divided_log_softmax(logits, None if tau is None else tau.unsqueeze(-2))
        log_probs = torch.logsumexp(log_prior.unsqueeze(-1) + components, dim=-2)
        return log_probs, TauStats.of(tau, h.shape[:-1], h.device)

    def score(self, h, target):
        log_prior, logits, tau = self.mixture(h)
        shared = None if tau is None else tau.unsqueeze(-2)  # by the components, as in forward
        log_p, _ = MixtureTargetLogProb.apply(logits, shared, log_prior, target)
        return log_p, TauStats.of(tau, h.shape[:-1], h.device)
