"""Distributed training on mydev end to end: DDP, FSDP2, DTensor, tensor
parallel, DTensor random ops, distributed checkpoint, torch.compile with
functional collectives, faults and async overlap. Every test is a
multi-process run on loopback with a hard timeout (distributed_harness.py);
tests/test_distributed.py covers the collectives themselves."""

import copy
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Tuple, Union

import pytest
import torch

from distributed_harness import check_ok, exit_ok, init_group, run_ranks

SPEC = "mydev:myccl,cpu:gloo"
REPO = Path(__file__).resolve().parent.parent


def _mlp() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)
    )


def _batches(
    steps: int, rows: int, dtype: torch.dtype = torch.float32, seed: int = 100
) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    """The same global batches on every rank (CPU)."""
    for step in range(steps):
        g = torch.Generator().manual_seed(seed + step)
        yield (torch.randn(rows, 8, generator=g, dtype=dtype), torch.randn(rows, 4, generator=g, dtype=dtype))


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(model(x), y)


def _reference_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad()
    _loss(model, x, y).backward()
    opt.step()


def _local_rows(rank: int, world_size: int, x: torch.Tensor) -> torch.Tensor:
    rows = x.shape[0] // world_size
    return x[rank * rows : (rank + 1) * rows]


def _full(p: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()


def _assert_params_equal(
    model: torch.nn.Module, reference: torch.nn.Module, rtol: float = 1e-5, atol: float = 1e-6
) -> None:
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(
            _full(p), q.detach(), rtol=rtol, atol=atol, msg=lambda message, name=name: f"{name}: {message}"
        )


def _errors_of(fn) -> str:
    """Runs ``fn``; returns the first line of the error it raised ('' if none)."""
    try:
        fn()
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return ""


# ---------------------------------------------------------------- DDP and FSDP2


def _worker_ddp_no_sync_buckets(rank: int, world_size: int) -> None:
    """DDP with tiny buckets (about one per parameter) and ``no_sync`` gradient
    accumulation equals one process accumulating over the whole batches."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    init_group(rank, world_size, SPEC)
    torch.manual_seed(0)
    reference = _mlp().double()
    model = copy.deepcopy(reference).to("mydev")
    # 0.0001 MiB = 104 bytes: smaller than any weight, so each gets a bucket.
    ddp = DDP(model, bucket_cap_mb=0.0001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    micro_batches = 2
    for step in range(3):
        batches = list(_batches(micro_batches, 4 * world_size, torch.float64, seed=10 * step))
        opt.zero_grad()
        ref_opt.zero_grad()
        with ddp.no_sync():  # first micro-batch: local gradients only
            x, y = batches[0]
            _loss(
                ddp, _local_rows(rank, world_size, x).to("mydev"), _local_rows(rank, world_size, y).to("mydev")
            ).backward()
        local_grad = model[0].weight.grad.detach().clone()
        gathered = [torch.empty_like(local_grad) for _ in range(world_size)]
        dist.all_gather(gathered, local_grad)
        assert not torch.equal(gathered[0].cpu(), gathered[1].cpu()), "no_sync synchronized"
        x, y = batches[1]
        _loss(
            ddp, _local_rows(rank, world_size, x).to("mydev"), _local_rows(rank, world_size, y).to("mydev")
        ).backward()
        opt.step()
        for x, y in batches:
            _loss(reference, x, y).backward()
        ref_opt.step()
    # DDP starts with one bucket and re-buckets by gradient order after the
    # first step; the later steps reduce in several.
    logged = ddp._get_ddp_logging_data()
    assert logged["has_rebuilt_buckets"] == 1, logged
    assert len(logged["rebuilt_bucket_sizes"].split(",")) >= 4, logged["rebuilt_bucket_sizes"]
    _assert_params_equal(model, reference, rtol=1e-12, atol=1e-12)
    dist.destroy_process_group()
    exit_ok()


def _fsdp2_matches_reference(
    rank: int, world_size: int, offload: bool, reshard_after_forward: Union[bool, int]
) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard
    from torch.distributed.tensor import DTensor

    init_group(rank, world_size, SPEC)
    torch.manual_seed(0)
    reference = _mlp()
    model = copy.deepcopy(reference).to("mydev")
    mesh = init_device_mesh("mydev", (world_size,))
    policy = CPUOffloadPolicy(pin_memory=True) if offload else OffloadPolicy()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh, offload_policy=policy, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, offload_policy=policy, reshard_after_forward=False)
    for p in model.parameters():
        local = p.to_local()
        if offload:  # sharded parameters live in pinned host memory
            assert local.device.type == "cpu" and local.is_pinned(), (local.device, p.shape)
        else:
            assert local.device.type == "mydev", local.device
    # After forward, a layer holds its shard again (True), its whole
    # parameter (False), or the shard of a group of N ranks (N).
    rows = model[0].weight.shape[0]
    if reshard_after_forward is True:
        expected_rows_after_forward = rows // world_size
    elif reshard_after_forward is False:
        expected_rows_after_forward = rows
    else:
        expected_rows_after_forward = rows // world_size * reshard_after_forward
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=0.01)
    for x, y in _batches(3, 2 * world_size):
        opt.zero_grad()
        loss = _loss(model, _local_rows(rank, world_size, x).to("mydev"), _local_rows(rank, world_size, y).to("mydev"))
        weight = model[0].weight
        local_rows = (weight.to_local() if isinstance(weight, DTensor) else weight).shape[0]
        assert local_rows == expected_rows_after_forward, (reshard_after_forward, local_rows)
        loss.backward()
        opt.step()
        _reference_step(reference, ref_opt, x, y)
        if offload:
            assert model[0].weight.grad.to_local().device.type == "cpu"
    _assert_params_equal(model, reference)
    dist.destroy_process_group()
    exit_ok()


def _worker_fsdp2_cpu_offload(rank: int, world_size: int) -> None:
    """fully_shard with CPUOffloadPolicy(pin_memory=True): parameters,
    gradients and the optimizer step on the host, compute on mydev."""
    _fsdp2_matches_reference(rank, world_size, offload=True, reshard_after_forward=True)


def _worker_fsdp2_reshard(rank: int, world_size: int) -> None:
    """reshard_after_forward=True, False and 2 (reshard to groups of 2
    ranks after forward) on the inner layers."""
    mode = {"true": True, "false": False, "2": 2}[os.environ["RESHARD"]]
    _fsdp2_matches_reference(rank, world_size, offload=False, reshard_after_forward=mode)


# ---------------------------------------------------------------- DTensor and tensor parallel


def _worker_dtensor(rank: int, world_size: int) -> None:
    """distribute_tensor, redistribute between Shard / Replicate / Partial
    (through all_gather, reduce_scatter, all_reduce and all_to_all) and ops
    on DTensors, against the same computation on CPU."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    init_group(rank, world_size, SPEC)
    mesh = init_device_mesh("mydev", (world_size,))
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4 * world_size, 2 * world_size + 2, generator=g)
    b = torch.randn(a.shape[1], 6, generator=g)
    for placement in (Shard(0), Shard(1), Replicate()):
        d = distribute_tensor(a, mesh, [placement])
        assert d.to_local().device.type == "mydev"
        expected_local = a if placement.is_replicate() else a.chunk(world_size, placement.dim)[rank]
        assert torch.equal(d.to_local().cpu(), expected_local), placement
        assert torch.equal(d.full_tensor().cpu(), a), placement

    def redistributed(src, dst, expected_collective: str) -> torch.Tensor:
        with CommDebugMode() as comm:
            out = src.redistribute(mesh, [dst])
            local = out.to_local().cpu()  # waits for the collective
        ops = [str(op).replace("_", "") for op in comm.get_comm_counts()]
        assert any(expected_collective in op for op in ops), (src.placements, dst, ops)
        return local

    d = distribute_tensor(a, mesh, [Shard(0)])
    assert torch.equal(redistributed(d, Replicate(), "allgather"), a)
    assert torch.equal(redistributed(d, Shard(1), "alltoall"), a.chunk(world_size, 1)[rank])
    # Partial: every rank holds a summand (rank + 1) * a.
    partial = DTensor.from_local((a * (rank + 1)).to("mydev"), mesh, [Partial()])
    total = a * sum(range(1, world_size + 1))
    torch.testing.assert_close(redistributed(partial, Replicate(), "allreduce"), total)
    torch.testing.assert_close(redistributed(partial, Shard(0), "reducescatter"), total.chunk(world_size, 0)[rank])
    # Ops: elementwise on shards, matmul of a row-sharded by a replicated
    # matrix (local), of a column-sharded by a row-sharded one (partial sum).
    db = distribute_tensor(b, mesh, [Replicate()])
    out = torch.tanh(d * 2 + 1) @ db
    assert out.placements == (Shard(0),), out.placements
    torch.testing.assert_close(out.full_tensor().cpu(), torch.tanh(a * 2 + 1) @ b)
    out = distribute_tensor(a, mesh, [Shard(1)]) @ distribute_tensor(b, mesh, [Shard(0)])
    assert out.placements[0].is_partial(), out.placements
    torch.testing.assert_close(out.full_tensor().cpu(), a @ b)
    torch.testing.assert_close(d.sum().full_tensor().cpu(), a.sum())
    dist.destroy_process_group()
    exit_ok()


