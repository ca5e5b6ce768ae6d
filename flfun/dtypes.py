"""Dtypes, type promotion with weak Python scalars, and short names such as ``f32[3,4]``.

flfun uses numpy's dtype objects. Promotion follows the array API standard; where the standard is silent
(integer with float, signed with 64-bit unsigned) flfun keeps the float (``int32 + float32 -> float32``) as JAX
does. Python scalars are *weak*: they take the dtype of the array they meet (``f32 * 2.0 -> f32``).
``bfloat16`` is ml_dtypes' (as in JAX); its numpy kind is ``'V'``, so code asks ``kind(d)``, never ``d.kind``.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

DEFAULT_FLOAT = float32
DEFAULT_INT = int64
DEFAULT_COMPLEX = complex64
SUPPORTED = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64,
             bfloat16, complex64, complex128)
_SHORT = {d: "bool" if d == bool_ else "bf16" if d == bfloat16 else f"{d.kind}{d.itemsize * 8}" for d in SUPPORTED}
LOW_PRECISION = (bfloat16, float16)           # computed in, and accumulated to, float32 where JAX does


_PY_TYPES = {float: DEFAULT_FLOAT, int: DEFAULT_INT, bool: bool_, complex: DEFAULT_COMPLEX}


def canonicalize(dtype) -> np.dtype:
    """The numpy dtype for ``dtype`` ('float32', np.float32, float, ...), or a clear error if unsupported."""
    if isinstance(dtype, type) and dtype in _PY_TYPES:
        return _PY_TYPES[dtype]
    if dtype == "bfloat16":                  # numpy does not know ml_dtypes' names
        return bfloat16
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unsupported dtype {dtype!r}") from None
    if dt not in _SHORT:
        raise TypeError(f"unsupported dtype {dt}; flfun supports {', '.join(str(d) for d in SUPPORTED)}")
    return dt


def short_name(dtype) -> str:
    return _SHORT.get(np.dtype(dtype), str(dtype))


def kind(dtype) -> str:
    """numpy's kind letter, with ``'f'`` for bfloat16 too: ``kind(bfloat16) == 'f'``."""
    dt = np.dtype(dtype)
    return "f" if dt == bfloat16 else dt.kind


def is_float(dtype) -> bool:
    return kind(dtype) == "f"


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_inexact(dtype) -> bool:
    """Floating point or complex: the dtypes that have tangents."""
    return kind(dtype) in "fc"


def real_dtype(dtype) -> np.dtype:
    """The real dtype of a complex one (``complex64 -> float32``); other dtypes are returned as they are."""
    dt = np.dtype(dtype)
    return np.dtype(f"f{dt.itemsize // 2}") if dt.kind == "c" else dt


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype of a float one's precision (``float64 -> complex128``; others: the default complex)."""
    dt = np.dtype(dtype)
    return dt if dt.kind == "c" else complex128 if dt == float64 else DEFAULT_COMPLEX


def is_int(dtype) -> bool:
    """Signed or unsigned integer (not bool)."""
    return np.dtype(dtype).kind in "iu"


def is_unsigned(dtype) -> bool:
    return np.dtype(dtype).kind == "u"


def finfo(dtype):
    return np.finfo(canonicalize(dtype))


def iinfo(dtype):
    return np.iinfo(canonicalize(dtype))


def scalar_dtype(x) -> np.dtype:
    """The dtype a Python scalar gets when it stands alone (the default dtypes)."""
    for kind in (bool, int, float, complex):        # bool first: it is also an int
        if isinstance(x, kind):
            return _PY_TYPES[kind]
    raise TypeError(f"unsupported Python scalar {x!r} of type {type(x).__name__}")


def _promote_strong(a: np.dtype, b: np.dtype) -> np.dtype:
    if "c" in (a.kind, b.kind):                # complex with a float keeps the wider precision
        return complex128 if float64 in (real_dtype(a), real_dtype(b)) else complex64
    if kind(a) == "f" and kind(b) != "f":
        return a                               # integer or bool with float: keep the float (JAX's choice)
    if kind(b) == "f" and kind(a) != "f":
        return b
    if a in LOW_PRECISION or b in LOW_PRECISION:   # bf16 with f16 meet at f32, as in JAX's lattice
        return a if a == b else np.promote_types(float32 if a in LOW_PRECISION else a,
                                                 float32 if b in LOW_PRECISION else b)
    out = np.promote_types(a, b)
    return DEFAULT_FLOAT if out.kind == "f" and a.kind != "f" else out   # int64 with uint64 has no integer home


def result_type(*dtypes_and_weak: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Promote ``(dtype, is_weak)`` pairs; returns the result's ``(dtype, is_weak)``.

    Example: ``result_type((float32, False), (float32, True)) == (float32, False)``.
    """
    strong = [d for d, w in dtypes_and_weak if not w]
    weak = [d for d, w in dtypes_and_weak if w]
    out = functools.reduce(_promote_strong, strong or weak)
    if not strong:
        return out, True
    for d in weak:
        if d.kind == "c" and out.kind != "c":
            out = complex_dtype(out) if kind(out) == "f" else DEFAULT_COMPLEX
        elif d.kind == "f" and kind(out) not in "fc":
            out = DEFAULT_FLOAT
        elif d.kind in "iu" and out.kind == "b":
            out = DEFAULT_INT
    return out, False
