"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, slice, dynamic_slice,
dynamic_update_slice, pad, concatenate, iota, sort. All but sort and iota are linear: their transposes move
cotangents back to the operand's layout. Start indices of the dynamic slices are scalar integer operands, clamped
into range as in lax; sort carries tangents as extra operands (linear in them, so it transposes too)."""
from __future__ import annotations

from typing import Sequence

from flfun import dtypes
from flfun.array import Array
from flfun.core import Primitive, ShapedArray, bind, is_weak, short, to_array
from flfun.primitives import elementwise as E, indexing as I, reduce as R  # noqa: F401 (cycle: used in rules)
from flfun.primitives.common import (batch_axes, check_same, front_batch, is_undefined, is_zero, linear,
                                     moveaxis_to_front, not_mapped, tangent_aval, Zero)
from flfun.util import prod


def _shape_of(x) -> tuple[int, ...]:
    """Shape of an operand in a transpose rule (an ``UndefinedPrimal`` or a value)."""
    return tuple(x.aval.shape if is_undefined(x) else x.shape)


def _check_dims(op: str, x, dimensions, rank: int) -> None:
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < rank for d in dimensions):
        raise TypeError(f"{op}: dimensions {dimensions} must be distinct and within rank {rank} for {short(x)}")


def _bind_dims(prim: Primitive, x, dimensions, rank: int):
    """Bind ``prim`` with sorted ``dimensions``, negative ones counted from the end of ``rank`` (out-of-range ones
    are left for the abstract eval to reject); no dimensions: ``x`` itself."""
    dims = tuple(sorted(int(d) + rank if -rank <= int(d) < 0 else int(d) for d in dimensions))
    return bind(prim, x, dimensions=dims) if dims else x


def _from_end(dimension, operands) -> int:
    """``dimension`` as an int, a negative one counted from the end of the first operand's rank."""
    d = int(dimension)
    return d + len(operands[0].shape) if operands and d < 0 else d


def full(shape, fill_value, dtype):
    """An array of ``shape`` filled with a scalar or 0-d array: ``lax.full((2, 3), 0.0, 'float32')``."""
    dtype = dtypes.canonicalize(dtype)
    if not isinstance(fill_value, Array):
        fill_value = to_array(fill_value, dtype)
    elif fill_value.dtype != dtype:
        fill_value = E.convert_element_type(fill_value, dtype)
    shape = tuple(shape)
    return fill_value if shape == () and fill_value.shape == () else broadcast_in_dim(fill_value, shape, ())


# -------------------------------------------------------------------------------------------- broadcast_in_dim
broadcast_in_dim_p = Primitive("broadcast_in_dim")
broadcast_in_dim_p.linear_in, broadcast_in_dim_p.value_preserving = "all", True
broadcast_in_dim_p.chain = lambda p1, p2: {**p2, "broadcast_dimensions": tuple(
    p2["broadcast_dimensions"][i] for i in p1["broadcast_dimensions"])}


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    bd = broadcast_dimensions
    if len(bd) != len(x.shape):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {bd} must have one entry per operand "
                        f"dimension of {short(x)}")
    if any(b >= len(shape) or b < 0 for b in bd) or any(a >= b for a, b in zip(bd, bd[1:])):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {bd} must be strictly increasing and "
                        f"within the target rank {len(shape)}")
    if any(d < 0 for d in shape):
        raise TypeError(f"broadcast_in_dim: negative size in target shape {shape}")
    for d, b in zip(x.shape, bd):
        if d not in (1, shape[b]):
            raise TypeError(f"broadcast_in_dim: operand {short(x)} cannot be broadcast to shape {shape} "
                            f"with broadcast_dimensions {bd}")
    return ShapedArray(shape, x.dtype, is_weak(x))


@linear(broadcast_in_dim_p)
def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    bd, in_shape = broadcast_dimensions, x.aval.shape
    # sum over the new dims and over those broadcast from size 1
    summed = tuple(i for i, n in enumerate(shape) if i not in bd or (in_shape[bd.index(i)] == 1 and n != 1))
    return [reshape(R.reduce_sum(ct, summed) if summed else ct, in_shape)]


broadcast_in_dim_p.def_batch(front_batch(lambda n, x, *, shape, broadcast_dimensions: broadcast_in_dim(
    x, (n,) + tuple(shape), (0,) + tuple(b + 1 for b in broadcast_dimensions))))


