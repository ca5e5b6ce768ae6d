"""Windows into an array and their transposes: slice, dynamic_slice, dynamic_update_slice, pad, concatenate.

All are linear in the array operands: slice and pad transpose into each other, dynamic_slice into
dynamic_update_slice, concatenate into slices. Start indices of the dynamic slices are scalar integer operands,
clamped into range as in lax; under vmap, mapped start indices become a gather (a scatter for the update).
"""
from __future__ import annotations

from typing import Sequence

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, is_weak, short
from flfun.primitives.common import from_end
from flfun.primitives.elementwise import add, clamp, convert_element_type, select_n, sub
from flfun.primitives.indexing import gather, scatter
from flfun.primitives.rules import check_same, front_batch, is_undefined, linear, moveaxis_to_front, not_mapped
from flfun.primitives.base import broadcast_in_dim, full, iota, reduce_sum, transpose


def _shape_of(x) -> tuple[int, ...]:
    """Shape of an operand in a transpose rule (an ``UndefinedPrimal`` or a value)."""
    return tuple(x.aval.shape if is_undefined(x) else x.shape)


# -------------------------------------------------------------------------------------------------------- slice
slice_p = Primitive("slice", linear_in="all")


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    n = len(x.shape)
    if not (len(start_indices) == len(limit_indices) == len(strides) == n):
        raise TypeError(f"slice: start_indices {start_indices}, limit_indices {limit_indices} and strides "
                        f"{strides} must each have one entry per dimension of {short(x)}")
    if any(st < 1 for st in strides):
        raise TypeError(f"slice: strides {strides} must be positive for {short(x)}")
    if any(not 0 <= s <= l <= d for s, l, d in zip(start_indices, limit_indices, x.shape)):
        raise TypeError(f"slice: start_indices {start_indices} / limit_indices {limit_indices} are out of "
                        f"bounds for {short(x)}")
    shape = tuple((l - s + st - 1) // st for s, l, st in zip(start_indices, limit_indices, strides))
    return ShapedArray(shape, x.dtype, is_weak(x))


@linear(slice_p)
def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    # pad the cotangent back: low = start, interior = stride - 1, high = whatever is left after the last element
    cfg = tuple((s, d - (s + (c - 1) * st + 1), st - 1) if c else (s, d - s, 0)
                for s, st, d, c in zip(start_indices, strides, x.aval.shape, ct.shape))
    return [pad(ct, full((), 0, ct.dtype), cfg)]


@slice_p.def_batch
def _slice_batch(axis, args, dims, *, start_indices, limit_indices, strides):
    (x,), (bd,) = args, dims
    ins = lambda t, v: tuple(t[:bd]) + (v,) + tuple(t[bd:])  # noqa: E731
    return bind(slice_p, x, start_indices=ins(start_indices, 0), limit_indices=ins(limit_indices, axis.size),
                strides=ins(strides, 1)), bd


def slice(x, start_indices: Sequence[int], limit_indices: Sequence[int], strides: Sequence[int] | None = None):
    """Static slice ``x[start:limit:stride]`` per dimension.

    Example::

        >>> lax.slice(fnp.arange(6.0), (1,), (6,), (2,)).tolist()
        [1.0, 3.0, 5.0]
    """
    strides = (1,) * len(x.shape) if strides is None else tuple(int(s) for s in strides)
    return bind(slice_p, x, start_indices=tuple(int(s) for s in start_indices),
                limit_indices=tuple(int(s) for s in limit_indices), strides=strides)


def slice_in_dim(x, start: int, limit: int, stride: int = 1, axis: int = 0):
    """``slice`` along one ``axis`` only, as ``lax.slice_in_dim``."""
    starts, limits, strides = [0] * len(x.shape), list(x.shape), [1] * len(x.shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


# ------------------------------------------------------------------------------------------------ dynamic_slice
def _check_start_indices(op: str, x, idx) -> None:
    if len(idx) != len(x.shape):
        raise TypeError(f"{op}: needs one start index per dimension of {short(x)}, got {len(idx)}")
    for i in idx:
        if i.shape != () or not dtypes.is_int(i.dtype):
            raise TypeError(f"{op}: start indices must be integer scalars, got {short(i)} for {short(x)}")


dynamic_slice_p = Primitive("dynamic_slice", linear_in=(0,))


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *start_indices, slice_sizes):
    _check_start_indices("dynamic_slice", x, start_indices)
    if len(slice_sizes) != len(x.shape) or any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} must give a size between 0 and the dimension "
                        f"for each dimension of {short(x)}")
    return ShapedArray(slice_sizes, x.dtype, is_weak(x))


@linear(dynamic_slice_p, 1)
def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    return [dynamic_update_slice(full(x.aval.shape, 0, ct.dtype), ct, idx)] + [None] * len(idx)


