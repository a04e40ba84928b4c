"""What our language models share: the output-head options, building a head from them, and a decoder
mixin whose ``get_normalized_probs`` is the head's normalised distribution.

Decoders using the mixin return the features h_t (not logits) in ``net_output[0]``, like fairseq's
adaptive-softmax models; every consumer goes through ``get_normalized_probs`` (criteria,
fairseq-eval-lm, fairseq-generate/interactive) or through the head itself (``ct_cross_entropy``).
"""

import argparse
import dataclasses
import functools
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.utils import safe_getattr

from ..errors import OptionError
from ..modules import AdaptiveSoftmaxHead, ContextualTemperature, MixtureOfSoftmaxesHead, TemperedSoftmaxHead
from ..modules.contextual_temperature import NORMALIZATIONS

OUTPUT_HEADS = ["softmax", "mos", "adaptive"]
CT_NORMALIZATIONS = ["none", *NORMALIZATIONS]  # none: no temperature head (tau = 1)


@dataclass
class TemperatureHeadConfig(FairseqDataclass):
    output_head: ChoiceEnum(OUTPUT_HEADS) = field(
        default="softmax",
        metadata={
            "help": "output layer: softmax, mos (Mixture of Softmaxes) or "
            "adaptive (needs --adaptive-softmax-cutoff)"
        },
    )
    mos_components: int = field(default=15, metadata={"help": "number of softmaxes M (--output-head mos)"})
    mos_latent_dropout: float = field(
        default=0.0,
        metadata={
            "help": "locked dropout (one mask per sequence) on the MoS latent, as the MoS reference's dropoutl"
        },
    )
    ct_normalization: ChoiceEnum(CT_NORMALIZATIONS) = field(
        default="softmax",
        metadata={
            "help": "temperature: none (tau = 1), softmax: (softmax(mu) + "
            "alpha)/beta, lambda_tanh: lambda^tanh(mu), "
            "tanh_plus_lambda: tanh(mu) + lambda, constant"
        },
    )
    ct_rank: int = field(default=280, metadata={"help": "rank Q of mu = h W1 W2"})
    ct_alpha: float = field(default=1.0, metadata={"help": "alpha >= 0 of the softmax normalisation"})
    ct_beta: float = field(default=0.5, metadata={"help": "beta > 0 of the softmax normalisation"})
    ct_learn_alpha_beta: bool = field(
        default=False, metadata={"help": "learn alpha and beta (kept > 0 by softplus)"}
    )
    ct_lambda: float = field(
        default=2.0,
        metadata={
            "help": "lambda > 1 of lambda_tanh / tanh_plus_lambda (the AAAI paper's ablation used 4 for "
            "lambda_tanh and 3 for tanh_plus_lambda)"
        },
    )
    ct_constant: float = field(default=1.0, metadata={"help": "tau of --ct-normalization constant"})


def dataclass_defaults(args, config_class):
    """Fill every option of ``config_class`` missing from ``args`` with its dataclass default: the
    one place each default is written (architecture functions set only what differs)."""
    for field_ in dataclasses.fields(config_class):
        if not field_.name.startswith("_") and field_.default is not dataclasses.MISSING:
            setattr(args, field_.name, safe_getattr(args, field_.name, field_.default))


def head_defaults(args):
    """Architecture-function defaults for the head options (fairseq fills arch defaults first)."""
    dataclass_defaults(args, TemperatureHeadConfig)


# The --ct-* options that only some normalisations read: (option, its field, those normalisations).
# No architecture sets them, so a value other than the field's default was given by the user.
MODE_OPTIONS = (
    ("--ct-lambda", "ct_lambda", ("lambda_tanh", "tanh_plus_lambda")),
    ("--ct-constant", "ct_constant", ("constant",)),
    ("--ct-alpha", "ct_alpha", ("softmax",)),
    ("--ct-beta", "ct_beta", ("softmax",)),
    ("--ct-learn-alpha-beta", "ct_learn_alpha_beta", ("softmax",)),
)


def unused_option(option, value, decider, readers, current):
    """The error for a head option that the head's ``decider`` (output_head or ct_normalization)
    value ``current`` does not read."""
    return OptionError(
        f"{option} {value} is only used with --{decider.replace('_', '-')} {' or '.join(readers)}, not {current}"
    )


def refuse_unused_head_options(args):
    """A --ct-* option set for a normalisation that ignores it is an error, not silently dropped
    (as SACT refuses its own unused options)."""
    defaults = {f.name: f.default for f in dataclasses.fields(TemperatureHeadConfig)}
    mode = str(args.ct_normalization)
    for option, name, modes in MODE_OPTIONS:
        value = safe_getattr(args, name, defaults[name])
        if mode not in modes and value != defaults[name]:
            raise unused_option(option, value, "ct_normalization", modes, mode)


