"""max-autotune on mydev: matrix multiplies choose between ATen and Inductor's
C++ GEMM / BMM templates (inductor_backend/cpp_templates.py,
device_ext/torch_patches/autotuning.py).

Which candidate is faster depends on the machine, so the tests do not
predict the winner: they check that both candidates were timed on mydev
(Inductor's feedback savers see every timing), then make the winner
deterministic with Inductor's ``override_best_choice`` hook, which runs after
the timing, and check the generated code of each outcome. Inputs and weights
are created on the device; values are compared with the same computation on
the CPU (the template sums in another order than ATen: rtol/atol 1e-4).
"""

import contextlib
import math
import re

import pytest
import torch
from torch import nn
from torch._inductor import config as inductor_config
from torch._inductor import select_algorithm
from torch._inductor.choices import InductorChoices
from torch._inductor.utils import run_and_get_code
from torch._inductor.virtualized import V

import inductor_backend.config as mydev_config
from mydev_testing import assert_close_to_cpu, assert_device_still_usable, run_python

pytestmark = pytest.mark.usefixtures("isolated_inductor", "fresh_dynamo")

D = "mydev:0"
RTOL, ATOL = 1e-4, 1e-4


def is_template(choice) -> bool:
    """A C++ template candidate (GEMM templates come wrapped in a
    DataProcessorChoiceCallerWrapper, which forwards attributes)."""
    return choice.info_dict().get("backend") == "CPP"


class _Pick(InductorChoices):
    """Inductor's default heuristics, except that after timing the chosen
    candidate is the first of ``prefer`` ("template" or "aten")."""

    def __init__(self, prefer: str):
        super().__init__()
        self.prefer = prefer

    def override_best_choice(self, best_choice, timings):
        for choice in timings:
            if is_template(choice) == (self.prefer == "template"):
                return choice
        return best_choice


@contextlib.contextmanager
def autotuning(prefer=None):
    """Yields the list of (op name, {choice: ms}) autotuning timed, in order;
    with ``prefer``, that candidate kind is chosen whatever the timings."""
    seen = []

    def save(timings, name, *_):
        seen.append((name, dict(timings)))

    select_algorithm.add_feedback_saver(save)
    try:
        with contextlib.ExitStack() as stack:
            if prefer is not None:
                stack.enter_context(V.set_choices_handler(_Pick(prefer)))
            yield seen
    finally:
        select_algorithm.clear_feedback_savers()


def assert_both_candidates_timed(seen, op):
    """``op`` was autotuned once, with ATen's kernel and a C++ template among
    its candidates, each timed to a finite positive time."""
    timings = [t for name, t in seen if name == op]
    assert len(timings) == 1, seen
    (timings,) = timings
    templates = {c.name: ms for c, ms in timings.items() if is_template(c)}
    others = {c.name: ms for c, ms in timings.items() if not is_template(c)}
    assert templates and others, timings
    assert all(0 < ms < math.inf for ms in timings.values()), timings
    return templates, others


# ------------------------------------------------------------ the workloads --
class MatmulWeight(nn.Module):
    """x @ w (aten.mm) or, with a bias, addmm(b, x, w), then relu: the
    template's epilogue."""

    def __init__(self, bias: bool):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, 48, device=D))
        self.b = nn.Parameter(torch.randn(48, device=D)) if bias else None

    def forward(self, x):
        y = x @ self.w if self.b is None else torch.addmm(self.b, x, self.w)
        return y.relu()


def make_case(kind):
    """(function, device args, op name Inductor autotunes, whether the
    weights must be frozen). As on the CPU, mm and addmm offer the template
    for constant weights only (torch._inductor.config.freezing, under
    no_grad); bmm for any operands."""
    torch.mydev.manual_seed(0)
    if kind == "linear":
        return nn.Linear(64, 48, device=D), (torch.randn(32, 64, device=D),), "addmm", True
    if kind == "mm":
        return MatmulWeight(bias=False), (torch.randn(32, 64, device=D),), "mm", True
    if kind == "addmm":
        return MatmulWeight(bias=True), (torch.randn(32, 64, device=D),), "addmm", True
    assert kind == "bmm"
    return (
        lambda a, b: torch.bmm(a, b) * 2,
        (torch.randn(4, 32, 64, device=D), torch.randn(4, 64, 48, device=D)),
        "bmm",
        False,
    )


def on_cpu(fn):
    return fn.to("cpu") if isinstance(fn, nn.Module) else fn


def compile_and_run(kind, prefer=None, options=None):
    """Compiles the case with mode="max-autotune" (or with ``options``)."""
    fn, args, op, freeze = make_case(kind)
    compile_kwargs = {"options": options} if options else {"mode": "max-autotune"}
    with torch.no_grad():
        expected = on_cpu(fn)(*(a.cpu() for a in args))
        if isinstance(fn, nn.Module):
            fn.to(D)
        # Timed in this process: no timings from the on-disk cache.
        with inductor_config.patch(freezing=freeze, autotune_local_cache=False), autotuning(prefer) as seen:
            out, codes = run_and_get_code(torch.compile(fn, **compile_kwargs), *args)
    return out, expected, codes[0], op, seen


KINDS = ["linear", "mm", "addmm", "bmm"]


