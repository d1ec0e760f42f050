"""How mydev gets loaded, how it reads its environment, and how it behaves
across fork, spawn and process exit. Everything that depends on process-wide
state runs in a fresh interpreter (``run_python``); the code run there prints
one JSON line with what it observed."""

import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
import torch

import device_ext
from mydev_testing import run_python

MiB = 1 << 20
# Subprocess environments that must not inherit a non-default setting from the caller.
# (An empty MYDEV_* value means "default"; TORCH_DEVICE_BACKEND_AUTOLOAD must be "1" to load.)
DEFAULTS = {
    "MYDEV_DEVICE_COUNT": "",
    "MYDEV_MEMORY_MB": "",
    "MYDEV_LAUNCH_BLOCKING": "",
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "1",
}


def run_json(code: str, **env: str) -> Dict[str, Any]:
    """Runs ``code`` in a fresh interpreter (DEFAULTS overridden by ``env``);
    it must exit 0 and print a JSON object as its last line, which is returned."""
    result = run_python(code, {**DEFAULTS, **env})
    assert result.returncode == 0, f"exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- loading -------------------------------------------------------------------------------


def test_torch_backends_entry_point_is_declared() -> None:
    entry_points = importlib.metadata.entry_points(group="torch.backends")
    # The device, and torch.compile for it: each package registers itself.
    assert {(ep.name, ep.value) for ep in entry_points} >= {
        ("device_ext", "device_ext:_autoload"),
        ("inductor_backend", "inductor_backend:_autoload"),
    }


def test_import_torch_registers_mydev() -> None:
    seen = run_json(
        """
        import json, sys, torch
        print(json.dumps({
            "has_mydev": hasattr(torch, "mydev"),
            "backend": torch._C._get_privateuse1_backend_name(),
            "loaded": "device_ext" in sys.modules,
            "zeros": torch.zeros(2, device="mydev").cpu().tolist(),
            "device": str(torch.zeros(2, device="mydev").device),
            "module": torch.mydev.__name__,
        }))
        """
    )
    assert seen == {
        "has_mydev": True,
        "backend": "mydev",
        "loaded": True,
        "zeros": [0.0, 0.0],
        "device": "mydev:0",
        "module": "device_ext.mydev",
    }


def test_autoload_off_then_import_device_ext() -> None:
    seen = run_json(
        """
        import json, sys, torch
        seen = {"has_mydev": hasattr(torch, "mydev"), "loaded": "device_ext" in sys.modules,
                "backend": torch._C._get_privateuse1_backend_name()}
        try:
            torch.device("mydev")
        except RuntimeError as err:
            seen["device_error"] = str(err)
        import device_ext
        seen["after_import"] = {"has_mydev": hasattr(torch, "mydev"),
                                "backend": torch._C._get_privateuse1_backend_name(),
                                "ones": (torch.ones(2, device="mydev:1") + 1).cpu().tolist()}
        print(json.dumps(seen))
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert seen["has_mydev"] is False and seen["loaded"] is False
    assert seen["backend"] == "privateuseone"
    assert "device string: mydev" in seen["device_error"]
    assert seen["after_import"] == {"has_mydev": True, "backend": "mydev", "ones": [2.0, 2.0]}


def test_import_device_ext_before_torch() -> None:
    # With autoload on, torch's entry point meets device_ext half-imported.
    seen = run_json(
        """
        import device_ext
        import json, torch
        print(json.dumps({"backend": torch._C._get_privateuse1_backend_name(),
                          "sum": (torch.arange(4.0, device="mydev:1") * 2).sum().item(),
                          "is_mydev": torch.ones(1).mydev().is_mydev}))
        """,
    )
    assert seen == {"backend": "mydev", "sum": 12.0, "is_mydev": True}


def test_mismatched_torch_version_is_refused_clearly() -> None:
    built_for = device_ext._build_info.TORCH_VERSION
    assert built_for.split("+")[0].split(".")[:2] == torch.__version__.split("+")[0].split(".")[:2]
    seen = run_json(
        """
        import json, sys, traceback, torch
        torch.__version__ = "2.14.0"
        try:
            import device_ext
            seen = {"imported": True}
        except ImportError as err:
            seen = {"imported": False, "message": str(err), "cause": repr(err.__cause__),
                    "raised_in": traceback.extract_tb(err.__traceback__)[-1].filename,
                    "binary_loaded": "device_ext._C" in sys.modules,
                    "has_mydev": hasattr(torch, "mydev"),
                    "cpu_still_works": torch.ones(3).sum().item()}
        print(json.dumps(seen))
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
    )
    assert seen["imported"] is False
    message = seen["message"]
    assert f"built for torch {built_for}" in message
    assert "torch 2.14.0 is installed" in message
    assert f"torch=={built_for}" in message and "pip install --no-build-isolation -e ." in message
    assert "undefined symbol" not in message
    # Refused by the Python check, before the C++ extension was ever loaded.
    assert seen["raised_in"].endswith("_torch_compat.py") and seen["cause"] == "None"
    assert seen["binary_loaded"] is False and seen["has_mydev"] is False
    assert seen["cpu_still_works"] == 3.0


