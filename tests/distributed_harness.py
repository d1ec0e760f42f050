"""Multi-process test harness for the distributed tests.

Each test starts its ranks as fresh interpreters (``python -c``) that import
the test module and run one ``_worker_*`` function of it; every run has a hard
timeout and the ranks are killed if it expires, so a hang fails the test
instead of stalling CI.
"""

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional

import pytest
import torch

RUN_TIMEOUT_S = 90
TESTS_DIR = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(
    module: str,
    worker: str,
    world_size: int,
    ranks: Optional[List[int]] = None,
    env: Optional[Dict[str, str]] = None,
    timeout: float = RUN_TIMEOUT_S,
) -> List[subprocess.CompletedProcess]:
    """Runs ``_worker_<worker>(rank, world_size)`` of the test module
    ``module`` (in tests/) in one process per rank (``ranks``: only these);
    kills all of them after ``timeout``."""
    port = free_port()
    # A second rendezvous (re-initializing after destroy_process_group) needs
    # its own port: the first group's store server may still be shutting down.
    spare_port = free_port()
    code = "import sys; sys.path.insert(0, %r); import %s as t; t._worker_%s(int(sys.argv[1]), int(sys.argv[2]))" % (
        str(TESTS_DIR),
        module,
        worker,
    )
    procs = []
    for rank in ranks if ranks is not None else range(world_size):
        full_env = dict(os.environ)
        full_env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            SPARE_MASTER_PORT=str(spare_port),
            PYTHONUNBUFFERED="1",
            **(env or {}),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code, str(rank), str(world_size)],
                env=full_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + timeout
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        outputs = [proc.communicate() for proc in procs]
        pytest.fail(
            f"{worker}: ranks still running after {timeout} s (hang); output:\n"
            + "\n".join(f"--- rank\n{o}\n{e[-3000:]}" for o, e in outputs)
        )
    return results


def check_ok(results: List[subprocess.CompletedProcess]) -> None:
    # Every failing rank is shown: the first one to fail is often not rank 0,
    # whose own failure (a timeout waiting for that rank) only follows it.
    failures = [
        f"rank {rank} exited with {result.returncode}\n{result.stdout}\n{result.stderr[-5000:]}"
        for rank, result in enumerate(results)
        if result.returncode != 0 or "WORKER OK" not in result.stdout
    ]
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------- worker helpers


def exit_ok() -> None:
    """Ends a worker without interpreter finalization. torch 2.13's gloo can
    abort the process at exit ("terminate called without an active
    exception"): its run-loop thread destroys a finished AsyncWork, whose
    tensors' Python objects need the GIL, while the main thread finalizes
    (seen after a CPU all_reduce via gloo, about one run in four)."""
    print("WORKER OK")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def init_group(rank: int, world_size: int, backend: Optional[str], timeout_s: float = 30) -> None:
    import torch.distributed as dist

    kwargs = {} if backend is None else {"backend": backend}
    dist.init_process_group(rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s), **kwargs)


def rank_tensor(rank: int, numel: int, dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Deterministic per-rank data (CPU) that every rank can recompute."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return (torch.rand(numel, generator=g) * 4 - 2).to(dtype)
    return torch.randint(-9, 10, (numel,), generator=g).to(dtype)


def expected_reduce(parts: List[torch.Tensor], op: str) -> torch.Tensor:
    """The documented myccl semantics: rank order, float32 accumulation for
    float16/bfloat16, truncating AVG for integers."""
    dtype = parts[0].dtype
    acc_dtype = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    acc = parts[0].to(acc_dtype).clone()
    for part in parts[1:]:
        part = part.to(acc_dtype)
        if op in ("sum", "avg"):
            acc = acc + part
        elif op == "product":
            acc = acc * part
        elif op == "min":
            acc = torch.minimum(acc, part)
        elif op == "max":
            acc = torch.maximum(acc, part)
    if op == "avg":
        acc = acc / len(parts) if acc_dtype.is_floating_point else torch.div(acc, len(parts), rounding_mode="trunc")
    return acc.to(dtype)


def reduce_op(name: str):
    import torch.distributed as dist

    return {
        "sum": dist.ReduceOp.SUM,
        "avg": dist.ReduceOp.AVG,
        "product": dist.ReduceOp.PRODUCT,
        "min": dist.ReduceOp.MIN,
        "max": dist.ReduceOp.MAX,
    }[name]
