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
entropy term nor, next to a label-smoothed loss, the target's NLL that tempered_ce logs). The
logits / T are made in the features' dtype by the matrix product (1/T as BLAS's alpha), as
tempered_ce's projected path makes them, and normalised in float32, as fairseq's
get_normalized_probs does."""

from typing import NamedTuple

import torch


class ChunkSums(NamedTuple):
    """Sums over the non-padding tokens, as tempered_ce logs them (float32 scalars)."""

    nll: torch.Tensor  # -log P_y of the tempered distribution
    correct: torch.Tensor  # how many tokens' logits have their maximum at the target


class _Coefficients(NamedTuple):
    """The module docstring's constants for one vocabulary size."""

    nll: float  # (1 - w)(1 - eps - eps_i)
    smooth: float  # (1 - w) eps_i
    sem_weight: float  # w
    inverse_t: float  # 1 / T: a = z / T
    scale: float  # s
    gradient_scale: float  # s / T: d loss / d z = s / T * d loss / d a

    @classmethod
    def of(cls, vocab, temperature, eps, sem_weight, rescale):
        eps_i = eps / (vocab - 1)
        scale = temperature if rescale else 1.0
        return cls(
            (1.0 - sem_weight) * (1.0 - eps - eps_i),
            (1.0 - sem_weight) * eps_i,
            sem_weight,
            1.0 / temperature,
            scale,
            scale / temperature,
        )


class ChunkedTemperedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, target, keep, settings):
        """h (N, d) features; weight (V, d), bias (V,) or None; target (N,); keep (N,) bool: the
        tokens that count (not padding). settings: (T, eps, w, rescale, chunk, count_correct).
        Returns the loss (float32 scalar) and the ChunkSums."""
        temperature, eps, sem_weight, rescale, chunk, count_correct = settings
        c = _Coefficients.of(weight.size(0), temperature, eps, sem_weight, rescale)
        ctx.input_dtypes = (h.dtype, weight.dtype)
        wide = torch.promote_types(h.dtype, torch.float32)  # float32, or float64 for float64 inputs
        grads = _Gradients(h, weight, wide, bias is not None) if any(ctx.needs_input_grad[:3]) else None
        scratch = _Scratch(min(chunk, h.size(0)), weight.size(0), h.device, wide)
        loss = torch.zeros((), dtype=wide, device=h.device)
        nll_sum, correct = torch.zeros_like(loss), torch.zeros_like(loss)
        scaled_bias = None if bias is None else bias * c.inverse_t
        for start in range(0, h.size(0), chunk):
            rows = slice(start, start + chunk)
            hc, y, counts = h[rows], target[rows], keep[rows].to(wide)
            a = scratch.scaled_logits(hc, weight, scaled_bias, c.inverse_t)  # z / T
            if count_correct:
                correct += (a.argmax(-1) == y).to(wide).mul_(counts).sum()
            rows_loss, nll, g = _chunk_terms(scratch, a, y, counts, c, gradient=grads is not None)
            loss += rows_loss.mul_(counts).sum()
            nll_sum += nll.mul_(counts).sum()
            if g is not None:
                grads.add(rows, hc, g)
        if grads is not None:
            ctx.save_for_backward(*grads.result())
        ctx.has_bias = bias is not None
        ctx.mark_non_differentiable(nll_sum, correct)
        return loss * c.scale, nll_sum, correct

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


def _chunk_terms(scratch, a, y, counts, c, gradient):
    """The chunk's per-token loss and -log P_y from its logits / T (a), and, if gradient, the
    gradient of the loss with respect to its logits z, in a's dtype (written over a where it can)."""
    fused = gradient and _fused_gradient(a, scratch.wide_dtype, c.sem_weight)
    lp = scratch.log_softmax(a, fused)
    nll = -lp.gather(1, y[:, None]).squeeze(1)
    rows_loss = c.nll * nll - c.smooth * lp.sum(-1)
    p = negative_entropy = None
    if c.sem_weight > 0:
        p = scratch.exp(lp)
        negative_entropy = _row_dot(p, lp)
        rows_loss += c.sem_weight * negative_entropy
    if not gradient:
        return rows_loss, nll, None
    row_scale = counts * c.gradient_scale
    if fused:
        return rows_loss, nll, scratch.fused_gradient(lp, y, (c.nll, c.smooth), row_scale, out=a)
    g = _logit_gradient(lp, p, negative_entropy, (c.nll, c.smooth, c.sem_weight), row_scale)
    g.scatter_add_(1, y[:, None], (-c.nll * row_scale)[:, None])
    return rows_loss, nll, g if g.dtype == a.dtype else a.copy_(g)  # the products in the model's dtype


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


def _fused_gradient(a, wide, sem_weight):
    """Whether the chunk's gradient is one log-softmax backward kernel, reading the float32 log-
    probabilities and writing a's dtype: without the entropy term, for float16 logits on CUDA, whose
    kernels convert float16 <-> float32 themselves (as fairseq's own loss does): a fill and one
    kernel instead of four element-wise passes (exponential, product, difference, cast)."""
    return sem_weight == 0 and a.is_cuda and a.dtype == torch.float16 and wide == torch.float32


