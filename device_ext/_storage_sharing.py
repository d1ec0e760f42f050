"""mydev tensors between processes, as cuda tensors go through CUDA IPC.

A mydev tensor pickled by ``torch.multiprocessing`` (a ``Queue``, ``Pipe``,
the arguments of a process started with ``spawn`` or ``forkserver``, a
``DataLoader`` worker's batches) is sent as a handle to its device memory; the
receiving process gets a mydev tensor on the same device index over the same
memory. ``device_ext/torch_patches/multiprocessing.py`` routes mydev tensors
here. How lifetime and stream order are kept is described in
``csrc/core/ipc_storage_sharing.h`` and in docs/user_guide.md ("Processes").
"""

import atexit
import os
import threading
from typing import Any, Dict, Optional, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from . import _C
from .device_name import DEVICE_NAME

# Two int64 per shared storage: consumer references, last ready share.
_PAIR_BYTES = 16
_PAIRS_PER_BLOCK = 1024


class _CounterBlocks:
    """Counter pairs in shared CPU memory. The C++ side keeps raw addresses
    into them, so every block made or received lives as long as the process
    (16 KiB per 1024 storages shared)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._by_address: Dict[int, torch.Tensor] = {}
        self._current: Optional[torch.Tensor] = None
        self._next_pair = _PAIRS_PER_BLOCK

    def unused_pair(self) -> int:
        """Address of a zeroed pair (call with the lock held)."""
        if self._next_pair == _PAIRS_PER_BLOCK:
            block = torch.zeros(_PAIRS_PER_BLOCK * 2, dtype=torch.int64).share_memory_()
            self._current = self.keep(block)
            self._next_pair = 0
        return self._current.data_ptr() + self._next_pair * _PAIR_BYTES

    def take_pair(self) -> None:
        self._next_pair += 1

    def keep(self, block: torch.Tensor) -> torch.Tensor:
        """The block over the same memory kept by this process (a block
        received again is the same storage, reused by torch's CPU sharing)."""
        return self._by_address.setdefault(block.data_ptr(), block)

    def locate(self, pair_address: int) -> Tuple[torch.Tensor, int]:
        for base, block in self._by_address.items():
            if base <= pair_address < base + _PAIRS_PER_BLOCK * _PAIR_BYTES:
                return block, (pair_address - base) // _PAIR_BYTES
        raise AssertionError("mydev: a shared storage's counters are in no known block")


_counters = _CounterBlocks()

# Storages opened in (or shared from) this process, so that a storage sent
# twice arrives as one storage, as torch does for cuda.
_open_storages: Dict[tuple, StorageWeakRef] = {}
_open_storages_lock = threading.Lock()


def _cached_storage(key: tuple) -> Optional[torch.UntypedStorage]:
    ref = _open_storages.get(key)
    if ref is None or ref.expired():
        return None
    return torch.UntypedStorage._new_with_weak_ptr(ref.cdata)


def _remember_storage(key: tuple, storage: torch.UntypedStorage) -> None:
    if len(_open_storages) > 256:
        for stale in [k for k, ref in _open_storages.items() if ref.expired()]:
            del _open_storages[stale]
    _open_storages[key] = StorageWeakRef(storage)


def reduce_mydev_tensor(tensor: torch.Tensor) -> Tuple[Any, tuple]:
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, "
            "since autograd does not support crossing process boundaries.  "
            "If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue)."
        )
    if tensor.layout != torch.strided or tensor.is_nested:
        raise RuntimeError(
            f"mydev: sending a {tensor.layout} mydev tensor to another process is not "
            "supported; send its strided components (or a dense copy) instead"
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    storage = tensor.untyped_storage()
    shared = None
    if storage.nbytes() > 0:
        with _counters.lock:
            (_, handle, offset_bytes, size_bytes, pair, took_pair, sequence) = _C._ipc_share_storage(
                tensor, _counters.unused_pair()
            )
            if took_pair:
                _counters.take_pair()
            block, pair_index = _counters.locate(pair)
        with _open_storages_lock:
            _remember_storage((handle, offset_bytes, size_bytes), storage)
        shared = (handle, offset_bytes, size_bytes, block, pair_index, sequence, os.getpid())
    return (
        rebuild_mydev_tensor,
        (
            type(tensor),
            tensor.size(),
            tensor.stride(),
            tensor.storage_offset(),
            tensor.dtype,
            tensor.requires_grad,
            tensor.device.index,
            shared,
        ),
    )


def _open_storage(device: int, shared: tuple) -> torch.UntypedStorage:
    handle, offset_bytes, size_bytes, block, pair_index, sequence, producer_pid = shared
    with _counters.lock:
        pair = _counters.keep(block).data_ptr() + pair_index * _PAIR_BYTES
    key = (handle, offset_bytes, size_bytes)
    with _open_storages_lock:
        storage = _cached_storage(key)
        if storage is not None:
            _C._ipc_release_duplicate_share(pair, sequence, producer_pid)
            return storage
        storage = _C._ipc_open_storage(
            device, handle, offset_bytes, size_bytes, pair, sequence, producer_pid
        ).untyped_storage()
        _remember_storage(key, storage)
        return storage


def rebuild_mydev_tensor(
    cls: type,
    size: torch.Size,
    stride: Tuple[int, ...],
    storage_offset: int,
    dtype: torch.dtype,
    requires_grad: bool,
    device: int,
    shared: Optional[tuple],
) -> torch.Tensor:
    torch.mydev._lazy_init()
    if shared is None:
        storage = torch.UntypedStorage(0, device=torch.device(DEVICE_NAME, device))
    else:
        storage = _open_storage(device, shared)
    tensor = torch.empty((0,), dtype=dtype, device=storage.device)
    tensor.set_(storage, storage_offset, size, stride)
    if cls is torch.nn.Parameter:
        # Integer parameters must get requires_grad=False in the constructor.
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    tensor.requires_grad = requires_grad
    return tensor


def refuse_mydev_storage(storage: torch.UntypedStorage) -> None:
    raise RuntimeError("Cannot pickle mydev storage; try pickling a mydev tensor instead")


# A process that exits holding received tensors releases them, so that their
# producer reuses the memory (a process killed by a signal cannot: its
# producer keeps the memory until it exits, as with cuda).
atexit.register(_C._ipc_release_received_at_exit)
