"""Models registered with fairseq: every module in this folder is imported (and so registered)."""

import importlib
import os

from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

from .temperature_head import TemperatureHeadConfig, refusing_options_the_head_ignores

for _file in sorted(os.listdir(os.path.dirname(__file__))):
    if _file.endswith(".py") and not _file.startswith("_"):
        importlib.import_module(f"{__name__}.{_file[:-3]}")

# Every architecture of a model with a temperature head, fairseq's own no-op one of a config-driven
# model included, refuses head options its head does not read (fairseq-train's parser calls it).
for _arch, _model in ARCH_MODEL_REGISTRY.items():
    if getattr(_model, "has_temperature_head", False):
        _config = getattr(_model, "__dataclass", None) or TemperatureHeadConfig
        ARCH_CONFIG_REGISTRY[_arch] = refusing_options_the_head_ignores(ARCH_CONFIG_REGISTRY[_arch], _config)
