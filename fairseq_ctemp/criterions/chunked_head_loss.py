"""ct_cross_entropy's loss with the output head run chunk by chunk of whole sequences
(``--loss-chunk-tokens N``), so that no vocabulary-sized tensor of the whole batch exists at once:
the logits, the temperatures, the log-probabilities and their gradients of a ct_transformer are
each tokens x V.

Each chunk goes through the head and the loss with autograd, and its gradients (of its features
and of the head's parameters) are taken at once, during the forward pass; then its graph is freed.
What is kept for backward is the gradient of the features (tokens x features) and of the head's
parameters, accumulated in float32 (a half-precision sum over many chunks would lose their small
terms), and scaled by the incoming gradient in backward. Unlike tempered_ce's chunked loss
(chunked_loss.py), whose gradient is written out by hand, this works for any head and
temperature: the softmax and MoS heads with every normalisation, learned alpha and beta included.
It costs no recomputation: each chunk's forward and backward run once.

Chunks are whole sequences (at least one) because the MoS head's latent dropout draws one mask per
sequence. With dropout in training the masks are drawn chunk by chunk: the same distribution as one
draw for the whole batch, other numbers.
"""

from typing import NamedTuple

import torch


class HeadLossSums(NamedTuple):
    """What ct_cross_entropy logs of a batch, over its non-padding positions (detached)."""

    nll: torch.Tensor  # sum of -log p(target)
    scale: torch.Tensor  # sum of the loss scale s_t
    tau: torch.Tensor  # sum of mean_v tau_t
    tau_min: torch.Tensor  # over every tau computed
    tau_max: torch.Tensor

    def combine(self, other):
        return HeadLossSums(
            self.nll + other.nll,
            self.scale + other.scale,
            self.tau + other.tau,
            torch.minimum(self.tau_min, other.tau_min),
            torch.maximum(self.tau_max, other.tau_max),
        )


def chunked_head_loss(loss_fn, features, target, keep, params, rows):
    """loss_fn(features, target, keep) -> (loss, HeadLossSums), run on ``rows`` sequences (dim 0) at
    a time; params: every tensor loss_fn may use that needs a gradient besides the features (pass
    all the model's parameters: a weight the head shares with the embedding is one; those it does
    not use cost nothing). Returns what loss_fn would return for the whole batch."""
    needs_grad = features.requires_grad or any(p.requires_grad for p in params)
    if not (torch.is_grad_enabled() and needs_grad):  # validation: chunks, no gradients
        total = None
        for part in parts(features.size(0), rows):
            loss, sums = loss_fn(features[part], target[part], keep[part])
            total = (loss, sums) if total is None else (total[0] + loss, total[1].combine(sums))
        return total
    loss, *sums = ChunkedHeadLoss.apply(features, target, keep, loss_fn, rows, *params)
    return loss, HeadLossSums(*sums)


def parts(size, rows):
    """The slices of ``rows`` sequences (the last one shorter) that cover ``size``."""
    return (slice(start, start + rows) for start in range(0, size, rows))


class ChunkedHeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, target, keep, loss_fn, rows, *params):
        wide = torch.promote_types(features.dtype, torch.float32)  # float32, or float64 for float64
        grad_features = torch.empty(features.shape, dtype=wide, device=features.device)  # every row written
        grad_params = [None] * len(params)  # made for the parameters the head uses (the others: None)
        loss, total = torch.zeros((), dtype=wide, device=features.device), None
        for part in parts(features.size(0), rows):
            with torch.enable_grad():
                h = features[part].detach().requires_grad_()
                chunk_loss, sums = loss_fn(h, target[part], keep[part])
                grads = torch.autograd.grad(chunk_loss, [h, *params], allow_unused=True)
            grad_features[part] = grads[0]
            for i, g in enumerate(grads[1:]):
                if g is not None and grad_params[i] is None:
                    grad_params[i] = g.to(wide, copy=True)
                elif g is not None:
                    grad_params[i] += g
            loss += chunk_loss.detach()
            total = sums if total is None else total.combine(sums)
        ctx.dtypes = (features.dtype, *(p.dtype for p in params))
        ctx.save_for_backward(grad_features, *grad_params)
        ctx.mark_non_differentiable(*total)
        return (loss, *total)

    @staticmethod
    def backward(ctx, grad_loss, *_grad_sums):
        grad_features, *grad_params = ctx.saved_tensors
        grads = [
            None if g is None else (g * grad_loss).to(dtype)
            for g, dtype in zip((grad_features, *grad_params), ctx.dtypes)
        ]
        return (grads[0], None, None, None, None, *grads[1:])
