"""Streams and events: ``torch.Stream`` / ``torch.Event`` on mydev, which reach
the driver through the C++ DeviceGuardImpl."""

from typing import Any, Optional, Union

import torch

from .. import _C
from ..device_name import DEVICE_NAME
from ._device import _get_device_index, _lazy_init

_DeviceLike = Union[torch.device, str, int, None]


class Stream(torch.Stream):
    """An in-order queue of work on a mydev device.

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool;
    priority -1 is high, 0 normal (``torch.mydev.Stream.priority_range()``).
    """

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any):
        if "stream_id" in kwargs:  # wrapping an existing stream
            return super().__new__(cls, priority=priority, **kwargs)
        _lazy_init()
        index = _get_device_index(device)
        return super().__new__(cls, device=torch.device(DEVICE_NAME, index), priority=priority)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Work queued on this stream from now on waits for the work queued
        on ``stream`` so far."""
        _check_stream(stream, "wait_stream")
        super().wait_stream(stream)

    @staticmethod
    def priority_range() -> tuple:
        """(least, greatest) priority, as torch.cuda reports them."""
        return _C._stream_priority_range()

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.stream_id, self.device_index)

    def __repr__(self) -> str:
        return (
            f"<torch.mydev.Stream device=mydev:{self.device_index} stream_id={self.stream_id} priority={self.priority}>"
        )


_MYDEV_TYPE_INDEX = torch._C._autograd.DeviceType.PrivateUse1.value


def _check_stream(stream: Any, caller: str) -> None:
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"{caller} expects a torch.Stream, got {type(stream).__name__}")
    if stream.device.type != "mydev":
        raise ValueError(f"{caller} expects a mydev stream, got a stream on {stream.device}")


def _stream_from_id(stream_id: int, index: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=index, device_type=_MYDEV_TYPE_INDEX)


class Event(torch.Event):
    """A marker in a stream: record, wait, query, synchronize, elapsed_time."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("interprocess mydev events are not supported yet")
        _lazy_init()
        return super().__new__(
            cls,
            device=torch.device(DEVICE_NAME, _C._current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
        )

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        super().record(stream if stream is not None else current_stream())

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        super().wait(stream if stream is not None else current_stream())

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded
        with enable_timing=True and completed)."""
        return _C._event_elapsed_time(self, end_event)


def current_stream(device: _DeviceLike = None) -> Stream:
    _lazy_init()
    stream_id, index = _C._current_stream(_get_device_index(device))
    return _stream_from_id(stream_id, index)


def default_stream(device: _DeviceLike = None) -> Stream:
    _lazy_init()
    return _stream_from_id(0, _get_device_index(device))


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current for its device on this thread."""
    if stream is None:
        return
    _check_stream(stream, "set_stream")
    _lazy_init()
    _C._set_stream(stream.stream_id, stream.device_index)


def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
    """``set_stream`` from the fields of a ``torch.Stream`` (used by Dynamo)."""
    _lazy_init()
    _C._set_stream(stream_id, device_index)


class StreamContext:
    """Selects a stream (and its device) for the block, restoring both after."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self._saved: list = []

    def __enter__(self) -> Optional[torch.Stream]:
        if self.stream is None:
            return None
        _lazy_init()
        previous_device = _C._current_device()
        previous_on_target = current_stream(self.stream.device_index)
        self._saved.append((previous_device, previous_on_target))
        if self.stream.device_index != previous_device:
            _C._set_device(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is None:
            return False
        previous_device, previous_on_target = self._saved.pop()
        set_stream(previous_on_target)
        if previous_device != self.stream.device_index:
            _C._set_device(previous_device)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """``with torch.mydev.stream(s):`` runs the block's work on ``s``."""
    return StreamContext(stream)


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work on all streams of the device; device-side errors
    surface here."""
    _lazy_init()
    _C._synchronize(_get_device_index(device))