def _window_positions(idx, dims, x_shape, sizes, size: int):
    """For start indices some of which are mapped: the dims the window does not cover whole, and the positions
    ``(size, *their window sizes, len(them))`` of the window's elements along them, the starts clamped into range
    like lax does (None when the window covers every dim whole)."""
    narrow = [k for k, (n, s) in enumerate(zip(x_shape, sizes)) if n != s]
    if not narrow:
        return narrow, None
    dt, grid = dtypes.int64, (size,) + tuple(sizes[k] for k in narrow) + (1,)
    pos = []
    for j, k in enumerate(narrow):
        start = idx[k] if getattr(idx[k], "dtype", None) == dt else convert_element_type(idx[k], dt)
        start = moveaxis_to_front(clamp(full((), 0, dt), start, full((), x_shape[k] - sizes[k], dt)), dims[k], size)
        pos.append(add(broadcast_in_dim(start, grid, (0,)), iota(dt, grid, 1 + j)))
    return narrow, concatenate(pos, len(grid) - 1)


def _window_first(narrow: list[int], rank: int) -> list[int]:
    """The axis order of a batched operand with the window's ``narrow`` dims right after the batch axis."""
    return [0] + [k + 1 for k in narrow] + [k + 1 for k in range(rank - 1) if k not in narrow]


@dynamic_slice_p.def_batch
def _dynamic_slice_batch(axis, args, dims, *, slice_sizes):
    (x, *idx), (dx, *didx) = args, dims
    x = moveaxis_to_front(x, dx, axis.size)
    # a plain dynamic_slice along dims with unmapped starts (mapped ones kept whole), then a gather along the others
    keep = tuple(n if d is not not_mapped else s for n, s, d in zip(x.shape[1:], slice_sizes, didx))
    x = bind(dynamic_slice_p, x, 0, *[0 if d is not not_mapped else i for i, d in zip(idx, didx)],
             slice_sizes=(axis.size,) + keep)
    narrow, pos = _window_positions(idx, didx, x.shape[1:], slice_sizes, axis.size)
    if not narrow:
        return x, 0
    out = gather(x, pos, axes=tuple(k + 1 for k in narrow), batch_dims=1, mode="promise_in_bounds")
    order = _window_first(narrow, len(x.shape))
    return transpose(out, sorted(range(len(order)), key=order.__getitem__)), 0


def dynamic_slice(x, start_indices: Sequence, slice_sizes: Sequence[int]):
    """The window of ``slice_sizes`` starting at ``start_indices`` (integer scalars, possibly traced), with
    starts clamped so the window fits, as in ``lax.dynamic_slice``.

    Example::

        >>> lax.dynamic_slice(fnp.arange(5.0), (fnp.asarray(3),), (3,)).tolist()   # start clamped to 2
        [2.0, 3.0, 4.0]
    """
    return bind(dynamic_slice_p, x, *start_indices, slice_sizes=tuple(int(s) for s in slice_sizes))


# ----------------------------------------------------------------------------------------- dynamic_update_slice
dynamic_update_slice_p = Primitive("dynamic_update_slice", linear_in=(0, 1))


@dynamic_update_slice_p.def_abstract_eval
def _dynamic_update_slice_abstract_eval(x, update, *start_indices):
    _check_start_indices("dynamic_update_slice", x, start_indices)
    if update.dtype != x.dtype:
        raise TypeError(f"dynamic_update_slice: update {short(update)} must have the dtype of the operand {short(x)}")
    if len(update.shape) != len(x.shape) or any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice: update {short(update)} must have the operand's rank and fit "
                        f"inside {short(x)}")
    return ShapedArray(x.shape, x.dtype, is_weak(x) and is_weak(update))


@linear(dynamic_update_slice_p, 2)
def _dynamic_update_slice_transpose(ct, x, update, *idx):
    u_shape = _shape_of(update)
    ct_x = dynamic_update_slice(ct, full(u_shape, 0, ct.dtype), idx) if is_undefined(x) else None
    ct_u = dynamic_slice(ct, idx, u_shape) if is_undefined(update) else None
    return [ct_x, ct_u] + [None] * len(idx)


@dynamic_update_slice_p.def_batch
def _dynamic_update_slice_batch(axis, args, dims):
    (x, update, *idx), (dx, du, *didx) = args, dims
    x, update = moveaxis_to_front(x, dx, axis.size), moveaxis_to_front(update, du, axis.size)
    if all(d is not_mapped for d in didx):
        return bind(dynamic_update_slice_p, x, update, 0, *idx), 0
    # a scatter of the update along the dims it does not cover whole
    narrow, pos = _window_positions(idx, didx, x.shape[1:], update.shape[1:], axis.size)
    if not narrow:
        return update, 0
    update = transpose(update, _window_first(narrow, len(x.shape)))
    return scatter(x, pos, update, axes=tuple(k + 1 for k in narrow), batch_dims=1, mode="promise_in_bounds",
                     op="set"), 0


def dynamic_update_slice(x, update, start_indices: Sequence):
    """``x`` with the window at ``start_indices`` replaced by ``update`` (starts clamped so it fits).

    Example::

        >>> lax.dynamic_update_slice(fnp.zeros(4), fnp.ones(2), (fnp.asarray(1),)).tolist()
        [0.0, 1.0, 1.0, 0.0]
    """
    return bind(dynamic_update_slice_p, x, update, *start_indices)


