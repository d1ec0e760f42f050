"""``MydevBackend``: Triton's compiler for ``GPUTarget("mydev", ...)``.

The front end is Triton's own: the kernel's Python AST becomes TTIR (type
checking, constexpr evaluation and ``libdevice`` resolution happen there, so a
kernel that does not compile for a GPU does not compile for mydev either).
The simulator's "binary" is that TTIR after Triton's target-independent
clean-up passes; the launcher executes the kernel in stream order (see
``launcher.py``). A vendor's compiler would lower the same TTIR to its ISA.
"""

import hashlib
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any, Dict, Optional, Tuple

from triton._C.libtriton import ir, passes
from triton.backends.compiler import BaseBackend, GPUTarget, Language

from .target import BACKEND_NAME

# Triton imports this module while `triton` itself is still initialising
# (backend discovery): only triton.backends and triton._C are safe to import
# here, triton.language and triton.runtime only once a method runs.

# The last stage's extension: CompiledKernel.asm[BINARY_EXT] is the binary.
BINARY_EXT = "mydevbin"
# The stages below decide what a cached binary is, so Triton's on-disk cache
# keys on this file's text: a changed plugin never gets binaries an older one
# built (a hand-bumped version would be forgotten).
with open(__file__, "rb") as _source:
    _STAGES_FINGERPRINT = hashlib.sha256(_source.read()).hexdigest()[:16]


@dataclass(frozen=True)
class MydevOptions:
    # Launch shape knobs: kept (Inductor and autotune configs set them) but
    # the simulator runs each program as one host task whatever their value.
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 1
    warp_size: int = 32
    enable_fp_fusion: bool = True
    launch_cooperative_grid: bool = False
    # Read by Triton's front end.
    debug: bool = False
    sanitize_overflow: bool = True
    arch: Optional[str] = None
    backend_name: str = BACKEND_NAME
    extern_libs: Optional[Tuple[Tuple[str, str], ...]] = None
    supported_fp8_dtypes: Tuple[str, ...] = ("fp8e5", "fp8e4nv", "fp8e4b15")
    deprecated_fp8_dot_operand_dtypes: Tuple[str, ...] = ()
    # The executor multiplies in IEEE precision whatever the kernel asks for.
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: Tuple[str, ...] = ("tf32", "tf32x3", "ieee")
    max_num_imprecise_acc_default: int = 0
    # Set by JITFunction.run for every backend.
    instrumentation_mode: str = ""
    fpsan_homomorphic_casts: bool = False

    def hash(self) -> str:
        key = "_".join(f"{name}-{value}" for name, value in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode("utf-8")).hexdigest()


_OPTION_NAMES = {option.name for option in fields(MydevOptions)}


class MydevBackend(BaseBackend):
    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == BACKEND_NAME

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = BINARY_EXT
        # Triton makes a backend at the start of every compile: a kernel
        # executing in another thread (a graph replay) has triton.language
        # patched, which the code generator must not see.
        from .executor import wait_for_execution

        wait_for_execution()

    def hash(self) -> str:
        return f"mydev-{_STAGES_FINGERPRINT}-{self.target.arch}-{self.target.warp_size}"

    def parse_options(self, options: Dict[str, Any]) -> MydevOptions:
        # Options of other backends (launch_pdl, maxnreg, ...) are ignored, as
        # each backend ignores the others'; JITFunction.run still rejects
        # keyword arguments that no field of MydevOptions names.
        known = {k: v for k, v in options.items() if k in _OPTION_NAMES and v is not None}
        known.setdefault("arch", f"mydev{self.target.arch}")
        known.setdefault("warp_size", self.target.warp_size)
        if isinstance(known.get("extern_libs"), dict):
            known["extern_libs"] = tuple(sorted(known["extern_libs"].items()))
        return MydevOptions(**known)

    def pack_metadata(self, metadata: Any) -> Tuple[int, int, int]:
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options: MydevOptions) -> Dict[str, Any]:
        # No fp8 conversion rewrites and no minimum dot shape: the executor
        # computes any shape in any supported dtype.
        return {"min_dot_size": lambda lhs_type, rhs_type: (1, 1, 1)}

    def get_module_map(self) -> Dict[str, ModuleType]:
        from . import libdevice

        # Whichever libdevice a kernel imports, it gets mydev's.
        return {name: libdevice for name in libdevice.LIBDEVICE_MODULE_NAMES}

    def load_dialects(self, context: Any) -> None:
        pass  # TTIR only: Triton loads its own dialects

    def add_stages(self, stages: Dict[str, Any], options: MydevOptions, language: Language) -> None:
        if language != Language.TRITON:
            raise NotImplementedError(f"the mydev backend compiles Triton kernels, not {language.name}")
        stages["ttir"] = lambda module, metadata: self._make_ttir(module, metadata)
        stages[BINARY_EXT] = lambda module, metadata: str(module).encode("utf-8")

    @staticmethod
    def _make_ttir(module: Any, metadata: Dict[str, Any]) -> Any:
        manager = ir.pass_manager(module.context)
        manager.enable_debug()
        passes.common.add_inliner(manager)
        passes.common.add_canonicalizer(manager)
        passes.ttir.add_combine(manager)
        passes.common.add_cse(manager)
        passes.common.add_symbol_dce(manager)
        manager.run(module, "make_ttir")
        metadata["name"] = module.get_entry_func_name()
        metadata["shared"] = 0  # no shared memory in the simulator
        return module
