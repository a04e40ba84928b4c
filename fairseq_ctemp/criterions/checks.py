"""Option checks of the plugin's criteria that need the model's options too. They run when fairseq
builds the criterion, before any training step: fairseq answers an error inside a step by writing
crash.pt into the save directory, and a degenerate temperature trains silently to ``ppl inf``."""

import argparse
import math

from ..errors import OptionError

# The range of a fixed softmax temperature (tempered_ce's T, --ct-constant). Model logits are of
# order 1 at initialisation: far below it softmax(logits / T) is one-hot in float32 (perplexity
# inf, loss gradients of nothing but the argmax), far above it uniform (nothing is learnt).
# The ALT sweep checks its --temperatures against it too (fairseq_ctemp/alt/sweep_checks.py).
TEMPERATURE_RANGE = (0.01, 100.0)


def check_temperature(option, value):
    if not (math.isfinite(value) and value > 0):
        raise OptionError(f"{option} must be a finite number > 0, got {value}")
    low, high = TEMPERATURE_RANGE
    if not low <= value <= high:
        raise OptionError(
            f"{option} must be in [{low:g}, {high:g}], got {value:g}: outside it the "
            "tempered softmax is degenerate in float32 (one-hot below: perplexity inf; "
            "uniform above: nothing is learnt)"
        )


def model_options(criterion_cfg):
    """The model options of the training run a criterion config belongs to (hydra keeps the
    criterion section attached to the whole config; argparse-era configs are flat), or None."""
    if isinstance(criterion_cfg, argparse.Namespace):
        return criterion_cfg
    parent = criterion_cfg._get_parent() if hasattr(criterion_cfg, "_get_parent") else None
    return parent.get("model") if parent is not None and "model" in parent else None


def option(options, name, default=None):
    return getattr(options, name, default) if options is not None else default


def builds_temperature_head(model_options):
    """Whether the run's --arch builds a model with a temperature head (its class says so with
    ``has_temperature_head``), or None when the architecture is unknown here."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    arch = option(model_options, "arch") or option(model_options, "_name")
    model_class = ARCH_MODEL_REGISTRY.get(arch)
    return None if model_class is None else bool(getattr(model_class, "has_temperature_head", False))


# fairseq's LSTMs build their adaptive softmax only under --criterion adaptive_loss: their default
# --adaptive-softmax-cutoff means nothing under any other criterion.
ADAPTIVE_ONLY_WITH_ADAPTIVE_LOSS = ("fairseq.models.lstm", "fairseq.models.lstm_lm")


def builds_adaptive_softmax(model_options):
    """Whether the run's model gets an adaptive softmax output layer (under a criterion other than
    adaptive_loss): its --adaptive-softmax-cutoff is set and its architecture uses it."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    if not option(model_options, "adaptive_softmax_cutoff"):
        return False
    model_class = ARCH_MODEL_REGISTRY.get(option(model_options, "arch") or option(model_options, "_name"))
    return model_class is None or model_class.__module__ not in ADAPTIVE_ONLY_WITH_ADAPTIVE_LOSS


def projects_with_one_linear_layer(model_options):
    """Whether the run's --arch is of fairseq's transformer or transformer_lm family (or derived
    from one): their decoders end in one linear projection, decoder.output_projection."""
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.models.transformer import TransformerModelBase
    from fairseq.models.transformer_lm import TransformerLanguageModel

    model_class = ARCH_MODEL_REGISTRY.get(option(model_options, "arch") or option(model_options, "_name"))
    return model_class is not None and issubclass(
        model_class, (TransformerModelBase, TransformerLanguageModel)
    )
