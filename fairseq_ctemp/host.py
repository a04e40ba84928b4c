"""The machine a measurement ran on, for result files: numbers of the same run differ between CPU
models (the order of floating-point operations, the kernels chosen), so every result names its own."""

import platform


def cpu_model():
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows of it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_capability():
    """The vector instruction set of torch's CPU kernels (AVX2, AVX512, ...; ATEN_CPU_CAPABILITY
    selects a lower one): on one CPU model, runs under two of them give other digits."""
    import torch

    return torch.backends.cpu.get_cpu_capability()
