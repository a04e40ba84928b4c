"""The fit of t*: one pass of streaming sums of the NLL and its first two derivatives in beta = 1/t
at some betas (``scan``), the bracket of beta* from the first pass's grid, and Newton steps inside
it (``fit``)."""

import dataclasses
import math
from typing import List

import torch

from . import CalibrationError

# beta of the first pass: 0 (the uniform distribution) and 1/16 ... 16 in factors of sqrt(2)
GRID = (0.0, *(2.0 ** (k / 2) for k in range(-8, 9)))
TOLERANCE = 1e-6  # relative Newton step at which beta is taken as beta*
MAX_PASSES = 40


@dataclasses.dataclass
class Pass:
    """Sums over the tokens of one pass, at each inverse temperature of ``betas``."""

    betas: List[float]
    tokens: int
    nll: torch.Tensor  # sum of -log q(y)
    grad: torch.Tensor  # sum of E_q[D] - D_y: d nll / d beta
    curv: torch.Tensor  # sum of Var_q[D]: d2 nll / d beta2
    gap: float  # sum of max D - D_y: d nll / d beta as beta -> infinity
    confidence: torch.Tensor  # per token: top-1 probability at beta = confidence_at
    correct: torch.Tensor  # per token: the top-1 prediction is the target


def moments(D, beta):
    """Per row of D: logsumexp(beta D), and the mean and variance of D under softmax(beta D)."""
    z = beta * D
    lse = torch.logsumexp(z, dim=-1)
    q = torch.exp(z - lse[:, None])
    mean = (q * D).sum(-1)
    var = (q * (D - mean[:, None]) ** 2).sum(-1)
    return lse, mean, var


def scan(chunks, betas, confidence_at):
    """One pass over ``chunks`` of (D float64 (n, V), targets (n,)): a ``Pass``."""
    k = len(betas)
    nll, grad, curv = (torch.zeros(k, dtype=torch.float64) for _ in range(3))
    gap, tokens, confidence, correct = 0.0, 0, [], []
    for D, y in chunks:
        d_y = D.gather(1, y[:, None])[:, 0]
        top, best = D.max(-1)
        for i, beta in enumerate(betas):
            lse, mean, var = moments(D, beta)
            nll[i] += (lse - beta * d_y).sum().item()
            grad[i] += (mean - d_y).sum().item()
            curv[i] += var.sum().item()
        gap += (top - d_y).sum().item()
        confidence.append(torch.exp(confidence_at * top - torch.logsumexp(confidence_at * D, -1)).cpu())
        correct.append((best == y).cpu())
        tokens += len(y)
    return Pass(
        list(betas),
        tokens,
        nll,
        grad,
        curv,
        gap,
        torch.cat(confidence) if confidence else torch.zeros(0, dtype=torch.float64),
        torch.cat(correct) if correct else torch.zeros(0, dtype=torch.bool),
    )


def bracket(first):
    """(lo, hi) around beta* from the grid of the first pass (hi = inf when beyond the grid), or a
    CalibrationError when no finite t > 0 minimises the NLL."""
    betas, grad = first.betas, first.grad.tolist()
    if grad[betas.index(0.0)] >= 0:
        raise CalibrationError(
            "the NLL only falls as t grows: the model is no better than the uniform distribution "
            "on this subset, so no finite temperature minimises it"
        )
    if first.gap <= 0:
        raise CalibrationError(
            "every top-1 prediction of the subset is right: the NLL falls towards 0 as t -> 0, "
            "so no temperature > 0 minimises it"
        )
    below = [b for b, g in zip(betas, grad) if g < 0]
    above = [b for b, g in zip(betas, grad) if g >= 0]
    return max(below), min(above, default=math.inf)


def fit(first, evaluate, tolerance=TOLERANCE, max_passes=MAX_PASSES):
    """beta* and the ``Pass`` evaluated there: Newton steps on the convex NLL(beta), starting at the
    best grid point of ``first``, kept inside the bracket (bisection otherwise).
    ``evaluate(beta)`` is one pass at beta (with the confidences at beta)."""
    lo, hi = bracket(first)
    i = min(range(len(first.betas)), key=lambda j: first.nll[j].item())
    beta, grad, curv, at = first.betas[i], first.grad[i].item(), first.curv[i].item(), None
    for _ in range(max_passes):
        if at is not None and curv > 0 and abs(grad / curv) <= tolerance * beta:
            return beta, at
        candidate = beta - grad / curv if curv > 0 else math.nan
        if not lo < candidate < hi:  # Newton left the bracket, or has no curvature to go by
            candidate = split(lo, hi)
        at = evaluate(candidate)
        beta, grad, curv = candidate, at.grad[0].item(), at.curv[0].item()
        lo, hi = (beta, hi) if grad < 0 else (lo, beta)
    raise CalibrationError(f"the temperature fit did not converge in {max_passes} passes")


def split(lo, hi):
    """A point inside the bracket (lo, hi): its geometric mean (a bracket may span decades of
    beta), or beyond lo while no upper end is known."""
    if math.isinf(hi):
        return 4 * lo
    return hi / 4 if lo == 0 else math.sqrt(lo * hi)
