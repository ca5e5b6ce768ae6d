"""Conversion to Arrays for ``flfun.numpy``: asarray, array, copy, from_dlpack, and the argument readers the
rest of the namespace shares (``as_array``, ``ints``, ``flat_axis``, ``matrix_stack``, ``concrete``, ...).

Arrays are immutable, so creation from mutable host data (numpy arrays, lists) copies, and ``fnp.copy`` is the
identity.
"""
import operator

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import ConcretizationError, Tracer, default_device, is_weak, short, wrap
from flfun.primitives import elementwise as lax
from flfun.primitives import shape as lax_shape
from flfun.util import canonical_axis

__all__ = ["asarray", "array", "copy", "from_dlpack"]

PYTHON_SCALARS = (int, float, bool, complex)


# ------------------------------------------------------------------------------------------------------ asarray
def dtype_and_weak(x):
    """``(dtype, weak)`` of an operand: Python scalars are weak, Arrays say whether they are, numpy arrays and
    nested sequences are not; a dtype (for ``result_type`` / ``can_cast``) gives itself."""
    if type(x) in PYTHON_SCALARS:
        return dtypes.scalar_dtype(x), True
    if isinstance(x, Array):
        return x.dtype, is_weak(x)
    if hasattr(x, "dtype") and not isinstance(x, type):
        return dtypes.canonicalize(x.dtype), False
    if isinstance(x, (list, tuple)):
        return asarray(x).dtype, False
    return dtypes.canonicalize(x), False     # a dtype (result_type, can_cast)


def _infer_dtype(obj) -> np.dtype:
    """The dtype of ``obj`` with Python scalars weak: ``[1, 2.5] -> float32``, ``[np.float64(1)] -> float64``."""
    if not isinstance(obj, (list, tuple)):
        return dtype_and_weak(obj)[0]
    pairs = [dtype_and_weak(x) for x in leaves(obj)]
    return dtypes.result_type(*pairs)[0] if pairs else dtypes.DEFAULT_FLOAT


def to_device(x: Array, device) -> Array:
    """``x`` on ``device`` (``x`` itself when ``device`` is None, it is already there, or ``x`` is traced)."""
    if device is None or isinstance(x, Tracer) or x._device is device:
        return x
    return wrap(device.put(x._device.to_host(x._value)), device)


def _stack_nested(obj, dtype):
    """A nested list holding Arrays (or tracers) -> one array, built by stacking (so it works under transforms)."""
    if not isinstance(obj, (list, tuple)):
        x = obj if isinstance(obj, Array) else asarray(obj, dtype)
        return x if x.dtype == dtype else lax.convert_element_type(x, dtype)
    if not obj:
        raise ValueError("asarray: a nested sequence holding arrays cannot contain empty sequences")
    parts = [_stack_nested(o, dtype) for o in obj]
    shape = parts[0].shape
    for p in parts[1:]:
        if p.shape != shape:
            raise ValueError(f"asarray: the nested sequence is ragged: it mixes elements of shape {shape} and "
                             f"{p.shape}")
    return lax_shape.concatenate([lax_shape.reshape(p, (1, *shape)) for p in parts], 0)


def asarray(obj, /, dtype=None, *, device=None, copy: bool | None = None) -> Array:
    """Convert ``obj`` (Array, numpy array, nested sequence, Python scalar, ``__dlpack__`` object) to an Array.

    numpy inputs keep their dtype (float64 stays float64); Python floats become float32 and ints int64, and they
    are weak inside sequences (``[np.float64(1), 2.0]`` is float64). Data from mutable host objects is always
    copied, so later changes to them never reach the Array; therefore ``copy=False`` is only allowed for
    flfun Arrays (and raises ``ValueError`` otherwise, or when a dtype conversion is needed). ``copy=True`` on an
    Array gives a fresh buffer; unlike numpy this is never observable, because Arrays are immutable.

    Example::

        >>> fnp.asarray([1.0, 2.0]).dtype
        dtype('float32')
        >>> fnp.asarray(np.arange(3.0)).dtype
        dtype('float64')
    """
    dt = None if dtype is None else dtypes.canonicalize(dtype)
    if isinstance(obj, Array):
        if dt is not None and obj.dtype != dt:
            if copy is False:
                raise ValueError(f"asarray: copy=False, but converting {short(obj)} to {dt} needs a copy")
            obj = lax.convert_element_type(obj, dt)
        elif copy and not isinstance(obj, Tracer):
            obj = wrap(obj._device.xp.array(obj._value, copy=True), obj._device)
        return to_device(obj, device)
    if copy is False:
        raise ValueError(f"asarray: copy=False is only possible for flfun Arrays; a {type(obj).__name__} is "
                         f"mutable, so flfun must copy it (use copy=None)")
    if isinstance(obj, (list, tuple)) and any(isinstance(e, Array) for e in leaves(obj)):
        return to_device(_stack_nested(obj, dt or _infer_dtype(obj)), device)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (np.ndarray, np.generic)):
        return from_dlpack(obj, device=device) if dt is None else asarray(from_dlpack(obj), dt, device=device)
    dev = device if device is not None else default_device()
    for leaf in leaves(obj):
        if not (type(leaf) in PYTHON_SCALARS or isinstance(leaf, (complex, np.ndarray, np.generic))
                or hasattr(leaf, "__array__") or hasattr(leaf, "__array_interface__")):
            raise TypeError(f"asarray: cannot convert {type(obj).__name__} to an array: {leaf!r:.40} (a "
                            f"{type(leaf).__name__}) is not a number, bool or array, nor a list/tuple of them")
    try:
        host = np.array(obj, dtype=dt or _infer_dtype(obj), copy=True)
    except OverflowError:
        raise OverflowError(f"asarray: {obj!r:.60} is out of range for {dt or _infer_dtype(obj)}") from None
    except (TypeError, ValueError) as e:     # a str or object leaf is not read as a dtype name
        raise type(e)(f"asarray: cannot convert {type(obj).__name__} to an array: {e}") from None
    return wrap(dev.put(host), dev)


