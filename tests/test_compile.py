"""torch.compile for mydev (inductor_backend): the code Inductor generates,
fusion, extern kernels, dynamic shapes, the second device, stream order and
asynchrony of compiled kernels, backward, autocast, random ops,
max-autotune, the FX graph cache and bad inputs.

Values are compared with the same function run eagerly on the CPU. Compiled
kernels sum in another order than ATen's, so float32 results agree within
rtol/atol 1e-4 rather than bitwise. Processes that need their own
environment (TORCH_LOGS, a fresh cache directory) run in a subprocess.
"""

import json
import re
import shutil

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
from torch._inductor.utils import run_and_get_code

from mydev_testing import (
    N_DEVICES,
    assert_close_to_cpu,
    assert_device_still_usable,
    compile_with_fx_cache,
    hold_stream,
    needs_two_devices,
    run_python,
)

pytestmark = pytest.mark.usefixtures("isolated_inductor", "fresh_dynamo")

D = "mydev:0"
RTOL, ATOL = 1e-4, 1e-4


def cpu_inputs(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) for shape in shapes]


def to_dev(tensors, device=D):
    return [t.to(device) for t in tensors]


# ------------------------------------------------- reading generated code --
KERNEL_DEFINITION = re.compile(r"^(\w+) = load_mydev_kernel\(async_compile, '(\w+)', (\[.*?\]), r'''", re.M)
STREAM_DEFINITION = re.compile(r"^\s*(\w+) = get_raw_stream\((\d+)\)$", re.M)
KERNEL_LAUNCH = re.compile(r"^\s*(mydev_\w+)\((.*)\)$", re.M)


def wrapper_call(code):
    """The body of the generated ``call`` (what runs per invocation)."""
    start = code.index("def call(self, args):")
    return code[start : code.index("\nrunner = ", start)]


def kernel_definitions(code):
    """{name: arg types} of the kernels the module defines."""
    found = {}
    for variable, name, arg_types in KERNEL_DEFINITION.findall(code):
        assert variable == name, (variable, name)
        found[name] = eval(arg_types)  # a list literal of strings
    return found


def kernel_launches(code):
    """[(kernel name, [argument expressions])] in launch order."""
    return [(name, [a.strip() for a in args.split(",")]) for name, args in KERNEL_LAUNCH.findall(wrapper_call(code))]


def assert_launches_on_raw_streams(code, device_index=0):
    """Every mydev kernel the module defines is launched, and every launch
    passes as its first argument a stream obtained from
    get_raw_stream(device_index) before it."""
    call = wrapper_call(code)
    streams = {var: int(idx) for var, idx in STREAM_DEFINITION.findall(call)}
    assert streams and set(streams.values()) == {device_index}, streams
    launches = kernel_launches(code)
    defined = kernel_definitions(code)
    assert launches, call
    assert {name for name, _ in launches} == set(defined)
    for name, args in launches:
        assert args[0] in streams, f"{name} is launched with {args[0]!r} as its stream:\n{call}"
        assert call.index(f"{args[0]} = get_raw_stream(") < call.index(f"{name}({args[0]}")
        assert len(args) == 1 + len(defined[name]), (name, args, defined[name])


def buffer_devices(code):
    """The device type of every buffer the generated call allocates (mydev's
    through empty_strided_mydev, on the device of its guard)."""
    call = wrapper_call(code)
    return re.findall(r"empty_strided\(.*device='([^']*)'", call) + ["mydev"] * call.count("empty_strided_mydev(")


# ------------------------------------------------------- generated code --
def pointwise_and_reduction(x, y):
    return (x.sin() + y).relu().sum(-1), x * 2


def test_generated_code_launches_mydev_kernels_on_the_current_stream():
    x, y = cpu_inputs((8, 16), (8, 16))
    out, codes = run_and_get_code(torch.compile(pointwise_and_reduction, fullgraph=True), *to_dev([x, y]))
    assert_close_to_cpu(out, pointwise_and_reduction(x, y), device=D, rtol=RTOL, atol=ATOL)
    assert len(codes) == 1
    code = codes[0]
    assert "from device_ext._C import _current_raw_stream as get_raw_stream" in code
    assert "from inductor_backend.kernel_modules import load_mydev_kernel" in code
    assert kernel_definitions(code), code
    assert_launches_on_raw_streams(code)
    devices = buffer_devices(code)
    assert devices and set(devices) == {"mydev"}, devices
    assert "device='cpu'" not in wrapper_call(code)
    assert "empty_strided_cpu(" not in wrapper_call(code)
    assert "with DeviceGuard(0):" in wrapper_call(code)
    assert "from inductor_backend.wrapper_runtime import DeviceGuard, empty_strided_mydev" in code
    # The kernels themselves are C++ from Inductor's CPU code generator.
    assert re.search(r'extern "C"\s+void\s+kernel\(', code), code


