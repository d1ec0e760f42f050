"""torch.compile on mydev with Triton.

- kernel_language="triton": Inductor generates Triton kernels for mydev,
  compiled and launched by Triton's mydev backend (device_ext.triton_backend)
  on the stream of their device; the language is chosen per compile.
- User-defined Triton kernels (torch.library.triton_op + wrap_triton, and
  plain @triton.jit calls) under torch.compile with fullgraph=True, with
  either kernel language, and the triton_op called eagerly.
- The FX graph cache keeps the two kernel languages apart.
- The model suite (benchmarks/model_suite.py) at size "tiny" with
  kernel_language="triton": inference and a training step against eager CPU.
- Bad input: Triton missing, cpp_wrapper with Triton, a CPU tensor for a
  user kernel (an unknown language: tests/test_compile.py).

Triton is optional: without the triton package this file is skipped. With
it, Triton must have the mydev backend (a failure, not a skip: the package
would then be broken).

Values are compared with the same function run eagerly on the CPU. Triton
kernels sum in another order than ATen, so float32 results agree within
rtol/atol 1e-4 rather than bitwise.
"""

import copy
import re

import pytest

triton = pytest.importorskip(
    "triton", reason="Triton is optional for mydev: without it only kernel_language='cpp' exists"
)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton.language as tl  # noqa: E402
from model_suite import CASES, loss_fn  # noqa: E402  (benchmarks/, see pyproject.toml)
from torch._dynamo.utils import counters  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

import inductor_backend.config as mydev_config  # noqa: E402
from inductor_backend.kernel_languages import triton_unavailable_reason  # noqa: E402
from mydev_testing import (  # noqa: E402
    assert_close_to_cpu,
    assert_device_still_usable,
    compile_with_fx_cache,
    hold_stream,
    needs_two_devices,
    release_from_another_thread,
    run_python,
)

pytestmark = pytest.mark.usefixtures("isolated_inductor", "fresh_dynamo")

D = "mydev:0"
RTOL, ATOL = 1e-4, 1e-4
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-5
LANGUAGES = ("cpp", "triton")


def cpu_inputs(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g) for shape in shapes]


def to_dev(tensors, device=D):
    return [t.to(device) for t in tensors]


def compile_in(language, fn, *args):
    """Compiles ``fn`` with mydev kernels in ``language`` and runs it once
    on ``args``; (output, generated wrapper code)."""
    with mydev_config.patch(kernel_language=language):
        out, codes = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
    return out, codes[0]


def assert_one_graph():
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1


# ------------------------------------------------------ reading the code --
TRITON_DEFINITION = re.compile(
    r"^(\w+) = async_compile\.triton\('(\w+)', '''(.*?)''', device_str='(\w+)'\)$", re.M | re.S
)
TRITON_LAUNCH = re.compile(r"^\s*(\w+)\.run\((.*), stream=(\w+)\)$", re.M)
STREAM_DEFINITION = re.compile(r"^\s*(\w+) = get_raw_stream\((\d+)\)$", re.M)
MYDEV_CPP_KERNEL = re.compile(r"^\w+ = load_mydev_kernel\(async_compile, ", re.M)


def triton_kernels(code):
    """{variable: (kernel name, source, device_str)} of the Triton kernels
    the module defines."""
    return {var: (name, src, device) for var, name, src, device in TRITON_DEFINITION.findall(code)}


def kernel_kinds(code):
    """Which kinds of mydev kernels the module defines: "triton", "cpp"."""
    return {kind for kind, found in (("triton", triton_kernels(code)), ("cpp", MYDEV_CPP_KERNEL.search(code))) if found}


def assert_triton_launches_on_raw_streams(code, device_index=0):
    """Every Triton kernel the module defines is for mydev and launched with
    a stream obtained from get_raw_stream(device_index), which is mydev's."""
    assert "from device_ext._C import _current_raw_stream as get_raw_stream" in code
    defined = triton_kernels(code)
    assert defined and all(device == "mydev" for _, _, device in defined.values()), defined
    streams = dict(STREAM_DEFINITION.findall(code))
    launches = TRITON_LAUNCH.findall(code)
    assert {var for var, _, _ in launches} == set(defined), (launches, list(defined))
    for var, _, stream in launches:
        assert streams.get(stream) == str(device_index), (var, stream, streams)


