"""Array manipulation beyond the array API: ``pad``, ``block``, ``insert``/``delete``/``append``, ``resize``,
``rot90``, ``fliplr``/``flipud``, ``rollaxis``, ``hsplit``/``vsplit``/``dsplit``, ``packbits``/``unpackbits`` and
``geomspace``. Positions (pad widths, inserted or deleted indices) must be concrete: the result's shape depends
on them; the values may be traced. Index maps are built by numpy on the host and applied with one ``take``."""
import builtins

import numpy as np

from flfun import dtypes
from flfun.core import Tracer, short
from flfun.numpy._asarray import as_array, concrete, flat_axis
from flfun.numpy._creation import arange, full, logspace, zeros
from flfun.numpy._elementwise import abs, bitwise_and, log10, right_shift, round, sign
from flfun.numpy._joining import concatenate, flip, split
from flfun.numpy._reductions import max, mean, min, sum
from flfun.numpy._shaping import broadcast_to, moveaxis, reshape, swapaxes
from flfun.numpy._statistics import median
from flfun.numpy._take import take
from flfun.numpy.promotion import asarray_like, promote
from flfun.util import canonical_axis

__all__ = ["pad", "block", "insert", "delete", "append", "resize", "rot90", "fliplr", "flipud", "rollaxis",
           "hsplit", "vsplit", "dsplit", "packbits", "unpackbits", "geomspace"]

_INDEX_MODES = ("edge", "wrap", "reflect", "symmetric")
_STAT_MODES = {"maximum": max, "minimum": min, "mean": mean, "median": median}


def _pairs(op: str, value, ndim: int, what: str):
    """``value`` as one ``(before, after)`` pair per dimension, numpy-style."""
    try:
        return np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"{op}: {what} {value!r} does not give one (before, after) pair per dimension of "
                         f"{ndim}") from None


def pad(array, pad_width, mode="constant", **kwargs):
    """``array`` padded by ``pad_width`` (an int, a pair, or a pair per axis) in numpy's modes 'constant'
    (``constant_values``), 'edge', 'wrap', 'reflect', 'symmetric', 'linear_ramp' (``end_values``), 'maximum',
    'minimum', 'mean', 'median' (``stat_length``) and 'empty' (zeros).

    Example::

        >>> fnp.pad(fnp.asarray([1, 2, 3]), (2, 1), mode="reflect").tolist()
        [3, 2, 1, 2, 3, 2]
    """
    x = as_array(array)
    if isinstance(pad_width, Tracer):
        raise TypeError("pad: pad_width must be concrete (it sets the result's shape)")
    widths = [[int(w) for w in p] for p in _pairs("pad", pad_width, x.ndim, "pad_width")]
    if any(w < 0 for p in widths for w in p):
        raise ValueError(f"pad: pad_width must be non-negative, got {pad_width!r}")
    if kwargs.get("reflect_type", "even") != "even" or callable(mode):
        raise NotImplementedError("pad: reflect_type='odd' and callable modes are not supported")
    known = ("constant", "empty", "linear_ramp") + _INDEX_MODES + tuple(_STAT_MODES)
    if mode not in known:
        raise ValueError(f"pad: mode must be one of {known}, got {mode!r}")
    values = _pairs("pad", kwargs.get("constant_values", 0), x.ndim, "constant_values") \
        if not isinstance(kwargs.get("constant_values"), Tracer) else [[kwargs["constant_values"]] * 2] * x.ndim
    ends = _pairs("pad", kwargs.get("end_values", 0), x.ndim, "end_values")
    stat = _pairs("pad", kwargs.get("stat_length", None), x.ndim, "stat_length")
    for ax, (b, a) in enumerate(widths):
        if not (b or a):
            continue
        y = moveaxis(x, ax, 0)
        n = y.shape[0]
        if mode in _INDEX_MODES:
            if not n:
                raise ValueError(f"pad: mode {mode!r} cannot pad the empty axis {ax} of {short(x)}")
            y = take(y, np.pad(np.arange(n), (b, a), mode=mode), axis=0)
        else:
            rest = y.shape[1:]
            if mode in ("constant", "empty"):
                lo, hi = (full((w,) + rest, 0 if mode == "empty" else v, x.dtype) for w, v in zip((b, a), values[ax]))
            elif mode == "linear_ramp":
                lo, hi = (_ramp(edge, end, w, rest, x.dtype) for edge, end, w in (
                    (y[:1], ends[ax][0], b), (y[-1:], ends[ax][1], a)))
                hi = flip(hi, axis=0)
            else:
                fn = _STAT_MODES[mode]
                lb, la = (n if s is None else builtins.max(1, builtins.min(int(s), n)) for s in stat[ax])
                lo, hi = (broadcast_to(_stat(fn, part, x.dtype), (w,) + rest) for part, w in ((y[:lb], b), (y[n - la:], a)))
            y = concatenate([lo, y, hi], axis=0)
        x = moveaxis(y, 0, ax)
    return x


