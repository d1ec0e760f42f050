"""Why each patch of Inductor, Dynamo and FakeTensor in device_ext/torch_patches/
(inductor.py, autotuning.py, dynamo.py, fake_tensor.py) is needed.

Each test runs in a fresh interpreter (the patches are process-wide): it
compiles a function with the workaround in place (works, values equal the
CPU), then puts torch 2.13's original function back (every patched function
keeps it as ``__wrapped__``), compiles the same function again after
torch._dynamo.reset() and reports what a user would have hit. The FX graph
and AOTAutograd caches are off there: their key does not cover these
patches, so the second compile would otherwise be served the first one's
graph.
"""

import json
import textwrap

import pytest

from mydev_testing import needs_two_devices, run_python

pytestmark = pytest.mark.usefixtures("isolated_inductor")

SUBPROCESS_ENV = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}

PRELUDE = """
import importlib, json, traceback
import torch
import torch._inductor.compile_fx  # registers inductor_backend (import hook)
from torch._inductor import scheduler
from torch._inductor.utils import run_and_get_code
from device_ext.torch_patches import inductor as inductor_patches

def attempt(fn, *args):
    '''Compiles and runs fn on mydev tensors; what happened, as a dict.'''
    torch._dynamo.reset()
    cpu_args = [a.cpu() for a in args]
    try:
        out, codes = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
    except Exception as error:
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        return {"ok": False, "error": f"{type(error).__name__}: {error}", "frames": frames}
    expected = fn(*cpu_args)
    return {
        "ok": True,
        "device": str(out.device),
        "max_error": (out.cpu() - expected).abs().max().item(),
        "code": codes[0],
        "current_device": torch.mydev.current_device(),
    }
"""


