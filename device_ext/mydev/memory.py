"""Memory statistics and cache control of the mydev caching allocator."""

from typing import Any, Dict, Tuple, Union

import torch

from .. import _C
from ._device import _get_device_index, _lazy_init

_DeviceLike = Union[torch.device, str, int, None]


def _flatten(prefix: str, value: Any, out: Dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, inner, out)
    else:
        out[prefix] = value


def memory_stats(device: _DeviceLike = None) -> Dict[str, Any]:
    """Allocator statistics with torch.cuda.memory_stats' keys, e.g.
    ``allocated_bytes.all.current``."""
    _lazy_init()
    flat: Dict[str, Any] = {}
    _flatten("", _C._memory_stats(_get_device_index(device)), flat)
    return dict(sorted(flat.items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _lazy_init()
    _C._reset_peak_memory_stats(_get_device_index(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    _lazy_init()
    _C._reset_accumulated_memory_stats(_get_device_index(device))


def empty_cache() -> None:
    """Returns cached, unused device memory to the driver (after waiting for
    the device, as cudaFree does), shared memory other processes released
    included."""
    _lazy_init()
    _C._ipc_collect()
    _C._empty_cache()


def ipc_collect() -> int:
    """Frees the device memory this process sent to other processes and
    freed itself, once they all released it (as ``torch.cuda.ipc_collect``;
    it happens at every share too). Returns how many such allocations other
    processes still hold."""
    _lazy_init()
    return _C._ipc_collect()


def mem_get_info(device: _DeviceLike = None) -> Tuple[int, int]:
    """(free, total) bytes of the device's memory."""
    _lazy_init()
    return _C._mem_get_info(_get_device_index(device))
