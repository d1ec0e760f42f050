"""Connects mydev to torch.compile without making ``import torch`` slower.

Dynamo and Inductor are large (importing them doubles the time of
``import torch``), so this package does not import them at autoload. It
installs an import hook instead: the moment a process imports Dynamo's device
interface, mydev's interface is registered there, and the moment it imports
Inductor's compiler, the whole ``inductor_backend`` is registered. Every
process that imports torch gets this, Inductor's compile workers included.
"""

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Callable, Dict, Optional, Sequence


def _register_device_interface(_module: ModuleType) -> None:
    from inductor_backend.device_interface import register_device_interface

    from .torch_patches import dynamo

    register_device_interface()
    # Dynamo decides whether to capture a @triton.jit call while tracing,
    # before anything imports Inductor's compiler.
    dynamo.apply(mydev_has_triton=_mydev_has_triton)


def _mydev_has_triton() -> bool:
    import torch
    # Imports Inductor's code generators: only when Dynamo first asks.
    from inductor_backend.kernel_languages import triton_unavailable_reason

    return torch.mydev.is_available() and triton_unavailable_reason() is None


def _register_inductor_backend(_module: ModuleType) -> None:
    import inductor_backend

    inductor_backend.register()


def _register_distributed_backend(module: ModuleType) -> None:
    from . import distributed

    distributed.register(module)


# Module -> what to run once it has been executed. Dynamo looks devices up
# while tracing, before Inductor's compiler is imported.
_AFTER_IMPORT: Dict[str, Callable[[ModuleType], None]] = {
    "torch._dynamo.device_interface": _register_device_interface,
    "torch._inductor.compile_fx": _register_inductor_backend,
    # The myccl c10d backend, once torch.distributed's c10d module exists.
    "torch.distributed.distributed_c10d": _register_distributed_backend,
}


class _RunAfterLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, then: Callable[[ModuleType], None]):
        self._loader = loader
        self._then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._then(module)


class _RunAfterImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        then = _AFTER_IMPORT.get(fullname)
        if then is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RunAfterLoader(spec.loader, then)
                return spec
        return None


def install() -> None:
    """Hook the imports; modules imported already are handled at once."""
    for name, then in _AFTER_IMPORT.items():
        module = sys.modules.get(name)
        if module is not None:
            then(module)
    if not any(isinstance(f, _RunAfterImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _RunAfterImportFinder())
