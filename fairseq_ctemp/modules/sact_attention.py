"""Self-Adaptive Control of Temperature (SACT; Lin et al., "Learning When to Concentrate or Divert
Attention", EMNLP 2018): attention whose softness is set at each decoder step
by a temperature computed from the decoder state s_t and the previous context vector c_{t-1}.

    e_{t,i}     = h_i . (W_in s_t)                          fairseq's LSTM attention score (Luong
                                                            "general", no bias), h_i encoder outputs
    beta_t      = tanh(w_c . c_{t-1} + u_s . s_t)           a scalar per step and sentence
    tau_t       = lam ** beta_t                             "sact": tau_t in (1/lam, lam), lam > 1
                = lam ** drop(tanh(MLP([s_t; c_{t-1}])))    "sact_released": the authors' code
                = tau                                       "fixed": a constant (paper's ablation)
                = 1                                         "none": plain attention (fairseq's lstm)
    alpha_{t,i} = softmax_i(e_{t,i} / tau_t)                padding positions get alpha = 0
    c_t         = sum_i alpha_{t,i} h_i
    out_t       = tanh(W_out [c_t; s_t])                    fairseq's attentional output (input-fed)

"sact_released" follows github.com/lancopku/SACT (models/attention.py, ``luong_gate_attention``):
MLP = Linear(d_s + d_c -> d_s), SELU, Dropout, Linear(d_s -> 1), then tanh, Dropout, and exp (that
is lam = e, the default of ``lam``). Its dropout sits *after* tanh, so during training beta_t is
scaled by 1/(1-p) or zeroed and tau_t can leave (1/lam, lam); at inference it stays inside.

c_{-1} is supplied by the caller (the SACT LSTM decoder uses the encoder state that initialises the
decoder). With mode "none" the layer computes what fairseq's ``lstm.AttentionLayer`` computes (up to
float rounding: batched matrix products instead of broadcast sums), with the same parameter names
(``input_proj``, ``output_proj``). Temperatures are computed in fp32 (in a decoder's steps, mode
"sact" takes the two terms of beta_t from products in the model's dtype: SactSteps).

A plain nn.Module with no fairseq registry code.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..errors import OptionError

MODES = ("sact", "sact_released", "fixed", "none")
DEFAULT_LAMBDA = math.e  # the authors' code: tau = exp(tanh(.)); the paper does not give lambda


def lambda_tanh(logit, log_lam):
    """tau = lambda ** tanh(logit), computed in fp32: the SACT temperature, in [1/lambda, lambda]
    (with -log(lambda): 1 / tau).
    One power of a scalar base (two kernels a step with tanh, not three: a small decoder on a GPU
    waits on the host's launches)."""
    return torch.pow(math.exp(log_lam), torch.tanh(as_fp32(logit)))


def as_fp32(x):
    """x in float32, without a no-op call where it already is (one per decoder step saved)."""
    return x if x.dtype == torch.float32 else x.float()


def _linear(in_features, out_features, bias):
    """fairseq's LSTM initialisation: uniform(-0.1, 0.1) for weights and biases."""
    m = nn.Linear(in_features, out_features, bias=bias)
    nn.init.uniform_(m.weight, -0.1, 0.1)
    if bias:
        nn.init.uniform_(m.bias, -0.1, 0.1)
    return m


class SactAttention(nn.Module):
    """Attention of the module docstring for one decoder step.

    Args:
        query_dim: size of s_t (decoder hidden size).
        source_dim: size of h_i and of the context vector c_t (encoder output size).
        output_dim: size of out_t.
        mode: one of ``MODES``.
        lam: lambda > 1 of the "sact" and "sact_released" modes (default e: exp(tanh(.))).
        fixed_temperature: tau > 0 of the "fixed" mode.
        released_dropout: dropout p in [0, 1) inside the "sact_released" temperature MLP.
    """

    def __init__(
        self,
        query_dim,
        source_dim,
        output_dim,
        mode="sact",
        lam=DEFAULT_LAMBDA,
        fixed_temperature=1.0,
        released_dropout=0.0,
    ):
        super().__init__()
        check_options(query_dim, source_dim, output_dim, mode, lam, fixed_temperature, released_dropout)
        self.mode = mode
        self.input_proj = _linear(query_dim, source_dim, bias=False)  # W_in
        self.output_proj = _linear(query_dim + source_dim, output_dim, bias=False)  # W_out
        self.lam = float(lam) if mode in ("sact", "sact_released") else None
        self.log_lam = math.log(lam) if self.lam is not None else None
        self.fixed_temperature = float(fixed_temperature) if mode == "fixed" else None
        if mode == "sact":
            self.temperature_context_proj = _linear(source_dim, 1, bias=False)  # w_c
            self.temperature_state_proj = _linear(query_dim, 1, bias=False)  # u_s
        elif mode == "sact_released":
            self.temperature_mlp = nn.Sequential(
                _linear(query_dim + source_dim, query_dim, bias=True),
                nn.SELU(),
                nn.Dropout(released_dropout),
                _linear(query_dim, 1, bias=True),
                nn.Tanh(),
                nn.Dropout(released_dropout),
            )

    @property
    def uses_previous_context(self):
        """Whether forward needs c_{t-1} (callers may pass None otherwise)."""
        return self.mode in ("sact", "sact_released")

    def temperature(self, query, prev_context):
        """tau_t: an fp32 tensor (bsz,) for the SACT modes, a float for "fixed", None for "none"."""
        if self.mode == "none":
            return None
        if self.mode == "fixed":
            return self.fixed_temperature
        if prev_context is None:
            raise ValueError(f"attention temperature {self.mode!r} needs the previous context vector c_(t-1)")
        if self.mode == "sact":
            logit = F.linear(prev_context.float(), self.temperature_context_proj.weight.float()) + F.linear(
                query.float(), self.temperature_state_proj.weight.float()
            )
            return lambda_tanh(logit, self.log_lam).squeeze(-1)
        beta = self.temperature_mlp(torch.cat((query, prev_context), dim=1)).float()
        return torch.exp(beta.squeeze(-1) * self.log_lam)

    def forward(self, query, source_hids, padding_mask=None, prev_context=None):
        """query s_t: (bsz, query_dim); source_hids h: (bsz, srclen, source_dim), batch first;
        padding_mask: (bsz, srclen) bool, True at padding; prev_context c_{t-1}: (bsz, source_dim),
        or None when ``uses_previous_context`` is False. Scores and context are row-vector batched
        matrix products on a transposed view: no per-step copy of the source, and forward +
        backward of the attention alone ~1.4x faster than fairseq's broadcast-multiply-sum (CPU,
        64 x 45 x 512).

        Returns (out_t (bsz, output_dim), alpha_t (bsz, srclen), c_t (bsz, source_dim), tau_t)."""
        x = self.input_proj(query)
        scores = torch.bmm(x.unsqueeze(1), source_hids.transpose(1, 2)).squeeze(1)  # e_{t,i}
        tau = self.temperature(query, prev_context)
        return (*self.attend(query, scores, tau, source_hids, padding_mask), tau)

    def attend(self, query, scores, tau, source_hids, padding_mask):
        """(out_t, alpha_t, c_t) from the scores e_{t,i} and tau_t (a tensor, a float or None)."""
        scaled = scores
        if torch.is_tensor(tau):  # fp32 tau: the quotient is fp32 (no cast of its own)
            scaled = scores / tau.unsqueeze(1)
        elif tau is not None:
            scaled = as_fp32(scores) / tau
        attn = self.weights(scaled, scores.dtype, padding_mask)
        context = torch.bmm(attn.unsqueeze(1), source_hids).squeeze(1)
        return self.output(context, query), attn, context

    @staticmethod
    def weights(scaled, dtype, padding_mask):
        """alpha_t from the scores divided by tau_t: padding masked in fp32 as fairseq's
        AttentionLayer (-inf is fp16-safe there), rounded back to the scores' dtype once."""
        if padding_mask is not None:
            scaled = as_fp32(scaled).masked_fill_(padding_mask, float("-inf"))
        return F.softmax(scaled if scaled.dtype == dtype else scaled.to(dtype), dim=1)

    def output(self, context, query):
        """out_t = tanh(W_out [c_t; s_t])."""
        return torch.tanh(self.output_proj(torch.cat((context, query), dim=1)))

    def steps(self, source_hids, padding_mask=None, prev_context=None, count=None):
        """The steps of one decoder call over the same source: called with s_t, returns (out_t,
        alpha_t, c_t), c_{t-1} carried from step to step (prev_context: c_{-1}); afterwards
        ``temperatures()`` gives every step's tau_t (bsz x steps), None for modes "fixed" and
        "none". Mode "sact" shares the parts of the temperature that do not change between steps
        (SactSteps; count: the steps the call will take, if known), the other modes call forward."""
        if self.mode == "sact":
            return SactSteps(self, source_hids, padding_mask, prev_context, count)
        return ForwardSteps(self, source_hids, padding_mask, prev_context)

    def extra_repr(self):
        if self.mode == "fixed":
            return f"mode=fixed, temperature={self.fixed_temperature:g}"
        if self.lam is not None:
            return f"mode={self.mode}, lambda={self.lam:g}"
        return "mode=none"


class ForwardSteps:
    """SactAttention.steps of the modes other than "sact": forward at each step."""

    def __init__(self, attention, source_hids, padding_mask, prev_context):
        self.attention, self.source, self.mask = attention, source_hids, padding_mask
        self.previous = prev_context if attention.uses_previous_context else None
        self.taus = []

    def __call__(self, query):
        out, attn, context, tau = self.attention(query, self.source, self.mask, self.previous)
        if self.attention.uses_previous_context:
            self.previous = context
        if torch.is_tensor(tau):
            self.taus.append(tau)
        return out, attn, context

    def temperatures(self):
        return torch.stack(self.taus, dim=1) if self.taus else None


class SactSteps:
    """Mode "sact" over the steps of one decoder call, in fewer operations per step than forward
    (what bounds a small decoder on a GPU, which waits on the host's launches): u_s is one more row
    of W_in, so one product gives W_in s_t and u_s . s_t; the scores are multiplied by
    1 / tau_t = (1 / lam) ** beta_t (a product's backward is one kernel shorter than a quotient's);
    and since c_t = sum_i alpha_{t,i} h_i, w_c . c_t = sum_i alpha_{t,i} (w_c . h_i): in a call of
    several steps (training) the values are [h_i, w_c . h_i], made once, and one product gives c_t
    and w_c . c_t. A call of one step (incremental decoding) makes no copy of the source: its next
    step, if any, projects c_t. The two terms of beta_t come out of products in the model's dtype;
    tanh and the power are computed in fp32, as in forward."""

    def __init__(self, attention, source_hids, padding_mask, prev_context, count=None):
        if prev_context is None:
            raise ValueError("attention temperature 'sact' needs the previous context vector c_(t-1)")
        self.attention, self.mask = attention, padding_mask
        self.keys = source_hids.transpose(1, 2)  # h_i as columns, for every step's scores
        self.context_weight = attention.temperature_context_proj.weight  # w_c (1 x source_dim)
        self.projection = torch.cat((attention.input_proj.weight, attention.temperature_state_proj.weight))
        self.folded = count is None or count > 1
        if self.folded:
            source_terms = F.linear(source_hids, self.context_weight)  # w_c . h_i
            self.values = torch.cat((source_hids, source_terms), dim=2)
        else:
            self.values = source_hids
        self.previous, self.context_term = prev_context, None  # c_{t-1}, w_c . c_{t-1} once known
        self.inverse_taus = []  # 1 / tau_t of each step (bsz x 1): tau_t made once for all of them

    def __call__(self, query):
        a = self.attention
        if self.context_term is None:  # no product gave w_c . c_{t-1}
            self.context_term = F.linear(self.previous, self.context_weight)
        # the terms of beta_t and 1 / tau_t as columns (bsz x 1): no view of them to make or undo
        projected = F.linear(query, self.projection)
        x, state_term = projected.split((projected.size(1) - 1, 1), dim=1)  # W_in s_t, u_s . s_t
        inverse_tau = lambda_tanh(self.context_term + state_term, -a.log_lam)
        scores = torch.bmm(x.unsqueeze(1), self.keys).squeeze(1)
        attn = a.weights(scores * inverse_tau, scores.dtype, self.mask)
        values = torch.bmm(attn.unsqueeze(1), self.values).squeeze(1)
        if self.folded:  # c_t, w_c . c_t
            context, self.context_term = values.split((values.size(1) - 1, 1), dim=1)
        else:
            context, self.previous, self.context_term = values, values, None
        self.inverse_taus.append(inverse_tau)
        return a.output(context, query), attn, context

    def temperatures(self):
        return torch.cat(self.inverse_taus, dim=1).reciprocal() if self.inverse_taus else None


def check_options(query_dim, source_dim, output_dim, mode, lam, fixed_temperature, released_dropout):
    """One clear error per bad option, raised when the model is built (names the CLI option)."""
    check_temperature_options(mode, lam, fixed_temperature, MODES)
    for name, value in (
        ("--decoder-hidden-size", query_dim),
        ("encoder output size", source_dim),
        ("attention output size", output_dim),
    ):
        if int(value) != value or value < 1:
            error = OptionError if name.startswith("--") else ValueError  # (the others: API misuse)
            raise error(f"{name} must be an integer >= 1, got {value}")
    if mode == "sact_released" and not 0.0 <= released_dropout < 1.0:
        raise OptionError(f"--sact-released-dropout must be in [0, 1), got {released_dropout}")


def check_temperature_options(mode, lam, fixed_temperature, modes):
    """The mode, lambda and fixed tau of any SACT attention (the LSTM's, the Transformer's)."""
    if mode not in modes:
        raise OptionError(f"--attention-temperature must be one of {', '.join(modes)}, got {mode!r}")
    if mode in ("sact", "sact_released") and not (math.isfinite(lam) and lam > 1):
        raise OptionError(
            f"--sact-lambda must be a finite number > 1 (tau_t = lambda ** beta_t lies "
            f"in (1/lambda, lambda)), got {lam}"
        )
    if mode == "fixed" and not (math.isfinite(fixed_temperature) and fixed_temperature > 0):
        raise OptionError(
            f"--fixed-attention-temperature must be a finite number > 0 (the paper's "
            f"ablation uses 0.8-1.2), got {fixed_temperature}"
        )


def refuse_unused_options(mode, options):
    """An option given to a mode that ignores it is an error, not silently dropped. ``options``:
    (option, value or None when not given, the modes that use it)."""
    for option, value, modes in options:
        if value is not None and mode not in modes:
            raise OptionError(
                f"{option} is only used with --attention-temperature {' or '.join(modes)}, not {mode}"
            )
