"""Contextual temperature (Wang et al., AAAI 2021): a temperature per position
and per vocabulary entry, computed from the decoder state h_t that predicts token t+1.

    mu_t  = h_t . W1 . W2                W1: d x Q, W2: Q x V (rank Q; the paper uses Q = 280 on PTB)
    tau_t = (softmax(mu_t) + alpha) / beta          "softmax" (default): tau in [alpha/beta, (1+alpha)/beta]
          = lam ** tanh(mu_t)                       "lambda_tanh": tau in (1/lam, lam), lam > 1
          = tanh(mu_t) + lam                        "tanh_plus_lambda": tau in (lam-1, lam+1), lam > 1
          = c                                       "constant": the constant-temperature baseline

The output distribution is then softmax(z_t / tau_t) (element-wise division). tau depends on h_t
only, so it sees the same prefix as the logits. Everything is computed in fp32. Learned alpha and
beta are kept valid by construction: alpha = softplus(a) > 0, beta = softplus(b) > 0. The defaults
(alpha, beta) = (1, 0.5), tau in [2, 4], are the values the AAAI paper reports as best.

With alpha = 0, softmax(mu) can underflow to exactly 0 in fp32 and the logits would be divided by
zero; tau is therefore floored at TAU_FLOOR = 1e-6 (the floor never binds when alpha/beta >= 1e-6).

Each normalisation is a registered ``Normalization`` subclass (below): it checks its options,
turns mu into tau, and says how an adaptive softmax, which never computes all V temperatures at
once, computes tau cluster by cluster and its loss scale.

A plain nn.Module with no fairseq registry code, usable by any output head.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import OptionError

TAU_FLOOR = 1e-6


def _inverse_softplus(y):
    return y + math.log(-math.expm1(-y))  # softplus(_inverse_softplus(y)) == y for y > 0


# ------------------------------------------------------------------------ the normalisations
NORMALIZATIONS = {}  # --ct-normalization name -> Normalization subclass


def register_normalization(cls):
    NORMALIZATIONS[cls.name] = cls
    return cls


class Normalization:
    """How tau is made from mu = h . W1 . W2: one registered subclass per --ct-normalization.
    Stateless: the parameters (W1, W2, alpha, beta) live in the ``ContextualTemperature`` passed
    in. A new normalisation is one subclass here plus its test."""

    name = None
    uses_mu = True  # False: tau does not depend on h, and the layer has no W1, W2

    @staticmethod
    def check(alpha, beta, learn_alpha_beta, lam, constant):
        """Raise a ValueError naming the option if this normalisation's options are invalid."""

    def tau(self, layer, mu):
        """tau of every entry of ``mu`` (..., V), fp32."""
        raise NotImplementedError

    # The adaptive softmax computes tau cluster by cluster (AdaptiveSoftmaxHead). Element-wise
    # normalisations need nothing across clusters; ``state`` carries what one that does needs.
    def adaptive_head(self, layer, mu_head):
        """(tau of the head entries, state) from the head's mu (shortlist words and clusters)."""
        return self.tau(layer, mu_head), None

    def adaptive_tail(self, layer, mu_tail, entry_state):
        """tau of a tail cluster's words, for the rows of ``mu_tail``; ``entry_state``: the state
        of that cluster's head entry for the same rows (None if ``adaptive_head`` gave none)."""
        return self.tau(layer, mu_tail)

    def adaptive_loss_scale(self, layer, tau_head, vocab_size):
        """mean_v(tau) per position where it can be had without every cluster: over the head."""
        return tau_head.mean(-1)


@register_normalization
class SoftmaxNormalization(Normalization):
    """tau = (softmax(mu) + alpha) / beta in [alpha/beta, (1+alpha)/beta] (the AAAI paper's)."""

    name = "softmax"

    @staticmethod
    def check(alpha, beta, learn_alpha_beta, lam, constant):
        if not (math.isfinite(alpha) and (alpha > 0 if learn_alpha_beta else alpha >= 0)):
            allowed = "> 0 when learned (softplus cannot reach 0)" if learn_alpha_beta else ">= 0"
            raise OptionError(f"--ct-alpha must be a finite number {allowed}, got {alpha}")
        if not (math.isfinite(beta) and beta > 0):
            raise OptionError(f"--ct-beta must be a finite number > 0, got {beta}")

    def tau(self, layer, mu):
        alpha, beta = layer.alpha_beta()
        if layer.learn_alpha_beta or alpha / beta < TAU_FLOOR:
            return layer.from_probabilities(torch.softmax(mu, dim=-1))
        return SoftmaxTemperature.apply(mu, alpha, beta)  # the floor cannot bind: tau >= alpha / beta

    # q is itself an adaptive softmax over mu with the same clusters: a distribution over all V
    # words, so tau keeps its range and mean_v(tau) = (alpha + 1/V) / beta exactly.
    def adaptive_head(self, layer, mu_head):
        q = torch.softmax(mu_head, dim=-1)
        return layer.from_probabilities(q), q

    def adaptive_tail(self, layer, mu_tail, q_cluster):
        return layer.from_probabilities(q_cluster.unsqueeze(1) * torch.softmax(mu_tail, dim=-1))

    def adaptive_loss_scale(self, layer, tau_head, vocab_size):
        alpha, beta = layer.alpha_beta()
        return (alpha + 1.0 / vocab_size) / beta * tau_head.new_ones(tau_head.shape[:-1])