# -------------------------------------------------------- the language --
def test_triton_is_available_for_mydev():
    """With the triton package installed, Triton has the mydev backend and
    Dynamo counts mydev as a Triton device."""
    assert triton_unavailable_reason() is None
    assert "mydev" in triton.backends.backends
    import torch._inductor.compile_fx  # registers inductor_backend (import hook)

    assert torch.utils._triton.has_triton()


def pointwise_and_reduction(x, y):
    return (x.sin() + y).relu().sum(-1), x * 2


def test_generated_triton_kernels_launch_on_the_mydev_stream():
    cpu = cpu_inputs((8, 40), (8, 40))
    out, code = compile_in("triton", pointwise_and_reduction, *to_dev(cpu))
    assert_close_to_cpu(out, pointwise_and_reduction(*cpu), device=D, rtol=RTOL, atol=ATOL)
    assert_triton_launches_on_raw_streams(code)
    assert "@triton.jit" in code and "triton_heuristics" in code
    assert kernel_kinds(code) == {"triton"}


def test_kernel_language_is_chosen_per_compile():
    (x,) = cpu_inputs((64,))
    kinds = []
    for language in ("cpp", "triton", "cpp"):
        torch._dynamo.reset()
        out, code = compile_in(language, lambda t: (t * 2 + 1).cos(), x.to(D))
        assert_close_to_cpu(out, (x * 2 + 1).cos(), device=D, rtol=RTOL, atol=1e-6)
        kinds.append(kernel_kinds(code))
    assert kinds == [{"cpp"}, {"triton"}, {"cpp"}]


def test_environment_variable_selects_triton():
    result = run_python(
        """
        import torch
        from torch._inductor.utils import run_and_get_code
        x = torch.arange(6.0, device="mydev")
        out, (code,) = run_and_get_code(torch.compile(lambda t: t.exp() - 1, fullgraph=True), x)
        print("triton" if "async_compile.triton(" in code else "other", (out.cpu() - (x.cpu().exp() - 1)).abs().max().item())
        """,
        env={"MYDEV_INDUCTOR_KERNEL_LANGUAGE": "triton", "TORCHINDUCTOR_FX_GRAPH_CACHE": "0"},
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    kind, error = result.stdout.split()
    assert kind == "triton" and float(error) < 1e-5


def test_triton_kernels_run_in_stream_order_with_eager_ops():
    def cos_affine(x):
        return (x * 2 + 1).cos()

    n = 4096
    compiled_in_triton = torch.compile(cos_affine, fullgraph=True)
    with mydev_config.patch(kernel_language="triton"):
        compiled_in_triton(torch.zeros(n, device=D))
    side = torch.mydev.Stream()
    with torch.mydev.stream(side):
        x = torch.zeros(n, device=D)
        latch = hold_stream()  # everything below waits behind this
        x.fill_(3.0)  # eager write of x
        release_from_another_thread(latch)  # a Triton launch returns once its kernel ran
        y = compiled_in_triton(x)  # the Triton kernel reads x
        z = y * 2 + x  # eager op on its output
    side.synchronize()
    expected = cos_affine(torch.full((n,), 3.0))
    assert_close_to_cpu(y, expected, device=D, rtol=RTOL, atol=1e-6)
    assert_close_to_cpu(z, expected * 2 + 3.0, device=D, rtol=RTOL, atol=1e-6)


@needs_two_devices
def test_triton_kernels_on_the_second_device():
    cpu = cpu_inputs((8, 40), (8, 40))
    out, code = compile_in("triton", pointwise_and_reduction, *to_dev(cpu, "mydev:1"))
    assert_close_to_cpu(out, pointwise_and_reduction(*cpu), device="mydev:1", rtol=RTOL, atol=ATOL)
    assert "with DeviceGuard(1):" in code
    assert_triton_launches_on_raw_streams(code, device_index=1)
    assert torch.mydev.current_device() == 0


def test_dynamic_shapes_in_triton():
    def fn(x):
        return F.silu(x) * x.mean(-1, keepdim=True)

    with mydev_config.patch(kernel_language="triton"):
        compiled = torch.compile(fn, dynamic=True, fullgraph=True)
        for rows in (3, 5, 9):
            (x,) = cpu_inputs((rows, 24), seed=rows)
            assert_close_to_cpu(compiled(x.to(D)), fn(x), device=D, rtol=RTOL, atol=ATOL)
    assert counters["stats"]["unique_graphs"] == 1


def test_triton_backward_matches_cpu():
    def loss(x, w):
        return (F.gelu(x @ w).tanh() * x.sum(-1, keepdim=True)).pow(2).mean()

    cpu_args = [t.requires_grad_() for t in cpu_inputs((6, 12), (12, 12))]
    dev_args = [t.detach().to(D).requires_grad_() for t in cpu_args]
    with mydev_config.patch(kernel_language="triton"):
        dev_loss = torch.compile(loss, fullgraph=True)(*dev_args)
        dev_loss.backward()
    cpu_loss = loss(*cpu_args)
    cpu_loss.backward()
    assert_close_to_cpu(dev_loss.detach(), cpu_loss.detach(), device=D, rtol=RTOL, atol=ATOL)
    for dev, ref in zip(dev_args, cpu_args):
        assert_close_to_cpu(dev.grad, ref.grad, device=D, rtol=GRAD_RTOL, atol=GRAD_ATOL)


# ------------------------------------------- user-defined Triton kernels --
BLOCK = 64


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 32}), triton.Config({"BLOCK_SIZE": 128})],
    key=["n_elements"],
)
@triton.jit
def autotuned_square_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * x, mask=mask)


