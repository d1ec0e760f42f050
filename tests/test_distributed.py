"""The myccl c10d backend: multi-process tests on loopback (see
distributed_harness.py: each rank is a fresh interpreter, every run has a
hard timeout)."""

import os
import re
import time
from typing import Callable

import pytest
import torch

from distributed_harness import check_ok, exit_ok, expected_reduce, init_group, rank_tensor, reduce_op, run_ranks

OPS = ["sum", "avg", "product", "min", "max"]
DTYPES = [
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.float16,
    torch.int32,
    torch.int64,
    torch.int8,
    torch.uint8,
    torch.int16,
]


def _assert_equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.device.type == "mydev", (what, actual.device)
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    # Every rank reduces in the same order, so results are exact.
    assert torch.equal(actual, expected), (what, actual[:8], expected[:8])


def _assert_reduced(actual: torch.Tensor, expected: torch.Tensor, op: str, what: str) -> None:
    """Exact, except what myccl's gloo transport hands to gloo's ring
    (float32/float64 SUM, AVG, PRODUCT): ring order, so only close to the
    rank-order reference (test_distributed_host_path checks that every rank
    gets the same bits)."""
    if (
        os.environ.get("MYCCL_TRANSPORT") == "gloo"
        and op in ("sum", "avg", "product")
        and expected.dtype in (torch.float32, torch.float64)
    ):
        assert actual.device.type == "mydev", (what, actual.device)
        torch.testing.assert_close(actual.cpu(), expected, msg=what)
    else:
        _assert_equal(actual, expected, what)


