"""tempered_ce's loss computed with the output projection, chunk by chunk of target tokens, so that
the batch x vocabulary logits never exist at once (``--loss-chunk-tokens N``).

Per token, with z = W h + b and P = softmax(z / T) (as tempered_ce.py defines the loss):

    loss = s * ((1 - w) * ((1 - eps - eps_i) * (-log P_y) + eps_i * sum_v (-log P_v)) + w * sum_v P_v log P_v)

with eps_i = eps / (V - 1) (fairseq's label smoothing) and s = T (1 with --no-temperature-rescale).
Its gradient with respect to a = z / T is, per token,

    (1 - w) * ((1 - eps - eps_i) * (P - onehot(y)) + eps_i * (V * P - 1)) + w * P * (log P - sum_v P_v log P_v)

so each chunk's logits are made, turned into that gradient and multiplied into the gradients of h,
W and b during the forward pass, and dropped: what is kept for backward is the gradient of h (a
tokens x features tensor) and of W and b, scaled by the incoming gradient in backward (the same
approach as Liger Kernel's and Apple's fused linear cross-entropy, which compute neither the
entropy term nor, next to a label-smoothed loss, the target's NLL that tempered_ce logs). The logits are made in the features' dtype, as the model's
own output layer makes them, and normalised in float32, as fairseq's get_normalized_probs does."""

from typing import NamedTuple

import torch
import torch.nn.functional as F


class ChunkSums(NamedTuple):
    """Sums over the non-padding tokens, as tempered_ce logs them (float32 scalars)."""

    nll: torch.Tensor  # -log P_y of the tempered distribution
    correct: torch.Tensor  # how many tokens' logits have their maximum at the target


class ChunkedTemperedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, target, keep, settings):
        """h (N, d) features; weight (V, d), bias (V,) or None; target (N,); keep (N,) bool: the
        tokens that count (not padding). settings: (T, eps, w, rescale, chunk, count_correct).
        Returns the loss (float32 scalar) and the ChunkSums."""
        temperature, eps, sem_weight, rescale, chunk, count_correct = settings
        vocab = weight.size(0)
        eps_i = eps / (vocab - 1)
        c_nll, c_smooth = (1.0 - sem_weight) * (1.0 - eps - eps_i), (1.0 - sem_weight) * eps_i
        scale = temperature if rescale else 1.0
        ctx.input_dtypes = (h.dtype, weight.dtype)
        wide = torch.promote_types(h.dtype, torch.float32)  # float32, or float64 for float64 inputs
        grads = _Gradients(h, weight, wide) if any(ctx.needs_input_grad[:3]) else None
        loss = torch.zeros((), dtype=wide, device=h.device)
        nll_sum, correct = torch.zeros_like(loss), torch.zeros_like(loss)
        for start in range(0, h.size(0), chunk):
            rows = slice(start, start + chunk)
            hc, y, counts = h[rows], target[rows], keep[rows].to(wide)
            z = F.linear(hc, weight, bias)
            if count_correct:
                correct += (z.argmax(-1) == y).to(wide).mul_(counts).sum()
            lp = z.to(wide).div_(temperature) if z.dtype != wide else z.div_(temperature)  # our own copy
            torch._log_softmax(lp, -1, False, out=lp)  # row-wise, in place
            nll = -lp.gather(1, y[:, None]).squeeze(1)
            p = lp.exp()
            rows_loss = c_nll * nll - c_smooth * lp.sum(-1)
            if sem_weight > 0:
                negative_entropy = (p * lp).sum(-1)
                rows_loss += sem_weight * negative_entropy
            loss += rows_loss.mul_(counts).sum()
            nll_sum += nll.mul_(counts).sum()
            if grads is not None:  # d loss / d z = scale / T * d loss / d a
                if sem_weight > 0:
                    entropy_part = lp.sub_(negative_entropy[:, None]).mul_(p).mul_(sem_weight)
                g = p.mul_(c_nll + c_smooth * vocab).sub_(c_smooth)
                g.scatter_add_(1, y[:, None], torch.full_like(y[:, None], -c_nll, dtype=g.dtype))
                if sem_weight > 0:
                    g += entropy_part
                g.mul_((counts * (scale / temperature))[:, None])
                grads.add(rows, hc, g)
        if grads is not None:
            ctx.save_for_backward(*grads.result())
        ctx.has_bias = bias is not None
        ctx.mark_non_differentiable(nll_sum, correct)
        return loss * scale, nll_sum, correct

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll, _grad_correct):
        grad_h, grad_weight, grad_bias = ctx.saved_tensors
        return (
            (grad_h * grad_loss).to(ctx.input_dtypes[0]),
            (grad_weight * grad_loss).to(ctx.input_dtypes[1]),
            (grad_bias * grad_loss).to(ctx.input_dtypes[1]) if ctx.has_bias else None,
            None,
            None,
            None,
        )


class _Gradients:
    """The gradients of h, W and b, accumulated chunk by chunk in float32 (or float64) (those of W
    and b sum over all chunks; a half-precision sum of many chunks would lose their small terms)."""

    def __init__(self, h, weight, wide):
        self.h = torch.empty(h.shape, dtype=wide, device=h.device)
        self.weight = torch.zeros(weight.shape, dtype=wide, device=weight.device)
        self.bias = torch.zeros(weight.size(0), dtype=wide, device=weight.device)
        self.matrix = weight

    def add(self, rows, hc, g):
        g_low = g.to(hc.dtype)  # the matrix products in the model's dtype, as its own backward
        self.h[rows] = g_low @ self.matrix
        self.weight += (g_low.t() @ hc).to(g.dtype)
        self.bias += g.sum(0)

    def result(self):
        return self.h, self.weight, self.bias


def chunked_tempered_loss(
    h, weight, bias, target, keep, temperature, eps, sem_weight, rescale, chunk, count_correct=True
):
    """(loss, ChunkSums) of the module docstring over the tokens where ``keep``; see
    ChunkedTemperedLoss.forward for the arguments (count_correct False: ChunkSums.correct is 0,
    and the argmax over the vocabulary is not computed)."""
    settings = (
        float(temperature),
        float(eps),
        float(sem_weight),
        bool(rescale),
        int(chunk),
        bool(count_correct),
    )
    loss, nll, correct = ChunkedTemperedLoss.apply(h, weight, bias, target, keep, settings)
    return loss, ChunkSums(nll, correct)