@torch.library.triton_op("mydev_triton_test::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    torch.library.wrap_triton(scale_add_kernel)[(triton.cdiv(n, BLOCK),)](x, y, out, alpha, n, BLOCK_SIZE=BLOCK)
    return out


torch.library.register_autograd(
    "mydev_triton_test::scale_add",
    lambda ctx, grad: (grad * ctx.alpha, grad, None),
    setup_context=lambda ctx, inputs, output: setattr(ctx, "alpha", inputs[2]),
)


def scale_add_reference(x, y, alpha):
    return x * alpha + y


def calls_triton_op(x, y):
    return scale_add(x.sin(), y, 0.5).relu() + 1


def calls_plain_jit(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    scale_add_kernel[(triton.cdiv(n, BLOCK),)](x.cos(), y, out, 2.0, n, BLOCK_SIZE=BLOCK)
    return out * y


def calls_autotuned_jit(x):
    out = torch.empty_like(x)
    n = x.numel()
    autotuned_square_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x + 1, out, n)
    return out.sum()


USER_KERNEL_CASES = {
    "triton_op": (calls_triton_op, lambda x, y: (scale_add_reference(x.sin(), y, 0.5)).relu() + 1),
    "plain_jit": (calls_plain_jit, lambda x, y: scale_add_reference(x.cos(), y, 2.0) * y),
}


def test_triton_op_runs_eagerly_on_mydev():
    x, y = cpu_inputs((300,), (300,))
    out = scale_add(x.to(D), y.to(D), 3.0)
    assert_close_to_cpu(out, scale_add_reference(x, y, 3.0), device=D, rtol=RTOL, atol=1e-6)


@needs_two_devices
def test_triton_op_runs_eagerly_on_the_second_device():
    """As on CUDA, a Triton kernel launches on the current device: tensors
    of another device are refused, clearly; under that device's guard the
    kernel runs there."""
    x, y = (t.to("mydev:1") for t in cpu_inputs((100,), (100,)))
    with pytest.raises(ValueError, match=r"'x_ptr' is on mydev:1, but the kernel runs on mydev:0"):
        scale_add(x, y, -1.0)
    with torch.mydev.device(1):
        out = scale_add(x, y, -1.0)
    assert_close_to_cpu(out, scale_add_reference(x.cpu(), y.cpu(), -1.0), device="mydev:1", rtol=RTOL, atol=1e-6)
    assert_device_still_usable()


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("case", list(USER_KERNEL_CASES))
def test_user_triton_kernel_compiles_in_one_graph(case, language):
    fn, reference = USER_KERNEL_CASES[case]
    x, y = cpu_inputs((200,), (200,))
    out, code = compile_in(language, fn, x.to(D), y.to(D))
    assert_one_graph()
    assert_close_to_cpu(out, reference(x, y), device=D, rtol=RTOL, atol=ATOL)
    # The user's kernel is launched like Inductor's own Triton kernels; the
    # rest of the graph is in the selected language.
    assert "scale_add_kernel" in {name for name, _, _ in triton_kernels(code).values()}
    assert_triton_launches_on_raw_streams(code)
    assert kernel_kinds(code) == {"triton", language}


def test_autotuned_user_kernel_compiles_in_one_graph():
    (x,) = cpu_inputs((1000,))
    out, code = compile_in("cpp", calls_autotuned_jit, x.to(D))
    assert_one_graph()
    assert_close_to_cpu(out, ((x + 1) ** 2).sum(), device=D, rtol=RTOL, atol=1e-3)
    assert "autotuned_square_kernel" in code


def test_triton_op_backward_through_compiled_graph():
    """Gradients flow through a triton_op (with its autograd formula) inside
    a compiled function."""
    x_cpu, y_cpu = (t.requires_grad_() for t in cpu_inputs((64,), (64,)))
    x, y = (t.detach().to(D).requires_grad_() for t in (x_cpu, y_cpu))
    with mydev_config.patch(kernel_language="triton"):
        torch.compile(lambda a, b: scale_add(a, b, 1.5).pow(2).sum(), fullgraph=True)(x, y).backward()
    scale_add_reference(x_cpu, y_cpu, 1.5).pow(2).sum().backward()
    assert_close_to_cpu(x.grad, x_cpu.grad, device=D, rtol=GRAD_RTOL, atol=GRAD_ATOL)
    assert_close_to_cpu(y.grad, y_cpu.grad, device=D, rtol=GRAD_RTOL, atol=GRAD_ATOL)


# ------------------------------------------------------- FX graph cache --
def test_fx_graph_cache_keeps_kernel_languages_apart(tmp_path):
    def compile_in_subprocess(*languages):
        """[(hit, miss, code kind)] of compiling f once per language, in
        order, in a new process."""
        seen = compile_with_fx_cache([{"kernel_language": language} for language in languages], str(tmp_path))
        return [(compiled["hit"], compiled["miss"], compiled["code"]) for compiled in seen]

    # Cold cache: each language compiles and stores its own entry.
    assert compile_in_subprocess("cpp", "triton") == [(0, 1, "cpp"), (0, 1, "triton")]
    # Warm: each language is served its own entry, in either order.
    assert compile_in_subprocess("triton", "cpp") == [(1, 0, "triton"), (1, 0, "cpp")]


# ------------------------------------------------------------ the models --
SIZE = "tiny"


def make_pair(case):
    cpu_model, x = case.make(SIZE, "cpu", seed=0)
    return cpu_model, x, copy.deepcopy(cpu_model).to(D), x.to(D)


@pytest.mark.parametrize("name", list(CASES))
def test_model_forward_in_triton_matches_eager_cpu(name):
    cpu_model, x, dev_model, x_dev = make_pair(CASES[name])
    with mydev_config.patch(kernel_language="triton"), torch.no_grad():
        out, code = run_and_get_code(torch.compile(dev_model, fullgraph=True), x_dev)
        expected = cpu_model(x)
    assert_one_graph()
    assert kernel_kinds(code[0]) == {"triton"}
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=ATOL, msg=f"{name} output")
    for key, ref in cpu_model.state_dict().items():
        assert_close_to_cpu(dev_model.state_dict()[key], ref, device=D, rtol=RTOL, atol=ATOL, msg=key)


