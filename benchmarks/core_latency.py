"""The host's core-to-core round trip, for the environment block of every
report (``core_round_trip.c`` says why mydev's small ops follow it).

The C program is compiled once per source version with the system's C
compiler, into the temporary directory; without a compiler, or on a host
with one usable core, there is no figure."""

import hashlib
import os
import shutil
import subprocess
import tempfile
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "core_round_trip.c")

# Set by ``python -m benchmarks --busy N`` for its scripts: beside busy
# processes the two pinned threads share cores with them, and the figure
# would be their time slices, not the placement of the cores.
BUSY_ENV = "MYDEV_BENCH_BUSY_PROCESSES"


def _program() -> Optional[str]:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    with open(SOURCE, "rb") as handle:
        version = hashlib.sha256(handle.read()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), "torch-mydev-bench", f"core_round_trip-{version}")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        built = subprocess.run([compiler, "-O2", "-pthread", SOURCE, "-o", partial], capture_output=True)
        if built.returncode != 0:
            return None
        os.replace(partial, path)  # atomic: concurrent scripts never run half a file
    return path


def core_round_trip_ns() -> Optional[float]:
    """Nanoseconds for a cache line to go to another core and back, or None
    (no compiler, one usable core, busy processes beside the run)."""
    if int(os.environ.get(BUSY_ENV, "0")) > 0:
        return None
    program = _program()
    if program is None:
        return None
    try:
        result = subprocess.run([program], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return None
    text = result.stdout.strip()
    return float(text) if result.returncode == 0 and text else None
