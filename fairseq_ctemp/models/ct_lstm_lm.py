"""``ct_lstm_lm``: an AWD-LSTM language model (Merity et al., 2018) with a temperature-aware output
head: the MoS / CT-MoS models of the contextual-temperature AAAI paper, and plain-softmax variants.

AWD-LSTM regularisation, as far as it fits in fairseq:
- embedding dropout (--dropout-embedding, "dropoute"): whole word types dropped from the embedding;
- locked (variational) dropout, one mask per sequence shared over time: on the embeddings
  (--dropout-input, "dropouti"), between LSTM layers (--dropout-hidden, "dropouth") and on the last
  layer's output (--dropout, "dropout");
- weight dropout (--weight-dropout, "wdrop"): DropConnect on each LSTM's hidden-to-hidden matrix;
- AR (--activation-regularization, alpha) on the dropped last-layer output and TAR
  (--temporal-activation-regularization, beta) on its undropped differences; the model returns
  alpha * mean(o^2) + beta * mean((h_t - h_{t-1})^2) in ``net_output[1]["regularization"]`` and
  ``ct_cross_entropy`` adds it (per target token) to the loss;
- weight decay is fairseq's optimizer option (--weight-decay).
Not reproduced: ASGD/NT-ASGD and variable-length BPTT, and carrying the LSTM state from one batch to
the next (fairseq batches are independent blocks of --tokens-per-sample tokens; every block starts
from a zero state). See docs/contextual_temperature.md for what that means for perplexities.
"""

from dataclasses import dataclass, field

import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import (
    FairseqIncrementalDecoder,
    FairseqLanguageModel,
    register_model,
    register_model_architecture,
)
from fairseq.utils import safe_getattr
from torch import _VF

from ..errors import OptionError
from .temperature_head import (
    TemperatureHeadConfig,
    TemperatureHeadDecoderMixin,
    build_output_head,
    dataclass_defaults,
)


@dataclass
class CTLSTMLanguageModelConfig(TemperatureHeadConfig):
    embed_dim: int = field(default=400, metadata={"help": "word embedding dimension"})
    lstm_hidden_sizes: str = field(
        default="1150,1150,400",
        metadata={"help": "comma-separated LSTM sizes, one per layer (the last one is the output size)"},
    )
    untie_embeddings: bool = field(
        default=False,
        metadata={
            "help": "do not tie the output embedding to the input embedding (tied by default, as AWD-LSTM)"
        },
    )
    dropout: float = field(default=0.4, metadata={"help": "locked dropout on the last LSTM output"})
    dropout_input: float = field(
        default=0.4, metadata={"help": "locked dropout on the embeddings (dropouti)"}
    )
    dropout_hidden: float = field(
        default=0.25, metadata={"help": "locked dropout between LSTM layers (dropouth)"}
    )
    dropout_embedding: float = field(
        default=0.1, metadata={"help": "word-type dropout on the embedding matrix (dropoute)"}
    )
    weight_dropout: float = field(
        default=0.5, metadata={"help": "DropConnect on hidden-to-hidden weights (wdrop)"}
    )
    activation_regularization: float = field(default=2.0, metadata={"help": "AR coefficient alpha"})
    temporal_activation_regularization: float = field(default=1.0, metadata={"help": "TAR coefficient beta"})


def locked_dropout(x, p, training):
    """x: (T, B, C); one dropout mask per sequence, shared across time steps."""
    if not training or p == 0:
        return x
    mask = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - p) / (1 - p)
    return x * mask


def embedding_dropout(weight, p, training):
    """Drop whole rows (word types) of the embedding matrix, rescaling the kept ones."""
    if not training or p == 0:
        return weight
    return weight * weight.new_empty(weight.size(0), 1).bernoulli_(1 - p) / (1 - p)


class WeightDropLSTM(nn.LSTM):
    """A one-layer nn.LSTM whose hidden-to-hidden weights get DropConnect in training."""

    def __init__(self, input_size, hidden_size, weight_dropout):
        super().__init__(input_size, hidden_size)
        self.weight_dropout = weight_dropout

    def forward(self, x, state=None):
        if state is None:
            zeros = x.new_zeros(1, x.size(1), self.hidden_size)
            state = (zeros, zeros)
        weight_hh = F.dropout(self.weight_hh_l0, self.weight_dropout, self.training)
        weights = [self.weight_ih_l0, weight_hh, self.bias_ih_l0, self.bias_hh_l0]
        # the call nn.LSTM.forward makes, with the dropped-out matrix in place of weight_hh_l0
        output, h, c = _VF.lstm(x, state, weights, True, 1, 0.0, self.training, False, False)
        return output, (h, c)


