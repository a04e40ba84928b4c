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
        grads = _Gradients(h, weight, wide, bias is not None) if any(ctx.needs_input_grad[:3]) else None
        scratch = _Scratch(min(chunk, h.size(0)), vocab, h.device)
        loss = torch.zeros((), dtype=wide, device=h.device)
        nll_sum, correct = torch.zeros_like(loss), torch.zeros_like(loss)
        for start in range(0, h.size(0), chunk):
            rows = slice(start, start + chunk)
            hc, y, counts = h[rows], target[rows], keep[rows].to(wide)
            z = scratch.linear(hc, weight, bias)
            if count_correct:
                correct += (z.argmax(-1) == y).to(wide).mul_(counts).sum()
            lp = scratch.wide_copy(z, wide).div_(temperature)
            torch._log_softmax(lp, -1, False, out=lp)  # row-wise, in place
            nll = -lp.gather(1, y[:, None]).squeeze(1)
            rows_loss = c_nll * nll - c_smooth * lp.sum(-1)
            p = negative_entropy = None
            if sem_weight > 0:
                p = scratch.exp(lp)
                negative_entropy = _row_dot(p, lp)
                rows_loss += sem_weight * negative_entropy
            loss += rows_loss.mul_(counts).sum()
            nll_sum += nll.mul_(counts).sum()
            if grads is not None:  # d loss / d z = scale / T * d loss / d a, written over lp
                row_scale = counts * (scale / temperature)
                g = _logit_gradient(lp, p, negative_entropy, (c_nll, c_smooth, sem_weight), row_scale)
                g.scatter_add_(1, y[:, None], (-c_nll * row_scale)[:, None])
                grads.add(rows, hc, g, z)
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


def _row_dot(p, lp):
    """sum_v p * lp of each row, without an N x V product, in their dtype: not autocast (under
    --amp an einsum would be a half-precision product, where the loss is float32 throughout)."""
    with torch.autocast(p.device.type, enabled=False):
        return torch.einsum("nv,nv->n", p, lp)


def _logit_gradient(lp, p, negative_entropy, coefficients, row_scale):
    """The module docstring's gradient times row_scale, but for the target's -c_nll, written over
    lp (log P) in place: P (c_nll + V c_smooth + w (log P - sum_v P_v log P_v)) - c_smooth. Without
    the entropy term (p None) P is lp's own exp."""
    c_nll, c_smooth, sem_weight = coefficients
    a, row_scale = c_nll + c_smooth * lp.size(1), row_scale[:, None]
    if p is None:
        g, factor = lp.exp_(), a * row_scale
    else:
        g = lp.mul_(sem_weight).add_((a - sem_weight * negative_entropy)[:, None]).mul_(p)
        factor = row_scale
    # two passes: on the CPU a broadcasting addcmul is several times slower than both together
    return g.mul_(factor).sub_(c_smooth * row_scale)


class _Scratch:
    """The chunk's vocabulary-sized tensors, allocated at the first chunk and reused by the others
    (on the CPU a fresh allocation per chunk costs its page faults each time)."""

    def __init__(self, rows, vocab, device):
        self.shape, self.device = (rows, vocab), device
        self.logits = self.wide = self.probs = None

    def _buffer(self, name, rows, dtype):  # each name is asked for in one dtype
        if getattr(self, name) is None:
            setattr(self, name, torch.empty(self.shape, dtype=dtype, device=self.device))
        return getattr(self, name)[:rows]

    def linear(self, hc, weight, bias):
        """hc W^T + b in the features' dtype, as the model's own output layer makes them (under
        autocast in its dtype: F.linear, since an out= product is not autocast)."""
        if torch.is_autocast_enabled(hc.device.type):
            return F.linear(hc, weight, bias)
        out = self._buffer("logits", hc.size(0), hc.dtype)
        if bias is None:
            return torch.mm(hc, weight.t(), out=out)
        return torch.addmm(bias, hc, weight.t(), out=out)

    def wide_copy(self, z, wide):
        """z in float32 (float64): z itself where it is already that (the logits are not kept)."""
        return z if z.dtype == wide else self._buffer("wide", z.size(0), wide).copy_(z)

    def exp(self, lp):
        return torch.exp(lp, out=self._buffer("probs", lp.size(0), lp.dtype))


class _Gradients:
    """The gradients of h, W and b, accumulated chunk by chunk in float32 (or float64) (those of W
    and b sum over all chunks; a half-precision sum of many chunks would lose their small terms)."""

    def __init__(self, h, weight, wide, has_bias):
        self.h = torch.empty(h.shape, dtype=wide, device=h.device)
        self.weight = torch.zeros(weight.shape, dtype=wide, device=weight.device)
        self.bias = torch.zeros(weight.size(0), dtype=wide, device=weight.device) if has_bias else None
        self.matrix = weight

    def add(self, rows, hc, g, logits):
        """g (chunk x V, wide); logits: the chunk's logits buffer, free now, for g in hc's dtype."""
        if g.dtype == hc.dtype and not torch.is_autocast_enabled(hc.device.type):
            # the products written where they go (no V x d product made per chunk, then added);
            # under autocast they stay autocast products (an out= or in-place product is not)
            torch.mm(g, self.matrix, out=self.h[rows])
            self.weight.addmm_(g.t(), hc)
        else:
            g_low = g
            if g.dtype != hc.dtype:  # the products in the model's dtype
                g_low = logits.copy_(g) if logits.dtype == hc.dtype else g.to(hc.dtype)
            self.h[rows] = g_low @ self.matrix
            self.weight += (g_low.t() @ hc).to(g.dtype)
        if self.bias is not None:
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
