"""User-defined Triton kernels under torch.compile, as a user's plain script.

Each test runs one pattern of PyTorch's "user-defined Triton kernels in
torch.compile" tutorial in a fresh interpreter that imports nothing but
``torch`` and ``triton``: Dynamo traces the function before anything imports
Inductor, so what an earlier test in this process registered must not be
what makes it work. Patterns: ``kernel[grid](...)`` with a tuple grid and
with ``lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)``,
``@triton.autotune``, and ``torch.library.triton_op`` + ``wrap_triton``
(forward and backward), all with ``fullgraph=True``. Results are compared
with the same computation in torch on the CPU.

Bad input: a kernel launched on CPU tensors inside a compiled function is
Triton's clear error (no backend for the CPU here), and the script goes on
to compile and run the good call.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="Triton is optional for mydev")

# Imports only what a user's script imports, and the tutorial's kernel.
PRELUDE = """
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


g = torch.Generator(device="mydev").manual_seed(0)
x = torch.randn(1000, device="mydev", generator=g)
y = torch.randn(1000, device="mydev", generator=g)


def check(out, expected):
    assert out.device.type == "mydev", out.device
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)
"""


def run_script(tmp_path, body: str) -> str:
    """Runs the prelude and ``body`` as a script file (Triton reads a
    kernel's source from its file) in a new interpreter; returns stdout."""
    script = tmp_path / "user_script.py"
    script.write_text(PRELUDE + textwrap.dedent(body) + "\nprint('DONE')\n")
    done = subprocess.run(
        [sys.executable, str(script)], env=dict(os.environ), cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr[-3000:]
    return done.stdout


def test_tuple_grid_in_a_plain_script(tmp_path):
    run_script(
        tmp_path,
        """
        @torch.compile(fullgraph=True)
        def add(x, y):
            out = torch.empty_like(x)
            n = out.numel()
            add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128)
            return out * 2

        check(add(x, y), (x.cpu() + y.cpu()) * 2)
        """,
    )


def test_lambda_grid_in_a_plain_script(tmp_path):
    run_script(
        tmp_path,
        """
        @torch.compile(fullgraph=True)
        def add(x, y):
            out = torch.empty_like(x)
            n = out.numel()
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
            add_kernel[grid](x, y, out, n, BLOCK_SIZE=256)
            return out

        check(add(x, y), x.cpu() + y.cpu())
        """,
    )


def test_autotuned_kernel_in_a_plain_script(tmp_path):
    run_script(
        tmp_path,
        """
        @triton.autotune(
            configs=[triton.Config({"BLOCK_SIZE": 64}), triton.Config({"BLOCK_SIZE": 256})],
            key=["n"],
        )
        @triton.jit
        def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
            offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
            mask = offsets < n
            tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 3.0, mask=mask)

        @torch.compile(fullgraph=True)
        def scale(x):
            out = torch.empty_like(x)
            n = out.numel()
            scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, out, n)
            return out + 1

        check(scale(x), x.cpu() * 3.0 + 1)
        """,
    )


def test_triton_op_with_wrap_triton_in_a_plain_script(tmp_path):
    run_script(
        tmp_path,
        """
        @torch.library.triton_op("user_script::add", mutates_args=())
        def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(a)
            n = out.numel()
            torch.library.wrap_triton(add_kernel)[(triton.cdiv(n, 128),)](a, b, out, n, BLOCK_SIZE=128)
            return out

        def backward(ctx, grad):
            return grad, grad

        add.register_autograd(backward)

        @torch.compile(fullgraph=True)
        def f(a, b):
            return add(a, b).sin()

        a = x.clone().requires_grad_()
        b = y.clone().requires_grad_()
        out = f(a, b)
        out.sum().backward()
        a_cpu = x.cpu().requires_grad_()
        b_cpu = y.cpu().requires_grad_()
        expected = (a_cpu + b_cpu).sin()
        expected.sum().backward()
        torch.testing.assert_close(out.detach().cpu(), expected.detach())
        torch.testing.assert_close(a.grad.cpu(), a_cpu.grad)
        torch.testing.assert_close(b.grad.cpu(), b_cpu.grad)
        check(add(x, y), x.cpu() + y.cpu())  # eagerly too
        """,
    )


def test_kernel_on_cpu_tensors_is_a_clear_error_and_the_script_goes_on(tmp_path):
    out = run_script(
        tmp_path,
        """
        @torch.compile(fullgraph=True)
        def add(x, y):
            out = torch.empty_like(x)
            n = out.numel()
            add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128)
            return out

        try:
            add(x.cpu(), y.cpu())
        except Exception as error:
            print("ERROR", type(error).__name__, str(error).splitlines()[0])
        check(add(x, y), x.cpu() + y.cpu())
        """,
    )
    # Triton itself refuses: it has no backend for CPU tensors here.
    assert "ERROR InductorError RuntimeError: 0 compatible backends for target (cpu)" in out, out
