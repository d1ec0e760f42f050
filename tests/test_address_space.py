"""Device memory has an address space of its own: device pointers are opaque
to the host (a host dereference dies with a message naming the pointer), a
kernel touching unmapped device memory is an illegal-address error, and
fragmentation of the device's memory never causes an out-of-memory error."""

import re
import signal

import pytest
import torch

from mydev_testing import assert_close_to_cpu, run_python


@pytest.mark.parametrize("access", ["read", "write"])
def test_host_dereference_of_a_device_pointer_dies_naming_it(access):
    result = run_python(f"""
        import ctypes, sys
        import torch

        t = torch.arange(64, dtype=torch.float32, device="mydev:1")
        view = t[8:]  # a storage offset: the message names the view's address
        print(hex(view.data_ptr()), hex(t.data_ptr()), flush=True)
        cell = ctypes.c_float.from_address(view.data_ptr())
        if "{access}" == "read":
            print("read", cell.value, flush=True)
        else:
            cell.value = 1.0
        print("survived", flush=True)
    """)
    assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stderr)
    view_address, base_address = result.stdout.split()[:2]
    assert "survived" not in result.stdout and "read" not in result.stdout
    offset = int(view_address, 16) - int(base_address, 16)
    assert offset == 8 * 4
    assert f"mydev: host code dereferenced device pointer {view_address} (mydev:1, offset 0x" in result.stderr, (
        result.stderr
    )
    assert "Device memory is opaque to the host" in result.stderr


def test_kernel_reading_a_storage_resized_to_zero_is_an_illegal_address():
    result = run_python("""
        import torch

        t = torch.arange(1024, dtype=torch.float32, device="mydev")
        v = t[1000:]
        t.untyped_storage().resize_(0)
        for attempt in ("first", "sticky"):
            try:
                (v * 2).cpu() if attempt == "first" else torch.mydev.synchronize()
            except RuntimeError as error:
                print(attempt, "|", error, flush=True)
        print("alive", flush=True)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "alive"
    first, sticky = lines[0], lines[1]
    for line in (first, sticky):
        assert "an illegal memory access was encountered: kernel 'aten::mul" in line, line
        # Near the view's offset from the null storage (0xfa0 bytes).
        address = re.search(r"on mydev:0 touched address (0x[0-9a-f]+), which is not a device address", line)
        assert address is not None and 0xFA0 <= int(address.group(1), 16) < 0x1000 + 0x200, line
    assert first.startswith("first |") and sticky.startswith("sticky |")


def test_fragmented_memory_is_all_usable_after_empty_cache():
    # With one contiguous arena the 200 MiB request failed although 254 MiB
    # were free: the 1-float block sat after the freed 150 MiB.
    result = run_python(
        """
        import torch

        mib = 1 << 20
        big = torch.empty(150 * mib // 4, dtype=torch.float32, device="mydev")
        small = torch.ones(1, device="mydev")
        del big
        torch.mydev.empty_cache()
        large = torch.full((200 * mib // 4,), 3.0, device="mydev")
        print(float(large[-1].item()), float(small.item()), flush=True)
    """,
        env={"MYDEV_MEMORY_MB": "256"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3.0", "1.0"]


def test_kernels_and_copies_reach_device_memory_through_the_driver():
    # Eager kernels, pinned and pageable copies both ways, cross-device
    # copies and views with storage offsets, all with the protection on.
    x = torch.randn(4096, device="mydev:1")
    reference = x.cpu()
    pinned = torch.empty(4096).pin_memory()
    pinned.copy_(x, non_blocking=True)  # on mydev:1's stream
    torch.mydev.synchronize(1)
    assert torch.equal(pinned, reference)
    back = torch.empty(4096, device="mydev:0")
    back.copy_(pinned, non_blocking=True)
    assert_close_to_cpu(back, reference, exact=True)
    moved = x[100:].to("mydev:0")
    assert_close_to_cpu(moved * 2 + 1, reference[100:] * 2 + 1)
    assert_close_to_cpu(torch.arange(10, device="mydev")[3:].sum(), torch.tensor(42))