def test_wrapper_allocations_and_device_guard_are_direct_calls():
    """The generated call allocates through empty_strided_mydev and guards
    its device with DeviceGuard (single calls into device_ext._C, not
    torch.empty_strided(..., device='mydev') and torch.mydev.device)."""
    from inductor_backend.wrapper_runtime import DeviceGuard, empty_strided_mydev

    x, y = cpu_inputs((8, 16), (8, 16))
    _, (code,) = run_and_get_code(torch.compile(pointwise_and_reduction, fullgraph=True), *to_dev([x, y]))
    call = wrapper_call(code)
    assert "empty_strided_mydev((8, ), (1, ), torch.float32)" in call, call
    assert "device='mydev'" not in call, call

    buffer = empty_strided_mydev((4, 6), (1, 4), torch.float64)
    reference = torch.empty_strided((4, 6), (1, 4), dtype=torch.float64)
    assert (buffer.device, buffer.shape, buffer.stride(), buffer.dtype) == (
        torch.device(D),
        reference.shape,
        reference.stride(),
        reference.dtype,
    )
    buffer.copy_(torch.arange(24.0, dtype=torch.float64, device=D).view(6, 4).t())
    assert_close_to_cpu(buffer, torch.arange(24.0, dtype=torch.float64).view(6, 4).t(), device=D, exact=True)

    assert torch.mydev.current_device() == 0
    with DeviceGuard(N_DEVICES - 1):
        assert torch.mydev.current_device() == N_DEVICES - 1
        assert empty_strided_mydev((2,), (1,), torch.float32).device == torch.device("mydev", N_DEVICES - 1)
    assert torch.mydev.current_device() == 0


def test_wrapper_allocation_and_device_guard_refuse_bad_arguments():
    from inductor_backend.wrapper_runtime import DeviceGuard, empty_strided_mydev

    with pytest.raises(TypeError, match=r"^_empty_strided: size must be a tuple of ints$"):
        empty_strided_mydev([2, 3], (3, 1), torch.float32)
    with pytest.raises(TypeError, match=r"^_empty_strided: stride must be a tuple of ints$"):
        empty_strided_mydev((2, 3), (3, "1"), torch.float32)
    with pytest.raises(TypeError, match=r"takes two tuples of ints and a torch.dtype$"):
        empty_strided_mydev((2, 3), (3, 1), "float32")
    with pytest.raises(RuntimeError, match=r"_empty_strided: size has 2 dimensions but stride has 1"):
        empty_strided_mydev((2, 3), (1,), torch.float32)
    with pytest.raises(RuntimeError, match=r"negative"):
        empty_strided_mydev((2, -3), (3, 1), torch.float32)
    with pytest.raises(
        RuntimeError, match=rf"^Invalid device index mydev:{N_DEVICES}: there are {N_DEVICES} mydev devices"
    ):
        with DeviceGuard(N_DEVICES):
            pass
    assert_device_still_usable()


