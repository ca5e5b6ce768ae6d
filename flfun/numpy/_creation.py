"""Array creation for ``flfun.numpy``: zeros, ones, full, arange, linspace, eye, meshgrid, tril, ...
(``asarray`` and friends are in ``_asarray.py``).

Default dtypes are float32 and int64; numpy inputs keep their dtype.
"""
import math
import operator
import os

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import is_weak, short
from flfun.numpy._asarray import as_array, asarray, dtype_and_weak, ints, matrix_stack, to_device
from flfun.numpy._elementwise import power
from flfun.numpy._linalg import diagonal
from flfun.numpy.promotion import promote
from flfun.numpy._shaping import moveaxis, ravel
from flfun.primitives import elementwise as lax
from flfun.primitives import shape as lax_shape
from flfun.primitives.base import check_size
from flfun.primitives.rules import broadcast_to_shape

__all__ = ["full", "zeros", "ones", "empty", "full_like", "zeros_like", "ones_like", "empty_like", "arange", "linspace",
           "logspace", "eye", "identity", "meshgrid", "tri", "tril", "triu", "diag", "diagflat"]


# ------------------------------------------------------------------------------------------------------- filled
def _shape(shape, op: str, dtype=None) -> tuple[int, ...]:
    """``shape`` as a tuple of ints; a clear error for negative sizes and, with ``dtype``, for arrays larger than
    this machine's memory (a filled array starts as a broadcast view, whose MemoryError would come later)."""
    out = ints(shape, op)
    if any(d < 0 for d in out):
        raise ValueError(f"{op}: negative dimensions are not allowed, got shape {out}")
    nbytes = math.prod(out) * (np.dtype(dtype).itemsize if dtype is not None else 0)
    if nbytes > _MEMORY:
        raise MemoryError(f"{op}: an array of shape {out} and dtype {np.dtype(dtype)} needs {nbytes / 2**30:.3g} "
                          f"GiB, more than this machine's {_MEMORY / 2**30:.3g} GiB of memory")
    check_size(op, out)
    return out


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 2 ** 62


_MEMORY = _physical_memory()