class _Scratch:
    """The chunk's vocabulary-sized tensors, allocated at the first chunk and reused by the others
    (on the CPU a fresh allocation per chunk costs its page faults each time)."""

    def __init__(self, rows, vocab, device, wide_dtype):
        self.shape, self.device, self.wide_dtype = (rows, vocab), device, wide_dtype
        self.logits = self.wide = self.probs = self.grad_output = None

    def _buffer(self, name, rows, dtype):  # each name is asked for in one dtype
        if getattr(self, name) is None:
            setattr(self, name, torch.empty(self.shape, dtype=dtype, device=self.device))
        return getattr(self, name)[:rows]

    def scaled_logits(self, hc, weight, scaled_bias, scale):
        """(hc W^T + b) * scale in the features' dtype, the scale applied by the matrix product
        (BLAS's alpha, no pass of its own), as tempered_ce's scaled_linear makes them (under
        autocast in its dtype: no out=, since an out= product is not autocast)."""
        if torch.is_autocast_enabled(hc.device.type):
            return scaled_product(hc, weight, scaled_bias, scale)
        return scaled_product(
            hc, weight, scaled_bias, scale, out=self._buffer("logits", hc.size(0), hc.dtype)
        )

    def log_softmax(self, a, fused):
        """log_softmax(a) in float32 (float64): over a itself where it is that dtype (the logits
        are not kept) unless the fused gradient is to be written there; else into a buffer, by
        one kernel from float16 on CUDA (as F.log_softmax(dtype=float32) does), else a copy first."""
        wide = self.wide_dtype
        if a.dtype == wide and not fused:
            return torch._log_softmax(a, -1, False, out=a)
        out = self._buffer("wide", a.size(0), wide)
        if fused or a.dtype == wide:
            return torch.log_softmax(a, -1, dtype=wide, out=out)
        return torch._log_softmax(out.copy_(a), -1, False, out=out)

    def exp(self, lp):
        return torch.exp(lp, out=self._buffer("probs", lp.size(0), lp.dtype))

    def fused_gradient(self, lp, y, coefficients, row_scale, out):
        """The module docstring's gradient without the entropy term, times row_scale, into out (in
        out's dtype): log-softmax's backward of the gradient of the loss with respect to log P,
        G = -row_scale (c_smooth + c_nll onehot(y)), which is G - P sum_v G_v = row_scale (P (c_nll
        + V c_smooth) - c_smooth - c_nll onehot(y))."""
        c_nll, c_smooth = coefficients
        grad_output = self._buffer("grad_output", lp.size(0), lp.dtype)
        grad_output.copy_((-c_smooth * row_scale)[:, None].expand_as(grad_output))
        grad_output.scatter_add_(1, y[:, None], (-c_nll * row_scale)[:, None])
        return torch._log_softmax_backward_data(grad_output, lp, 1, out.dtype, out=out)


class _Gradients:
    """The gradients of h, W and b, accumulated chunk by chunk in float32 (or float64) (those of W
    and b sum over all chunks; a half-precision sum of many chunks would lose their small terms)."""

    def __init__(self, h, weight, wide, has_bias):
        self.h = torch.empty(h.shape, dtype=wide, device=h.device)
        self.weight = torch.zeros(weight.shape, dtype=wide, device=weight.device)
        self.bias = torch.zeros(weight.size(0), dtype=wide, device=weight.device) if has_bias else None
        self.matrix = weight

    def add(self, rows, hc, g):
        """g: the chunk's gradient of the logits (chunk x V), in the dtype of its logits."""
        if g.dtype == self.h.dtype and not torch.is_autocast_enabled(hc.device.type):
            # the products written where they go (no V x d product made per chunk, then added);
            # under autocast they stay autocast products (an out= or in-place product is not)
            torch.mm(g, self.matrix, out=self.h[rows])
            self.weight.addmm_(g.t(), hc)
        else:
            self.h[rows] = g @ self.matrix
            self.weight += (g.t() @ hc).to(self.weight.dtype)
        if self.bias is not None:
            self.bias += g.sum(0, dtype=self.bias.dtype)

    def result(self):
        return self.h, self.weight, self.bias


def scaled_product(x, weight, bias, scale, out=None):
    """(x W^T + b) * scale, the scale applied by the matrix product itself (BLAS's alpha): no pass
    of its own over the output. The bias comes scaled (a vector), so that the product adds it as
    F.linear does (on CUDA in cuBLASLt's epilogue, which takes beta = 1 only)."""
    if bias is None:  # beta = 0: the input is ignored
        return torch.addmm(
            x.new_zeros(()) if out is None else out, x, weight.t(), beta=0, alpha=scale, out=out
        )
    return torch.addmm(bias, x, weight.t(), alpha=scale, out=out)


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