@pytest.mark.parametrize("name", list(CASES))
def test_model_training_step_in_triton_matches_eager_cpu(name):
    cpu_model, x, dev_model, x_dev = make_pair(CASES[name])
    # eps as in tests/test_compile_models.py: gradients that are rounding
    # noise must not become lr-sized steps.
    opt_cpu, opt_dev = (
        torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-5, foreach=True) for m in (cpu_model, dev_model)
    )
    loss_cpu = loss_fn(cpu_model(x))
    loss_cpu.backward()
    with mydev_config.patch(kernel_language="triton"):
        out, (forward_code,) = run_and_get_code(torch.compile(dev_model, fullgraph=True), x_dev)
        loss_dev = loss_fn(out)
        loss_dev.backward()  # compiles the backward graph, in Triton too
    assert_one_graph()
    assert kernel_kinds(forward_code) == {"triton"}
    assert_close_to_cpu(loss_dev.detach(), loss_cpu.detach(), device=D, rtol=RTOL, atol=ATOL)
    for (param, p_dev), (_, p_cpu) in zip(dev_model.named_parameters(), cpu_model.named_parameters()):
        assert_close_to_cpu(
            p_dev.grad, p_cpu.grad, device=D, rtol=GRAD_RTOL, atol=GRAD_ATOL, msg=f"{name} grad of {param}"
        )
    opt_cpu.step()
    opt_dev.step()
    for key, ref in cpu_model.state_dict().items():
        assert_close_to_cpu(dev_model.state_dict()[key], ref, device=D, rtol=RTOL, atol=ATOL, msg=key)


