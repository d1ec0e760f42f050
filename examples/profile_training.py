"""Profiling a few training steps on mydev: a device timeline and a memory
snapshot, the two views an engineer tuning a model starts with.

    python examples/profile_training.py --out profile_out

writes, in --out:
  trace.json         the torch.profiler chrome trace: host ops on the Python
                     thread, mydev kernels and copies on per-stream device
                     tracks, arrows from each launch to its kernel (open it in
                     https://ui.perfetto.dev or chrome://tracing)
  snapshot.pickle    the memory history (cuda's snapshot format)
  memory_trace.html  memory over time, by allocation and stack, rendered from
                     the snapshot by torch.cuda._memory_viz
and prints the ops by device time and the allocator's summary table.
"""

import argparse
import os

import torch
import torch.cuda._memory_viz as memory_viz
from torch.profiler import ProfilerActivity, profile, record_function, schedule

BATCH, FEATURES, HIDDEN, CLASSES = 64, 256, 512, 10


def build_model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        torch.nn.GELU(),
        torch.nn.LayerNorm(HIDDEN),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, CLASSES),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="profile_out", help="directory for the outputs")
    parser.add_argument("--steps", type=int, default=4, help="training steps recorded")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    torch.manual_seed(0)
    model = build_model().to("mydev")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    # Pinned host batches: their copies to the device are asynchronous.
    batches = [
        (torch.randn(BATCH, FEATURES).pin_memory(), torch.randint(0, CLASSES, (BATCH,)).pin_memory()) for _ in range(4)
    ]

    def step(i: int) -> torch.Tensor:
        inputs, labels = batches[i % len(batches)]
        with record_function("data"):
            inputs = inputs.to("mydev", non_blocking=True)
            labels = labels.to("mydev", non_blocking=True)
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss

    step(0)  # warm-up outside the recordings: optimizer state, cached blocks

    torch.mydev.memory._record_memory_history(max_entries=100_000)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=0, warmup=1, active=args.steps, repeat=1),
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        for i in range(1 + args.steps):
            loss = step(i)
            prof.step()
        print(f"loss after {1 + args.steps} more steps: {loss.item():.4f}")
    snapshot_path = os.path.join(args.out, "snapshot.pickle")
    torch.mydev.memory._dump_snapshot(snapshot_path)
    torch.mydev.memory._record_memory_history(enabled=None)

    print(prof.key_averages().table(sort_by="device_time_total", row_limit=12))
    print(torch.mydev.memory_summary(abbreviated=True))
    prof.export_chrome_trace(os.path.join(args.out, "trace.json"))
    snapshot = torch.mydev.memory._snapshot()
    with open(os.path.join(args.out, "memory_trace.html"), "w") as f:
        f.write(memory_viz.trace_plot(snapshot))
    print(f"wrote trace.json, snapshot.pickle and memory_trace.html to {args.out}/")


if __name__ == "__main__":
    main()
