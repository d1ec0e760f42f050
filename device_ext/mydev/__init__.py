"""``torch.mydev``: the device module, shaped like ``torch.cuda``.

Streams and events are ``torch.Stream`` / ``torch.Event`` subclasses, memory
numbers come from the mydev caching allocator, and random state from the
per-device Philox generators.
"""

from typing import Any, List, Optional, Union

import torch

from .. import _C
from . import (
    _debug,  # noqa: F401  (torch.mydev._debug: latches for tests)
    _utils,  # noqa: F401  (used by torch.serialization)
)
from ._device import (
    _exchange_device,
    _get_device_index,
    _is_in_bad_fork,
    _lazy_init,
    _maybe_exchange_device,
    current_device,
    device,
    device_count,
    device_of,
    init,
    is_available,
    is_initialized,
    set_device,
)
from .cpu_fallback import (
    cpu_fallback_counts,
    cpu_fallback_policy,
    reset_cpu_fallback_counts,
    set_cpu_fallback_policy,
)
from .graphs import (
    MydevGraph,
    graph,
    graph_pool_handle,
    make_graphed_callables,
)
from .memory import (
    empty_cache,
    ipc_collect,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import (
    Event,
    Stream,
    StreamContext,
    _set_stream_by_id,
    current_stream,
    default_stream,
    set_stream,
    stream,
    synchronize,
)

_DeviceLike = Union[torch.device, str, int, None]


def get_device_properties(device: _DeviceLike = None) -> Any:
    """Name, total_memory, multi_processor_count, major/minor, simd width."""
    _lazy_init()
    return _C._get_device_properties(_get_device_index(device))


def get_device_name(device: _DeviceLike = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: _DeviceLike = None) -> tuple:
    props = get_device_properties(device)
    return props.major, props.minor


def get_amp_supported_dtype() -> List[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def is_launch_blocking() -> bool:
    """True when MYDEV_LAUNCH_BLOCKING=1 made every launch synchronous."""
    return _C._launch_blocking()


def _sleep(milliseconds: int) -> None:
    """Occupies the current stream for ``milliseconds`` without blocking the
    host (the counterpart of ``torch.cuda._sleep``, which counts cycles)."""
    _lazy_init()
    _C._sleep(int(milliseconds))


__all__ = [
    "MydevGraph",
    "graph",
    "graph_pool_handle",
    "make_graphed_callables",
    "Event",
    "Stream",
    "StreamContext",
    "cpu_fallback_counts",
    "cpu_fallback_policy",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "ipc_collect",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "is_launch_blocking",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_cpu_fallback_counts",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_cpu_fallback_policy",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]
