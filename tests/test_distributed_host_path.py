"""myccl's cross-host path (gloo's TCP transport on host views of device
memory), forced on one machine with MYCCL_TRANSPORT=gloo, and the transport
selection. Multi-process, see distributed_harness.py."""

import os
from datetime import timedelta

import pytest
import torch

from distributed_harness import check_ok, exit_ok, expected_reduce, init_group, rank_tensor, reduce_op, run_ranks

GLOO = {"MYCCL_TRANSPORT": "gloo"}
SPEC = "mydev:myccl,cpu:gloo"


def _backend_class() -> str:
    import torch.distributed as dist

    return type(dist.group.WORLD._get_backend(torch.device("mydev"))).__name__


def _assert_equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.device.type == "mydev", (what, actual.device)
    assert torch.equal(actual.cpu(), expected), (what, actual.cpu()[:8], expected[:8])


def _check_ring_order_identical_on_every_rank(rank: int, world_size: int) -> None:
    """float32/float64 SUM, AVG and PRODUCT go through gloo's ring: ring
    order rather than rank order, but the same bits on every rank."""
    import torch.distributed as dist

    dev = torch.device("mydev", 0)
    for dtype in (torch.float32, torch.float64):
        for op in ("sum", "avg", "product"):
            for numel in (5, 1001, (1 << 18) + 3):
                parts = [rank_tensor(r, numel, dtype, salt=30) for r in range(world_size)]
                t = parts[rank].to(dev)
                dist.all_reduce(t, op=reduce_op(op))
                what = f"ring all_reduce {op} {dtype} {numel}"
                torch.testing.assert_close(t.cpu(), expected_reduce(parts, op), msg=what)
                results = [torch.empty_like(t) for _ in range(world_size)]
                dist.all_gather(results, t)  # moves bytes only
                mine = t.cpu().view(torch.uint8)
                for r, other in enumerate(results):
                    assert torch.equal(other.cpu().view(torch.uint8), mine), (what, r)


# ---------------------------------------------------------------- workers


