"""``Array``'s operators and array methods, installed from the namespace that implements them.

``flfun.array`` holds data only; ``flfun/numpy/__init__.py`` calls ``install(namespace)`` once it is complete.
The arithmetic and comparison dunders are bound straight to the namespace's functions (one call less on the eager
path that benchmark W1 measures); the named methods look their function up on every call, so they follow the
namespace (``x.sum()`` is ``flfun.numpy.sum(x)``).
"""
import numpy as np

from flfun.array import Array
from flfun.backends import get_backend
from flfun.core import default_device, wrap
from flfun.distributed.devices import device_put

METHODS = ("sum", "mean", "max", "min", "prod", "std", "var", "any", "all", "argmax", "argmin", "cumsum", "cumprod",
           "clip", "round", "squeeze", "flatten", "ravel", "dot", "conj", "sort", "argsort", "nonzero", "repeat",
           "take", "swapaxes", "trace", "diagonal")
BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "floordiv": "floor_divide",
          "mod": "remainder", "pow": "power", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
          "lshift": "left_shift", "rshift": "right_shift"}
OTHER_OPERATORS = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "neg": "negative",
                   "pos": "positive", "abs": "abs", "invert": "invert"}


def unpickle(value: np.ndarray, backend: str, device_id: int) -> Array:
    """A pickled Array, back on its device (on the default device where this process has no such device)."""
    try:
        devices = get_backend(backend).devices
    except RuntimeError:        # the backend cannot run here (e.g. cupy without a GPU)
        devices = []
    device = devices[device_id] if device_id < len(devices) else default_device()
    return wrap(device.put(value), device)


def _forward(ns, name, reflected=False):
    def method(self, *args, **kwargs):
        fn = getattr(ns, name)
        return fn(args[0], self) if reflected else fn(self, *args, **kwargs)
    method.__name__ = name
    return method


def _reflected(fn):
    return lambda self, other: fn(other, self)


def _unless_none(compare):
    """``x == None`` is False and ``x != None`` True, as in jax: None is no array (Python's identity fallback)."""
    def method(self, other):
        return NotImplemented if other is None else compare(self, other)
    return method


def _methods(ns) -> dict:
    """The methods that are not plain forwards, as functions of the namespace ``ns``."""
    def astype(self, dtype, copy=True):
        return ns.astype(self, dtype)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return ns.reshape(self, shape)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None)
        return ns.transpose(self, axes)

    def __getitem__(self, idx):
        return ns.getitem(self, idx)

    def __array_namespace__(self, *, api_version=None):
        return ns

    def to_device(self, device, /, *, stream=None):
        return device_put(self, device)

    def __reduce__(self):
        return (unpickle, (self.__array__(copy=True), self._device.backend, self._device.id))

    return {"astype": astype, "reshape": reshape, "transpose": transpose, "__getitem__": __getitem__,
            "__array_namespace__": __array_namespace__, "to_device": to_device, "__reduce__": __reduce__,
            "T": property(lambda self: ns.transpose(self)), "mT": property(lambda self: ns.matrix_transpose(self)),
            "real": property(lambda self: ns.real(self)), "imag": property(lambda self: ns.imag(self)),
            "at": property(lambda self: ns.IndexUpdateHelper(self)),
            "__eq__": _unless_none(ns.equal), "__ne__": _unless_none(ns.not_equal)}


def install(ns) -> None:
    """Give ``Array`` its operators and methods from namespace ``ns`` (the ``flfun.numpy`` module).

    Example::

        install(flfun.numpy)        # done once by flfun/numpy/__init__.py
        assert (fnp.ones(2) + 1).tolist() == [2.0, 2.0]
    """
    for name in METHODS:
        setattr(Array, name, _forward(ns, name))
    for op in ("matmul", "divmod"):
        setattr(Array, f"__{op}__", _forward(ns, op))
        setattr(Array, f"__r{op}__", _forward(ns, op, reflected=True))
    for op, name in BINARY.items():
        setattr(Array, f"__{op}__", getattr(ns, name))
        setattr(Array, f"__r{op}__", _reflected(getattr(ns, name)))
    for op, name in OTHER_OPERATORS.items():
        setattr(Array, f"__{op}__", getattr(ns, name))
    for name, method in _methods(ns).items():
        setattr(Array, name, method)


__all__ = ["install", "unpickle"]
