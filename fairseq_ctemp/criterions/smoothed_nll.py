"""fairseq's label_smoothed_nll_loss, summed, with a backward that writes the gradient of the
log-probabilities once.

Autograd through fairseq's function (a gather and a sum of the batch x vocabulary log-probabilities)
makes that gradient as zeros, a scatter, and an addition of the sum's gradient: three passes over a
batch x vocabulary tensor, two of them read-and-write. Per row it is a constant with one other value
at the target (0 on padding rows), so here it is one fill and a scatter. The forward is fairseq's
own operations in its order: the same loss and NLL, bit for bit."""

import torch


class SmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, lprobs, target, epsilon, ignore_index):
        """lprobs (N, V), target (N,) or (N, 1). Returns (loss, nll_loss), summed, as fairseq's
        label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index, reduce=True)."""
        target = target.unsqueeze(-1) if target.dim() == lprobs.dim() - 1 else target
        nll_loss = -lprobs.gather(dim=-1, index=target)
        smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
        keep = None
        if ignore_index is not None:
            pad_mask = target.eq(ignore_index)
            nll_loss.masked_fill_(pad_mask, 0.0)
            smooth_loss.masked_fill_(pad_mask, 0.0)
            keep = pad_mask.logical_not_()
        nll_loss, smooth_loss = nll_loss.sum(), smooth_loss.sum()
        eps_i = epsilon / (lprobs.size(-1) - 1)
        loss = (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss
        ctx.save_for_backward(target, keep)
        ctx.shape, ctx.coefficients = lprobs.shape, (1.0 - epsilon - eps_i, eps_i)
        return loss, nll_loss

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        target, keep = ctx.saved_tensors
        c_nll, eps_i = ctx.coefficients
        grad = torch.empty(ctx.shape, dtype=grad_loss.dtype, device=grad_loss.device)
        other = (grad_loss * -eps_i).expand(target.shape)  # the smoothing term's, per row
        at_target = grad_loss * -c_nll - grad_nll
        if keep is not None:
            other, at_target = other * keep, at_target * keep
        grad.copy_(other.expand(ctx.shape))
        grad.scatter_add_(-1, target, at_target.expand(target.shape))
        return grad, None, None, None


def label_smoothed_nll_loss_sum(lprobs, target, epsilon, ignore_index=None):
    """(loss, nll_loss) of fairseq's label_smoothed_nll_loss with reduce=True (SmoothedNLL)."""
    return SmoothedNLL.apply(lprobs, target, epsilon, ignore_index)
