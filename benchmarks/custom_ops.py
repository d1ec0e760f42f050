"""The fused custom ops against the same math composed from eager ops, on mydev.

Each row times one fused op (``torch.ops.mydev.*``, one kernel per direction)
and the same computation written with ordinary eager ops, both on mydev:0 in
the same run, and prints the speedup composed / fused (higher is better)
against the issue's target of 1.5x:

* ``rms_norm``: x [tokens, 4096], weight [4096], eps 1e-6; composed:
  ``(xf * rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)``
  with ``xf = x.float()`` (float32 math, as the kernel does);
* ``swiglu``: gate and up [tokens, 11008]; composed: ``F.silu(gate) * up``;
* ``rotary_embedding``: x [4, 32, 1024, 128] ([batch, heads, seq, head_dim]),
  cos and sin [1024, 128] in x's dtype; composed:
  ``x * cos + cat(-x2, x1) * sin``.

In float32 and bfloat16, forward only and forward + backward (the
inputs that are trained require grad: x and weight, gate and up, x; each
call resets their .grad to None, runs the op and calls
``out.backward(grad)`` with a fixed gradient).

The harness's method: the two sides' repetitions alternate so that both see
the same load, each figure is the median of its repetitions after warm-up,
and the speedup is the median of the repetitions' speedups, with their
quartiles in brackets (``harness.paired``); device work is timed up to the
return of ``torch.mydev.synchronize()``. Nothing here asserts on time;
PASS / MISS only compares the measured speedup with the target.

    python benchmarks/custom_ops.py               # full run, about 1-2 minutes
    python benchmarks/custom_ops.py --quick       # short run, smaller sizes, about 20-30 s
    python benchmarks/custom_ops.py --json out.json
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402
    RATIO_WIDTH,
    Budget,
    Op,
    Timed,
    format_ratio,
    format_value,
    paired,
    progress,
    record_failure,
    render_sectioned_table,
    report_entry,
    run_benchmark,
    sync_devices,
    verdict_summary,
)

DEVICE = "mydev:0"
TARGET = 1.5


# ------------------------------------------------------------------ budget --


@dataclass(frozen=True)
class CustomOpsBudget(Budget):
    """The harness's budget plus the sizes: the token counts of the rms_norm
    and swiglu rows and the batch of the rotary row."""

    rms_tokens: int
    swiglu_tokens: int
    rotary_batch: int


FULL = CustomOpsBudget(
    name="full",
    warmup_reps=2,
    reps=9,
    target_rep_seconds=0.1,
    max_calls_per_rep=10_000,
    rms_tokens=8192,
    swiglu_tokens=2048,
    rotary_batch=4,
)
QUICK = CustomOpsBudget(
    name="quick",
    warmup_reps=1,
    reps=5,
    target_rep_seconds=0.02,
    max_calls_per_rep=10_000,
    rms_tokens=4096,
    swiglu_tokens=1024,
    rotary_batch=2,
)

HIDDEN, INTERMEDIATE = 4096, 11008
HEADS, SEQ, HEAD_DIM = 32, 1024, 128
EPS = 1e-6


# ---------------------------------------------------------- the two sides --


def rms_norm_composed(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def swiglu_composed(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_composed(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


@dataclass(frozen=True)
class Case:
    """One op at one size: ``make(budget, dtype)`` builds the inputs on mydev
    and returns (args, indices of the trained args); ``bytes_fwd`` and
    ``bytes_bwd`` (per element of the first input and byte of its dtype) give
    the fused kernels' minimal memory traffic for the throughput note."""

    op: str
    fused: Callable[..., torch.Tensor]
    composed: Callable[..., torch.Tensor]
    shape: Callable[[CustomOpsBudget], Tuple[int, ...]]
    make: Callable[[CustomOpsBudget, torch.dtype], Tuple[list, Tuple[int, ...]]]
    bytes_fwd: int
    bytes_bwd: int