def test_torch_logs_output_code_shows_mydev_launches():
    result = run_python(
        """
        import torch
        f = torch.compile(lambda x: (x * 2).relu(), fullgraph=True)
        print(f(torch.arange(-2.0, 3.0, device="mydev")).cpu().tolist())
        """,
        env={"TORCH_LOGS": "output_code", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[0.0, 0.0, 0.0, 2.0, 4.0]"
    log = result.stderr
    assert "Output code" in log
    assert "load_mydev_kernel(async_compile, 'mydev_" in log
    assert re.search(r"raw_stream0 = get_raw_stream\(0\)", log), log
    assert re.search(r"mydev_\w+\(raw_stream0, ", log), log


# --------------------------------------------------------------- fusion --
def normalize_rows(x, w):
    y = (x.sin() * w).relu() + 1e-3
    return y / y.sum(-1, keepdim=True)


def test_pointwise_and_reduction_fuse_into_one_kernel():
    x, w = cpu_inputs((6, 40), (40,))
    out, (code,) = run_and_get_code(torch.compile(normalize_rows, fullgraph=True), *to_dev([x, w]))
    assert_close_to_cpu(out, normalize_rows(x, w), device=D, rtol=RTOL, atol=1e-6)
    assert code.count("= load_mydev_kernel(") == 1, code
    assert len(kernel_launches(code)) == 1
    assert_launches_on_raw_streams(code)


# --------------------------------------------------------- extern kernels --
def matmuls_conv_attention(a, b, c, batch, image, weight, q):
    return (
        (a @ b).relu(),
        torch.addmm(c, a, b),
        torch.bmm(batch, batch.transpose(1, 2)) * 2,
        F.conv2d(image, weight, padding=1) + 1,
        F.scaled_dot_product_attention(q, q, q),
    )


def test_extern_kernels_mm_addmm_bmm_conv_sdpa_match_cpu():
    args = cpu_inputs((8, 16), (16, 12), (12,), (2, 5, 6), (2, 3, 8, 8), (4, 3, 3, 3), (2, 2, 8, 16))
    out, (code,) = run_and_get_code(torch.compile(matmuls_conv_attention, fullgraph=True), *to_dev(args))
    assert_close_to_cpu(out, matmuls_conv_attention(*args), device=D, rtol=RTOL, atol=ATOL)
    call = wrapper_call(code)
    for extern in ("extern_kernels.mm(", "extern_kernels.addmm(", "extern_kernels.bmm(", "extern_kernels.convolution("):
        assert extern in call, f"{extern} missing:\n{call}"
    assert re.search(r"aten\._scaled_dot_product_\w+\.default\(", call), call
    # The pointwise epilogues stay generated kernels.
    assert_launches_on_raw_streams(code)


# --------------------------------------------------------- dynamic shapes --
def scaled_row_sums(x):
    return (x * 2).sin().sum(-1) + x.shape[0]


SIZES = (3, 5, 8, 13)


def test_dynamic_true_compiles_once_for_all_sizes():
    compiled = torch.compile(scaled_row_sums, dynamic=True, fullgraph=True)
    for i, n in enumerate(SIZES):
        x = cpu_inputs((n, 7), seed=n)[0]
        if i == 0:
            out, (code,) = run_and_get_code(compiled, x.to(D))
        else:
            out = compiled(x.to(D))
        assert_close_to_cpu(out, scaled_row_sums(x), device=D, rtol=RTOL, atol=ATOL, msg=f"n={n}")
    assert counters["stats"]["unique_graphs"] == 1
    # The sizes reach the kernel as int64 launch arguments.
    (arg_types,) = kernel_definitions(code).values()
    assert arg_types.count("const int64_t") >= 1, arg_types
    assert_launches_on_raw_streams(code)


def test_automatic_dynamic_recompiles_at_most_once():
    compiled = torch.compile(scaled_row_sums, fullgraph=True)
    for n in SIZES:
        x = cpu_inputs((n, 7), seed=n)[0]
        assert_close_to_cpu(compiled(x.to(D)), scaled_row_sums(x), device=D, rtol=RTOL, atol=ATOL, msg=f"n={n}")
    assert counters["stats"]["unique_graphs"] <= 2


# --------------------------------------------------------- second device --
def add_relu_scale(x):
    return (x + 1).relu() * 3


@needs_two_devices
def test_second_device_output_device_guard_and_current_device():
    (x,) = cpu_inputs((10,))
    assert torch.mydev.current_device() == 0
    compiled = torch.compile(add_relu_scale)
    out, (code,) = run_and_get_code(compiled, x.to("mydev:1"))
    assert_close_to_cpu(out, add_relu_scale(x), device="mydev:1", exact=True)
    assert torch.mydev.current_device() == 0
    call = wrapper_call(code)
    assert "with DeviceGuard(1):" in call, call
    assert_launches_on_raw_streams(code, device_index=1)

    # On a side stream of mydev:1 (the stream context makes mydev:1
    # current): the kernel waits for the work queued there before it.
    side = torch.mydev.Stream(device=1)
    source = x.to("mydev:1")  # before the latch: a copy from the host waits for the stream
    with torch.mydev.stream(side):
        x1 = torch.zeros(10, device="mydev:1")
        with hold_stream():
            x1.copy_(source)
            out1 = compiled(x1)
            assert side.query() is False
            assert torch.mydev.current_device() == 1
    side.synchronize()
    assert torch.mydev.current_device() == 0
    assert_close_to_cpu(out1, add_relu_scale(x), device="mydev:1", exact=True)

    # And the other way round: mydev:0 input while mydev:1 is current.
    with torch.mydev.device(1):
        out0 = compiled(x.to("mydev:0"))
        assert torch.mydev.current_device() == 1
    assert torch.mydev.current_device() == 0
    assert_close_to_cpu(out0, add_relu_scale(x), device="mydev:0", exact=True)


# ------------------------------------------------ streams and asynchrony --
def cos_affine(x):
    return (x * 2 + 1).cos()


def test_compiled_kernels_run_in_stream_order_with_eager_ops():
    n = 4096
    compiled = torch.compile(cos_affine, fullgraph=True)
    compiled(torch.zeros(n, device=D))  # compile first: compiling synchronizes
    torch.mydev.synchronize()

    side = torch.mydev.Stream()
    with torch.mydev.stream(side):
        x = torch.zeros(n, device=D)
        with hold_stream():  # everything below waits behind this
            x.fill_(3.0)  # eager write of x
            y = compiled(x)  # compiled kernel reads x
            done = torch.mydev.Event()
            done.record()
            # The compiled call only enqueued its kernel.
            assert done.query() is False
            assert side.query() is False
            z = y * 2 + x  # eager op on the compiled output
    side.synchronize()
    assert done.query() is True
    expected_y = cos_affine(torch.full((n,), 3.0))
    assert_close_to_cpu(y, expected_y, device=D, rtol=RTOL, atol=1e-6)
    assert_close_to_cpu(z, expected_y * 2 + 3.0, device=D, rtol=RTOL, atol=1e-6)


def test_compiled_call_on_default_stream_returns_before_its_kernels_ran():
    compiled = torch.compile(cos_affine, fullgraph=True)
    x = torch.ones(256, device=D)
    compiled(x)
    torch.mydev.synchronize()
    with hold_stream():
        y = compiled(x)
        assert torch.mydev.current_stream().query() is False
    torch.mydev.synchronize()
    assert_close_to_cpu(y, cos_affine(torch.ones(256)), device=D, rtol=RTOL, atol=1e-6)


# --------------------------------------------------------------- backward --
def mlp_loss(x, w1, b1, w2):
    return (F.gelu(x @ w1 + b1) @ w2).tanh().pow(2).mean()


def test_compiled_backward_gradients_match_cpu():
    cpu_args = [t.requires_grad_() for t in cpu_inputs((6, 10), (10, 16), (16,), (16, 4))]
    dev_args = [t.detach().to(D).requires_grad_() for t in cpu_args]
    compiled = torch.compile(mlp_loss, fullgraph=True)

    def forward_backward():
        loss = compiled(*dev_args)
        loss.backward()
        return loss

    loss, codes = run_and_get_code(forward_backward)
    loss_cpu = mlp_loss(*cpu_args)
    loss_cpu.backward()
    assert_close_to_cpu(loss.detach(), loss_cpu.detach(), device=D, rtol=RTOL, atol=ATOL)
    for i, (a_dev, a_cpu) in enumerate(zip(dev_args, cpu_args)):
        assert_close_to_cpu(a_dev.grad, a_cpu.grad, device=D, rtol=RTOL, atol=1e-5, msg=f"grad {i}")
    assert len(codes) == 2  # forward and backward graphs
    for code in codes:
        assert_launches_on_raw_streams(code)


def channel_statistics(grad, conv_out, mean, rstd):
    """BatchNorm backward's per-channel sums over a contiguous gradient and a
    channels-last convolution output (a Hugging Face ResNet's training step
    has them): Inductor fuses both reductions under one loop over channels,
    and every loop of that kernel is a 2-D (transposing) tile."""
    grad_sum = grad.sum((0, 2, 3))
    centred_sum = (grad * (conv_out - mean[None, :, None, None])).sum((0, 2, 3))
    return grad_sum, centred_sum * rstd


def test_reductions_of_transposing_tiles_under_one_outer_loop():
    # Device-generated inputs, one of them channels-last.
    grad = torch.randn(8, 32, 48, 48, device=D)
    conv_out = torch.randn(8, 32, 48, 48, device=D).contiguous(memory_format=torch.channels_last)
    mean, rstd = torch.randn(32, device=D), torch.rand(32, device=D)
    out, (code,) = run_and_get_code(torch.compile(channel_statistics, fullgraph=True), grad, conv_out, mean, rstd)
    assert "transpose_mxn" in code, "expected a 2-D tiled (transposing) kernel"
    expected = channel_statistics(grad.cpu(), conv_out.cpu(), mean.cpu(), rstd.cpu())
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=1e-3)


# ---------------------------------------------------------------- autocast --
def autocast_matmul(a, b):
    with torch.autocast("mydev", dtype=torch.bfloat16):
        return (a @ b).relu()


def cpu_autocast_matmul(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return (a @ b).relu()


def test_autocast_inside_compiled_function():
    a, b = cpu_inputs((8, 16), (16, 4))
    out, (code,) = run_and_get_code(torch.compile(autocast_matmul, fullgraph=True), *to_dev([a, b]))
    assert out.dtype == torch.bfloat16
    expected = cpu_autocast_matmul(a, b)
    assert expected.dtype == torch.bfloat16
    assert_close_to_cpu(out, expected, device=D, rtol=1.6e-2, atol=1e-2)
    assert "extern_kernels.mm(" in code
    assert "torch.bfloat16)" in wrapper_call(code)  # a bfloat16 buffer: empty_strided_mydev(size, stride, dtype)


# ------------------------------------------------------------- random ops --
P_DROP = 0.3


def dropout(x):
    return F.dropout(x, p=P_DROP, training=True)


def test_compiled_dropout_statistics_and_seeding():
    compiled = torch.compile(dropout, fullgraph=True)
    x = torch.ones(20000, device=D)

    def run(seed):
        torch.mydev.manual_seed(seed)
        return compiled(x).cpu()

    first, again, other = run(0), run(0), run(1)
    zero_fraction = (first == 0).float().mean().item()
    assert 0.25 < zero_fraction < 0.35, zero_fraction
    kept = first[first != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / (1 - P_DROP)))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert counters["stats"]["unique_graphs"] == 1


# ------------------------------------------------------------ max-autotune --
def mm_relu(a, b):
    return (a @ b).relu()


def test_max_autotune_mm_relu_matches_cpu():
    a, b = cpu_inputs((32, 64), (64, 16))
    out = torch.compile(mm_relu, mode="max-autotune", fullgraph=True)(*to_dev([a, b]))
    assert_close_to_cpu(out, mm_relu(a, b), device=D, rtol=RTOL, atol=ATOL)


def test_mydev_benchmarker_is_registered_and_times_on_mydev():
    import torch._inductor.compile_fx  # noqa: F401  (registers the backend)
    from torch._inductor.runtime import benchmarking

    from inductor_backend.benchmarker import benchmark_on_mydev

    assert benchmarking._BENCHMARK_DISPATCH["mydev"] is benchmark_on_mydev
    a, b = (t.to(D) for t in cpu_inputs((64, 64), (64, 64)))
    ms = benchmarking.benchmarker.benchmark(torch.mm, (a, b), warmup=1, rep=5)
    assert isinstance(ms, float) and ms > 0
    direct = benchmark_on_mydev(benchmarking.benchmarker, lambda: torch.mydev._sleep(1), warmup=1, rep=3)
    assert isinstance(direct, float) and direct > 0


# ---------------------------------------------------------- FX graph cache --
def test_fx_graph_cache_hits_across_processes_and_is_keyed_by_mydev_config(tmp_path):
    def compile_in_subprocess(*patches):
        """(hits, misses) of compiling f once per config patch, in order,
        in a new process."""
        return [(c["hit"], c["miss"]) for c in compile_with_fx_cache(list(patches), str(tmp_path))]

    # Cold cache: compiled and stored.
    assert compile_in_subprocess({}) == [(0, 1)]
    assert compile_in_subprocess(
        {},  # the same graph: loaded from the cache
        {"build_fingerprint": "another-build"},  # another torch-mydev build: a new entry
    ) == [(1, 0), (0, 1)]


_COMPILE_UNDER_ISA = """
import json, torch
from torch._dynamo.utils import counters

def above_and_scaled(x):
    return x > 0.25, torch.where(x > 0, x, -x) * 2

x = torch.randn(8, 37, device="mydev")
above, scaled = torch.compile(above_and_scaled)(x)
expected_above, expected_scaled = above_and_scaled(x.cpu())
print(json.dumps({
    "hit": counters["inductor"]["fxgraph_cache_hit"],
    "exact": torch.equal(above.cpu(), expected_above) and torch.equal(scaled.cpu(), expected_scaled),
}))
"""


def test_fx_graph_cache_is_keyed_by_the_vector_isa(tmp_path):
    """A graph cached for one vector ISA holds kernels whose loops step by
    that ISA's width; loaded by a process of a wider ISA, it overran its
    buffers. Processes under two ISAs share one cache directory: each
    compiles its own graph, and a second process of the first ISA hits."""
    own = torch.backends.cpu.get_cpu_capability().lower()
    lower = {"avx512": "avx2", "avx2": "default"}.get(own)
    if lower is None:
        pytest.skip(f"no narrower vector ISA than {own!r} to compare with")
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}

    def compile_under(isa):
        result = run_python(_COMPILE_UNDER_ISA, env={**env, "ATEN_CPU_CAPABILITY": isa}, timeout=240)
        assert result.returncode == 0, f"{isa}: {result.stderr[-2000:]}"
        return json.loads(result.stdout.strip().splitlines()[-1])

    assert compile_under(lower) == {"hit": 0, "exact": True}
    assert compile_under(own) == {"hit": 0, "exact": True}
    assert compile_under(lower) == {"hit": 1, "exact": True}