# ---------------------------------------------------------------------------------------------------------- pad
pad_p = Primitive("pad", linear_in="all")


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, padding_value, *, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise TypeError(f"pad: padding_value must be a scalar of the operand's dtype, got {short(padding_value)} "
                        f"for {short(x)}")
    if len(padding_config) != len(x.shape):
        raise TypeError(f"pad: padding_config {padding_config} needs one (lo, hi, interior) per dim of {short(x)}")
    shape = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise TypeError(f"pad: interior padding must be >= 0, got {padding_config}")
        n = lo + hi + d + max(d - 1, 0) * interior
        if n < 0:
            raise TypeError(f"pad: padding_config {padding_config} gives a negative size for {short(x)}")
        shape.append(n)
    return ShapedArray(tuple(shape), x.dtype, is_weak(x))


@linear(pad_p)
def _pad_transpose(ct, x, pv, *, padding_config):
    # undo negative (cropping) padding by padding back with zeros, then take the strided interior
    crop = tuple((max(-lo, 0), max(-hi, 0), 0) for lo, hi, _ in padding_config)
    full_ct = pad(ct, full((), 0, ct.dtype), crop) if any(a or b for a, b, _ in crop) else ct
    starts = tuple(max(lo, 0) for lo, _, _ in padding_config)
    limits = tuple(n - max(hi, 0) for n, (_, hi, _) in zip(full_ct.shape, padding_config))
    ct_x, axes = slice(full_ct, starts, limits, tuple(i + 1 for _, _, i in padding_config)), tuple(range(len(ct.shape)))
    ct_pv = sub(reduce_sum(ct, axes), reduce_sum(ct_x, axes)) if is_undefined(pv) else None
    return [ct_x if is_undefined(x) else None, ct_pv]


@pad_p.def_batch
def _pad_batch(axis, args, dims, *, padding_config):
    (x, pv), (dx, dpv) = args, dims
    x = moveaxis_to_front(x, dx, axis.size)
    config = ((0, 0, 0),) + tuple(padding_config)
    if dpv is not_mapped:
        return pad(x, pv, config), 0
    # a mapped padding value: pad with zeros, then select it where the padding went
    out = pad(x, full((), 0, x.dtype), config)
    where = pad(full(x.shape[1:], False, dtypes.bool_), full((), True, dtypes.bool_), padding_config)
    return select_n(where, out, broadcast_in_dim(pv, out.shape, (0,))), 0


def pad(x, padding_value, padding_config: Sequence[tuple[int, int, int]]):
    """Pad with ``(low, high, interior)`` per dimension; negative low/high crop.

    Example::

        >>> lax.pad(fnp.ones(2), fnp.asarray(0.0), [(1, 0, 1)]).tolist()
        [0.0, 1.0, 0.0, 1.0]
    """
    return bind(pad_p, x, padding_value, padding_config=tuple(tuple(int(v) for v in c) for c in padding_config))


# -------------------------------------------------------------------------------------------------- concatenate
concatenate_p = Primitive("concatenate", linear_in="all")


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*operands, dimension):
    if not operands:
        raise TypeError("concatenate: needs at least one operand")
    x0 = operands[0]
    if not 0 <= dimension < len(x0.shape):
        raise TypeError(f"concatenate: dimension {dimension} is out of range for {short(x0)}")
    check_same("concatenate", "operands", operands)
    for o in operands[1:]:
        if len(o.shape) != len(x0.shape) or any(a != b for i, (a, b) in enumerate(zip(o.shape, x0.shape))
                                                if i != dimension):
            raise TypeError(f"concatenate: operand shapes must match except along dimension {dimension}, got "
                            f"{', '.join(short(o) for o in operands)}")
    shape = list(x0.shape)
    shape[dimension] = sum(o.shape[dimension] for o in operands)
    return ShapedArray(shape, x0.dtype, all(is_weak(o) for o in operands))


@linear(concatenate_p)
def _concatenate_transpose(ct, *operands, dimension):
    out, start = [], 0
    for o in operands:
        n = _shape_of(o)[dimension]
        out.append(slice_in_dim(ct, start, start + n, axis=dimension) if is_undefined(o) else None)
        start += n
    return out


concatenate_p.def_batch(front_batch(lambda n, *xs, dimension: concatenate_p.bind(*xs, dimension=dimension + 1)))


def concatenate(operands: Sequence, dimension: int):
    """Join arrays of one dtype along ``dimension`` (negative counts from the end).

    Example::

        >>> lax.concatenate([fnp.zeros(2), fnp.ones(1)], 0).tolist()
        [0.0, 0.0, 1.0]
    """
    operands = list(operands)
    if len(operands) == 1:
        return operands[0]
    return bind(concatenate_p, *operands, dimension=from_end(dimension, operands))


__all__ = ["slice", "slice_in_dim", "dynamic_slice", "dynamic_update_slice", "pad", "concatenate"]
