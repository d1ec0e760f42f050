"""Helpers and constants shared by the mydev test files."""

import json
import os
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import pytest
import torch
import torch.nn.functional as F

import device_ext  # noqa: F401  (registers mydev even with autoload off)
import inductor_backend  # noqa: F401  (and torch.compile for it: its own entry point)

N_DEVICES = torch.mydev.device_count()
needs_two_devices = pytest.mark.skipif(N_DEVICES < 2, reason="needs two mydev devices")

# Asynchrony and stream order are tested with a latch, never with time: hold a
# stream, check that what was queued behind it has not run, release it. Used as
# a context manager, the latch is released on exit even when the test fails.
hold_stream = torch.mydev._debug.hold_stream


def release_from_another_thread(latch) -> threading.Thread:
    """For a call that blocks the host until the held stream has run it (a
    copy from pageable memory, ``.item()``, a Triton launch): releases
    ``latch`` from another thread, before or while that call waits. Either
    way the work queued behind the latch runs before the call's own work."""
    thread = threading.Thread(target=latch.release)
    thread.start()
    return thread


# The dtypes copies and core ops are checked over.
COMMON_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs ``code`` in a new interpreter with ``env`` added to the current
    environment; returns the completed process (stdout/stderr as text). The
    driver reads MYDEV_* once per process, so configuration tests need this."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def captured_with_dump(fn, tmp_path):
    """fn()'s result from one replay of its graph capture, and the capture's
    debug dump, which names each recorded kernel (which kernel a call took:
    the device's own or ATen's)."""
    graph = torch.mydev.MydevGraph()
    graph.enable_debug_mode()
    with torch.mydev.graph(graph):
        out = fn()
    graph.replay()
    path = tmp_path / "graph.dot"
    graph.debug_dump(str(path))
    return out, path.read_text()


def assert_device_still_usable() -> None:
    """After an error: the current device is 0 and every device computes."""
    assert torch.mydev.current_device() == 0
    for index in range(N_DEVICES):
        result = torch.arange(4, dtype=torch.float32, device=f"mydev:{index}") * 2 + 1
        assert torch.equal(result.cpu(), torch.arange(4, dtype=torch.float32) * 2 + 1)


def assert_close_to_cpu(actual, expected, *, rtol=None, atol=None, device=None, exact=False, msg=""):
    """``actual`` (a mydev tensor, or a tuple/list of them, possibly with
    ``None`` entries) matches the CPU result ``expected``: the same structure,
    dtype, shape and values within ``rtol``/``atol`` (``exact``: bitwise,
    NaN == NaN). ``device`` (e.g. ``"mydev:1"``) also pins the device index;
    without it any mydev device is accepted. ``msg`` prefixes a mismatch."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (msg, type(actual))
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close_to_cpu(a, e, rtol=rtol, atol=atol, device=device, exact=exact, msg=f"{msg}[{i}]")
        return
    if expected is None:
        assert actual is None, f"{msg}: expected None, got {type(actual)}"
        return
    assert isinstance(actual, torch.Tensor), f"{msg}: {type(actual)}"
    assert expected.device.type == "cpu", f"{msg}: the reference is on {expected.device}"
    if device is None:
        assert actual.device.type == "mydev", f"{msg}: on {actual.device}, not mydev"
    else:
        assert actual.device == torch.device(device), f"{msg}: on {actual.device}, not {device}"
    if exact:
        rtol = atol = 0
    torch.testing.assert_close(
        actual.detach().cpu(),
        expected.detach(),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        msg=(lambda m: f"{msg}: {m}") if msg else None,
    )


@dataclass(frozen=True)
class BenchmarkedConvolution:
    """One convolution row of benchmarks/eager.py at test size (fewer
    channels, smaller images): each takes another CPU algorithm on the device
    (oneDNN direct, 1x1, depthwise, strided, transposed)."""

    name: str
    in_channels: int
    out_channels: int
    kernel_size: int
    stride: int = 1
    padding: int = 0
    groups: int = 1
    transposed: bool = False

    @property
    def weight_shape(self) -> Tuple[int, int, int, int]:
        k = self.kernel_size
        if self.transposed:
            return (self.in_channels, self.out_channels // self.groups, k, k)
        return (self.out_channels, self.in_channels // self.groups, k, k)

    def input_shape(self, batch: int = 2, size: int = 14) -> Tuple[int, int, int, int]:
        return (batch, self.in_channels, size, size)

    def __call__(self, x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor]) -> torch.Tensor:
        conv = F.conv_transpose2d if self.transposed else F.conv2d
        return conv(x, w, b, stride=self.stride, padding=self.padding, groups=self.groups)


BENCHMARKED_CONVOLUTIONS = [
    BenchmarkedConvolution("3x3", in_channels=16, out_channels=16, kernel_size=3, padding=1),
    BenchmarkedConvolution("1x1", in_channels=16, out_channels=32, kernel_size=1),
    BenchmarkedConvolution("depthwise", in_channels=16, out_channels=16, kernel_size=3, padding=1, groups=16),
    BenchmarkedConvolution("strided", in_channels=16, out_channels=24, kernel_size=3, stride=2, padding=1),
    BenchmarkedConvolution("transposed", in_channels=16, out_channels=8, kernel_size=2, stride=2, transposed=True),
]

# Compiles f once per inductor_backend.config patch, in order, in a new
# process; prints per compile the FX graph cache's hits and misses, the
# output's device, the kernel language of the generated code and the error
# against eager CPU.
_FX_CACHE_CLIENT = """
import json, torch
import inductor_backend.config as mydev_config
from torch._dynamo.utils import counters
from torch._inductor.utils import run_and_get_code

def f(x, y):
    return (x.sin() * y).relu().sum(-1)

x = torch.arange(12.0).view(3, 4)
y = torch.full((3, 4), 0.5)
seen = []
for patch in {patches!r}:
    torch._dynamo.reset()
    counters.clear()
    with mydev_config.patch(**patch):
        out, (code,) = run_and_get_code(torch.compile(f, fullgraph=True), x.to("mydev"), y.to("mydev"))
    seen.append({{
        "hit": counters["inductor"]["fxgraph_cache_hit"],
        "miss": counters["inductor"]["fxgraph_cache_miss"],
        "device": str(out.device),
        "code": "triton" if "async_compile.triton(" in code else "cpp" if "load_mydev_kernel(" in code else "?",
        "max_error": (out.cpu() - f(x, y)).abs().max().item(),
    }})
print(json.dumps(seen))
"""


def compile_with_fx_cache(
    patches: List[Dict[str, object]], cache_dir: str, timeout: float = 240
) -> List[Dict[str, object]]:
    """What _FX_CACHE_CLIENT saw, one dict per patch; every compile must have
    run on mydev:0 and matched eager CPU."""
    env = {"TORCHINDUCTOR_CACHE_DIR": cache_dir, "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}
    result = run_python(_FX_CACHE_CLIENT.format(patches=list(patches)), env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    for compiled in seen:
        assert compiled["device"] == "mydev:0" and compiled["max_error"] < 1e-6, seen
    return seen
