"""The Triton target of a mydev device, shared by the compiler and the driver."""

import torch
from triton.backends.compiler import GPUTarget

BACKEND_NAME = "mydev"

# Inductor reads ``warp_size`` from the device properties and falls back to
# 32; the same rule here keeps eager launches and Inductor on one target.
_DEFAULT_WARP_SIZE = 32


def target_of(device: int) -> GPUTarget:
    properties = torch.mydev.get_device_properties(device)
    return GPUTarget(
        BACKEND_NAME,
        properties.major * 10 + properties.minor,
        getattr(properties, "warp_size", _DEFAULT_WARP_SIZE),
    )
