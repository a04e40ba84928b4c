"""SmoothedNLL (tempered_ce's label-smoothed loss with a one-pass backward) against fairseq's own
label_smoothed_nll_loss through autograd: the same loss, NLL and gradients."""

import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import label_smoothed_nll_loss

from fairseq_ctemp.criterions.smoothed_nll import label_smoothed_nll_loss_sum

PAD = 1


def case(dtype, target_column, seed=0):
    g = torch.Generator().manual_seed(seed)
    n, vocab = 13, 11
    lprobs = torch.log_softmax(torch.randn(n, vocab, generator=g, dtype=dtype) * 3, -1)
    target = torch.randint(0, vocab, (n,), generator=g)
    target[[2, 7, 8]] = PAD  # padding rows: no loss, no gradient
    return lprobs, (target[:, None] if target_column else target)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("ignore_index", [PAD, None])
@pytest.mark.parametrize("target_column", [False, True], ids=["target(N)", "target(N,1)"])
def test_loss_nll_and_gradients_are_fairseqs(dtype, eps, ignore_index, target_column):
    lprobs, target = case(dtype, target_column)
    ours, theirs = (lprobs.clone().requires_grad_() for _ in range(2))
    loss, nll = label_smoothed_nll_loss_sum(ours, target, eps, ignore_index)
    column = target if target_column else target[:, None]  # fairseq's function takes (N, 1)
    ref_loss, ref_nll = label_smoothed_nll_loss(theirs, column, eps, ignore_index=ignore_index, reduce=True)
    assert torch.equal(loss, ref_loss) and torch.equal(nll, ref_nll)  # the same operations forward
    # incoming gradients for both outputs (fairseq's fp16 loss scale on the loss; the NLL too)
    grad = torch.autograd.grad(3.0 * loss + 0.7 * nll, ours)[0]
    ref_grad = torch.autograd.grad(3.0 * ref_loss + 0.7 * ref_nll, theirs)[0]
    assert grad.dtype == dtype and grad.shape == lprobs.shape
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=0)
    if ignore_index is not None:
        assert not grad[target.view(-1) == PAD].any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ignore_index", [PAD, None])
def test_weighted_rows_are_fairseqs_unreduced_losses_times_the_weights(dtype, ignore_index):
    """weights (ct_cross_entropy's detached per-position scale): the loss is the sum of fairseq's
    reduce=False losses times them, the NLL the plain sum of its NLLs; gradients the same."""
    lprobs, target = case(dtype, False)
    weights = torch.rand(len(target), generator=torch.Generator().manual_seed(1), dtype=dtype) + 0.5
    ours, theirs = (lprobs.clone().requires_grad_() for _ in range(2))
    loss, nll = label_smoothed_nll_loss_sum(ours, target, 0.1, ignore_index, weights=weights)
    rows, row_nll = label_smoothed_nll_loss(
        theirs, target[:, None], 0.1, ignore_index=ignore_index, reduce=False
    )
    ref_loss, ref_nll = (rows.view(-1) * weights).sum(), row_nll.sum()
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=0)
    torch.testing.assert_close(nll, ref_nll, rtol=0, atol=0)
    grad = torch.autograd.grad(3.0 * loss + 0.7 * nll, ours)[0]
    ref_grad = torch.autograd.grad(3.0 * ref_loss + 0.7 * ref_nll, theirs)[0]
    torch.testing.assert_close(grad, ref_grad, rtol=4 * torch.finfo(dtype).eps, atol=0)


def test_the_backward_makes_the_batch_x_vocabulary_gradient_in_one_fill_and_one_scatter():
    """The operators of the backward on batch x vocabulary tensors (torch.profiler): a fill (copy_
    of the per-row value) and the scatter of the target's, where autograd through fairseq's
    function zeroes, scatters and adds a second tensor."""
    lprobs, target = case(torch.float32, False)

    def full_size_operators(loss_fn):
        x = lprobs.clone().requires_grad_()
        loss, _ = loss_fn(x)
        with torch.profiler.profile(record_shapes=True) as prof:
            loss.backward()
        composite = ("aten::detach", "aten::gather_backward")
        return [
            e.name
            for e in prof.events()
            if e.name.startswith("aten::")
            and e.name not in composite
            and any(list(shape) == list(lprobs.shape) for shape in e.input_shapes)
        ]

    ours = full_size_operators(lambda x: label_smoothed_nll_loss_sum(x, target, 0.1, PAD))
    theirs = full_size_operators(lambda x: label_smoothed_nll_loss(x, target[:, None], 0.1, ignore_index=PAD))
    assert ours == ["aten::copy_", "aten::scatter_add_"], ours
    assert len(theirs) > len(ours), theirs  # (zero_, scatter_add_, add in torch 2.13)
