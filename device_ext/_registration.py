"""Makes ``mydev`` a PyTorch device: the PrivateUse1 rename, ``torch.mydev``,
and the generated ``Tensor.mydev()`` / ``Module.mydev()`` / storage methods.
The C++ side (guard, hooks, allocators, kernels) registered itself when
``device_ext._C`` was loaded."""

import torch

from . import mydev as mydev_module
from .device_name import DEVICE_NAME


def register() -> None:
    if torch._C._get_privateuse1_backend_name() == DEVICE_NAME:
        return
    torch.utils.rename_privateuse1_backend(DEVICE_NAME)
    torch._register_device_module(DEVICE_NAME, mydev_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
