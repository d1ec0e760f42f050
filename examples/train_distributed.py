"""Distributed training on mydev: DDP, FSDP2 or tensor parallel.

    torchrun --nproc-per-node=2 examples/train_distributed.py --mode ddp
    torchrun --nproc-per-node=2 examples/train_distributed.py --mode fsdp2
    torchrun --nproc-per-node=2 examples/train_distributed.py --mode tp

A small MLP learns a fixed random "teacher" network. Rank 0 prints the loss.
mydev tensors travel through the myccl backend (shared memory between the
processes), CPU tensors through gloo.
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

IN_FEATURES, HIDDEN, OUT_FEATURES = 32, 64, 8


def build_model() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT_FEATURES)
    )


def parallelize(model: torch.nn.Module, mode: str) -> torch.nn.Module:
    world_size = dist.get_world_size()
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    mesh = init_device_mesh("mydev", (world_size,))
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    # First layer split by output features, second by input features: one
    # all_reduce per forward, hidden activations stay sharded.
    return parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


def batch(step: int, rows: int, teacher: torch.nn.Module, device: torch.device, mode: str):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(step)
    x = torch.randn(rows * world_size, IN_FEATURES, generator=g)
    with torch.no_grad():
        y = teacher(x)
    if mode != "tp":  # data parallel: each rank its slice of the global batch
        x, y = x[rank * rows : (rank + 1) * rows], y[rank * rows : (rank + 1) * rows]
    return x.to(device), y.to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("ddp", "fsdp2", "tp"), default="ddp")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32, help="rows per rank")
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("mydev", local_rank % torch.mydev.device_count())
    torch.mydev.set_device(device)
    dist.init_process_group("mydev:myccl,cpu:gloo")
    rank = dist.get_rank()

    torch.manual_seed(0)  # the same initial weights and teacher on every rank
    teacher = build_model()
    model = parallelize(build_model().to(device), args.mode)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        x, y = batch(step, args.batch, teacher, device, args.mode)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        # The mean loss over all ranks (each saw its own slice in ddp/fsdp2).
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        mean_loss = mean_loss.item()
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"[{args.mode}] step {step:3d}  loss {mean_loss:.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
