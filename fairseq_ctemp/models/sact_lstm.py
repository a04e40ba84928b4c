"""``sact_lstm``: an attention LSTM translator with Self-Adaptive Control of Temperature (SACT;
Lin et al., EMNLP 2018).

Bidirectional LSTM encoder (fairseq's ``LSTMEncoder``: both directions concatenated, so it outputs
2 x --encoder-hidden-size), unidirectional LSTM decoder with input feeding (fairseq's
``LSTMDecoder``), and ``fairseq_ctemp.modules.SactAttention`` in place of fairseq's attention layer:
scores e_{t,i} = h_i . (W_in s_t) are divided by tau_t = lambda ** tanh(w_c . c_{t-1} + u_s . s_t)
before the softmax (see the module for the formulas and the other --attention-temperature modes).

c_{-1}, the "previous context" of the first step, is the encoder state that initialises the decoder:
the top encoder layer's final hidden state, both directions concatenated (the size of a context
vector). When --decoder-hidden-size equals its size it *is* the decoder's initial hidden state;
otherwise the decoder starts from fairseq's linear projection of it.

Incremental decoding caches the LSTM states, the input feed and c_{t-1}; beam search reorders all
of them. The decoder returns ``(logits, {"attn": alpha (bsz x tgt x src) or None,
"attention_temperature": tau (bsz x tgt) or None})``: alpha as fairseq's lstm returns it (eval mode,
unless generation turned it off), tau for the SACT modes.
"""

from dataclasses import dataclass, field, fields
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import FairseqEncoderDecoderModel, register_model, register_model_architecture
from fairseq.models.lstm import Embedding, LSTMDecoder, LSTMEncoder
from omegaconf import II

from ..errors import OptionError
from ..modules.sact_attention import DEFAULT_LAMBDA as DEFAULT_SACT_LAMBDA
from ..modules.sact_attention import MODES, SactAttention, refuse_unused_options


@dataclass
class SactLSTMConfig(FairseqDataclass):
    """Defaults are the paper's setting (architecture ``sact_lstm``)."""

    dropout: float = field(
        default=0.3,
        metadata={
            "help": "dropout on embeddings, between LSTM layers and on the "
            "attentional output (paper: 0.3 zh-en, 0.4 en-vi)"
        },
    )
    encoder_embed_dim: int = field(default=512, metadata={"help": "encoder embedding dimension"})
    encoder_hidden_size: int = field(
        default=512,
        metadata={
            "help": "encoder LSTM size per direction (outputs are 2x this: both directions concatenated)"
        },
    )
    encoder_layers: int = field(
        default=2,
        metadata={
            "help": "encoder layers (must equal --decoder-layers; the paper does "
            "not say, the authors' en-vi config uses 2)"
        },
    )
    decoder_embed_dim: int = field(default=512, metadata={"help": "decoder embedding dimension"})
    decoder_hidden_size: int = field(default=512, metadata={"help": "decoder LSTM size"})
    decoder_layers: int = field(default=2, metadata={"help": "decoder layers"})
    decoder_out_embed_dim: int = field(
        default=512,
        metadata={
            "help": "size of the decoder output before the vocabulary "
            "projection (projected from --decoder-hidden-size if they "
            "differ)"
        },
    )
    share_decoder_input_output_embed: bool = field(
        default=False, metadata={"help": "share decoder input and output embeddings"}
    )
    share_all_embeddings: bool = field(
        default=False,
        metadata={
            "help": "share encoder, decoder and output embeddings (needs a "
            "joined dictionary and equal embedding dims)"
        },
    )
    attention_temperature: ChoiceEnum(MODES) = field(
        default="sact",
        metadata={
            "help": "sact: tau_t = lambda ** tanh(w_c.c_(t-1) + u_s.s_t) (the "
            "paper); sact_released: tau_t = lambda ** "
            "dropout(tanh(MLP([s_t; c_(t-1)]))) (the authors' code); "
            "fixed: a constant tau (--fixed-attention-temperature); "
            "none: plain attention (fairseq's lstm)"
        },
    )
    sact_lambda: Optional[float] = field(
        default=None,
        metadata={
            "help": "lambda > 1 of sact / sact_released: tau_t lies in "
            f"(1/lambda, lambda) (default e = {DEFAULT_SACT_LAMBDA:.4f}, "
            "as exp(tanh(.)) in the authors' code)"
        },
    )
    fixed_attention_temperature: Optional[float] = field(
        default=None,
        metadata={
            "help": "tau > 0 of --attention-temperature fixed (required there; "
            "the paper's ablation: 0.8, 0.9, 1.0, 1.1, 1.2)"
        },
    )
    sact_released_dropout: Optional[float] = field(
        default=None,
        metadata={
            "help": "dropout in [0, 1) inside the sact_released temperature MLP "
            "(default: --dropout, as in the authors' code)"
        },
    )
    max_source_positions: Optional[int] = II("task.max_source_positions")
    max_target_positions: Optional[int] = II("task.max_target_positions")


