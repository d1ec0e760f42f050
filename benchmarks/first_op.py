"""First-op latency and import time of mydev, against the CPU in the same run.

Every figure comes from a fresh interpreter (what a user's script pays once):

* ``import torch``: with mydev (loaded by its ``torch.backends`` entry point)
  against ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (torch alone); target <= 1.10x;
* the first op, ``x = torch.ones(256, device=d); y = x * 2`` up to the
  result (``torch.mydev.synchronize()``), right after the import; target:
  under 100 ms on mydev (the CPU time is the baseline of the ratio);
* the first ``nn.Linear`` forward, after the module and its input are on the
  device (moving them is not timed); same target;
* the first mask and normalization ops, after the input is on the device: a
  comparison, ``where``, ``abs``, ``masked_fill`` and ``layer_norm`` (ops
  whose Meta kernels are Python in torch; the first of those imports
  ``torch._dynamo``, about a second); same target;
* the first training step of a small CNN (convolutions, batch norm, ReLU6,
  pooling, a Linear, cross-entropy, backward, SGD with momentum) and one
  eval forward, after the model and batch are on the device: the ops a
  vision program starts with; same target;
* a tiny transformer language model (embedding, layer norm, causal
  ``scaled_dot_product_attention``, GELU, dropout): the first four tokens
  it samples (softmax, ``multinomial``, ``cat``) in eval mode, and, in
  another interpreter, the first forward and backward of a batch in train
  mode, with no optimizer (constructing one imports ``torch._dynamo`` on
  every device, torch.optim's own doing, which would hide the device's
  part); same target.

The repetitions of a mydev figure and of its CPU baseline alternate, so both
see the same machine load; each figure is the median, and the import's ratio
is the median of the repetitions' ratios, with their quartiles
(``harness.pairing_of``). Nothing here asserts on time.

    python benchmarks/first_op.py            # quick: 5 repetitions (15 of the import), ~4 minutes
    python benchmarks/first_op.py --full     # 15 repetitions (45 of the import), ~11 minutes
    python benchmarks/first_op.py --json out.json
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

from harness import (
    format_ratio,
    format_value,
    mydev_over_cpu,
    pairing_of,
    progress,
    render_sectioned_table,
    report_entry,
)

# Prints {"import_s": ..., "first_op_s": ...} for DEVICE.
IMPORT_AND_FIRST_OP = """
import json, time
start = time.perf_counter()
import torch
imported = time.perf_counter()
sync = torch.mydev.synchronize if DEVICE == "mydev" else (lambda: None)
start_op = time.perf_counter()
x = torch.ones(256, device=DEVICE)
y = x * 2
sync()
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "first_op_s": done - start_op}))
"""

# Prints {"import_s": ...} for DEVICE: the import's extra pairs.
IMPORT_ONLY = """
import json, time
start = time.perf_counter()
import torch
print(json.dumps({"import_s": time.perf_counter() - start}))
"""

# One import moves by a third from one interpreter to the next on a 2-core
# host, so a handful of pairs can't tell a 10% difference from that spread:
# the import, cheap next to the other scripts, gets this many pairs for each
# repetition of theirs.
IMPORT_PAIRS_PER_REPETITION = 3

# Prints {"first_linear_s": ...} for DEVICE.
FIRST_LINEAR = """
import json, time
import torch
sync = torch.mydev.synchronize if DEVICE == "mydev" else (lambda: None)
model = torch.nn.Linear(64, 64).to(DEVICE)
x = torch.randn(8, 64).to(DEVICE)
sync()
start = time.perf_counter()
y = model(x)
sync()
print(json.dumps({"first_linear_s": time.perf_counter() - start}))
"""

# Prints {"first_mask_norm_s": ...} for DEVICE.
FIRST_MASK_AND_NORM = """
import json, time
import torch
sync = torch.mydev.synchronize if DEVICE == "mydev" else (lambda: None)
x = torch.randn(4, 16).to(DEVICE)
sync()
start = time.perf_counter()
mask = x > 0
y = torch.layer_norm(torch.where(mask, x, 0.0).masked_fill(x.abs() > 2, 0.0), (16,))
sync()
print(json.dumps({"first_mask_norm_s": time.perf_counter() - start}))
"""


# Prints {"first_cnn_step_s": ...} for DEVICE.
FIRST_CNN_STEP = """
import json, time
import torch
from torch import nn
sync = torch.mydev.synchronize if DEVICE == "mydev" else (lambda: None)
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU6(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(16, 10),
).to(DEVICE)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(4, 3, 16, 16).to(DEVICE)
y = torch.randint(0, 10, (4,)).to(DEVICE)
sync()
start = time.perf_counter()
nn.functional.cross_entropy(model(x), y).backward()
optimizer.step()
optimizer.zero_grad()
model.eval()
with torch.no_grad():
    model(x).argmax(1)