def array(obj, dtype=None, *, copy: bool = True, device=None) -> Array:
    """numpy's ``array``: ``asarray`` that copies by default (never observable: Arrays are immutable).

    Example::

        >>> fnp.array([[1, 2], [3, 4]]).shape
        (2, 2)
    """
    return asarray(obj, dtype, device=device, copy=copy)


def copy(x, /) -> Array:
    """numpy's ``copy``. Arrays are immutable, so an Array is returned as it is (other inputs are converted).

    Example::

        >>> y = fnp.copy(x)   # y is x: nothing can change either of them
    """
    return x if isinstance(x, Array) else asarray(x)


def from_dlpack(x, /, *, device=None, copy: bool | None = None) -> Array:
    """An Array from any object with ``__dlpack__`` (numpy, torch, cupy, flfun arrays).

    By default the data is copied, so the producer may be changed later without affecting the Array (flfun
    arrays are immutable). With ``copy=False`` the Array shares the producer's memory (zero-copy): the caller
    then promises not to mutate the producer while the Array is alive.

    Example::

        >>> fnp.from_dlpack(torch.arange(3)).tolist()
        [0, 1, 2]
    """
    if isinstance(x, Array):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise ValueError(f"from_dlpack: x must implement __dlpack__, got {type(x).__name__}")
    dev = device if device is not None else default_device()
    buf = np.from_dlpack(x) if dev.platform == "cpu" else dev.xp.from_dlpack(x)
    dtypes.canonicalize(buf.dtype)
    if copy is not False:
        buf = buf.copy()
    return wrap(buf, dev)


# --------------------------------------------------------------------------------------------- argument readers
def leaves(obj) -> list:
    """The non-sequence elements of a nested list/tuple, in order (``[obj]`` for anything else)."""
    if not isinstance(obj, (list, tuple)):
        return [obj]
    return [leaf for o in obj for leaf in leaves(o)]


def as_array(x) -> Array:
    """``x`` itself if it is an Array (or tracer), else ``asarray(x)``."""
    return x if isinstance(x, Array) else asarray(x)


def ints(v, op: str, what: str = "shape must be an int or a sequence of ints") -> tuple[int, ...]:
    """An int or sequence of ints as a tuple; TypeError naming ``op`` and saying ``what`` was expected."""
    try:
        return (operator.index(v),) if not isinstance(v, (tuple, list)) else tuple(operator.index(d) for d in v)
    except TypeError:
        raise TypeError(f"{op}: {what}, got {v!r}") from None


def flat_axis(x, axis, op: str):
    """``(x, axis)`` with ``axis`` canonical, or the flattened ``x`` and 0 when ``axis`` is None."""
    x = as_array(x)
    return (lax_shape.reshape(x, (x.size,)), 0) if axis is None else (x, canonical_axis(axis, x.ndim, op))


def matrix_stack(x, op: str):
    """``x`` (an array) if it is a stack of matrices, i.e. has at least 2 dimensions; else ValueError."""
    if x.ndim < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions, got {short(x)}")
    return x


def no_out(op: str, out) -> None:
    """NotImplementedError unless ``out`` is None: jax.numpy's ``out=`` parameter, for Arrays that are immutable."""
    if out is not None:
        raise NotImplementedError(f"{op}: out= is not supported (flfun arrays are immutable); use the result")


def concrete(x, op: str) -> np.ndarray:
    """``x`` as a host numpy array; ConcretizationError naming ``op`` if it is traced."""
    if isinstance(x, Tracer):
        raise ConcretizationError(
            f"{op}: the result's shape depends on the values of its input, so {op} needs a concrete array, but "
            f"got a traced {short(x)}; inside a transform use fnp.where(condition, x, y) instead")
    return np.asarray(x)
