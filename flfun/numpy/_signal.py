"""Sequences and signals in ``flfun.numpy``: ``convolve``/``correlate`` (one ``conv_general_dilated``),
``interp``, ``trapezoid``, ``gradient``, ``unwrap``, ``ediff1d``, ``cross`` and the window functions (``hanning``,
``hamming``, ``blackman``, ``bartlett``, ``kaiser``; float32 like JAX's, where numpy gives float64)."""
import numpy as np

from flfun import dtypes
from flfun.core import short
from flfun.numpy._asarray import as_array
from flfun.numpy._creation import arange, ones
from flfun.numpy._cumulative import cumsum
from flfun.numpy._elementwise import abs, cos, remainder, sqrt, where
from flfun.numpy._joining import concatenate, diff, flip
from flfun.numpy._math import i0
from flfun.numpy._reductions import sum
from flfun.numpy._shaping import moveaxis, reshape
from flfun.numpy._sorting import argsort, searchsorted
from flfun.numpy._take import take
from flfun.numpy.linalg import cross as _cross3
from flfun.numpy.promotion import promote, to_float
from flfun.primitives.linalg import conv_general_dilated
from flfun.util import canonical_axis

__all__ = ["convolve", "correlate", "interp", "trapezoid", "gradient", "unwrap", "ediff1d", "cross", "hanning",
           "hamming", "blackman", "bartlett", "kaiser"]


def _correlate_full(op: str, a, v):
    """The full cross-correlation ``out[k] = sum_n a[n + k - (len(v) - 1)] * v[n]`` of two 1-d arrays."""
    a, v = promote(op, a, v)
    if a.ndim != 1 or v.ndim != 1 or not a.shape[0] or not v.shape[0]:
        raise ValueError(f"{op}: needs two non-empty 1-d arrays, got {short(a)} and {short(v)}")
    dt = a.dtype
    x, k = (a, v) if dtypes.is_float(dt) else (a.astype(dtypes.float64), v.astype(dtypes.float64))
    m = k.shape[0]
    out = conv_general_dilated(reshape(x, (1, 1, -1)), reshape(k, (1, 1, -1)), (1,), [(m - 1, m - 1)])
    out = reshape(out, (-1,))
    return out if dtypes.is_float(dt) else out.round().astype(dt)