def _ramp(edge, end, width, rest, dtype):
    t = arange(width).astype(dtype if dtypes.is_float(dtype) else dtypes.DEFAULT_FLOAT) / builtins.max(width, 1)
    t = reshape(t, (width,) + (1,) * len(rest))
    out = end + (edge - end) * t
    return (round(out) if dtypes.is_int(dtype) else out).astype(dtype)


def _stat(fn, part, dtype):
    out = fn(part, axis=0, keepdims=True)
    return (round(out) if dtypes.is_int(dtype) else out).astype(dtype)


def block(arrays):
    """Assemble an array from nested lists of blocks: the innermost lists join along the last axis, the next
    along the one before, and so on (blocks are promoted to the needed rank first).

    Example::

        >>> fnp.block([[fnp.ones((2, 2)), fnp.zeros((2, 1))]]).shape
        (2, 3)
    """
    def depth(a):
        if isinstance(a, tuple):
            raise TypeError("block: nest blocks in lists, not tuples (as numpy)")
        return 1 + depth(a[0]) if isinstance(a, list) and a else 0

    def leaves(a):
        return [y for b in a for y in leaves(b)] if isinstance(a, list) else [as_array(a)]
    d = depth(arrays)
    nd = builtins.max([d] + [leaf.ndim for leaf in leaves(arrays)])

    def join(a, level):
        if isinstance(a, list):
            return concatenate(promote("block", *[join(b, level + 1) for b in a]), axis=level - d)
        a = as_array(a)
        return reshape(a, (1,) * (nd - a.ndim) + a.shape)
    return join(arrays, 0)


def delete(arr, obj, axis=None, *, assume_unique_indices: bool = False):
    """``arr`` without the entries ``obj`` (an int, slice or index array, concrete) along ``axis`` (None:
    flattened): ``fnp.delete(x, [0, 2])``."""
    x, ax = flat_axis(arr, axis, "delete")
    keep = np.ones(x.shape[ax], bool)
    keep[obj if isinstance(obj, slice) else concrete(obj, "delete")] = False
    return take(x, np.flatnonzero(keep), axis=ax)


def insert(arr, obj, values, axis=None):
    """``arr`` with ``values`` inserted before the index or indices ``obj`` (concrete) along ``axis`` (None:
    flattened), as numpy.

    Example::

        >>> fnp.insert(fnp.asarray([1, 2, 3]), 1, 9).tolist()
        [1, 9, 2, 3]
    """
    x, ax = flat_axis(arr, axis, "insert")
    n = x.shape[ax]
    where_ = np.arange(n)[obj] if isinstance(obj, slice) else concrete(obj, "insert")
    v = asarray_like(values).astype(x.dtype)
    if where_.ndim == 0:
        v = moveaxis(reshape(v, (1,) * (x.ndim - v.ndim) + v.shape), 0, ax) if v.ndim <= x.ndim else v
        k = v.shape[ax]
        where_ = np.full(k, int(where_))
    k = where_.size
    v = broadcast_to(v, x.shape[:ax] + (k,) + x.shape[ax + 1:])
    marker = np.insert(np.arange(n), where_, -1 - np.arange(k))
    return take(concatenate([x, v], axis=ax), np.where(marker >= 0, marker, n - 1 - marker), axis=ax)


def append(arr, values, axis=None):
    """``arr`` followed by ``values`` along ``axis`` (both flattened when None): ``fnp.append(x, 1.0)``."""
    return concatenate(promote("append", arr, values), axis=axis)


def resize(a, new_shape):
    """An array of ``new_shape`` filled with ``a``'s elements repeated cyclically (zeros if ``a`` is empty)."""
    x = reshape(as_array(a), (-1,))
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else tuple(int(d) for d in new_shape)
    size = int(np.prod(shape))
    if not x.shape[0]:
        return zeros(shape, x.dtype)
    return reshape(take(x, np.arange(size) % x.shape[0]), shape)


