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


def machine():
    """One line for run records: the CPU model with the instruction set of torch's kernels, and the
    GPU where torch sees one ("AMD EPYC 9B14 (AVX512)", "... (AVX512); NVIDIA H200")."""
    import torch

    text = f"{cpu_model()} ({cpu_capability()})"
    if torch.cuda.is_available():
        text += f"; {torch.cuda.get_device_name(0)}"
    return text


if __name__ == "__main__":  # for the shell recipes (examples/language_model/train.sh)
    try:
        print(machine())
    except ImportError:  # their fallback python3 may lack torch: the record must not stop a run
        print(f"{cpu_model()} (torch's kernels not known)")
