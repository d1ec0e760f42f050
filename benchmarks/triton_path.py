"""Step time of mydev's Triton kernel language next to its C++ one: information, no target.

The simulator executes Triton kernels with an interpreter, program by
program, so compiled code in kernel_language="triton" is much slower than
in "cpp" (kernels built by the device compiler). This script says how much,
so users know what to expect; speed is not a goal of that path.

Each model of benchmarks/model_suite.py (mlp, cnn, transformer_block,
rmsnorm_swiglu_block), at a small size, in the two workloads of
benchmarks/compile.py (inference: a forward under torch.no_grad(); training
step: forward, loss, backward, SGD step, zero_grad), on mydev:

* compiled with kernel_language="cpp",
* compiled with kernel_language="triton",
* eager, for reference.

Compilation is excluded: every variant is called once before timing (the
compiled ones' first-call seconds are reported). The C++ and Triton
variants are timed as one pair with alternating repetitions, and their
ratio is the median of the repetitions' ratios, with their quartiles in
brackets (``harness.paired``). Eager is timed in a pair of its own with the
C++ variant and gives a figure, no ratio. Device work is timed up to the
return of torch.mydev.synchronize().

    python benchmarks/triton_path.py            # size "test" (batch 4, width 32), 1-3 minutes
    python benchmarks/triton_path.py --quick    # size "tiny" (batch 2, width 16), under a minute
    python benchmarks/triton_path.py --json out.json
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile import make_workload  # noqa: E402
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
)
from model_suite import CASES, ModelCase  # noqa: E402

import inductor_backend.config as mydev_config  # noqa: E402
from inductor_backend.kernel_languages import triton_unavailable_reason  # noqa: E402

DEVICE = "mydev:0"
PHASES = ("inference", "training")
MS = 1e3


@dataclass(frozen=True)
class TritonPathBudget(Budget):
    size: str


# A Triton step takes tens to hundreds of milliseconds: a repetition is one
# or a few calls, and few repetitions are enough to see the order of magnitude.
FULL = TritonPathBudget(name="full", warmup_reps=1, reps=5, target_rep_seconds=0.2, max_calls_per_rep=1000, size="test")
QUICK = replace(FULL, name="quick", reps=3, target_rep_seconds=0.05, size="tiny")


@dataclass
class Row:
    section: str
    model: str
    shape: str
    cpp_ms: Optional[float] = None
    triton_ms: Optional[float] = None
    eager_ms: Optional[float] = None
    triton_over_cpp: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None  # of triton_over_cpp
    compile_cpp_s: Optional[float] = None
    compile_triton_s: Optional[float] = None
    error: str = ""

    def to_json(self) -> Dict[str, Any]:
        entry = report_entry(
            f"{self.model} {self.section}: Triton / C++ kernels",
            self.triton_over_cpp,
            None,
            "lower",
            "ERROR" if self.error else "-",
            "the same compiled model on mydev with each kernel language",
            self.spread,
        )
        return {**asdict(self), "report": [entry]}


def _inductor_of_its_own() -> Callable[..., Any]:
    """Inductor as a backend that Dynamo takes for no other: Dynamo reuses
    a graph compiled for an equal backend, whatever kernel language it was
    compiled in, and the two variants' models are alike."""
    from torch._inductor.compile_fx import compile_fx

    def inductor(graph: torch.fx.GraphModule, example_inputs: List[torch.Tensor]) -> Callable[..., Any]:
        return compile_fx(graph, example_inputs)

    return inductor


def _compiled(case: ModelCase, phase: str, size: str, language: str) -> Tuple[Op, str, float]:
    """The compiled workload in ``language``, its input shape and the
    seconds of its first call (which compiles the forward and, in training,
    the backward graph; the language is read then)."""
    op, shape = make_workload(case, phase, size, DEVICE, compiled=True, backend=_inductor_of_its_own())
    start = time.perf_counter()
    with mydev_config.patch(kernel_language=language):
        op()
    torch.mydev.synchronize()
    return op, shape, time.perf_counter() - start


def measure(case: ModelCase, phase: str, budget: TritonPathBudget) -> Row:
    row = Row(section=phase, model=case.name, shape="")
    sync = sync_devices((0,))
    try:
        cpp, row.shape, row.compile_cpp_s = _compiled(case, phase, budget.size, "cpp")
        triton, _, row.compile_triton_s = _compiled(case, phase, budget.size, "triton")
        eager, _ = make_workload(case, phase, budget.size, DEVICE, compiled=False)
        versus_cpp = paired(Timed(triton, sync), Timed(cpp, sync), budget)
        # Only a reference figure comes of this pair, no ratio: pairing it
        # keeps eager's repetitions under the load the C++ variant's see.
        eager_s = paired(Timed(cpp, sync), Timed(eager, sync), budget).baseline
    except Exception as exc:  # noqa: BLE001 (a failing row must not end the run)
        traceback.print_exc(file=sys.stderr)
        return record_failure(row, exc)
    row.cpp_ms, row.triton_ms, row.eager_ms = versus_cpp.baseline * MS, versus_cpp.subject * MS, eager_s * MS
    row.triton_over_cpp, row.spread = versus_cpp.ratio, versus_cpp.spread
    return row


HEADERS = (
    "model",
    "input",
    "C++",
    "Triton",
    "Triton/C++".rjust(RATIO_WIDTH),
    "eager",
    "compile s C++ / Triton",
    "error",
)
_WHAT = {
    "inference": "Inference: forward under torch.no_grad (cnn in eval mode)",
    "training": "Training step: forward, loss, backward, SGD foreach step, zero_grad",
}
SECTION_TITLES = {
    phase: (
        f"{what}, compiled on mydev, ms per call (lower is better).\n"
        "  C++ / Triton: kernel_language 'cpp' / 'triton'; eager: the model uncompiled, for reference."
    )
    for phase, what in _WHAT.items()
}


def _number(value: Optional[float], header: str) -> str:
    return format_value(value).rjust(len(header))


def table_cells(row: Row) -> Tuple[str, ...]:
    return (
        row.model,
        row.shape,
        _number(row.cpp_ms, "C++"),
        _number(row.triton_ms, "Triton"),
        format_ratio(row.triton_over_cpp, row.spread, "x").rjust(RATIO_WIDTH),
        _number(row.eager_ms, "eager"),
        f"{format_value(row.compile_cpp_s)} / {format_value(row.compile_triton_s)}",
        row.error,
    )


def render_table(rows: Sequence[Row]) -> str:
    ratios = sorted(row.triton_over_cpp for row in rows if row.triton_over_cpp is not None)
    summary = (
        f"Triton/C++ step time: {format_value(ratios[0])}x to {format_value(ratios[-1])}x over {len(ratios)} rows"
        if ratios
        else "no row measured"
    )
    return "\n".join([render_sectioned_table(rows, table_cells, HEADERS, SECTION_TITLES), "", summary])


def measure_all(budget: TritonPathBudget) -> List[Row]:
    reason = triton_unavailable_reason()
    if reason is not None:
        raise SystemExit(f"kernel_language='triton' is not available: {reason}")
    rows = []
    for phase in PHASES:
        for case in CASES.values():
            progress(f"{phase} {case.name} (size {budget.size!r})")
            rows.append(measure(case, phase, budget))
            torch._dynamo.reset()
    return rows


if __name__ == "__main__":
    sys.exit(
        run_benchmark(
            "triton_path",
            __doc__,
            'short run: size "tiny", fewer repetitions',
            (FULL, QUICK),
            measure_all,
            render_table,
        )
    )
