"""Device selection, availability and lazy initialisation."""

import threading
from typing import Any, Union

import torch

from .. import _C
from ..device_name import DEVICE_NAME

_DeviceLike = Union[torch.device, str, int, None]

_initialized = False
_init_lock = threading.Lock()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_available() -> bool:
    return device_count() > 0


def device_count() -> int:
    return _C._device_count()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def init() -> None:
    """Initializes mydev now rather than at its first use (as
    ``torch.cuda.init()``); raises if it cannot be (bad configuration,
    forked child)."""
    _lazy_init()


def _lazy_init() -> None:
    """Brings up the driver on first real use, and refuses in a process forked
    after that happened (its executor threads do not exist there)."""
    global _initialized
    if is_initialized():
        return
    with _init_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize mydev in forked subprocess. To use mydev "
                "with multiprocessing, you must use the 'spawn' start method "
                "(or 'forkserver')"
            )
        _C._init()
        _initialized = True


def _get_device_index(device: _DeviceLike, optional: bool = True) -> int:
    """Index of a mydev device given as int, 'mydev', 'mydev:1' or
    torch.device; None (and a bare 'mydev') mean the current device."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != DEVICE_NAME:
            raise ValueError(f"Expected a mydev device, but got: {device}")
        index = device.index
    elif isinstance(device, int):
        index = device
    elif device is None:
        index = None
    else:
        raise TypeError(f"Invalid device argument: {device!r}")
    if index is None:
        if not optional:
            raise ValueError(f"Expected a mydev device with an index, got {device!r}")
        return current_device()
    if index < 0:
        # The same error as an index past the last device, from every
        # function (None, not -1, means the current device).
        _C._check_device_index(index)
    return index


def current_device() -> int:
    _lazy_init()
    return _C._current_device()


def set_device(device: _DeviceLike) -> None:
    index = _get_device_index(device)
    _lazy_init()
    _C._set_device(index)


def _exchange_device(index: int) -> int:
    """Makes ``index`` current and returns the previous device (-1: no-op),
    the primitive behind device guards in compiled code."""
    if index < 0:
        return -1
    previous = current_device()
    if index != previous:
        _C._set_device(index)
    return previous


def _maybe_exchange_device(index: int) -> int:
    """Like ``_exchange_device``, for restoring a device saved by it."""
    return _exchange_device(index)


class device:
    """Context manager that makes ``device`` current, restoring the previous
    one on exit (``torch.mydev.device(1)``)."""

    def __init__(self, device: Any):
        self.idx = _get_device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)

    def __exit__(self, *exc: Any) -> bool:
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """``device`` of a tensor's device if it is on mydev, otherwise a no-op."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == DEVICE_NAME else None)
