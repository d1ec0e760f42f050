"""The myccl c10d backend: multi-process tests on loopback (see
distributed_harness.py: each rank is a fresh interpreter, every run has a
hard timeout)."""

import os
import time

import torch

from distributed_harness import (check_ok, exit_ok, expected_reduce, init_group, rank_tensor,
                                 reduce_op, run_ranks)


OPS = ["sum", "avg", "product", "min", "max"]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
          torch.int8, torch.uint8, torch.int16]


def _assert_equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.device.type == "mydev", (what, actual.device)
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    # Every rank reduces in the same order, so results are exact.
    assert torch.equal(actual, expected), (what, actual[:8], expected[:8])


def _check_collectives(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    # all_reduce: every op and dtype.
    for dtype in DTYPES:
        for op in OPS:
            parts = [rank_tensor(r, 33, dtype) for r in range(world_size)]
            t = parts[rank].to(dev)
            dist.all_reduce(t, op=reduce_op(op))
            _assert_equal(t, expected_reduce(parts, op), f"all_reduce {op} {dtype}")
    # Larger than one shared-memory slot (4 MiB): chunked.
    big = [rank_tensor(r, (5 << 20) // 4 + 7, torch.float32, salt=1) for r in range(world_size)]
    t = big[rank].to(dev)
    dist.all_reduce(t)
    _assert_equal(t, expected_reduce(big, "sum"), "all_reduce chunked")
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
    expected = torch.cat([rank_tensor(r, big_part.numel(), torch.float32, salt=4)
                          for r in range(world_size)])
    _assert_equal(out, expected, "all_gather_into_tensor chunked")
    # reduce_scatter_tensor (_reduce_scatter_base).
    for dtype, op, numel in [(torch.float32, "sum", 8), (torch.bfloat16, "avg", 8),
                             (torch.int32, "max", 8), (torch.float16, "min", 8),
                             (torch.float32, "product", 8),
                             (torch.float32, "sum", (3 << 20) // 4 + 5)]:
        inputs = [rank_tensor(r, numel * world_size, dtype, salt=5) for r in range(world_size)]
        out = torch.empty(numel, dtype=dtype, device=dev)
        # reduce_scatter_single: torch 2.13's name for reduce_scatter_tensor.
        scatter = dist.reduce_scatter_tensor if dtype == torch.int32 else dist.reduce_scatter_single
        scatter(out, inputs[rank].to(dev), op=reduce_op(op))
        full = expected_reduce(inputs, op)
        _assert_equal(out, full[rank * numel:(rank + 1) * numel],
                      f"reduce_scatter_tensor {op} {dtype} {numel}")
    # reduce, gather, scatter to/from every root; all_to_all_single.
    for root in range(world_size):
        for dtype, op, numel in [(torch.float32, "sum", 9), (torch.bfloat16, "max", 9),
                                 (torch.int64, "product", 9),
                                 (torch.float32, "sum", (5 << 20) // 4)]:
            parts = [rank_tensor(r, numel, dtype, salt=6) for r in range(world_size)]
            t = parts[rank].to(dev)
            dist.reduce(t, dst=root, op=reduce_op(op))
            expected = expected_reduce(parts, op) if rank == root else parts[rank]
            _assert_equal(t, expected, f"reduce {op} {dtype} to {root}")
        parts = [rank_tensor(r, 11, torch.float16, salt=8) for r in range(world_size)]
        gather_list = ([torch.empty(11, dtype=torch.float16, device=dev) for _ in range(world_size)]
                       if rank == root else None)
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
    inputs = [[rank_tensor(r, 6, torch.float32, salt=11 + d) for d in range(world_size)]
              for r in range(world_size)]
    out = torch.empty(6, device=dev)
    dist.reduce_scatter(out, [x.to(dev) for x in inputs[rank]], op=dist.ReduceOp.AVG)
    _assert_equal(out, expected_reduce([inputs[r][rank] for r in range(world_size)], "avg"),
                  "reduce_scatter list")
    for numel in (5, (3 << 20) // 8):
        inputs = [rank_tensor(r, numel * world_size, torch.int32, salt=10) for r in range(world_size)]
        out = torch.empty(numel * world_size, dtype=torch.int32, device=dev)
        dist.all_to_all_single(out, inputs[rank].to(dev))
        expected = torch.cat([inputs[s][rank * numel:(rank + 1) * numel] for s in range(world_size)])
        _assert_equal(out, expected, f"all_to_all_single numel {numel}")
    dist.barrier()


def _check_async(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    # Produced on a side stream: the collective must wait for it (stream order).
    stream = torch.mydev.Stream()
    with torch.mydev.stream(stream):
        import device_ext._C

        device_ext._C._sleep(200)  # the producer is slow: the collective must wait
        t = torch.full((1000,), float(rank + 1), device=dev) * 2
        work = dist.all_reduce(t, async_op=True)
        assert work.wait() is True
        u = t + 1  # ordered after the collective on the same stream
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


# ---------------------------------------------------------------- workers


def _worker_mixed(rank: int, world_size: int) -> None:
    """"mydev:myccl,cpu:gloo": every collective on mydev, CPU through gloo."""
    import torch.distributed as dist

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    # torch 2.13 leaves the default backend type undefined for this spec
    # (and warns "No backend of type 0 found ..."); device_ext sets CUSTOM.
    assert dist.group.WORLD._get_backend_name() == "custom"
    _check_collectives(rank, world_size)
    _check_async(rank, world_size)
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
    _assert_equal(out, expected_reduce(inputs, "sum")[rank * 4:(rank + 1) * 4], "4 ranks rs")
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_ddp(rank: int, world_size: int) -> None:
    """DDP over myccl equals one process training on the concatenated batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    init_group(rank, world_size, "mydev:myccl,cpu:gloo")
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                    torch.nn.Linear(16, 4)).double()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 4)).double().to("mydev")
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
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 4)).to("mydev")
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
        try:
            work.get_future().wait()
        except Exception as error:  # noqa: BLE001
            print("FUTURE ERROR:", str(error).splitlines()[0])
        # Later collectives fail at once rather than deadlock.
        try:
            dist.all_reduce(torch.ones(2, device="mydev"))
        except Exception as error:  # noqa: BLE001
            print("AFTER:", str(error).splitlines()[0])
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