def run_both(body: str):
    """Runs PRELUDE + body, which must print one JSON line
    {"patched": attempt(...), "original": attempt(...)}; returns it."""
    result = run_python(PRELUDE + textwrap.dedent(body), env=SUBPROCESS_ENV, timeout=240)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_get_current_backend_reports_cpp_for_mydev():
    """Without it Inductor asks mydev's kernels for "triton" semantics: index
    expressions lose their dtype and the C++ kernel generator fails on an
    iota-based mask (here: a causal mask made with tril)."""
    seen = run_both(
        """
        L = 8
        def causal_softmax(s):
            mask = torch.where(torch.ones(L, L, dtype=torch.bool, device=s.device).tril(), 0.0, float("-inf"))
            return torch.softmax(s + mask, dim=-1)

        s = torch.randn(2, L, L, generator=torch.Generator().manual_seed(0)).to("mydev")
        assert torch._inductor.utils.get_current_backend("mydev") == "cpp"
        patched = attempt(causal_softmax, s)
        original = torch._inductor.utils.get_current_backend.__wrapped__
        for name in inductor_patches.GET_CURRENT_BACKEND_USERS:
            setattr(importlib.import_module(name), "get_current_backend", original)
        assert torch._inductor.utils.get_current_backend("mydev") == "triton"
        print(json.dumps({"patched": patched, "original": attempt(causal_softmax, s)}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    assert patched["ok"], patched
    assert patched["device"] == "mydev:0" and patched["max_error"] < 1e-6
    assert not original["ok"]
    assert original["error"].startswith("InductorError: AssertionError"), original["error"]
    # The C++ kernel generator's arange needs the index dtype the "triton"
    # answer left out.
    assert "index_expr" in original["frames"] and "arange" in original["frames"], original["frames"]


@needs_two_devices
def test_device_need_guard_guards_mydev_devices():
    """Without it the wrapper has no device guard: code compiled for mydev:1
    allocates its buffers on whatever device is current (mydev:0 here) and
    hands them to a kernel on mydev:1's stream, which the launcher refuses."""
    seen = run_both(
        """
        def add_relu_scale(x):
            return (x + 1).relu() * 3

        x = torch.randn(10, generator=torch.Generator().manual_seed(0)).to("mydev:1")
        patched = attempt(add_relu_scale, x)
        scheduler.device_need_guard = scheduler.device_need_guard.__wrapped__
        print(json.dumps({"patched": patched, "original": attempt(add_relu_scale, x)}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    assert patched["ok"], patched
    assert "with DeviceGuard(1):" in patched["code"]
    assert patched["device"] == "mydev:1" and patched["max_error"] == 0
    assert patched["current_device"] == 0

    assert not original["ok"]
    assert "is on mydev:0, but the kernel runs on mydev:1" in original["error"], original["error"]


def test_is_cpu_keeps_scheduler_reindexing_away_from_mydev_nodes():
    """Without it the scheduler tries its SIMD-only reindexing of a
    pointwise for a reduction it fuses with (RMSNorm over a reshaped input,
    as in its own comment) on mydev's C++ kernels, whose node groups it does
    not understand: compilation fails in _try_reindex_pointwise_for_reduction."""
    seen = run_both(
        """
        def rms_norm_over_groups(x, w):
            b, d = x.shape
            y = x.view(b * 4, d // 4)
            y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)
            return y.view(b, d) * w

        g = torch.Generator().manual_seed(0)
        x, w = torch.randn(8, 64, generator=g).to("mydev"), torch.randn(64, generator=g).to("mydev")
        patched = attempt(rms_norm_over_groups, x, w)
        scheduler.BaseSchedulerNode.is_cpu = scheduler.BaseSchedulerNode.is_cpu.__wrapped__
        print(json.dumps({"patched": patched, "original": attempt(rms_norm_over_groups, x, w)}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    assert patched["ok"], patched
    assert patched["device"] == "mydev:0" and patched["max_error"] < 1e-5
    assert not original["ok"]
    assert original["error"].startswith("InductorError: TypeError"), original["error"]
    assert "_try_reindex_pointwise_for_reduction" in original["frames"], original["frames"]


def test_small_variances_lower_to_two_sums_as_on_the_cpu():
    """Without it a LayerNorm over 64 features on mydev lowers to a Welford
    reduction (the rule for devices other than "cpu"), which the C++ kernels
    run with a Welford combine across vector lanes per row: about 3x the
    time of the two sums the CPU gets (not asserted here: the code is).
    Beyond the CPU's threshold (1024 elements) both keep Welford; the
    values match the CPU either way."""
    seen = run_both(
        """
        from torch._inductor import lowering

        g = torch.Generator().manual_seed(0)
        small = torch.randn(64, 64, generator=g).to("mydev")
        large = torch.randn(4, 2048, generator=g).to("mydev")
        layer_norm = lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:])
        patched = {"small": attempt(layer_norm, small), "large": attempt(layer_norm, large)}
        lowering.use_two_step_variance = lowering.use_two_step_variance.__wrapped__
        print(json.dumps({"patched": patched, "original": attempt(layer_norm, small)}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    for case in ("small", "large"):
        assert patched[case]["ok"], patched[case]
        assert patched[case]["max_error"] < 1e-5
    assert "welford" not in patched["small"]["code"].lower()
    assert "welford" in patched["large"]["code"].lower()
    assert original["ok"] and original["max_error"] < 1e-5
    assert "welford" in original["code"].lower()


def test_cat_copies_into_slices_as_on_the_cpu():
    """Without it a cat of views that need copying lowers to a pointwise cat
    on mydev (the rule for devices other than "cpu"): every output element
    picks its input with masked loads, which the C++ generator leaves as a
    scalar loop, about 4x the time of the copies into slices the CPU gets
    for a transformer block's qkv gradient (not asserted here: the code
    is). config.force_pointwise_cat still forces the pointwise form; the
    values match the CPU every time."""
    seen = run_both(
        """
        from torch._inductor import config, lowering

        def cat_of_transposes(a, b):
            return torch.cat([a.t(), b.t()], dim=1) * 2

        a, b = torch.randn(8, 16, device="mydev"), torch.randn(8, 16, device="mydev")
        patched = attempt(cat_of_transposes, a, b)
        with config.patch(force_pointwise_cat=True):
            forced = attempt(cat_of_transposes, a, b)
        lowering.pointwise_cat = lowering.pointwise_cat.__wrapped__
        original = attempt(cat_of_transposes, a, b)
        print(json.dumps({"patched": patched, "forced": forced, "original": original}))
        """
    )
    for case in ("patched", "forced", "original"):
        assert seen[case]["ok"], seen[case]
        assert seen[case]["device"] == "mydev:0" and seen[case]["max_error"] == 0
    # A masked load is a lambda the element's select calls: "[&]".
    assert "[&]" not in seen["patched"]["code"]
    assert "[&]" in seen["forced"]["code"]
    assert "[&]" in seen["original"]["code"]


# The start of a plain script (it imports only torch): one training step of
# a model compiled on mydev against the same model eagerly on the CPU.
COMPILED_GRADIENTS_SCRIPT = """
import torch
from torch._inductor.utils import run_and_get_code

def gradients(model, x):
    model.zero_grad()
    model(x).square().mean().backward()
    return [p.grad for p in model.parameters()]

def compiled_backward(build, input_shape):
    '''build() on the CPU and on mydev with the same weights, and a batch of
    input_shape made on mydev: checks that every gradient of the compiled
    mydev model matches the CPU's; returns the code of its backward.'''
    torch.manual_seed(0)
    cpu_model = build()
    model = build().to("mydev")
    model.load_state_dict(cpu_model.state_dict())
    x = torch.randn(*input_shape, device="mydev")
    expected = gradients(cpu_model, x.cpu())
    result, codes = run_and_get_code(gradients, torch.compile(model), x)
    for got, want in zip(result, expected):
        assert got.device.type == "mydev"
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
    return codes[-1]
"""


def test_an_attention_blocks_qkv_gradient_is_copied_into_slices_in_a_plain_script():
    """The case the cat patch was made for, as a user meets it: the backward
    of a qkv projection split into heads concatenates the three head
    gradients. In a script that imports only torch, that cat is copies into
    slices (no masked loads in the backward's code) and the gradients equal
    the CPU's."""
    completed = run_python(
        COMPILED_GRADIENTS_SCRIPT
        + textwrap.dedent(
            """
        import torch.nn.functional as F

        class SelfAttention(torch.nn.Module):
            def __init__(self, width=32, heads=4):
                super().__init__()
                self.heads = heads
                self.qkv = torch.nn.Linear(width, 3 * width)
                self.out = torch.nn.Linear(width, width)

            def forward(self, x):
                batch, length, width = x.shape
                q, k, v = (
                    t.view(batch, length, self.heads, -1).transpose(1, 2)
                    for t in self.qkv(x).split(width, dim=-1)
                )
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return self.out(y.transpose(1, 2).reshape(batch, length, width))

        backward = compiled_backward(SelfAttention, (2, 16, 32))
        assert "cat" in backward and "[&]" not in backward, backward
        print("copied into slices, same as the CPU")
        """
        )
    )
    assert completed.returncode == 0, completed.stderr
    assert "copied into slices, same as the CPU" in completed.stdout


def test_select_conv_backend_answers_like_the_cpu_for_mydev():
    """Without it FakeTensor's convolution decides mydev's output layout from
    the "Overrideable" backend (contiguous), while the device runs the CPU's
    convolution, which produces channels-last output for channels-last
    input, as it does in eager. Inductor's layout optimization hands the
    convolution channels-last input, and the graph then asserts the other
    layout than the device produced."""
    seen = run_both(
        """
        import torch.nn.functional as F

        def conv_relu(x, w):
            return F.conv2d(x, w, padding=1) + 1

        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 8, 8, generator=g).to("mydev")
        w = torch.randn(4, 3, 3, 3, generator=g).to("mydev")
        channels_last = x.to(memory_format=torch.channels_last)
        assert F.conv2d(channels_last, w, padding=1).is_contiguous(memory_format=torch.channels_last)
        # The original goes first: FakeTensor caches convolution results per
        # process, so a later compile would be served the first one's layout.
        patched_select = torch._C._select_conv_backend
        torch._C._select_conv_backend = patched_select.__wrapped__
        original = attempt(conv_relu, x, w)
        torch._C._select_conv_backend = patched_select
        torch._subclasses.fake_tensor.FakeTensorMode.cache_clear()
        print(json.dumps({"patched": attempt(conv_relu, x, w), "original": original}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    assert patched["ok"], patched
    assert patched["device"] == "mydev:0" and patched["max_error"] < 1e-4
    assert not original["ok"]
    assert "AssertionError" in original["error"] and "stride" in original["error"], original["error"]


def test_compiled_conv1d_and_conv3d_train_in_a_plain_script():
    """The adjustment above runs the CPU's selection on real stand-ins, and
    for a 1-d convolution that selection views the stand-ins as 2-d: run
    under the fake mode, those views were refused and every compiled Conv1d
    (Whisper's audio encoder) failed to trace. A user's script: Conv1d and
    Conv3d models compiled for a training step, gradients against the same
    step eagerly on the CPU."""
    completed = run_python(
        """
        import copy
        import torch
        from torch import nn

        def train_step(model, x):
            model.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            return loss.detach(), [p.grad for p in model.parameters()]

        for conv, shape in ((nn.Conv1d(8, 16, 3, padding=1), (4, 8, 32)),
                            (nn.Conv3d(3, 6, 3, padding=1), (2, 3, 6, 8, 8))):
            torch.manual_seed(0)
            cpu_model = nn.Sequential(conv, nn.GELU(), conv.__class__(conv.out_channels, 4, 1))
            model = copy.deepcopy(cpu_model).to("mydev")
            x = torch.randn(shape, device="mydev")
            loss, grads = train_step(torch.compile(model), x)
            cpu_loss, cpu_grads = train_step(cpu_model, x.cpu())
            assert loss.device.type == "mydev"
            torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-4, atol=1e-5)
            for grad, cpu_grad in zip(grads, cpu_grads):
                torch.testing.assert_close(grad.cpu(), cpu_grad, rtol=1e-4, atol=1e-5)
            print(type(conv).__name__, "trained")
        """,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.split() == ["Conv1d", "trained", "Conv3d", "trained"], completed.stdout


# A user-defined Triton kernel must live in a file (Triton reads its source).
USER_KERNEL_MODULE = '''
import os, sys, tempfile
import triton
import triton.language as tl

kernel_dir = tempfile.mkdtemp()
with open(os.path.join(kernel_dir, "user_kernels.py"), "w") as source:
    source.write("""
import triton
import triton.language as tl

@triton.jit
def add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)
""")
sys.path.insert(0, kernel_dir)
from user_kernels import add_one_kernel
'''


def test_has_triton_counts_mydev_as_a_triton_device():
    """Without it Dynamo does not know Triton kernels on mydev:
    torch.utils._triton.has_triton() asks a fixed list of devices and answers
    False here, so Dynamo traces into the kernel's launch code and fails
    (a graph break, an error with fullgraph=True)."""
    pytest.importorskip("triton", reason="Triton is optional for mydev")
    seen = run_both(
        USER_KERNEL_MODULE
        + textwrap.dedent(
            """
        def add_one_twice(x):
            if x.device.type == "cpu":     # the reference (Triton has no CPU backend here)
                return (x + 1) * 2
            out = torch.empty_like(x)
            add_one_kernel[(1,)](x, out, x.numel(), BLOCK=64)
            return out * 2

        x = torch.randn(10, generator=torch.Generator().manual_seed(0)).to("mydev")
        assert torch.utils._triton.has_triton()
        patched = attempt(add_one_twice, x)
        torch.utils._triton.has_triton = torch.utils._triton.has_triton.__wrapped__
        assert not torch.utils._triton.has_triton()
        print(json.dumps({"patched": patched, "original": attempt(add_one_twice, x)}))
        """
        )
    )
    patched, original = seen["patched"], seen["original"]
    assert patched["ok"], patched
    assert patched["device"] == "mydev:0" and patched["max_error"] == 0
    assert "add_one_kernel" in patched["code"]
    assert not original["ok"]
    assert original["error"].startswith("Unsupported"), original["error"]
    assert "triton" in original["error"], original["error"]


def test_mydev_triton_kernels_compiled_in_workers_get_their_python_back():
    """Without it every Triton kernel Inductor compiles in a worker process
    fails at its first launch on mydev: the worker drops the kernel's Python
    function before sending it back (a GPU only needs the binary), and the
    simulator interprets that function."""
    pytest.importorskip("triton", reason="Triton is optional for mydev")
    seen = run_both(
        """
        import torch._inductor.config
        import inductor_backend.config as mydev_config
        from torch._inductor.async_compile import AsyncCompile, CompiledTritonKernels
        from torch._inductor.runtime import triton_heuristics

        # Kernels compile in the worker pool once it is up.
        torch._inductor.config.compile_threads = 2
        AsyncCompile.use_process_pool()
        AsyncCompile._ready_future.result(timeout=120)

        def cos_affine(x):
            return (x * 2 + 1).cos()

        x = torch.randn(100, generator=torch.Generator().manual_seed(0)).to("mydev")
        with mydev_config.patch(kernel_language="triton"):
            patched = attempt(cos_affine, x)
            autotuner = triton_heuristics.CachingAutotuner
            autotuner._make_launchers = autotuner._make_launchers.__wrapped__
            CompiledTritonKernels.cache_clear()   # compile again, in a worker
            original = attempt(cos_affine, x)
        print(json.dumps({"patched": patched, "original": original}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    assert patched["ok"], patched
    assert patched["device"] == "mydev:0" and patched["max_error"] < 1e-6
    assert "async_compile.triton(" in patched["code"]
    assert not original["ok"]
    assert "NoneType" in original["error"], original["error"]


# ------------------------------------------- max-autotune (autotuning.py) --
AUTOTUNE_PRELUDE = """
from torch._inductor import config as inductor_config, select_algorithm, utils
from torch._inductor.autotune_process import GPUDeviceBenchmarkMixin
from torch._inductor.codegen.cpp_template import CppTemplate

timed = []
select_algorithm.add_feedback_saver(
    lambda timings, name, *_: timed.append(sorted(c.info_dict().get("backend") for c in timings))
)

def bmm_inputs(batch):
    '''Another batch, another autotuning key: nothing is served from the
    timings of an earlier attempt in this process (and the on-disk cache of
    timings, shared with other tests, is off).'''
    torch.mydev.manual_seed(batch)
    return torch.randn(batch, 32, 64, device="mydev"), torch.randn(batch, 64, 48, device="mydev")

def bmm_relu(a, b):
    return torch.bmm(a, b).relu()

def autotuned(batch):
    del timed[:]
    with inductor_config.patch(max_autotune=True, autotune_local_cache=False):
        seen = attempt(bmm_relu, *bmm_inputs(batch))
    seen["timed"] = list(timed)
    return seen
"""


def run_both_autotuned(undo: str):
    """Autotunes a bmm with every adjustment of autotuning.py in place, then
    again after ``undo`` (a statement putting one of torch's originals back)."""
    return run_both(
        AUTOTUNE_PRELUDE
        + f"""
patched = autotuned(2)
{undo}
print(json.dumps({{"patched": patched, "original": autotuned(3)}}))
"""
    )


def assert_template_and_aten_timed(patched):
    assert patched["ok"], patched
    assert patched["device"] == "mydev:0" and patched["max_error"] < 1e-4
    assert patched["timed"] == [["CPP", "extern"]], patched["timed"]


def test_cpp_templates_are_offered_for_mydev():
    """Without it the C++ GEMM / BMM templates are offered for device "cpu"
    only: ATen is max-autotune's one candidate for a mydev matrix multiply,
    and nothing is timed."""
    seen = run_both_autotuned("utils._use_template_for_cpu = utils._use_template_for_cpu.__wrapped__")
    patched, original = seen["patched"], seen["original"]
    assert_template_and_aten_timed(patched)
    assert original["ok"] and original["timed"] == [], original
    assert "extern_kernels.bmm(" in original["code"]


def test_mydev_cpp_candidates_are_chosen_at_lowering():
    """Without it the choice is deferred to the scheduler, which times each
    candidate fused with its epilogue, and that timing exists for Triton
    kernels only: the C++ scheduling raises NotImplementedError."""
    seen = run_both_autotuned(
        "select_algorithm.AlgorithmSelectorCache.__call__ = select_algorithm.AlgorithmSelectorCache.__call__.__wrapped__"
    )
    patched, original = seen["patched"], seen["original"]
    assert_template_and_aten_timed(patched)
    assert not original["ok"]
    assert original["error"].startswith("InductorError: NotImplementedError"), original["error"]
    assert "benchmark_fused_nodes" in original["frames"], original["frames"]


def test_aten_candidates_are_timed_on_mydev():
    """Without it ATen's candidate is timed through the device interface of
    the first GPU_TYPES device among the tensors, else CUDA's: on this host
    CUDA is missing and autotuning reports an incorrect result."""
    seen = run_both_autotuned("GPUDeviceBenchmarkMixin.do_bench = GPUDeviceBenchmarkMixin.do_bench.__wrapped__")
    patched, original = seen["patched"], seen["original"]
    assert_template_and_aten_timed(patched)
    assert not original["ok"]
    assert "Incorrect result from choice ExternKernelCaller(extern_kernels.bmm)" in original["error"]
    assert "Torch not compiled with CUDA enabled" in original["error"], original["error"]


def test_cpp_template_candidates_are_timed_as_kernels_on_the_stream():
    """Without it a template candidate is timed by Inductor's CPU request,
    which calls the kernel in the host process on the tensors' data
    pointers: host code dereferencing device memory, which faults (the
    process dies with the driver's message)."""
    result = run_python(
        PRELUDE
        + AUTOTUNE_PRELUDE
        + """
patched = autotuned(2)
print(json.dumps(patched), flush=True)
CppTemplate.generate = CppTemplate.generate.__wrapped__
autotuned(3)
print("survived")
""",
        env=SUBPROCESS_ENV,
        timeout=240,
    )
    assert_template_and_aten_timed(json.loads(result.stdout.splitlines()[0]))
    assert result.returncode != 0 and "survived" not in result.stdout, result.stdout
    assert "host code dereferenced device pointer" in result.stderr, result.stderr[-2000:]


def test_outer_reductions_take_wide_tiles_on_mydev():
    """A float sum vectorized along its columns (a bias gradient) gets a tile
    of four vectors when they divide the columns; a sum whose columns they
    do not divide, and a max, keep Inductor's one-vector tile. Without the
    patch every tile is one vector (the compiled column sum of an
    [8192, 256] tensor then took 3x ATen's eager sum: not asserted here, the
    code is). The values match the CPU's either way."""
    seen = run_both(
        """
        from torch._inductor.codegen import cpp

        g = torch.Generator().manual_seed(0)
        wide = torch.randn(300, 96, generator=g).to("mydev")
        odd = torch.randn(300, 40, generator=g).to("mydev")
        weight = torch.randn(96, generator=g).to("mydev")
        weighted_sum = lambda x, w: (x * w).sum(0)
        patched = {
            "wide": attempt(weighted_sum, wide, weight),
            "odd": attempt(lambda x: x.sum(0), odd),
            "max": attempt(lambda x: x.amax(0), wide),
        }
        cpp.TilingSelect.select_tiling = cpp.TilingSelect.select_tiling.__wrapped__
        print(json.dumps({"patched": patched, "original": attempt(weighted_sum, wide, weight)}))
        """
    )
    patched, original = seen["patched"], seen["original"]
    for case in ("wide", "odd", "max"):
        assert patched[case]["ok"], patched[case]
        assert patched[case]["max_error"] < 1e-4, patched[case]
    assert "VectorizedN<float,4>" in patched["wide"]["code"]
    assert "VectorizedN" not in patched["odd"]["code"]
    assert "VectorizedN" not in patched["max"]["code"]
    assert original["ok"] and original["max_error"] < 1e-4
    assert "VectorizedN" not in original["code"]


def test_bias_and_norm_weight_gradients_take_wide_tiles_in_a_plain_script():
    """The reductions the tiling patch is for, as a user meets them: the
    gradients of a Linear's bias and a LayerNorm's weight and bias are
    column sums over the batch. In a script that imports only torch, the
    compiled backward computes them with wide tiles, and every gradient
    matches the CPU's."""
    completed = run_python(
        COMPILED_GRADIENTS_SCRIPT
        + textwrap.dedent(
            """
        def block():
            return torch.nn.Sequential(
                torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(), torch.nn.Linear(64, 32)
            )

        backward = compiled_backward(block, (512, 32))
        assert "VectorizedN<float,4>" in backward, backward
        print("wide tiles, same gradients as the CPU")
        """
        ),
        env=SUBPROCESS_ENV,
    )
    assert completed.returncode == 0, completed.stderr
    assert "wide tiles, same gradients as the CPU" in completed.stdout
