"""mydev's ``libdevice``: the math library Triton kernels (and Inductor's
generated kernels) call as ``libdevice.exp(x)`` and the like.

One table drives both sides. At compile time the backend's module map points
every ``libdevice`` module at this one, so ``libdevice.exp(x)`` resolves to
the extern function defined here and becomes a TTIR ``extern_elementwise``
call (argument types are checked against the same signatures CUDA's
libdevice accepts, so a kernel that compiles here compiles there). At run time
the executor evaluates those calls with :func:`evaluate`: numpy elementwise,
in the argument's own precision, or torch's CPU kernel where numpy has no
such function.
"""

from typing import Callable, Dict, List, NamedTuple, Tuple

import numpy as np
import torch
from triton.language import core

# The modules kernels import libdevice from; all of them mean this one.
LIBDEVICE_MODULE_NAMES = (
    "triton.language.extra.libdevice",
    "triton.language.extra.cuda.libdevice",
    "triton.language.extra.hip.libdevice",
)

_F32, _F64, _I32, _I64 = core.float32, core.float64, core.int32, core.int64

Signatures = Dict[Tuple[core.dtype, ...], core.dtype]


class MathFunction(NamedTuple):
    signatures: Signatures
    compute: Callable[..., np.ndarray]
    # isnan/isinf return int32 in libdevice and Triton turns that into int1.
    predicate: bool = False


def _floats(arity: int) -> Signatures:
    return {(_F32,) * arity: _F32, (_F64,) * arity: _F64}


def _with_torch(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[np.ndarray], np.ndarray]:
    """numpy has no erf/erfinv/lgamma: run torch's CPU kernel on the array
    in place of a copy (``from_numpy`` shares the memory)."""
    return lambda x: function(torch.from_numpy(np.ascontiguousarray(x))).numpy()


def _round_half_away(x: np.ndarray) -> np.ndarray:
    # x - trunc(x) is exact, where x + 0.5 would round in the float's precision.
    whole = np.trunc(x)
    return np.where(np.abs(x - whole) >= 0.5, whole + np.sign(x), whole)


def _ilogb(x: np.ndarray) -> np.ndarray:
    # C's ilogb: FP_ILOGB0 / FP_ILOGBNAN are INT_MIN, infinity gives INT_MAX.
    exponent = np.frexp(x)[1].astype(np.int32) - 1
    exponent = np.where((x == 0) | np.isnan(x), np.iinfo(np.int32).min, exponent)
    return np.where(np.isinf(x), np.iinfo(np.int32).max, exponent)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # An integer exponent (libdevice's powi) is exact in the float's type.
    return np.power(x, y.astype(x.dtype))


def _fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    # float32 products are exact in float64, so fp32 rounds once, as an FMA.
    if x.dtype == np.float32:
        return (x.astype(np.float64) * y + z).astype(np.float32)
    return x * y + z


_UNARY: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "exp10": lambda x: np.power(x.dtype.type(10), x),
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "round": _round_half_away,
    "rint": np.rint,
    "nearbyint": np.rint,
    "erf": _with_torch(torch.special.erf),
    "erfc": _with_torch(torch.special.erfc),
    "erfinv": _with_torch(torch.special.erfinv),
    "lgamma": _with_torch(torch.lgamma),
}

_BINARY: Dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "copysign": np.copysign,
    "hypot": np.hypot,
    "nextafter": np.nextafter,
    "fmin": np.fmin,
    "fmax": np.fmax,
}

FUNCTIONS: Dict[str, MathFunction] = {
    **{name: MathFunction(_floats(1), compute) for name, compute in _UNARY.items()},
    **{name: MathFunction(_floats(2), compute) for name, compute in _BINARY.items()},
    "fast_tanhf": MathFunction({(_F32,): _F32}, np.tanh),
    "abs": MathFunction({(_I32,): _I32, (_I64,): _I64, **_floats(1)}, np.abs),
    "isnan": MathFunction({(_F32,): _I32, (_F64,): _I32}, np.isnan, predicate=True),
    "isinf": MathFunction({(_F32,): _I32, (_F64,): _I32}, np.isinf, predicate=True),
    "signbit": MathFunction({(_F32,): _I32, (_F64,): _I32}, np.signbit),
    "ilogb": MathFunction({(_F32,): _I32, (_F64,): _I32}, _ilogb),
    "llrint": MathFunction({(_F32,): _I64, (_F64,): _I64}, np.rint),
    "pow": MathFunction({(_F32, _I32): _F32, (_F64, _I32): _F64, **_floats(2)}, _pow),
    "ldexp": MathFunction({(_F32, _I32): _F32, (_F64, _I32): _F64}, np.ldexp),
    "fma": MathFunction(_floats(3), _fma),
}


def _call(name: str, args: List[object], _semantic: object) -> core.tensor:
    function = FUNCTIONS[name]
    tensors = [_semantic.to_tensor(arg) for arg in args]
    given = tuple(t.dtype for t in tensors)
    if given not in function.signatures:
        accepted = " or ".join("(" + ", ".join(map(str, types)) + ")" for types in function.signatures)
        raise TypeError(
            f"libdevice.{name} takes {accepted}, got ({', '.join(map(str, given))}); "
            "convert the arguments first, e.g. x.to(tl.float32)"
        )
    symbols = {types: (name, result) for types, result in function.signatures.items()}
    result = core.extern_elementwise("mydev", "", tensors, symbols, is_pure=True, _semantic=_semantic)
    return result.to(core.int1, _semantic=_semantic) if function.predicate else result


def _define(name: str, arity: int) -> Callable[..., core.tensor]:
    # Fixed arities: Triton binds builtin calls against the signature.
    if arity == 1:

        def extern(arg0, _semantic=None):
            return _call(name, [arg0], _semantic)
    elif arity == 2:

        def extern(arg0, arg1, _semantic=None):
            return _call(name, [arg0, arg1], _semantic)
    else:

        def extern(arg0, arg1, arg2, _semantic=None):
            return _call(name, [arg0, arg1, arg2], _semantic)

    extern.__name__ = extern.__qualname__ = name
    extern.__module__ = __name__
    return core.extern(extern)


# The module's attributes are the functions kernels call (``abs``, ``pow``
# and ``round`` shadow the builtins from here on).
for _name, _function in FUNCTIONS.items():
    globals()[_name] = _define(_name, len(next(iter(_function.signatures))))
del _name, _function


def evaluate(symbol: str, args: List[np.ndarray], result_dtype: np.dtype) -> np.ndarray:
    """The value of one ``extern_elementwise`` call; the arguments are
    already broadcast to one shape and have the types the signature names."""
    function = FUNCTIONS.get(symbol)
    if function is None:
        raise NotImplementedError(f"libdevice function '{symbol}' is not implemented on mydev")
    return np.asarray(function.compute(*args)).astype(result_dtype, copy=False)
