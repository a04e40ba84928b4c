"""Reusable temperature layers: plain nn.Modules, no fairseq registry code."""
from .contextual_temperature import ContextualTemperature  # noqa: F401
from .temperature_heads import MixtureOfSoftmaxesHead, TemperedSoftmaxHead  # noqa: F401