def _check_collectives(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    # all_reduce: every op and dtype.
    for dtype in DTYPES:
        for op in OPS:
            parts = [rank_tensor(r, 33, dtype) for r in range(world_size)]
            t = parts[rank].to(dev)
            dist.all_reduce(t, op=reduce_op(op))
            _assert_reduced(t, expected_reduce(parts, op), op, f"all_reduce {op} {dtype}")
    # Larger than one shared-memory slot (4 MiB): chunked.
    big = [rank_tensor(r, (5 << 20) // 4 + 7, torch.float32, salt=1) for r in range(world_size)]
    t = big[rank].to(dev)
    dist.all_reduce(t)
    _assert_reduced(t, expected_reduce(big, "sum"), "sum", "all_reduce chunked")
    # broadcast from every root, with a chunked size too.
    for root in range(world_size):
        for numel in (10, (9 << 20) // 8):
            src = rank_tensor(root, numel, torch.float64, salt=2)
            t = (src if rank == root else torch.zeros(numel, dtype=torch.float64)).to(dev)
            dist.broadcast(t, src=root)
            _assert_equal(t, src, f"broadcast root {root} numel {numel}")
    # all_gather (list) and all_gather_into_tensor (_allgather_base).
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        parts = [rank_tensor(r, 17, dtype, salt=3).view(1, 17) for r in range(world_size)]
        outs = [torch.empty(1, 17, dtype=dtype, device=dev) for _ in range(world_size)]
        dist.all_gather(outs, parts[rank].to(dev))
        for r in range(world_size):
            _assert_equal(outs[r], parts[r], f"all_gather {dtype} [{r}]")
        # torch 2.13 deprecates all_gather_into_tensor for all_gather_single;
        # both reach _allgather_base.
        for gather in (dist.all_gather_single, dist.all_gather_into_tensor):
            out = torch.empty(world_size * 17, dtype=dtype, device=dev)
            gather(out, parts[rank].view(-1).to(dev))
            _assert_equal(out, torch.cat(parts, 1).view(-1), f"{gather.__name__} {dtype}")
    big_part = rank_tensor(rank, (3 << 20) // 4, torch.float32, salt=4)
    out = torch.empty(world_size * big_part.numel(), device=dev)
    dist.all_gather_single(out, big_part.to(dev))
    expected = torch.cat([rank_tensor(r, big_part.numel(), torch.float32, salt=4) for r in range(world_size)])
    _assert_equal(out, expected, "all_gather_into_tensor chunked")
    # reduce_scatter_tensor (_reduce_scatter_base).
    for dtype, op, numel in [
        (torch.float32, "sum", 8),
        (torch.bfloat16, "avg", 8),
        (torch.int32, "max", 8),
        (torch.float16, "min", 8),
        (torch.float32, "product", 8),
        (torch.float32, "sum", (3 << 20) // 4 + 5),
    ]:
        inputs = [rank_tensor(r, numel * world_size, dtype, salt=5) for r in range(world_size)]
        out = torch.empty(numel, dtype=dtype, device=dev)
        # reduce_scatter_single: torch 2.13's name for reduce_scatter_tensor.
        scatter = dist.reduce_scatter_tensor if dtype == torch.int32 else dist.reduce_scatter_single
        scatter(out, inputs[rank].to(dev), op=reduce_op(op))
        full = expected_reduce(inputs, op)
        _assert_equal(out, full[rank * numel : (rank + 1) * numel], f"reduce_scatter_tensor {op} {dtype} {numel}")
    # reduce, gather, scatter to/from every root; all_to_all_single.
    for root in range(world_size):
        for dtype, op, numel in [
            (torch.float32, "sum", 9),
            (torch.bfloat16, "max", 9),
            (torch.int64, "product", 9),
            (torch.float32, "sum", (5 << 20) // 4),
        ]:
            parts = [rank_tensor(r, numel, dtype, salt=6) for r in range(world_size)]
            t = parts[rank].to(dev)
            dist.reduce(t, dst=root, op=reduce_op(op))
            expected = expected_reduce(parts, op) if rank == root else parts[rank]
            _assert_equal(t, expected, f"reduce {op} {dtype} to {root}")
        parts = [rank_tensor(r, 11, torch.float16, salt=8) for r in range(world_size)]
        gather_list = (
            [torch.empty(11, dtype=torch.float16, device=dev) for _ in range(world_size)] if rank == root else None
        )
        dist.gather(parts[rank].to(dev), gather_list, dst=root)
        if rank == root:
            for r in range(world_size):
                _assert_equal(gather_list[r], parts[r], f"gather to {root} [{r}]")
        for numel in (13, (3 << 20) // 4):
            chunks = [rank_tensor(100 + d, numel, torch.float32, salt=9) for d in range(world_size)]
            out = torch.empty(numel, device=dev)
            dist.scatter(out, [c.to(dev) for c in chunks] if rank == root else None, src=root)
            _assert_equal(out, chunks[rank], f"scatter from {root} numel {numel}")
    # reduce_scatter (list form).
    inputs = [[rank_tensor(r, 6, torch.float32, salt=11 + d) for d in range(world_size)] for r in range(world_size)]
    out = torch.empty(6, device=dev)
    dist.reduce_scatter(out, [x.to(dev) for x in inputs[rank]], op=dist.ReduceOp.AVG)
    _assert_equal(out, expected_reduce([inputs[r][rank] for r in range(world_size)], "avg"), "reduce_scatter list")
    for numel in (5, (3 << 20) // 8):
        inputs = [rank_tensor(r, numel * world_size, torch.int32, salt=10) for r in range(world_size)]
        out = torch.empty(numel * world_size, dtype=torch.int32, device=dev)
        dist.all_to_all_single(out, inputs[rank].to(dev))
        expected = torch.cat([inputs[s][rank * numel : (rank + 1) * numel] for s in range(world_size)])
        _assert_equal(out, expected, f"all_to_all_single numel {numel}")
    dist.barrier()


def _check_async(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    # Produced on a side stream: the collective must wait for it (stream order).
    stream = torch.mydev.Stream()
    with torch.mydev.stream(stream), torch.mydev._debug.hold_stream():
        # The producer is held: the collective must wait for it.
        t = torch.full((1000,), float(rank + 1), device=dev) * 2
        work = dist.all_reduce(t, async_op=True)
        assert work.wait() is True  # orders this stream after it; does not block the host
        u = t + 1  # ordered after the collective on the same stream
        assert not work.is_completed()
    futs = work.get_future().wait()
    expected = 2.0 * sum(range(1, world_size + 1))
    torch.mydev.synchronize()
    assert work.is_completed()
    assert torch.equal(futs[0].cpu(), torch.full((1000,), expected))
    assert torch.equal(u.cpu(), torch.full((1000,), expected + 1))
    # then(): a callback on the future sees the result.
    t2 = torch.ones(4, device=dev)
    work = dist.all_reduce(t2, async_op=True)
    chained = work.get_future().then(lambda f: f.value()[0] * 10)
    assert torch.equal(chained.wait().cpu(), torch.full((4,), 10.0 * world_size))
    # Several in flight at once, then waited in reverse.
    tensors = [torch.full((64,), float(i + rank), device=dev) for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in tensors]
    for w in reversed(works):
        w.wait()
    for i, x in enumerate(tensors):
        assert torch.equal(x.cpu(), torch.full((64,), float(i * world_size + sum(range(world_size)))))
    bw = dist.barrier(async_op=True)
    bw.wait()
    assert bw.is_completed()


def _check_bad_arguments(rank: int, world_size: int) -> None:
    """Bad calls fail on the calling thread, with the same message whichever
    transport myccl uses, and the group stays usable. Each call is bad on
    every rank alike, so no rank launches a collective its peers skip."""
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    backend = dist.group.WORLD._get_backend(dev)
    bad_root = dist.BroadcastOptions()
    bad_root.rootRank = world_size
    ones = torch.ones(2, device=dev)
    cases = [
        (
            lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool, device=dev)),
            "myccl: allreduce does not reduce bool tensors",
        ),
        (lambda: dist.all_reduce(torch.ones(4, 2, device=dev).t()), "myccl: allreduce takes contiguous tensors"),
        (lambda: backend.allreduce([torch.ones(2)]), "myccl: allreduce takes mydev tensors"),
        (
            lambda: backend.broadcast([ones], bad_root),
            f"myccl: broadcast root {world_size} is not a rank of this group",
        ),
        (
            lambda: dist.all_gather([torch.empty(2, device=dev)], ones),
            f"myccl: allgather needs {world_size} output tensors, got 1",
        ),
        (
            lambda: dist.reduce_scatter(torch.empty(2, device=dev), [ones]),
            f"myccl: reduce_scatter needs {world_size} input tensors, got 1",
        ),
        (
            lambda: dist.all_gather_single(torch.empty(2 * world_size + 1, device=dev), ones),
            "myccl: _allgather_base output must hold world_size * input.numel() elements",
        ),
        (
            lambda: dist.reduce_scatter_single(ones, torch.ones(2 * world_size + 1, device=dev)),
            "myccl: _reduce_scatter_base input must hold world_size * output.numel() elements",
        ),
        (
            lambda: dist.all_to_all([torch.empty(2, device=dev)], [ones]),
            f"myccl: all_to_all takes one input and one output tensor per rank ({world_size}), got 1 and 1",
        ),
        (
            lambda: dist.all_to_all_single(torch.empty((), device=dev), torch.ones((), device=dev)),
            "myccl: all_to_all input needs at least one dimension",
        ),
        (
            lambda: dist.all_to_all_single(
                torch.empty(3, device=dev), torch.ones(3, device=dev), [1] * world_size, [5] * world_size
            ),
            f"myccl: all_to_all input split sizes add up to {5 * world_size} rows, the tensor has 3",
        ),
        (
            lambda: backend.send([ones], rank, 0),
            f"myccl: send on rank {rank}: peer {rank} is not another rank of this group",
        ),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError, match=re.escape(message)):
            call()
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    _assert_equal(t, torch.full((4,), float(world_size)), "all_reduce after bad arguments")


def _report_error(label: str, call: Callable[[], object]) -> None:
    """Prints ``label: <first line of the error>`` for the test to check;
    ``call`` (and the device work it queued) must fail."""
    try:
        call()
        torch.mydev.synchronize()
    except Exception as error:  # noqa: BLE001
        print(f"{label}:", str(error).splitlines()[0])
    else:
        raise AssertionError(f"{label}: no error")


# ---------------------------------------------------------------- workers


def _worker_mixed(rank: int, world_size: int) -> None:
    """ "mydev:myccl,cpu:gloo": every collective on mydev, CPU through gloo."""
    import torch.distributed as dist

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    # torch 2.13 leaves the default backend type undefined for this spec
    # (and warns "No backend of type 0 found ..."); device_ext sets CUSTOM.
    assert dist.group.WORLD._get_backend_name() == "custom"
    _check_collectives(rank, world_size)
    _check_async(rank, world_size)
    _check_bad_arguments(rank, world_size)
    c = torch.full((3,), float(rank))
    dist.all_reduce(c)
    assert torch.equal(c, torch.full((3,), float(sum(range(world_size)))))
    dist.destroy_process_group()
    exit_ok()


def _worker_myccl_then_default(rank: int, world_size: int) -> None:
    """backend="myccl", destroy, then init_process_group() with no backend."""
    import torch.distributed as dist

    init_group(rank, world_size, "myccl")
    assert dist.get_backend() == "myccl"
    t = torch.full((5,), float(rank + 1), device="mydev")
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((5,), float(sum(range(1, world_size + 1)))))
    dist.barrier()
    dist.destroy_process_group()
    # Again, with no backend named: mydev via myccl and CPU via gloo (torch
    # 2.13 alone maps only mydev and names GLOO the default type).
    os.environ["MASTER_PORT"] = os.environ["SPARE_MASTER_PORT"]
    init_group(rank, world_size, None)
    assert dist.group.WORLD._get_backend_name() == "custom"
    assert {d.type for d in dist.group.WORLD._device_types} == {"cpu", "mydev"}
    t = torch.full((5,), float(rank + 1), device="mydev")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert torch.equal(t.cpu(), torch.full((5,), float(world_size)))
    c = torch.full((3,), float(rank))
    dist.all_reduce(c)
    assert torch.equal(c, torch.full((3,), float(sum(range(world_size)))))
    out = [torch.empty(2, device="mydev") for _ in range(world_size)]
    dist.all_gather(out, torch.full((2,), float(rank), device="mydev"))
    assert [o.cpu().tolist() for o in out] == [[float(r)] * 2 for r in range(world_size)]
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_four(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    for dtype, op in [(torch.float32, "sum"), (torch.bfloat16, "avg"), (torch.int64, "min")]:
        parts = [rank_tensor(r, 21, dtype) for r in range(world_size)]
        t = parts[rank].to("mydev")
        dist.all_reduce(t, op=reduce_op(op))
        _assert_equal(t, expected_reduce(parts, op), f"4 ranks all_reduce {op} {dtype}")
    inputs = [rank_tensor(r, 4 * world_size, torch.float32, salt=7) for r in range(world_size)]
    out = torch.empty(4, device="mydev")
    dist.reduce_scatter_single(out, inputs[rank].to("mydev"))
    _assert_equal(out, expected_reduce(inputs, "sum")[rank * 4 : (rank + 1) * 4], "4 ranks rs")
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_ddp(rank: int, world_size: int) -> None:
    """DDP over myccl equals one process training on the concatenated batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).double()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).double().to("mydev")
    model.load_state_dict(reference.state_dict())
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(world_size * 6, 8, generator=g, dtype=torch.float64)
        y = torch.randn(world_size * 6, 4, generator=g, dtype=torch.float64)
        local = slice(rank * 6, (rank + 1) * 6)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[local].to("mydev")), y[local].to("mydev")).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-12, atol=1e-12)
    dist.destroy_process_group()
    exit_ok()


def _worker_fsdp2(rank: int, world_size: int) -> None:
    """FSDP2 (fully_shard over a 1-D mydev mesh) equals one process training
    on the concatenated batch (uses the *_coalesced collectives)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to("mydev")
    model.load_state_dict(reference.state_dict())
    mesh = init_device_mesh("mydev", (world_size,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(2):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(2 * world_size, 8, generator=g)
        y = torch.randn(2 * world_size, 4, generator=g)
        local = slice(rank * 2, (rank + 1) * 2)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[local].to("mydev")), y[local].to("mydev")).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.full_tensor().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    # Functional collectives: all_reduce_coalesced.
    import torch.distributed._functional_collectives as funcol

    a = torch.full((3,), float(rank + 1), device="mydev")
    b = torch.full((5,), float(rank + 2), device="mydev")
    ra, rb = funcol.all_reduce_coalesced([a, b], "sum", dist.group.WORLD)
    assert torch.equal(ra.cpu(), torch.full((3,), float(sum(range(1, world_size + 1)))))
    assert torch.equal(rb.cpu(), torch.full((5,), float(sum(range(2, world_size + 2)))))
    dist.destroy_process_group()
    exit_ok()


def _worker_peer_skips(rank: int, world_size: int) -> None:
    """Rank 1 never calls the collective: rank 0 fails within the timeout."""
    import torch.distributed as dist

    init_group(rank, world_size, "mydev:myccl,cpu:gloo", timeout_s=3)
    if rank == 0:
        t = torch.ones(4, device="mydev")
        work = dist.all_reduce(t, async_op=True)
        blocking = os.environ.get("MYCCL_BLOCKING_WAIT") == "1"
        try:
            work.wait()  # with MYCCL_BLOCKING_WAIT=1 this raises
            assert not blocking, "wait() did not raise under MYCCL_BLOCKING_WAIT=1"
            t.cpu()  # synchronizes: the collective's error is raised here
        except Exception as error:  # noqa: BLE001
            print("ERROR:", str(error).splitlines()[0])
        else:
            raise AssertionError("the all_reduce did not fail")
        assert work.is_completed()
        assert work.exception() is not None
        _report_error("FUTURE ERROR", work.get_future().wait)
        # Later collectives fail at once rather than deadlock.
        _report_error("AFTER", lambda: dist.all_reduce(torch.ones(2, device="mydev")))
        # The device itself still works.
        assert torch.equal((torch.ones(2, device="mydev") * 2).cpu(), torch.full((2,), 2.0))
    # Rank 1 just leaves (no destroy: the group is broken on rank 0).
    exit_ok()


def _worker_never_joins(rank: int, world_size: int) -> None:
    """Only rank 0 of 2 runs: init fails with the store's timeout error."""

    start = time.monotonic()
    try:
        init_group(rank, world_size, "mydev:myccl,cpu:gloo", timeout_s=5)
    except Exception as error:  # noqa: BLE001
        print("ERROR:", type(error).__name__, str(error).splitlines()[0])
    else:
        raise AssertionError("init_process_group succeeded without rank 1")
    print("ELAPSED", round(time.monotonic() - start, 1))
    exit_ok()


# ------------------------------------------------- new collectives, algorithms

# Sizes around the staged/direct crossover (256 KiB of float32 = 65536
# elements), not multiples of the world size, and one larger than a 4 MiB
# staging slot (chunked).
CROSSOVER_NUMELS = [7, 65536 + 3, (5 << 20) // 4 + 7]


def _algorithm_counts() -> dict:
    import torch.distributed as dist

    return dist.group.WORLD._get_backend(torch.device("mydev")).algorithm_counts()


def _check_sized_collectives(rank: int, world_size: int) -> None:
    """all_reduce, broadcast, all_gather and reduce_scatter across the
    algorithm crossover, in several dtypes, against CPU references."""
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    for numel in CROSSOVER_NUMELS:
        for dtype, op in [
            (torch.float32, "sum"),
            (torch.bfloat16, "avg"),
            (torch.float16, "max"),
            (torch.int32, "product"),
            (torch.float32, "min"),
        ]:
            parts = [rank_tensor(r, numel, dtype, salt=20) for r in range(world_size)]
            t = parts[rank].to(dev)
            dist.all_reduce(t, op=reduce_op(op))
            _assert_equal(t, expected_reduce(parts, op), f"all_reduce {op} {dtype} {numel}")
        src = rank_tensor(1, numel, torch.float16, salt=21)
        t = (src if rank == 1 else torch.zeros(numel, dtype=torch.float16)).to(dev)
        dist.broadcast(t, src=1)
        _assert_equal(t, src, f"broadcast {numel}")
        parts = [rank_tensor(r, numel, torch.bfloat16, salt=22) for r in range(world_size)]
        out = torch.empty(world_size * numel, dtype=torch.bfloat16, device=dev)
        dist.all_gather_into_tensor(out, parts[rank].to(dev))
        _assert_equal(out, torch.cat(parts), f"all_gather_into_tensor {numel}")
        # In place, as FSDP2 does: the input is this rank's slice of the output.
        out = (
            torch.cat(parts).to(dev) if rank == 0 else torch.zeros(world_size * numel, dtype=torch.bfloat16, device=dev)
        )
        if rank != 0:
            out[rank * numel : (rank + 1) * numel] = parts[rank].to(dev)
        dist.all_gather_into_tensor(out, out[rank * numel : (rank + 1) * numel])
        _assert_equal(out, torch.cat(parts), f"all_gather in place {numel}")
        outs = [torch.empty(numel, device=dev) for _ in range(world_size)]
        fparts = [rank_tensor(r, numel, torch.float32, salt=23) for r in range(world_size)]
        dist.all_gather(outs, fparts[rank].to(dev))
        for r in range(world_size):
            _assert_equal(outs[r], fparts[r], f"all_gather list {numel} [{r}]")
        for dtype, op in [(torch.float32, "sum"), (torch.float16, "avg"), (torch.int64, "max")]:
            inputs = [rank_tensor(r, numel * world_size, dtype, salt=24) for r in range(world_size)]
            out = torch.empty(numel, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, inputs[rank].to(dev), op=reduce_op(op))
            full = expected_reduce(inputs, op)
            _assert_equal(out, full[rank * numel : (rank + 1) * numel], f"reduce_scatter_tensor {op} {dtype} {numel}")


def _check_all_to_all(rank: int, world_size: int) -> None:
    """all_to_all (list, a different size per pair) and all_to_all_single
    with split sizes (rows of a 2-D tensor), small and large."""
    import torch.distributed as dist

    dev = torch.device("mydev", 0)

    def piece(src: int, dst: int, scale: int, dtype: torch.dtype) -> torch.Tensor:
        return rank_tensor(100 * src + dst, scale * (src + 1) + 3 * dst, dtype, salt=30)

    for scale, dtype in [(5, torch.float32), (70001, torch.bfloat16), (3, torch.int64)]:
        inputs = [piece(rank, d, scale, dtype).to(dev) for d in range(world_size)]
        outputs = [
            torch.empty(piece(s, rank, scale, dtype).numel(), dtype=dtype, device=dev) for s in range(world_size)
        ]
        dist.all_to_all(outputs, inputs)
        for s in range(world_size):
            _assert_equal(outputs[s], piece(s, rank, scale, dtype), f"all_to_all {scale} from {s}")
    for rows_scale in (1, 9000):
        width = 7
        send_rows = [rows_scale * (rank + d + 1) for d in range(world_size)]
        recv_rows = [rows_scale * (s + rank + 1) for s in range(world_size)]
        full = [
            rank_tensor(
                s, sum(rows_scale * (s + d + 1) for d in range(world_size)) * width, torch.float32, salt=31
            ).view(-1, width)
            for s in range(world_size)
        ]
        out = torch.empty(sum(recv_rows), width, device=dev)
        dist.all_to_all_single(out, full[rank].to(dev), output_split_sizes=recv_rows, input_split_sizes=send_rows)
        expected = []
        for s in range(world_size):
            start = sum(rows_scale * (s + d + 1) for d in range(rank))
            expected.append(full[s][start : start + rows_scale * (s + rank + 1)])
        _assert_equal(out, torch.cat(expected), f"all_to_all_single splits x{rows_scale}")


def _check_point_to_point(rank: int, world_size: int) -> None:
    """send/recv with tags, isend/irecv crossing on one stream, and a ring
    exchange through batch_isend_irecv with receives listed first and
    messages larger than a channel holds."""
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    nxt, prv = (rank + 1) % world_size, (rank - 1) % world_size
    # Blocking ring: even ranks send first, odd ranks receive first.
    msg = rank_tensor(rank, 1000, torch.float32, salt=40).to(dev)
    got = torch.empty(1000, device=dev)
    if rank % 2 == 0:
        dist.send(msg, dst=nxt, tag=7)
        dist.recv(got, src=prv, tag=7)
    else:
        dist.recv(got, src=prv, tag=7)
        dist.send(msg, dst=nxt, tag=7)
    _assert_equal(got, rank_tensor(prv, 1000, torch.float32, salt=40), "send/recv ring")
    # Every rank sends, then receives, on the one communication stream: the
    # sends are eager, so this cannot deadlock.
    for numel in (0, 3, 60000):
        out = rank_tensor(rank, numel, torch.int16, salt=41).to(dev)
        into = torch.empty(numel, dtype=torch.int16, device=dev)
        works = [dist.isend(out, dst=nxt), dist.irecv(into, src=prv)]
        for work in works:
            work.wait()
        _assert_equal(into, rank_tensor(prv, numel, torch.int16, salt=41), f"isend/irecv {numel}")
    # batch_isend_irecv: receives first in the list, 1 MiB messages (more
    # than the 256 KiB a channel holds), two messages per pair in order.
    for numel in (17, 1 << 18):
        a = rank_tensor(rank, numel, torch.float32, salt=42).to(dev)
        b = rank_tensor(rank, numel, torch.float32, salt=43).to(dev)
        ra, rb = torch.empty_like(a), torch.empty_like(b)
        ops = [
            dist.P2POp(dist.irecv, ra, prv),
            dist.P2POp(dist.irecv, rb, prv),
            dist.P2POp(dist.isend, a, nxt),
            dist.P2POp(dist.isend, b, nxt),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        _assert_equal(ra, rank_tensor(prv, numel, torch.float32, salt=42), f"batch a {numel}")
        _assert_equal(rb, rank_tensor(prv, numel, torch.float32, salt=43), f"batch b {numel}")


def _check_peer_memory_runtime(rank: int) -> None:
    """The driver's IPC handles: rank 0 shares a device buffer, rank 1 maps
    it and reads what rank 0 wrote (gloo on CPU carries the handle)."""
    import torch.distributed as dist

    from device_ext import _C

    assert torch.mydev.get_device_properties(0).can_map_peer_memory
    data = torch.arange(4096, dtype=torch.int32, device="mydev") * (rank + 3)
    torch.mydev.synchronize()
    handle = _C._ipc_get_mem_handle(data)
    # A handle names the whole allocation (the caching allocator's block);
    # this process's own handle opens to its own block.
    offset = data.data_ptr() - _C._ipc_open_mem_handle(handle)
    assert offset >= 0
    shared = [None, None]
    dist.all_gather_object(shared, (handle, offset))
    peer = 1 - rank
    peer_handle, peer_offset = shared[peer]
    ptr = _C._ipc_open_mem_handle(peer_handle)
    again = _C._ipc_open_mem_handle(peer_handle)  # the cached mapping
    assert again == ptr
    # A device pointer: the host reads it through a copy, never directly.
    seen = torch.frombuffer(bytearray(_C._ipc_read(ptr + peer_offset, 4096 * 4)), dtype=torch.int32)
    assert torch.equal(seen, torch.arange(4096, dtype=torch.int32) * (peer + 3))
    _C._ipc_close_mem_handle(again)
    _C._ipc_close_mem_handle(ptr)
    try:
        _C._ipc_open_mem_handle(b"x" * 64)
    except RuntimeError as error:
        assert "not a handle" in str(error), error
    else:
        raise AssertionError("a garbage handle opened")
    dist.barrier()  # rank 0 keeps `data` until rank 1 has read it


def _worker_new_collectives(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    if world_size == 2:
        _check_peer_memory_runtime(rank)
    _check_sized_collectives(rank, world_size)
    _check_all_to_all(rank, world_size)
    _check_point_to_point(rank, world_size)
    counts = _algorithm_counts()
    expected_direct = os.environ.get("EXPECT_DIRECT", "1") == "1"
    assert (counts["direct"] > 0) == expected_direct, counts
    assert counts["staged"] > 0, counts
    print("COUNTS", counts)
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_no_peer_memory(rank: int, world_size: int) -> None:
    """MYDEV_PEER_MEMORY=0: the driver refuses to map peers, so every
    collective stages, even with MYCCL_ALGO=direct."""
    import torch.distributed as dist

    from device_ext import _C

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    assert not torch.mydev.get_device_properties(0).can_map_peer_memory
    data = torch.ones(16, device="mydev")
    handles = [None] * world_size
    dist.all_gather_object(handles, _C._ipc_get_mem_handle(data))
    try:
        _C._ipc_open_mem_handle(handles[1 - rank])
    except RuntimeError as error:
        assert "cannot map peer memory" in str(error), error
    else:
        raise AssertionError("mapped a peer with MYDEV_PEER_MEMORY=0")
    _check_sized_collectives(rank, world_size)
    _check_all_to_all(rank, world_size)
    assert _algorithm_counts()["direct"] == 0, _algorithm_counts()
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_mismatch(rank: int, world_size: int) -> None:
    """Mismatched calls fail on every rank with an error naming both sides;
    the process and new groups stay usable."""
    import torch.distributed as dist

    init_group(rank, world_size, "mydev:myccl,cpu:gloo", timeout_s=20)
    groups = [dist.new_group(list(range(world_size))) for _ in range(3)]
    # Sizes: 1000 vs 999 elements, small (staged) and large (direct).
    for label, numel, group in [("SIZE", 1000, None), ("BIGSIZE", 1 << 20, groups[0])]:
        _report_error(
            label,
            lambda numel=numel, group=group: dist.all_reduce(torch.ones(numel - rank, device="mydev"), group=group),
        )
    # Different collectives.
    if rank == 0:
        _report_error("KIND", lambda: dist.all_reduce(torch.ones(8, device="mydev"), group=groups[1]))
    else:
        _report_error("KIND", lambda: dist.broadcast(torch.ones(8, device="mydev"), src=0, group=groups[1]))
    # A receive of another size than was sent. wait() runs after the kernel
    # has failed, which a loaded machine does by chance: it must report the
    # failure once, not leave it on the device for the next synchronizing
    # call (the check below) to raise again.
    if rank == 0:
        dist.send(torch.ones(10, device="mydev"), dst=1, group=groups[2])
        torch.mydev.synchronize()
    elif rank == 1:
        work = dist.irecv(torch.empty(12, device="mydev"), src=0, group=groups[2])
        while not work.is_completed():
            time.sleep(0.01)
        _report_error("P2P", work.wait)
    # The device still works, and a fresh group does too.
    assert torch.equal((torch.ones(2, device="mydev") * 2).cpu(), torch.full((2,), 2.0))
    fresh = dist.new_group(list(range(world_size)))
    t = torch.ones(4, device="mydev")
    dist.all_reduce(t, group=fresh)
    assert torch.equal(t.cpu(), torch.full((4,), float(world_size)))
    exit_ok()


# ---------------------------------------------------------------- tests


def test_registered_lazily_without_importing_more():
    import torch.distributed as dist

    assert "MYCCL" in dist.Backend._plugins
    assert dist.Backend.default_device_backend_map["mydev"] == "myccl"
    assert "mydev" in dist.Backend.backend_capability["myccl"]


def test_collectives_mixed_backend_two_ranks():
    check_ok(run_ranks(__name__, "mixed", 2))


def test_myccl_only_then_default_backend_reinit():
    check_ok(run_ranks(__name__, "myccl_then_default", 2))


def test_four_ranks():
    check_ok(run_ranks(__name__, "four", 4))


def test_ddp_matches_single_process():
    check_ok(run_ranks(__name__, "ddp", 2))


def test_fsdp2_matches_single_process():
    check_ok(run_ranks(__name__, "fsdp2", 2))


def test_peer_that_skips_a_collective_fails_with_clear_error():
    results = run_ranks(__name__, "peer_skips", 2)
    check_ok(results)
    out = results[0].stdout
    assert "ERROR: " in out, out
    error_line = next(line for line in out.splitlines() if line.startswith("ERROR:"))
    assert "allreduce timed out" in error_line and "rank 0" in error_line, error_line
    assert "waiting for rank 1" in error_line, error_line
    assert "FUTURE ERROR:" in out and "allreduce" in out.split("FUTURE ERROR:")[1], out
    assert "AFTER:" in out and "earlier collective" in out.split("AFTER:")[1], out


def test_blocking_wait_raises_from_wait():
    results = run_ranks(__name__, "peer_skips", 2, env={"MYCCL_BLOCKING_WAIT": "1"})
    check_ok(results)
    out = results[0].stdout
    assert "ERROR: myccl: allreduce timed out" in out, out


def test_rank_that_never_joins_fails_init_within_timeout():
    results = run_ranks(__name__, "never_joins", 2, ranks=[0], timeout=60)
    check_ok(results)
    assert "ERROR:" in results[0].stdout, results[0].stdout


def test_new_collectives_and_point_to_point_two_ranks():
    results = run_ranks(__name__, "new_collectives", 2)
    check_ok(results)


def test_new_collectives_and_point_to_point_four_ranks():
    check_ok(run_ranks(__name__, "new_collectives", 4))


def test_staging_when_peer_memory_cannot_be_mapped():
    check_ok(run_ranks(__name__, "no_peer_memory", 2, env={"MYDEV_PEER_MEMORY": "0", "MYCCL_ALGO": "direct"}))


def test_mismatched_calls_fail_on_every_rank_naming_both_sides():
    results = run_ranks(__name__, "mismatch", 2)
    check_ok(results)
    out = [r.stdout for r in results]
    assert "SIZE: myccl: allreduce on rank 1 has 999 float elements, rank 0 has 1000" in out[1], out[1]
    assert "SIZE: myccl: allreduce on rank 0 has 1000 float elements, rank 1 has 999" in out[0], out[0]
    kinds = []
    for rank in (0, 1):
        assert f"BIGSIZE: myccl: allreduce on rank {rank} has" in out[rank], out[rank]
        kinds.append(next(line for line in out[rank].splitlines() if line.startswith("KIND:")))
    # Both ranks fail. At least one names both calls; on a loaded machine
    # the other may see that rank's abort before it compared descriptors
    # itself, and then names the rank that failed.
    named = [k for k in kinds if "ALLREDUCE" in k and "BROADCAST" in k]
    assert named, kinds
    for rank, kind in enumerate(kinds):
        assert kind in named or f"rank {1 - rank} failed a collective" in kind, kinds
    p2p = next(line for line in out[1].splitlines() if line.startswith("P2P:"))
    assert "expected tag 0 with 12" in p2p and "sent tag 0 with 10" in p2p, p2p
