"""``torch.mydev._debug``: tools for testing the device itself, not an API
for models.

``hold_stream()`` stops a stream at a point the test chooses until the test
releases it, so that asynchrony and stream order are tested deterministically
instead of racing a kernel that sleeps "long enough"::

    with torch.mydev._debug.hold_stream() as latch:
        y = x * 2                                   # queued behind the latch
        assert not torch.mydev.current_stream().query()
        latch.release()
    torch.mydev.synchronize()
"""

import datetime
from typing import Dict, Optional

import torch

from .. import _C
from ._device import _lazy_init

# Long enough for any test on a loaded machine, short enough that a latch a
# failing test never released ends as a kernel error instead of a hang.
DEFAULT_TIMEOUT_S = 60.0

# Latches not released yet (strong references: a latch the test dropped still
# holds its stream), so that a test harness can release them all.
_unreleased = set()


class StreamLatch:
    """A latch that a kernel queued on ``stream`` waits for: the stream runs
    nothing queued after it until :meth:`release`. Used as a context manager,
    it is released on exit whatever happened inside (so a failing test cannot
    leave the stream held). If nothing releases it within ``timeout_s`` the
    holding kernel fails instead: the next synchronizing call raises
    ``RuntimeError: ... kernel '_hold_stream' failed ...: the stream latch was
    not released within N ms``."""

    def __init__(self, stream: Optional[torch.Stream] = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        if timeout_s <= 0:
            raise ValueError(f"hold_stream: timeout_s must be > 0, got {timeout_s}")
        _lazy_init()
        self._latch = _C._StreamLatch()
        _unreleased.add(self)
        if stream is None:
            _C._hold_stream(self._latch, datetime.timedelta(seconds=timeout_s))
        else:
            with torch.mydev.stream(stream):
                _C._hold_stream(self._latch, datetime.timedelta(seconds=timeout_s))

    def release(self) -> None:
        """Lets the stream run what was queued after the latch."""
        self._latch.release()
        _unreleased.discard(self)

    @property
    def released(self) -> bool:
        return self._latch.released

    @property
    def reached(self) -> bool:
        """True once the stream has reached the latch: everything queued
        before it has run."""
        return self._latch.reached

    def wait_until_reached(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
        """Blocks the host until the stream reaches the latch (or
        ``timeout_s`` passes); returns :attr:`reached`."""
        return self._latch.wait_until_reached(datetime.timedelta(seconds=timeout_s))

    def __enter__(self) -> "StreamLatch":
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def hold_stream(stream: Optional[torch.Stream] = None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> StreamLatch:
    """Queues a latch on ``stream`` (default: the current stream) and returns
    it; see :class:`StreamLatch`."""
    return StreamLatch(stream, timeout_s)


def release_all() -> None:
    """Releases every latch not released yet: after a test, whatever it did."""
    for latch in list(_unreleased):
        latch.release()


def result_placement_counts() -> Dict[str, int]:
    """How the results of ops without a real out= CPU kernel (convolutions,
    ...) reached their device outputs since the last reset: ``in_place``, the
    CPU kernel allocated them in the output's memory; ``copied``, they were
    computed elsewhere and copied. Counted when the kernel runs: synchronize
    before reading."""
    in_place, copied = _C._result_placement_counts()
    return {"in_place": in_place, "copied": copied}


def reset_result_placement_counts() -> None:
    _C._reset_result_placement_counts()


def native_elementwise_launches() -> int:
    """How many calls since the last reset ran the device's own elementwise
    kernels (add, sub, mul, div, neg, relu over dense tensors of one dtype;
    csrc/aten/native_elementwise.h) instead of ATen's CPU kernels. Counted on
    the host at launch: a graph replay does not count again. Kept cheap, not
    exact across threads: two threads launching at the same instant may count
    one launch."""
    return _C._native_elementwise_launches()


def reset_native_elementwise_launches() -> None:
    _C._reset_native_elementwise_launches()


def kernel_scratch_stats() -> Dict[str, int]:
    """The host scratch that CPU kernels run by device kernels allocate
    (csrc/aten/kernel_scratch_cache.h): ``cached_bytes`` kept for reuse (at
    most 256 MiB), ``reuses`` allocations served from it so far."""
    cached_bytes, reuses = _C._kernel_scratch_stats()
    return {"cached_bytes": cached_bytes, "reuses": reuses}