def _mode(op: str, full, n: int, m: int, mode: str):
    if mode == "full":
        return full
    if mode == "same":
        start = (min(n, m) - 1) // 2
        return full[start:start + max(n, m)]
    if mode == "valid":
        return full[min(n, m) - 1:max(n, m)]
    raise ValueError(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """Discrete linear convolution of two 1-d arrays (``mode`` 'full', 'same' or 'valid', as numpy).

    Example::

        >>> fnp.convolve(fnp.asarray([1.0, 2.0, 3.0]), fnp.asarray([0.0, 1.0, 0.5])).tolist()
        [0.0, 1.0, 2.5, 4.0, 1.5]
    """
    a, v = as_array(a), as_array(v)
    return _mode("convolve", _correlate_full("convolve", a, flip(v)), a.shape[0], v.shape[0], mode)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """Cross-correlation ``c[k] = sum_n a[n + k] * v[n]`` of two 1-d arrays (``mode`` as :func:`convolve`)."""
    a, v = as_array(a), as_array(v)
    n, m = a.shape[0], v.shape[0]
    if m > n:   # numpy: the longer array leads, the result reversed
        return flip(_mode("correlate", _correlate_full("correlate", v, a), m, n, mode))
    return _mode("correlate", _correlate_full("correlate", a, v), n, m, mode)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at ``x``; ``left``/``right``
    outside (default: the end values), or ``period`` for periodic ``xp``.

    Example::

        >>> fnp.interp(fnp.asarray([0.5, 2.0]), fnp.asarray([0.0, 1.0]), fnp.asarray([10.0, 20.0])).tolist()
        [15.0, 20.0]
    """
    x, xp, fp = promote("interp", x, xp, fp, to_float=True)
    if xp.ndim != 1 or fp.shape != xp.shape or not xp.shape[0]:
        raise ValueError(f"interp: xp and fp must be 1-d of one non-zero length, got {short(xp)} and {short(fp)}")
    if period is not None:
        x, xp = remainder(x, period), remainder(xp, period)
        order = argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    n = xp.shape[0]
    if n == 1:
        return fp[0] + 0 * x
    i = searchsorted(xp, x, side="right")
    i = where(i < 1, 1, where(i > n - 1, n - 1, i))
    x0, x1, f0, f1 = take(xp, i - 1), take(xp, i), take(fp, i - 1), take(fp, i)
    dx = x1 - x0
    out = f0 + (x - x0) * (f1 - f0) / where(dx == 0, 1.0, dx)
    if period is None:
        out = where(x < xp[0], fp[0] if left is None else left, out)
        out = where(x > xp[-1], fp[-1] if right is None else right, out)
    return out.astype(x.dtype)


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """Integral of ``y`` along ``axis`` by the trapezoidal rule, over the points ``x`` or spacing ``dx``.

    Example::

        >>> fnp.trapezoid(fnp.asarray([1.0, 2.0, 3.0])).tolist()
        4.0
    """
    y = moveaxis(to_float(y), axis, -1)
    if x is None:
        d = dx
    else:
        x = to_float(x)
        d = diff(x) if x.ndim == 1 else moveaxis(diff(x, axis=axis), axis, -1)
    return sum(d * (y[..., 1:] + y[..., :-1]) / 2, axis=-1)


def gradient(f, *varargs, axis=None, edge_order=None):
    """Second-order central differences inside, one-sided first-order ones at the ends, along each axis (or
    ``axis``); spacing per axis from ``varargs`` (a scalar step or the coordinates). One array per axis (a list),
    or one array for a single axis.

    Example::

        >>> fnp.gradient(fnp.asarray([1.0, 2.0, 4.0, 7.0])).tolist()
        [1.0, 1.5, 2.5, 3.0]
    """
    if edge_order not in (None, 1):
        raise NotImplementedError(f"gradient: only edge_order=1 is supported, got {edge_order}")
    f = to_float(f)
    axes = list(range(f.ndim)) if axis is None else [canonical_axis(a, f.ndim, "gradient") for a in (
        axis if isinstance(axis, (tuple, list)) else [axis])]
    spacing = list(varargs) if len(varargs) != 1 else list(varargs) * len(axes)
    if spacing and len(spacing) != len(axes):
        raise TypeError(f"gradient: give one spacing for all axes or one per axis ({len(axes)}), got "
                        f"{len(spacing)}")
    out = []
    for k, ax in enumerate(axes):
        g = moveaxis(f, ax, -1)
        if g.shape[-1] < 2:
            raise ValueError(f"gradient: axis {ax} of {short(f)} needs at least 2 points")
        h = as_array(spacing[k] if spacing else 1.0).astype(f.dtype)
        if h.ndim == 0:
            inner = (g[..., 2:] - g[..., :-2]) / (2 * h)
            first, last = (g[..., 1:2] - g[..., :1]) / h, (g[..., -1:] - g[..., -2:-1]) / h
        else:
            d = diff(h)
            d1, d2 = d[:-1], d[1:]
            inner = (-d2 / (d1 * (d1 + d2)) * g[..., :-2] + (d2 - d1) / (d1 * d2) * g[..., 1:-1]
                     + d1 / (d2 * (d1 + d2)) * g[..., 2:])
            first, last = (g[..., 1:2] - g[..., :1]) / d[0], (g[..., -1:] - g[..., -2:-1]) / d[-1]
        out.append(moveaxis(concatenate([first, inner, last], axis=-1), -1, ax))
    return out[0] if len(out) == 1 else out


def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis`` undone by adding
    multiples of ``period``, as numpy."""
    p = moveaxis(to_float(p), axis, -1)
    dd = diff(p, axis=-1)
    half = period / 2
    ddmod = remainder(dd + half, period) - half
    ddmod = where((ddmod == -half) & (dd > 0), half, ddmod)
    fix = where(abs(dd) < (half if discont is None else max(discont, half)), 0.0, ddmod - dd)
    out = concatenate([p[..., :1], p[..., 1:] + cumsum(fix, axis=-1)], axis=-1)
    return moveaxis(out, -1, axis)


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with ``to_begin``/``to_end`` attached: ``fnp.ediff1d([1, 4, 6])``."""
    d = diff(reshape(as_array(ary), (-1,)))
    begin, end = (d[:0] if t is None else reshape(as_array(t).astype(d.dtype), (-1,)) for t in (to_begin, to_end))
    return concatenate([begin, d, end])


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
    """Cross product of 3-vectors, or the z-component of that of 2-vectors, along the given axes.

    Example::

        >>> fnp.cross(fnp.asarray([1.0, 0.0]), fnp.asarray([0.0, 1.0])).tolist()
        1.0
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = promote("cross", a, b)
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"cross: vectors must have 2 or 3 components, got {short(a)} and {short(b)}")
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    pad = [concatenate([x, x[..., :1] * 0], axis=-1) if x.shape[-1] == 2 else x for x in (a, b)]
    return moveaxis(_cross3(*pad), -1, axisc)


def _window(M: int, op: str, shape):
    """``shape(t)`` at ``t = 2 pi n / (M - 1)`` for the ``M`` points ``n`` (ones for ``M <= 1``)."""
    if not isinstance(M, (int, np.integer)):
        raise TypeError(f"{op}: M must be an int, got {M!r}")
    return shape(arange(M).astype(dtypes.DEFAULT_FLOAT) * (2 * np.pi / (M - 1))) if M > 1 else ones(max(M, 0))


def hanning(M: int):
    """The Hann window of ``M`` points: ``0.5 - 0.5 cos(2 pi n / (M - 1))``."""
    return _window(M, "hanning", lambda t: 0.5 - 0.5 * cos(t))


def hamming(M: int):
    """The Hamming window of ``M`` points: ``0.54 - 0.46 cos(2 pi n / (M - 1))``."""
    return _window(M, "hamming", lambda t: 0.54 - 0.46 * cos(t))


def blackman(M: int):
    """The Blackman window of ``M`` points."""
    return _window(M, "blackman", lambda t: 0.42 - 0.5 * cos(t) + 0.08 * cos(2 * t))


def bartlett(M: int):
    """The Bartlett (triangular) window of ``M`` points."""
    return _window(M, "bartlett", lambda t: 1 - abs(t / np.pi - 1))


def kaiser(M: int, beta):
    """The Kaiser window of ``M`` points with shape ``beta``: ``i0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / i0(beta)``."""
    def shape(t):
        b = to_float(beta)
        t = t.astype(b.dtype) if b.dtype.itemsize > t.dtype.itemsize else t
        b, r = b.astype(t.dtype), t / np.pi - 1
        return i0(b * sqrt(where(1 - r * r > 0, 1 - r * r, 0.0))) / i0(b)
    return _window(M, "kaiser", shape)
