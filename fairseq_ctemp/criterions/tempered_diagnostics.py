"""tempered_ce's diagnostics, logged next to its loss: the entropy of the tempered distribution P,
and the entropy and NLL of the untempered softmax(D) (Dabre and Fujita's Figure 4 quantities),
from the logits of the batch or, with --loss-chunk-tokens, from the decoder's features."""

import torch
import torch.nn.functional as F

# Training steps log the diagnostics from this many evenly spaced target positions (scaled to the
# batch): computing them on every position costs ~20% of a step. Validation uses every position.
TRAINING_DIAGNOSTIC_ROWS = 256
# Validation computes them in chunks of this many logits, so they never hold a batch x vocab copy.
DIAGNOSTIC_CHUNK_ELEMENTS = 2**22


@torch.no_grad()
def diagnostics(source, target, padding_idx, temperature, training):
    """Sums over non-padding targets of the entropy of the tempered P and of the untempered
    softmax(D), and of -log softmax(D)_y (the paper's Figure 4 quantities), in fp32, from the
    target positions of ``source`` (Rows). In training they are estimated from a few hundred
    evenly spaced positions, scaled to the batch."""
    not_padding = target.ne(padding_idx)
    if training and source.count > TRAINING_DIAGNOSTIC_ROWS:
        # Evenly spaced non-padding positions, found without .nonzero() (a host-device
        # synchronisation mid-step): the q-th one is where the running count reaches q. With
        # fewer positions than rows, each is found at least once: count it once, unscaled.
        count = not_padding.cumsum(0)
        n = count[-1]
        q = torch.linspace(0, 1, TRAINING_DIAGNOSTIC_ROWS, device=source.device).mul_(n - 1)
        rows = torch.searchsorted(count, q.round_().long() + 1).clamp_(max=source.count - 1)
        weights = not_padding.index_select(0, rows)
        weights[1:] &= rows[1:] != rows[:-1]
        scale = (n / TRAINING_DIAGNOSTIC_ROWS).clamp(min=1)
        chunks = [(rows, weights.float() * scale)]
    else:
        keep = not_padding.nonzero().squeeze(-1)
        chunks = [(rows, None) for rows in keep.split(max(1, DIAGNOSTIC_CHUNK_ELEMENTS // source.vocab))]
    stats = torch.zeros(3, dtype=torch.float32, device=source.device)
    for rows, weights in chunks:
        tempered = source.lprobs(rows).float()
        untempered = tempered if temperature == 1.0 else F.log_softmax(source.logits(rows).float(), dim=-1)
        per_row = torch.stack(
            [
                -(tempered.exp() * tempered).sum(-1),
                -(untempered.exp() * untempered).sum(-1),
                -untempered.gather(1, target.index_select(0, rows).unsqueeze(-1)).squeeze(-1),
            ]
        )
        # (a weighted sum, not a product with weights: under --amp that would be half precision)
        stats += per_row.sum(1) if weights is None else (per_row * weights).sum(1)
    return {"entropy": stats[0], "entropy_untempered": stats[1], "nll_loss_untempered": stats[2]}


class Rows:
    """Target positions of a batch, as the diagnostics read them: their logits and their tempered
    log-probabilities, functions of a tensor of row numbers."""

    def __init__(self, count, vocab, device, logits, lprobs):
        self.count, self.vocab, self.device = count, vocab, device
        self.logits, self.lprobs = logits, lprobs

    @classmethod
    def of_logits(cls, logits, lprobs):
        """From the batch's (positions x vocabulary) logits and log-probabilities."""
        return cls(
            logits.size(0),
            logits.size(-1),
            logits.device,
            lambda rows: logits.index_select(0, rows),
            lambda rows: lprobs.index_select(0, rows),
        )

    @classmethod
    def of_scaled_logits(cls, scaled, temperature, lprobs):
        """From the batch's logits / T (positions x vocabulary, as tempered_ce's projected path makes
        them: the logits are their product with T) and log-probabilities."""
        return cls(
            scaled.size(0),
            scaled.size(-1),
            scaled.device,
            lambda rows: scaled.index_select(0, rows).float() * temperature,
            lambda rows: lprobs.index_select(0, rows),
        )

    @classmethod
    def of_features(cls, features, projection, temperature):
        """From the decoder's features (--loss-chunk-tokens): the logits of the rows asked for only."""

        def logits(rows):
            return projection(features.index_select(0, rows))

        def lprobs(rows):
            return F.log_softmax(logits(rows).float() / temperature, dim=-1)

        return cls(features.size(0), projection.weight.size(0), features.device, logits, lprobs)