def full(shape, fill_value, dtype=None, *, device=None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (dtype inferred from it by default).

    Example::

        >>> fnp.full((2, 2), 7).tolist()
        [[7, 7], [7, 7]]
    """
    return _full(shape, fill_value, dtype, device, "full")


def _full(shape, fill_value, dtype, device, op: str) -> Array:
    if np.ndim(fill_value) != 0:
        raise ValueError(f"{op}: fill_value must be a scalar, got shape {np.shape(fill_value)}")
    if dtype is None:
        dtype = dtype_and_weak(fill_value)[0] if op == "full" else dtypes.DEFAULT_FLOAT
    shape = _shape(shape, op, dtypes.canonicalize(dtype))
    return to_device(lax_shape.full(shape, fill_value, dtype), device)


def zeros(shape, dtype=None, *, device=None) -> Array:
    """An array of zeros (float32 by default).

    Example::

        >>> fnp.zeros((2, 3)).shape
        (2, 3)
    """
    return _full(shape, 0, dtype, device, "zeros")


def ones(shape, dtype=None, *, device=None) -> Array:
    """An array of ones (float32 by default).

    Example::

        >>> fnp.ones(3).tolist()
        [1.0, 1.0, 1.0]
    """
    return _full(shape, 1, dtype, device, "ones")


def empty(shape, dtype=None, *, device=None) -> Array:
    """Zeros: an immutable array has no use for uninitialised memory.

    Example::

        >>> fnp.empty(2).tolist()
        [0.0, 0.0]
    """
    return _full(shape, 0, dtype, device, "empty")


def full_like(x, /, fill_value, dtype=None, shape=None, *, device=None) -> Array:
    """``fill_value`` with ``x``'s shape (or ``shape``) and dtype.

    Example::

        >>> fnp.full_like(fnp.zeros(2), 3.0).tolist()
        [3.0, 3.0]
    """
    x = x if hasattr(x, "shape") and hasattr(x, "dtype") else asarray(x)
    return full(x.shape if shape is None else shape, fill_value, x.dtype if dtype is None else dtype, device=device)


def zeros_like(x, /, dtype=None, shape=None, *, device=None) -> Array:
    """Zeros with ``x``'s shape and dtype: ``fnp.zeros_like(x)``."""
    return full_like(x, 0, dtype, shape, device=device)


def ones_like(x, /, dtype=None, shape=None, *, device=None) -> Array:
    """Ones with ``x``'s shape and dtype: ``fnp.ones_like(x)``."""
    return full_like(x, 1, dtype, shape, device=device)


def empty_like(x, /, dtype=None, shape=None, *, device=None) -> Array:
    """Zeros with ``x``'s shape and dtype (see ``empty``): ``fnp.empty_like(x)``."""
    return full_like(x, 0, dtype, shape, device=device)


# ------------------------------------------------------------------------------------------------------- ranges
def _static(v, op: str, name: str):
    """A Python number from a number or a concrete 0-d array (traced values raise ConcretizationError)."""
    if isinstance(v, (Array, np.ndarray, np.generic)):
        if np.ndim(v) != 0:
            raise ValueError(f"{op}: {name} must be a scalar, got shape {np.shape(v)}")
        return v.item()
    if not isinstance(v, (int, float)):
        raise TypeError(f"{op}: {name} must be a real number, got {type(v).__name__}")
    return v


def arange(start, /, stop=None, step=1, dtype=None, *, device=None) -> Array:
    """Evenly spaced values in ``[start, stop)``; float and negative steps work like numpy's.

    Example::

        >>> fnp.arange(3).tolist()
        [0, 1, 2]
        >>> fnp.arange(1.0, 0.0, -0.25).tolist()
        [1.0, 0.75, 0.5, 0.25]
    """
    start = _static(start, "arange", "start")
    stop = None if stop is None else _static(stop, "arange", "stop")
    step = _static(step, "arange", "step")
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    floats = any(isinstance(v, float) for v in (start, stop, step))
    if dtype is None:
        dtype = dtypes.DEFAULT_FLOAT if floats else dtypes.DEFAULT_INT
    dtype = dtypes.canonicalize(dtype)
    n = max(math.ceil((stop - start) / step), 0)
    check_size("arange", (n,))
    work = dtype if dtypes.is_float(dtype) else dtypes.float64 if floats else dtypes.DEFAULT_INT
    out = lax_shape.iota(work, (n,), 0)
    if step != 1:
        out = lax.mul(out, lax_shape.full((), step, work))
    if start != 0:
        out = lax.add(out, lax_shape.full((), start, work))
    if dtypes.is_int(dtype) and dtypes.is_float(work):
        out = lax.floor(out)
    return to_device(out if out.dtype == dtype else lax.convert_element_type(out, dtype), device)


def _float_operands(op, *xs, dtype=None):
    exact = dtype is not None and dtypes.is_float(dtype)      # Python numbers straight to the requested dtype
    arrs = promote(op, *[asarray(x, dtype if exact and type(x) in (int, float) else None)
                         if isinstance(x, (list, tuple, int, float)) else x for x in xs], to_float=True)
    if dtype is not None and dtypes.is_float(dtype):
        arrs = [a if a.dtype == dtype else lax.convert_element_type(a, dtype) for a in arrs]
    elif dtype is not None:   # integer results are computed in float64 and floored, as numpy does
        arrs = [lax.convert_element_type(a, dtypes.float64) for a in arrs]
    return [lax.convert_element_type(a, a.dtype) if is_weak(a) else a for a in arrs]


def linspace(start, stop, /, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None, axis: int = 0,
             *, device=None):
    """``num`` evenly spaced samples from ``start`` to ``stop`` (inclusive unless ``endpoint=False``).

    ``start``/``stop`` may be arrays (or traced values: linspace is differentiable in them); the samples then
    run along ``axis``. With ``retstep`` the spacing is returned too.

    Example::

        >>> fnp.linspace(0.0, 1.0, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    check_size("linspace", (num,))
    dt = None if dtype is None else dtypes.canonicalize(dtype)
    a, b = _float_operands("linspace", start, stop, dtype=dt)
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    out_shape = (num, *shape)
    div = num - 1 if endpoint else num
    delta = lax.sub(b, a)
    step = lax.div(delta, lax_shape.full((), div, a.dtype)) if div > 0 else lax_shape.full(shape, np.nan, a.dtype)
    increment = broadcast_to_shape(step if div > 0 else delta, out_shape)
    out = lax.add(broadcast_to_shape(a, out_shape), lax.mul(lax_shape.iota(a.dtype, out_shape, 0), increment))
    if endpoint and num > 1:
        last = lax.eq(lax_shape.iota(dtypes.DEFAULT_INT, out_shape, 0), lax_shape.full((), num - 1, "int64"))
        out = lax.select(last, broadcast_to_shape(b, out_shape), out)
    if axis != 0:
        out = moveaxis(out, 0, axis)
    if dt is not None and dtypes.is_int(dt):
        out = lax.convert_element_type(lax.floor(out), dt)
    out = to_device(out, device)
    return (out, step) if retstep else out


def logspace(start, stop, /, num: int = 50, endpoint: bool = True, base: float = 10.0, dtype=None, axis: int = 0,
             *, device=None) -> Array:
    """``base ** linspace(start, stop, num)``.

    Example::

        >>> fnp.logspace(0.0, 2.0, 3).tolist()
        [1.0, 10.0, 100.0]
    """
    dt = None if dtype is None else dtypes.canonicalize(dtype)
    work = dt if dt is not None and dtypes.is_float(dt) else None
    y = linspace(start, stop, num, endpoint=endpoint, axis=axis, dtype=work, device=device)
    out = power(base, y) if type(base) in (int, float) else power(*_float_operands("logspace", base, y))
    if dt is not None and dt != out.dtype:
        out = lax.convert_element_type(lax.floor(out) if dtypes.is_int(dt) else out, dt)
    return out


# ----------------------------------------------------------------------------------------------------- matrices
def _diag_mask(n: int, m: int, k: int, cmp):
    """``cmp(i + k, j)`` over an ``n x m`` grid: ``eq`` marks the ``k``-th diagonal, ``ge`` / ``le`` a triangle."""
    rows = lax_shape.iota(dtypes.DEFAULT_INT, (n, m), 0)
    cols = lax_shape.iota(dtypes.DEFAULT_INT, (n, m), 1)
    return cmp(lax.add(rows, lax_shape.full((), k, dtypes.DEFAULT_INT)) if k else rows, cols)


def _mask_array(mask, dtype, device) -> Array:
    dt = dtypes.DEFAULT_FLOAT if dtype is None else dtypes.canonicalize(dtype)
    return to_device(lax.convert_element_type(mask, dt), device)


def eye(n_rows: int, n_cols: int | None = None, /, k: int = 0, dtype=None, *, device=None) -> Array:
    """A ``n_rows x n_cols`` matrix with ones on the ``k``-th diagonal (float32 by default).

    Example::

        >>> fnp.eye(2, 3, k=1).tolist()
        [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    n, m = _shape((n_rows, n_rows if n_cols is None else n_cols), "eye")
    return _mask_array(_diag_mask(n, m, operator.index(k), lax.eq), dtype, device)


def identity(n: int, dtype=None, *, device=None) -> Array:
    """The ``n x n`` identity matrix: ``fnp.identity(3)``."""
    return eye(n, dtype=dtype, device=device)


def tri(N: int, M: int | None = None, k: int = 0, dtype=None, *, device=None) -> Array:
    """Ones at and below the ``k``-th diagonal: ``tri[i, j] = j <= i + k``.

    Example::

        >>> fnp.tri(2, dtype="int32").tolist()
        [[1, 0], [1, 1]]
    """
    n, m = _shape((N, N if M is None else M), "tri")
    return _mask_array(_diag_mask(n, m, operator.index(k), lax.ge), dtype, device)


def _masked(x, k, cmp, op: str):
    x = matrix_stack(as_array(x), op)
    mask = _diag_mask(x.shape[-2], x.shape[-1], operator.index(k), cmp)
    return lax.select(mask, x, lax_shape.full((), 0, x.dtype))


def tril(x, /, k: int = 0) -> Array:
    """``x`` with the elements above the ``k``-th diagonal of its last two axes set to zero.

    Example::

        >>> fnp.tril(fnp.ones((2, 2))).tolist()
        [[1.0, 0.0], [1.0, 1.0]]
    """
    return _masked(x, k, lax.ge, "tril")


def triu(x, /, k: int = 0) -> Array:
    """``x`` with the elements below the ``k``-th diagonal of its last two axes set to zero.

    Example::

        >>> fnp.triu(fnp.ones((2, 2))).tolist()
        [[1.0, 1.0], [0.0, 1.0]]
    """
    return _masked(x, k, lax.le, "triu")


def diag(v, /, k: int = 0) -> Array:
    """A 2-D array with the 1-D ``v`` on its ``k``-th diagonal, or the ``k``-th diagonal of a 2-D ``v``.

    Example::

        >>> fnp.diag(fnp.asarray([1, 2])).tolist()
        [[1, 0], [0, 2]]
    """
    v = as_array(v)
    k = operator.index(k)
    if v.ndim == 1:
        n = v.shape[0] + abs(k)
        padded = lax_shape.pad(v, lax_shape.full((), 0, v.dtype), [(0, abs(k), 0)])
        spread = lax_shape.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
        return lax.select(_diag_mask(n, n, k, lax.eq), spread, lax_shape.full((), 0, v.dtype))
    if v.ndim != 2:
        raise ValueError(f"diag: v must be 1-D or 2-D, got {short(v)}")
    return diagonal(v, k)


def diagflat(v, /, k: int = 0) -> Array:
    """A 2-D array with the flattened ``v`` on its ``k``-th diagonal: ``fnp.diagflat(fnp.ones((2, 2)))``."""
    return diag(ravel(v), k)


def meshgrid(*arrays, indexing: str = "xy", sparse: bool = False) -> list[Array]:
    """Coordinate grids from 1-D coordinate arrays (``indexing='xy'``: Cartesian, ``'ij'``: matrix).

    Example::

        >>> X, Y = fnp.meshgrid(fnp.arange(3), fnp.arange(2))
        >>> X.shape
        (2, 3)
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [ravel(a) for a in arrays]
    shape = [x.shape[0] for x in xs]
    dims = list(range(len(xs)))
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
        dims[0], dims[1] = 1, 0
    return [lax_shape.reshape(x, tuple(s if i == d else 1 for i, s in enumerate(shape))) if sparse
            else lax_shape.broadcast_in_dim(x, tuple(shape), (d,)) for x, d in zip(xs, dims)]