def check_config(cfg, mode):
    """Errors raised at build time (before any training step) for options that are out of range,
    inconsistent, or given to a mode that ignores them."""
    for name in (
        "encoder_embed_dim",
        "encoder_hidden_size",
        "encoder_layers",
        "decoder_embed_dim",
        "decoder_hidden_size",
        "decoder_layers",
        "decoder_out_embed_dim",
    ):
        value = getattr(cfg, name)
        if value is None or int(value) != value or value < 1:
            raise OptionError(f"--{name.replace('_', '-')} must be an integer >= 1, got {value}")
    if cfg.encoder_layers != cfg.decoder_layers:
        raise OptionError(
            f"--encoder-layers ({cfg.encoder_layers}) must equal --decoder-layers "
            f"({cfg.decoder_layers}): each decoder layer starts from the final state "
            "of the matching encoder layer"
        )
    if not 0.0 <= cfg.dropout < 1.0:
        raise OptionError(f"--dropout must be in [0, 1), got {cfg.dropout}")
    if cfg.share_all_embeddings and cfg.encoder_embed_dim != cfg.decoder_embed_dim:
        raise OptionError(
            f"--share-all-embeddings needs --encoder-embed-dim ({cfg.encoder_embed_dim})"
            f" == --decoder-embed-dim ({cfg.decoder_embed_dim})"
        )
    if (
        cfg.share_decoder_input_output_embed or cfg.share_all_embeddings
    ) and cfg.decoder_embed_dim != cfg.decoder_out_embed_dim:
        raise OptionError(
            f"sharing the decoder input and output embeddings needs --decoder-embed-dim "
            f"({cfg.decoder_embed_dim}) == --decoder-out-embed-dim "
            f"({cfg.decoder_out_embed_dim})"
        )
    if mode not in MODES:
        raise OptionError(f"--attention-temperature must be one of {', '.join(MODES)}, got {mode!r}")
    refuse_unused_options(
        mode,
        [
            ("--sact-lambda", cfg.sact_lambda, ("sact", "sact_released")),
            ("--fixed-attention-temperature", cfg.fixed_attention_temperature, ("fixed",)),
            ("--sact-released-dropout", cfg.sact_released_dropout, ("sact_released",)),
        ],
    )
    if mode == "fixed" and cfg.fixed_attention_temperature is None:
        raise OptionError(
            "--attention-temperature fixed needs --fixed-attention-temperature TAU "
            "(a finite number > 0; the paper's ablation uses 0.8-1.2)"
        )


def _mode(cfg):
    mode = cfg.attention_temperature
    return getattr(mode, "value", mode)  # a ChoiceEnum member or its string


