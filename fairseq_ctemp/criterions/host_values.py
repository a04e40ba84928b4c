"""The logged values of a step, on the host in one copy."""

import torch


def host_floats(values):
    """Numbers, and one-element tensors of one device, as floats (exact: via float64); the tensors
    are copied to the host together. A tensor logged as a fairseq meter is updated by kernels in
    each of fairseq's aggregators and read with a host-device synchronisation of its own; one
    converted by float() waits on the device by itself too."""
    tensors = [v for v in values if torch.is_tensor(v)]
    copied = iter(torch.stack([t.reshape(()).double() for t in tensors]).tolist() if tensors else ())
    return [next(copied) if torch.is_tensor(v) else float(v) for v in values]
