"""Autograd's device threads at exit (torch.autograd), torch 2.13: an abort
at exit after a backward pass on mydev.

Autograd runs backward passes on a device thread per mydev device. Since 2.13,
``torch.autograd.graph._engine_run_backward`` stashes a ``contextvars``
context in thread-local state, which the engine's graph task captures. The
device thread drops its finished graph task just after ``backward()``
returned to the caller; dropping it decrefs that Python object, which needs
the GIL. If the script ends in that window, CPython is finalizing and ends the
thread by a forced unwind through a noexcept C++ frame:
"terminate called without an active exception", exit code 134. CPU backward
runs on the caller's thread and never hits this; any device backend with
device threads does.

At exit we run one tiny backward pass on each mydev device through the
engine directly, without the stash. A device thread releases its previous
graph task before it takes the next one, so when this barrier returns every
earlier graph task is gone, and the barrier's own task holds no Python
object. Remove this module when torch no longer stashes per-backward state.
tests/test_autograd_optim.py::test_process_exits_cleanly_right_after_backward
reproduces the abort without it; see the
table in ``device_ext/torch_patches/__init__.py``. Applied when
``device_ext`` is imported.

The barrier's tensors have no elements, so it allocates no device memory: it
works with the device full.
"""

import atexit
import os

import torch

from ..device_name import DEVICE_NAME


def _autograd_device_threads_started() -> bool:
    """Whether a backward pass ever started autograd's device threads (named
    pt_autograd_<device>). Only those can hold a graph task; starting them
    at exit would drain nothing, and starting threads while CPython
    finalizes loses its record of an uncaught KeyboardInterrupt (the exit
    status becomes 1 instead of the SIGINT status)."""
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith("pt_autograd_"):
                    return True
        except OSError:  # the thread ended meanwhile
            continue
    return False


def _drain_device_threads() -> None:
    if not torch.mydev.is_initialized() or not _autograd_device_threads_started():
        return
    for index in range(torch.mydev.device_count()):
        leaf = torch.empty((0,), device=f"{DEVICE_NAME}:{index}", requires_grad=True)
        output = leaf * 1
        torch.autograd.Variable._execution_engine.run_backward(
            (output,), (torch.ones_like(output),), False, False, (), True, True
        )


def apply() -> None:
    atexit.register(_drain_device_threads)
