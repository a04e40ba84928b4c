"""SACT (Lin et al., EMNLP 2018) in a Transformer's encoder-decoder attention: fairseq's
MultiheadAttention whose scores are divided, at every target position t, by a temperature computed
from the query s_t and the previous position's context c_{t-1}:

    e_{t,h,i}     = (W_q s_t)_h . (W_k h_i)_h / sqrt(d_head)       fairseq's scores, h = head
    tau_t         = lambda ** tanh(W_c c_{t-1} + U_s s_t)           K numbers: K = 1 ("layer" scope,
                                                                    every head) or H ("head" scope)
    alpha_{t,h,i} = softmax_i(e_{t,h,i} / tau_t[k(h)])              padding gets alpha = 0
    c_t           = concat_h(sum_i alpha_{t,h,i} v_{h,i})           v_{h,i} = (W_v h_i)_h; c_{-1} = 0
    out_t         = W_o concat_h(sum_i dropout(alpha)_{t,h,i} v_{h,i})   fairseq's output

s_t is the query: the decoder layer's state entering its cross-attention. c_t is the heads' context
before the output projection and without attention dropout (its expectation under dropout).

Which alpha c_{t-1} is computed from (``previous_context``):
    "untempered"  softmax_i(e_{t-1,h,i}): the previous position's attention at tau = 1, so every
                  position is computed at once in training (the default)
    "tempered"    alpha_{t-1} itself, at tau_{t-1}: the paper's recurrence, which makes training a
                  loop over target positions

W_c c_t is computed as sum_{h,i} alpha_{t,h,i} g_{h,i,k} with g_{h,i,k} = v_{h,i} . W_c[k, head h]:
one extra (attention x K) product instead of another attention-sized one. Incremental decoding
caches W_c c_{t-1} (K numbers per hypothesis; reordered for beam search) and g, which depends on the
source alone: like fairseq's keys and values, one copy per source sentence when the beam size is set
(``set_beam_size``, as fairseq's SequenceGenerator does), not reordered while the beam keeps its
sentences. Mode "fixed" divides every score by one constant tau. Temperatures and the
softmax are computed in fp32, as fairseq's softmax is.

A plain module (no registry code); ``fairseq_ctemp.models.sact_transformer`` puts it in the decoder.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention

from ..errors import OptionError
from .sact_attention import DEFAULT_LAMBDA, as_fp32, check_temperature_options, lambda_tanh

MODES = ("sact", "fixed")  # "none" is fairseq's MultiheadAttention itself
SCOPES = ("layer", "head")
PREVIOUS_CONTEXTS = ("untempered", "tempered")


class SactMultiheadAttention(MultiheadAttention):
    """fairseq's encoder-decoder MultiheadAttention (same parameters and names, plus W_c and U_s as
    ``temperature_context_proj`` / ``temperature_state_proj`` in mode "sact") with the temperature
    of the module docstring. The last call's tau (bsz x tgt_len x K, detached) is kept in
    ``last_temperature`` for analysis (None in mode "fixed")."""

    def __init__(
        self,
        embed_dim,
        num_heads,
        kdim=None,
        vdim=None,
        dropout=0.0,
        q_noise=0.0,
        qn_block_size=8,
        mode="sact",
        lam=DEFAULT_LAMBDA,
        fixed_temperature=1.0,
        scope=SCOPES[0],
        previous_context=PREVIOUS_CONTEXTS[0],
    ):
        check_temperature_options(mode, lam, fixed_temperature, MODES)
        for option, value, allowed in (
            ("--sact-temperature-scope", scope, SCOPES),
            ("--sact-previous-context", previous_context, PREVIOUS_CONTEXTS),
        ):
            if value not in allowed:
                raise OptionError(f"{option} must be one of {', '.join(allowed)}, got {value!r}")
        super().__init__(
            embed_dim,
            num_heads,
            kdim=kdim,
            vdim=vdim,
            dropout=dropout,
            encoder_decoder_attention=True,
            q_noise=q_noise,
            qn_block_size=qn_block_size,
        )
        self.mode = mode
        self.last_temperature = None
        if mode == "fixed":
            self.fixed_temperature = float(fixed_temperature)
            return
        self.lam = float(lam)
        self.log_lam = math.log(self.lam)
        self.scope = scope
        self.previous_context = previous_context
        k = num_heads if scope == "head" else 1
        self.temperature_context_proj = nn.Linear(embed_dim, k, bias=False)  # W_c
        self.temperature_state_proj = nn.Linear(embed_dim, k, bias=False)  # U_s
        # tau = 1 at initialisation: training starts from fairseq's Transformer, and W_c, U_s
        # still get gradients (d tau / d logit = log lambda at 0)
        nn.init.zeros_(self.temperature_context_proj.weight)
        nn.init.zeros_(self.temperature_state_proj.weight)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        incremental_state=None,
        need_weights=True,
        static_kv=False,
        attn_mask=None,
        before_softmax=False,
        need_head_weights=False,
    ):
        """The decoder layer's cross-attention call (fairseq's signature): query T x B x C, key and
        value the encoder output. Returns (output T x B x C, attention weights or None) as fairseq's
        MultiheadAttention does."""
        assert static_kv and attn_mask is None and not before_softmax, "SACT is the encoder-decoder attention"
        need_weights = need_weights or need_head_weights
        tgt_len, bsz, _ = query.size()
        # fairseq's projections and key/value cache. The padding mask is applied here, after the
        # division by tau: -inf / tau would give tau an infinite (0 * inf = NaN) gradient.
        scores, v = super().forward(
            query, key, value, incremental_state=incremental_state, static_kv=True, before_softmax=True
        )
        heads, src_len = self.num_heads, scores.size(-1)
        kv_bsz = v.size(0) // heads  # bsz / beam: fairseq keeps one copy of the source per beam
        # (no-op casts left out: each is a call the host makes at every decoder step)
        scores = as_fp32(scores.view(bsz, heads, tgt_len, src_len))
        padding = None if key_padding_mask is None else _bool(key_padding_mask)[:, None, None, :]
        if self.mode == "fixed":
            tau = None
            probs = F.softmax(_masked(scores / self.fixed_temperature, padding, inplace=True), dim=-1)
        else:
            probs, tau = self._sact_softmax(
                query, scores, padding, v.view(kv_bsz, heads, src_len, self.head_dim), incremental_state
            )
        probs = probs.view(bsz * heads, tgt_len, src_len)
        self.last_temperature = tau.detach() if tau is not None and tau.requires_grad else tau

        # from here on fairseq's MultiheadAttention.forward after its softmax
        attn_probs = self.dropout_module(probs.type_as(v))
        if bsz != kv_bsz:
            attn = torch.einsum(
                "bxhts,bhsd->bxhtd",
                attn_probs.view(kv_bsz, -1, heads, tgt_len, src_len),
                v.view(kv_bsz, heads, src_len, self.head_dim),
            ).reshape(-1, tgt_len, self.head_dim)
        else:
            attn = torch.bmm(attn_probs, v)
        attn = self.out_proj(attn.transpose(0, 1).contiguous().view(tgt_len, bsz, self.embed_dim))
        weights = None
        if need_weights:
            weights = probs.view(bsz, heads, tgt_len, src_len).transpose(1, 0)
            if not need_head_weights:
                weights = weights.mean(dim=0)
        return attn, weights

    def _sact_softmax(self, query, scores, padding, v, incremental_state):
        """softmax(e / tau) (bsz x H x T x S, fp32) and tau (bsz x T x K) of mode "sact";
        scores: bsz x H x T x S (fp32, unmasked), padding: bsz x 1 x 1 x S (True at padding) or
        None, v: kv_bsz x H x S x d_head."""
        bsz, heads, tgt_len, _ = scores.shape
        k = self.temperature_state_proj.out_features
        state_logit = F.linear(as_fp32(query), as_fp32(self.temperature_state_proj.weight)).transpose(0, 1)
        cached = self.get_incremental_state(incremental_state, "sact_state")
        if cached is None:
            # g (kv_bsz x (H S) x K): static like the keys and values, so cached for incremental
            # decoding; one product per head with w_c broadcast over the batch (v is not copied)
            w_c = as_fp32(self.temperature_context_proj.weight).view(k, heads, self.head_dim)
            g = torch.matmul(as_fp32(v), w_c.permute(1, 2, 0)).flatten(1, 2)
            prev = None  # W_c c_{-1} = 0
        else:  # W_c c_{t-1} of the position before the first one computed here
            g, prev = cached["g"], cached["prev_context_logit"]
        kv_bsz = g.size(0)  # bsz / beam where fairseq keeps one copy of the source per beam

        def context_logit(alpha):  # W_c c for weights alpha (bsz x H x T' x S) -> bsz x T' x K
            steps, beams = alpha.size(2), bsz // kv_bsz  # a source's hypotheses side by side
            if steps == 1:  # one position (a decoder step): alpha (bsz x H x 1 x S) is a row per hypothesis
                return torch.bmm(alpha.reshape(kv_bsz, beams, -1), g).view(bsz, 1, k)
            if beams > 1:  # a row per hypothesis and position
                rows = alpha.transpose(1, 2).reshape(kv_bsz, beams * steps, -1)
                return torch.bmm(rows, g).view(bsz, steps, k)
            # several positions, one hypothesis per source (training, scoring): a product per head,
            # summed over the heads, alpha read where it lies (the rows above would copy it)
            per_head = torch.bmm(alpha.flatten(0, 1), g.view(kv_bsz * heads, -1, k))
            return per_head.view(bsz, heads, steps, k).sum(1)

        def divide(e, tau):  # e: bsz x H x T' x S; tau: bsz x T' x K, K = 1 or H
            return _masked(e / tau.transpose(1, 2).unsqueeze(-1), padding, inplace=True)

        if self.previous_context == "untempered":
            contexts = context_logit(F.softmax(_masked(scores, padding), dim=-1))  # tau = 1, all at once
            if prev is None:  # W_c c_{-1} = 0, then W_c c_{t-1} after the first position
                previous = F.pad(contexts[:, :-1], (0, 0, 1, 0))
            else:  # after the positions decoded before (one: a decoder step)
                previous = prev if tgt_len == 1 else torch.cat([prev, contexts[:, :-1]], dim=1)
            tau = lambda_tanh(previous + state_logit, self.log_lam)
            probs = F.softmax(divide(scores, tau), dim=-1)
            last = contexts  # (its last position is the next step's W_c c_{t-1})
        else:  # the paper's recurrence c_{t-1} -> tau_t -> c_t, one position at a time
            steps, taus = [], []
            for t in range(tgt_len):
                logit = state_logit[:, t : t + 1] if prev is None else prev + state_logit[:, t : t + 1]
                tau_t = lambda_tanh(logit, self.log_lam)
                alpha = F.softmax(divide(scores[:, :, t : t + 1], tau_t), dim=-1)
                prev = context_logit(alpha)
                steps.append(alpha)
                taus.append(tau_t)
            probs, tau, last = torch.cat(steps, dim=2), torch.cat(taus, dim=1), prev
        if incremental_state is not None:
            last = last if last.size(1) == 1 else last[:, -1:]
            self.set_incremental_state(incremental_state, "sact_state", {"g": g, "prev_context_logit": last})
        return probs, tau

    def reorder_incremental_state(self, incremental_state, new_order):
        """fairseq's key/value cache; W_c c_{t-1}, one row per hypothesis; and g, by fairseq's rule
        for its static keys (MultiheadAttention.reorder_incremental_state): left alone while every
        source keeps its beam, else one row per remaining source."""
        incremental_state = super().reorder_incremental_state(incremental_state, new_order)
        cached = self.get_incremental_state(incremental_state, "sact_state")
        if cached is not None:
            g = cached["g"]
            if g.size(0) * self.beam_size != new_order.size(0):
                sources = new_order.reshape(-1, self.beam_size)[:, 0] // self.beam_size
                g = g.index_select(0, sources if self.beam_size > 1 else new_order)
            reordered = {
                "g": g,
                "prev_context_logit": cached["prev_context_logit"].index_select(0, new_order),
            }
            self.set_incremental_state(incremental_state, "sact_state", reordered)
        return incremental_state

    def extra_repr(self):
        if self.mode == "fixed":
            return f"mode=fixed, temperature={self.fixed_temperature:g}"
        return f"mode=sact, lambda={self.lam:g}, scope={self.scope}, previous_context={self.previous_context}"


def _bool(mask):
    """mask as booleans, without a no-op call where it already is (fairseq's masks are)."""
    return mask if mask.dtype == torch.bool else mask.to(torch.bool)


def _masked(scores, padding, inplace=False):
    """-inf at padding positions (fp32, as fairseq's MultiheadAttention masks); ``inplace`` for a
    fresh tensor that nothing else reads (a quotient: its backward needs only its inputs)."""
    if padding is None:
        return scores
    return (
        scores.masked_fill_(padding, float("-inf")) if inplace else scores.masked_fill(padding, float("-inf"))
    )
