"""Which ops, dtypes and layouts a run checks.

The ops are PyTorch's OpInfo database, plus optionally OpInfos from a
vendor module (--extra-ops, e.g. for the device's custom ops). Every process
(the CLI and its workers) builds the same list, so a task names its op by
OpInfo.full_name, followed by the layout in brackets for the sparse section
("abs[sparse_csr]": the OpInfo's sparse samples, see supports_sparse_layout).

The dtypes checked are those cuda supports (OpInfo.dtypesIfCUDA) and those
the CPU supports: the device is held to cuda's coverage. Where the CPU lacks
the dtype, the reference is computed in a wider dtype (runner.py)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch.testing._internal.opinfo.core import OpInfo

from .results import dtype_name

ALL_DTYPES = "all"


def load_extra_ops(spec: str) -> List[OpInfo]:
    """OpInfos from "module[:attribute]" or "path/to/file.py[:attribute]";
    the attribute (default op_db) is a list of OpInfo."""
    target, _, attribute = spec.partition(":")
    attribute = attribute or "op_db"
    if target.endswith(".py"):
        path = Path(target).resolve()
        module_spec = importlib.util.spec_from_file_location(f"_conformance_extra_{path.stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    ops = list(getattr(module, attribute))
    if not all(isinstance(op, OpInfo) for op in ops):
        raise TypeError(f"{spec}: expected a list of OpInfo")
    return ops


def load_ops(extra_ops: Sequence[str] = ()) -> Dict[str, OpInfo]:
    """Every op a run can check, by full name (unique in the database)."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops: Dict[str, OpInfo] = {}
    for op in list(op_db) + [op for spec in extra_ops for op in load_extra_ops(spec)]:
        if op.full_name in ops:
            raise ValueError(f"two OpInfos are named {op.full_name!r}")
        ops[op.full_name] = op
    return ops


def parse_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.strip().replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def cpu_dtypes(op: OpInfo) -> List[torch.dtype]:
    """The dtypes the OpInfo declares for the CPU. (Asked for an unknown
    device, OpInfo falls back to the CPU's list anyway; asking for "cpu"
    says what is meant.)"""
    return sorted(op.supported_dtypes("cpu"), key=dtype_name)


def device_dtypes(op: OpInfo) -> List[torch.dtype]:
    """The dtypes the device is checked at: cuda's (dtypesIfCUDA) and the
    CPU's."""
    return sorted(set(op.supported_dtypes("cuda")) | set(op.supported_dtypes("cpu")), key=dtype_name)


STRIDED = "strided"
SPARSE_LAYOUTS = ("sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")


def task_name(op: str, layout: str) -> str:
    return op if layout == STRIDED else f"{op}[{layout}]"


def resolve(ops: Dict[str, OpInfo], name: str) -> Tuple[OpInfo, str]:
    """The OpInfo and layout a task name stands for."""
    match = re.fullmatch(r"(.*)\[(sparse_\w+)\]", name)
    if match is None:
        return ops[name], STRIDED
    return ops[match.group(1)], match.group(2)


@dataclass(frozen=True)
class Task:
    op: str  # task_name(): the OpInfo's full name, and its sparse layout if any
    dtype: str


@dataclass
class Selection:
    tasks: List[Task]
    # Ops that matched the filters but support none of the requested dtypes.
    not_applicable: List[str]


def is_selected(name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether `name` matches any `include` pattern (any name does when
    there is none) and no `exclude` pattern: regular expressions searched in
    the name, so a plain substring works. Ops, modules and error inputs are
    chosen by the same rule, so one --ops / --exclude means the same for
    all three."""
    return (not include or any(re.search(p, name) for p in include)) and not any(re.search(p, name) for p in exclude)


def select(
    ops: Dict[str, OpInfo],
    dtypes: str,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    layouts: Sequence[str] = (STRIDED,) + SPARSE_LAYOUTS,
) -> Selection:
    """Tasks for the ops whose full name `is_selected`, at `dtypes`: a comma-separated list,
    or "all" for every dtype the device is checked at (device_dtypes), in
    each of `layouts` the OpInfo supports."""
    wanted: Optional[List[torch.dtype]] = None
    if dtypes.strip() != ALL_DTYPES:
        wanted = [parse_dtype(name) for name in dtypes.split(",") if name.strip()]
    tasks: List[Task] = []
    not_applicable: List[str] = []
    for name, op in ops.items():
        if not is_selected(name, include, exclude):
            continue
        supported = device_dtypes(op)
        chosen = supported if wanted is None else [d for d in wanted if d in supported]
        if not chosen and STRIDED in layouts:
            not_applicable.append(name)
        for layout in layouts:
            if layout == STRIDED or op.supports_sparse_layout(getattr(torch, layout)):
                tasks.extend(Task(task_name(name, layout), dtype_name(d)) for d in chosen)
    return Selection(tasks, not_applicable)
