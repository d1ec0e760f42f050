"""Eager-mode speed of mydev against the CPU in the same run, with targets.

Each row times one workload on mydev and the same workload on the CPU and
prints the time ratio mydev / CPU (lower is better) next to the target the
eager-mode performance issue sets for it:

* per-op overhead: ``x + 1`` on a one-element tensor, 10 000 calls per
  repetition; target: mydev at most 3x the CPU time;
* chains of small ops: each hot op family (elementwise with scalars and
  broadcasting, reductions, the matmul family, copies and views, indexing,
  softmax and norms, the AdamW foreach step) as a chain of calls on
  one-element inputs, many chains then one synchronize; target: mydev at most
  1.5x the CPU time;
* large ops: a 16M-element add (allocating, and into ``out=``), a
  16M-element sum, softmax over a
  [4096, 4096] tensor, a 1024x1024 mm and a Linear with bias on one token
  (768 -> 3072, a decode step's projection); target: at most 1.1x the CPU
  time;
* convolutions on [8, C, 56, 56]: conv2d 3x3 64->64 (contiguous and
  channels-last), 1x1 64->256, 3x3 depthwise, 3x3 stride 2, conv_transpose2d
  2x2 stride 2, and the backward of the 3x3 conv (input, weight and bias
  gradients); target: at most 1.1x the CPU time;
* a TransformerEncoderLayer (d_model=512, nhead=8, seq=128, batch=8):
  forward + backward, and a full training step with AdamW; target: at most
  1.2x the CPU time.

Every row runs the same code on the same inputs on both devices (the AdamW
step explicitly uses the foreach implementation on both, since the CPU's
default would be the for-loop one). The repetitions of a mydev figure and
of its CPU baseline alternate, so both see the same machine load. Every
figure is the median of its repetitions after warm-up; the ratio is the
median of the repetitions' ratios, with their quartiles in brackets
(``harness.paired``). Device work is timed up to the return of
``torch.mydev.synchronize()``. Nothing here asserts on time; PASS / MISS
only compares the measured ratio with the target.

    python benchmarks/eager.py               # full run, about 2-4 minutes
    python benchmarks/eager.py --quick       # short run, about 1 minute
    python benchmarks/eager.py --json out.json
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

# harness.py sits next to this script; the insert lets the script be imported
# from elsewhere too.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402
    FIGURE_HEADERS,
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

# ------------------------------------------------------------------ budget --


@dataclass(frozen=True)
class EagerBudget(Budget):
    """The harness's budget plus ``overhead_calls``: the overhead row makes
    that many calls per repetition instead of a calibrated number."""

    overhead_calls: int


FULL = EagerBudget(
    name="full", warmup_reps=2, reps=21, target_rep_seconds=0.1, max_calls_per_rep=1_000_000, overhead_calls=10_000
)
# Eleven repetitions: the quartiles of fewer say little.
QUICK = EagerBudget(
    name="quick", warmup_reps=1, reps=11, target_rep_seconds=0.02, max_calls_per_rep=1_000_000, overhead_calls=10_000
)


# -------------------------------------------------------------------- rows --


@dataclass
class Row:
    """One line: mydev and CPU time per call (medians), their ratio (the
    median of the repetitions' ratios, with its quartiles) and the target."""

    section: str
    what: str
    shape: str
    unit: str
    target: float
    mydev: Optional[float] = None
    cpu: Optional[float] = None
    ratio: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None
    note: str = ""
    error: str = ""

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        ratio = self.ratio
        if ratio is None:
            return "n/a"
        return "PASS" if ratio <= self.target else "MISS"

    def to_json(self) -> Dict[str, Any]:
        entry = report_entry(
            f"{self.what} {self.shape}",
            self.ratio,
            self.target,
            "lower",
            self.verdict,
            "the same code on mydev and CPU",
            self.spread,
        )
        return {**asdict(self), "verdict": self.verdict, "report": [entry]}


@dataclass(frozen=True)
class Workload:
    """``make(device)`` builds the inputs on ``device`` and returns the
    callable to time; ``work`` (FLOP or bytes per call, optional) gives the
    throughput note."""

    section: str
    what: str
    shape: str
    target: float
    make: Callable[[str], Op]
    unit: str = "ms"
    fixed_calls: bool = False
    work: Optional[Tuple[float, str]] = None
    note: str = ""


def _seeded(shape: Sequence[int], device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g).to(device)


def make_add_one(device: str) -> Op:
    x = torch.ones(1, device=device)
    return lambda: x + 1


# Chains of small ops on one-element (or 1x1) inputs: what each op family
# costs per call on the eager path, launches queued back to back as in a
# model's forward. Each chain's figure is per op of the chain.


def make_chain_elementwise(device: str) -> Op:
    x, y = torch.ones(1, device=device), torch.ones(1, 1, device=device)

    def chain() -> None:
        t = x * 2 + y  # scalar, then broadcasting [1] + [1, 1]
        t = (t - 1).relu()
        t = t / y
        t.mul_(0.5)

    return chain


def make_chain_reductions(device: str) -> Op:
    x = torch.ones(1, 1, device=device)

    def chain() -> None:
        x.sum()
        x.mean(dim=0)
        x.amax(dim=-1)
        x.norm()

    return chain


def make_chain_matmul(device: str) -> Op:
    a, b, bias = torch.ones(1, 1, device=device), torch.ones(1, 1, device=device), torch.ones(1, device=device)
    batch = torch.ones(1, 1, 1, device=device)

    def chain() -> None:
        a @ b
        torch.addmm(bias, a, b)
        torch.bmm(batch, batch)
        F.linear(a, b, bias)

    return chain


def make_chain_copies_views(device: str) -> Op:
    x, out = torch.ones(1, 1, device=device), torch.empty(1, 1, device=device)

    def chain() -> None:
        x.view(1).unsqueeze(0).t()
        x.clone()
        out.copy_(x)
        x.t().contiguous()

    return chain


def make_chain_indexing(device: str) -> Op:
    x = torch.ones(4, device=device)
    index = torch.zeros(1, dtype=torch.long, device=device)

    def chain() -> None:
        x[index]
        x.index_select(0, index)
        x[1:2]
        x.index_fill(0, index, 1.0)

    return chain


def make_chain_softmax_norms(device: str) -> Op:
    x = torch.ones(1, 1, device=device)
    weight, bias = torch.ones(1, device=device), torch.zeros(1, device=device)

    def chain() -> None:
        torch.softmax(x, dim=-1)
        F.log_softmax(x, dim=-1)
        F.layer_norm(x, (1,), weight, bias)
        torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    return chain


def make_chain_optimizer(device: str) -> Op:
    params = [torch.ones(1, device=device, requires_grad=True) for _ in range(2)]
    for p in params:
        p.grad = torch.ones(1, device=device)
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    return opt.step


def make_add(device: str) -> Op:
    a, b = _seeded((16 * 1024 * 1024,), device), _seeded((16 * 1024 * 1024,), device)
    return lambda: a + b


def make_add_out(device: str) -> Op:
    a, b = _seeded((16 * 1024 * 1024,), device), _seeded((16 * 1024 * 1024,), device)
    out = torch.empty_like(a)
    return lambda: torch.add(a, b, out=out)


def make_sum(device: str) -> Op:
    a = _seeded((16 * 1024 * 1024,), device)
    return lambda: a.sum()


def make_softmax(device: str) -> Op:
    a = _seeded((4096, 4096), device)
    return lambda: torch.softmax(a, dim=-1)


def make_mm(device: str) -> Op:
    a, b = _seeded((1024, 1024), device), _seeded((1024, 1024), device)
    return lambda: a @ b


def make_linear_one_token(device: str) -> Op:
    # A decode step's MLP projection with its bias (GPT-2 small's c_fc).
    x, weight, bias = _seeded((1, 768), device), _seeded((3072, 768), device), _seeded((3072,), device)
    return lambda: F.linear(x, weight, bias)


def _conv_inputs(
    device: str, weight: Sequence[int], channels_last: bool = False, transposed: bool = False
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A [8, 64, 56, 56] input, `weight` and a bias, optionally
    channels-last."""
    x = _seeded((8, 64, 56, 56), device)
    w = _seeded(weight, device) * 0.05
    bias = _seeded((weight[1] if transposed else weight[0],), device)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
    return x, w, bias


def make_conv2d(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (64, 64, 3, 3))
    return lambda: F.conv2d(x, w, bias, padding=1)


def make_conv2d_channels_last(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (64, 64, 3, 3), channels_last=True)
    return lambda: F.conv2d(x, w, bias, padding=1)


def make_conv2d_1x1(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (256, 64, 1, 1))
    return lambda: F.conv2d(x, w, bias)


def make_conv2d_depthwise(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (64, 1, 3, 3))
    return lambda: F.conv2d(x, w, bias, padding=1, groups=64)


def make_conv2d_strided(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (128, 64, 3, 3))
    return lambda: F.conv2d(x, w, bias, stride=2, padding=1)


def make_conv_transpose2d(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (64, 32, 2, 2), transposed=True)
    return lambda: F.conv_transpose2d(x, w, bias, stride=2)


def make_conv2d_backward(device: str) -> Op:
    x, w, bias = _conv_inputs(device, (64, 64, 3, 3))
    x.requires_grad_()
    w.requires_grad_()
    bias.requires_grad_()
    out = F.conv2d(x, w, bias, padding=1)
    grad = torch.ones_like(out)
    return lambda: torch.autograd.grad(out, (x, w, bias), grad, retain_graph=True)


D_MODEL, NHEAD, SEQ, BATCH = 512, 8, 128, 8


def _transformer(device: str) -> Tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D_MODEL, NHEAD, batch_first=True).to(device)  # dropout 0.1, ff 2048
    x = _seeded((BATCH, SEQ, D_MODEL), device)
    target = _seeded((BATCH, SEQ, D_MODEL), device)
    return layer.train(), x, target


def make_transformer_fwd_bwd(device: str) -> Op:
    layer, x, target = _transformer(device)
    params = list(layer.parameters())

    def step() -> None:
        for p in params:
            p.grad = None
        F.mse_loss(layer(x), target).backward()

    return step


def make_transformer_train_step(device: str) -> Op:
    layer, x, target = _transformer(device)
    # The same implementation on both sides (mydev's default, as cuda's):
    # the CPU would default to the for-loop one.
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4, foreach=True)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.mse_loss(layer(x), target).backward()
        opt.step()

    return step


def _layer_flops() -> float:
    """Matmul FLOP of one forward of the layer (projections, attention, FFN)."""
    tokens = BATCH * SEQ
    proj = 2 * tokens * D_MODEL * (4 * D_MODEL + 2 * 2048)
    attn = 2 * 2 * BATCH * SEQ * SEQ * D_MODEL
    return float(proj + attn)


WORKLOADS: Tuple[Workload, ...] = (
    Workload(
        "overhead",
        "x + 1, 1 element, 10k calls + sync",
        "[1] f32",
        3.0,
        make_add_one,
        unit="us",
        fixed_calls=True,
        note="per-op overhead",
    ),
    Workload(
        "chains",
        "elementwise: x * 2 + y (broadcast), - 1, relu, / y, mul_",
        "[1] f32",
        1.5,
        make_chain_elementwise,
        unit="us",
        note="per chain of 5 calls",
    ),
    Workload(
        "chains",
        "reductions: sum, mean(0), amax(-1), norm",
        "[1] f32",
        1.5,
        make_chain_reductions,
        unit="us",
        note="per chain of 4 calls",
    ),
    Workload(
        "chains",
        "matmul: @, addmm, bmm, linear",
        "[1] f32",
        1.5,
        make_chain_matmul,
        unit="us",
        note="per chain of 4 calls",
    ),
    Workload(
        "chains",
        "copies and views: view/unsqueeze/t, clone, copy_, t().contiguous()",
        "[1] f32",
        1.5,
        make_chain_copies_views,
        unit="us",
        note="per chain of 4 calls",
    ),
    Workload(
        "chains",
        "indexing: x[idx], index_select, x[1:2], index_fill",
        "[1] f32",
        1.5,
        make_chain_indexing,
        unit="us",
        note="per chain of 4 calls",
    ),
    Workload(
        "chains",
        "softmax, log_softmax, layer_norm, rms (4 ops)",
        "[1] f32",
        1.5,
        make_chain_softmax_norms,
        unit="us",
        note="per chain of 4 calls",
    ),
    Workload(
        "chains",
        "AdamW step, foreach, 2 one-element params",
        "[1] f32",
        1.5,
        make_chain_optimizer,
        unit="us",
        note="per chain of 1 call",
    ),
    Workload(
        "large",
        "add a + b",
        "[16M] f32",
        1.1,
        make_add,
        work=(3 * 64 * 2**20, "GB/s"),
        note="new 64 MiB output per call",
    ),
    Workload("large", "add, out= (no allocation)", "[16M] f32", 1.1, make_add_out, work=(3 * 64 * 2**20, "GB/s")),
    Workload("large", "sum", "[16M] f32", 1.1, make_sum, work=(64 * 2**20, "GB/s")),
    Workload("large", "softmax(dim=-1)", "[4096, 4096] f32", 1.1, make_softmax, work=(2 * 64 * 2**20, "GB/s")),
    Workload("large", "mm", "[1024, 1024] @ [1024, 1024] f32", 1.1, make_mm, work=(2 * 1024**3, "GFLOP/s")),
    Workload(
        "large",
        "Linear with bias, one token",
        "[1, 768] -> [1, 3072] f32",
        1.1,
        make_linear_one_token,
        work=(4 * 768 * 3072, "GB/s"),
        note="a decode step's projection (addmm)",
    ),
    Workload(
        "convolution",
        "conv2d 3x3, pad 1, 64->64",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv2d,
        work=(2 * 8 * 64 * 64 * 9 * 56 * 56, "GFLOP/s"),
    ),
    Workload(
        "convolution",
        "conv2d 3x3, pad 1, 64->64, channels-last",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv2d_channels_last,
        work=(2 * 8 * 64 * 64 * 9 * 56 * 56, "GFLOP/s"),
    ),
    Workload(
        "convolution",
        "conv2d 1x1, 64->256",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv2d_1x1,
        work=(2 * 8 * 64 * 256 * 56 * 56, "GFLOP/s"),
    ),
    Workload(
        "convolution",
        "conv2d 3x3 depthwise (groups 64)",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv2d_depthwise,
        work=(2 * 8 * 64 * 9 * 56 * 56, "GFLOP/s"),
    ),
    Workload(
        "convolution",
        "conv2d 3x3, stride 2, 64->128",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv2d_strided,
        work=(2 * 8 * 64 * 128 * 9 * 28 * 28, "GFLOP/s"),
    ),
    Workload(
        "convolution",
        "conv_transpose2d 2x2, stride 2, 64->32",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv_transpose2d,
        work=(2 * 8 * 64 * 32 * 4 * 56 * 56, "GFLOP/s"),
    ),
    Workload(
        "convolution",
        "conv2d 3x3 backward (input, weight, bias)",
        "[8, 64, 56, 56] f32",
        1.1,
        make_conv2d_backward,
        work=(2 * 2 * 8 * 64 * 64 * 9 * 56 * 56, "GFLOP/s"),
    ),
    Workload(
        "transformer",
        "TransformerEncoderLayer fwd + bwd",
        "d512 h8 s128 b8",
        1.2,
        make_transformer_fwd_bwd,
        work=(3 * _layer_flops(), "GFLOP/s"),
        note="mse loss, dropout 0.1",
    ),
    Workload(
        "transformer",
        "training step, AdamW",
        "d512 h8 s128 b8",
        1.2,
        make_transformer_train_step,
        work=(3 * _layer_flops(), "GFLOP/s"),
        note="zero_grad + fwd + bwd + step; AdamW foreach=True on both",
    ),
)


def _throughput_note(work: Optional[Tuple[float, str]], mydev_s: float, cpu_s: float) -> str:
    if work is None:
        return ""
    amount, unit = work
    return f"{unit}: mydev {amount / mydev_s / 1e9:.1f}, CPU {amount / cpu_s / 1e9:.1f}"


def _placement_note() -> str:
    """How the results of functional-only CPU kernels (convolutions, ...)
    reached their device outputs during the row: computed in place, or
    copied (README: "Reading the notes")."""
    counts = torch.mydev._debug.result_placement_counts()
    total = counts["in_place"] + counts["copied"]
    return f"results in place: {counts['in_place']}/{total}" if total else ""


def measure(workload: Workload, budget: EagerBudget) -> Row:
    row = Row(
        section=workload.section,
        what=workload.what,
        shape=workload.shape,
        unit=workload.unit,
        target=workload.target,
        note=workload.note,
    )
    scale = 1e6 if workload.unit == "us" else 1e3
    try:
        mydev_op = workload.make("mydev:0")
        torch.mydev.synchronize(0)
        cpu_op = workload.make("cpu")
        fixed = budget.overhead_calls if workload.fixed_calls else None
        torch.mydev._debug.reset_result_placement_counts()
        pairing = paired(Timed(mydev_op, sync_devices((0,))), Timed(cpu_op), budget, fixed)
    except Exception as exc:  # noqa: BLE001 (a failing row must not end the run)
        return record_failure(row, exc)
    mydev_s, cpu_s = pairing.subject, pairing.baseline
    row.mydev, row.cpu = mydev_s * scale, cpu_s * scale
    row.ratio, row.spread = pairing.ratio, pairing.spread
    notes = [n for n in (row.note, _throughput_note(workload.work, mydev_s, cpu_s), _placement_note()) if n]
    row.note = "; ".join(notes)
    return row


# ------------------------------------------------------------------ output --

SECTION_TITLES = {
    "overhead": "Per-op overhead, us per call (lower is better). Target: mydev/CPU <= 3.",
    "chains": "Chains of small ops, us per chain (lower is better). Target: mydev/CPU <= 1.5.",
    "large": "Large ops, ms per call (lower is better). Target: mydev/CPU <= 1.1.",
    "convolution": "Convolutions, ms per call (lower is better). Target: mydev/CPU <= 1.1.",
    "transformer": "Transformer layer, ms per call (lower is better). Target: mydev/CPU <= 1.2.",
}
HEADERS = ("what", "shape", *FIGURE_HEADERS, "target", "verdict", "note")


def table_cells(row: Row) -> Tuple[str, ...]:
    return (
        row.what,
        row.shape,
        format_value(row.mydev),
        format_value(row.cpu),
        row.unit,
        format_ratio(row.ratio, row.spread),
        f"<= {row.target:g}",
        row.verdict,
        row.error or row.note,
    )


def render_table(rows: Sequence[Row]) -> str:
    return "\n".join([render_sectioned_table(rows, table_cells, HEADERS, SECTION_TITLES), "", verdict_summary(rows)])


# -------------------------------------------------------------------- main --


def measure_all(budget: EagerBudget) -> List[Row]:
    rows = []
    for workload in WORKLOADS:
        progress(f"{workload.what} {workload.shape}")
        rows.append(measure(workload, budget))
        torch.mydev.empty_cache()
    return rows


if __name__ == "__main__":
    sys.exit(
        run_benchmark(
            "eager", __doc__, "short run: fewer and shorter repetitions", (FULL, QUICK), measure_all, render_table
        )
    )
