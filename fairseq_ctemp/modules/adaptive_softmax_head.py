"""An adaptive softmax (Grave et al., 2017) with a contextual temperature, out of place and complete.

fairseq's ``AdaptiveSoftmax`` holds the parameters (head, tail clusters, cutoffs, weight tying with
adaptive input); this head only replaces its forward pass. fairseq's own ``get_log_prob`` writes in
place and, given a target, fills only the target's cluster, so it can be neither trained through nor
used for temperatures. Here, with cutoffs c_0 < c_1 < ... < c_K = V:

    head:     log p_head = log_softmax(z_head / tau_head)     over the c_0 shortlist words and K
                                                              cluster entries
    word v:   log p(v) = log p_head(v)                                    if v < c_0
              log p(v) = log p_head(cluster k) + log_softmax(z_k / tau_k)(v)   if c_{k-1} <= v < c_k

which sums to 1 over all V words for any positive temperatures.

How tau is normalised across clusters (the "softmax" normalisation, tau = (q + alpha) / beta):
q is itself an adaptive softmax over mu = h . W1 . W2 with the same clusters,
    q(head entry e) = softmax(mu_head)(e),   q(v in cluster k) = q(cluster k) * softmax(mu_k)(v),
so q is a distribution over all V words (and the K cluster entries share the head's softmax), tau
keeps the range [alpha/beta, (1+alpha)/beta], and the papers' loss scale mean_v(tau) is exactly
(alpha + 1/V) / beta without computing mu for every word. The element-wise normalisations
(lambda ** tanh(mu), tanh(mu) + lambda) need no cross-cluster normalisation; their loss scale is the
mean of tau over the head entries (the only entries computed at every position).

Training cost (``score``) is that of the stock adaptive softmax plus a rank-Q projection: the head
for every position, each tail cluster only for the positions whose target falls in it. The full
distribution (``forward``) computes every cluster for every position (evaluation and generation).
Every tail cluster is run at every step (on zero rows when no target falls in it), so all
parameters receive a gradient and DistributedDataParallel needs no unused-parameter search.
"""

import torch
import torch.nn.functional as F

from ..errors import OptionError
from .temperature_heads import TauStats, TemperatureHead, divided_log_softmax


def check_cutoffs(cutoff, vocab_size, option="--adaptive-softmax-cutoff"):
    """fairseq's --adaptive-softmax-cutoff (or --adaptive-input-cutoff), checked with a clear error
    (fairseq only asserts)."""
    cutoff = [int(c) for c in cutoff]
    increasing = all(a < b for a, b in zip(cutoff, cutoff[1:]))
    if not cutoff or cutoff[0] < 1 or not increasing or cutoff[-1] > vocab_size:
        raise OptionError(
            f"{option} must be strictly increasing integers in "
            f"[1, {vocab_size}] (the vocabulary size), got {','.join(map(str, cutoff))}"
        )
    return cutoff


def temperature_entries(vocab_size, cutoff):
    """How many temperatures a ContextualTemperature for this head needs: V words + K clusters."""
    n_clusters = len(cutoff) - (1 if cutoff[-1] == vocab_size else 0)
    return vocab_size + n_clusters


