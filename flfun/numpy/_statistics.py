"""Order statistics, covariance, histograms and the remaining nan-ignoring reductions of ``flfun.numpy``: sorting
and indexing compositions, so they differentiate (through the values picked), vmap and jit. Histograms and
``bincount`` count by a scatter-add, so their bin count must be static under jit (``length=`` for bincount)."""
import builtins

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import Tracer, short
from flfun.numpy._asarray import as_array, concrete, no_out
from flfun.numpy._creation import linspace, ones, zeros
from flfun.numpy._cumulative import cumprod, cumsum
from flfun.numpy._elementwise import ceil, floor, isnan, logical_not, round, sqrt, where
from flfun.numpy._joining import concatenate, diff, stack
from flfun.numpy._linalg import diagonal, matmul
from flfun.numpy._reductions import any, argmax, argmin, all as all_, fill_nan, max, min, nanmean, sum
from flfun.numpy._shaping import expand_dims, moveaxis, reshape
from flfun.numpy._sorting import searchsorted, sort
from flfun.numpy._take import take_along_axis
from flfun.numpy.promotion import asarray_like, promote, to_float
from flfun.util import canonical_axes

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian", "nanvar", "nanstd",
           "nanargmax", "nanargmin", "nancumsum", "nancumprod", "cov", "corrcoef", "bincount", "digitize",
           "histogram_bin_edges", "histogram", "histogram2d", "histogramdd"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile(op: str, a, q, axis, out, method: str, keepdims: bool, nan_aware: bool, scale: float = 1.0):
    no_out(op, out)
    if method not in _METHODS:
        raise ValueError(f"{op}: method must be one of {_METHODS}, got {method!r}")
    a = to_float(a)
    q = (q.astype(a.dtype) if isinstance(q, Array) else as_array(np.asarray(q, a.dtype))) / scale
    if not isinstance(q, Tracer) and (np.any(np.asarray(q) < 0) or np.any(np.asarray(q) > 1)):
        raise ValueError(f"{op}: q must be in [0, {scale:g}], got {np.asarray(q) * scale}")
    axes = tuple(range(a.ndim)) if axis is None else canonical_axes(axis, a.ndim, op)
    rest = [d for d in range(a.ndim) if d not in axes]
    x = reshape(moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim))),
                tuple(a.shape[d] for d in rest) + (-1,))
    s = sort(x, axis=-1)                                           # NaN sorts last
    n = sum(logical_not(isnan(x)), axis=-1, keepdims=True).astype(a.dtype) if nan_aware else float(x.shape[-1])
    pos = reshape(q, (1,) * len(rest) + (q.size,)) * (n - 1)
    lo, hi = floor(pos), ceil(pos)
    pick = {"lower": lo, "higher": hi, "nearest": round(pos), "linear": lo, "midpoint": lo}[method]

    def at(p):
        p = where(p > n - 1, n - 1, p)
        return take_along_axis(s, where(p < 0, 0, p).astype(dtypes.int64), axis=-1)
    out = at(pick)
    if method in ("linear", "midpoint"):
        t = pos - lo if method == "linear" else 0.5 * (hi > lo)
        out = out + t * (at(hi) - out)
    bad = n == 0 if nan_aware else any(isnan(x), axis=-1, keepdims=True)
    out = moveaxis(where(bad, np.nan, out), -1, 0)
    out = reshape(out, q.shape + out.shape[1:])
    if keepdims:
        out = expand_dims(out, tuple(q.ndim + d for d in axes))
    return out


def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False):
    """The ``q``-th quantiles (``q`` in [0, 1], any shape: it leads the result's shape) over ``axis`` (None, an
    int or a tuple), interpolated by ``method`` as numpy does; NaN where the slice holds a NaN.

    Example::

        >>> fnp.quantile(fnp.asarray([1.0, 2.0, 3.0, 4.0]), 0.5).tolist()
        2.5
    """
    return _quantile("quantile", a, q, axis, out, method, keepdims, False)


