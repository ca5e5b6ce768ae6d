"""The ``jax.lax`` shape, indexing, contraction and convolution helpers a user calls beyond the primitives' own
wrappers, with jax.lax's signatures; each is a composition of primitives (so every transform applies)."""
from __future__ import annotations

import enum
from typing import Callable, Sequence

import numpy as np

from flfun import dtypes
from flfun import numpy as fnp
from flfun.primitives import base as pb
from flfun.primitives import elementwise as pe
from flfun.primitives import linalg as pl
from flfun.primitives import reduce as pr
from flfun.primitives import slicing as ps
from flfun.core import Primitive, ShapedArray, get_aval, register_impl, short
from flfun.primitives.rules import Zero, jvp_rule, moveaxis_to_front
from flfun.util import canonical_axes


class Precision(enum.Enum):
    """jax.lax's matmul/conv precision names. flfun's CPU GEMMs are always full precision, so every value
    computes the same; the argument is accepted for compatibility."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


class RoundingMethod(enum.IntEnum):
    """How ``lax.round`` breaks ties (jax.lax's names)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


ConvGeneralDilatedDimensionNumbers = pl.ConvDimensionNumbers
PrecisionLike = Precision | str | None
DotDimensionNumbers = tuple      # ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))
stack, tile, broadcast_shapes = fnp.stack, fnp.tile, fnp.broadcast_shapes


def unstack(x, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``: ``lax.unstack(fnp.ones((2, 3)))`` is two ``(3,)`` arrays."""
    return fnp.unstack(x, axis=axis)


def full_like(x, fill_value, dtype=None, shape=None):
    """An array like ``x`` (or of ``shape``) filled with ``fill_value``: ``lax.full_like(x, 0.0, shape=(2,))``."""
    x = fnp.asarray(x)
    return fnp.full(x.shape if shape is None else tuple(shape), fill_value, dtype=dtype or x.dtype)


def split(operand, sizes: Sequence[int], axis: int = 0) -> list:
    """``operand`` cut along ``axis`` into pieces of the given ``sizes`` (which must add up to its length).

    Example::

        >>> [p.shape for p in lax.split(fnp.ones(5), (2, 3))]
        [(2,), (3,)]
    """
    x = fnp.asarray(operand)
    axis = canonical_axes(axis, x.ndim, "split")[0]
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"split: sizes {tuple(sizes)} must be non-negative and add up to {x.shape[axis]}, the "
                         f"length of axis {axis} of {x.shape}")
    return fnp.split(x, [int(i) for i in np.cumsum(sizes)[:-1]], axis=axis)


def dtype(x) -> np.dtype:
    """The dtype flfun gives ``x`` (a weak Python scalar takes the default dtype of its kind).

    Example::

        >>> lax.dtype(1.0)
        dtype('float32')
    """
    return fnp.asarray(x).dtype


def empty(shape, dtype=np.float32):
    """An array of ``shape`` (flfun arrays are immutable, so zeros: the contents of jax's are undefined).

    Example::

        >>> lax.empty((2,), "float32").shape
        (2,)
    """
    return fnp.zeros(shape, dtype)


def stage(x):
    """``x`` as an flfun Array (inside a trace it becomes a traced value like any other operand)."""
    return fnp.asarray(x)


def broadcast_like(arr, like_arr):
    """``arr`` broadcast to the shape of ``like_arr``: ``lax.broadcast_like(fnp.ones(3), fnp.ones((2, 3)))``."""
    return fnp.broadcast_to(arr, fnp.asarray(like_arr).shape)


def optimization_barrier(operand):
    """``operand`` unchanged (flfun's passes do not move work across calls, so no barrier is needed)."""
    return operand


def broadcast(operand, sizes: Sequence[int]):
    """``operand`` with new leading dims ``sizes``: shape ``(*sizes, *operand.shape)``.

    Example::

        >>> lax.broadcast(fnp.ones(3), (2,)).shape
        (2, 3)
    """
    x = fnp.asarray(operand)
    sizes = tuple(int(s) for s in sizes)
    return pb.broadcast_in_dim(x, sizes + x.shape, tuple(range(len(sizes), len(sizes) + x.ndim)))


def broadcast_to_rank(x, rank: int):
    """``x`` with leading 1-sized dims added up to ``rank``: ``lax.broadcast_to_rank(fnp.ones(3), 2).shape``."""
    x = fnp.asarray(x)
    return x if x.ndim >= rank else pb.reshape(x, (1,) * (rank - x.ndim) + x.shape)


def broadcasted_iota(dtype, shape: Sequence[int], dimension: int):
    """``shape``-shaped counts ``0, 1, ...`` along ``dimension``.

    Example::

        >>> lax.broadcasted_iota("int32", (2, 3), 1).tolist()
        [[0, 1, 2], [0, 1, 2]]
    """
    shape = tuple(int(s) for s in shape)
    d = canonical_axes(dimension, len(shape), "broadcasted_iota")[0]
    return pb.broadcast_in_dim(pb.iota(dtype, (shape[d],)), shape, (d,))


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """``operand`` with dims ``start..stop-1`` merged into one.

    Example::

        >>> lax.collapse(fnp.ones((2, 3, 4)), 0, 2).shape
        (6, 4)
    """
    x = fnp.asarray(operand)
    stop = x.ndim if stop_dimension is None else stop_dimension
    lo, hi = start_dimension % max(x.ndim, 1), stop if stop >= 0 else stop + x.ndim
    return pb.reshape(x, x.shape[:lo] + (int(np.prod(x.shape[lo:hi])),) + x.shape[hi:])


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """Element ``index`` along ``axis`` (kept as a size-1 dim with ``keepdims``): ``lax.index_in_dim(x, 0)``."""
    x = fnp.asarray(operand)
    axis = canonical_axes(axis, x.ndim, "index_in_dim")[0]
    index = index + x.shape[axis] if index < 0 else index
    out = ps.slice_in_dim(x, index, index + 1, 1, axis)
    return out if keepdims else pb.reshape(out, x.shape[:axis] + x.shape[axis + 1:])


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0):
    """``slice_size`` elements from a traced ``start_index`` along ``axis`` (clamped into range, as in JAX).

    Example::

        >>> lax.dynamic_slice_in_dim(fnp.arange(5), 3, 2).tolist()
        [3, 4]
    """
    x = fnp.asarray(operand)
    axis = canonical_axes(axis, x.ndim, "dynamic_slice_in_dim")[0]
    starts = [0] * x.ndim
    starts[axis] = _wrapped(start_index, x.shape[axis])
    return ps.dynamic_slice(x, starts, x.shape[:axis] + (int(slice_size),) + x.shape[axis + 1:])


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    """Element ``index`` (traced) along ``axis``: ``lax.dynamic_index_in_dim(x, i, keepdims=False)``."""
    x = fnp.asarray(operand)
    out = dynamic_slice_in_dim(x, index, 1, axis)
    axis = canonical_axes(axis, x.ndim, "dynamic_index_in_dim")[0]
    return out if keepdims else pb.reshape(out, x.shape[:axis] + x.shape[axis + 1:])


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int):
    """``operand`` with ``update`` written from a traced ``start_index`` along ``axis``.

    Example::

        >>> lax.dynamic_update_slice_in_dim(fnp.zeros(4), fnp.ones(2), 1, 0).tolist()
        [0.0, 1.0, 1.0, 0.0]
    """
    x = fnp.asarray(operand)
    axis = canonical_axes(axis, x.ndim, "dynamic_update_slice_in_dim")[0]
    starts = [0] * x.ndim
    starts[axis] = _wrapped(start_index, x.shape[axis])
    return ps.dynamic_update_slice(x, fnp.asarray(update, dtype=x.dtype), starts)


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    """``operand`` with the slice ``index`` along ``axis`` replaced by ``update`` (with or without that dim)."""
    x, u = fnp.asarray(operand), fnp.asarray(update)
    axis = canonical_axes(axis, x.ndim, "dynamic_update_index_in_dim")[0]
    u = u if u.ndim == x.ndim else fnp.expand_dims(u, axis)
    return dynamic_update_slice_in_dim(x, u, index, axis)


def _wrapped(index, size: int):
    """A (possibly traced) index with negative values counted from the end, as jax's ``*_in_dim`` do."""
    if isinstance(index, (int, np.integer)):
        return int(index) + size if index < 0 else int(index)
    i = fnp.asarray(index)
    return fnp.where(i < 0, i + size, i)


def index_take(src, idxs, axes: Sequence[int]):
    """``src[idxs[0][n], idxs[1][n], ...]`` along ``axes`` for every ``n`` (one index array per axis).

    Example::

        >>> lax.index_take(fnp.arange(6).reshape(2, 3), (fnp.asarray([1, 0]), fnp.asarray([2, 1])), (0, 1)).tolist()
        [5, 1]
    """
    src = fnp.asarray(src)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: need one index array per axis, got {len(idxs)} for axes {tuple(axes)}")
    indices = fnp.stack([fnp.asarray(i) for i in idxs], axis=-1)
    return ps.gather(src, indices, axes=tuple(canonical_axes(tuple(axes), src.ndim, "index_take")))


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
    """A vector/matrix product (``lhs``'s last dim with ``rhs``'s first, or the given ``dimension_numbers``).

    Example::

        >>> lax.dot(fnp.ones((2, 3)), fnp.ones(3)).tolist()
        [3.0, 3.0]
    """
    lhs, rhs = fnp.asarray(lhs), fnp.asarray(rhs)
    dn = dimension_numbers or (((lhs.ndim - 1,), (0,)), ((), ()))
    return pl.dot_general(lhs, rhs, dn, preferred_element_type=preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    """Matmul over the last two dims with all leading dims as batch dims: ``lax.batch_matmul(a, b)``."""
    lhs, rhs = fnp.asarray(lhs), fnp.asarray(rhs)
    if lhs.ndim != rhs.ndim or lhs.ndim < 2 or lhs.shape[:-2] != rhs.shape[:-2]:
        raise ValueError(f"batch_matmul: need arrays of one rank >= 2 with equal batch dims, got {lhs.shape} and "
                         f"{rhs.shape}")
    batch = tuple(range(lhs.ndim - 2))
    return pl.dot_general(lhs, rhs, (((lhs.ndim - 1,), (rhs.ndim - 2,)), (batch, batch)))


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list[tuple[int, int]]:
    """``(low, high)`` padding per spatial dim for ``'SAME'``, ``'SAME_LOWER'`` or ``'VALID'``.

    Example::

        >>> lax.padtype_to_pads((5,), (3,), (1,), "SAME")
        [(1, 1)]
    """
    if not isinstance(padding, str):
        return [tuple(p) for p in padding]
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padtype_to_pads: padding must be 'SAME', 'SAME_LOWER', 'VALID' or pairs, got {padding!r}")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        lo = total // 2 if kind == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


def conv_general_permutations(dimension_numbers):
    """The ``(lhs, rhs, out)`` axis permutations of three layout strings (``('NHWC', 'HWIO', 'NHWC')``)."""
    lhs, rhs, out = dimension_numbers
    spatial = "".join(c for c in rhs if c not in "OI")
    return tuple(tuple(spec.index(c) for c in chars) for spec, chars in
                 ((lhs, "NC" + spatial), (rhs, "OI" + spatial), (out, "NC" + spatial)))


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_general_dilated`` (without dilation) in ``dimension_numbers``' out layout."""
    dn = pl.conv_dimension_numbers(len(lhs_shape), dimension_numbers)
    spatial = [lhs_shape[d] for d in dn.lhs_spec[2:]]
    window = [rhs_shape[d] for d in dn.rhs_spec[2:]]
    pads = padtype_to_pads(spatial, window, window_strides, padding)
    sizes = pl.conv_output_shape(spatial, window, window_strides, pads, [1] * len(spatial), [1] * len(spatial))
    canonical = (lhs_shape[dn.lhs_spec[0]], rhs_shape[dn.rhs_spec[0]]) + sizes
    out = [0] * len(lhs_shape)
    for pos, size in zip(dn.out_spec, canonical):
        out[pos] = size
    return tuple(out)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1):
    """The output shape of an ``NC...``/``OI...`` convolution with explicit ``pads``."""
    spatial = pl.conv_output_shape(lhs_shape[2:], rhs_shape[2:], strides, padtype_to_pads(lhs_shape[2:], rhs_shape[2:],
                                   strides, pads), [1] * (len(lhs_shape) - 2), [1] * (len(lhs_shape) - 2))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + spatial


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=None,
                              preferred_element_type=None):
    """``conv_general_dilated`` in the ``NC...``/``OI...`` layout: ``lax.conv_with_general_padding(x, w, ...)``."""
    return pl.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation)


