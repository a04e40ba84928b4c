"""Reliability bins of the top-1 predictions, the expected calibration error over them, and their
diagram."""

import torch

N_BINS = 15


def reliability_bins(confidence, correct, n_bins=N_BINS):
    """[{"range": [lo, hi], "count", "confidence" (mean), "accuracy"}] of n_bins equal-width bins on
    [0, 1]; bin m is [m / n_bins, (m + 1) / n_bins), the last one closed; an empty bin has None."""
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64)
    index = (torch.bucketize(confidence, edges, right=True) - 1).clamp(0, n_bins - 1)
    count = torch.bincount(index, minlength=n_bins)
    conf_sum = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, index, confidence.double())
    right = torch.zeros(n_bins, dtype=torch.float64).index_add_(0, index, correct.double())
    bins = []
    for m in range(n_bins):
        n = int(count[m])
        bins.append(
            {
                "range": [edges[m].item(), edges[m + 1].item()],
                "count": n,
                "confidence": conf_sum[m].item() / n if n else None,
                "accuracy": right[m].item() / n if n else None,
            }
        )
    return bins


def draw_reliability(ax, bins):
    """A reliability diagram on the matplotlib axes ``ax``: accuracy per filled bin against its mean
    confidence, and the diagonal of perfect calibration (the plots of ctemp-calibrate and the ALT
    post-hoc report draw their panels with it)."""
    filled = [b for b in bins if b["count"]]
    ax.bar(
        [b["range"][0] for b in filled],
        [b["accuracy"] for b in filled],
        [b["range"][1] - b["range"][0] for b in filled],
        align="edge",
        edgecolor="black",
        label="accuracy",
    )
    confidence = [b["confidence"] for b in filled]
    ax.plot(confidence, confidence, "o", color="tab:red", label="mean confidence")
    ax.plot([0, 1], [0, 1], "--", color="gray", linewidth=1)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence of the top-1 prediction")


def expected_calibration_error(bins):
    """sum over bins of |bin| / N * |accuracy - mean confidence| (Guo et al., eq. 3)."""
    total = sum(b["count"] for b in bins)
    return sum(b["count"] / total * abs(b["accuracy"] - b["confidence"]) for b in bins if b["count"])