def test_kernel_cache_never_loads_a_module_built_against_other_device_headers(tmp_path):
    """An upgrade that changes the launch contract (the headers under
    device_ext/include) while an Inductor cache from the old version is
    still on disk, at the same include path: the old kernel module must not
    be loaded (it would refuse the new ABI), the kernel is rebuilt."""
    import inductor_backend.kernel_modules as kernel_modules

    include_dir = tmp_path / "include"
    shutil.copytree(kernel_modules.INCLUDE_DIR, include_dir)
    contract = include_dir / "mydev_compiled_kernel.h"
    current_contract = contract.read_text()
    version = re.search(r"#define MYDEV_COMPILED_KERNEL_ABI_VERSION (\d+)", current_contract)
    script = f"""
        import torch
        import inductor_backend.kernel_modules as kernel_modules
        torch._inductor.config.fx_graph_cache = False  # reach the kernel cache
        kernel_modules.INCLUDE_DIR = {str(include_dir)!r}
        try:
            result = torch.compile(lambda x: (x * 2).relu() + 0.5)(torch.arange(-2.0, 2.0, device="mydev"))
            print(result.cpu().tolist())
        except Exception as error:
            print(type(error).__name__, error)
        """
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_cache")}

    contract.write_text(current_contract.replace(version.group(0), "#define MYDEV_COMPILED_KERNEL_ABI_VERSION 999"))
    older = run_python(script, env=env, timeout=240)
    assert older.returncode == 0, older.stderr
    assert f"built for kernel ABI 999, but device_ext._C provides {version.group(1)}" in older.stdout

    contract.write_text(current_contract)
    current = run_python(script, env=env, timeout=240)
    assert current.returncode == 0, current.stderr
    assert current.stdout.strip().splitlines()[-1] == "[0.5, 0.5, 0.5, 2.5]"


