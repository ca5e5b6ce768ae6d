"""The immutable ``Array``: a backend buffer plus its device (data only: its operators and array methods are
installed by ``flfun/numpy/_array_methods.py``, so this module imports nothing above it).

An Array never changes after it is made: there is no ``__setitem__`` and no in-place operator; use
``x.at[idx].set(v)`` for a functional update. Tracers (values seen inside a transform) subclass Array, so
``isinstance(x, Array)`` and jaxtyping annotations such as ``Float[Array, "batch dim"]`` hold for both.
"""
from __future__ import annotations

import math

import numpy as np


def _converter(kind: type):
    return lambda self: self._scalar(kind)


class Array:
    """An immutable n-dimensional array.

    Example::

        >>> x = flfun.numpy.arange(3.0)
        >>> (x * 2).tolist()
        [0.0, 2.0, 4.0]
    """
    __slots__ = ("_value", "_device")
    __array_priority__ = 100
    __hash__ = None  # arrays are unhashable, like numpy's

    # --- metadata ---------------------------------------------------------------------------------------
    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    device = property(lambda self: self._device)
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d array)")
        return self.shape[0]

    # --- conversion (concrete arrays only; Tracer overrides these with clear errors) ---------------------
    def __array__(self, dtype=None, copy=None):
        v = np.asarray(self._device.to_host(self._value))
        if copy is False and dtype is not None and dtype != v.dtype:    # (np.dtype("float64") == None holds)
            raise ValueError("Array.__array__: a dtype conversion cannot be done without a copy")
        if dtype is not None:
            v = v.astype(dtype)
        elif copy:
            v = v.copy()
        else:
            v = v.view()
            v.flags.writeable = False   # the caller must not be able to mutate our buffer
        return v

    def _exported(self, max_version=(1, 0)):
        """The buffer DLPack exports: on the host a read-only view, or a copy for a consumer older than DLPack 1.0
        (which cannot be told it is read-only), so that nobody writes into an Array."""
        if hasattr(self._value, "__dlpack__") and not isinstance(self._value, np.ndarray):
            return self._value
        return self.__array__(copy=max_version is None or tuple(max_version) < (1, 0))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kwargs = {"max_version": max_version, "stream": stream, "dl_device": dl_device, "copy": copy}
        return self._exported(max_version).__dlpack__(**{k: a for k, a in kwargs.items() if a is not None})

    def __dlpack_device__(self):
        return self._exported().__dlpack_device__()

    def _scalar(self, kind):
        if self.shape != () and self.size != 1:
            raise TypeError(f"only arrays with one element can be converted to Python {kind.__name__}, "
                            f"got shape {self.shape}")
        return kind(self.__array__().reshape(()).item())

    __bool__, __float__, __int__, __complex__ = map(_converter, (bool, float, int, complex))

    def __index__(self):
        if self.dtype.kind not in "iub" or self.shape != ():
            raise TypeError(f"only integer scalar arrays can be converted to an index, got {self.aval_str()}")
        return int(self.__array__())

    def item(self, *args):
        """The value of a one-element array as a Python scalar."""
        return self.__array__().item(*args)

    def tolist(self):
        return self.__array__().tolist()

    def block_until_ready(self) -> "Array":
        self._device.synchronize()
        return self

    def aval_str(self) -> str:
        from flfun.dtypes import short_name
        return f"{short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        body = np.array2string(self.__array__(), separator=", ", prefix="Array(")
        default = self.dtype in (np.dtype("float32"), np.dtype("int64"), np.dtype("bool"))
        return f"Array({body})" if default else f"Array({body}, dtype={self.dtype})"

    def __str__(self) -> str:
        return str(self.__array__())

    def __format__(self, spec):
        return format(self.item(), spec) if self.shape == () else format(str(self), spec)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __setitem__(self, idx, value):
        raise TypeError("flfun arrays are immutable; use x = x.at[idx].set(value) instead of x[idx] = value")