@register_model("sact_lstm", dataclass=SactLSTMConfig)
class SactLSTMModel(FairseqEncoderDecoderModel):
    @classmethod
    def build_model(cls, cfg, task):
        mode = _mode(cfg)
        check_config(cfg, mode)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        encoder_embed = Embedding(len(src_dict), cfg.encoder_embed_dim, src_dict.pad())
        decoder_embed = None
        share_output = cfg.share_decoder_input_output_embed
        if cfg.share_all_embeddings:
            if src_dict != tgt_dict:
                raise OptionError(
                    "--share-all-embeddings needs a joined dictionary "
                    "(fairseq-preprocess --joined-dictionary)"
                )
            decoder_embed, share_output = encoder_embed, True
        max_source = cfg.max_source_positions if cfg.max_source_positions is not None else 1e5
        max_target = cfg.max_target_positions if cfg.max_target_positions is not None else 1e5
        encoder = SactLSTMEncoder(
            dictionary=src_dict,
            embed_dim=cfg.encoder_embed_dim,
            hidden_size=cfg.encoder_hidden_size,
            num_layers=cfg.encoder_layers,
            dropout_in=cfg.dropout,
            dropout_out=cfg.dropout,
            bidirectional=True,
            pretrained_embed=encoder_embed,
            max_source_positions=max_source,
        )
        decoder = SactLSTMDecoder(
            dictionary=tgt_dict,
            embed_dim=cfg.decoder_embed_dim,
            hidden_size=cfg.decoder_hidden_size,
            out_embed_dim=cfg.decoder_out_embed_dim,
            num_layers=cfg.decoder_layers,
            dropout_in=cfg.dropout,
            dropout_out=cfg.dropout,
            encoder_output_units=encoder.output_units,
            pretrained_embed=decoder_embed,
            share_input_output_embed=share_output,
            max_target_positions=max_target,
            attention_temperature=mode,
            sact_lambda=DEFAULT_SACT_LAMBDA if cfg.sact_lambda is None else cfg.sact_lambda,
            fixed_attention_temperature=(
                1.0 if cfg.fixed_attention_temperature is None else cfg.fixed_attention_temperature
            ),
            sact_released_dropout=(
                cfg.dropout if cfg.sact_released_dropout is None else cfg.sact_released_dropout
            ),
        )
        return cls(encoder, decoder)

    def forward(self, src_tokens, src_lengths, prev_output_tokens, incremental_state=None):
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, incremental_state=incremental_state)


class SactLSTMEncoder(LSTMEncoder):
    """fairseq's bidirectional LSTMEncoder with batch-first outputs for the decoder's batched
    attention products: (outs B x T x C, final hiddens L x B x C, final cells L x B x C, padding mask
    B x T). Beam search reorders them at every step: one big tensor, as for fairseq's lstm."""

    def forward(self, src_tokens, src_lengths, enforce_sorted=True):
        outs, hiddens, cells, padding_mask = super().forward(src_tokens, src_lengths, enforce_sorted)
        return outs.transpose(0, 1).contiguous(), hiddens, cells, padding_mask.t().contiguous()

    def reorder_encoder_out(self, encoder_out, new_order):
        outs, hiddens, cells, padding_mask = encoder_out
        return (
            outs.index_select(0, new_order),
            hiddens.index_select(1, new_order),
            cells.index_select(1, new_order),
            padding_mask.index_select(0, new_order),
        )