def percentile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False):
    """:func:`quantile` with ``q`` in percent: ``fnp.percentile(x, 50) == fnp.median(x)``."""
    return _quantile("percentile", a, q, axis, out, method, keepdims, False, 100.0)


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median over ``axis`` (the mean of the two middle values for an even count): ``fnp.median(x)``."""
    return _quantile("median", a, 0.5, axis, out, "linear", keepdims, False)


def nanquantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False):
    """:func:`quantile` of the non-NaN elements (NaN for an all-NaN slice)."""
    return _quantile("nanquantile", a, q, axis, out, method, keepdims, True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False):
    """:func:`percentile` of the non-NaN elements."""
    return _quantile("nanpercentile", a, q, axis, out, method, keepdims, True, 100.0)


def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """:func:`median` of the non-NaN elements: ``fnp.nanmedian(fnp.asarray([1.0, fnp.nan, 3.0])) == 2.0``."""
    return _quantile("nanmedian", a, 0.5, axis, out, "linear", keepdims, True)


def nanvar(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False):
    """Variance of the non-NaN elements, dividing by ``count - ddof``: ``fnp.nanvar(x, ddof=1)``."""
    no_out("nanvar", out)
    a = to_float(a if dtype is None else as_array(a).astype(dtype))
    ok = logical_not(isnan(a))
    dev = where(ok, a - nanmean(a, axis=axis, keepdims=True), 0.0)
    count = sum(ok, axis=axis, keepdims=keepdims).astype(a.dtype)
    return sum(dev * dev, axis=axis, keepdims=keepdims) / where(count > ddof, count - ddof, 0.0)


def nanstd(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False):
    """Standard deviation of the non-NaN elements: ``sqrt(nanvar(...))``."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims))


def _nanarg(fn, fill, a, axis, out, keepdims):
    no_out("nan" + fn.__name__, out)
    a = asarray_like(a)
    res = fn(fill_nan(a, fill), axis, keepdims=keepdims)
    return where(all_(isnan(a), axis, keepdims=keepdims), -1, res) if dtypes.is_float(a.dtype) else res


