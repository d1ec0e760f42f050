"""Makes ``mydev`` a PyTorch device: the PrivateUse1 rename, ``torch.mydev``,
and the generated ``Tensor.mydev()`` / ``Module.mydev()`` / storage methods.
The C++ side (the device name, guard, hooks, allocators, kernels) registered
itself when libtorch_mydev.so was loaded (device_ext._C links it)."""

import torch

from . import mydev as mydev_module
from .device_name import DEVICE_NAME


def register() -> None:
    # The name alone does not tell: the library registers it when loaded.
    if getattr(torch, DEVICE_NAME, None) is mydev_module:
        return
    # Registered already by the library; again here for torch's Python side
    # (c10 accepts the same name twice).
    torch.utils.rename_privateuse1_backend(DEVICE_NAME)
    torch._register_device_module(DEVICE_NAME, mydev_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
