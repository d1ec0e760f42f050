"""Run code the moment a given torch module has been imported.

Dynamo, Inductor and torch.distributed are large (importing Dynamo and
Inductor doubles the time of ``import torch``), so nothing in torch-mydev
imports them to register itself. Registration waits for the process to
import them instead: ``run_after_import(name, callback)`` calls
``callback(module)`` as soon as module ``name`` has been executed (at once if
it already has). Every process that imports torch gets this, Inductor's
compile workers included.

``device_ext`` registers the myccl c10d backend this way;
``inductor_backend`` (which depends on ``device_ext``, never the reverse)
registers mydev's Dynamo device interface and Inductor backend this way.
"""

import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Callable, Dict, List, Optional, Sequence

Callback = Callable[[ModuleType], None]

# Module name -> what to run once it has been executed, in order.
_AFTER_IMPORT: Dict[str, List[Callback]] = {}
_lock = threading.Lock()


class _RunAfterLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, callbacks: List[Callback]):
        self._loader = loader
        self._callbacks = callbacks

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for callback in list(self._callbacks):
            callback(module)


class _RunAfterImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        callbacks = _AFTER_IMPORT.get(fullname)
        if not callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RunAfterLoader(spec.loader, callbacks)
                return spec
        return None


def run_after_import(name: str, callback: Callback) -> None:
    """Calls ``callback(module)`` once module ``name`` has been executed: now
    if it already was, else right after the import that executes it."""
    with _lock:
        callbacks = _AFTER_IMPORT.setdefault(name, [])
        if callback in callbacks:
            return
        callbacks.append(callback)
        if not any(isinstance(f, _RunAfterImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _RunAfterImportFinder())
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
