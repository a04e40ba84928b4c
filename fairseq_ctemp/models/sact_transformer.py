"""``sact_transformer``: fairseq's Transformer translator with Self-Adaptive Control of Temperature
(SACT; Lin et al., EMNLP 2018) in every decoder layer's encoder-decoder attention.

Everything is fairseq's ``transformer`` (same options, architectures, parameter names) except the
decoder layers' cross-attention, a ``fairseq_ctemp.modules.SactMultiheadAttention``: its scores are
divided by tau_t = lambda ** tanh(W_c c_{t-1} + U_s s_t) per target position and layer (or per head),
with s_t the state entering the layer's cross-attention and c_{t-1} the layer's context at the
previous position (see the module for the formulas). ``--attention-temperature none`` builds
fairseq's own layers (identical parameters and outputs), ``fixed`` divides by a constant.

The decoder returns ``(logits, {"attn", "inner_states" as fairseq's, "attention_temperature": tau
(bsz x tgt x layers x K, K = 1 or heads) or None})``.
"""

from dataclasses import dataclass, field, fields
from typing import Optional

import torch
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoder,
    TransformerModel,
    base_architecture,
)
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase

from ..errors import OptionError
from ..modules.sact_attention import DEFAULT_LAMBDA, check_temperature_options, refuse_unused_options
from ..modules.sact_multihead_attention import PREVIOUS_CONTEXTS, SCOPES, SactMultiheadAttention
from .transformer_checks import check_attention_heads, check_shared_embeddings

TRANSFORMER_MODES = ("sact", "fixed", "none")


@dataclass
class SactTransformerConfig(FairseqDataclass):
    """The SACT options; the rest are fairseq's transformer options. An option left at None was not
    given (it is refused with the modes that ignore it); its value is the one in its help."""

    attention_temperature: ChoiceEnum(TRANSFORMER_MODES) = field(
        default="sact",
        metadata={
            "help": "sact: each decoder layer's encoder-decoder attention divides its scores by "
            "tau_t = lambda ** tanh(W_c.c_(t-1) + U_s.s_t); fixed: by a constant "
            "(--fixed-attention-temperature); none: fairseq's transformer"
        },
    )
    sact_lambda: Optional[float] = field(
        default=None,
        metadata={
            "help": f"lambda > 1 of sact: tau_t lies in [1/lambda, lambda] (default e = {DEFAULT_LAMBDA:.4f})"
        },
    )
    fixed_attention_temperature: Optional[float] = field(
        default=None,
        metadata={"help": "tau > 0 of --attention-temperature fixed (required there)"},
    )
    sact_temperature_scope: Optional[ChoiceEnum(SCOPES)] = field(
        default=None,
        metadata={
            "help": f"sact: one tau per target token and layer, shared by the layer's heads "
            f"(layer), or one per head (head) (default {SCOPES[0]})"
        },
    )
    sact_previous_context: Optional[ChoiceEnum(PREVIOUS_CONTEXTS)] = field(
        default=None,
        metadata={
            "help": "sact: c_(t-1) is the previous position's context at tau = 1, so training "
            "computes every position at once (untempered), or at tau_(t-1), the paper's "
            f"recurrence, a loop over target positions in training (tempered) "
            f"(default {PREVIOUS_CONTEXTS[0]})"
        },
    )


def _value(option):
    return getattr(option, "value", option)  # a ChoiceEnum member or its string


def sact_options(cfg):
    """The SactMultiheadAttention arguments of a checked config; None for mode "none"."""
    mode = _value(cfg.attention_temperature)
    if mode == "none":
        return None
    if mode == "fixed":
        return dict(mode=mode, fixed_temperature=cfg.fixed_attention_temperature)
    scope, context = _value(cfg.sact_temperature_scope), _value(cfg.sact_previous_context)
    return dict(
        mode=mode,
        lam=DEFAULT_LAMBDA if cfg.sact_lambda is None else cfg.sact_lambda,
        scope=SCOPES[0] if scope is None else scope,
        previous_context=PREVIOUS_CONTEXTS[0] if context is None else context,
    )


def check_sact_options(args):
    """One clear error per bad or conflicting SACT option, before the model is built."""
    mode = _value(args.attention_temperature)
    lam = DEFAULT_LAMBDA if args.sact_lambda is None else args.sact_lambda
    fixed = 1.0 if args.fixed_attention_temperature is None else args.fixed_attention_temperature
    check_temperature_options(mode, lam, fixed, TRANSFORMER_MODES)
    refuse_unused_options(
        mode,
        [
            ("--sact-lambda", args.sact_lambda, ("sact",)),
            ("--fixed-attention-temperature", args.fixed_attention_temperature, ("fixed",)),
            ("--sact-temperature-scope", args.sact_temperature_scope, ("sact",)),
            ("--sact-previous-context", args.sact_previous_context, ("sact",)),
        ],
    )
    if mode == "fixed" and args.fixed_attention_temperature is None:
        raise OptionError(
            "--attention-temperature fixed needs --fixed-attention-temperature TAU (a finite number > 0)"
        )
    for option, value, allowed in (
        ("--sact-temperature-scope", args.sact_temperature_scope, SCOPES),
        ("--sact-previous-context", args.sact_previous_context, PREVIOUS_CONTEXTS),
    ):
        if value is not None and _value(value) not in allowed:
            raise OptionError(f"{option} must be one of {', '.join(allowed)}, got {_value(value)!r}")
    if mode != "none" and args.no_cross_attention:
        raise OptionError(
            f"--no-cross-attention leaves no encoder-decoder attention for --attention-temperature {mode}"
        )


class SactTransformerDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer with SactMultiheadAttention as its encoder-decoder attention."""

    def build_encoder_attention(self, embed_dim, cfg):
        options = sact_options(cfg)
        if options is None:
            return super().build_encoder_attention(embed_dim, cfg)
        return SactMultiheadAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            kdim=cfg.encoder.embed_dim,
            vdim=cfg.encoder.embed_dim,
            dropout=cfg.attention_dropout,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
            **options,
        )


class SactTransformerDecoder(TransformerDecoder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # found once, not by a walk over every module at each call (a decoder step of beam search:
        # host time, ~0.1 ms at base size on a CPU, which a GPU waits for); a tuple, not submodules
        self.sact_attentions = tuple(
            m for m in self.modules() if isinstance(m, SactMultiheadAttention) and m.mode == "sact"
        )

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        cfg = TransformerConfig.from_namespace(cfg)
        layer = SactTransformerDecoderLayer(cfg, no_encoder_attn)
        # the wrapping of fairseq's TransformerDecoderBase.build_decoder_layer
        if cfg.checkpoint_activations:
            layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        return fsdp_wrap(layer, min_num_params=0 if cfg.checkpoint_activations else cfg.min_params_to_wrap)

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None, **kwargs):
        # (not through self.layers: iterating a LayerDropModuleList in training drops layers)
        sact = self.sact_attentions
        for attention in sact:  # a layer skipped by LayerDrop leaves None
            attention.last_temperature = None
        x, extra = super().extract_features(prev_output_tokens, encoder_out, incremental_state, **kwargs)
        taus = [attention.last_temperature for attention in sact]
        complete = taus and all(tau is not None for tau in taus)
        extra["attention_temperature"] = torch.stack(taus, dim=2) if complete else None
        return x, extra


@register_model("sact_transformer")
class SactTransformerModel(TransformerModel):
    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        # no argparse defaults: the architectures set them, as for fairseq's transformer options
        gen_parser_from_dataclass(parser, SactTransformerConfig(), delete_default=True)

    @classmethod
    def build_model(cls, args, task):
        sact_transformer(args)  # options missing from a Namespace built in code
        check_sact_options(args)
        check_shared_embeddings(args, task)
        check_attention_heads(args)
        return super().build_model(args, task)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        return SactTransformerDecoder(args, tgt_dict, embed_tokens, no_encoder_attn=args.no_cross_attention)


@register_model_architecture("sact_transformer", "sact_transformer")
def sact_transformer(args):
    """fairseq's transformer (base: 6+6 layers, 512/2048, 8 heads) with the SACT defaults."""
    for f in fields(SactTransformerConfig):
        if not hasattr(args, f.name):
            setattr(args, f.name, f.default)
    base_architecture(args)


def _defaults(args, **values):
    for name, value in values.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    sact_transformer(args)


@register_model_architecture("sact_transformer", "sact_transformer_tiny")
def sact_transformer_tiny(args):
    """For tests and smoke runs: 1 encoder and 2 decoder layers, 32-d, 2 heads."""
    _defaults(
        args,
        encoder_layers=1,
        decoder_layers=2,
        encoder_embed_dim=32,
        decoder_embed_dim=32,
        encoder_ffn_embed_dim=64,
        decoder_ffn_embed_dim=64,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
    )


@register_model_architecture("sact_transformer", "sact_transformer_alt_mini")
def sact_transformer_alt_mini(args):
    """The model of the ALT recipe's "mini" preset (fairseq_ctemp/alt/presets.py; CPU): 2+2 layers,
    128/512, 4 heads, tied decoder input/output embeddings, dropout 0.1."""
    _defaults(
        args,
        encoder_layers=2,
        decoder_layers=2,
        encoder_embed_dim=128,
        decoder_embed_dim=128,
        encoder_ffn_embed_dim=512,
        decoder_ffn_embed_dim=512,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        share_decoder_input_output_embed=True,
        dropout=0.1,
    )


@register_model_architecture("sact_transformer", "sact_transformer_alt_base")
def sact_transformer_alt_base(args):
    """The model of the ALT recipe's "base" preset: Transformer base (6+6 layers, 512/2048, 8 heads), tied decoder input/output embeddings, dropout, attention and activation dropout 0.1."""
    _defaults(
        args,
        share_decoder_input_output_embed=True,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
    )
