"""The Triton target of a mydev device, shared by the compiler and the driver."""

import torch
from triton.backends.compiler import GPUTarget

from ..device_name import DEVICE_NAME

# Triton names backends and targets by the device.
BACKEND_NAME = DEVICE_NAME


def target_of(device: int) -> GPUTarget:
    properties = torch.mydev.get_device_properties(device)
    return GPUTarget(
        BACKEND_NAME,
        properties.major * 10 + properties.minor,
        # Inductor reads the same property: eager launches and compiled
        # kernels share one target.
        properties.warp_size,
    )