class AdaptiveSoftmaxHead(TemperatureHead):
    def __init__(self, adaptive_softmax, temperature=None):
        """adaptive_softmax: a fairseq ``AdaptiveSoftmax``; temperature: a ``ContextualTemperature``
        over ``temperature_entries(V, cutoff)`` entries (head entries first, then tail words), or
        None for tau = 1 (then this is exactly the stock adaptive softmax)."""
        super().__init__()
        self.adaptive_softmax = adaptive_softmax
        self.cutoff = list(adaptive_softmax.cutoff)  # ends with V
        self.vocab_size = self.cutoff[-1]
        self.n_clusters = len(self.cutoff) - 1
        self.head_size = self.cutoff[0] + self.n_clusters
        self.temperature = temperature
        if temperature is not None and temperature.vocab_size != self.vocab_size + self.n_clusters:
            raise ValueError(
                f"the adaptive softmax temperature needs {self.vocab_size} words + "
                f"{self.n_clusters} clusters entries, got {temperature.vocab_size}"
            )
        self.register_buffer("boundaries", torch.tensor(self.cutoff[:-1]), persistent=False)

    def forward(self, h):
        """h: (..., input_dim) -> (log_probs (..., V) fp32, TauStats): every cluster everywhere."""
        flat = self.adaptive_softmax.dropout_module(h.reshape(-1, h.size(-1)))
        low_rank, up = self._low_rank(flat)
        head, state, taus = self._head(flat, low_rank, up)
        parts = [head[:, : self.cutoff[0]]]
        for k in range(self.n_clusters):
            tail, tau = self._tail(flat, k, self._entry_state(state, k), low_rank, up)
            taus.append(tau)
            parts.append(head[:, self.cutoff[0] + k].unsqueeze(1) + tail)
        log_probs = torch.cat(parts, dim=-1).view(*h.shape[:-1], self.vocab_size)
        return log_probs, self._stats(flat, taus, h.shape[:-1])

    def score(self, h, target):
        """log p(target) (target's shape) and TauStats, computing each tail cluster only for the
        positions whose target is in it."""
        flat = self.adaptive_softmax.dropout_module(h.reshape(-1, h.size(-1)))
        target = target.reshape(-1)
        cluster = torch.bucketize(target, self.boundaries, right=True)  # 0: shortlist, k+1: tail k
        head_target = torch.where(cluster == 0, target, self.cutoff[0] + cluster - 1)
        low_rank, up = self._low_rank(flat)
        scores, state, taus = self._head(flat, low_rank, up, head_target.unsqueeze(1))
        for k in range(self.n_clusters):
            rows = (cluster == k + 1).nonzero().squeeze(1)
            entry_state = self._entry_state(state, k, rows)
            in_cluster = (target.index_select(0, rows) - self.cutoff[k]).unsqueeze(1)
            tail_scores, tau = self._tail(
                flat.index_select(0, rows),
                k,
                entry_state,
                None if low_rank is None else low_rank.index_select(0, rows),
                up,
                in_cluster,
            )
            taus.append(tau)
            scores = scores.index_add(0, rows, tail_scores)
        return scores.view(h.shape[:-1]), self._stats(flat, taus, h.shape[:-1])

    def temperatures(self, h):
        """tau of every word (..., V) (cluster entries of the head left out), or None."""
        if self.temperature is None:
            return None
        flat = h.reshape(-1, h.size(-1))
        low_rank, up = self._low_rank(flat)
        _, state, taus = self._head(flat, low_rank, up)
        parts = [taus[0][:, : self.cutoff[0]]]
        for k in range(self.n_clusters):
            parts.append(self._tail(flat, k, self._entry_state(state, k), low_rank, up)[1])
        return torch.cat(parts, dim=-1).view(*h.shape[:-1], self.vocab_size)

    def _low_rank(self, flat):
        """h . W1 once for all clusters, and W2 split once into its head and cluster blocks (one
        gradient buffer for W2, where three row slices would each allocate a full-size one)."""
        t = self.temperature
        if t is None or not t.norm.uses_mu:
            return None, None
        low_rank = F.linear(flat.float(), t.down.weight.float())
        sizes = [self.head_size] + [b - a for a, b in zip(self.cutoff, self.cutoff[1:])]
        return low_rank, t.up.weight.float().split(sizes)

    def _entry_state(self, state, k, rows=None):
        """The normalisation's state at tail cluster k's head entry (for ``rows``), or None."""
        if state is None:
            return None
        entry = state[:, self.cutoff[0] + k]
        return entry if rows is None else entry[rows]

    def _head(self, flat, low_rank, up, index=None):
        """Head log-probs (those at ``index`` (rows x 1) only, when given), the normalisation's
        state of the head (or None) and [tau_head]."""
        logits = self.adaptive_softmax.head(flat).float()
        tau, state = self._tau(logits, lambda norm, t: norm.adaptive_head(t, F.linear(low_rank, up[0])))
        return divided_log_softmax(logits, tau, index), state, [tau]

    def _tail(self, flat, k, entry_state, low_rank, up, index=None):
        """Within-cluster log-probs of tail cluster k (those at ``index`` only, when given) and its
        tau."""
        logits = self.adaptive_softmax.tail[k](flat).float()
        tau, _ = self._tau(
            logits, lambda norm, t: (norm.adaptive_tail(t, F.linear(low_rank, up[k + 1]), entry_state), None)
        )
        return divided_log_softmax(logits, tau, index), tau

    def _tau(self, logits, from_mu):
        """(tau for these logits, state): none, a constant, or the normalisation of mu."""
        t = self.temperature
        if t is None:
            return None, None
        if not t.norm.uses_mu:
            return t.norm.tau(t, logits.shape), None
        return from_mu(t.norm, t)

    def _stats(self, flat, taus, positions_shape):
        t = self.temperature
        if t is None:
            return TauStats.of(None, positions_shape, flat.device)
        computed = [tau for tau in taus if tau.numel() > 0]
        low = torch.stack([tau.min() for tau in computed]).min().detach()
        high = torch.stack([tau.max() for tau in computed]).max().detach()
        scale = t.norm.adaptive_loss_scale(t, taus[0], self.vocab_size).reshape(positions_shape)
        return TauStats(scale, low, high)
