"""At exit, prints a kernel failure that happened but that no synchronizing
call reported, instead of dropping it silently (CUDA would leave it to the
next call that never comes). Only failures that already happened: exit does
not wait for queued work, so it stays quick."""

import atexit
import sys

import torch

from . import _C
from .device_name import DEVICE_NAME


def _report_unreported_kernel_failures() -> None:
    if not torch.mydev.is_initialized():
        return
    for index in range(torch.mydev.device_count()):
        message = _C._take_pending_kernel_failure(index)
        if message is not None:
            print(
                f"{DEVICE_NAME}: a kernel failure on {DEVICE_NAME}:{index} was not reported by any "
                f"synchronizing call before exit: {message}",
                file=sys.stderr,
            )


def install() -> None:
    atexit.register(_report_unreported_kernel_failures)