class SoftmaxTemperature(torch.autograd.Function):
    """tau = (softmax(mu) + alpha) / beta for fixed alpha, beta, written into mu (a fresh matmul
    output): on CPU each fresh vocabulary-sized tensor costs about as much as the arithmetic on it.
    The backward recovers q = beta * tau - alpha from tau."""

    @staticmethod
    def forward(ctx, mu, alpha, beta):
        q = torch._softmax(mu, -1, False, out=mu)  # row-wise, in place
        tau = q.mul_(1.0 / beta).add_(alpha / beta)
        ctx.mark_dirty(mu)
        ctx.save_for_backward(tau)
        ctx.alpha, ctx.beta = alpha, beta
        return tau

    @staticmethod
    def backward(ctx, grad):
        (tau,) = ctx.saved_tensors
        q = tau.mul(ctx.beta).sub_(ctx.alpha)
        q_grad = q * grad  # softmax backward of grad / beta: q * (grad - sum(q * grad)) / beta
        q_grad.sub_(q.mul_(q_grad.sum(-1, keepdim=True))).mul_(1.0 / ctx.beta)
        return q_grad, None, None


@register_normalization
class LambdaTanhNormalization(Normalization):
    """tau = lambda ** tanh(mu) in (1/lambda, lambda)."""

    name = "lambda_tanh"

    @staticmethod
    def check(alpha, beta, learn_alpha_beta, lam, constant):
        check_lambda(lam)

    def tau(self, layer, mu):
        return torch.exp(torch.tanh(mu) * math.log(layer.lam))


@register_normalization
class TanhPlusLambdaNormalization(Normalization):
    """tau = tanh(mu) + lambda in (lambda - 1, lambda + 1)."""

    name = "tanh_plus_lambda"

    @staticmethod
    def check(alpha, beta, learn_alpha_beta, lam, constant):
        check_lambda(lam)

    def tau(self, layer, mu):
        return torch.tanh(mu) + layer.lam


@register_normalization
class ConstantNormalization(Normalization):
    """tau = c everywhere: the constant-temperature baseline."""

    name = "constant"
    uses_mu = False

    @staticmethod
    def check(alpha, beta, learn_alpha_beta, lam, constant):
        if not (math.isfinite(constant) and constant > 0):
            raise OptionError(f"--ct-constant must be a finite number > 0, got {constant}")

    def tau(self, layer, shape):
        return layer.constant.expand(shape)

    def adaptive_loss_scale(self, layer, tau_head, vocab_size):
        return layer.constant.expand(tau_head.shape[:-1])


def check_lambda(lam):
    if not (math.isfinite(lam) and lam > 1):
        raise OptionError(f"--ct-lambda must be a finite number > 1, got {lam}")


# ------------------------------------------------------------------------------- the layer
class ContextualTemperature(nn.Module):
    def __init__(
        self,
        input_dim,
        vocab_size,
        rank=280,
        normalization="softmax",
        alpha=1.0,
        beta=0.5,
        learn_alpha_beta=False,
        lam=2.0,
        constant=1.0,
    ):
        super().__init__()
        if normalization not in NORMALIZATIONS:
            raise OptionError(
                f"--ct-normalization must be one of {', '.join(NORMALIZATIONS)}, got {normalization!r}"
            )
        if input_dim < 1 or vocab_size < 1:
            raise ValueError(
                f"contextual temperature needs input_dim >= 1 and vocab_size >= 1, "
                f"got {input_dim}, {vocab_size}"
            )
        self.norm = NORMALIZATIONS[normalization]()
        if self.norm.uses_mu and (int(rank) != rank or rank < 1):
            raise OptionError(f"--ct-rank (Q) must be an integer >= 1, got {rank}")
        self.norm.check(alpha, beta, learn_alpha_beta, lam, constant)
        self.normalization = normalization
        self.vocab_size = vocab_size
        self.lam = float(lam)
        self.learn_alpha_beta = learn_alpha_beta
        if not self.norm.uses_mu:
            self.register_buffer("constant", torch.tensor(float(constant)), persistent=False)
            return
        self.down = nn.Linear(input_dim, rank, bias=False)  # W1
        self.up = nn.Linear(rank, vocab_size, bias=False)  # W2
        nn.init.normal_(self.down.weight, std=input_dim**-0.5)
        nn.init.normal_(self.up.weight, std=rank**-0.5)
        if learn_alpha_beta:
            self.alpha_raw = nn.Parameter(torch.tensor(_inverse_softplus(alpha)))
            self.beta_raw = nn.Parameter(torch.tensor(_inverse_softplus(beta)))
        else:
            self.alpha_value, self.beta_value = float(alpha), float(beta)

    def alpha_beta(self):
        if self.learn_alpha_beta:
            return F.softplus(self.alpha_raw.float()), F.softplus(self.beta_raw.float())
        return self.alpha_value, self.beta_value

    def forward(self, h):
        """h: (..., input_dim) -> tau: (..., vocab_size), fp32 and > 0."""
        if not self.norm.uses_mu:
            return self.norm.tau(self, (*h.shape[:-1], self.vocab_size))
        return self.norm.tau(self, self.mu(h))

    def mu(self, h, rows=None):
        """mu = h . W1 . W2 in fp32, for all V entries or only W2's ``rows`` (a slice)."""
        up = self.up.weight if rows is None else self.up.weight[rows]
        return F.linear(F.linear(h.float(), self.down.weight.float()), up.float())

    def from_probabilities(self, q):
        """The softmax normalisation (q + alpha) / beta of a distribution q over the vocabulary."""
        alpha, beta = self.alpha_beta()
        return ((q + alpha) / beta).clamp_min(TAU_FLOOR)

    def extra_repr(self):
        return f"normalization={self.normalization}, vocab_size={self.vocab_size}"
