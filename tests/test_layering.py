"""The packages' structure: the C++ layers of csrc/ include only layers below
them (the driver nothing of torch, the library nothing of Python), Python
dependencies point one way (``inductor_backend`` -> ``device_ext``), every
change to torch's state is in ``device_ext/torch_patches/``, and torch.compile
works in a plain script without anything imported by hand (inductor_backend
registers itself)."""

import ast
import re
from pathlib import Path
from typing import Iterator, List, Set, Tuple

import pytest

from mydev_testing import run_python

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("device_ext", "inductor_backend")
PATCHES = ROOT / "device_ext" / "torch_patches"


def _sources(package: str) -> Iterator[Tuple[Path, ast.Module]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _imported_modules(tree: ast.Module, path: Path) -> Iterator[str]:
    """Absolute names of every module imported anywhere in the file,
    including imports inside functions (the lazy ones)."""
    package_parts = path.relative_to(ROOT).with_suffix("").parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package_parts[: len(package_parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module
            for alias in node.names:
                yield f"{module}.{alias.name}"


def _torch_names(tree: ast.Module) -> Set[str]:
    """Local names bound to torch's modules or objects by imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "torch" or node.module.startswith("torch."):
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root_name(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _writes_to_torch(tree: ast.Module) -> Iterator[Tuple[int, str]]:
    """Assignments to an attribute or item of something imported from torch,
    and setattr/delattr on one."""
    torch_names = _torch_names(tree)
    for node in ast.walk(tree):
        targets: List[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
        ):
            if _root_name(node.args[0]) in torch_names:
                yield node.lineno, ast.unparse(node)
            continue
        for target in targets:
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _root_name(target) in torch_names:
                yield node.lineno, ast.unparse(target)


def test_device_ext_never_imports_inductor_backend():
    offenders = [
        f"{path.relative_to(ROOT)}: imports {module}"
        for path, tree in _sources("device_ext")
        for module in _imported_modules(tree, path)
        if module == "inductor_backend" or module.startswith("inductor_backend.")
    ]
    assert offenders == []


def test_the_scan_finds_imports_and_writes_it_is_meant_to_find():
    """The checks below are only as good as the scan: it sees lazy imports,
    relative imports and every form of write to torch's state."""
    tree = ast.parse(
        "import torch\n"
        "from torch._inductor.codegen import common as c\n"
        "def f():\n"
        "    import inductor_backend.config\n"
        "    from ..inductor_backend import x\n"
        "    torch.utils._triton.has_triton = None\n"
        "    c.device_codegens['mydev'] = 1\n"
        "    setattr(torch._C, 'x', 2)\n"
        "    own = 3\n"
    )
    modules = list(_imported_modules(tree, ROOT / "device_ext" / "sub" / "m.py"))
    assert "inductor_backend.config" in modules and "device_ext.inductor_backend" in modules
    assert [line for line, _ in _writes_to_torch(tree)] == [6, 7, 8]


def test_nothing_outside_torch_patches_writes_to_torch():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for package in PACKAGES
        for path, tree in _sources(package)
        if PATCHES not in path.parents
        for line, text in _writes_to_torch(tree)
    ]
    assert offenders == []


def test_every_patch_module_is_in_the_table():
    """The package docstring's table (and docs/torch_patches.md) name every
    module of the package, with the test that fails without it."""
    import device_ext.torch_patches as patches

    modules = {path.stem for path in PATCHES.glob("*.py") if path.stem != "__init__"}
    docs = (ROOT / "docs" / "torch_patches.md").read_text()
    for module in modules:
        assert f"| ``{module}`` |" in patches.__doc__, module
        assert f"| `{module}` |" in docs, module


def test_only_one_cpp_file_changes_torchs_cpu_allocator():
    """The C++ library's one change to torch's state (docs/torch_patches.md,
    "In the C++ library") stays in its file."""
    setters = re.compile(r"SetCPUAllocator|SetAllocator\(\s*(c10::)?(DeviceType::|k)CPU")
    files = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "csrc").rglob("*")
        if path.suffix in (".cpp", ".h") and setters.search(path.read_text())
    )
    assert files == ["csrc/aten/cpu_allocation_redirect.cpp"]


@pytest.mark.parametrize(
    "script",
    [
        # torch.compile as a user writes it: nothing imported but torch.
        """
    import torch
    f = torch.compile(lambda x: (x * 2 + 1).relu())
    print(f(torch.ones(2, device="mydev")).cpu().tolist())
    """,
    ],
)
def test_torch_compile_in_a_plain_script(script):
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[3.0, 3.0]"


