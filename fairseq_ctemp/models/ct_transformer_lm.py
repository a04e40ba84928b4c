"""``ct_transformer_lm``: fairseq's transformer_lm with a temperature-aware output head.

Everything but the output layer is fairseq's ``transformer_lm`` (same options, adaptive input,
weight tying). The output layer is chosen by --output-head (softmax, mos, adaptive) and divides its
logits by the temperature chosen by --ct-normalization (contextual by default; none, constant).
With --output-head adaptive --ct-normalization none it is the stock adaptive softmax.
"""

import contextlib
from dataclasses import dataclass

from fairseq import utils
from fairseq.models import register_model, register_model_architecture, transformer_lm
from fairseq.models.transformer import TransformerDecoder
from fairseq.models.transformer_lm import TransformerLanguageModel, TransformerLanguageModelConfig
from fairseq.utils import safe_getattr

from ..errors import OptionError
from ..modules.adaptive_softmax_head import check_cutoffs
from ..modules.autocast_adaptive_input import autocast_safe
from .temperature_head import (
    TemperatureHeadConfig,
    TemperatureHeadDecoderMixin,
    build_output_head,
    head_defaults,
)
from .transformer_checks import check_attention_heads


@dataclass
class CTTransformerLanguageModelConfig(TransformerLanguageModelConfig, TemperatureHeadConfig):
    pass


class CTTransformerDecoder(TemperatureHeadDecoderMixin, TransformerDecoder):
    def __init__(self, args, dictionary, embed_tokens, no_encoder_attn=False, output_projection=None):
        # fairseq's adaptive input, made usable under --amp (modules/autocast_adaptive_input.py)
        embed_tokens = autocast_safe(embed_tokens)
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn, output_projection)

    def build_output_projection(self, cfg, dictionary, embed_tokens):
        args = self.args
        adaptive = None
        if args.output_head == "adaptive":
            super().build_output_projection(cfg, dictionary, embed_tokens)  # fairseq's AdaptiveSoftmax
            adaptive, self.adaptive_softmax = self.adaptive_softmax, None  # (its parameters only)
        tied = embed_tokens.weight if args.share_decoder_input_output_embed else None
        self.output_head = build_output_head(
            args,
            self.output_embed_dim,
            len(dictionary),
            tied_weight=tied,
            bias=False,
            adaptive_softmax=adaptive,
        )


@contextlib.contextmanager
def _decoder_class(decoder_class):
    """TransformerLanguageModel.build_model instantiates transformer_lm.TransformerDecoder; swap it
    for ours while it runs so all of fairseq's embedding / adaptive-input logic is reused."""
    stock = transformer_lm.TransformerDecoder
    transformer_lm.TransformerDecoder = decoder_class
    try:
        yield
    finally:
        transformer_lm.TransformerDecoder = stock


# --arch ct_transformer_lm: the config defaults (transformer_lm base, softmax head, contextual temperature)
@register_model("ct_transformer_lm", dataclass=CTTransformerLanguageModelConfig)
class CTTransformerLanguageModel(TransformerLanguageModel):
    has_temperature_head = True  # read by the criteria before the model exists

    @classmethod
    def build_model(cls, args, task):
        check_head_options(args, len(task.target_dictionary))
        check_attention_heads(args, ("decoder",))
        with _decoder_class(CTTransformerDecoder):
            return super().build_model(args, task)


def check_head_options(args, vocab_size):
    """Errors naming the option, before fairseq's asserts (and before any training step)."""
    cutoff = args.adaptive_softmax_cutoff
    if args.output_head == "adaptive":
        if not cutoff:
            raise OptionError("--output-head adaptive needs --adaptive-softmax-cutoff (e.g. 20000,60000)")
        check_cutoffs(utils.eval_str_list(cutoff, type=int), vocab_size)
    elif cutoff:
        raise OptionError(
            f"--adaptive-softmax-cutoff is only used by --output-head adaptive, "
            f"got --output-head {args.output_head}"
        )
    if args.adaptive_input and args.adaptive_input_cutoff:
        check_cutoffs(
            utils.eval_str_list(args.adaptive_input_cutoff, type=int), vocab_size, "--adaptive-input-cutoff"
        )
    if args.tie_adaptive_weights and args.output_head != "adaptive":
        raise OptionError("--tie-adaptive-weights needs --output-head adaptive")
    if args.tie_adaptive_weights:
        check_tied_adaptive(args)
    if args.share_decoder_input_output_embed and args.output_head == "adaptive":
        raise OptionError(
            "--share-decoder-input-output-embed does not apply to --output-head "
            "adaptive; use --tie-adaptive-weights"
        )
    tied_softmax = args.share_decoder_input_output_embed and args.output_head == "softmax"
    if tied_softmax and args.decoder_output_dim != args.decoder_input_dim:
        raise OptionError(
            f"--share-decoder-input-output-embed needs --decoder-output-dim ({args.decoder_output_dim}) "
            f"equal to --decoder-input-dim ({args.decoder_input_dim}, the embedding's)"
        )


