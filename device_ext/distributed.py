"""The ``myccl`` c10d backend for mydev tensors.

Registered the moment ``torch.distributed.distributed_c10d`` is executed (see
``_compile_integration``'s import hook), never by importing it ourselves, so
``import torch`` pays nothing for it. After registration::

    dist.init_process_group("mydev:myccl,cpu:gloo")  # mydev via myccl, CPU via gloo
    dist.init_process_group(backend="myccl")          # mydev tensors only
    dist.init_process_group()                         # = "cpu:gloo,mydev:myccl"

The backend itself is C++ (``csrc/distributed/``): shared memory between the
processes of one host, collectives in stream order on a communication stream.

torch 2.13's default-backend-type quirks are handled here, in
``_fix_default_backend`` (and only there):

* with ``"mydev:myccl,cpu:gloo"`` ``_new_process_group_helper`` looks the
  first plugin up by its upper-case key (``"MYCCL"``) among the lower-case
  backend names, misses it, and leaves the default backend type undefined
  (every later query of the group's backend name then warns again);
* with no backend at all it maps only the accelerator (mydev -> myccl), so
  CPU tensors have no backend, and it names GLOO as the default type
  although no gloo backend exists (it only special-cases NCCL). Here the
  spec becomes ``"mydev:myccl,cpu:gloo"``.

In every case the group gets CUSTOM (myccl) as its default type, as NCCL
would be for CUDA.

A group destroyed and created again on the same rendezvous address could
lose its store server or read its predecessor's keys; ``_fresh_keys`` keeps
the store and gives every incarnation of a myccl group keys of its own.
"""

import atexit
from collections import Counter
from types import ModuleType
from typing import Any, Dict

BACKEND_NAME = "myccl"
_registered = False


def _create_backend(dist_backend_opts: Any, backend_options: Any = None) -> Any:
    from ._myccl_transport import create_backend

    return create_backend(dist_backend_opts, backend_options)


def _uses_myccl(backend: Any) -> bool:
    """Whether a group created with ``backend`` puts mydev tensors on myccl."""
    from torch.distributed.distributed_c10d import BackendConfig

    try:
        device_map = BackendConfig(backend).get_device_backend_map()
    except Exception:  # an invalid spec fails in torch's own code path
        return False
    return device_map.get("mydev") == BACKEND_NAME


def _fix_default_backend(pg: Any, backend: Any) -> None:
    from torch._C._distributed_c10d import ProcessGroup

    if not isinstance(pg, ProcessGroup) or not _uses_myccl(backend):
        return
    # ProcessGroup has no getter for the default type; setting CUSTOM again
    # for backend="myccl" (where torch already did) is harmless.
    pg._set_default_backend(ProcessGroup.BackendType.CUSTOM)


def _default_spec(backend: Any) -> Any:
    """``init_process_group()`` without a backend: torch 2.13 maps only the
    accelerator (mydev -> myccl); add gloo for CPU tensors, as the
    ``"mydev:myccl,cpu:gloo"`` form does."""
    import torch
    from torch.distributed.distributed_c10d import Backend

    if str(backend) == Backend.UNDEFINED and torch._C._get_accelerator().type == "mydev":
        return Backend(f"mydev:{BACKEND_NAME},cpu:gloo")
    return backend


# A group destroyed and created again on the same rendezvous address meets
# two torch behaviours. The TCPStore server lives in rank 0's process, shared
# by every store on its port, and shuts down when the last of them goes: if
# it did so between the incarnations, a faster peer already connected for
# the next one would lose its connection. And while it lives, the keys stay:
# the group, which gets the same name again, would read its predecessor's
# (gloo connects to a closed port, myccl opens a shared segment that is
# gone). So every group's store is kept, and each incarnation gets a prefix
# of its own. Every rank creates its groups in the same order, so the count
# is equal on all of them.
_incarnations: Counter = Counter()
_kept_stores: Dict[str, Any] = {}


def _fresh_keys(store: Any, group_name: str) -> Any:
    """``store`` under a prefix of its own for this incarnation of the group."""
    from torch.distributed import PrefixStore

    _kept_stores[group_name] = store
    _incarnations[group_name] += 1
    return PrefixStore(f"incarnation{_incarnations[group_name]}", store)


def _wrap_new_process_group_helper(c10d: ModuleType) -> None:
    from ._myccl_transport import fill_gloo_global_ranks

    original = c10d._new_process_group_helper
    if getattr(original, "_myccl_wrapped", False):
        return

    def _new_process_group_helper(group_size, group_rank, global_ranks_in_group, backend,
                                  store, group_name, *args, **kwargs):
        backend = _default_spec(backend)
        if _uses_myccl(backend):
            store = _fresh_keys(store, group_name)
        result = original(group_size, group_rank, global_ranks_in_group, backend,
                          store, group_name, *args, **kwargs)
        pg = result[0] if isinstance(result, tuple) else result
        _fix_default_backend(pg, backend)
        fill_gloo_global_ranks(pg, global_ranks_in_group, group_size)
        return result

    _new_process_group_helper._myccl_wrapped = True  # type: ignore[attr-defined]
    _new_process_group_helper.__wrapped__ = original  # type: ignore[attr-defined]
    c10d._new_process_group_helper = _new_process_group_helper


def register(c10d: ModuleType) -> None:
    """Registers myccl with ``torch.distributed`` (idempotent)."""
    from . import _C

    global _registered
    if _registered:
        return
    Backend = c10d.Backend
    if BACKEND_NAME.upper() not in Backend._plugins:
        Backend.register_backend(
            BACKEND_NAME, _create_backend, extended_api=True, devices=["mydev"]
        )
    _wrap_new_process_group_helper(c10d)
    # Before finalization: the watcher threads must stop releasing tensors.
    atexit.register(_C._myccl_python_is_exiting)
    _registered = True