# Every head option that only some heads read: (option, its field, what decides, the values that read
# it). MODE_OPTIONS are refused by value at build time too; the others have architecture defaults,
# so only the parser tells a given one apart.
HEAD_READERS = (
    ("--mos-components", "mos_components", "output_head", ("mos",)),
    ("--mos-latent-dropout", "mos_latent_dropout", "output_head", ("mos",)),
    (
        "--ct-rank",
        "ct_rank",
        "ct_normalization",
        tuple(n for n, norm in NORMALIZATIONS.items() if norm.uses_mu),
    ),
    *((option, name, "ct_normalization", modes) for option, name, modes in MODE_OPTIONS),
)


def refusing_options_the_head_ignores(arch_fn, config_class):
    """``arch_fn`` (an architecture function of ours) refusing a head option given for a head that
    does not read it (HEAD_READERS). When fairseq-train's parser calls it, the namespace holds only
    the model options the user gave (the parser has no model defaults); a namespace that already
    holds every head option (a model config being built or loaded), or a DictConfig, is not checked."""
    head_fields = [f.name for f in dataclasses.fields(TemperatureHeadConfig) if not f.name.startswith("_")]
    defaults = {f.name: f.default for f in dataclasses.fields(config_class) if f.name in head_fields}

    @functools.wraps(arch_fn)
    def arch(args):
        given = set(vars(args)) if isinstance(args, argparse.Namespace) else set(head_fields)
        arch_fn(args)
        if given.issuperset(head_fields):
            return
        for option, name, decider, readers in HEAD_READERS:
            current = str(safe_getattr(args, decider, defaults[decider]))
            if name in given and current not in readers:
                raise unused_option(option, getattr(args, name), decider, readers, current)

    return arch


def build_temperature(args, input_dim, entries):
    """A ContextualTemperature from the --ct-* options, or None for --ct-normalization none.
    Bad options raise a ValueError naming the option (at model build, before any step)."""
    refuse_unused_head_options(args)
    if args.ct_normalization == "none":
        return None
    return ContextualTemperature(
        input_dim,
        entries,
        rank=args.ct_rank,
        normalization=args.ct_normalization,
        alpha=args.ct_alpha,
        beta=args.ct_beta,
        learn_alpha_beta=args.ct_learn_alpha_beta,
        lam=args.ct_lambda,
        constant=args.ct_constant,
    )


def build_output_head(args, input_dim, vocab_size, tied_weight=None, bias=True, adaptive_softmax=None):
    if args.output_head not in OUTPUT_HEADS:
        raise OptionError(f"--output-head must be one of {', '.join(OUTPUT_HEADS)}, got {args.output_head!r}")
    if args.output_head == "adaptive":
        entries = vocab_size + len(adaptive_softmax.cutoff) - 1  # V words + the clusters' head entries
        return AdaptiveSoftmaxHead(adaptive_softmax, build_temperature(args, input_dim, entries))
    temperature = build_temperature(args, input_dim, vocab_size)
    if args.output_head == "mos":
        latent_dim = tied_weight.size(1) if tied_weight is not None else input_dim
        head = MixtureOfSoftmaxesHead(
            input_dim,
            vocab_size,
            args.mos_components,
            latent_dim,
            temperature,
            bias=bias,
            latent_dropout=args.mos_latent_dropout,
        )
    else:
        if tied_weight is not None and tied_weight.size(1) != input_dim:
            raise OptionError(
                f"tied input/output embeddings need the output dimension ({input_dim}) "
                f"to equal the embedding dimension ({tied_weight.size(1)})"
            )
        head = TemperedSoftmaxHead(input_dim, vocab_size, temperature, bias=bias)
    if tied_weight is not None:
        head.output.weight = tied_weight
    return head


class TemperatureHeadDecoderMixin:
    """For decoders with ``self.output_head``: features out, the head's distribution in
    ``get_normalized_probs`` (an explicit decoding temperature is applied to that distribution by
    ``fairseq_ctemp.decoding``)."""

    def output_layer(self, features, **kwargs):
        return features

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        lprobs, _ = self.output_head(net_output[0])
        return lprobs if log_probs else lprobs.exp()

    def upgrade_state_dict_named(self, state_dict, name):
        """fairseq's transformer decoder copies a tied input embedding to ``output_projection.weight``
        when a state dict has none; these decoders have no such layer (the key would make every
        strict load, hence every resume and decoding, fail)."""
        key = f"{name}.output_projection.weight"
        had = key in state_dict
        state_dict = super().upgrade_state_dict_named(state_dict, name)
        if not had:
            state_dict.pop(key, None)
        return state_dict