@pytest.mark.parametrize("kind", KINDS)
def test_template_and_aten_are_both_timed_on_mydev_and_the_result_matches_cpu(kind):
    out, expected, _code, op, seen = compile_and_run(kind)
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=ATOL)
    templates, others = assert_both_candidates_timed(seen, op)
    assert all(name.startswith("cpp_CppMicroGemm") for name in templates), templates
    assert op in others, others  # ATen's kernel


@pytest.mark.parametrize("kind", KINDS)
def test_a_winning_template_is_a_mydev_kernel_launched_on_the_stream(kind):
    from torch._dynamo.utils import counters

    out, expected, code, op, seen = compile_and_run(kind, prefer="template")
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=ATOL)
    assert_both_candidates_timed(seen, op)
    assert counters["inductor"]["cpp_templated_kernel_counter"] == 1
    # Defined as a kernel module (the template's micro-kernel inside) and
    # launched with the stream of its device, with its epilogue (relu,
    # scaling; a Linear has none) fused in.
    (name,) = re.findall(r"^(mydev_\w+) = load_mydev_kernel\(", code, re.M)
    definition = code[code.index(f"{name} = load_mydev_kernel(") :]
    assert "micro_gemm" in definition[: definition.index("''')")]
    assert re.search(rf"^\s*{name}\(raw_stream0, ", code, re.M), code
    assert f"extern_kernels.{op}" not in code
    assert counters["inductor"]["cpp_epilogue_fusion_counter"] == (0 if kind == "linear" else 1)


def test_a_winning_aten_kernel_stays_an_extern_kernel():
    from torch._dynamo.utils import counters

    out, expected, code, _op, seen = compile_and_run("bmm", prefer="aten")
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=ATOL)
    assert_both_candidates_timed(seen, "bmm")
    assert "extern_kernels.bmm(" in code
    assert counters["inductor"]["cpp_templated_kernel_counter"] == 0


def test_without_max_autotune_or_frozen_weights_aten_is_the_only_candidate():
    """Inductor's own rules decide, as on the CPU: mm of two activations (no
    constant weight) and any mm outside max-autotune are not autotuned."""
    torch.mydev.manual_seed(0)
    a, b = torch.randn(32, 64, device=D), torch.randn(64, 48, device=D)
    for mode in ("max-autotune", None):
        torch._dynamo.reset()
        with autotuning() as seen:
            out, (code,) = run_and_get_code(torch.compile(torch.mm, mode=mode), a, b)
        assert seen == []
        assert "extern_kernels.mm(" in code
        assert_close_to_cpu(out, a.cpu() @ b.cpu(), device=D, rtol=RTOL, atol=ATOL)


def test_triton_kernel_language_offers_no_cpp_template():
    """A Triton graph cannot hold a C++ template kernel. (max-autotune's
    device graphs are left out: Triton kernels inside a capture are not
    what this checks.)"""
    pytest.importorskip("triton")
    with mydev_config.patch(kernel_language="triton"):
        out, expected, code, _op, seen = compile_and_run("bmm", options={"max_autotune": True})
    assert_close_to_cpu(out, expected, device=D, rtol=RTOL, atol=ATOL)
    assert not any(is_template(c) for _, timings in seen for c in timings)
    assert "extern_kernels.bmm(" in code and "load_mydev_kernel(async_compile" not in code


def test_a_template_candidate_refuses_a_cpu_tensor_clearly():
    """The request that times a template candidate on mydev launches a kernel
    module: a CPU tensor among its arguments is refused by the launcher with
    an error naming the kernel and the argument (never read from the host),
    and the process stays usable."""
    from inductor_backend.cpp_templates import MydevCppBenchmarkRequest

    captured = {}

    def save(timings, *_):
        captured.update({c: ms for c, ms in timings.items() if is_template(c)})

    select_algorithm.add_feedback_saver(save)
    try:
        compile_and_run("bmm")
    finally:
        select_algorithm.clear_feedback_savers()
    (caller,) = captured
    request = caller.bmreq
    assert isinstance(request, MydevCppBenchmarkRequest)
    a, b, out = (torch.randn(m.sizes, device=D) for m in (*request.input_tensor_meta, request.output_tensor_meta))
    assert request.benchmark(a, b, out=out) > 0
    with pytest.raises(RuntimeError, match=r"^cpp_CppMicroGemm\w+: argument 2 is on cpu, expected a mydev tensor"):
        request.make_run_fn(a, b.cpu(), out=out)()
    assert_device_still_usable()


def test_max_autotune_bmm_in_a_plain_script(tmp_path):
    """As a user runs it: nothing imported but torch; Inductor's autotuning
    report (printed to stderr) lists the template's candidate next to ATen's.
    (A cache directory of its own: a cached autotuning result prints no
    report.)"""
    result = run_python(
        """
        import torch
        torch.mydev.manual_seed(0)
        a = torch.randn(4, 32, 64, device="mydev")
        b = torch.randn(4, 64, 48, device="mydev")
        f = torch.compile(lambda a, b: torch.bmm(a, b).relu(), mode="max-autotune")
        out = f(a, b)
        expected = torch.bmm(a.cpu(), b.cpu()).relu()
        print(out.device, (out.cpu() - expected).abs().max().item() < 1e-4)
        """,
        env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["mydev:0", "True"]
    report = result.stderr[result.stderr.index("AUTOTUNE bmm(4x32x64, 4x64x48)") :]
    assert re.search(r"^\s+cpp_CppMicroGemm\w+ \d+\.\d+ ms", report, re.M), report
    assert re.search(r"^\s+bmm \d+\.\d+ ms", report, re.M), report
