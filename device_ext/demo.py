"""A tour of mydev: ``python -m device_ext.demo``.

Shows what the device does today: tensors on two simulated devices, async
streams and events, pinned non_blocking copies, memory statistics, RNG state,
device-side errors surfacing at the next synchronize, save/load, and a model
trained with torch.compile (kernels generated for mydev).
"""

import io
import time

import torch

import device_ext  # noqa: F401  (also loaded by `import torch` via autoload)


def main() -> None:
    print(
        f"torch {torch.__version__}; mydev available: {torch.mydev.is_available()}, "
        f"{torch.mydev.device_count()} devices"
    )
    props = torch.mydev.get_device_properties(0)
    print(f"  {props}")

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to("mydev")
    y = (x * 2 + 1).sum(dim=1)
    print(f"tensor on {x.device}: {x.tolist()}  ->  (x*2+1).sum(1) = {y.cpu().tolist()}")
    print(repr(y))

    # The host returns before the kernel ran.
    start = time.perf_counter()
    torch.mydev._sleep(200)
    queued_ms = (time.perf_counter() - start) * 1e3
    torch.mydev.synchronize()
    total_ms = (time.perf_counter() - start) * 1e3
    print(f"_sleep(200): host returned after {queued_ms:.2f} ms, synchronize after {total_ms:.0f} ms")

    side = torch.mydev.Stream()
    begin, end = torch.mydev.Event(enable_timing=True), torch.mydev.Event(enable_timing=True)
    with torch.mydev.stream(side):
        begin.record()
        torch.mydev._sleep(50)
        end.record()
    end.synchronize()
    print(f"events on {side}: elapsed {begin.elapsed_time(end):.1f} ms")

    pinned = torch.randn(1 << 20).pin_memory()
    device_copy = pinned.to("mydev:1", non_blocking=True)
    print(
        f"pinned: {pinned.is_pinned()}; copy to {device_copy.device} non_blocking, "
        f"equal after sync: {torch.equal(device_copy.cpu(), pinned)}"
    )

    print(
        f"memory_allocated(mydev:0) = {torch.mydev.memory_allocated(0)} bytes, "
        f"reserved = {torch.mydev.memory_reserved(0)}"
    )

    torch.mydev.manual_seed(1234)
    state = torch.mydev.get_rng_state()
    print(f"rng state: {state.numel()} bytes (seed, offset) = {state.view(torch.int64).tolist()}")

    try:
        device_ext._C._fail_on_stream("simulated device fault")
        torch.mydev.synchronize()
    except RuntimeError as err:
        print(f"device-side error surfaced at synchronize: {err}")
    print(f"device still usable: {(torch.ones(3, device='mydev') + 1).tolist()}")

    buffer = io.BytesIO()
    torch.save({"weights": x}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="mydev:1")
    print(f"torch.save/load with map_location='mydev:1': {loaded['weights'].device}")

    compile_demo()


def compile_demo() -> None:
    """A few compiled training steps, checked against the same steps in eager
    mode on the CPU."""
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
    model.load_state_dict(reference.state_dict())
    model.to("mydev")
    inputs, targets = torch.randn(64, 16), torch.randn(64, 1)

    def step(net: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        return loss

    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    start = time.perf_counter()
    for _ in range(3):
        loss = step(compiled, optimizer, inputs.to("mydev"), targets.to("mydev"))
        reference_loss = step(reference, reference_optimizer, inputs, targets)
    print(
        f"torch.compile: 3 training steps on mydev in {time.perf_counter() - start:.1f} s "
        f"(including compilation); loss {loss.item():.5f}, eager CPU {reference_loss.item():.5f}"
    )


if __name__ == "__main__":
    main()