# ---------------------------------------------------------------- settings --
def test_unknown_kernel_language_is_a_clear_error():
    import inductor_backend.config as mydev_config

    compiled = torch.compile(add_relu_scale)
    expected = (
        "ValueError: inductor_backend.config.kernel_language='opencl' (MYDEV_INDUCTOR_KERNEL_LANGUAGE): "
        "the mydev kernel languages are 'cpp', 'triton'"
    )
    with (
        mydev_config.patch(kernel_language="opencl"),
        pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match=re.escape(expected)) as info,
    ):
        compiled(torch.ones(4, device=D))
    assert type(info.value.inner_exception) is ValueError
    assert_device_still_usable()


# --------------------------------------------------------------- bad input --
def test_compiled_for_mydev_called_with_cpu_tensor_recompiles():
    compiled = torch.compile(add_relu_scale)
    (x,) = cpu_inputs((10,))
    assert_close_to_cpu(compiled(x.to(D)), add_relu_scale(x), device=D, exact=True)
    out = compiled(x)
    assert out.device == torch.device("cpu")
    torch.testing.assert_close(out, add_relu_scale(x), rtol=0, atol=0)
    assert counters["stats"]["unique_graphs"] == 2
    if N_DEVICES >= 2:
        assert_close_to_cpu(compiled(x.to("mydev:1")), add_relu_scale(x), device="mydev:1", exact=True)
    assert_device_still_usable()


