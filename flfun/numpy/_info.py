"""The array API inspection namespace: ``flfun.numpy.__array_namespace_info__()`` tells array-API consumers which
capabilities, devices and dtypes flfun has."""
from flfun import dtypes
from flfun.numpy._dtype_functions import KINDS, isdtype

__all__ = ["__array_namespace_info__"]

_STANDARD = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
             "complex64", "complex128")
_ALL = {dt.name: dt for dt in dtypes.SUPPORTED if dt.name in _STANDARD}   # float16 works too, outside the standard


class Info:
    """What flfun's array namespace supports (the array API 2024.12 inspection API)."""

    def capabilities(self) -> dict:
        """Optional features. Boolean indexing and data-dependent shapes (``nonzero``, ``unique``, ``x[mask]``)
        work on concrete arrays only: under jit/vmap/grad their output shape is unknown, and they raise.

        Example::

            >>> fnp.__array_namespace_info__().capabilities()["max dimensions"] is None
            True
        """
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}

    def default_device(self):
        """The device new arrays are placed on: ``info.default_device()`` -> ``cpu:0``."""
        from flfun.core import default_device
        return default_device()

    def devices(self) -> list:
        """All devices flfun can use: the CPU devices, plus GPUs when cupy is installed.

        Example::

            >>> fnp.__array_namespace_info__().devices()[0].platform
            'cpu'
        """
        from flfun.backends import get_backend
        from flfun.config import config
        out = list(get_backend(config.default_backend).devices)
        for name in ("numpy", "cupy"):     # the default backend's devices come first, once
            try:
                out += [d for d in get_backend(name).devices if d not in out]
            except Exception:  # cupy missing or no GPU: its devices simply aren't available
                continue
        return out

    def default_dtypes(self, *, device=None) -> dict:
        """Default dtypes: float32 for real floating, complex64 for complex, int64 for integral and indexing.

        Example::

            >>> fnp.__array_namespace_info__().default_dtypes()["real floating"]
            dtype('float32')
        """
        return {"real floating": dtypes.DEFAULT_FLOAT, "complex floating": dtypes.DEFAULT_COMPLEX,
                "integral": dtypes.DEFAULT_INT, "indexing": dtypes.DEFAULT_INT}

    def dtypes(self, *, device=None, kind=None) -> dict:
        """Supported dtypes by name, optionally only those of ``kind`` (a kind name, a dtype, or a tuple).

        Example::

            >>> sorted(fnp.__array_namespace_info__().dtypes(kind="real floating"))
            ['float16', 'float32', 'float64']
        """
        if kind is None:
            return dict(_ALL)
        if isinstance(kind, str) and kind not in KINDS:
            raise ValueError(f"dtypes: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        return {name: dt for name, dt in _ALL.items() if isdtype(dt, kind)}

    def __repr__(self):
        return "flfun.numpy.__array_namespace_info__()"


def __array_namespace_info__() -> Info:
    """The array API inspection object: ``fnp.__array_namespace_info__().default_dtypes()``."""
    return Info()
