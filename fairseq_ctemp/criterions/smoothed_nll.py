"""fairseq's label_smoothed_nll_loss, summed (each row's loss weighted, if asked), with a backward
that writes the gradient of the log-probabilities once.

Autograd through fairseq's function (a gather and a sum of the batch x vocabulary log-probabilities)
makes that gradient as zeros, a scatter, and an addition of the sum's gradient: three passes over a
batch x vocabulary tensor, two of them read-and-write. Per row it is a constant with one other value
at the target (0 on padding rows), so here it is one fill and a scatter. The forward is fairseq's
own operations in its order: the same loss and NLL, bit for bit."""

import torch


class SmoothedNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, lprobs, target, epsilon, ignore_index, weights):
        """lprobs (N, V), target (N,) or (N, 1), weights (N,) or None (constants: no gradient).
        Returns (loss, nll_loss) summed over the rows: fairseq's label_smoothed_nll_loss with
        reduce=True, or with reduce=False and each row's loss times its weight, then summed (the
        NLL unweighted)."""
        target = target.unsqueeze(-1) if target.dim() == lprobs.dim() - 1 else target
        nll_loss = -lprobs.gather(dim=-1, index=target)
        smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
        keep = None
        if ignore_index is not None:
            pad_mask = target.eq(ignore_index)
            nll_loss.masked_fill_(pad_mask, 0.0)
            smooth_loss.masked_fill_(pad_mask, 0.0)
            keep = pad_mask.logical_not_()
        eps_i = epsilon / (lprobs.size(-1) - 1)
        weights = None if weights is None else weights.view(target.shape)
        if weights is None:
            nll_loss, smooth_loss = nll_loss.sum(), smooth_loss.sum()
            loss = (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss
        else:
            rows = (1.0 - epsilon - eps_i) * nll_loss + eps_i * smooth_loss
            loss, nll_loss = (rows * weights).sum(), nll_loss.sum()
        ctx.save_for_backward(target, keep, weights)
        ctx.shape, ctx.coefficients = lprobs.shape, (1.0 - epsilon - eps_i, eps_i)
        return loss, nll_loss

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        """Per row r and word v: -grad_loss f_r (eps_i + c_nll [v = y_r]) - grad_nll keep_r
        [v = y_r], with f_r = keep_r times the row's weight."""
        target, keep, weights = ctx.saved_tensors
        c_nll, eps_i = ctx.coefficients
        other = (grad_loss * -eps_i).expand(target.shape)  # the smoothing term's, per row
        at_target, nll_part = grad_loss * -c_nll, grad_nll
        for factor in (keep, weights):
            if factor is not None:
                other, at_target = other * factor, at_target * factor
        if keep is not None:
            nll_part = nll_part * keep
        grad = torch.empty(ctx.shape, dtype=grad_loss.dtype, device=grad_loss.device)
        grad.copy_(other.expand(ctx.shape))
        grad.scatter_add_(-1, target, (at_target - nll_part).expand(target.shape))
        return grad, None, None, None, None


def label_smoothed_nll_loss_sum(lprobs, target, epsilon, ignore_index=None, weights=None):
    """(loss, nll_loss) of fairseq's label_smoothed_nll_loss summed over the rows, each row's loss
    times its weight where weights (N,) are given (SmoothedNLL)."""
    return SmoothedNLL.apply(lprobs, target, epsilon, ignore_index, weights)