SCALE_KERNEL = r"""
#include <cstdint>
extern "C" void kernel(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = 2.0f * in[i] + 1.0f;
}
"""


@pytest.fixture(scope="module")
def scale_launcher(isolated_inductor):
    import torch._inductor.compile_fx  # noqa: F401  (registers the backend)

    from inductor_backend.kernel_modules import MydevKernelCodeCache

    return MydevKernelCodeCache.load_kernel_async(
        "mydev_test_scale", ["float*", "const float*", "int64_t"], SCALE_KERNEL
    )()


def test_launcher_runs_hand_written_kernel_on_stream(scale_launcher):
    from device_ext._C import _current_raw_stream

    x = torch.arange(6.0, device=D)
    out = torch.empty(6, device=D)
    with hold_stream():
        assert scale_launcher(_current_raw_stream(0), out, x, 6) is None
        assert torch.mydev.current_stream().query() is False  # queued, not run
    torch.mydev.synchronize()
    assert_close_to_cpu(out, torch.arange(6.0) * 2 + 1, exact=True)


def test_launcher_rejects_bad_arguments_clearly(scale_launcher):
    from device_ext._C import _current_raw_stream

    stream = _current_raw_stream(0)
    x = torch.arange(6.0, device=D)
    out = torch.full((6,), -1.0, device=D)
    with pytest.raises((RuntimeError, ValueError), match=r"mydev_test_scale.*argument 2.*cpu"):
        scale_launcher(stream, out, x.cpu(), 6)
    with pytest.raises((RuntimeError, ValueError), match=r"mydev_test_scale.*argument 1.*str"):
        scale_launcher(stream, "out", x, 6)
    with pytest.raises(TypeError, match=r"mydev_test_scale\(stream, \.\.\.\) takes 3 kernel arguments"):
        scale_launcher(stream, out, x)
    with pytest.raises(TypeError, match="takes 3 kernel arguments"):
        scale_launcher(stream, out, x, 6, 7)
    with pytest.raises(TypeError, match="mydev_test_scale: argument 3 must be an int"):
        scale_launcher(stream, out, x, 6.5)
    with pytest.raises(ValueError, match="mydev_test_scale: null stream"):
        scale_launcher(0, out, x, 6)
    if N_DEVICES > 1:
        with pytest.raises(RuntimeError, match=r"argument 2 is on mydev:1, but the kernel runs on mydev:0"):
            scale_launcher(stream, out, x.to("mydev:1"), 6)
    torch.mydev.synchronize()
    # Nothing was launched by the rejected calls.
    assert_close_to_cpu(out, torch.full((6,), -1.0), exact=True)
    assert_device_still_usable()


