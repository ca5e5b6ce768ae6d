"""``flfun.numpy.fft``: the array API's fft extension (numpy.fft's functions with ``n``/``s``, ``axis``/``axes`` and
``norm``), built on the one ``fft`` primitive (``flfun/primitives/fft.py``), so they work under grad, vmap and jit.

Inputs are resized to ``n`` along an axis (cropped, or padded with zeros), the axes are moved last for the
primitive and back. Real input to ``fft``/``ifft``/``fftn``/``ifftn``/``hfft`` is converted to complex; results
keep their input's precision (float32 -> complex64).
"""
import math

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.numpy._asarray import asarray
from flfun.numpy._joining import roll
from flfun.numpy._shaping import moveaxis
from flfun.numpy.promotion import asarray_like
from flfun.primitives import elementwise as lax, slicing
from flfun.primitives.fft import fft as fft_prim
from flfun.util import canonical_axis

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]
_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _as(x, kind: str, op: str):
    """``x`` as a complex (``kind="c"``) or real floating (``"f"``) array of its precision."""
    x = asarray_like(x)
    if kind == "c":
        return x if x.dtype.kind == "c" else lax.convert_element_type(x, dtypes.complex_dtype(
            x.dtype if x.dtype.kind == "f" else dtypes.DEFAULT_FLOAT))
    if x.dtype.kind == "c":
        raise TypeError(f"{op}: requires a real floating-point input, got {x.dtype}")
    return x if x.dtype.kind == "f" else lax.convert_element_type(x, dtypes.DEFAULT_FLOAT)


def _resize(x, axis: int, n: int):
    """``x`` cropped or zero-padded to length ``n`` along ``axis``."""
    cfg = [(0, 0, 0)] * x.ndim
    cfg[axis] = (0, n - x.shape[axis], 0)
    return x if n == x.shape[axis] else slicing.pad(x, lax.full((), 0, x.dtype), cfg)


def _axes_and_sizes(op: str, x, s, axes, one: bool, halved: bool):
    """Canonical distinct ``axes`` and their output ``sizes`` (``s`` or the input's, or for the ``halved`` input of
    an inverse real transform ``2 * (m - 1)`` along the last axis), as the standard reads them."""
    if one:
        axes, s = (axes,), (None if s is None else (s,))
    elif axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(canonical_axis(a, x.ndim, op) for a in axes)
    if len(set(axes)) != len(axes) or not axes:
        raise ValueError(f"{op}: axes must be distinct and not empty, got {axes}")
    if s is None and halved:
        s = (None,) * (len(axes) - 1) + (2 * (x.shape[axes[-1]] - 1),)
    if s is not None and (len(s) != len(axes) or any(n is not None and int(n) < 1 for n in s)):
        raise ValueError(f"{op}: s (or n) must give one positive size per axis, got {s} for axes {axes}")
    sizes = tuple(x.shape[a] if s is None or s[i] in (None, -1) else int(s[i]) for i, a in enumerate(axes))
    return axes, sizes


def _checked(op: str, norm: str) -> str:
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be one of {', '.join(_NORMS)}, got {norm!r}")
    return norm


def _scale(x, norm: str, n: int, inverse: bool, op: str):
    """Apply ``norm`` to an unnormalised forward (or ``1/n``-scaled inverse) transform over ``n`` points."""
    norm = _checked(op, norm)
    factor = {"backward": 1.0, "ortho": 1 / math.sqrt(n), "forward": 1 / n}[_SWAP[norm] if inverse else norm]
    factor = factor * n if inverse else factor         # (the primitive's inverses are scaled by 1/n already)
    if factor == 1.0:
        return x
    part = dtypes.real_dtype(x.dtype)
    return lax.mul(x, lax.full((), factor, x.dtype)) if x.dtype.kind != "c" else \
        lax.complex(lax.mul(lax.real(x), lax.full((), factor, part)), lax.mul(lax.imag(x), lax.full((), factor, part)))


def _transform(op: str, x, s, axes, norm, fft_type: str, one: bool):
    x = _as(x, "f" if fft_type == "rfft" else "c", op)
    axes, sizes = _axes_and_sizes(op, x, s, axes, one, fft_type == "irfft")
    for a, n in zip(axes, sizes):
        n_in = n // 2 + 1 if fft_type == "irfft" and a == axes[-1] else n
        x = _resize(x, a, n_in)
    k = len(axes)
    last = tuple(range(x.ndim - k, x.ndim))
    out = moveaxis(fft_prim(moveaxis(x, axes, last), fft_type, sizes), last, axes)
    return _scale(out, norm, math.prod(sizes), fft_type in ("ifft", "irfft"), op)