class SactLSTMDecoder(LSTMDecoder):
    """fairseq's LSTMDecoder (input feeding, same dropout and parameter names) with SactAttention
    and c_{t-1} in the incremental state."""

    def __init__(
        self,
        dictionary,
        attention_temperature="sact",
        sact_lambda=DEFAULT_SACT_LAMBDA,
        fixed_attention_temperature=1.0,
        sact_released_dropout=0.0,
        **kwargs,
    ):
        super().__init__(dictionary, attention=False, residuals=False, **kwargs)
        self.attention = SactAttention(
            self.hidden_size,
            self.encoder_output_units,
            self.hidden_size,
            mode=attention_temperature,
            lam=sact_lambda,
            fixed_temperature=fixed_attention_temperature,
            released_dropout=sact_released_dropout,
        )

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None):
        source_hids, encoder_hiddens, encoder_cells, padding_mask = encoder_out
        cached = (
            self.get_incremental_state(incremental_state, "cached_state")
            if incremental_state is not None
            else None
        )
        if cached is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
        bsz, seqlen = prev_output_tokens.size()

        x = self.dropout_in_module(self.embed_tokens(prev_output_tokens))
        x = x.transpose(0, 1)  # B x T x C -> T x B x C

        attention = self.attention
        if cached is not None:
            prev_hiddens, prev_cells, input_feed, prev_context = self.get_cached_state(incremental_state)
        else:
            prev_hiddens = [encoder_hiddens[i] for i in range(self.num_layers)]
            prev_cells = [encoder_cells[i] for i in range(self.num_layers)]
            if self.encoder_hidden_proj is not None:
                prev_hiddens = [self.encoder_hidden_proj(y) for y in prev_hiddens]
                prev_cells = [self.encoder_cell_proj(y) for y in prev_cells]
            input_feed = x.new_zeros(bsz, self.hidden_size)
            # c_{-1}: the encoder state that initialises the decoder (see the module docstring)
            prev_context = encoder_hiddens[-1] if attention.uses_previous_context else None

        keep_attn = not self.training and self.need_attn
        outs, attns = [], []
        step = attention.steps(source_hids, padding_mask, prev_context, count=seqlen)
        for j in range(seqlen):
            input = torch.cat((x[j], input_feed), dim=1)  # input feeding
            for i, rnn in enumerate(self.layers):
                hidden, cell = rnn(input, (prev_hiddens[i], prev_cells[i]))
                input = self.dropout_out_module(hidden)
                prev_hiddens[i] = hidden
                prev_cells[i] = cell
            out, attn, context = step(hidden)
            if prev_context is not None:
                prev_context = context
            if keep_attn:
                attns.append(attn)
            out = self.dropout_out_module(out)
            input_feed = out
            outs.append(out)

        self.set_incremental_state(
            incremental_state,
            "cached_state",
            {
                "prev_hiddens": torch.stack(prev_hiddens),
                "prev_cells": torch.stack(prev_cells),
                "input_feed": input_feed,
                "prev_context": prev_context,
            },
        )

        x = torch.stack(outs, dim=1)  # B x T x C
        if hasattr(self, "additional_fc"):
            x = self.dropout_out_module(self.additional_fc(x))
        return x, {
            "attn": torch.stack(attns, dim=1) if attns else None,  # B x T x S
            "attention_temperature": step.temperatures(),
        }  # B x T

    def get_cached_state(self, incremental_state):
        cached = self.get_incremental_state(incremental_state, "cached_state")
        assert cached is not None
        prev_hiddens = [cached["prev_hiddens"][i] for i in range(self.num_layers)]
        prev_cells = [cached["prev_cells"][i] for i in range(self.num_layers)]
        return prev_hiddens, prev_cells, cached["input_feed"], cached["prev_context"]

    def reorder_incremental_state(self, incremental_state, new_order):
        if incremental_state is None:
            return
        cached = self.get_incremental_state(incremental_state, "cached_state")
        if cached is None:
            return
        reordered = {
            "prev_hiddens": cached["prev_hiddens"].index_select(1, new_order),
            "prev_cells": cached["prev_cells"].index_select(1, new_order),
        }
        for key in ("input_feed", "prev_context"):
            value = cached[key]
            reordered[key] = value.index_select(0, new_order) if value is not None else None
        self.set_incremental_state(incremental_state, "cached_state", reordered)


def _set_defaults(args, **overrides):
    """Architecture defaults: ``overrides`` then the dataclass defaults, for options not given."""
    for f in fields(SactLSTMConfig):
        if f.name.startswith("max_") or f.name.startswith("_"):
            continue
        default = overrides.get(f.name, f.default)
        if getattr(args, f.name, None) is None and default is not None:
            setattr(args, f.name, default)


# `sact_lstm` itself is the dataclass defaults (the paper: 512-d, 2 layers, dropout 0.3, zh-en).
@register_model_architecture("sact_lstm", "sact_lstm_iwslt_en_vi")
def sact_lstm_iwslt_en_vi(args):
    """The paper's En-Vi setting: as sact_lstm with dropout 0.4."""
    _set_defaults(args, dropout=0.4)


@register_model_architecture("sact_lstm", "sact_lstm_tiny")
def sact_lstm_tiny(args):
    """For tests and smoke runs: 1 layer, 32-d embeddings, 32-d LSTMs, no dropout."""
    _set_defaults(
        args,
        dropout=0.0,
        encoder_embed_dim=32,
        encoder_hidden_size=32,
        encoder_layers=1,
        decoder_embed_dim=32,
        decoder_hidden_size=32,
        decoder_layers=1,
        decoder_out_embed_dim=32,
    )