# --- environment variables -------------------------------------------------------------------


def test_device_count_from_environment() -> None:
    seen = run_json(
        """
        import json, torch
        seen = {"count": torch.mydev.device_count(), "accelerator": torch.accelerator.device_count(),
                "third": (torch.ones(3, device="mydev:2") * 3).cpu().tolist(),
                "name": torch.mydev.get_device_name(2)}
        try:
            torch.empty(1, device="mydev:3")
        except RuntimeError as err:
            seen["fourth"] = str(err)
        print(json.dumps(seen))
        """,
        MYDEV_DEVICE_COUNT="3",
    )
    assert seen["count"] == seen["accelerator"] == 3
    assert seen["third"] == [3.0, 3.0, 3.0]
    assert seen["name"] == torch.mydev.get_device_name(0)
    assert "Invalid device index mydev:3: there are 3 mydev devices" in seen["fourth"]


def test_zero_devices() -> None:
    seen = run_json(
        """
        import json, torch
        seen = {"count": torch.mydev.device_count(), "available": torch.mydev.is_available()}
        try:
            torch.ones(1, device="mydev")
        except RuntimeError as err:
            seen["error"] = str(err)
        seen["cpu"] = torch.ones(2).sum().item()
        print(json.dumps(seen))
        """,
        MYDEV_DEVICE_COUNT="0",
    )
    assert seen["count"] == 0 and seen["available"] is False
    assert "Invalid device index mydev:0: there are 0 mydev devices" in seen["error"]
    assert seen["cpu"] == 2.0


MEMORY_MB_ACCEPTED = "expected an integer number of MiB from 2 (the smallest memory that holds one allocation)"
INVALID_SETTINGS = [
    ("MYDEV_DEVICE_COUNT", "abc", "MYDEV_DEVICE_COUNT='abc' is invalid: expected an integer from 0 to 64"),
    ("MYDEV_DEVICE_COUNT", "-1", "MYDEV_DEVICE_COUNT='-1' is invalid: expected an integer from 0 to 64"),
    ("MYDEV_DEVICE_COUNT", "65", "MYDEV_DEVICE_COUNT='65' is invalid: expected an integer from 0 to 64"),
    ("MYDEV_DEVICE_COUNT", "1000", "MYDEV_DEVICE_COUNT='1000' is invalid: expected an integer from 0 to 64"),
    ("MYDEV_MEMORY_MB", "abc", f"MYDEV_MEMORY_MB='abc' is invalid: {MEMORY_MB_ACCEPTED}"),
    ("MYDEV_MEMORY_MB", "-5", f"MYDEV_MEMORY_MB='-5' is invalid: {MEMORY_MB_ACCEPTED}"),
    ("MYDEV_MEMORY_MB", "0", f"MYDEV_MEMORY_MB='0' is invalid: {MEMORY_MB_ACCEPTED}"),
    ("MYDEV_MEMORY_MB", "1", f"MYDEV_MEMORY_MB='1' is invalid: {MEMORY_MB_ACCEPTED}"),
    ("MYDEV_LAUNCH_BLOCKING", "yes", "MYDEV_LAUNCH_BLOCKING='yes' is invalid: expected 0 or 1"),
    ("MYDEV_DYNAMIC_THREADS", "2", "MYDEV_DYNAMIC_THREADS='2' is invalid: expected 0 or 1"),
]


