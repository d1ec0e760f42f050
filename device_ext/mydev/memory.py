"""Memory statistics, cache control and memory history of the mydev caching
allocator, with torch.cuda.memory's API."""

import pickle
import sys
import types
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
import torch.cuda.memory

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


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """The allocator statistics as the table ``torch.cuda.memory_summary``
    prints, for a mydev device."""
    # torch.cuda's function is pure formatting over memory_stats(): run its
    # code with this module's memory_stats and device parsing (a new function
    # object; torch's own is left as it is), then name the device and the
    # driver call in the two lines that say CUDA. The replacements keep each
    # line's width by dropping one padding space.
    summary = types.FunctionType(
        torch.cuda.memory.memory_summary.__code__,
        {
            **torch.cuda.memory.__dict__,
            "memory_stats": memory_stats,
            "_get_device_index": lambda device, optional=True: _get_device_index(device),
        },
    )
    text = summary(device, abbreviated)
    for cuda_words, mydev_words in (
        ("PyTorch CUDA memory summary, device ID ", "PyTorch mydev memory summary, device ID"),
        ("CUDA OOMs: ", "mydev OOMs:"),
        ("cudaMalloc retries: ", "mydevMalloc retries:"),
    ):
        start = text.index(cuda_words)
        after = start + len(cuda_words)
        value_end = after + len(text[after:].split(" ", 1)[0])
        # "<words> <value><padding>" -> "<words> <value><padding minus one>"
        text = text[:start] + mydev_words + " " + text[after:value_end] + text[value_end + 1 :]
    return text


_HISTORY_ENABLED = (None, "state", "all")


def _record_memory_history(
    enabled: Optional[str] = "all",
    context: Optional[str] = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: _DeviceLike = None,
    clear_history: bool = False,
    skip_actions: Optional[List[str]] = None,
) -> None:
    """Records what the allocator does, with stacks, as
    ``torch.cuda.memory._record_memory_history`` does for cuda.

    ``enabled``: None stops recording; "state" keeps the stacks of live
    allocations; "all" also keeps a history of every action (alloc,
    free_requested, free_completed, segment_alloc, segment_free, oom), the
    newest ``max_entries`` per device. ``context``: which actions keep a stack
    (None, "state": live allocations only, "alloc": also allocations in the
    history, "all": frees too). ``stacks``: "python" (Python and TorchScript
    frames) or "all" (C++ frames too). ``device`` is accepted for cuda's
    signature; recording covers every device, as on cuda. Stopping keeps the
    history for ``_snapshot()`` until ``clear_history=True``.
    """
    if isinstance(enabled, bool):
        raise TypeError(
            "_record_memory_history: enabled must be None, 'state' or 'all' "
            f"(the legacy boolean form is not supported), got {enabled!r}"
        )
    if enabled not in _HISTORY_ENABLED:
        raise ValueError(f"_record_memory_history: enabled must be None, 'state' or 'all', got {enabled!r}")
    if not isinstance(max_entries, int) or isinstance(max_entries, bool):
        raise TypeError(f"_record_memory_history: max_entries must be an int, got {max_entries!r}")
    _lazy_init()
    _C._record_memory_history(
        enabled,
        context,
        stacks,
        max_entries,
        None if device is None else _get_device_index(device),
        clear_history,
        list(skip_actions or []),
    )


def _snapshot(device: _DeviceLike = None) -> Dict[str, Any]:
    """The allocator's state and recorded history in the layout of
    ``torch.cuda.memory._snapshot()``: ``segments`` (each with its
    ``blocks``) and ``device_traces`` (per device, the recorded actions).
    With ``device``, only that device's segments and trace."""
    _lazy_init()
    return _C._memory_snapshot(None if device is None else _get_device_index(device))


def memory_snapshot(mempool_id: Optional[Tuple[int, int]] = None) -> List[Dict[str, Any]]:
    """The segments of every device, as ``torch.cuda.memory_snapshot``
    returns them; with ``mempool_id`` (a graph's ``pool()``), only the
    segments of that private pool."""
    segments = _snapshot()["segments"]
    if mempool_id is None:
        return segments
    return [s for s in segments if s["segment_pool_id"] == tuple(mempool_id)]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles ``_snapshot()`` to ``filename``, the file
    ``python -m torch.cuda._memory_viz`` and pytorch.org/memory_viz read."""
    snapshot = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)
