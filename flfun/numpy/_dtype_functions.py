"""Data type functions and array inspection for ``flfun.numpy``: astype, result_type, can_cast, isdtype, finfo,
iinfo, size, ndim, shape.
"""
import builtins
from typing import NamedTuple

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import is_weak
from flfun.numpy._asarray import as_array, asarray, dtype_and_weak
from flfun.primitives import elementwise as lax
from flfun.util import canonical_axis, prod

__all__ = ["astype", "result_type", "can_cast", "isdtype", "finfo", "iinfo", "size", "ndim", "shape"]


# ------------------------------------------------------------------------------------------------------- dtypes
def astype(x, dtype, /, *, copy: bool = True, device=None) -> Array:
    """``x`` converted to ``dtype``. ``copy`` is accepted; an Array of the right dtype is returned as it is.

    Example::

        >>> fnp.astype(fnp.asarray([1.7, -1.7]), "int32").tolist()
        [1, -1]
    """
    x = as_array(x)
    dt = dtypes.canonicalize(dtype)
    out = x if x.dtype == dt and not is_weak(x) else lax.convert_element_type(x, dt)
    return out if device is None else asarray(out, device=device)


def result_type(*arrays_and_dtypes) -> np.dtype:
    """The dtype that combining the arguments gives (Python scalars are weak: they defer to arrays).

    Example::

        >>> fnp.result_type(fnp.int8, fnp.uint8), fnp.result_type(fnp.ones(2, "int32"), 1.0)
        (dtype('int16'), dtype('float32'))
    """
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    return dtypes.result_type(*[dtype_and_weak(a) for a in arrays_and_dtypes])[0]


def can_cast(from_, to, /, casting: str = "safe") -> bool:
    """Whether ``from_`` (a dtype or array) casts to ``to`` under numpy's ``casting`` rule (by default 'safe':
    without losing information).

    Example::

        >>> fnp.can_cast(fnp.int8, fnp.float32), fnp.can_cast(fnp.float64, fnp.float32)
        (True, False)
    """
    src = dtype_and_weak(from_)[0]
    return bool(np.can_cast(src, dtypes.canonicalize(to), casting=casting))


KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu", "real floating": "f",
          "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, an array-API kind name ('bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric') or a tuple of those.

    Example::

        >>> fnp.isdtype(fnp.float32, ("integral", "real floating"))
        True
    """
    dt = np.dtype(dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {', '.join(KINDS)} or a dtype")
        return dtypes.kind(dt) in KINDS[kind]
    return dt == dtypes.canonicalize(kind)


class FInfo(NamedTuple):
    """The array API's ``finfo`` object: Python floats, and the real dtype (float32 for complex64)."""
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


def finfo(type, /) -> FInfo:
    """Machine limits of a floating-point or complex dtype or array: ``fnp.finfo(fnp.float32).eps``."""
    fi = dtypes.finfo(type.dtype if hasattr(type, "dtype") else type)
    return FInfo(int(fi.bits), float(fi.eps), float(fi.max), float(fi.min), float(fi.smallest_normal), fi.dtype)


def iinfo(type, /):
    """numpy's ``iinfo`` for an integer dtype or array: ``fnp.iinfo(fnp.int8).max == 127``."""
    return dtypes.iinfo(type.dtype if hasattr(type, "dtype") else type)


# --------------------------------------------------------------------------------------------------- inspection
def size(a, axis: int | None = None) -> int:
    """Number of elements (along ``axis`` if given): ``fnp.size(fnp.ones((2, 3))) == 6``."""
    s = np.shape(a) if not hasattr(a, "shape") else tuple(a.shape)
    return prod(s) if axis is None else s[canonical_axis(axis, len(s), "size")]


def ndim(a) -> int:
    """Number of dimensions: ``fnp.ndim(fnp.ones((2, 3))) == 2``."""
    return len(a.shape) if hasattr(a, "shape") else np.ndim(a)


def shape(a) -> tuple[int, ...]:
    """The shape of an array or nested sequence: ``fnp.shape([[1, 2]]) == (1, 2)``."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)
