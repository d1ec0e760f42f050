"""Graphs on mydev, measured as ratios in one run.

* A chain of 50 small elementwise kernels (4096 floats): one replay of a
  captured graph, against the same ops eager on mydev and eager on the CPU.
  Target: replay at least 3x faster than eager mydev.
* One decode step of a small Llama-style decoder (4 layers, width 256, batch
  1, a KV cache of 128 positions, one token per step): eager mydev, eager
  CPU, ``torch.compile`` on mydev and ``torch.compile(mode="reduce-overhead")``
  on mydev. Target: reduce-overhead at least 2x faster than eager CPU.

Every figure is microseconds per call, the median of several repetitions
after warm-up; a figure and its baseline alternate repetitions, and the
speed-up is the median of the repetitions' speed-ups, with their quartiles
in brackets (``harness.paired``). Device work is timed up to
``torch.mydev.synchronize()``.

    python benchmarks/graphs.py            # full run, about a minute
    python benchmarks/graphs.py --quick    # short run
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (
    RATIO_WIDTH,
    Budget,
    Pairing,
    Timed,
    format_ratio,
    format_value,
    no_sync,
    paired,
    progress,
    report_entry,
    run_benchmark,
    sync_devices,
)  # noqa: E402

CHAIN_KERNELS = 50


@dataclass
class Row:
    """One line: us per call of a variant and of its baseline (medians), and
    the speed-up baseline / variant (the median of the repetitions'
    speed-ups, with its quartiles in ``spread``)."""

    case: str
    variant: str
    baseline: str
    us: Optional[float] = None
    baseline_us: Optional[float] = None
    target: Optional[float] = None  # speed-up over the baseline to reach
    speedup: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None
    error: Optional[str] = None

    def measured(self, pairing: Pairing) -> "Row":
        """The row with the figures of ``pairing``, timed as
        ``paired(baseline, variant)`` so that a repetition's ratio is the
        speed-up."""
        self.us, self.baseline_us = pairing.baseline * 1e6, pairing.subject * 1e6
        self.speedup, self.spread = pairing.ratio, pairing.spread
        return self

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if self.target is None or self.speedup is None:
            return ""
        return "PASS" if self.speedup >= self.target else "MISS"

    def to_json(self) -> Dict[str, Any]:
        entry = report_entry(
            f"{self.case}: {self.variant} speed-up over {self.baseline}",
            self.speedup,
            self.target,
            "higher",
            self.verdict,
            f"{self.variant} against {self.baseline}, the same work",
            self.spread,
        )
        return {**asdict(self), "verdict": self.verdict, "report": [entry]}


def _chain(x: torch.Tensor) -> torch.Tensor:
    for i in range(CHAIN_KERNELS // 2):
        x = x * 1.0001
        x = x + float(i % 3)
    return x


class Decoder(torch.nn.Module):
    """Llama-shaped: RMSNorm, attention over a KV cache, SwiGLU MLP."""

    def __init__(self, layers: int = 4, width: int = 256, heads: int = 4, cache: int = 128):
        super().__init__()
        self.heads, self.head_dim = heads, width // heads
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.Module()
            layer.norm1 = torch.nn.RMSNorm(width)
            layer.qkv = torch.nn.Linear(width, 3 * width, bias=False)
            layer.out = torch.nn.Linear(width, width, bias=False)
            layer.norm2 = torch.nn.RMSNorm(width)
            layer.gate_up = torch.nn.Linear(width, 4 * width, bias=False)
            layer.down = torch.nn.Linear(2 * width, width, bias=False)
            layer.register_buffer("k_cache", torch.zeros(1, heads, cache, width // heads))
            layer.register_buffer("v_cache", torch.zeros(1, heads, cache, width // heads))
            self.layers.append(layer)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            q, k, v = layer.qkv(layer.norm1(x)).view(1, 1, 3, self.heads, self.head_dim).unbind(2)
            layer.k_cache.index_copy_(2, pos, k.transpose(1, 2))
            layer.v_cache.index_copy_(2, pos, v.transpose(1, 2))
            attn = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), layer.k_cache, layer.v_cache)
            x = x + layer.out(attn.transpose(1, 2).reshape(1, 1, -1))
            gate, up = layer.gate_up(layer.norm2(x)).chunk(2, dim=-1)
            x = x + layer.down(torch.nn.functional.silu(gate) * up)
        return x


def _timed(fn: Callable[[], object], device: str) -> Timed:
    return Timed(fn, sync_devices([0]) if device == "mydev" else no_sync)


def _measure_chain(budget: Budget) -> List[Row]:
    progress("chain: capturing")
    x_dev = torch.randn(4096, device="mydev")
    x_cpu = x_dev.cpu()
    graph = torch.mydev.MydevGraph()
    with torch.mydev.graph(graph):
        _chain(x_dev)
    replay = _timed(graph.replay, "mydev")
    rows = []
    for variant, timed, target in (
        ("eager mydev", _timed(lambda: _chain(x_dev), "mydev"), 3.0),
        ("eager CPU", _timed(lambda: _chain(x_cpu), "cpu"), None),
    ):
        progress(f"chain: replay vs {variant}")
        row = Row(f"{CHAIN_KERNELS}-kernel chain", "graph replay", variant, target=target)
        rows.append(row.measured(paired(timed, replay, budget)))
    return rows


def _measure_decode(budget: Budget) -> List[Row]:
    torch.manual_seed(0)
    cpu_model = Decoder().eval()
    x_cpu = torch.randn(1, 1, 256)
    pos_cpu = torch.tensor([5])
    eager_cpu = _timed(lambda: cpu_model(x_cpu, pos_cpu), "cpu")
    rows = []
    variants = (
        ("eager mydev", None, None),
        ("compiled mydev", "default", None),
        ("reduce-overhead mydev", "reduce-overhead", 2.0),
    )
    for variant, mode, target in variants:
        row = Row("decode step", variant, "eager CPU", target=target)
        try:
            model = Decoder().eval().to("mydev")
            model.load_state_dict(cpu_model.state_dict())
            step = torch.compile(model, mode=mode) if mode else model
            x, pos = x_cpu.to("mydev"), pos_cpu.to("mydev")
            with torch.no_grad():
                progress(f"decode: {variant}")
                for _ in range(3):
                    step(x, pos)  # compile / record
                timed = _timed(lambda step=step, x=x, pos=pos: step(x, pos), "mydev")
                row.measured(paired(eager_cpu, timed, budget))
        except Exception as error:  # a failed row is reported, not fatal
            row.error = f"{type(error).__name__}: {error}"[:200]
        rows.append(row)
    return rows


def measure(budget: Budget) -> List[Row]:
    with torch.no_grad():
        return _measure_chain(budget) + _measure_decode(budget)


def render(rows: Sequence[Row]) -> str:
    header = (
        f"{'case':<22} {'variant':<22} {'us':>10} {'baseline':<12} {'us':>10} {'speed-up':>{RATIO_WIDTH}} {'target':>7}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        if row.error:
            lines.append(f"{row.case:<22} {row.variant:<22} failed: {row.error}")
            continue
        target = "" if row.target is None else f">={row.target:g}x"
        verdict = {"PASS": "  met", "MISS": "  MISSED"}.get(row.verdict, "")
        lines.append(
            f"{row.case:<22} {row.variant:<22} {format_value(row.us):>10} {row.baseline:<12} "
            f"{format_value(row.baseline_us):>10} {format_ratio(row.speedup, row.spread, 'x'):>{RATIO_WIDTH}} "
            f"{target:>7}{verdict}"
        )
    return "\n".join(lines)


FULL = Budget("full", warmup_reps=2, reps=7, target_rep_seconds=0.2, max_calls_per_rep=2000)
QUICK = Budget("quick", warmup_reps=1, reps=3, target_rep_seconds=0.05, max_calls_per_rep=200)

if __name__ == "__main__":
    sys.exit(run_benchmark("graphs", __doc__, "short run", (FULL, QUICK), measure, render))