def broadcast_in_dim(x, shape: Sequence[int], broadcast_dimensions: Sequence[int]):
    """Broadcast ``x`` into ``shape``, operand dim ``i`` going to ``broadcast_dimensions[i]``.

    Example::

        >>> lax.broadcast_in_dim(fnp.arange(3.0), (2, 3), (1,)).shape
        (2, 3)
    """
    shape, broadcast_dimensions = tuple(map(int, shape)), tuple(map(int, broadcast_dimensions))
    if shape == tuple(x.shape) and broadcast_dimensions == tuple(range(len(shape))):
        return x
    return bind(broadcast_in_dim_p, x, shape=shape, broadcast_dimensions=broadcast_dimensions)


# ------------------------------------------------------------------------------------------------------ reshape
reshape_p = Primitive("reshape")
reshape_p.linear_in, reshape_p.value_preserving = "all", True
reshape_p.chain = lambda p1, p2: p2     # reshape(reshape(y)) is one reshape


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes):
    if any(d < 0 for d in new_sizes) or prod(new_sizes) != prod(x.shape):
        raise TypeError(f"reshape: cannot reshape {short(x)} ({prod(x.shape)} elements) into shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, is_weak(x))


linear(reshape_p)(lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])


reshape_p.def_batch(front_batch(lambda n, x, *, new_sizes: reshape(x, (n,) + tuple(new_sizes))))


def reshape(x, new_sizes: Sequence[int]):
    """Row-major reshape to ``new_sizes`` (no -1: ``flfun.numpy.reshape`` resolves that).

    Example::

        >>> lax.reshape(fnp.arange(6.0), (2, 3)).shape
        (2, 3)
    """
    new_sizes = tuple(int(d) for d in new_sizes)
    if tuple(x.shape) == new_sizes:
        return x
    return bind(reshape_p, x, new_sizes=new_sizes)


# ---------------------------------------------------------------------------------------------------- transpose
transpose_p = Primitive("transpose")
transpose_p.linear_in, transpose_p.value_preserving = "all", True
transpose_p.chain = lambda p1, p2: {**p2, "permutation": tuple(p1["permutation"][i] for i in p2["permutation"])}


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(len(x.shape))):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the axes of {short(x)}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, is_weak(x))


linear(transpose_p)(lambda ct, x, *, permutation: [transpose(ct, sorted(range(len(permutation)),
                                                                           key=permutation.__getitem__))])


@transpose_p.def_batch
def _transpose_batch(axis, args, dims, *, permutation):
    # keep the mapped axis where it is and permute the others around it
    bd, perm = dims[0], batch_axes(permutation, dims[0])[0]
    return transpose(args[0], perm[:bd] + (bd,) + perm[bd:]), bd


def transpose(x, permutation: Sequence[int]):
    """Permute axes: output axis ``i`` is input axis ``permutation[i]``.

    Example::

        >>> lax.transpose(fnp.zeros((2, 3)), (1, 0)).shape
        (3, 2)
    """
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(x.shape))):
        return x
    return bind(transpose_p, x, permutation=permutation)


# ------------------------------------------------------------------------------------------------------ squeeze
squeeze_p = Primitive("squeeze")
squeeze_p.linear_in = "all"


@squeeze_p.def_abstract_eval
def _squeeze_abstract_eval(x, *, dimensions):
    _check_dims("squeeze", x, dimensions, len(x.shape))
    for d in dimensions:
        if x.shape[d] != 1:
            raise TypeError(f"squeeze: dimension {d} of {short(x)} has size {x.shape[d]}, not 1")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions), x.dtype, is_weak(x))


linear(squeeze_p)(lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])


@squeeze_p.def_batch
def _squeeze_batch(axis, args, dims, *, dimensions):
    dimensions, out_dim = batch_axes(dimensions, dims[0])
    return squeeze(args[0], dimensions), out_dim


def squeeze(x, dimensions: Sequence[int]):
    """Remove the size-1 ``dimensions`` (negative ones count from the end).

    Example::

        >>> lax.squeeze(fnp.zeros((1, 3, 1)), (0, -1)).shape
        (3,)
    """
    return _bind_dims(squeeze_p, x, dimensions, len(x.shape))


