"""mydev tensors between processes (torch.multiprocessing), as cuda tensors go
through CUDA IPC: the receiver gets a mydev tensor on the same device index
over the sender's memory. The cross-process tests run plain scripts (they
import only torch) with the 'spawn' start method, in fresh interpreters."""

import json
import os
import pickle
import subprocess
import sys
import textwrap
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, Dict

import pytest
import torch

from mydev_testing import assert_device_still_usable, needs_two_devices

pytestmark = pytest.mark.multiprocess


def run_script(tmp_path: Path, code: str, **env: str) -> Dict[str, Any]:
    """Runs ``code`` as a script file (spawned children import its functions
    from it) with ``env`` added, expects exit 0 and returns the JSON of its
    last stdout line."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@needs_two_devices
def test_queue_shares_memory_both_devices_and_views(tmp_path: Path) -> None:
    seen = run_script(
        tmp_path,
        """
        import json, torch, torch.multiprocessing as mp

        def child(inbox, outbox):
            x, view = inbox.get()
            seen = {"device": str(x.device), "view_device": str(view.device),
                    "x": x.cpu().tolist(), "view": view.cpu().tolist(),
                    "view_offset": view.storage_offset(),
                    "one_storage": view.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()}
            try:  # resizing would reallocate, silently ending the sharing
                x.untyped_storage().resize_(0)
            except RuntimeError as err:
                seen["resize"] = str(err)
            view.mul_(-1)  # the parent sees this write once we synchronized
            torch.mydev.synchronize(x.device)
            outbox.put(seen)

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            results = {}
            for device in ("mydev:0", "mydev:1"):
                x = torch.arange(12, dtype=torch.float32, device=device).reshape(3, 4)
                view = x[1:, 1:3]
                inbox, outbox = ctx.Queue(), ctx.Queue()
                process = ctx.Process(target=child, args=(inbox, outbox))
                process.start()
                inbox.put((x, view))
                seen = outbox.get(timeout=120)
                process.join(120)
                seen["parent_after"] = x.cpu().tolist()
                seen["exitcode"] = process.exitcode
                results[device] = seen
            print(json.dumps(results))
        """,
    )
    expected_after = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    expected_after[1:, 1:3] *= -1
    for device in ("mydev:0", "mydev:1"):
        got = seen[device]
        assert got["device"] == device and got["view_device"] == device
        assert got["x"] == torch.arange(12.0).reshape(3, 4).tolist()
        assert got["view"] == [[5.0, 6.0], [9.0, 10.0]] and got["view_offset"] == 5
        assert got["one_storage"] is True
        assert "not resizable" in got["resize"]
        assert got["parent_after"] == expected_after.tolist()
        assert got["exitcode"] == 0


@pytest.mark.parametrize("launch_blocking", ["0", "1"])
def test_consumer_sees_the_producers_queued_writes(tmp_path: Path, launch_blocking: str) -> None:
    # The fill is still queued behind a device sleep when the tensor is sent;
    # the consumer's tensor must not be returned before the fill ran.
    seen = run_script(
        tmp_path,
        """
        import json, torch, torch.multiprocessing as mp

        def child(inbox, outbox):
            torch.zeros(1, device="mydev")
            outbox.put("ready")
            x = inbox.get()
            outbox.put(x.cpu().tolist())

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            inbox, outbox = ctx.Queue(), ctx.Queue()
            process = ctx.Process(target=child, args=(inbox, outbox))
            process.start()
            assert outbox.get(timeout=120) == "ready"
            x = torch.zeros(4, device="mydev")
            torch.mydev.synchronize()
            torch.mydev._sleep(2000)
            x.fill_(7.0)  # queued behind the sleep
            inbox.put(x)
            seen = outbox.get(timeout=120)
            process.join(120)
            print(json.dumps(seen))
        """,
        MYDEV_LAUNCH_BLOCKING=launch_blocking,
    )
    assert seen == [7.0] * 4


def test_consumer_outlives_the_producers_reference(tmp_path: Path) -> None:
    # The parent drops its tensor and reuses the device's memory while the
    # child still holds the shared one: the child must still read its values;
    # once the child released it, the parent gets the memory back.
    seen = run_script(
        tmp_path,
        """
        import json, torch, torch.multiprocessing as mp

        def child(inbox, parent_dropped, outbox):
            x = inbox.get()
            parent_dropped.wait(120)
            outbox.put({"device": str(x.device), "sum": x.sum().item(), "first": x[:3].cpu().tolist()})
            del x
            torch.mydev.synchronize()
            outbox.put("released")

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            baseline = torch.mydev.memory_allocated(1)
            x = torch.arange(1 << 16, dtype=torch.float32, device="mydev:1")
            inbox, parent_dropped, outbox = ctx.Queue(), ctx.Event(), ctx.Queue()
            process = ctx.Process(target=child, args=(inbox, parent_dropped, outbox))
            process.start()
            inbox.put(x)
            inbox.close()
            inbox.join_thread()  # x was pickled: the child can now get it
            del x
            torch.mydev.empty_cache()
            filler = [torch.full((1 << 16,), -1.0, device="mydev:1") for _ in range(4)]
            seen = {"held_after_drop": torch.mydev.ipc_collect()}
            parent_dropped.set()
            seen["child"] = outbox.get(timeout=120)
            seen["release"] = outbox.get(timeout=120)
            process.join(120)
            seen["exitcode"] = process.exitcode
            seen["held_after_release"] = torch.mydev.ipc_collect()
            del filler
            torch.mydev.empty_cache()
            seen["back_to_baseline"] = torch.mydev.memory_allocated(1) == baseline
            print(json.dumps(seen))
        """,
    )
    n = 1 << 16
    assert seen["held_after_drop"] == 1
    assert seen["child"] == {"device": "mydev:1", "sum": float(n * (n - 1) // 2), "first": [0.0, 1.0, 2.0]}
    assert seen["release"] == "released" and seen["exitcode"] == 0
    assert seen["held_after_release"] == 0
    assert seen["back_to_baseline"] is True


def test_dataloader_workers_produce_mydev_tensors(tmp_path: Path) -> None:
    # With 'spawn' (as cuda), workers make mydev batches the main process
    # receives on the same device; with 'fork' after mydev was used, the
    # worker's error (use 'spawn') reaches the main process.
    seen = run_script(
        tmp_path,
        """
        import json, torch
        from torch.utils.data import DataLoader, Dataset

        class Squares(Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                return torch.full((3,), float(i), device="mydev:1") ** 2

        if __name__ == "__main__":
            torch.ones(1, device="mydev")  # the main process uses mydev before the workers start
            loader = DataLoader(Squares(), batch_size=2, num_workers=2, multiprocessing_context="spawn")
            batches = list(loader)  # kept after the workers exited
            seen = {"devices": sorted({str(b.device) for b in batches}),
                    "batches": [b.cpu().tolist() for b in batches]}
            try:
                list(DataLoader(Squares(), batch_size=2, num_workers=1, multiprocessing_context="fork"))
            except RuntimeError as err:
                seen["fork_error"] = str(err)
            print(json.dumps(seen))
        """,
    )
    expected = [[[float(i * i)] * 3, [float((i + 1) ** 2)] * 3] for i in range(0, 8, 2)]
    assert seen["devices"] == ["mydev:1"]
    assert seen["batches"] == expected
    assert "Cannot re-initialize mydev in forked subprocess" in seen["fork_error"]
    assert "'spawn' start method" in seen["fork_error"]


def test_spawn_arguments_and_parameters(tmp_path: Path) -> None:
    seen = run_script(
        tmp_path,
        """
        import json, torch, torch.multiprocessing as mp

        def child(rank, weight, empty, outbox):
            outbox.put({"type": type(weight).__name__, "requires_grad": weight.requires_grad,
                        "device": str(weight.device), "values": weight.detach().cpu().tolist(),
                        "empty": [str(empty.device), empty.numel()]})
            # exits still holding its arguments: exit releases them

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            outbox = ctx.SimpleQueue()
            weight = torch.nn.Parameter(torch.linspace(0, 1, 5, device="mydev:1"))
            empty = torch.empty(0, device="mydev:1")
            mp.spawn(child, args=(weight, empty, outbox), nprocs=1, join=True)
            seen = outbox.get()
            del weight
            seen["held_after_child_exit"] = torch.mydev.ipc_collect()
            print(json.dumps(seen))
        """,
    )
    assert seen == {
        "type": "Parameter",
        "requires_grad": True,
        "device": "mydev:1",
        "values": torch.linspace(0, 1, 5).tolist(),
        "empty": ["mydev:1", 0],
        "held_after_child_exit": 0,
    }


# --- in this process: the pickling itself ---------------------------------------------------


def test_round_trip_in_one_process_is_the_same_storage() -> None:
    x = torch.randn(4, 4, device="mydev")
    y = pickle.loads(ForkingPickler.dumps(x[1:]))
    assert y.device == x.device and y.storage_offset() == 4
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y.fill_(3.0)
    expected = x.cpu()
    expected[1:] = 3.0
    assert torch.equal(x.cpu(), expected)


def test_bad_inputs_are_refused_clearly() -> None:
    with pytest.raises(RuntimeError, match="Cannot pickle mydev storage; try pickling a mydev tensor instead"):
        ForkingPickler.dumps(torch.ones(2, device="mydev").untyped_storage())
    leaf = torch.ones(2, device="mydev", requires_grad=True)
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(leaf * 2)
    assert_device_still_usable()


def test_share_memory_is_a_no_op_as_on_cuda() -> None:
    # cuda: share_memory_() returns the tensor unchanged and is_shared() is
    # True, since device memory is sent by handle without moving it. mydev now
    # does the same, and is_shared() is true in that sense.
    x = torch.arange(4.0, device="mydev")
    before = x.data_ptr()
    assert x.share_memory_() is x and x.data_ptr() == before
    assert x.is_shared() is True


def test_cpu_tensors_still_use_torchs_own_sharing() -> None:
    x = torch.arange(4.0)
    y = pickle.loads(ForkingPickler.dumps(x))
    assert y.device.type == "cpu" and torch.equal(x, y) and y.is_shared()
