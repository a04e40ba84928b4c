"""Reusable temperature layers: plain nn.Modules, no fairseq registry code."""
from .contextual_temperature import ContextualTemperature  # noqa: F401