# -------------------------------------------------------------------------------------------------- expand_dims
expand_dims_p = Primitive("expand_dims")
expand_dims_p.linear_in = "all"


@expand_dims_p.def_abstract_eval
def _expand_dims_abstract_eval(x, *, dimensions):
    _check_dims("expand_dims", x, dimensions, len(x.shape) + len(dimensions))
    shape = list(x.shape)
    for d in sorted(dimensions):
        shape.insert(d, 1)
    return ShapedArray(shape, x.dtype, is_weak(x))


linear(expand_dims_p)(lambda ct, x, *, dimensions: [reshape(ct, x.aval.shape)])


expand_dims_p.def_batch(front_batch(lambda n, x, *, dimensions: expand_dims(x, tuple(d + 1 for d in dimensions))))


def expand_dims(x, dimensions: Sequence[int]):
    """Insert size-1 axes so that they sit at ``dimensions`` of the result (negative: from its end).

    Example::

        >>> lax.expand_dims(fnp.zeros(3), (0, -1)).shape
        (1, 3, 1)
    """
    return _bind_dims(expand_dims_p, x, dimensions, len(x.shape) + len(dimensions))


# ---------------------------------------------------------------------------------------------------------- rev
rev_p = Primitive("rev")
rev_p.linear_in = "all"


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    _check_dims("rev", x, dimensions, len(x.shape))
    return ShapedArray(x.shape, x.dtype, is_weak(x))


linear(rev_p)(lambda ct, x, *, dimensions: [rev(ct, dimensions)])


rev_p.def_batch(lambda axis, args, dims, *, dimensions: (rev(args[0], batch_axes(dimensions, dims[0])[0]), dims[0]))


def rev(x, dimensions: Sequence[int]):
    """Reverse the order of elements along ``dimensions``.

    Example::

        >>> lax.rev(fnp.arange(3.0), (0,)).tolist()
        [2.0, 1.0, 0.0]
    """
    return _bind_dims(rev_p, x, dimensions, len(x.shape))


# --------------------------------------------------------------------------------------------------------- iota
iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension, device=None):
    if not (dtypes.is_int(dtype) or dtypes.is_float(dtype)):
        raise TypeError(f"iota: dtype must be an integer or floating type, got {dtype}")
    if any(d < 0 for d in shape):
        raise TypeError(f"iota: negative size in shape {shape}")
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} is out of range for shape {shape}")
    return ShapedArray(shape, dtype)


def iota(dtype, shape: Sequence[int], dimension: int = 0):
    """Integers counting up along ``dimension``, broadcast to ``shape``.

    Example::

        >>> lax.iota('int32', (2, 3), 1).tolist()
        [[0, 1, 2], [0, 1, 2]]
    """
    return bind(iota_p, dtype=dtypes.canonicalize(dtype), shape=tuple(int(d) for d in shape), dimension=int(dimension))


# -------------------------------------------------------------------------------------------------------- slice
slice_p = Primitive("slice")
slice_p.linear_in = "all"


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


dynamic_slice_p = Primitive("dynamic_slice")
dynamic_slice_p.linear_in = (0,)


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
        start = idx[k] if getattr(idx[k], "dtype", None) == dt else E.convert_element_type(idx[k], dt)
        start = moveaxis_to_front(E.clamp(full((), 0, dt), start, full((), x_shape[k] - sizes[k], dt)), dims[k], size)
        pos.append(E.add(broadcast_in_dim(start, grid, (0,)), iota(dt, grid, 1 + j)))
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
    out = I.gather(x, pos, axes=tuple(k + 1 for k in narrow), batch_dims=1, mode="promise_in_bounds")
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
dynamic_update_slice_p = Primitive("dynamic_update_slice")
dynamic_update_slice_p.linear_in = (0, 1)


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
    return I.scatter(x, pos, update, axes=tuple(k + 1 for k in narrow), batch_dims=1, mode="promise_in_bounds",
                     op="set"), 0


def dynamic_update_slice(x, update, start_indices: Sequence):
    """``x`` with the window at ``start_indices`` replaced by ``update`` (starts clamped so it fits).

    Example::

        >>> lax.dynamic_update_slice(fnp.zeros(4), fnp.ones(2), (fnp.asarray(1),)).tolist()
        [0.0, 1.0, 1.0, 0.0]
    """
    return bind(dynamic_update_slice_p, x, update, *start_indices)