def _tp_plan():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    # Linear 0 split by output features, linear 2 by input features: the
    # hidden activations stay sharded, one all_reduce per forward.
    return {"0": ColwiseParallel(), "2": RowwiseParallel()}


def _tp_model() -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _worker_tensor_parallel(rank: int, world_size: int) -> None:
    """parallelize_module with ColwiseParallel / RowwiseParallel on an MLP:
    forward, backward and optimizer steps equal the single-process model."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import parallelize_module

    init_group(rank, world_size, SPEC)
    mesh = init_device_mesh("mydev", (world_size,))
    torch.manual_seed(0)
    reference = _tp_model()
    model = parallelize_module(copy.deepcopy(reference).to("mydev"), mesh, _tp_plan())
    assert model[0].weight.placements == (Shard(0),) and model[2].weight.placements == (Shard(1),)
    assert model[0].weight.to_local().shape == (16 // world_size, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.01)
    for x, y in _batches(3, 6):  # every rank sees the whole batch
        opt.zero_grad()
        out = model(x.to("mydev"))
        assert not isinstance(out, DTensor) and out.shape == y.shape
        torch.testing.assert_close(out.detach().cpu(), reference(x).detach(), rtol=1e-5, atol=1e-6)
        torch.nn.functional.mse_loss(out, y.to("mydev")).backward()
        opt.step()
        _reference_step(reference, ref_opt, x, y)
    _assert_params_equal(model, reference)
    dist.destroy_process_group()
    exit_ok()


def _worker_fsdp_tp_2d(rank: int, world_size: int) -> None:
    """A 2-D mesh (dp x tp) from a group created with ``device_id=`` (so
    torch splits the world group): tensor parallel inside a dp group,
    FSDP2 across them, equal to one process on the whole batch."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    device = torch.device("mydev", rank % torch.mydev.device_count())
    torch.mydev.set_device(device)
    dist.init_process_group(SPEC, rank=rank, world_size=world_size, device_id=device)
    mesh = init_device_mesh("mydev", (2, world_size // 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    reference = _tp_model()
    model = parallelize_module(copy.deepcopy(reference).to(device), mesh["tp"], _tp_plan())
    fully_shard(model, mesh=mesh["dp"])
    assert next(model.parameters()).device_mesh.mesh_dim_names == ("dp", "tp")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    dp_rank = mesh["dp"].get_local_rank()
    for x, y in _batches(2, 4):
        opt.zero_grad()
        _loss(model, _local_rows(dp_rank, 2, x).to(device), _local_rows(dp_rank, 2, y).to(device)).backward()
        opt.step()
        _reference_step(reference, ref_opt, x, y)
    _assert_params_equal(model, reference)
    dist.destroy_process_group()
    exit_ok()


# ---------------------------------------------------------------- DTensor random ops


def _worker_dtensor_random(rank: int, world_size: int) -> None:
    """Random ops on DTensors go through the OffsetBasedRNGTracker, which
    moves the mydev generator's offset (16-byte state) per shard: shards
    differ, a seed reproduces them, replicated tensors agree across ranks
    and the generators stay in step. The kernels are counter-based, so a
    shard is also the slice of the replicated tensor drawn with the same seed
    (shard starts are multiples of 4 here)."""
    import torch.distributed as dist
    import torch.distributed.tensor as dt
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    init_group(rank, world_size, SPEC)
    mesh = init_device_mesh("mydev", (world_size,))
    shape = (4 * world_size, 6)

    def gathered_locals(t: torch.Tensor) -> List[torch.Tensor]:
        parts = [torch.empty_like(t) for _ in range(world_size)]
        dist.all_gather(parts, t.contiguous())
        return [p.cpu() for p in parts]

    def sample(placement, seed: int = 1234) -> dict:
        torch.manual_seed(seed)
        empty = distribute_tensor(torch.empty(shape), mesh, [placement])
        return {
            "uniform": torch.nn.init.uniform_(empty.clone(), -1, 1),
            "normal": torch.nn.init.normal_(empty.clone()),
            "randn": dt.randn(*shape, device_mesh=mesh, placements=[placement]),
            "dropout": torch.nn.functional.dropout(distribute_tensor(torch.ones(shape), mesh, [placement]), p=0.5),
        }

    sharded = sample(Shard(0))
    replicated = sample(Replicate())
    again = sample(Shard(0))
    other_seed = sample(Shard(0), seed=99)
    for name, d in sharded.items():
        local = d.to_local()
        assert local.device.type == "mydev" and local.shape == (4, 6), (name, local.shape)
        parts = gathered_locals(local)
        assert not torch.equal(parts[0], parts[1]), f"{name}: ranks drew the same shard"
        assert torch.equal(local.cpu(), again[name].to_local().cpu()), f"{name}: not reproducible"
        assert not torch.equal(local.cpu(), other_seed[name].to_local().cpu()), name
        full = replicated[name].to_local().cpu()
        assert all(torch.equal(p, full) for p in gathered_locals(replicated[name].to_local())), (
            f"{name}: replicated tensor differs across ranks"
        )
        assert torch.equal(local.cpu(), full[4 * rank : 4 * (rank + 1)]), (
            f"{name}: the shard is not the slice of the replicated tensor"
        )
    # The generator's offset moved by the whole tensor's size on every rank
    # alike, so later non-DTensor draws stay in step.
    states = gathered_locals(torch.mydev.get_rng_state().to("mydev"))
    assert all(torch.equal(s, states[0]) for s in states), states
    dist.destroy_process_group()
    exit_ok()


# ---------------------------------------------------------------- distributed checkpoint


def _fsdp2_model(world_size: int) -> torch.nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = _mlp().to("mydev")
    mesh = init_device_mesh("mydev", (world_size,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _worker_dcp_save(rank: int, world_size: int) -> None:
    """Trains an FSDP2 model with Adam, saves model and optimizer state with
    torch.distributed.checkpoint, and the full parameters and Adam moments
    (on rank 0, with torch.save) for the loading run to compare with."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    init_group(rank, world_size, SPEC)
    torch.manual_seed(0)
    model = _fsdp2_model(world_size)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for x, y in _batches(2, 2 * world_size):
        opt.zero_grad()
        _loss(
            model, _local_rows(rank, world_size, x).to("mydev"), _local_rows(rank, world_size, y).to("mydev")
        ).backward()
        opt.step()
    model_state, optim_state = get_state_dict(model, opt)
    directory = Path(os.environ["CKPT_DIR"])
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=directory / "dcp")
    expected = {name: _full(p) for name, p in model.named_parameters()}
    expected.update({f"exp_avg.{name}": _full(opt.state[p]["exp_avg"]) for name, p in model.named_parameters()})
    if rank == 0:
        torch.save(expected, directory / "expected.pt")
    dist.destroy_process_group()
    exit_ok()


def _worker_dcp_load(rank: int, world_size: int) -> None:
    """Loads that checkpoint into a freshly initialized FSDP2 model and
    optimizer (the world size may differ from the saving run's)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    init_group(rank, world_size, SPEC)
    torch.manual_seed(1)  # other initial values than the saved ones
    model = _fsdp2_model(world_size)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    # Adam's state exists only after a step: take one so there is a
    # structure to load into.
    _loss(model, torch.ones(2, 8, device="mydev"), torch.zeros(2, 4, device="mydev")).backward()
    opt.step()
    directory = Path(os.environ["CKPT_DIR"])
    model_state, optim_state = get_state_dict(model, opt)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=directory / "dcp")
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    expected = torch.load(directory / "expected.pt")
    for name, p in model.named_parameters():
        assert p.to_local().device.type == "mydev"
        assert torch.equal(_full(p), expected[name]), name
        assert torch.equal(_full(opt.state[p]["exp_avg"]), expected[f"exp_avg.{name}"]), name
    dist.destroy_process_group()
    exit_ok()


# ---------------------------------------------------------------- torch.compile


def _worker_compiled(rank: int, world_size: int) -> None:
    """Functional collectives inside a fullgraph torch.compile'd function on
    mydev, then compiled DDP training steps, against CPU references."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    init_group(rank, world_size, SPEC)
    group = dist.group.WORLD

    @torch.compile(fullgraph=True)
    def collectives(x: torch.Tensor):
        summed = funcol.all_reduce(x * 2, "sum", group)
        gathered = funcol.all_gather_tensor(summed + 1, 0, group)
        scattered = funcol.reduce_scatter_tensor(gathered, "sum", 0, group)
        return summed, gathered, scattered.relu()

    parts = [torch.arange(6, dtype=torch.float32).view(2, 3) - r for r in range(world_size)]
    summed, gathered, scattered = collectives(parts[rank].to("mydev"))
    expected_sum = sum(p * 2 for p in parts)
    torch.testing.assert_close(summed.cpu(), expected_sum)
    torch.testing.assert_close(gathered.cpu(), torch.cat([expected_sum + 1] * world_size))
    expected_scatter = ((expected_sum + 1) * world_size).relu()
    torch.testing.assert_close(scattered.cpu(), expected_scatter)

    # A compiled DDP model: gradients are reduced by DDP's hooks during the
    # compiled backward.
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    reference = _mlp()
    model = copy.deepcopy(reference).to("mydev")
    compiled = torch.compile(DDP(model))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for x, y in _batches(3, 4 * world_size):
        opt.zero_grad()
        _loss(
            compiled, _local_rows(rank, world_size, x).to("mydev"), _local_rows(rank, world_size, y).to("mydev")
        ).backward()
        opt.step()
        _reference_step(reference, ref_opt, x, y)
    _assert_params_equal(model, reference)
    dist.destroy_process_group()
    exit_ok()


# ---------------------------------------------------------------- faults


def _worker_rank_dies(rank: int, world_size: int) -> None:
    """The last rank is SIGKILLed after a few collectives; every survivor's
    next collective fails within the group's timeout, naming the collective
    and a peer, and the survivors' devices keep working."""
    import torch.distributed as dist

    init_group(rank, world_size, SPEC, timeout_s=3)
    t = torch.ones(1000, device="mydev")
    for _ in range(3):
        dist.all_reduce(t)
    assert t[0].item() == world_size**3
    if rank == world_size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    error = _errors_of(lambda: (dist.all_reduce(t), t.cpu()))
    print("ERROR:", error)
    assert error, "the all_reduce with a dead peer did not fail"
    print("AFTER:", _errors_of(lambda: (dist.all_reduce(torch.ones(2, device="mydev")), torch.mydev.synchronize())))
    assert torch.equal((torch.arange(4, device="mydev") * 2).cpu(), torch.arange(4) * 2)
    exit_ok()


def _worker_size_mismatch(rank: int, world_size: int) -> None:
    """FSDP2's collectives with per-rank sizes (test_distributed.py covers
    all_reduce): all_gather_into_tensor with 2 + r elements on rank r, then,
    in a new group since a failed collective breaks its group,
    reduce_scatter_tensor with 4 + 2 r; prints each error; a third group
    works."""
    import torch.distributed as dist

    def mismatched(call) -> str:
        init_group(rank, world_size, SPEC, timeout_s=10)
        error = _errors_of(lambda: (call(), torch.mydev.synchronize()))
        dist.destroy_process_group()
        return error

    part = torch.ones(2 + rank, device="mydev")
    gathered = torch.empty(world_size * part.numel(), device="mydev")
    print("all_gather_into_tensor:", mismatched(lambda: dist.all_gather_into_tensor(gathered, part)))
    whole = torch.ones(world_size * (4 + 2 * rank), device="mydev")
    shard = torch.empty(4 + 2 * rank, device="mydev")
    print("reduce_scatter_tensor:", mismatched(lambda: dist.reduce_scatter_tensor(shard, whole)))
    init_group(rank, world_size, SPEC, timeout_s=10)
    t = torch.ones(8, device="mydev")
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.full((8,), float(world_size)))
    dist.destroy_process_group()
    exit_ok()


# ---------------------------------------------------------------- async overlap


def _worker_async_overlap(rank: int, world_size: int) -> None:
    """An async all_reduce overlaps with compute, proved by ordering rather
    than timing: rank 1 joins only after rank 0 has finished (and checked)
    compute issued after the collective, while the collective was still
    incomplete because rank 1 had not joined."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _get_default_store

    init_group(rank, world_size, SPEC, timeout_s=60)
    store = _get_default_store()
    t = torch.full((4096,), float(rank + 1), device="mydev")
    expected_sum = torch.full((4096,), float(sum(range(1, world_size + 1))))
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)
        x = torch.randn(128, 128, generator=torch.Generator().manual_seed(0))
        y = x.to("mydev")
        for _ in range(4):
            y = torch.tanh(y @ y.T / 128)
        torch.mydev.current_stream().synchronize()  # compute done ...
        assert not work.is_completed(), "the all_reduce finished without rank 1"  # ... comm not
        expected = x
        for _ in range(4):
            expected = torch.tanh(expected @ expected.T / 128)
        torch.testing.assert_close(y.cpu(), expected)
        store.set("rank0_computed", "1")
        assert work.wait()
        assert torch.equal(t.cpu(), expected_sum)
        assert work.is_completed() and work.exception() is None
        assert torch.equal(work.get_future().wait()[0].cpu(), expected_sum)
    else:
        store.wait(["rank0_computed"])
        dist.all_reduce(t)
        assert torch.equal(t.cpu(), expected_sum)
    dist.destroy_process_group()
    exit_ok()


def _worker_reinit(rank: int, world_size: int) -> None:
    """destroy_process_group and init_process_group again, three times,
    each group doing mydev and CPU collectives and a subgroup."""
    import torch.distributed as dist

    for round_ in range(3):
        init_group(rank, world_size, SPEC)
        t = torch.full((5,), float(rank + round_), device="mydev")
        dist.all_reduce(t)
        expected = float(sum(r + round_ for r in range(world_size)))
        assert torch.equal(t.cpu(), torch.full((5,), expected)), (round_, t)
        c = torch.full((3,), float(rank))
        dist.all_reduce(c)
        assert torch.equal(c, torch.full((3,), float(sum(range(world_size)))))
        pair = dist.new_group([0, 1])
        if rank in (0, 1):
            u = torch.full((2,), float(rank + 1), device="mydev")
            dist.all_reduce(u, op=dist.ReduceOp.MAX, group=pair)
            assert torch.equal(u.cpu(), torch.full((2,), 2.0))
        dist.destroy_process_group()  # no barrier: ranks race into the next round
        assert not dist.is_initialized()
    exit_ok()


# ---------------------------------------------------------------- tests


def test_ddp_four_ranks_no_sync_and_several_buckets():
    check_ok(run_ranks(__name__, "ddp_no_sync_buckets", 4))


def test_fsdp2_cpu_offload_pinned_memory():
    check_ok(run_ranks(__name__, "fsdp2_cpu_offload", 2))


@pytest.mark.slow
@pytest.mark.parametrize("reshard", ["true", "false", "2"])
def test_fsdp2_reshard_after_forward_four_ranks(reshard):
    check_ok(run_ranks(__name__, "fsdp2_reshard", 4, env={"RESHARD": reshard}))


@pytest.mark.parametrize("world_size", [2, 4])
def test_dtensor_placements_redistribute_and_ops(world_size):
    check_ok(run_ranks(__name__, "dtensor", world_size))


def test_tensor_parallel_colwise_rowwise_mlp():
    check_ok(run_ranks(__name__, "tensor_parallel", 2))


def test_fsdp2_over_dp_and_tensor_parallel_over_tp_on_2d_mesh():
    check_ok(run_ranks(__name__, "fsdp_tp_2d", 4))


def test_dtensor_random_ops_are_coordinated_across_ranks():
    check_ok(run_ranks(__name__, "dtensor_random", 2))


def test_random_values_follow_the_counter_offset():
    """The property that makes a sharded DTensor init equal the replicated
    one's slice: the numbers drawn at offset o + k are the tail of those
    drawn at offset o."""
    torch.manual_seed(1234)
    state = torch.mydev.get_rng_state()
    whole = torch.empty(48, device="mydev").uniform_().cpu()
    shifted = state.clone()
    shifted[8:] = (shifted[8:].view(torch.int64) + 24).view(torch.uint8)
    torch.mydev.set_rng_state(shifted)
    tail = torch.empty(24, device="mydev").uniform_().cpu()
    assert torch.equal(tail, whole[24:])


def test_distributed_checkpoint_save_and_load_into_another_world_size(tmp_path):
    env = {"CKPT_DIR": str(tmp_path)}
    check_ok(run_ranks(__name__, "dcp_save", 2, env=env))
    check_ok(run_ranks(__name__, "dcp_load", 4, env=env))


@pytest.mark.slow
def test_compiled_functional_collectives_and_compiled_ddp_step():
    check_ok(run_ranks(__name__, "compiled", 2, timeout=240))


def test_killed_rank_makes_survivors_fail_with_clear_error():
    world_size = 4
    results = run_ranks(__name__, "rank_dies", world_size)
    check_ok(results[:-1])
    assert results[-1].returncode == -signal.SIGKILL, results[-1].returncode
    dead = f"rank {world_size - 1}"
    for result in results[:-1]:
        error = next(line for line in result.stdout.splitlines() if line.startswith("ERROR:"))
        assert "DistBackendError" in error and "allreduce" in error and dead in error, error
        after = next(line for line in result.stdout.splitlines() if line.startswith("AFTER:"))
        assert "destroy the group" in after, after


def test_destroy_and_recreate_process_group_three_times():
    check_ok(run_ranks(__name__, "reinit", 4))


def test_size_mismatch_across_ranks_fails_with_clear_error():
    results = run_ranks(__name__, "size_mismatch", 2)
    check_ok(results)
    for rank, result in enumerate(results):
        peer = 1 - rank
        for call, collective in (
            ("all_gather_into_tensor", "_allgather_base"),
            ("reduce_scatter_tensor", "_reduce_scatter_base"),
        ):
            line = next(line for line in result.stdout.splitlines() if line.startswith(f"{call}:"))
            assert f"DistBackendError: myccl: {collective} on rank {rank} has" in line, line
            assert f"rank {peer} has" in line, line


def test_async_all_reduce_overlaps_with_compute():
    check_ok(run_ranks(__name__, "async_overlap", 2))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "fsdp2", "tp"])
def test_example_trains_under_torchrun(mode):
    """examples/train_distributed.py under torchrun (2 processes, loopback):
    the loss goes down."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(REPO / "examples" / "train_distributed.py"),
        "--mode",
        mode,
        "--steps",
        "15",
    ]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"torchrun still running after 120 s (hang):\n{expired.stdout}\n{expired.stderr}")
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    losses = [float(line.split("loss")[1]) for line in result.stdout.splitlines() if line.startswith(f"[{mode}] step")]
    assert len(losses) >= 3 and losses[-1] < 0.5 * losses[0], result.stdout


def _worker_exit_with_collectives_in_flight(rank: int, world_size: int) -> None:
    """Ends like a script that never synchronizes: collectives still queued
    when the interpreter finalizes. Their futures complete on myccl's watcher
    thread, which must not release Python-owned tensors then (that aborted
    the process: "terminate called without an active exception")."""
    import torch.distributed as dist

    init_group(rank, world_size, "myccl")
    for _ in range(20):
        dist.all_reduce(torch.ones(1 << 16, device="mydev"))
    dist.destroy_process_group()
    print("WORKER OK")  # and a normal interpreter exit, no exit_ok()


def test_exit_with_collectives_in_flight_is_clean():
    check_ok(run_ranks(__name__, "exit_with_collectives_in_flight", 2))
