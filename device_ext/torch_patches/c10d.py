"""torch.distributed's process-group creation (``distributed_c10d``), torch
2.13: ``_new_process_group_helper`` is wrapped so that groups that put mydev
tensors on myccl get what NCCL gets for CUDA. See the table in
``device_ext/torch_patches/__init__.py``.

* Default backend type. With ``"mydev:myccl,cpu:gloo"`` the helper looks the
  first plugin up by its upper-case key (``"MYCCL"``) among the lower-case
  backend names, misses it, and leaves the default backend type undefined
  (every later query of the group's backend name then warns again). With no
  backend at all it maps only the accelerator (mydev -> myccl), so CPU
  tensors have no backend, and it names GLOO as the default type although no
  gloo backend exists (it only special-cases NCCL); here the spec becomes
  ``"mydev:myccl,cpu:gloo"``. In every case the group gets CUSTOM (myccl) as
  its default type. tests/test_distributed.py::
  test_myccl_only_then_default_backend_reinit and
  test_collectives_mixed_backend_two_ranks.
* Store keys per incarnation. A group destroyed and created again on the
  same rendezvous address meets two torch behaviours. The TCPStore server
  lives in rank 0's process, shared by every store on its port, and shuts
  down when the last of them goes: if it did so between the incarnations, a
  faster peer already connected for the next one would lose its connection.
  And while it lives, the keys stay: the group, which gets the same name
  again, would read its predecessor's (gloo connects to a closed port, myccl
  opens a shared segment that is gone). So every group's store is kept, and
  each incarnation gets a prefix of its own. Every rank creates its groups in
  the same order, so the count is equal on all of them.
  tests/test_distributed_training.py::
  test_destroy_and_recreate_process_group_three_times.
* Gloo's global ranks. ``init_process_group`` leaves the default group's
  ``global_ranks_in_group`` empty; ``ProcessGroupGloo.split()`` looks ranks up
  in them and takes "empty" to mean all ranks only in the first gloo backend
  the process created. With myccl's gloo transport, myccl's own gloo backend
  comes first (``"mydev:myccl,cpu:gloo"`` creates mydev's backend first), so
  splitting the CPU one (a 2-D DeviceMesh) would read past an empty list and
  crash; the CPU gloo backends get the full list.
  tests/test_distributed_host_path.py::test_split_two_dim_mesh_over_gloo.

Applied by ``device_ext.distributed.register`` once torch.distributed's c10d
module has been imported.
"""

from collections import Counter
from types import ModuleType
from typing import Any, Dict

from ..device_name import DEVICE_NAME


def _uses_backend(backend: Any, backend_name: str) -> bool:
    """Whether a group created with ``backend`` puts mydev tensors on
    ``backend_name``."""
    from torch.distributed.distributed_c10d import BackendConfig

    try:
        device_map = BackendConfig(backend).get_device_backend_map()
    except Exception:  # an invalid spec fails in torch's own code path
        return False
    return device_map.get(DEVICE_NAME) == backend_name


def _set_custom_default_backend(pg: Any) -> None:
    from torch._C._distributed_c10d import ProcessGroup

    if isinstance(pg, ProcessGroup):
        # ProcessGroup has no getter for the default type; setting CUSTOM
        # again where torch already did (backend="myccl") is harmless.
        pg._set_default_backend(ProcessGroup.BackendType.CUSTOM)


def _default_spec(backend: Any, backend_name: str) -> Any:
    """``init_process_group()`` without a backend: torch 2.13 maps only the
    accelerator; add gloo for CPU tensors."""
    import torch
    from torch.distributed.distributed_c10d import Backend

    if str(backend) == Backend.UNDEFINED and torch._C._get_accelerator().type == DEVICE_NAME:
        return Backend(f"{DEVICE_NAME}:{backend_name},cpu:gloo")
    return backend


_incarnations: Counter = Counter()
_kept_stores: Dict[str, Any] = {}


def _fresh_keys(store: Any, group_name: str) -> Any:
    """``store`` under a prefix of its own for this incarnation of the group."""
    from torch.distributed import PrefixStore

    _kept_stores[group_name] = store
    _incarnations[group_name] += 1
    return PrefixStore(f"incarnation{_incarnations[group_name]}", store)


def _fill_gloo_global_ranks(pg: Any, global_ranks_in_group: Any, group_size: int) -> None:
    from torch.distributed import ProcessGroupGloo

    if global_ranks_in_group or not hasattr(pg, "_device_types"):
        return
    for device in pg._device_types:
        backend = pg._get_backend(device)
        if isinstance(backend, ProcessGroupGloo) and not backend.options.global_ranks_in_group:
            backend.options.global_ranks_in_group = list(range(group_size))


def apply(c10d: ModuleType, backend_name: str) -> None:
    """Wraps ``c10d._new_process_group_helper`` (idempotent) for the c10d
    backend ``backend_name`` of mydev tensors."""
    original = c10d._new_process_group_helper
    # (torch's own decorators give the original a __wrapped__ too.)
    if original.__module__ == __name__:
        return

    def _new_process_group_helper(
        group_size, group_rank, global_ranks_in_group, backend, store, group_name, *args, **kwargs
    ):
        backend = _default_spec(backend, backend_name)
        uses_mydev_backend = _uses_backend(backend, backend_name)
        if uses_mydev_backend:
            store = _fresh_keys(store, group_name)
        result = original(group_size, group_rank, global_ranks_in_group, backend, store, group_name, *args, **kwargs)
        pg = result[0] if isinstance(result, tuple) else result
        if uses_mydev_backend:
            _set_custom_default_backend(pg)
        _fill_gloo_global_ranks(pg, global_ranks_in_group, group_size)
        return result

    _new_process_group_helper.__wrapped__ = original  # type: ignore[attr-defined]
    c10d._new_process_group_helper = _new_process_group_helper
