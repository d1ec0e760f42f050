"""Fixtures for the mydev test suite (shared helpers live in mydev_testing)."""

import os

# Kernels keep torch's team size in this process and the subprocesses it
# starts, so that no result depends on what else the host runs: the suite
# runs in two workers, each of which the other's work would shrink the team
# of (a reduction's last bits follow the team's size). Set before torch
# loads the driver, which reads MYDEV_* once. tests/test_host_threads.py
# turns the shrinking on where it tests it.
os.environ.setdefault("MYDEV_DYNAMIC_THREADS", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

from mydev_testing import run_python


@pytest.fixture
def python_subprocess():
    return run_python


@pytest.fixture(autouse=True)
def device_left_clean():
    """Every test leaves the devices idle and with no unreported kernel
    failure, so one test's asynchronous error cannot fail the next. A test
    that failed while it held a stream has its latches released first."""
    yield
    torch.mydev._debug.release_all()
    for index in range(torch.mydev.device_count()):
        torch.mydev.synchronize(index)


@pytest.fixture(scope="module")
def isolated_inductor(tmp_path_factory):
    """Inductor's on-disk caches (kernel modules, precompiled headers) in a
    directory of this test session, not shared with other processes on the
    machine; and the FX graph / AOTAutograd caches off, so that every compile
    runs the code generator under test (tests that exercise those caches turn
    them on in subprocesses with a directory of their own)."""
    import torch._functorch.config
    import torch._inductor.config

    cache_dir = tmp_path_factory.getbasetemp() / "inductor-cache"
    cache_dir.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache_dir))
        with (
            torch._inductor.config.patch(fx_graph_cache=False),
            torch._functorch.config.patch(enable_autograd_cache=False),
        ):
            yield cache_dir


@pytest.fixture
def fresh_dynamo():
    """Each test compiles from scratch and sees only its own counters."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