def test_inductor_backend_is_loaded_by_its_own_entry_point_lazily():
    """import torch loads both packages (each through its own entry point)
    without importing Dynamo or Inductor; importing Inductor registers mydev."""
    result = run_python(
        """
        import sys, torch
        print(sorted(m for m in ("device_ext", "inductor_backend", "torch._dynamo", "torch._inductor")
                     if m in sys.modules))
        import torch._inductor.compile_fx
        from torch._inductor.codegen.common import get_scheduling_for_device
        print(get_scheduling_for_device("mydev").__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["['device_ext', 'inductor_backend']", "MydevScheduling"]


def test_torch_holds_our_functions_only_where_torch_patches_put_them():
    """At run time, the same rule: load mydev, register torch.compile and
    myccl, then look at every attribute of torch's modules and of their
    classes. Each one whose value is code of ours (a function or class from
    device_ext or inductor_backend) was put there by device_ext.torch_patches.
    (Comparing before and after would not do: importing Dynamo imports Triton,
    which loads mydev's Triton plugin and with it device_ext.)"""
    result = run_python(
        """
        import inspect, json, sys
        import torch, torch._inductor.compile_fx, torch.distributed.distributed_c10d
        import inductor_backend
        inductor_backend.register()

        ours = ("device_ext", "inductor_backend")
        found = []
        for name, module in list(sys.modules.items()):
            if not (name == "torch" or name.startswith("torch.")) or module is None:
                continue
            if module.__name__.split(".")[0] in ours:  # torch.mydev is device_ext.mydev
                continue
            # (__loader__: device_ext.import_hooks wraps the loader of the
            # modules it watches; that changes nothing torch reads.)
            members = [(a, v) for a, v in vars(module).items() if a != "__loader__"]
            for attr, value in list(members):
                if inspect.isclass(value) and value.__module__ == name:
                    members += [(f"{attr}.{key}", member) for key, member in vars(value).items()]
            for attr, value in members:
                if inspect.ismodule(value):
                    continue
                origin = getattr(value, "__module__", None)
                if isinstance(origin, str) and origin.split(".")[0] in ours:
                    found.append([name, attr, origin])
        print(json.dumps(sorted(found)))
        """
    )
    assert result.returncode == 0, result.stderr
    import json

    found = json.loads(result.stdout.strip().splitlines()[-1])
    outside = [entry for entry in found if not entry[2].startswith("device_ext.torch_patches.")]
    assert outside == [], outside
    # Not vacuous: the patches themselves are seen.
    assert ["torch._inductor.scheduler", "device_need_guard", "device_ext.torch_patches.inductor"] in found, found
    assert [
        "torch.distributed.distributed_c10d",
        "_new_process_group_helper",
        "device_ext.torch_patches.c10d",
    ] in found, found


# ---------------------------------------------------------------- C++ layers --
# csrc/ from the bottom up; custom_ops and distributed are side by side.
CSRC_LAYERS = {"runtime": 0, "core": 1, "aten": 2, "custom_ops": 3, "distributed": 3, "python": 4}
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
# What only the Python module (csrc/python) may include: the library is
# loaded by C++ programs without an interpreter.
_PYTHON_HEADERS = ("Python.h", "pybind11/", "torch/csrc/utils/pybind", "torch/csrc/autograd/python_")
_TORCH_HEADERS = ("torch/", "ATen/", "c10/", "caffe2/") + _PYTHON_HEADERS


def _csrc_includes():
    for layer in CSRC_LAYERS:
        for path in sorted((ROOT / "csrc" / layer).rglob("*")):
            if path.suffix in (".h", ".cpp"):
                for bracket, name in _INCLUDE.findall(path.read_text()):
                    yield layer, path.relative_to(ROOT), bracket, name


def test_csrc_layers_include_only_layers_below_them():
    offenders = []
    for layer, path, bracket, name in _csrc_includes():
        if bracket == '"':
            resolved = (ROOT / path).parent.joinpath(name).resolve()
            target = resolved.relative_to(ROOT / "csrc").parts[0]
            if target != layer and CSRC_LAYERS.get(target, 99) >= CSRC_LAYERS[layer]:
                offenders.append(f"{path}: includes {name}")
    assert offenders == []


def test_driver_includes_no_torch_headers():
    offenders = [
        f"{path}: {name}"
        for layer, path, bracket, name in _csrc_includes()
        if layer == "runtime" and bracket == "<" and name.startswith(_TORCH_HEADERS)
    ]
    assert offenders == []


def test_only_the_python_module_includes_python_headers():
    offenders = [
        f"{path}: {name}"
        for layer, path, bracket, name in _csrc_includes()
        if layer != "python" and name.startswith(_PYTHON_HEADERS)
    ]
    assert offenders == []
    # Not vacuous: the module's own includes are seen.
    assert any(layer == "python" and name == "torch/csrc/utils/pybind.h" for layer, _, _, name in _csrc_includes())
