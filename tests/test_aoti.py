"""AOTInductor on mydev: torch.export, then aoti_compile_and_package and
aoti_load_package, against the same models run eagerly on the CPU.

Each package is compiled once per module (an AOTInductor compile takes tens
of seconds on a busy two-core machine) and loaded as often as the tests need.
Compiled kernels sum in another order than ATen's eager CPU kernels: values
agree to float32 rounding (rtol/atol 1e-4).
"""

import glob
import os
import zipfile

import pytest
import torch
import torch._inductor.config
from model_suite import CASES  # benchmarks/ (see pyproject.toml)
from torch.export import Dim

from mydev_testing import assert_close_to_cpu, assert_device_still_usable, hold_stream, needs_two_devices, run_python

pytestmark = pytest.mark.usefixtures("isolated_inductor")

SIZE = "test"
RTOL, ATOL = 1e-4, 1e-4
WIDTH, SEQ = 32, 8
# The batch sizes the fused model's package accepts (torch.export.Dim).
MIN_BATCH, MAX_BATCH = 2, 16


class FusedBlock(torch.nn.Module):
    """RMSNorm + SwiGLU through mydev's fused custom ops."""

    def __init__(self, width: int = WIDTH, hidden: int = 64):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(width) + 0.5)
        self.gate = torch.nn.Linear(width, hidden, bias=False)
        self.up = torch.nn.Linear(width, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.ops.mydev.rms_norm(x, self.weight, 1e-6)
        return x + self.down(torch.ops.mydev.swiglu(self.gate(h), self.up(h)))


def fused_reference(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The fused block's forward with the ops spelled out, on the CPU."""
    cpu = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    x = x.cpu()
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * cpu["weight"]
    gate, up = h @ cpu["gate.weight"].T, h @ cpu["up.weight"].T
    return x + (torch.nn.functional.silu(gate) * up) @ cpu["down.weight"].T


def compile_package(model: torch.nn.Module, args: tuple, path, dynamic_shapes=None) -> str:
    exported = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    return torch._inductor.aoti_compile_and_package(exported, package_path=str(path))


@pytest.fixture(scope="module")
def suite_packages(tmp_path_factory, isolated_inductor):
    """name -> (package path, CPU model, CPU input) for the model suite."""
    directory = tmp_path_factory.mktemp("aoti-suite")
    packages = {}
    for name, case in CASES.items():
        cpu_model, x = case.make(SIZE, "cpu", seed=0)
        cpu_model.eval()
        mydev_model = case.make(SIZE, "mydev", seed=0)[0].eval()
        path = compile_package(mydev_model, (x.to("mydev"),), directory / f"{name}.pt2")
        packages[name] = (path, cpu_model, x)
    return packages


@pytest.fixture(scope="module")
def fused_package(tmp_path_factory, isolated_inductor):
    """(package path, model on mydev:0) for the fused block, with a dynamic
    batch dimension in [MIN_BATCH, MAX_BATCH]."""
    torch.manual_seed(0)
    model = FusedBlock().to("mydev").eval()
    x = torch.randn(4, SEQ, WIDTH, device="mydev")
    batch = Dim("batch", min=MIN_BATCH, max=MAX_BATCH)
    path = compile_package(
        model, (x,), tmp_path_factory.mktemp("aoti-fused") / "fused.pt2", dynamic_shapes={"x": {0: batch}}
    )
    return path, model


# ------------------------------------------------------------- round trip --
@pytest.mark.parametrize("name", sorted(CASES))
def test_model_suite_round_trip(suite_packages, name):
    path, cpu_model, x = suite_packages[name]
    runner = torch._inductor.aoti_load_package(path)
    out = runner(x.to("mydev"))
    assert out.device == torch.device("mydev:0")
    with torch.no_grad():
        assert_close_to_cpu(out, cpu_model(x), rtol=RTOL, atol=ATOL)
    # Inputs made on the device, and a second run of the same runner.
    x_device = torch.randn(x.shape, device="mydev")
    with torch.no_grad():
        assert_close_to_cpu(runner(x_device), cpu_model(x_device.cpu()), rtol=RTOL, atol=ATOL)


def test_weights_are_on_the_device_and_the_package_says_mydev(suite_packages):
    """Loading copies the weights to the device: its allocator holds at
    least their bytes more (nothing in host memory stands in for them)."""
    path, cpu_model, _ = suite_packages["mlp"]
    weight_bytes = sum(value.nbytes for value in cpu_model.state_dict().values())
    torch.mydev.synchronize()
    before = torch.mydev.memory_allocated(0)
    runner = torch._inductor.aoti_load_package(path)
    assert torch.mydev.memory_allocated(0) - before >= weight_bytes
    assert runner.get_metadata()["AOTI_DEVICE_KEY"] == "mydev"
    assert sorted(runner.get_constant_fqns()) == sorted(cpu_model.state_dict())


def test_new_weights_load_only_as_user_managed_device_tensors(suite_packages):
    """torch's container would copy new weights into its buffer with a host
    memcpy, which faults on device memory: refused, with the way that works."""
    import copy

    path, cpu_model, x = suite_packages["mlp"]
    runner = torch._inductor.aoti_load_package(path)
    doubled = {name: value * 2 for name, value in cpu_model.state_dict().items()}
    on_device = {name: value.to("mydev") for name, value in doubled.items()}
    message = r"cannot copy new weights into its own buffer; load them with user_managed=True"
    with pytest.raises(RuntimeError, match=message):
        runner.load_constants(on_device, check_full_update=True)
    runner.load_constants(on_device, check_full_update=True, user_managed=True)
    reference = copy.deepcopy(cpu_model)
    reference.load_state_dict(doubled)
    with torch.no_grad():
        assert_close_to_cpu(runner(x.to("mydev")), reference(x), rtol=RTOL, atol=ATOL)
    assert_device_still_usable()


def test_kernels_run_on_the_current_stream(suite_packages):
    """The whole model is queued on the caller's current stream: while that
    stream is held, nothing of it has run and the default stream is idle."""
    path, cpu_model, x = suite_packages["mlp"]
    runner = torch._inductor.aoti_load_package(path)
    x_device = x.to("mydev")
    torch.mydev.synchronize()
    side = torch.mydev.Stream()
    with hold_stream(side) as latch, torch.mydev.stream(side):
        out = runner(x_device)
        assert side.query() is False
        assert torch.mydev.default_stream().query() is True
        latch.release()
    side.synchronize()
    with torch.no_grad():
        assert_close_to_cpu(out, cpu_model(x), rtol=RTOL, atol=ATOL)


# ------------------------------------------------ custom ops, dynamic shapes --
@pytest.mark.parametrize("batch", [MIN_BATCH, 5, MAX_BATCH])
def test_fused_custom_ops_with_a_dynamic_batch(fused_package, batch):
    path, model = fused_package
    runner = torch._inductor.aoti_load_package(path)
    x = torch.randn(batch, SEQ, WIDTH, device="mydev")
    out = runner(x)
    assert out.shape == (batch, SEQ, WIDTH)
    assert_close_to_cpu(out, fused_reference(model, x), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "batch, message",
    [
        (MIN_BATCH - 1, f"dim value is too small at 0, expected it to be >= {MIN_BATCH}, but got: {MIN_BATCH - 1}"),
        (MAX_BATCH + 1, f"dim value is too large at 0, expected to be <= {MAX_BATCH}, but got: {MAX_BATCH + 1}"),
    ],
)
def test_batch_outside_the_exported_range_is_refused(fused_package, batch, message):
    path, model = fused_package
    runner = torch._inductor.aoti_load_package(path)
    with pytest.raises(RuntimeError, match=rf"^input_handles\[0\]: {message}"):
        runner(torch.randn(batch, SEQ, WIDTH, device="mydev"))
    x = torch.randn(MIN_BATCH, SEQ, WIDTH, device="mydev")
    assert_close_to_cpu(runner(x), fused_reference(model, x), rtol=RTOL, atol=ATOL)
    assert_device_still_usable()


# ---------------------------------------------------------------- devices --
@needs_two_devices
def test_device_index_selects_the_device(fused_package):
    path, model = fused_package
    runner = torch._inductor.aoti_load_package(path, device_index=1)
    x = torch.randn(4, SEQ, WIDTH, device="mydev:1")
    out = runner(x)
    assert out.device == torch.device("mydev:1")
    assert torch.mydev.current_device() == 0
    assert_close_to_cpu(out, fused_reference(model, x), rtol=RTOL, atol=ATOL)
    with pytest.raises(RuntimeError, match=r"^the AOTInductor model runs on mydev:1, but input 0 is on mydev:0"):
        runner(x.to("mydev:0"))


def test_device_index_out_of_range_is_refused(fused_package):
    path, _ = fused_package
    count = torch.mydev.device_count()
    with pytest.raises(RuntimeError, match=rf"Invalid device index mydev:{count}: there are {count} mydev devices"):
        torch._inductor.aoti_load_package(path, device_index=count)


def test_inputs_of_another_device_type_are_refused(fused_package):
    path, _ = fused_package
    runner = torch._inductor.aoti_load_package(path)
    with pytest.raises(RuntimeError, match=r"^the AOTInductor model runs on mydev:0, but input 0 is on cpu"):
        runner(torch.randn(4, SEQ, WIDTH))
    assert_device_still_usable()


def test_package_refuses_to_run_as_a_cpu_model(suite_packages, tmp_path):
    """The model library itself refuses any device but mydev: loaded by
    torch's CPU runner, its creation fails with that reason."""
    with zipfile.ZipFile(suite_packages["mlp"][0]) as package:
        package.extractall(tmp_path)
    (library,) = glob.glob(str(tmp_path / "**" / "*.so"), recursive=True)
    result = run_python(
        f"""
import torch
try:
    torch._C._aoti.AOTIModelContainerRunnerCpu({library!r}, 1)
except RuntimeError as error:
    print("refused:", "API call failed" in str(error))
"""
    )
    assert result.returncode == 0, result.stderr
    assert "refused: True" in result.stdout
    assert "this AOTInductor model was compiled for mydev and cannot run on device 'cpu'" in result.stderr


# ------------------------------------------------------------- bad packages --
def _rewritten(source: str, target, change) -> str:
    """A copy of package `source` with each member's bytes passed through
    change(name, data)."""
    with zipfile.ZipFile(source) as package, zipfile.ZipFile(target, "w") as copy:
        for info in package.infolist():
            copy.writestr(info, change(info.filename, package.read(info.filename)))
    return str(target)


def test_damaged_packages_are_clear_errors(suite_packages, tmp_path):
    path = suite_packages["mlp"][0]
    data = open(path, "rb").read()
    truncated = tmp_path / "truncated.pt2"
    truncated.write_bytes(data[: len(data) // 2])
    not_a_package = tmp_path / "text.pt2"
    not_a_package.write_text("not a package\n")
    short_library = _rewritten(
        path, tmp_path / "short_library.pt2", lambda name, body: body[:4096] if name.endswith(".so") else body
    )
    cases = [
        (truncated, r"Failed to initialize zip archive: failed finding central directory"),
        (not_a_package, r"Failed to initialize zip archive"),
        (tmp_path / "missing.pt2", r"Failed to initialize zip archive: file open failed"),
        (short_library, r"the AOTInductor model .*\.so is cut short: 4096 bytes, but its segments need \d+"),
    ]
    for package, message in cases:
        with pytest.raises(RuntimeError, match=message):
            torch._inductor.aoti_load_package(str(package))
    assert_close_to_cpu(
        torch._inductor.aoti_load_package(path)(suite_packages["mlp"][2].to("mydev")),
        suite_packages["mlp"][1](suite_packages["mlp"][2]).detach(),
        rtol=RTOL,
        atol=ATOL,
    )
    assert_device_still_usable()


# ------------------------------------------------------------ as a user --
def test_fresh_process_loads_and_runs_a_package(suite_packages, fused_package, tmp_path):
    """A plain script that imports only torch loads packages it never
    compiled (the model suite's MLP, the fused custom ops) and runs them."""
    mlp_path, cpu_model, x = suite_packages["mlp"]
    fused_path, fused_model = fused_package
    x_fused = torch.randn(3, SEQ, WIDTH)
    torch.save(
        {
            "x": x,
            "expected": cpu_model(x).detach(),
            "x_fused": x_fused,
            "expected_fused": fused_reference(fused_model, x_fused),
        },
        tmp_path / "io.pt",
    )
    result = run_python(
        f"""
import torch
io = torch.load({str(tmp_path / "io.pt")!r})
mlp = torch._inductor.aoti_load_package({mlp_path!r})
out = mlp(io["x"].to("mydev"))
fused = torch._inductor.aoti_load_package({fused_path!r})
out_fused = fused(io["x_fused"].to("mydev"))
print(out.device, out_fused.device,
      torch.allclose(out.cpu(), io["expected"], rtol={RTOL}, atol={ATOL}),
      torch.allclose(out_fused.cpu(), io["expected_fused"], rtol={RTOL}, atol={ATOL}))
"""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["mydev:0", "mydev:0", "True", "True"]


# ------------------------------------------------------------ torch patch --
def test_precompiled_model_header_is_mydevs():
    """torch_patches.aot_inductor: without it, aoti_compile_and_package
    precompiles torch/csrc/inductor/aoti_include/mydev.h, which torch does
    not ship, and the compile fails."""
    from torch._inductor import codecache

    from inductor_backend.cpp_wrapper import AOTI_MODEL_HEADER

    original = codecache._get_cpp_wrapper_header.__wrapped__("mydev", aot_mode=True)
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    assert not os.path.exists(os.path.join(include, original))
    assert codecache._get_cpp_wrapper_header("mydev", aot_mode=True) == AOTI_MODEL_HEADER
    assert os.path.exists(AOTI_MODEL_HEADER)
    assert codecache._get_cpp_wrapper_header("cpu", aot_mode=True) == original.replace("mydev", "cpu")