def _worker_collectives(rank: int, world_size: int) -> None:
    """The shared-memory backend's collective checks, bit for bit, over gloo."""
    import torch.distributed as dist
    from test_distributed import _check_async, _check_bad_arguments, _check_collectives

    init_group(rank, world_size, SPEC)
    assert _backend_class() == "GlooTransportBackend", _backend_class()
    _check_collectives(rank, world_size)
    _check_async(rank, world_size)
    _check_bad_arguments(rank, world_size)
    dev = torch.device("mydev", 0)
    # Fewer elements than ranks: some ranks own empty segments of the
    # all-reduce; int16 and half reductions gloo itself lacks or does in half.
    # Empty tensors too, through gloo's ring (int64, float32 AVG) and not.
    for numel, dtype, op in [
        (1, torch.float32, "sum"),
        (3, torch.int16, "product"),
        (7, torch.float16, "avg"),
        (0, torch.int64, "sum"),
        (0, torch.float32, "avg"),
        (0, torch.int16, "max"),
    ]:
        parts = [rank_tensor(r, numel, dtype, salt=20) for r in range(world_size)]
        t = parts[rank].to(dev)
        dist.all_reduce(t, op=reduce_op(op))
        _assert_equal(t, expected_reduce(parts, op), f"all_reduce {numel} {dtype} {op}")
    _check_ring_order_identical_on_every_rank(rank, world_size)
    # Float MIN/MAX stay with myccl's reduction, which lets a NaN win as
    # torch.minimum/maximum do (gloo's would drop it).
    for op in ("min", "max"):
        parts = [rank_tensor(r, 9, torch.float32, salt=21) for r in range(world_size)]
        for r, part in enumerate(parts):
            part[r] = float("nan")
        t = parts[rank].to(dev)
        dist.all_reduce(t, op=reduce_op(op))
        expected = expected_reduce(parts, op)
        assert expected[:world_size].isnan().all()
        assert torch.equal(t.cpu().isnan(), expected.isnan()), (op, t.cpu())
        _assert_equal(t[world_size:], expected[world_size:], f"all_reduce {op} with NaN")
    # Bool moves as bytes (broadcast, all_gather).
    flags = torch.tensor([True, False, rank % 2 == 0], device=dev)
    dist.broadcast(flags, src=world_size - 1)
    _assert_equal(flags, torch.tensor([True, False, (world_size - 1) % 2 == 0]), "bool")
    # all_to_all_single with uneven split sizes: rank r sends s + 1 rows of
    # width 2 to rank s, each row holding (sender, receiver).
    send_splits = [s + 1 for s in range(world_size)]
    recv_splits = [rank + 1] * world_size
    inp = torch.cat([torch.tensor([[rank, s]] * (s + 1)) for s in range(world_size)]).to(dev)
    out = torch.empty(sum(recv_splits), 2, dtype=inp.dtype, device=dev)
    dist.all_to_all_single(out, inp, recv_splits, send_splits)
    _assert_equal(
        out, torch.cat([torch.tensor([[s, rank]] * (rank + 1)) for s in range(world_size)]), "all_to_all_single splits"
    )
    # all_to_all (list), with a different size per destination.
    ins = [torch.full((d + 1,), float(10 * rank + d), device=dev) for d in range(world_size)]
    outs = [torch.empty(rank + 1, device=dev) for _ in range(world_size)]
    dist.all_to_all(outs, ins)
    for s in range(world_size):
        _assert_equal(outs[s], torch.full((rank + 1,), float(10 * s + rank)), f"all_to_all [{s}]")
    # Functional collectives (the *_coalesced variants).
    import torch.distributed._functional_collectives as funcol

    a = torch.full((3,), float(rank + 1), device=dev)
    b = torch.full((5,), float(rank + 2), device=dev)
    ra, rb = funcol.all_reduce_coalesced([a, b], "sum", dist.group.WORLD)
    _assert_equal(ra, torch.full((3,), float(sum(range(1, world_size + 1)))), "coalesced a")
    _assert_equal(rb, torch.full((5,), float(sum(range(2, world_size + 2)))), "coalesced b")
    gathered = funcol.all_gather_tensor(torch.full((2,), float(rank), device=dev), 0, dist.group.WORLD)
    _assert_equal(gathered, torch.arange(world_size).float().repeat_interleave(2), "funcol ag")
    dist.destroy_process_group()
    exit_ok()