sync()
print(json.dumps({"first_cnn_step_s": time.perf_counter() - start}))
"""


# A tiny transformer language model, shared by the two scripts below.
TINY_LANGUAGE_MODEL = """
import json, time
import torch
from torch import nn
import torch.nn.functional as F
sync = torch.mydev.synchronize if DEVICE == "mydev" else (lambda: None)
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * width, width))

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.shape)
        x = x + self.proj(attention)
        return x + self.mlp(self.norm2(x))


model = nn.Sequential(nn.Embedding(100, 64), Block(), nn.Linear(64, 100)).to(DEVICE)
tokens = torch.randint(0, 100, (2, 16)).to(DEVICE)
sync()
"""

# Prints {"first_generation_s": ...} for DEVICE: four sampled tokens.
FIRST_GENERATION = (
    TINY_LANGUAGE_MODEL
    + """
model.eval()
start = time.perf_counter()
with torch.no_grad():
    for _ in range(4):
        probabilities = F.softmax(model(tokens)[:, -1] / 0.8, dim=-1)
        tokens = torch.cat([tokens, torch.multinomial(probabilities, 1)], dim=1)
    tokens.cpu()
print(json.dumps({"first_generation_s": time.perf_counter() - start}))
"""
)

# Prints {"first_lm_backward_s": ..., "first_clip_grad_s": ...} for DEVICE:
# the gradients of one training batch, then their first clipping by norm
# (the _foreach_* ops). No optimizer: constructing one imports
# torch._dynamo on every device (torch.optim's own doing), which would hide
# the device's part.
FIRST_LM_BACKWARD = (
    TINY_LANGUAGE_MODEL
    + """
