"""Which transport a myccl process group uses.

``MYCCL_TRANSPORT``:

* ``auto`` (default): every rank publishes its host identity (hostname and
  kernel boot id) in the group's store. All equal: shared memory
  (``ShmTransportBackend``). Otherwise every rank of the group uses gloo's TCP
  transport, including ranks that share a host with others: one transport per
  group keeps every rank's collectives in step.
* ``shm``: shared memory; every rank must be on one host.
* ``gloo``: gloo's TCP transport on host views of device memory
  (``GlooTransportBackend``), also on one host (tests, benchmarks).

Every rank of a group must use the same value.
"""

import os
import socket
from datetime import timedelta
from typing import Any

TRANSPORT_ENV = "MYCCL_TRANSPORT"
TRANSPORTS = ("auto", "shm", "gloo")
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def requested_transport() -> str:
    value = os.environ.get(TRANSPORT_ENV, "auto")
    if value.strip().lower() not in TRANSPORTS:
        raise ValueError(f"{TRANSPORT_ENV}={value!r} is not a myccl transport; use one of {', '.join(TRANSPORTS)}")
    return value.strip().lower()


def host_identity() -> str:
    """Equal for two processes exactly when they share a running kernel:
    a hostname alone repeats across containers and cloned machines."""
    try:
        with open(_BOOT_ID) as f:
            boot_id = f.read().strip()
    except OSError:
        boot_id = "no-boot-id"
    return f"{socket.gethostname()}/{boot_id}"


def _all_on_one_host(store: Any, rank: int, size: int) -> bool:
    # Blocks up to the store's timeout for a rank that never comes.
    store.set(f"myccl/host_identity/{rank}", host_identity())
    identities = {store.get(f"myccl/host_identity/{r}") for r in range(size)}
    return len(identities) == 1


def create_backend(dist_backend_opts: Any, backend_options: Any = None) -> Any:
    """The myccl C++ backend of one process group, over the transport that
    ``MYCCL_TRANSPORT`` and the ranks' hosts select."""
    import torch.distributed as dist

    from . import _C

    transport = requested_transport()
    store = dist_backend_opts.store
    rank = dist_backend_opts.group_rank
    size = dist_backend_opts.group_size
    timeout = dist_backend_opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    if transport == "auto":
        transport = "shm" if _all_on_one_host(store, rank, size) else "gloo"
    if transport == "shm":
        return _C.ShmTransportBackend(store, rank, size, timeout)
    # Gloo's keys apart from the shared-memory and host-identity ones.
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("myccl_gloo/", store), rank, size, timeout)
    return _C.GlooTransportBackend(gloo, timeout)