def conv(lhs, rhs, window_strides, padding: str, precision=None, preferred_element_type=None):
    """A convolution in the ``NC...``/``OI...`` layout without dilation.

    Example::

        >>> lax.conv(fnp.ones((1, 1, 4)), fnp.ones((1, 1, 2)), (1,), "VALID").tolist()
        [[[2.0, 2.0, 2.0]]]
    """
    return pl.conv_general_dilated(lhs, rhs, window_strides, padding)


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None):
    """The transposed ("deconvolution") convolution, with JAX's padding rules: ``lhs`` is dilated by
    ``strides``; with ``transpose_kernel`` the kernel is flipped spatially and its I/O dims swapped, giving the
    gradient of ``conv_general_dilated`` with respect to its input.

    Example::

        >>> lax.conv_transpose(fnp.ones((1, 2, 1)), fnp.ones((2, 1, 1)), (2,), "VALID",
        ...                    dimension_numbers=("NWC", "WIO", "NWC")).shape
        (1, 4, 1)
    """
    lhs, rhs = fnp.asarray(lhs), fnp.asarray(rhs)
    nd = lhs.ndim - 2
    dn = pl.conv_dimension_numbers(lhs.ndim, dimension_numbers)
    window = [rhs.shape[d] for d in dn.rhs_spec[2:]]
    rhs_dilation = tuple(rhs_dilation or (1,) * nd)
    effective = [(k - 1) * d + 1 for k, d in zip(window, rhs_dilation)]
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "VALID"):
            raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or pairs, got {padding!r}")
        pads = [_transpose_pads(k, s, padding.upper()) for k, s in zip(effective, strides)]
    else:
        pads = [tuple(p) for p in padding]
    if transpose_kernel:
        rhs = fnp.flip(rhs, tuple(dn.rhs_spec[2:]))
        rhs = fnp.swapaxes(rhs, dn.rhs_spec[0], dn.rhs_spec[1])
    return pl.conv_general_dilated(lhs, rhs, (1,) * nd, pads, lhs_dilation=tuple(strides),
                                   rhs_dilation=rhs_dilation, dimension_numbers=dn)