def rot90(m, k: int = 1, axes=(0, 1)):
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first toward the second)."""
    m = as_array(m)
    a0, a1 = (canonical_axis(a, m.ndim, "rot90") for a in axes)
    if a0 == a1:
        raise ValueError(f"rot90: axes must differ, got {axes}")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, axis=a0), axis=a1)
    return swapaxes(flip(m, axis=a1), a0, a1) if k == 1 else flip(swapaxes(m, a0, a1), axis=a1)


def _at_least(op: str, x, n: int):
    x = as_array(x)
    if x.ndim < n:
        raise ValueError(f"{op}: needs at least {n} dimension{'s' * (n > 1)}, got {short(x)}")
    return x


def fliplr(m):
    """``m`` reversed along axis 1."""
    return flip(_at_least("fliplr", m, 2), axis=1)


def flipud(m):
    """``m`` reversed along axis 0."""
    return flip(_at_least("flipud", m, 1), axis=0)


def rollaxis(a, axis: int, start: int = 0):
    """numpy's older :func:`moveaxis`: ``axis`` moves to before position ``start``."""
    a = as_array(a)
    axis = canonical_axis(axis, a.ndim, "rollaxis")
    start = start + a.ndim if start < 0 else start
    if not 0 <= start <= a.ndim:
        raise ValueError(f"rollaxis: start {start} out of range for {short(a)}")
    return moveaxis(a, axis, start - 1 if start > axis else start)


def hsplit(ary, indices_or_sections):
    """:func:`split` along axis 1 (axis 0 for 1-d arrays)."""
    x = _at_least("hsplit", ary, 1)
    return split(x, indices_or_sections, axis=1 if x.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """:func:`split` along axis 0 (at least 2-d)."""
    return split(_at_least("vsplit", ary, 2), indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    """:func:`split` along axis 2 (at least 3-d)."""
    return split(_at_least("dsplit", ary, 3), indices_or_sections, axis=2)


def _bit_order(op: str, bitorder: str):
    """The bit positions, most significant first for 'big'."""
    if bitorder not in ("big", "little"):
        raise ValueError(f"{op}: bitorder must be 'big' or 'little', got {bitorder!r}")
    return np.arange(8)[::-1] if bitorder == "big" else np.arange(8)


def packbits(a, axis=None, bitorder: str = "big"):
    """Pack the truth of each element into the bits of uint8 (8 per byte, the last padded with 0) along ``axis``
    (None: flattened). Example: ``fnp.packbits(fnp.asarray([1, 0, 1])) -> [160]``."""
    bits = _bit_order("packbits", bitorder)
    x, ax = flat_axis(a, axis, "packbits")
    if x.dtype.kind not in "iub":
        raise TypeError(f"packbits: needs integer or bool input, got {x.dtype}")
    x = moveaxis((x != 0).astype(dtypes.uint8), ax, -1)
    n = x.shape[-1]
    x = pad(x, [(0, 0)] * (x.ndim - 1) + [(0, -n % 8)])
    x = reshape(x, x.shape[:-1] + (-1, 8))
    return moveaxis(sum(x * as_array((1 << bits).astype(np.uint8)), axis=-1, dtype=dtypes.uint8), -1, ax)


def unpackbits(a, axis=None, count=None, bitorder: str = "big"):
    """The bits of a uint8 array as uint8 0/1 values along ``axis`` (None: flattened), 8 per byte; ``count``
    keeps that many (negative: drops that many from the end)."""
    shifts = as_array(_bit_order("unpackbits", bitorder).astype(np.uint8))
    x, ax = flat_axis(a, axis, "unpackbits")
    if x.dtype != dtypes.uint8:
        raise TypeError(f"unpackbits: needs a uint8 array, got {x.dtype}")
    x = moveaxis(x, ax, -1)
    bits = reshape(bitwise_and(right_shift(x[..., None], shifts), 1), x.shape[:-1] + (-1,))
    if count is not None:
        n = bits.shape[-1]
        stop = count if count >= 0 else n + count
        bits = pad(bits[..., :stop], [(0, 0)] * (bits.ndim - 1) + [(0, builtins.max(0, stop - n))])
    return moveaxis(bits, -1, ax)


def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """``num`` numbers spaced evenly on a log scale from ``start`` to ``stop`` (same sign; negative allowed).

    Example::

        >>> fnp.geomspace(1.0, 1000.0, 4).tolist()
        [1.0, 10.0, 100.0, 1000.0]
    """
    s, e = promote("geomspace", start, stop, to_float=True)
    out = moveaxis(logspace(log10(abs(s)), log10(abs(e)), num, endpoint=endpoint, axis=axis), axis, 0) * sign(s)
    if num:
        out = out.at[0].set(broadcast_to(s, out.shape[1:]))
    if num > 1 and endpoint:
        out = out.at[-1].set(broadcast_to(e, out.shape[1:]))
    out = moveaxis(out, 0, axis)
    return out if dtype is None else out.astype(dtype)