def test_kernel_failure_is_reported_at_the_next_synchronization():
    """An error inside a compiled kernel (integer division by zero, which
    Inductor's C++ kernels check) surfaces asynchronously, like an eager
    kernel's, naming the kernel; the device stays usable."""
    compiled = torch.compile(lambda a, b: a // b + 1)
    a = torch.tensor([4, 6, 8], device=D)
    b = torch.tensor([2, 0, 4], device=D)
    compiled(a, b)  # only enqueued
    with pytest.raises(RuntimeError, match=r"kernel 'mydev_fused_\w+' failed on mydev:0.*ZeroDivisionError"):
        torch.mydev.synchronize()
    ok = compiled(a, torch.tensor([2, 3, 4], device=D))
    assert_close_to_cpu(ok, torch.tensor([3, 3, 3]), exact=True)
    assert_device_still_usable()


# ---------------------------------------------- CPU scalars in mydev graphs --
# Eager mydev ops accept 0-dim CPU tensors as scalars (as CUDA does), and
# Dynamo passes Python floats it does not specialize (torch 2.13:
# specialize_float=False, so the second value a float argument takes) to
# the graph as 0-dim CPU tensors. Inductor turns such inputs into scalars
# only for Triton (GraphLowering.is_unspec_arg); mydev's C++ kernels take a
# pointer to them, so the launch copies the value (the tensor may be freed
# before the kernel runs).


def scale_by(x, alpha):
    return (x * alpha).relu()


def test_python_float_argument_that_changes_value():
    compiled = torch.compile(scale_by)
    (x,) = cpu_inputs((5, 8))
    for alpha in (0.5, 0.25, 0.125):  # the second value makes alpha dynamic
        assert_close_to_cpu(compiled(x.to(D), alpha), scale_by(x, alpha), exact=True, msg=f"alpha={alpha}")


def test_zero_dim_cpu_tensor_argument():
    (x,) = cpu_inputs((5, 8))
    alpha = torch.tensor(0.5)
    assert scale_by(x.to(D), alpha).device == torch.device(D)  # eager accepts it
    assert_close_to_cpu(torch.compile(scale_by)(x.to(D), alpha), scale_by(x, alpha), exact=True)


def test_compiled_optimizer_step():
    """torch.compile(opt.step): AdamW keeps its step count as a CPU tensor."""
    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(8, 4)
    dev_model = torch.nn.Linear(8, 4).to(D)
    dev_model.load_state_dict(cpu_model.state_dict())
    opt_cpu = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    opt_dev = torch.optim.AdamW(dev_model.parameters(), lr=1e-2)
    (x,) = cpu_inputs((3, 8))
    cpu_model(x).pow(2).sum().backward()
    dev_model(x.to(D)).pow(2).sum().backward()

    @torch.compile
    def step():
        opt_dev.step()

    step()
    opt_cpu.step()
    for p_dev, p_cpu in zip(dev_model.parameters(), cpu_model.parameters()):
        assert_close_to_cpu(p_dev, p_cpu, rtol=RTOL, atol=1e-6)


# ------------------------------------------------------------- cpp_wrapper --
def test_cpp_wrapper_launches_kernels_on_the_stream_and_uses_mydev_shims():
    """The C++ wrapper: kernels submitted as lambdas to the current stream of
    their device under a mydev device guard, mm through mydev's C shim, and a
    CPU scalar input captured by value."""

    def fn(a, b, alpha):
        return (torch.mm(a, b) * alpha).relu().sum(1)

    a_cpu, b_cpu = cpu_inputs((6, 8), (8, 5))
    compiled = torch.compile(fn, dynamic=True)
    with torch._inductor.config.patch(cpp_wrapper=True):
        out, codes = run_and_get_code(compiled, a_cpu.to(D), b_cpu.to(D), 0.5)
        again = compiled(a_cpu.to(D), b_cpu.to(D), 0.25)
    code = "\n".join(codes)
    assert "mydev_compiled::DeviceGuard device_guard(0)" in code
    assert re.search(r"mydev_compiled::launch\(mydev_compiled::current_stream\(0\), \"cpp_fused", code)
    assert "aoti_torch_mydev_mm_out(" in code
    assert "cached_torch_device_type_privateuse1" in code
    assert "mydev_compiled::host_scalar_argument(" in code  # alpha, by value
    assert_close_to_cpu(out, fn(a_cpu, b_cpu, 0.5), device=D, rtol=RTOL, atol=ATOL)
    assert_close_to_cpu(again, fn(a_cpu, b_cpu, 0.25), device=D, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------ registration --
def test_registration_is_lazy_and_complete_once_inductor_is_imported():
    """import torch does not import Dynamo or Inductor (they cost as much as
    torch itself); importing them, as torch.compile and Inductor's compile
    workers do, registers every mydev piece."""
    result = run_python(
        """
import sys, torch
print("dynamo" if "torch._dynamo" in sys.modules else "no-dynamo",
      "inductor" if "torch._inductor" in sys.modules else "no-inductor")
from torch._dynamo.device_interface import get_interface_for_device
print(get_interface_for_device("mydev").__name__, get_interface_for_device("mydev:1").__name__)
import torch._inductor.compile_fx
from torch._inductor.codegen.common import get_device_op_overrides, get_scheduling_for_device, get_wrapper_codegen_for_device
from torch._inductor.runtime.benchmarking import _BENCHMARK_DISPATCH
print(get_scheduling_for_device("mydev").__name__,
      get_wrapper_codegen_for_device("mydev").__name__,
      get_wrapper_codegen_for_device("mydev", cpp_wrapper=True).__name__,
      type(get_device_op_overrides("mydev")).__name__,
      "mydev" in _BENCHMARK_DISPATCH)
"""
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[0] == "no-dynamo no-inductor"
    assert lines[1] == "MydevInterface MydevInterface"
    assert lines[2] == ("MydevScheduling MydevPythonWrapperCodegen MydevCppWrapperCodegen MydevDeviceOpOverrides True")


def test_control_flow_subgraphs_run_on_mydev():
    """torch.cond and while_loop compile into subgraph wrappers, whose kernels
    launch on mydev like the graph's own."""

    def branch(x):
        return torch.cond(x.sum() > 0, lambda x: (x * 2).sin(), lambda x: (x - 1).cos(), (x,))

    def loop(i, x):
        return torch._higher_order_ops.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2 + 1), (i, x))

    (x,) = cpu_inputs((8,))
    for sign in (1, -1):
        out, (code,) = run_and_get_code(torch.compile(branch, fullgraph=True), (sign * x.abs()).to(D))
        assert_close_to_cpu(out, branch(sign * x.abs()), device=D, rtol=RTOL, atol=ATOL)
    assert "raw_stream0" in code
    i = torch.tensor(0)
    steps, result = torch.compile(loop, fullgraph=True)(i.to(D), x.to(D))
    assert_close_to_cpu(result, loop(i, x)[1], device=D, rtol=RTOL, atol=ATOL)
    assert steps.item() == 3