# ------------------------------------------------------------ bad input --
@pytest.mark.parametrize(
    "language, fn",
    [("triton", lambda x, y: x.sin() + y), ("cpp", calls_plain_jit)],
    ids=["generated_kernels", "user_kernel"],
)
def test_cpp_wrapper_with_triton_kernels_is_a_clear_error(language, fn):
    x, y = torch.ones(4, device=D), torch.ones(4, device=D)
    expected = (
        "NotImplementedError: Triton kernels on mydev (kernel_language='triton', or a user-defined Triton "
        "kernel) are launched by the Python wrapper only; compile with "
        "torch._inductor.config.cpp_wrapper=False"
    )
    with (
        mydev_config.patch(kernel_language=language),
        torch._inductor.config.patch(cpp_wrapper=True),
        pytest.raises(torch._inductor.exc.InductorError, match=re.escape(expected)),
    ):
        torch.compile(fn)(x, y)
    assert_device_still_usable()


def test_user_kernel_given_a_cpu_tensor_is_refused():
    x = torch.ones(8, device=D)
    expected = (
        "Triton kernel 'scale_add_kernel': argument 'y_ptr' is a cpu tensor, but the kernel runs on "
        "mydev:0; pass mydev tensors (e.g. x.to('mydev:0'))"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        scale_add(x, torch.ones(8), 1.0)
    torch.mydev.synchronize()
    assert_device_still_usable()


def test_without_triton_selecting_it_is_a_clear_error_and_cpp_works():
    """Triton is optional: in a process where it cannot be imported, "cpp"
    compiles as always and "triton" is refused, naming the reason."""
    result = run_python(
        """
        import sys
        sys.modules["triton"] = None          # import triton raises ImportError
        import torch
        import inductor_backend.config as mydev_config
        x = torch.arange(4.0, device="mydev")
        print(torch.compile(lambda t: t * 2)(x).cpu().tolist())
        print(torch.utils._triton.has_triton())
        torch._dynamo.reset()
        try:
            with mydev_config.patch(kernel_language="triton"):
                torch.compile(lambda t: t * 3)(x)
        except Exception as error:
            print(str(error).splitlines()[0])
        print(torch.compile(lambda t: t - 1)(x).cpu().tolist())
        """,
        env={"TORCHINDUCTOR_FX_GRAPH_CACHE": "0"},
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "[0.0, 2.0, 4.0, 6.0]"
    assert lines[1] == "False"
    assert "kernel_language='triton' is not available: Triton is not installed" in lines[2], lines[2]
    assert lines[3] == "[-1.0, 0.0, 1.0, 2.0]"
