"""The ``myccl`` c10d backend for mydev tensors.

Registered the moment ``torch.distributed.distributed_c10d`` is executed (see
``import_hooks``), never by importing it ourselves, so ``import torch`` pays
nothing for it. After registration::

    dist.init_process_group("mydev:myccl,cpu:gloo")  # mydev via myccl, CPU via gloo
    dist.init_process_group(backend="myccl")          # mydev tensors only
    dist.init_process_group()                         # = "cpu:gloo,mydev:myccl"

The backend itself is C++ (``csrc/distributed/``): shared memory between the
processes of one host, gloo's TCP transport across hosts (``_myccl_transport``
picks one), collectives in stream order on a communication stream.
torch 2.13's process-group creation needs adjusting for a PrivateUse1 c10d
backend (default backend type, store keys, gloo's global ranks):
``torch_patches/c10d.py`` does that.
"""

import atexit
from types import ModuleType
from typing import Any

from .device_name import DEVICE_NAME

BACKEND_NAME = "myccl"
_registered = False


def _create_backend(dist_backend_opts: Any, backend_options: Any = None) -> Any:
    from ._myccl_transport import create_backend

    return create_backend(dist_backend_opts, backend_options)


def register(c10d: ModuleType) -> None:
    """Registers myccl with ``torch.distributed`` (idempotent)."""
    from . import _C
    from .torch_patches import c10d as c10d_patches

    global _registered
    if _registered:
        return
    Backend = c10d.Backend
    if BACKEND_NAME.upper() not in Backend._plugins:
        Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=[DEVICE_NAME])
    c10d_patches.apply(c10d, BACKEND_NAME)
    # Before finalization: the watcher threads must stop releasing tensors.
    atexit.register(_C._myccl_python_is_exiting)
    _registered = True