# ---------------------------------------------------------------------------------------------------------- pad
pad_p = Primitive("pad")
pad_p.linear_in = "all"


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
    ct_pv = E.sub(R.reduce_sum(ct, axes), R.reduce_sum(ct_x, axes)) if is_undefined(pv) else None
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
    return E.select_n(where, out, broadcast_in_dim(pv, out.shape, (0,))), 0


def pad(x, padding_value, padding_config: Sequence[tuple[int, int, int]]):
    """Pad with ``(low, high, interior)`` per dimension; negative low/high crop.

    Example::

        >>> lax.pad(fnp.ones(2), fnp.asarray(0.0), [(1, 0, 1)]).tolist()
        [0.0, 1.0, 0.0, 1.0]
    """
    return bind(pad_p, x, padding_value, padding_config=tuple(tuple(int(v) for v in c) for c in padding_config))


# -------------------------------------------------------------------------------------------------- concatenate
concatenate_p = Primitive("concatenate")
concatenate_p.linear_in = "all"


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
    return bind(concatenate_p, *operands, dimension=_from_end(dimension, operands))


# --------------------------------------------------------------------------------------------------------- sort
sort_p = Primitive("sort", multiple_results=True)


@sort_p.def_abstract_eval
def _sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise TypeError("sort: needs at least one operand")
    x0 = operands[0]
    check_same("sort", "operands", operands, "shape")
    if not 0 <= dimension < len(x0.shape):
        raise TypeError(f"sort: dimension {dimension} is out of range for {short(x0)}")
    if not 1 <= num_keys <= len(operands):
        raise TypeError(f"sort: num_keys={num_keys} must be between 1 and the number of operands ({len(operands)})")
    return [ShapedArray(o.shape, o.dtype, is_weak(o)) for o in operands]


@sort_p.def_jvp
def _sort_jvp(primals, tangents, **params):
    out, nk = sort_p.bind(*primals, **params), params["num_keys"]
    carried = [i for i, (p, t) in enumerate(zip(primals, tangents)) if not is_zero(t) and dtypes.is_float(p.dtype)]
    # tangents ride along with the keys as extra operands: the same permutation, linear in them
    moved = dict(zip(carried, sort_p.bind(*primals[:nk], *[tangents[i] for i in carried], **params)[nk:])
                 if carried else ())
    return out, [moved[i] if i in moved else Zero(tangent_aval(o)) for i, o in enumerate(out)]


@sort_p.def_transpose
def _sort_transpose(cts, *operands, dimension, is_stable, num_keys):
    if any(is_undefined(k) for k in operands[:num_keys]):
        raise TypeError("sort: the sort keys are not linear inputs (only the operands they carry are)")
    lin = [i for i in range(num_keys, len(operands)) if is_undefined(operands[i]) and not is_zero(cts[i])]
    keys = operands[:num_keys]
    perm = sort_p.bind(*keys, iota(dtypes.int64, keys[0].shape, dimension), dimension=dimension,
                       is_stable=is_stable, num_keys=num_keys)[-1]
    # sorting by the permutation sends every cotangent back to where its element came from
    back = dict(zip(lin, sort_p.bind(perm, *[cts[i] for i in lin], dimension=dimension, is_stable=True,
                                        num_keys=1)[1:]))
    return [back.get(i) for i in range(len(operands))]


sort_p.def_batch(front_batch(
    lambda size, *ops, dimension, **params: sort_p.bind(*ops, dimension=dimension + 1, **params)))


def sort(operands, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort ``operands`` along ``dimension`` lexicographically by the first ``num_keys`` of them; the others
    follow the same permutation. NaNs sort last (as in numpy). A single array gives a single array back.

    Example::

        >>> keys, idx = lax.sort((fnp.asarray([3., 1., 2.]), lax.iota('int64', (3,))), num_keys=1)
        >>> idx.tolist()
        [1, 2, 0]
    """
    single = hasattr(operands, "shape")
    ops = [operands] if single else list(operands)
    out = sort_p.bind(*ops, dimension=_from_end(dimension, ops), is_stable=bool(is_stable), num_keys=int(num_keys))
    return out[0] if single else out


__all__ = ["full", "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "rev", "iota", "slice",
           "dynamic_slice", "dynamic_update_slice", "pad", "concatenate", "sort"]
