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

Heads that never need all V temperatures at once (the adaptive softmax) use the pieces:
``mu(h, rows)`` for a slice of the vocabulary, ``from_probabilities(q)`` for the softmax
normalisation of a distribution q they normalised themselves, ``elementwise(mu)`` for the others.

A plain nn.Module with no fairseq registry code, usable by any output head.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NORMALIZATIONS = ("softmax", "lambda_tanh", "tanh_plus_lambda", "constant")
ELEMENTWISE = ("lambda_tanh", "tanh_plus_lambda")
TAU_FLOOR = 1e-6


def _inverse_softplus(y):
    return y + math.log(-math.expm1(-y))  # softplus(_inverse_softplus(y)) == y for y > 0


class ContextualTemperature(nn.Module):
    def __init__(self, input_dim, vocab_size, rank=280, normalization="softmax", alpha=1.0,
                 beta=0.5, learn_alpha_beta=False, lam=2.0, constant=1.0):
        super().__init__()
        check_options(input_dim, vocab_size, rank, normalization, alpha, beta, learn_alpha_beta,
                      lam, constant)
        self.normalization = normalization
        self.vocab_size = vocab_size
        if normalization == "constant":
            self.register_buffer("constant", torch.tensor(float(constant)), persistent=False)
            return
        self.down = nn.Linear(input_dim, rank, bias=False)  # W1
        self.up = nn.Linear(rank, vocab_size, bias=False)   # W2
        nn.init.normal_(self.down.weight, std=input_dim ** -0.5)
        nn.init.normal_(self.up.weight, std=rank ** -0.5)
        self.lam = float(lam)
        self.learn_alpha_beta = learn_alpha_beta
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
        if self.normalization == "constant":
            return self.constant.expand(*h.shape[:-1], self.vocab_size)
        mu = self.mu(h)
        if self.normalization == "softmax":
            return self.from_probabilities(torch.softmax(mu, dim=-1))
        return self.elementwise(mu)

    def mu(self, h, rows=None):
        """mu = h . W1 . W2 in fp32, for all V entries or only W2's ``rows`` (a slice)."""
        up = self.up.weight if rows is None else self.up.weight[rows]
        return F.linear(F.linear(h.float(), self.down.weight.float()), up.float())

    def from_probabilities(self, q):
        """The softmax normalisation (q + alpha) / beta of a distribution q over the vocabulary."""
        alpha, beta = self.alpha_beta()
        return ((q + alpha) / beta).clamp_min(TAU_FLOOR)

    def elementwise(self, mu):
        """lam ** tanh(mu) or tanh(mu) + lam: no normalisation across the vocabulary."""
        if self.normalization == "lambda_tanh":
            return torch.exp(torch.tanh(mu) * math.log(self.lam))
        return torch.tanh(mu) + self.lam

    def extra_repr(self):
        return f"normalization={self.normalization}, vocab_size={self.vocab_size}"


def check_options(input_dim, vocab_size, rank, normalization, alpha, beta, learn_alpha_beta, lam,
                  constant):
    """One clear error per bad option, raised when the model is built."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"--ct-normalization must be one of {', '.join(NORMALIZATIONS)}, got {normalization!r}")
    if input_dim < 1 or vocab_size < 1:
        raise ValueError(f"contextual temperature needs input_dim >= 1 and vocab_size >= 1, got {input_dim}, {vocab_size}")
    if normalization == "constant":
        if not (math.isfinite(constant) and constant > 0):
            raise ValueError(f"--ct-constant must be a finite number > 0, got {constant}")
        return
    if int(rank) != rank or rank < 1:
        raise ValueError(f"--ct-rank (Q) must be an integer >= 1, got {rank}")
    if normalization == "softmax":
        if not (math.isfinite(alpha) and (alpha > 0 if learn_alpha_beta else alpha >= 0)):
            allowed = "> 0 when learned (softplus cannot reach 0)" if learn_alpha_beta else ">= 0"
            raise ValueError(f"--ct-alpha must be a finite number {allowed}, got {alpha}")
        if not (math.isfinite(beta) and beta > 0):
            raise ValueError(f"--ct-beta must be a finite number > 0, got {beta}")
    elif not (math.isfinite(lam) and lam > 1):
        raise ValueError(f"--ct-lambda must be a finite number > 1, got {lam}")