def _worker_send_recv(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    init_group(rank, world_size, SPEC)
    dev = torch.device("mydev", 0)
    big = (3 << 20) // 8
    # Blocking send/recv, rank 0 to each other rank.
    if rank == 0:
        for dst in range(1, world_size):
            dist.send(torch.arange(big, dtype=torch.float64, device=dev) + dst, dst=dst)
    else:
        t = torch.empty(big, dtype=torch.float64, device=dev)
        dist.recv(t, src=0)
        _assert_equal(t, torch.arange(big, dtype=torch.float64) + rank, "recv")
    # isend/irecv with tags, waited in reverse.
    if rank == 0:
        works = [dist.isend(torch.full((5,), float(tag), device=dev), dst=1, tag=tag) for tag in (3, 4)]
    elif rank == 1:
        bufs = [torch.empty(5, device=dev) for _ in range(2)]
        works = [dist.irecv(buf, src=0, tag=tag) for buf, tag in zip(bufs, (3, 4))]
    if rank in (0, 1):
        for work in reversed(works):
            work.wait()
    if rank == 1:
        for buf, tag in zip(bufs, (3, 4)):
            _assert_equal(buf, torch.full((5,), float(tag)), f"irecv tag {tag}")
    # batch_isend_irecv: a ring in both directions, every rank sending
    # first (a gloo send completes only once the receive is posted).
    nxt, prv = (rank + 1) % world_size, (rank - 1) % world_size
    to_next = torch.full((big,), float(rank), device=dev)
    to_prev = torch.full((7,), float(-rank), device=dev)
    from_prev = torch.empty(big, device=dev)
    from_next = torch.empty(7, device=dev)
    ops = [
        dist.P2POp(dist.isend, to_next, nxt),
        dist.P2POp(dist.isend, to_prev, prv),
        dist.P2POp(dist.irecv, from_prev, prv),
        dist.P2POp(dist.irecv, from_next, nxt),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    _assert_equal(from_prev, torch.full((big,), float(prv)), "ring from previous")
    _assert_equal(from_next, torch.full((7,), float(-nxt)), "ring from next")
    with pytest.raises(RuntimeError, match=f"peer {world_size + 3} is not another rank"):
        dist.send(torch.ones(2, device=dev), dst=world_size + 3)
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_split_mesh(rank: int, world_size: int) -> None:
    """A 2-D mesh from a group created with device_id= (torch splits it)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    device = torch.device("mydev", rank % torch.mydev.device_count())
    torch.mydev.set_device(device)
    dist.init_process_group(SPEC, rank=rank, world_size=world_size, device_id=device)
    mesh = init_device_mesh("mydev", (2, world_size // 2), mesh_dim_names=("dp", "tp"))
    for dim, peers in (("dp", [rank % 2, rank % 2 + 2]), ("tp", [rank // 2 * 2, rank // 2 * 2 + 1])):
        group = mesh.get_group(dim)
        backend = group._get_backend(torch.device("mydev"))
        assert type(backend).__name__ == "GlooTransportBackend", type(backend).__name__
        t = torch.full((6,), float(rank + 1), device=device)
        dist.all_reduce(t, group=group)
        _assert_equal(t, torch.full((6,), float(sum(p + 1 for p in peers))), f"{dim} all_reduce")
        out = [torch.empty(2, device=device) for _ in peers]
        dist.all_gather(out, torch.full((2,), float(rank), device=device), group=group)
        for o, p in zip(out, peers):
            _assert_equal(o, torch.full((2,), float(p)), f"{dim} all_gather")
        # The group's CPU (gloo) backend was split too.
        c = torch.full((2,), float(rank))
        dist.all_reduce(c, group=group)
        assert torch.equal(c, torch.full((2,), float(sum(peers)))), (dim, c)
    dist.barrier()
    dist.destroy_process_group()
    exit_ok()


def _worker_ddp(rank: int, world_size: int) -> None:
    """test_distributed's check (DDP equals one process on the whole batch)."""
    from test_distributed import _worker_ddp as ddp_worker

    ddp_worker(rank, world_size)


def _report_failed_all_reduce(numel: int) -> None:
    """Prints the error an all_reduce of ``numel`` elements must fail with
    (``ERROR: ...``). A hang ends at run_ranks' time limit."""
    import torch.distributed as dist
    from test_distributed import _report_error

    _report_error("ERROR", lambda: dist.all_reduce(torch.ones(numel, device="mydev")))


def _worker_peer_dies(rank: int, world_size: int) -> None:
    """The last rank exits after one collective: the others fail with a
    clear error within the timeout, and fail at once afterwards."""
    import torch.distributed as dist
    from test_distributed import _report_error

    init_group(rank, world_size, SPEC, timeout_s=5)
    t = torch.ones(4, device="mydev")
    dist.all_reduce(t)
    if rank == world_size - 1:
        os._exit(0)  # dies without a word to the others
    _report_failed_all_reduce(1 << 16)
    _report_error("AFTER", lambda: dist.all_reduce(torch.ones(2, device="mydev")))
    assert torch.equal((torch.ones(2, device="mydev") * 2).cpu(), torch.full((2,), 2.0))
    exit_ok()


def _worker_peer_stalls(rank: int, world_size: int) -> None:
    """Rank 1 stays alive but skips the collective: rank 0 times out. Rank 1
    waits on the store until rank 0 has reported, however long that takes."""
    import torch.distributed as dist

    init_group(rank, world_size, SPEC, timeout_s=2)
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        store.wait(["rank0_reported"], timedelta(seconds=120))
        os._exit(0)
    _report_failed_all_reduce(8)
    store.set("rank0_reported", "1")
    exit_ok()


def _worker_bad_transport(rank: int, world_size: int) -> None:
    try:
        init_group(rank, world_size, SPEC, timeout_s=10)
    except Exception as error:  # noqa: BLE001
        print("ERROR:", type(error).__name__, str(error).splitlines()[0])
    else:
        raise AssertionError("init_process_group accepted a bad MYCCL_TRANSPORT")
    exit_ok()


def _worker_transport_name(rank: int, world_size: int) -> None:
    import torch.distributed as dist

    init_group(rank, world_size, SPEC)
    print("BACKEND", _backend_class())
    t = torch.full((3,), float(rank), device="mydev")
    dist.all_reduce(t)
    _assert_equal(t, torch.full((3,), float(sum(range(world_size)))), "all_reduce")
    dist.destroy_process_group()
    exit_ok()


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("world_size", [2, 4])
def test_collectives_over_gloo(world_size):
    check_ok(run_ranks(__name__, "collectives", world_size, env=GLOO, timeout=150))


@pytest.mark.parametrize("world_size", [2, 3])
def test_send_recv_and_batch_over_gloo(world_size):
    check_ok(run_ranks(__name__, "send_recv", world_size, env=GLOO))


def test_split_two_dim_mesh_over_gloo():
    check_ok(run_ranks(__name__, "split_mesh", 4, env={**GLOO, "MYDEV_DEVICE_COUNT": "4"}))


def test_ddp_over_gloo():
    check_ok(run_ranks(__name__, "ddp", 2, env=GLOO))


def test_peer_that_dies_fails_the_others_clearly():
    results = run_ranks(__name__, "peer_dies", 3, env=GLOO, timeout=60)
    for rank in (0, 1):
        out = results[rank].stdout
        assert results[rank].returncode == 0, results[rank].stderr[-3000:]
        error = next(line for line in out.splitlines() if line.startswith("ERROR:"))
        assert "myccl: allreduce" in error and f"rank {rank}" in error, error
        assert "gloo's TCP transport (a peer exited" in error, error
        assert "earlier collective" in out.split("AFTER:")[1], out


def test_peer_that_stalls_times_out_clearly():
    results = run_ranks(__name__, "peer_stalls", 2, env=GLOO, timeout=60)
    check_ok(results[:1])
    out = results[0].stdout
    error = next(line for line in out.splitlines() if line.startswith("ERROR:"))
    assert "myccl: allreduce timed out on rank 0 after 2000 ms" in error, error


def test_bad_transport_value_is_a_clear_error():
    results = run_ranks(__name__, "bad_transport", 2, env={"MYCCL_TRANSPORT": "infiniband"})
    check_ok(results)
    for result in results:
        assert "MYCCL_TRANSPORT='infiniband'" in result.stdout, result.stdout
        assert "auto, shm, gloo" in result.stdout, result.stdout


@pytest.mark.parametrize(
    "transport, expected",
    [("auto", "ShmTransportBackend"), ("shm", "ShmTransportBackend"), ("gloo", "GlooTransportBackend")],
)
def test_transport_selection(transport, expected):
    results = run_ranks(__name__, "transport_name", 2, env={"MYCCL_TRANSPORT": transport})
    check_ok(results)
    for result in results:
        assert f"BACKEND {expected}" in result.stdout, result.stdout


def test_auto_with_two_host_identities_picks_gloo(monkeypatch):
    """Ranks reporting different hosts get the gloo path (single process:
    the store and the host identity are stand-ins)."""
    import torch.distributed as dist

    from device_ext import _myccl_transport

    store = dist.HashStore()
    store.set("myccl/host_identity/1", "other-host/another-boot")
    assert not _myccl_transport._all_on_one_host(store, 0, 2)
    store = dist.HashStore()
    store.set("myccl/host_identity/1", _myccl_transport.host_identity())
    assert _myccl_transport._all_on_one_host(store, 0, 2)
    monkeypatch.setenv("MYCCL_TRANSPORT", " GLOO ")
    assert _myccl_transport.requested_transport() == "gloo"
