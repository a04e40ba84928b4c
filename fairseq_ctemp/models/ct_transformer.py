"""``ct_transformer``: fairseq's Transformer translator with a contextual-temperature output layer.

Encoder, decoder layers, embeddings and every option are fairseq's ``transformer``; only the output
layer differs: the decoder returns its features in ``net_output[0]`` and ``decoder.output_head``
(the LMs' temperature head, models/temperature_head.py) turns them into
softmax(z_t / tau_t), tau per target position and vocabulary entry from the decoder state
(--ct-normalization, --ct-rank, ...; --output-head softmax or mos). Train it with
``--criterion ct_cross_entropy``; every decoding path reads the head's distribution
(fairseq_ctemp/decoding.py). With --ct-normalization none the softmax head is fairseq's output
projection (no bias, tied to the decoder input embedding with --share-decoder-input-output-embed).
"""

import torch.nn as nn
from fairseq.dataclass.utils import gen_parser_from_dataclass
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import TransformerConfig, TransformerDecoderBase, TransformerModel
from fairseq.models.transformer import base_architecture as transformer_base_architecture
from fairseq.utils import safe_getattr

from ..errors import OptionError
from .temperature_head import (
    TemperatureHeadConfig,
    TemperatureHeadDecoderMixin,
    build_output_head,
    head_defaults,
)
from .transformer_checks import check_attention_heads, check_shared_embeddings

OUTPUT_HEADS = ("softmax", "mos")  # no adaptive softmax: fairseq's translator has no adaptive input


class CTTransformerDecoder(TemperatureHeadDecoderMixin, TransformerDecoderBase):
    def build_output_projection(self, cfg, dictionary, embed_tokens):
        # cfg is fairseq's TransformerConfig, which carries the head options of the namespace
        tied = embed_tokens.weight if cfg.share_decoder_input_output_embed else None
        self.output_head = build_output_head(
            cfg, self.output_embed_dim, len(dictionary), tied_weight=tied, bias=False
        )
        if tied is None and cfg.output_head == "softmax":  # fairseq's initialisation of its projection
            nn.init.normal_(self.output_head.output.weight, mean=0, std=self.output_embed_dim**-0.5)


@register_model("ct_transformer")
class CTTransformerModel(TransformerModel):
    has_temperature_head = True  # read by the criteria before the model exists

    @classmethod
    def add_args(cls, parser):
        super().add_args(parser)
        # no defaults in the parser: the architecture functions fill them from TemperatureHeadConfig
        gen_parser_from_dataclass(parser, TemperatureHeadConfig(), delete_default=True)

    @classmethod
    def build_model(cls, args, task):
        ct_transformer(args)  # every option present, also for older checkpoints
        check_options(args, task)
        return super().build_model(args, task)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return CTTransformerDecoder(cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention)


def check_options(args, task):
    """Errors naming the option, before fairseq's asserts (and before any training step)."""
    if args.output_head not in OUTPUT_HEADS:
        raise OptionError(
            f"--output-head must be one of {', '.join(OUTPUT_HEADS)} for ct_transformer, got "
            f"{args.output_head!r} (the adaptive head is for the language models, with adaptive input)"
        )
    if args.adaptive_softmax_cutoff:
        raise OptionError(
            "--adaptive-softmax-cutoff is not used by ct_transformer: its output layer is "
            f"--output-head {' or '.join(OUTPUT_HEADS)}"
        )
    if not 0 <= args.mos_latent_dropout < 1:
        raise OptionError(f"--mos-latent-dropout must be in [0, 1), got {args.mos_latent_dropout}")
    check_shared_embeddings(args, task)
    check_attention_heads(args)
    tied = args.share_decoder_input_output_embed or args.share_all_embeddings
    if tied and args.output_head == "softmax" and args.decoder_output_dim != args.decoder_embed_dim:
        raise OptionError(
            f"--share-decoder-input-output-embed needs --decoder-output-dim ({args.decoder_output_dim}) "
            f"equal to --decoder-embed-dim ({args.decoder_embed_dim})"
        )


def _set_default(args, name, value):
    setattr(args, name, safe_getattr(args, name, value))


@register_model_architecture("ct_transformer", "ct_transformer")
def ct_transformer(args):
    """fairseq's transformer (base sizes) with a contextual-temperature softmax head."""
    head_defaults(args)
    transformer_base_architecture(args)


@register_model_architecture("ct_transformer", "ct_transformer_tiny")
def ct_transformer_tiny(args):
    """For tests and quick CPU runs: 1+1 layers, 32 hidden, FFN 64, 2 heads, Q = 8."""
    for side in ("encoder", "decoder"):
        _set_default(args, f"{side}_layers", 1)
        _set_default(args, f"{side}_embed_dim", 32)
        _set_default(args, f"{side}_ffn_embed_dim", 64)
        _set_default(args, f"{side}_attention_heads", 2)
    _set_default(args, "ct_rank", 8)
    ct_transformer(args)


# The Transformer presets of the ALT recipe (fairseq_ctemp/alt/presets.py PRESETS "mini" and "base", whose
# values are stated here once more; tests/test_ct_transformer.py keeps the two equal).
@register_model_architecture("ct_transformer", "ct_transformer_alt_mini")
def ct_transformer_alt_mini(args):
    """ALT mini: 2+2 layers, 128 hidden, FFN 512, 4 heads, tied decoder embeddings, dropout 0.1;
    Q = 128 (mu = h W1 W2 has rank <= d = 128 anyway: a larger Q only costs time)."""
    for side in ("encoder", "decoder"):
        _set_default(args, f"{side}_layers", 2)
        _set_default(args, f"{side}_embed_dim", 128)
        _set_default(args, f"{side}_ffn_embed_dim", 512)
        _set_default(args, f"{side}_attention_heads", 4)
    _set_default(args, "share_decoder_input_output_embed", True)
    _set_default(args, "dropout", 0.1)
    _set_default(args, "ct_rank", 128)
    ct_transformer(args)


@register_model_architecture("ct_transformer", "ct_transformer_alt_base")
def ct_transformer_alt_base(args):
    """ALT base: Transformer base (6+6 layers, 512 hidden, FFN 2048, 8 heads), tied decoder
    embeddings, dropout, attention and activation dropout 0.1; Q = 280 (the head's default)."""
    _set_default(args, "share_decoder_input_output_embed", True)
    for name in ("dropout", "attention_dropout", "activation_dropout"):
        _set_default(args, name, 0.1)
    ct_transformer(args)
