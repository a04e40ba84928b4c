"""Reusable temperature layers: plain nn.Modules, no fairseq registry code."""

from .adaptive_softmax_head import AdaptiveSoftmaxHead  # noqa: F401
from .contextual_temperature import ContextualTemperature  # noqa: F401
from .sact_attention import SactAttention  # noqa: F401
from .temperature_heads import MixtureOfSoftmaxesHead, TauStats, TemperedSoftmaxHead  # noqa: F401