@pytest.mark.parametrize("variable,value,expected", INVALID_SETTINGS, ids=[f"{v}={x}" for v, x, _ in INVALID_SETTINGS])
def test_invalid_environment_variable(variable: str, value: str, expected: str) -> None:
    # Asking for the count never raises (c10's contract): a broken configuration has no
    # devices. Using a device raises the configuration error, every time.
    seen = run_json(
        """
        import json, torch
        seen = {"count": torch.mydev.device_count(), "available": torch.mydev.is_available(),
                "errors": []}
        for use in (lambda: torch.ones(2, device="mydev"), torch.mydev.current_device,
                    lambda: torch.mydev.get_device_properties(0)):
            try:
                use()
                seen["errors"].append(None)
            except RuntimeError as err:
                seen["errors"].append(str(err))
        seen["cpu"] = torch.ones(2).sum().item()
        print(json.dumps(seen))
        """,
        **{variable: value},
    )
    assert seen["count"] == 0 and seen["available"] is False
    assert len(seen["errors"]) == 3
    for error in seen["errors"]:
        assert error is not None and expected in error
    assert seen["cpu"] == 2.0


@pytest.mark.parametrize("variable,value,expected", INVALID_SETTINGS, ids=[f"{v}={x}" for v, x, _ in INVALID_SETTINGS])
def test_invalid_environment_variable_warns_once(variable: str, value: str, expected: str) -> None:
    # `"mydev" if torch.mydev.is_available() else "cpu"` must not fall back to
    # the CPU silently: one warning (a Python warning, or printed on stderr if
    # C++ asked first), however often availability is asked.
    result = run_python(
        """
        import json, warnings, torch
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seen = {"available": [torch.mydev.is_available() for _ in range(3)],
                    "accelerator": torch.accelerator.device_count()}
        seen["warnings"] = [str(w.message) for w in caught]
        print(json.dumps(seen))
        """,
        {**DEFAULTS, variable: value},
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["available"] == [False] * 3 and seen["accelerator"] == 0
    said = seen["warnings"] + [result.stderr]
    assert sum(text.count(expected) for text in said) == 1, said
    assert any("mydev is unavailable" in text for text in said)


def test_init_raises_the_configuration_error() -> None:
    seen = run_json(
        """
        import json, torch
        seen = {"before": torch.mydev.is_initialized()}
        try:
            torch.mydev.init()
        except RuntimeError as err:
            seen["error"] = str(err)
        print(json.dumps(seen))
        """,
        MYDEV_DEVICE_COUNT="abc",
    )
    assert seen["before"] is False
    assert "MYDEV_DEVICE_COUNT='abc' is invalid: expected an integer from 0 to 64" in seen["error"]


def test_init_initializes_like_torch_cuda_init() -> None:
    seen = run_json(
        """
        import json, torch
        seen = {"before": torch.mydev.is_initialized()}
        torch.mydev.init()
        seen["after"] = torch.mydev.is_initialized()
        torch.mydev.init()  # again: a no-op
        print(json.dumps(seen))
        """
    )
    assert seen == {"before": False, "after": True}


def test_invalid_cpu_fallback_policy_fails_the_import() -> None:
    # Refused when torch loads mydev, not hours later at the first fallback.
    result = run_python("import torch\nprint('imported')\n", {**DEFAULTS, "MYDEV_CPU_FALLBACK": "maybe"})
    assert result.returncode != 0
    assert "imported" not in result.stdout
    assert "MYDEV_CPU_FALLBACK='maybe' is invalid: expected off, warn or on" in result.stderr


def test_memory_capacity_from_environment() -> None:
    seen = run_json(
        """
        import json, torch
        seen = {"total": [torch.mydev.get_device_properties(i).total_memory for i in range(2)],
                "mem_get_info": list(torch.mydev.mem_get_info(1))}
        try:
            torch.empty(65 << 20, dtype=torch.uint8, device="mydev:1")
        except torch.OutOfMemoryError as err:
            seen["oom"] = str(err)
        seen["fits"] = torch.empty(32 << 20, dtype=torch.uint8, device="mydev:1").fill_(7)[-1].item()
        print(json.dumps(seen))
        """,
        MYDEV_MEMORY_MB="64",
    )
    assert seen["total"] == [64 * MiB, 64 * MiB]
    assert seen["mem_get_info"] == [64 * MiB, 64 * MiB]
    assert "total capacity of 64.00 MiB" in seen["oom"] and "MYDEV_MEMORY_MB" in seen["oom"]
    assert seen["fits"] == 7


LAUNCH_PROBE = """
    import json, torch, device_ext
    seen = {"blocking": torch.mydev.is_launch_blocking()}
    x = torch.ones(4, device="mydev")
    torch.mydev.synchronize()
    if seen["blocking"]:
        y = x * 2
        seen["done_when_launch_returned"] = torch.mydev.current_stream().query()
    else:
        with torch.mydev._debug.hold_stream() as latch:
            y = x * 2
            seen["done_when_launch_returned"] = torch.mydev.current_stream().query()
    seen["y"] = y.cpu().tolist()
    try:
        device_ext._C._fail_on_stream("boom")
        seen["failed_at"] = None
        torch.mydev.synchronize()
    except RuntimeError as err:
        seen["failed_at"] = "synchronize" if "failed_at" in seen else "launch"
        seen["error"] = str(err)
    seen["after"] = (torch.ones(2, device="mydev") + 1).cpu().tolist()
    print(json.dumps(seen))
"""


def test_launch_blocking_makes_launches_synchronous() -> None:
    seen = run_json(LAUNCH_PROBE, MYDEV_LAUNCH_BLOCKING="1")
    assert seen["blocking"] is True
    assert seen["done_when_launch_returned"] is True
    assert seen["y"] == [2.0] * 4
    # The kernel's failure is raised by its launch: the launch waited for it.
    assert seen["failed_at"] == "launch"
    assert "kernel '_fail' failed on mydev:0: boom" in seen["error"]
    assert seen["after"] == [2.0, 2.0]


def test_launches_are_asynchronous_by_default() -> None:
    seen = run_json(LAUNCH_PROBE, MYDEV_LAUNCH_BLOCKING="0")
    assert seen["blocking"] is False
    assert seen["done_when_launch_returned"] is False  # returned while the stream was held
    assert seen["y"] == [2.0] * 4
    assert seen["failed_at"] == "synchronize"
    assert "kernel '_fail' failed on mydev:0: boom" in seen["error"]
    assert seen["after"] == [2.0, 2.0]


# --- fork and spawn ---------------------------------------------------------------------------

FORK_PROBE = """
    import json, os, torch

    def in_forked_child(action):
        \"\"\"Runs torch code named by ``action`` in a forked child; returns its outcome.\"\"\"
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            try:
                result = eval(action)
                outcome = {"error": None, "result": repr(result)}
            except BaseException as err:
                outcome = {"error": type(err).__name__, "message": str(err)}
            os.write(write_fd, json.dumps(outcome).encode())
            os._exit(0)
        os.close(write_fd)
        data = b"".join(iter(lambda: os.read(read_fd, 1 << 16), b""))
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        return dict(json.loads(data), exit_code=os.waitstatus_to_exitcode(status))
"""

USES_IN_CHILD = [
    "torch.mydev._lazy_init()",
    "torch.mydev.current_device()",
    "torch.mydev.set_device(1)",
    "torch.mydev.synchronize()",
    "torch.mydev.Stream()",
    "torch.mydev.get_device_properties(0)",
    "torch.ones(1, device='mydev')",
    "torch.ones(1).to('mydev:1')",
]


@pytest.fixture(scope="module")
def forked_after_use() -> Dict[str, Any]:
    """One parent that used mydev, then forked one child per entry of USES_IN_CHILD."""
    return run_json(
        FORK_PROBE
        + """
    torch.ones(1, device="mydev").add(1).item()  # the parent uses the device
    children = {use: in_forked_child(use) for use in USES_IN_CHILD}
    parent = (torch.arange(3.0, device="mydev") * 2).cpu().tolist()
    print(json.dumps({"children": children, "parent": parent,
                      "child_is_initialized": in_forked_child("torch.mydev.is_initialized()")}))
    """.replace("USES_IN_CHILD", repr(USES_IN_CHILD))
    )


@pytest.mark.multiprocess
@pytest.mark.parametrize("use", USES_IN_CHILD)
def test_forked_child_cannot_use_mydev(forked_after_use: Dict[str, Any], use: str) -> None:
    outcome = forked_after_use["children"][use]
    assert outcome["exit_code"] == 0  # a clean Python error, not a crash or a hang
    assert outcome["error"] == "RuntimeError", outcome
    assert "fork" in outcome["message"] and "'spawn' start method" in outcome["message"]


@pytest.mark.multiprocess
def test_parent_keeps_working_after_fork(forked_after_use: Dict[str, Any]) -> None:
    assert forked_after_use["parent"] == [0.0, 2.0, 4.0]
    assert forked_after_use["child_is_initialized"] == {"error": None, "result": "False", "exit_code": 0}


@pytest.mark.multiprocess
def test_fork_after_only_querying_devices_is_harmless() -> None:
    seen = run_json(
        FORK_PROBE
        + """
    queried = [torch.mydev.device_count(), torch.mydev.is_available(), torch.mydev.get_device_name(1)]
    child = in_forked_child("(torch.ones(2, device='mydev:1') + 1).cpu().tolist()")
    parent = (torch.ones(2, device="mydev:1") * 3).cpu().tolist()
    print(json.dumps({"queried": queried, "child": child, "parent": parent}))
    """
    )
    assert seen["queried"][:2] == [2, True]
    assert seen["child"] == {"error": None, "result": "[2.0, 2.0]", "exit_code": 0}
    assert seen["parent"] == [3.0, 3.0]


WORKER_MODULE = """
def double_on_mydev(values, device):
    import torch
    return (torch.tensor(values, device=device) * 2).cpu().tolist(), torch.mydev.device_count()
"""


@pytest.fixture(scope="module")
def multiprocessing_outcomes(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """A parent that used mydev runs a worker in a 'fork' pool and in a 'spawn' pool."""
    folder: Path = tmp_path_factory.mktemp("worker")
    (folder / "mydev_worker.py").write_text(WORKER_MODULE)
    return run_json(
        """
        import json, multiprocessing, sys, torch
        import mydev_worker
        torch.ones(1, device="mydev").add(1).item()
        seen = {}
        for method in ("fork", "spawn"):
            with multiprocessing.get_context(method).Pool(1) as pool:
                try:
                    seen[method] = {"result": pool.apply(mydev_worker.double_on_mydev, ([1.0, 2.5], "mydev:1"))}
                except Exception as err:
                    seen[method] = {"error": type(err).__name__, "message": str(err)}
        seen["parent"] = (torch.arange(3.0, device="mydev") * 2).cpu().tolist()
        print(json.dumps(seen))
        """,
        PYTHONPATH=str(folder),
    )


@pytest.mark.multiprocess
def test_multiprocessing_fork_child_refuses_mydev(multiprocessing_outcomes: Dict[str, Any]) -> None:
    outcome = multiprocessing_outcomes["fork"]
    assert outcome.get("error") == "RuntimeError", outcome
    assert "fork" in outcome["message"] and "'spawn' start method" in outcome["message"]
    assert multiprocessing_outcomes["parent"] == [0.0, 2.0, 4.0]


@pytest.mark.multiprocess
def test_multiprocessing_spawn_child_uses_mydev(multiprocessing_outcomes: Dict[str, Any]) -> None:
    assert multiprocessing_outcomes["spawn"] == {"result": [[2.0, 5.0], 2]}


# --- exit and demo -----------------------------------------------------------------------------


def test_exit_with_queued_kernels_is_clean_and_does_not_wait_for_them() -> None:
    # Three streams held by latches nobody releases (for an hour), with work
    # queued behind them; exiting must not wait for that work. If it did,
    # run_python's time limit would end the test with TimeoutExpired.
    result = run_python(
        """
        import torch
        x = torch.ones(1 << 20, device="mydev")
        for index in range(2):
            with torch.mydev.device(index):
                torch.mydev._debug.hold_stream(timeout_s=3600)
        with torch.mydev.stream(torch.mydev.Stream(0)):
            torch.mydev._debug.hold_stream(timeout_s=3600)
            z = x + 1
        y = x * 2  # queued behind the latch
        print("queued", flush=True)
        """,
        DEFAULTS,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "queued\n"
    assert result.stderr == ""


@pytest.mark.parametrize(
    "use",
    [
        "x = torch.ones(4, device='mydev') * 2",
        "(torch.ones(4, device='mydev', requires_grad=True) * 2).sum().backward()",
    ],
    ids=["forward", "backward"],
)
def test_uncaught_ctrl_c_exits_with_the_sigint_status(use: str) -> None:
    # Python reports an uncaught KeyboardInterrupt by dying of SIGINT; the exit
    # hook must not turn that into exit code 1. The script installs Python's
    # own handler as a terminal's interpreter has it: started from a
    # non-interactive shell's background job (as a CI runner may start the
    # suite), SIGINT arrives ignored and Python keeps it so.
    result = run_python(
        f"""
        import signal, torch
        signal.signal(signal.SIGINT, signal.default_int_handler)
        {use}
        print("used", flush=True)
        signal.raise_signal(signal.SIGINT)
        print("not reached")
        """,
        DEFAULTS,
    )
    assert result.returncode == -signal.SIGINT, (result.returncode, result.stderr)
    assert result.stdout == "used\n"
    assert "KeyboardInterrupt" in result.stderr
    assert "Exception ignored" not in result.stderr


def test_exit_with_the_device_full_is_clean() -> None:
    # The exit hook allocates no device memory: with none left it still runs.
    result = run_python(
        """
        import torch
        w = torch.ones(4, device="mydev", requires_grad=True)
        (w * 2).sum().backward()
        hoard = []
        for size in (1 << 20, 1 << 12, 1):  # until not even one byte fits
            try:
                while True:
                    hoard.append(torch.empty(size, dtype=torch.uint8, device="mydev"))
            except torch.OutOfMemoryError:
                pass
        print("full", flush=True)
        """,
        {**DEFAULTS, "MYDEV_MEMORY_MB": "16", "MYDEV_DEVICE_COUNT": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "full\n"
    assert result.stderr == ""


def test_kernel_failure_unreported_at_exit_is_printed() -> None:
    result = run_python(
        """
        import time, torch, device_ext
        device_ext._C._fail_on_stream("failed-before-exit")
        done = torch.mydev.Event()
        done.record()
        while not done.query():  # the failure has happened; nothing reported it
            time.sleep(0.01)
        print("exiting", flush=True)
        """,
        DEFAULTS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "exiting\n"
    assert (
        "mydev: a kernel failure on mydev:0 was not reported by any synchronizing call "
        "before exit: kernel '_fail' failed on mydev:0: failed-before-exit"
    ) in result.stderr


def test_demo() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "device_ext.demo"],
        capture_output=True,
        text=True,
        env={**os.environ, **DEFAULTS},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    expected_fragments = [
        f"torch {torch.__version__}; mydev available: True, 2 devices",
        "_MydevDeviceProperties(name='mydev simulated device', major=1, minor=0",
        "tensor on mydev:0: [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]  ->  (x*2+1).sum(1) = [9.0, 27.0]",
        "tensor([ 9., 27.], device='mydev:0')",
        "_sleep(200): host returned after ",
        "events on <torch.mydev.Stream device=mydev:0",
        "pinned: True; copy to mydev:1 non_blocking, equal after sync: True",
        "memory_allocated(mydev:0) = ",
        "rng state: 16 bytes (seed, offset) = [1234, 0]",
        "device-side error surfaced at synchronize: mydev error: kernel '_fail' failed on mydev:0: "
        "simulated device fault",
        "device still usable: [2.0, 2.0, 2.0]",
        "torch.save/load with map_location='mydev:1': mydev:1",
        "torch.compile: 3 training steps on mydev in ",
    ]
    assert len(lines) == len(expected_fragments), result.stdout
    for line, fragment in zip(lines, expected_fragments):
        assert fragment in line
    # The demo prints its timings; the tests of streams and events check asynchrony.
    assert re.fullmatch(r"_sleep\(200\): host returned after [\d.]+ ms, synchronize after [\d.]+ ms", lines[4])
    assert re.search(r"elapsed [\d.]+ ms", lines[5])
    compiled_loss, eager_loss = map(float, re.search(r"loss ([\d.]+), eager CPU ([\d.]+)$", lines[12]).groups())
    assert abs(compiled_loss - eager_loss) < 1e-4