def fft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """One-dimensional discrete Fourier transform along ``axis`` (``n``: crop or zero-pad to ``n`` points).

    Example::

        >>> fnp.fft.fft(fnp.asarray([1.0, 0.0, 0.0, 0.0])).tolist()
        [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    return _transform("fft", x, n, axis, norm, "fft", True)


def ifft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """Inverse of ``fft``: ``fnp.fft.ifft(fnp.fft.fft(x))`` is ``x`` (as complex)."""
    return _transform("ifft", x, n, axis, norm, "ifft", True)


def fftn(x, /, *, s=None, axes=None, norm: str = "backward") -> Array:
    """n-dimensional ``fft`` over ``axes`` (all, or the last ``len(s)``): ``fnp.fft.fftn(x, axes=(0, 1))``."""
    return _transform("fftn", x, s, axes, norm, "fft", False)


def ifftn(x, /, *, s=None, axes=None, norm: str = "backward") -> Array:
    """Inverse of ``fftn``: ``fnp.fft.ifftn(fnp.fft.fftn(x))`` is ``x`` (as complex)."""
    return _transform("ifftn", x, s, axes, norm, "ifft", False)


def rfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """``fft`` of real input, keeping the ``n // 2 + 1`` non-negative frequencies: ``fnp.fft.rfft(x).shape``."""
    return _transform("rfft", x, n, axis, norm, "rfft", True)


def irfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """Inverse of ``rfft``: ``n`` real points (default ``2 * (m - 1)`` for ``m`` input frequencies)."""
    return _transform("irfft", x, n, axis, norm, "irfft", True)


def rfftn(x, /, *, s=None, axes=None, norm: str = "backward") -> Array:
    """n-dimensional ``rfft`` (the last of ``axes`` is halved): ``fnp.fft.rfftn(x, axes=(0, 1))``."""
    return _transform("rfftn", x, s, axes, norm, "rfft", False)


def irfftn(x, /, *, s=None, axes=None, norm: str = "backward") -> Array:
    """Inverse of ``rfftn``; the last axis gives ``2 * (m - 1)`` points unless ``s`` says otherwise."""
    return _transform("irfftn", x, s, axes, norm, "irfft", False)


def hfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The real spectrum of a signal with Hermitian symmetry given by its first half ``x`` (numpy's ``hfft``)."""
    return irfft(lax.conj(_as(x, "c", "hfft")), n=n, axis=axis, norm=_SWAP[_checked("hfft", norm)])


def ihfft(x, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """Inverse of ``hfft`` for real input: ``conj(rfft(x))`` with the inverse's norm."""
    return lax.conj(rfft(x, n=n, axis=axis, norm=_SWAP[_checked("ihfft", norm)]))


def _freq_dtype(dtype):
    dt = dtypes.DEFAULT_FLOAT if dtype is None else dtypes.canonicalize(dtype)
    if dt.kind != "f":
        raise TypeError(f"fftfreq: dtype must be a real floating-point dtype, got {dt}")
    return dt


def fftfreq(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> Array:
    """The sample frequencies of an ``n``-point ``fft`` with spacing ``d``: ``fnp.fft.fftfreq(4) -> [0, .25, -.5,
    -.25]``."""
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)]) / (n * d)
    return asarray(k.astype(_freq_dtype(dtype)), device=device)


def rfftfreq(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> Array:
    """The sample frequencies of an ``n``-point ``rfft``: ``fnp.fft.rfftfreq(4) -> [0, .25, .5]``."""
    return asarray((np.arange(n // 2 + 1) / (n * d)).astype(_freq_dtype(dtype)), device=device)


def _shift(op: str, x, axes, sign: int):
    x = asarray_like(x)
    axes = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    axes = tuple(canonical_axis(a, x.ndim, op) for a in axes)
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), axes) if axes else x


def fftshift(x, /, *, axes=None) -> Array:
    """The zero frequency moved to the centre along ``axes`` (all by default): ``fnp.fft.fftshift(freqs)``."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, /, *, axes=None) -> Array:
    """Inverse of ``fftshift``: ``fnp.fft.ifftshift(fnp.fft.fftshift(x))`` is ``x``."""
    return _shift("ifftshift", x, axes, -1)