def _randn(shape: Sequence[int], dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


def _rms_shape(b: CustomOpsBudget) -> Tuple[int, ...]:
    return (b.rms_tokens, HIDDEN)


def _swiglu_shape(b: CustomOpsBudget) -> Tuple[int, ...]:
    return (b.swiglu_tokens, INTERMEDIATE)


def _rotary_shape(b: CustomOpsBudget) -> Tuple[int, ...]:
    return (b.rotary_batch, HEADS, SEQ, HEAD_DIM)


def _make_rms(b: CustomOpsBudget, dtype: torch.dtype):
    return [_randn(_rms_shape(b), dtype), _randn((HIDDEN,), dtype, 0.1) + 1, EPS], (0, 1)


def _make_swiglu(b: CustomOpsBudget, dtype: torch.dtype):
    return [_randn(_swiglu_shape(b), dtype), _randn(_swiglu_shape(b), dtype)], (0, 1)


def _make_rotary(b: CustomOpsBudget, dtype: torch.dtype):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2, device=DEVICE, dtype=torch.float32) / HEAD_DIM))
    freqs = torch.arange(SEQ, device=DEVICE, dtype=torch.float32)[:, None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return [_randn(_rotary_shape(b), dtype), emb.cos().to(dtype), emb.sin().to(dtype)], (0,)


CASES = (
    Case("rms_norm", torch.ops.mydev.rms_norm, rms_norm_composed, _rms_shape, _make_rms, 2, 3),
    Case("swiglu", torch.ops.mydev.swiglu, swiglu_composed, _swiglu_shape, _make_swiglu, 3, 5),
    Case("rotary_embedding", torch.ops.mydev.rotary_embedding, rotary_composed, _rotary_shape, _make_rotary, 2, 2),
)
DTYPES = (torch.float32, torch.bfloat16)
MODES = ("forward", "forward + backward")


# -------------------------------------------------------------------- rows --


@dataclass
class Row:
    """One line: ms per call of the fused op and of the composed eager ops
    (medians), and the speedup composed / fused (the median of the
    repetitions' speedups, with its quartiles in ``spread``)."""

    section: str
    op: str
    shape: str
    dtype: str
    target: float = TARGET
    fused: Optional[float] = None
    composed: Optional[float] = None
    speedup: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None
    note: str = ""
    error: str = ""

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if self.speedup is None:
            return "n/a"
        return "PASS" if self.speedup >= self.target else "MISS"

    def to_json(self) -> Dict[str, Any]:
        entry = report_entry(
            f"{self.op} {self.shape} {self.dtype}: composed / fused",
            self.speedup,
            self.target,
            "higher",
            self.verdict,
            "the fused op against the eager ops it replaces, both on mydev",
            self.spread,
        )
        return {**asdict(self), "unit": "ms", "verdict": self.verdict, "report": [entry]}


def _timed(fn: Callable[..., torch.Tensor], args: list, trained: Tuple[int, ...], backward: bool) -> Op:
    if not backward:
        return lambda: fn(*args)
    leaves = [args[i].requires_grad_() for i in trained]
    grad = torch.randn_like(args[0]) * 0.1

    def step() -> None:
        for leaf in leaves:
            leaf.grad = None
        fn(*args).backward(grad)

    return step


def measure(case: Case, dtype: torch.dtype, mode: str, budget: CustomOpsBudget) -> Row:
    shape = case.shape(budget)
    dtype_name = str(dtype).replace("torch.", "")
    row = Row(section=mode, op=case.op, shape=str(list(shape)), dtype=dtype_name)
    backward = mode != "forward"
    try:
        args, trained = case.make(budget, dtype)
        fused = _timed(case.fused, args, trained, backward)
        composed = _timed(case.composed, args, trained, backward)
        torch.mydev.synchronize(0)
        sync = sync_devices((0,))
        # The composed ops are the subject: a repetition's composed / fused
        # is the speedup.
        pairing = paired(Timed(composed, sync), Timed(fused, sync), budget)
    except Exception as exc:  # noqa: BLE001 (a failing row must not end the run)
        return record_failure(row, exc)
    fused_s = pairing.baseline
    row.fused, row.composed = fused_s * 1e3, pairing.subject * 1e3
    row.speedup, row.spread = pairing.ratio, pairing.spread
    numel = 1
    for size in shape:
        numel *= size
    traffic = numel * torch.finfo(dtype).bits // 8 * (case.bytes_fwd + (case.bytes_bwd if backward else 0))
    row.note = f"fused {traffic / fused_s / 1e9:.0f} GB/s"
    return row


# ------------------------------------------------------------------ output --

SECTION_TITLES = {
    "forward": f"Forward, ms per call (lower is better). Target: composed / fused >= {TARGET}.",
    "forward + backward": f"Forward + backward, ms per call (lower is better). Target: composed / fused >= {TARGET}.",
}
NUMBER_WIDTH = 9
HEADERS = (
    "op",
    "shape",
    "dtype",
    "fused".rjust(NUMBER_WIDTH),
    "composed".rjust(NUMBER_WIDTH),
    "unit",
    "speedup".rjust(RATIO_WIDTH),
    "target",
    "verdict",
    "note",
)


def table_cells(row: Row) -> Tuple[str, ...]:
    return (
        row.op,
        row.shape,
        row.dtype,
        format_value(row.fused).rjust(NUMBER_WIDTH),
        format_value(row.composed).rjust(NUMBER_WIDTH),
        "ms",
        format_ratio(row.speedup, row.spread, "x").rjust(RATIO_WIDTH),
        f">= {row.target:g}x",
        row.verdict,
        row.error or row.note,
    )


def render_table(rows: Sequence[Row]) -> str:
    summary = f"{verdict_summary(rows)}; fused kernels built for {_kernel_isa()}"
    return "\n".join([render_sectioned_table(rows, table_cells, HEADERS, SECTION_TITLES), "", summary])


def _kernel_isa() -> str:
    import device_ext

    return device_ext._C._fused_kernels_isa()


# -------------------------------------------------------------------- main --


def measure_all(budget: CustomOpsBudget) -> List[Row]:
    torch.mydev.manual_seed(0)
    rows = []
    for mode in MODES:
        for case in CASES:
            for dtype in DTYPES:
                progress(f"{case.op} {str(dtype).replace('torch.', '')} {mode}")
                rows.append(measure(case, dtype, mode, budget))
                torch.mydev.empty_cache()
    return rows


if __name__ == "__main__":
    sys.exit(
        run_benchmark(
            "custom_ops",
            __doc__,
            "short run: fewer and shorter repetitions, smaller sizes",
            (FULL, QUICK),
            measure_all,
            render_table,
        )
    )