def check_tied_adaptive(args):
    """What fairseq's transformer_lm asserts of --tie-adaptive-weights (which the adaptive presets
    set), as errors naming the options: the adaptive input and softmax share their clusters."""
    if not args.adaptive_input:
        raise OptionError("--tie-adaptive-weights needs --adaptive-input")
    for output, embedding in (  # (fairseq compares the cutoffs as they were typed)
        ("adaptive_softmax_cutoff", "adaptive_input_cutoff"),
        ("adaptive_softmax_factor", "adaptive_input_factor"),
        ("decoder_output_dim", "decoder_input_dim"),
    ):
        if getattr(args, output) != getattr(args, embedding):
            raise OptionError(
                f"--{output.replace('_', '-')} {getattr(args, output)} must be the same as "
                f"--{embedding.replace('_', '-')} {getattr(args, embedding)}: --tie-adaptive-weights "
                "(set by the adaptive presets) shares the adaptive input's weights with the softmax"
            )


def _adaptive_defaults(args, cutoff):
    """Adaptive input + adaptive softmax with tied weights, only when the head is adaptive (so
    --output-head softmax/mos works with every preset)."""
    if args.output_head != "adaptive":
        return
    args.adaptive_input = safe_getattr(args, "adaptive_input", True)
    args.tie_adaptive_weights = safe_getattr(args, "tie_adaptive_weights", True)
    args.tie_adaptive_proj = safe_getattr(args, "tie_adaptive_proj", True)
    args.adaptive_input_cutoff = safe_getattr(args, "adaptive_input_cutoff", cutoff)
    args.adaptive_softmax_cutoff = safe_getattr(args, "adaptive_softmax_cutoff", cutoff)


@register_model_architecture("ct_transformer_lm", "ct_transformer_lm_wt103")
def ct_transformer_lm_wt103(args):
    """The ICLR submission's WikiText-103 model: 16 layers, 10 heads, 410 hidden, 2100 FFN,
    adaptive input and adaptive softmax (fairseq's WikiText-103 cutoffs, tying and dropouts), CT."""
    args.decoder_layers = safe_getattr(args, "decoder_layers", 16)
    args.decoder_attention_heads = safe_getattr(args, "decoder_attention_heads", 10)
    args.decoder_embed_dim = safe_getattr(args, "decoder_embed_dim", 410)
    args.decoder_ffn_embed_dim = safe_getattr(args, "decoder_ffn_embed_dim", 2100)
    args.output_head = safe_getattr(args, "output_head", "adaptive")
    _adaptive_defaults(args, "20000,60000")
    args.adaptive_softmax_dropout = safe_getattr(args, "adaptive_softmax_dropout", 0.2)
    args.dropout = safe_getattr(args, "dropout", 0.3)
    args.attention_dropout = safe_getattr(args, "attention_dropout", 0.1)
    args.activation_dropout = safe_getattr(args, "activation_dropout", 0.1)
    args.no_decoder_final_norm = safe_getattr(args, "no_decoder_final_norm", True)
    head_defaults(args)
    transformer_lm.base_lm_architecture(args)


@register_model_architecture("ct_transformer_lm", "ct_transformer_lm_tiny")
def ct_transformer_lm_tiny(args):
    """For tests and quick CPU runs: 2 layers, 64 hidden, adaptive input/softmax (20,60), CT Q=16."""
    args.decoder_layers = safe_getattr(args, "decoder_layers", 2)
    args.decoder_attention_heads = safe_getattr(args, "decoder_attention_heads", 2)
    args.decoder_embed_dim = safe_getattr(args, "decoder_embed_dim", 64)
    args.decoder_ffn_embed_dim = safe_getattr(args, "decoder_ffn_embed_dim", 128)
    args.output_head = safe_getattr(args, "output_head", "adaptive")
    _adaptive_defaults(args, "20,60")
    args.ct_rank = safe_getattr(args, "ct_rank", 16)
    head_defaults(args)
    transformer_lm.base_lm_architecture(args)
