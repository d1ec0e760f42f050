"""Expandable segments in the caching allocator (PYTORCH_ALLOC_CONF=
expandable_segments:True, as on cuda): a pattern whose cached free pieces
pin whole segments runs out of memory without them and succeeds with them,
because releasing the cache unmaps the pages under free blocks wherever they
lie. Each case runs as a user would: a fresh interpreter importing only torch,
the configuration from the environment or from the allocator-settings API."""

import json

import pytest

MiB = 1 << 20

# With MYDEV_MEMORY_MB=256: 36 blocks of 6 MiB fill twelve 20 MiB segments
# (three blocks each, 240 MiB reserved); freeing two of every three leaves
# 168 MiB cached in segments that each still hold a live block, so without
# expandable segments nothing can be released for a 100 MiB tensor.
FRAGMENTING_PATTERN = """
import json, torch
m = torch.mydev
SETUP
out = {}
blocks = [torch.full((6 * 2**18,), float(i), device="mydev") for i in range(36)]
kept = blocks[::3]
del blocks
out["allocated"] = m.memory_allocated()
out["reserved_before"] = m.memory_reserved()
try:
    big = torch.ones(25 * 2**20, device="mydev")                     # 100 MiB
    out["big_sum"] = big.sum().item()
    out["error"] = None
except torch.OutOfMemoryError as error:
    out["error"] = str(error)
out["kept_ok"] = all(
    torch.equal(t.cpu(), torch.full((6 * 2**18,), float(3 * i))) for i, t in enumerate(kept)
)
stats = m.memory_stats()
out["retries"] = stats["num_alloc_retries"]
out["reserved_after"] = m.memory_reserved()
out["segments"] = [
    (s["is_expandable"], s["total_size"]) for s in m.memory._snapshot()["segments"]
]
del kept
big = None
m.empty_cache()
out["reserved_after_empty_cache"] = m.memory_reserved()
out["then"] = (torch.arange(10, device="mydev") * 2).sum().item()
print(json.dumps(out))
"""


def _run(run_python, setup, **env):
    env = {"MYDEV_MEMORY_MB": "256", "MYDEV_DEVICE_COUNT": "1", **env}
    result = run_python(FRAGMENTING_PATTERN.replace("SETUP", setup), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_fragmented_cache_runs_out_of_memory_without_expandable_segments(python_subprocess):
    out = _run(python_subprocess, "", PYTORCH_ALLOC_CONF="")
    assert out["allocated"] == 12 * 6 * MiB
    assert out["reserved_before"] == 12 * 20 * MiB
    assert out["error"] is not None
    assert "Tried to allocate 100.00 MiB" in out["error"]
    assert out["kept_ok"] is True
    assert out["then"] == 90


@pytest.mark.parametrize("how", ["environment", "settings_api"])
def test_expandable_segments_serve_the_same_pattern(python_subprocess, how):
    if how == "environment":
        out = _run(python_subprocess, "", PYTORCH_ALLOC_CONF="expandable_segments:True")
    else:
        setup = 'torch._C._accelerator_setAllocatorSettings("expandable_segments:True")'
        out = _run(python_subprocess, setup, PYTORCH_ALLOC_CONF="")
    assert out["error"] is None
    assert out["big_sum"] == float(25 * 2**20)
    assert out["kept_ok"] is True
    # Only pages under blocks are mapped: 36 blocks (216 MiB), then the retry
    # unmapped the 24 freed ones and mapped the 100 MiB tensor (plus, at
    # most, a page of the small pool for the sum's result).
    assert out["reserved_before"] == 36 * 6 * MiB
    assert out["retries"] == 1
    assert 172 * MiB <= out["reserved_after"] <= 172 * MiB + 2 * MiB
    # Every segment is a reservation as large as the device.
    assert out["segments"] and all(seg == [True, 256 * MiB] for seg in out["segments"])
    assert out["reserved_after_empty_cache"] == 0
    assert out["then"] == 90


def test_small_and_large_requests_share_no_pages_wrongly(python_subprocess):
    """Blocks that share a 64 KiB page: freeing one keeps the page mapped
    for the other, whose values survive a release of the cache."""
    code = """
    import json, torch
    m = torch.mydev
    a = torch.full((1000,), 1.0, device="mydev")        # small pool, same page
    b = torch.full((1000,), 2.0, device="mydev")
    c = torch.full((3 * 2**18 + 7,), 3.0, device="mydev")  # large pool, odd size
    d = torch.full((3 * 2**18,), 4.0, device="mydev")
    del a, c
    m.empty_cache()
    e = torch.full((1000,), 5.0, device="mydev")
    out = {
        "b": b.sum().item(), "d": d.sum().item(), "e": e.sum().item(),
        "expandable": sorted(s["is_expandable"] for s in m.memory._snapshot()["segments"]),
    }
    print(json.dumps(out))
    """
    result = python_subprocess(
        code, env={"MYDEV_MEMORY_MB": "64", "MYDEV_DEVICE_COUNT": "1", "PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"b": 2000.0, "d": 4.0 * 3 * 2**18, "e": 5000.0, "expandable": [True, True]}