class CTLSTMDecoder(TemperatureHeadDecoderMixin, FairseqIncrementalDecoder):
    def __init__(self, cfg, dictionary):
        super().__init__(dictionary)
        self.cfg = cfg
        sizes = [cfg.embed_dim] + [int(s) for s in str(cfg.lstm_hidden_sizes).split(",")]
        self.embed_tokens = nn.Embedding(len(dictionary), cfg.embed_dim, padding_idx=dictionary.pad())
        nn.init.uniform_(self.embed_tokens.weight, -0.1, 0.1)
        self.layers = nn.ModuleList(
            WeightDropLSTM(sizes[i], sizes[i + 1], cfg.weight_dropout) for i in range(len(sizes) - 1)
        )
        tied = None if cfg.untie_embeddings else self.embed_tokens.weight
        self.output_head = build_output_head(cfg, sizes[-1], len(dictionary), tied_weight=tied)

    def forward(self, prev_output_tokens, incremental_state=None, **kwargs):
        return self.extract_features(prev_output_tokens, incremental_state)

    def extract_features(self, prev_output_tokens, incremental_state=None, **kwargs):
        """-> (features (B, T, C), {"regularization": AR + TAR (training), "inner_states": ...})."""
        cached = None
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
            cached = self.get_incremental_state(incremental_state, "lstm_states")
        cfg = self.cfg
        weight = embedding_dropout(self.embed_tokens.weight, cfg.dropout_embedding, self.training)
        x = F.embedding(prev_output_tokens, weight, self.embed_tokens.padding_idx).transpose(0, 1)
        x = locked_dropout(x, cfg.dropout_input, self.training)
        states, inner_states = [], []
        for i, lstm in enumerate(self.layers):
            x, state = lstm(x, None if cached is None else cached[i])
            states.append(state)
            raw = x
            last = i == len(self.layers) - 1
            x = locked_dropout(x, cfg.dropout if last else cfg.dropout_hidden, self.training)
            inner_states.append(x)
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "lstm_states", states)
        extra = {"attn": [None], "inner_states": inner_states}
        if self.training:
            extra["regularization"] = self._activation_regularization(x, raw)
        return x.transpose(0, 1), extra

    def _activation_regularization(self, dropped, raw):
        reg = dropped.new_zeros(())
        if self.cfg.activation_regularization > 0:
            reg = reg + self.cfg.activation_regularization * dropped.pow(2).mean()
        if self.cfg.temporal_activation_regularization > 0 and raw.size(0) > 1:
            reg = reg + self.cfg.temporal_activation_regularization * (raw[1:] - raw[:-1]).pow(2).mean()
        return reg

    def reorder_incremental_state(self, incremental_state, new_order):
        states = self.get_incremental_state(incremental_state, "lstm_states")
        if states is None:
            return
        reordered = [(h.index_select(1, new_order), c.index_select(1, new_order)) for h, c in states]
        self.set_incremental_state(incremental_state, "lstm_states", reordered)

    def max_positions(self):
        return int(1e6)  # an LSTM has no position limit


# --arch ct_lstm_lm: the config defaults (AWD-LSTM on PTB, plain softmax with contextual temperature)
@register_model("ct_lstm_lm", dataclass=CTLSTMLanguageModelConfig)
class CTLSTMLanguageModel(FairseqLanguageModel):
    has_temperature_head = True  # read by the criteria before the model exists

    @classmethod
    def build_model(cls, args, task):
        check_lstm_options(args)
        return cls(CTLSTMDecoder(args, task.target_dictionary))