def nanargmax(a, axis=None, out=None, keepdims: bool = False):
    """:func:`argmax` ignoring NaN; -1 for an all-NaN slice (as JAX; numpy raises)."""
    return _nanarg(argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims: bool = False):
    """:func:`argmin` ignoring NaN; -1 for an all-NaN slice (as JAX; numpy raises)."""
    return _nanarg(argmin, np.inf, a, axis, out, keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    """:func:`cumsum` treating NaN as zero: ``fnp.nancumsum(fnp.asarray([1.0, fnp.nan, 2.0])) -> [1, 1, 3]``."""
    return cumsum(fill_nan(a, 0), axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """:func:`cumprod` treating NaN as one."""
    return cumprod(fill_nan(a, 1), axis, dtype, out)


def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof=None, fweights=None, aweights=None, dtype=None):
    """Covariance matrix of the variables in the rows of ``m`` (columns with ``rowvar=False``), with numpy's
    ``y``, ``bias``, ``ddof``, ``fweights`` and ``aweights``, computed in ``dtype`` if given; a single variable
    gives a 0-d result.

    Example::

        >>> fnp.cov(fnp.asarray([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    x = to_float(m if dtype is None else as_array(m).astype(dtype))
    if x.ndim > 2:
        raise ValueError(f"cov: m must be at most 2-d, got {short(x)}")
    def rows(v):
        return reshape(v, (1, -1)) if v.ndim < 2 else (v if rowvar else v.T)
    x = rows(x) if y is None else concatenate(promote("cov", rows(x), rows(to_float(y))), axis=0)
    w = ones(x.shape[1], x.dtype)
    for weights, name in ((fweights, "fweights"), (aweights, "aweights")):
        if weights is not None:
            weights = as_array(weights)
            if weights.shape != (x.shape[1],):
                raise ValueError(f"cov: {name} must have shape ({x.shape[1]},), got {short(weights)}")
            w = w * weights
    ddof = (0 if bias else 1) if ddof is None else ddof
    w_sum = sum(w)
    fact = w_sum - ddof if aweights is None else w_sum - ddof * sum(w * as_array(aweights)) / w_sum
    xc = x - sum(x * w, axis=1, keepdims=True) / w_sum
    c = matmul(xc * w, xc.T) / fact
    return reshape(c, ()) if c.shape == (1, 1) else c


def corrcoef(x, y=None, rowvar: bool = True, dtype=None):
    """Pearson correlation coefficients (``cov`` normalised by the standard deviations, clipped to [-1, 1])."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = sqrt(diagonal(c))
    c = c / d[:, None] / d[None, :]
    return where(c > 1, 1.0, where(c < -1, -1.0, c))


def bincount(x, weights=None, minlength: int = 0, *, length: int | None = None):
    """Counts (or summed ``weights``) of each non-negative integer in the 1-d ``x``. Without ``length`` the
    result has ``max(x) + 1`` (at least ``minlength``) entries, so ``x`` must be concrete; under jit pass
    ``length`` (values beyond it are dropped, as in JAX).

    Example::

        >>> fnp.bincount(fnp.asarray([0, 1, 1, 3])).tolist()
        [1, 2, 0, 1]
    """
    x = as_array(x)
    if x.ndim != 1 or not dtypes.is_int(x.dtype) and x.dtype != dtypes.bool_:
        raise TypeError(f"bincount: x must be a 1-d integer array, got {short(x)}")
    if length is None:
        host = concrete(x, "bincount")
        if host.size and host.min() < 0:
            raise ValueError(f"bincount: x must be non-negative, got minimum {host.min()}")
        length = int(np.maximum(minlength, host.max() + 1 if host.size else 0))
    w = 1 if weights is None else as_array(weights)
    dtype = dtypes.int64 if weights is None else w.dtype
    return zeros(length, dtype).at[where(x < 0, length, x)].add(w, mode="drop")


def digitize(x, bins, right: bool = False):
    """The index of the bin of ``bins`` (1-d, increasing or decreasing) each element of ``x`` falls in, as numpy.

    Example::

        >>> fnp.digitize(fnp.asarray([0.5, 1.0, 2.5]), fnp.asarray([1.0, 2.0, 3.0])).tolist()
        [0, 1, 2]
    """
    x, b = promote("digitize", x, bins)
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got {short(b)}")
    up = searchsorted(b, x, side="left" if right else "right")
    down = b.shape[0] - searchsorted(b[::-1], x, side="left" if right else "right")
    return where(b[0] <= b[-1], up, down) if b.shape[0] else up


def _edges(op: str, a, bins, range):
    if not isinstance(bins, (int, np.integer)):
        edges = to_float(bins)
        if edges.ndim != 1:
            raise ValueError(f"{op}: bins must be an int or a 1-d array of edges, got {short(edges)}")
        return edges
    if bins < 1:
        raise ValueError(f"{op}: bins must be positive, got {bins}")
    lo, hi = (min(a), max(a)) if range is None else (asarray_like(range[0]), asarray_like(range[1]))
    lo, hi = where(lo == hi, lo - 0.5, lo), where(lo == hi, hi + 0.5, hi)
    return linspace(lo.astype(a.dtype), hi.astype(a.dtype), bins + 1)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges :func:`histogram` uses: ``bins + 1`` evenly spaced over ``range`` (default: the data's)."""
    return _edges("histogram_bin_edges", reshape(to_float(a), (-1,)), bins, range)


def _bin_index(x, edges):
    """Bin of each value (the last bin holds its right edge); -1 outside the edges."""
    i = searchsorted(edges, x, side="right") - 1
    nb = edges.shape[0] - 1
    i = where(x == edges[-1], nb - 1, i)
    return where((i < 0) | (i >= nb), -1, i)


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The D-dimensional histogram of the ``(N, D)`` ``sample``: ``(counts, [edges per dimension])``.

    Example::

        >>> fnp.histogramdd(fnp.asarray([[0.0, 0.0], [1.0, 1.0]]), bins=2)[0].tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    s = to_float(sample)
    s = reshape(s, (-1, 1)) if s.ndim == 1 else s
    if s.ndim != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got {short(s)}")
    d = s.shape[1]
    bins = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = list(range) if range is not None else [None] * d
    if len(bins) != d or len(ranges) != d:
        raise ValueError(f"histogramdd: need one bins and range entry per dimension ({d}), got {len(bins)} and "
                         f"{len(ranges)}")
    edges = [_edges("histogramdd", s[:, k], bins[k], ranges[k]) for k in builtins.range(d)]
    sizes = tuple(e.shape[0] - 1 for e in edges)
    flat, outside = 0, False
    for k, e in enumerate(edges):
        i = _bin_index(s[:, k], e)
        flat, outside = flat * sizes[k] + i, outside | (i < 0)
    w = s[:, 0] * 0 + 1 if weights is None else to_float(weights)
    n = int(np.prod(sizes))
    counts = zeros(n, w.dtype).at[where(outside, n, flat)].add(w, mode="drop")      # n: past the end, dropped
    counts = reshape(counts, sizes)
    if density:
        volume = 1
        for k, e in enumerate(edges):
            volume = expand_dims(volume, -1) * reshape(diff(e), (1,) * k + (-1,)) if k else diff(e)
        counts = counts / sum(counts) / volume
    return counts, edges


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts of the flattened ``a`` in ``bins`` (an int: evenly spaced over ``range``, or the edges), and the
    edges; ``density`` normalises to a probability density. Values outside the edges are not counted.

    Example::

        >>> fnp.histogram(fnp.asarray([0.0, 0.5, 1.0, 3.0]), bins=3)[0].tolist()
        [2.0, 1.0, 1.0]
    """
    a = reshape(to_float(a), (-1,))
    w = None if weights is None else reshape(to_float(weights), (-1,))
    counts, (edges,) = histogramdd(reshape(a, (-1, 1)), [bins], None if range is None else [range], w, density)
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """The 2-d histogram of points ``(x, y)``: ``(counts, x_edges, y_edges)``."""
    counts, (ex, ey) = histogramdd(stack(promote("histogram2d", x, y, to_float=True), axis=1),
                                   bins if isinstance(bins, (list, tuple)) else [bins, bins], range, weights,
                                   density)
    return counts, ex, ey