start = time.perf_counter()
logits = model(tokens[:, :-1])
F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
sync()
backward_done = time.perf_counter()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
sync()
print(json.dumps({
    "first_lm_backward_s": backward_done - start,
    "first_clip_grad_s": time.perf_counter() - backward_done,
}))
"""
)


@dataclass
class Row:
    section: str
    name: str
    target: str
    mydev: Optional[float] = None  # ms
    cpu: Optional[float] = None  # ms
    verdict: str = "ERROR"
    # import rows: mydev / CPU, the median of the repetitions' ratios, and
    # their quartiles
    ratio: Optional[float] = None
    spread: Optional[Tuple[float, float]] = None

    def to_json(self) -> Dict[str, object]:
        if self.section == "import":
            entry = report_entry(
                self.name,
                self.ratio,
                1.10,
                "lower",
                self.verdict,
                "import torch, fresh interpreter",
                self.spread,
            )
        else:  # the target is an absolute time: the ratio is the fraction of 100 ms
            entry = report_entry(
                f"{self.name}, ms / 100 ms",
                None if self.mydev is None else self.mydev / 100,
                1.0,
                "lower",
                self.verdict,
                "mydev time against the 100 ms target (CPU time in the table)",
            )
        return {**asdict(self), "report": [entry]}


def fresh_process(script: str, device: str) -> Dict[str, float]:
    """Runs ``script`` for ``device`` in a new interpreter. The CPU side
    runs without mydev (autoload off), as a user without it would."""
    env = dict(os.environ)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "1" if device == "mydev" else "0"
    result = subprocess.run(
        [sys.executable, "-c", f"DEVICE = {device!r}\n{script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def compile_bytecode_of_the_extension() -> None:
    """Writes the bytecode of mydev's Python packages, as pip does for torch
    when it installs it. An editable install writes it at its first import,
    unless ``PYTHONDONTWRITEBYTECODE`` is set: then every mydev import would
    compile the packages' sources again (11 ms, a tenth of the import target)
    while torch's side reads the bytecode pip wrote, and the import row would
    time the caller's environment rather than the extension."""
    for package in ("device_ext", "inductor_backend"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            for directory in spec.submodule_search_locations:
                compileall.compile_dir(directory, quiet=1)


def measure(reps: int) -> List[Row]:
    compile_bytecode_of_the_extension()
    samples: Dict[str, Dict[str, List[float]]] = {}
    for rep in range(reps):
        progress(f"repetition {rep + 1}/{reps}")
        # Alternating (mydev, cpu, cpu, mydev, ...): both see the same load.
        for device in ("mydev", "cpu") if rep % 2 == 0 else ("cpu", "mydev"):
            figures = {}
            for script in (
                IMPORT_AND_FIRST_OP,
                FIRST_LINEAR,
                FIRST_MASK_AND_NORM,
                FIRST_CNN_STEP,
                FIRST_GENERATION,
                FIRST_LM_BACKWARD,
            ):
                figures.update(fresh_process(script, device))
            for key, seconds in figures.items():
                samples.setdefault(key, {}).setdefault(device, []).append(seconds * 1e3)
    extra_imports = reps * (IMPORT_PAIRS_PER_REPETITION - 1)
    progress(f"{extra_imports} more import pairs")
    for pair in range(extra_imports):
        for device in ("mydev", "cpu") if pair % 2 == 0 else ("cpu", "mydev"):
            seconds = fresh_process(IMPORT_ONLY, device)["import_s"]
            samples["import_s"][device].append(seconds * 1e3)

    def median(key: str, device: str) -> float:
        return statistics.median(samples[key][device])

    # A repetition's two imports ran one after the other: their ratio is
    # taken per repetition (an import's time moves by a third from one
    # interpreter to the next on a 2-core host).
    imports = pairing_of(samples["import_s"]["mydev"], samples["import_s"]["cpu"])
    import_row = Row(
        "import",
        "import torch (CPU: TORCH_DEVICE_BACKEND_AUTOLOAD=0)",
        "mydev/CPU <= 1.10",
        imports.subject,
        imports.baseline,
        ratio=imports.ratio,
        spread=imports.spread,
    )
    import_row.verdict = "PASS" if imports.ratio <= 1.10 else "MISS"
    rows = [import_row]
    for key, name in (
        ("first_op_s", "first op: torch.ones(256) * 2"),
        ("first_linear_s", "first nn.Linear(64, 64) forward"),
        ("first_mask_norm_s", "first x > 0, where, abs, masked_fill, layer_norm"),
        ("first_cnn_step_s", "first CNN training step (conv, batch_norm, SGD) + eval forward"),
        ("first_generation_s", "first 4 sampled tokens of a tiny transformer LM (attention, multinomial)"),
        ("first_lm_backward_s", "first forward + backward of that LM (layer_norm, attention, dropout)"),
        ("first_clip_grad_s", "then its first clip_grad_norm_ (_foreach_norm, _foreach_mul_)"),
    ):
        row = Row("first_op", name, "mydev < 100 ms", median(key, "mydev"), median(key, "cpu"))
        row.verdict = "PASS" if row.mydev < 100 else "MISS"
        rows.append(row)
    return rows


def render(rows: List[Row]) -> str:
    headers = ("row", "mydev", "CPU", "unit", "mydev/CPU", "target", "verdict")
    return render_sectioned_table(
        rows,
        lambda row: (
            row.name,
            format_value(row.mydev),
            format_value(row.cpu),
            "ms",
            format_ratio(row.ratio, row.spread)
            if row.ratio is not None
            else format_value(mydev_over_cpu(row.mydev, row.cpu)),
            row.target,
            row.verdict,
        ),
        headers,
        {
            "import": "import time (fresh interpreter)",
            "first_op": "first ops after the import (fresh interpreter each)",
        },
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="15 repetitions instead of 5")
    mode.add_argument("--quick", action="store_true", help="5 repetitions (the default)")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = measure(15 if args.full else 5)
    print(render(rows))
    print(
        f"\n{'full' if args.full else 'quick'} run, medians of fresh interpreters, "
        f"{time.perf_counter() - start:.0f} s in all, load average "
        f"{[round(load, 2) for load in os.getloadavg()]}"
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"benchmark": "first_op", "rows": [row.to_json() for row in rows]}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
