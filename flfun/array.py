"""The immutable ``Array``: a backend buffer plus its device. Operators forward to ``flfun.numpy``.

An Array never changes after it is made: there is no ``__setitem__`` and no in-place operator; use
``x.at[idx].set(v)`` for a functional update. Tracers (values seen inside a transform) subclass Array, so
``isinstance(x, Array)`` and jaxtyping annotations such as ``Float[Array, "batch dim"]`` hold for both.
"""
from __future__ import annotations

import functools
import math

import numpy as np


@functools.cache
def _fnp():
    """flfun.numpy, imported on first use (it imports this module)."""
    import flfun.numpy as ns
    return ns


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
    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def device(self):
        return self._device

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

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
        return self.__array__(copy=max_version is None)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kwargs = {"max_version": max_version, "stream": stream}
        return self._exported(max_version).__dlpack__(**{k: a for k, a in kwargs.items() if a is not None})

    def __dlpack_device__(self):
        return self._exported().__dlpack_device__()

    def _scalar(self, kind):
        if self.shape != () and self.size != 1:
            raise TypeError(f"only arrays with one element can be converted to Python {kind.__name__}, "
                            f"got shape {self.shape}")
        return kind(self.__array__().reshape(()).item())

    def __bool__(self):
        return self._scalar(bool)

    def __float__(self):
        return self._scalar(float)

    def __int__(self):
        return self._scalar(int)

    def __complex__(self):
        return self._scalar(complex)

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

    def __reduce__(self):
        return (_unpickle, (self.__array__(copy=True), self._device.backend, self._device.id))

    def __array_namespace__(self, *, api_version=None):
        return _fnp()

    def to_device(self, device, /, *, stream=None):
        from flfun.devices import device_put
        return device_put(self, device)

    # --- methods that forward to flfun.numpy --------------------------------------------------------------
    @property
    def T(self):
        return _fnp().transpose(self)

    @property
    def mT(self):
        return _fnp().matrix_transpose(self)

    @property
    def at(self):
        return _fnp().IndexUpdateHelper(self)

    def astype(self, dtype, copy=True):
        return _fnp().astype(self, dtype)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return _fnp().reshape(self, shape)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
        return _fnp().transpose(self, axes)

    def __getitem__(self, idx):
        return _fnp().getitem(self, idx)


def _unpickle(value: np.ndarray, backend: str, device_id: int) -> Array:
    """A pickled Array, back on its device (on the default device where this process has no such device)."""
    from flfun.backends import get_backend
    from flfun.core import default_device, wrap
    try:
        devices = get_backend(backend).devices
    except RuntimeError:        # the backend cannot run here (e.g. cupy without a GPU)
        devices = []
    device = devices[device_id] if device_id < len(devices) else default_device()
    return wrap(device.put(value), device)


def _forward(name, reflected=False):
    def method(self, *args, **kwargs):
        fn = getattr(_fnp(), name)
        return fn(args[0], self) if reflected else fn(self, *args, **kwargs)
    method.__name__ = name
    return method


def _forward_axis(name):
    def method(self, axis=None, **kwargs):
        return getattr(_fnp(), name)(self, axis=axis, **kwargs)
    method.__name__ = name
    method.__doc__ = f"``flfun.numpy.{name}(self, axis=axis, ...)`` (``axis`` may be passed positionally)."
    return method


for _name in ("sum", "mean", "max", "min", "prod", "std", "var", "any", "all", "argmax", "argmin", "cumsum",
              "cumprod"):
    setattr(Array, _name, _forward_axis(_name))

for _name in ("clip", "round", "squeeze", "flatten", "ravel", "dot", "conj", "sort", "argsort", "nonzero", "repeat",
              "take", "swapaxes", "trace", "diagonal"):
    setattr(Array, _name, _forward(_name))

# The arithmetic and comparison operators are bound by flfun/numpy/__init__.py, straight to the namespace's
# functions (the C fast path included); only these two are forwarded from here.
for _op in ("matmul", "divmod"):
    setattr(Array, f"__{_op}__", _forward(_op))
    setattr(Array, f"__r{_op}__", _forward(_op, reflected=True))