def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides: Sequence[int], padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The ``filter_shape`` patches a convolution would see, as output features ordered ``(input feature, *filter
    position)`` flattened: a grouped convolution with one-hot kernels (so every transform applies).

    Example::

        >>> lax.conv_general_dilated_patches(fnp.ones((1, 3, 5, 4)), (2, 3), (1, 1), "VALID").shape
        (1, 18, 4, 2)
    """
    lhs = fnp.asarray(lhs)
    dn = pl.conv_dimension_numbers(lhs.ndim, dimension_numbers)
    c, size = lhs.shape[dn.lhs_spec[1]], int(np.prod(filter_shape))
    eye = np.eye(size, dtype=lhs.dtype).reshape(size, 1, *filter_shape)
    kernel = np.transpose(np.tile(eye, (c,) + (1,) * (eye.ndim - 1)), np.argsort(dn.rhs_spec))
    return pl.conv_general_dilated(lhs, fnp.asarray(kernel), window_strides, padding, lhs_dilation=lhs_dilation,
                                   rhs_dilation=rhs_dilation, dimension_numbers=dn, feature_group_count=c)


def _bitcast_shape(x, *, new_dtype):
    shape, old, new = tuple(x.shape), x.dtype.itemsize, np.dtype(new_dtype).itemsize
    if new < old:
        shape = shape + (old // new,)
    elif new > old:
        if not shape or shape[-1] * old != new:
            raise ValueError(f"bitcast_convert_type: {short(x)} to {np.dtype(new_dtype).name} needs a last dim of "
                             f"{new // old}, got shape {shape}")
        shape = shape[:-1]
    return ShapedArray(shape, np.dtype(new_dtype))


def _bitcast_impl(x, *, new_dtype):
    new, x = np.dtype(new_dtype), x if x.flags.c_contiguous else x.copy()
    if new.itemsize < x.dtype.itemsize:
        return x.reshape(x.shape + (1,)).view(new)
    return x.view(new).reshape(x.shape[:-1]) if new.itemsize > x.dtype.itemsize else x.view(new)


bitcast_convert_type_p = Primitive("bitcast_convert_type")
bitcast_convert_type_p.def_abstract_eval(_bitcast_shape)
bitcast_convert_type_p.def_batch(lambda axis, args, dims, **kw: (
    bitcast_convert_type_p.bind(moveaxis_to_front(args[0], dims[0], axis.size), **kw), 0))
jvp_rule(bitcast_convert_type_p)(lambda out, primals, tangents, **kw: Zero(get_aval(out)))   # bits: no derivative
for _b in ("numpy", "cupy"):
    register_impl(bitcast_convert_type_p, _b, _bitcast_impl)


def bitcast_convert_type(operand, new_dtype):
    """``operand``'s bits read as ``new_dtype``: a narrower type adds a last dim (of the size ratio), a wider one
    consumes it; no derivative (as JAX). ``lax.bitcast_convert_type(fnp.ones(1), "uint32").tolist() == [1065353216]``.
    """
    return bitcast_convert_type_p.bind(fnp.asarray(operand), new_dtype=dtypes.canonicalize(new_dtype))


def _transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    """jax.lax.conv_transpose's padding of the dilated input for a window ``k`` and stride ``s``."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total, lo = k + s - 2 + max(k - s, 0), k - 1
    return lo, total - lo


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of ``conv_transpose`` with these arguments."""
    out = conv_transpose(fnp.zeros(lhs_shape), fnp.zeros(rhs_shape), window_strides, padding,
                         dimension_numbers=dimension_numbers)
    return tuple(out.shape)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding, base_dilation=None,
                              window_dilation=None):
    """The output shape of ``reduce_window`` with these arguments."""
    n = len(operand_shape)
    pads = padtype_to_pads(operand_shape, window_dimensions, window_strides, padding)
    return pl.conv_output_shape(operand_shape, window_dimensions, window_strides, pads, base_dilation or (1,) * n,
                                window_dilation or (1,) * n)


def reduce_window(operand, init_value, computation: Callable, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """``computation``-reduce every window of ``operand`` (``lax.add``, ``max``, ``min``, ``mul`` or any
    associative binary function), padding with ``init_value``.

    Example::

        >>> lax.reduce_window(fnp.asarray([1., 3., 2., 5.]), -fnp.inf, lax.max, (2,), (2,)).tolist()
        [3.0, 5.0]
    """
    x = fnp.asarray(operand)
    n = x.ndim
    strides, wdil = tuple(window_strides or (1,) * n), tuple(window_dilation or (1,) * n)
    if base_dilation is not None and any(d != 1 for d in base_dilation):
        raise NotImplementedError(f"reduce_window: base_dilation {tuple(base_dilation)} is not supported")
    if len(window_dimensions) != n or len(strides) != n:
        raise ValueError(f"reduce_window: window {tuple(window_dimensions)} and strides {strides} need one entry per "
                         f"dim of the operand {x.shape}")
    pads = padtype_to_pads(x.shape, [(k - 1) * d + 1 for k, d in zip(window_dimensions, wdil)], strides, padding)
    init = fnp.asarray(init_value, dtype=x.dtype)
    x = ps.pad(x, init, [(lo, hi, 0) for lo, hi in pads]) if any(p != (0, 0) for p in pads) else x
    out_shape = pl.conv_output_shape(x.shape, window_dimensions, strides, [(0, 0)] * n, (1,) * n, wdil)
    acc = None
    for offset in np.ndindex(*window_dimensions):
        start = [o * d for o, d in zip(offset, wdil)]
        limit = [s + (m - 1) * st + 1 for s, m, st in zip(start, out_shape, strides)]
        window = ps.slice(x, start, limit, strides)
        acc = window if acc is None else computation(acc, window)
    return computation(fnp.broadcast_to(init, out_shape), acc) if acc is not None else fnp.broadcast_to(init, out_shape)


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """``operand`` rounded (to nearest even) to a float format with ``exponent_bits`` and ``mantissa_bits``,
    kept in its own dtype (values below that format's smallest normal become signed zeros, as in XLA):
    ``lax.reduce_precision(x, 8, 7)`` rounds float32 values to bfloat16's.

    Example::

        >>> float(lax.reduce_precision(fnp.asarray(1.0 + 2 ** -10), 5, 10))
        1.0009765625
    """
    x = fnp.asarray(operand)
    if not dtypes.is_float(x.dtype) or exponent_bits < 1 or mantissa_bits < 0:
        raise ValueError(f"reduce_precision: needs a float array, exponent_bits >= 1 and mantissa_bits >= 0; got "
                         f"{x.dtype}, {exponent_bits}, {mantissa_bits}")
    info = np.finfo(x.dtype)     # a format wider than the dtype's own changes nothing
    exponent_bits, mantissa_bits = min(exponent_bits, info.nexp), min(mantissa_bits, info.nmant)
    bias = 2 ** (exponent_bits - 1) - 1
    mag = fnp.abs(x)
    step = fnp.exp2(fnp.floor(fnp.log2(fnp.where((mag > 0) & fnp.isfinite(mag), mag, 1.0))) - mantissa_bits)
    rounded = fnp.round(x / step) * step                                            # ties to even
    rounded = fnp.where(fnp.abs(rounded) < 2.0 ** (1 - bias), fnp.copysign(0.0, x), rounded)  # flush, as XLA
    too_big = fnp.abs(rounded) > (2 - 2.0 ** -mantissa_bits) * 2.0 ** bias
    return fnp.where(too_big | ~fnp.isfinite(x), fnp.where(fnp.isnan(x), x, fnp.copysign(fnp.inf, x)),
                     rounded).astype(x.dtype)


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> pl.ConvDimensionNumbers:
    """jax.lax's form: the canonical ``ConvDimensionNumbers`` for operands of these shapes.

    Example::

        >>> lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC")).lhs_spec
        (0, 3, 1, 2)
    """
    if len(lhs_shape) != len(rhs_shape):
        raise ValueError(f"conv_dimension_numbers: lhs {tuple(lhs_shape)} and rhs {tuple(rhs_shape)} need one rank")
    return pl.conv_dimension_numbers(len(lhs_shape), dimension_numbers)


__all__ = ["ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "Precision", "PrecisionLike",
           "RoundingMethod", "broadcast_like", "stage", "batch_matmul", "bitcast_convert_type", "broadcast",
           "broadcast_shapes", "broadcast_to_rank", "broadcasted_iota", "collapse", "conv",
           "conv_dimension_numbers", "conv_general_dilated_patches", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose", "conv_transpose_shape_tuple",
           "conv_with_general_padding", "dot", "dtype", "dynamic_index_in_dim", "dynamic_slice_in_dim",
           "dynamic_update_index_in_dim", "dynamic_update_slice_in_dim", "empty", "full_like", "index_in_dim",
           "index_take", "optimization_barrier", "padtype_to_pads", "reduce_precision", "reduce_window",
           "reduce_window_shape_tuple", "split", "stack", "tile", "unstack"]