def check_lstm_options(args):
    try:
        sizes = [int(s) for s in str(args.lstm_hidden_sizes).split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise OptionError(
            f"--lstm-hidden-sizes must be comma-separated integers >= 1, got {args.lstm_hidden_sizes!r}"
        )
    if args.embed_dim < 1:
        raise OptionError(f"--embed-dim must be >= 1, got {args.embed_dim}")
    if not args.untie_embeddings and args.output_head == "softmax" and sizes[-1] != args.embed_dim:
        raise OptionError(
            f"--lstm-hidden-sizes {args.lstm_hidden_sizes} ends with {sizes[-1]}: the softmax tied to the "
            f"input embedding (the default; --untie-embeddings unties it) needs --embed-dim {sizes[-1]}, "
            f"not {args.embed_dim}"
        )
    if args.output_head == "adaptive":
        raise OptionError(
            "--output-head: ct_lstm_lm supports --output-head softmax or mos (adaptive: use ct_transformer_lm)"
        )
    for name in (
        "dropout",
        "dropout_input",
        "dropout_hidden",
        "dropout_embedding",
        "weight_dropout",
        "mos_latent_dropout",
    ):
        if not 0 <= getattr(args, name) < 1:
            raise OptionError(f"--{name.replace('_', '-')} must be in [0, 1), got {getattr(args, name)}")
    for name in ("activation_regularization", "temporal_activation_regularization"):
        if getattr(args, name) < 0:
            raise OptionError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")


def _lstm_defaults(
    args,
    embed_dim,
    sizes,
    dropout,
    dropout_input,
    dropout_hidden,
    output_head,
    ct_normalization,
    mos_latent_dropout=0.29,
):
    args.embed_dim = safe_getattr(args, "embed_dim", embed_dim)
    args.lstm_hidden_sizes = safe_getattr(args, "lstm_hidden_sizes", sizes)
    args.dropout = safe_getattr(args, "dropout", dropout)
    args.dropout_input = safe_getattr(args, "dropout_input", dropout_input)
    args.dropout_hidden = safe_getattr(args, "dropout_hidden", dropout_hidden)
    args.output_head = safe_getattr(args, "output_head", output_head)
    args.ct_normalization = safe_getattr(args, "ct_normalization", ct_normalization)
    args.mos_latent_dropout = safe_getattr(args, "mos_latent_dropout", mos_latent_dropout)
    dataclass_defaults(args, CTLSTMLanguageModelConfig)  # the other options: their field defaults


# The MoS papers' settings (Yang et al., 2018), as used by the contextual-temperature AAAI paper.
@register_model_architecture("ct_lstm_lm", "ct_mos_lstm_lm_ptb")
def ct_mos_lstm_lm_ptb(args):
    """CT-MoS on PTB: 280 embedding, 960-960-620 LSTMs, M=15, Q=280, (alpha, beta) = (1, 0.5)."""
    args.mos_components = safe_getattr(args, "mos_components", 15)
    _lstm_defaults(args, 280, "960,960,620", 0.4, 0.4, 0.225, "mos", "softmax")


@register_model_architecture("ct_lstm_lm", "mos_lstm_lm_ptb")
def mos_lstm_lm_ptb(args):
    args.ct_normalization = safe_getattr(args, "ct_normalization", "none")
    ct_mos_lstm_lm_ptb(args)


@register_model_architecture("ct_lstm_lm", "ct_mos_lstm_lm_wt2")
def ct_mos_lstm_lm_wt2(args):
    """CT-MoS on WikiText-2: 300 embedding, 1150-1150-650 LSTMs, M=15, Q=280."""
    args.mos_components = safe_getattr(args, "mos_components", 15)
    _lstm_defaults(args, 300, "1150,1150,650", 0.4, 0.55, 0.2, "mos", "softmax")


@register_model_architecture("ct_lstm_lm", "mos_lstm_lm_wt2")
def mos_lstm_lm_wt2(args):
    args.ct_normalization = safe_getattr(args, "ct_normalization", "none")
    ct_mos_lstm_lm_wt2(args)


@register_model_architecture("ct_lstm_lm", "ct_mos_lstm_lm_tiny")
def ct_mos_lstm_lm_tiny(args):
    """For tests: 32 embedding, 48-32 LSTMs, M=3, Q=8, light dropout."""
    args.mos_components = safe_getattr(args, "mos_components", 3)
    args.ct_rank = safe_getattr(args, "ct_rank", 8)
    _lstm_defaults(args, 32, "48,32", 0.1, 0.1, 0.1, "mos", "softmax", 0.1)


@register_model_architecture("ct_lstm_lm", "lstm_lm_tiny")
def lstm_lm_tiny(args):
    """For tests: the tiny LSTM with a plain softmax and no temperature."""
    args.output_head = safe_getattr(args, "output_head", "softmax")
    args.ct_normalization = safe_getattr(args, "ct_normalization", "none")
    ct_mos_lstm_lm_tiny(args)
