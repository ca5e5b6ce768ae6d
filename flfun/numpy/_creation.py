"""Array creation for ``flfun.numpy``: asarray, zeros, ones, full, arange, ... (default dtypes float32/int64)."""
from __future__ import annotations

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import Tracer, default_device, to_array, wrap
from flfun.primitives import shape as lax_shape
from flfun.primitives.elementwise import convert_element_type


def _default_dtype_for(value) -> np.dtype:
    """numpy's inferred dtype, with Python floats and ints mapped to flfun's defaults."""
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        return dtypes.DEFAULT_FLOAT
    if arr.dtype.kind == "i" and not isinstance(value, (np.ndarray, np.generic)):
        return dtypes.DEFAULT_INT
    return dtypes.canonicalize(arr.dtype)


def asarray(obj, /, dtype=None, *, device=None, copy=None) -> Array:
    """Convert ``obj`` (Array, numpy array, nested lists, Python scalar) to an Array.

    numpy inputs keep their dtype (float64 stays float64); Python floats become float32 and ints int64.
    The data is always copied from numpy inputs, so later changes to them do not reach the Array.

    Example::

        >>> fnp.asarray([1.0, 2.0]).dtype
        dtype('float32')
    """
    if isinstance(obj, Array):
        if isinstance(obj, Tracer):
            return obj if dtype is None or obj.dtype == dtypes.canonicalize(dtype) \
                else convert_element_type(obj, dtype)
        out = obj if dtype is None or obj.dtype == dtypes.canonicalize(dtype) else convert_element_type(obj, dtype)
        if device is not None and out.device is not device:
            from flfun.devices import device_put
            out = device_put(out, device)
        return out
    if isinstance(obj, (list, tuple)) and any(isinstance(e, Array) for e in _flat(obj)):
        from flfun.numpy import stack
        return asarray(stack([asarray(e) for e in obj]), dtype=dtype)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (np.ndarray, np.generic)):
        obj = np.from_dlpack(obj)
    dt = dtypes.canonicalize(dtype) if dtype is not None else _default_dtype_for(obj)
    dev = device if device is not None else default_device()
    return wrap(dev.put(np.array(obj, dtype=dt, copy=True)), dev)


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def array(obj, dtype=None, *, copy=True, device=None) -> Array:
    """Like ``asarray`` (flfun arrays are immutable, so copying is never observable)."""
    return asarray(obj, dtype=dtype, device=device)


def full(shape, fill_value, dtype=None, *, device=None) -> Array:
    """An array of ``shape`` filled with ``fill_value``: ``fnp.full((2, 2), 7)``."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dtype is None:
        dtype = fill_value.dtype if hasattr(fill_value, "dtype") else dtypes.scalar_dtype(fill_value)
    return lax_shape.full(shape, fill_value, dtype)


def zeros(shape, dtype=None, *, device=None) -> Array:
    """An array of zeros (float32 by default): ``fnp.zeros((2, 3))``."""
    return full(shape, 0, dtypes.DEFAULT_FLOAT if dtype is None else dtype)


def ones(shape, dtype=None, *, device=None) -> Array:
    """An array of ones (float32 by default): ``fnp.ones(3)``."""
    return full(shape, 1, dtypes.DEFAULT_FLOAT if dtype is None else dtype)


def empty(shape, dtype=None, *, device=None) -> Array:
    """Like ``zeros``: an immutable array has no use for uninitialised memory."""
    return zeros(shape, dtype)


def zeros_like(x, /, dtype=None, *, device=None) -> Array:
    """Zeros with ``x``'s shape and dtype."""
    return full(x.shape, 0, x.dtype if dtype is None else dtype)


def ones_like(x, /, dtype=None, *, device=None) -> Array:
    """Ones with ``x``'s shape and dtype."""
    return full(x.shape, 1, x.dtype if dtype is None else dtype)


def empty_like(x, /, dtype=None, *, device=None) -> Array:
    """Zeros with ``x``'s shape and dtype."""
    return zeros_like(x, dtype=dtype)


def full_like(x, /, fill_value, dtype=None, *, device=None) -> Array:
    """``fill_value`` with ``x``'s shape and dtype."""
    return full(x.shape, fill_value, x.dtype if dtype is None else dtype)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Array:
    """Evenly spaced values in ``[start, stop)``: ``fnp.arange(3) -> [0, 1, 2]``."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    values = (start, stop, step)
    if dtype is None:
        dtype = dtypes.DEFAULT_FLOAT if any(isinstance(v, float) for v in values) else dtypes.DEFAULT_INT
    dtype = dtypes.canonicalize(dtype)
    n = max(int(np.ceil((stop - start) / step)), 0)
    idx = lax_shape.iota(dtypes.DEFAULT_INT if dtypes.is_int(dtype) else dtype, (n,), 0)
    out = idx if start == 0 and step == 1 else (idx * step + start)
    return out if out.dtype == dtype else convert_element_type(out, dtype)


del to_array
