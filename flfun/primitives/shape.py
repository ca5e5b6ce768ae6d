"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, slice, dynamic_slice,
dynamic_update_slice, pad, concatenate, iota, sort. All but sort and iota are linear: their transposes move
cotangents back to the operand's layout."""
from __future__ import annotations

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, is_weak, short, to_array
from flfun.primitives.common import linear_jvp, moveaxis_to_front
from flfun.util import prod


def full(shape, fill_value, dtype):
    """An array of ``shape`` filled with ``fill_value``: ``lax.full((2, 3), 0.0, 'float32')``."""
    from flfun.core import Tracer
    from flfun.array import Array
    dtype = dtypes.canonicalize(dtype)
    if isinstance(fill_value, Array) or isinstance(fill_value, Tracer):
        from flfun.primitives.elementwise import convert_element_type
        scalar = fill_value if fill_value.dtype == dtype else convert_element_type(fill_value, dtype)
    else:
        scalar = to_array(fill_value, dtype)
    return broadcast_in_dim(scalar, tuple(shape), ())


# -------------------------------------------------------------------------------------------- broadcast_in_dim
broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    bd = broadcast_dimensions
    if len(bd) != len(x.shape):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {bd} must have one entry per operand "
                        f"dimension of {short(x)}")
    if any(b >= len(shape) or b < 0 for b in bd) or any(a >= b for a, b in zip(bd, bd[1:])):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {bd} must be strictly increasing and "
                        f"within the target rank {len(shape)}")
    for d, b in zip(x.shape, bd):
        if d not in (1, shape[b]):
            raise TypeError(f"broadcast_in_dim: operand {short(x)} cannot be broadcast to shape {shape} "
                            f"with broadcast_dimensions {bd}")
    return ShapedArray(shape, x.dtype, is_weak(x))


broadcast_in_dim_p.def_jvp(linear_jvp(broadcast_in_dim_p))


@broadcast_in_dim_p.def_transpose
def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    from flfun.primitives.reduce import reduce_sum
    in_shape = x.aval.shape
    bd = broadcast_dimensions
    summed = tuple(i for i in range(len(shape)) if i not in bd)
    summed += tuple(b for d, b in zip(in_shape, bd) if d == 1 and shape[b] != 1)
    out = reduce_sum(ct, tuple(sorted(summed))) if summed else ct
    return [reshape(out, in_shape) if tuple(out.shape) != tuple(in_shape) else out]


@broadcast_in_dim_p.def_batch
def _broadcast_in_dim_batch(axis, args, dims, *, shape, broadcast_dimensions):
    x = moveaxis_to_front(args[0], dims[0], axis.size)
    return broadcast_in_dim(x, (axis.size,) + tuple(shape),
                            (0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast ``x`` into ``shape``, operand dim ``i`` going to ``broadcast_dimensions[i]``."""
    return bind(broadcast_in_dim_p, x, shape=tuple(int(d) for d in shape),
                broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


# ------------------------------------------------------------------------------------------------------ reshape
reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes):
    if any(d < 0 for d in new_sizes) or prod(new_sizes) != prod(x.shape):
        raise TypeError(f"reshape: cannot reshape {short(x)} ({prod(x.shape)} elements) into shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, is_weak(x))


reshape_p.def_jvp(linear_jvp(reshape_p))
reshape_p.def_transpose(lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)])


@reshape_p.def_batch
def _reshape_batch(axis, args, dims, *, new_sizes):
    x = moveaxis_to_front(args[0], dims[0], axis.size)
    return reshape(x, (axis.size,) + tuple(new_sizes)), 0


def reshape(x, new_sizes):
    """Row-major reshape to ``new_sizes`` (no -1: ``flfun.numpy.reshape`` resolves that)."""
    new_sizes = tuple(int(d) for d in new_sizes)
    if tuple(x.shape) == new_sizes:
        return x
    return bind(reshape_p, x, new_sizes=new_sizes)


# ---------------------------------------------------------------------------------------------------- transpose
transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(len(x.shape))):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the axes of {short(x)}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, is_weak(x))


transpose_p.def_jvp(linear_jvp(transpose_p))


@transpose_p.def_transpose
def _transpose_transpose(ct, x, *, permutation):
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return [transpose(ct, tuple(inverse))]


@transpose_p.def_batch
def _transpose_batch(axis, args, dims, *, permutation):
    x = moveaxis_to_front(args[0], dims[0], axis.size)
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


def transpose(x, permutation):
    """Permute axes: output axis ``i`` is input axis ``permutation[i]``."""
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(len(x.shape))):
        return x
    return bind(transpose_p, x, permutation=permutation)


# --------------------------------------------------------------------------------------------------------- iota
iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension, device=None):
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} is out of range for shape {shape}")
    return ShapedArray(shape, dtype)


def iota(dtype, shape, dimension: int = 0):
    """Integers counting up along ``dimension``, broadcast to ``shape``: ``lax.iota('int32', (3,), 0)``."""
    shape = tuple(int(d) for d in shape)
    return bind(iota_p, dtype=dtypes.canonicalize(dtype), shape=shape, dimension=int(dimension))


# -------------------------------------------------------------------------------------------------------- slice
slice_p = Primitive("slice")


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    n = len(x.shape)
    if not (len(start_indices) == len(limit_indices) == len(strides) == n):
        raise TypeError(f"slice: start_indices {start_indices}, limit_indices {limit_indices} and strides "
                        f"{strides} must each have one entry per dimension of {short(x)}")
    for s, l, st, d in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= s <= l <= d) or st < 1:
            raise TypeError(f"slice: start_indices {start_indices} / limit_indices {limit_indices} / strides "
                            f"{strides} are out of bounds for {short(x)}")
    shape = tuple((l - s + st - 1) // st for s, l, st in zip(start_indices, limit_indices, strides))
    return ShapedArray(shape, x.dtype, is_weak(x))


slice_p.def_jvp(linear_jvp(slice_p))


@slice_p.def_transpose
def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    from flfun.primitives.common import instantiate, Zero
    shape = x.aval.shape
    if all(st == 1 for st in strides):
        cfg = tuple((s, d - l, 0) for s, l, d in zip(start_indices, limit_indices, shape))
    else:
        cfg = tuple((s, d - (s + (c - 1) * st + 1) if c else d - s, st - 1 if c else 0)
                    for s, l, st, d, c in zip(start_indices, limit_indices, strides, shape, ct.shape))
    zero = instantiate(Zero(ShapedArray((), ct.dtype)))
    return [pad(ct, zero, cfg)]


@slice_p.def_batch
def _slice_batch(axis, args, dims, *, start_indices, limit_indices, strides):
    x = moveaxis_to_front(args[0], dims[0], axis.size)
    return bind(slice_p, x, start_indices=(0,) + tuple(start_indices),
                limit_indices=(axis.size,) + tuple(limit_indices), strides=(1,) + tuple(strides)), 0


def slice(x, start_indices, limit_indices, strides=None):
    """Static slice ``x[start:limit:stride]`` per dimension: ``lax.slice(x, (0, 1), (2, 3))``."""
    strides = (1,) * len(x.shape) if strides is None else tuple(int(s) for s in strides)
    return bind(slice_p, x, start_indices=tuple(int(s) for s in start_indices),
                limit_indices=tuple(int(s) for s in limit_indices), strides=strides)


# ---------------------------------------------------------------------------------------------------------- pad
pad_p = Primitive("pad")


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


@pad_p.def_jvp
def _pad_jvp(primals, tangents, *, padding_config):
    from flfun.primitives.common import Zero, instantiate, is_zero, tangent_aval_of
    x, pv = primals
    tx, tpv = tangents
    out = pad(x, pv, padding_config)
    if is_zero(tx) and is_zero(tpv):
        return out, Zero(tangent_aval_of(out))
    return out, pad(instantiate(tx), instantiate(tpv), padding_config)


@pad_p.def_transpose
def _pad_transpose(ct, x, pv, *, padding_config):
    from flfun.primitives.reduce import reduce_sum
    from flfun.transforms.vjp import UndefinedPrimal
    lo_neg = [(max(-lo, 0), max(-hi, 0)) for lo, hi, _ in padding_config]
    # undo negative padding by padding back with zeros, then take the strided interior
    unpadded = ct
    if any(a or b for a, b in lo_neg):
        from flfun.primitives.common import Zero, instantiate
        zero = instantiate(Zero(ShapedArray((), ct.dtype)))
        unpadded = pad(ct, zero, tuple((a, b, 0) for a, b in lo_neg))
    starts = tuple(max(lo, 0) for lo, _, _ in padding_config)
    limits = tuple(dim - max(hi, 0) for dim, (_, hi, _) in zip(unpadded.shape, padding_config))
    strides = tuple(i + 1 for _, _, i in padding_config)
    ct_x = slice(unpadded, starts, limits, strides) if type(x) is UndefinedPrimal else None
    ct_pv = None
    if type(pv) is UndefinedPrimal:
        total = reduce_sum(ct, tuple(range(len(ct.shape))))
        inner = reduce_sum(ct_x if ct_x is not None else slice(unpadded, starts, limits, strides),
                           tuple(range(len(ct.shape))))
        from flfun.primitives.elementwise import sub
        ct_pv = sub(total, inner)
    return [ct_x, ct_pv]


@pad_p.def_batch
def _pad_batch(axis, args, dims, *, padding_config):
    x, pv = args
    dx, dpv = dims
    if dpv is not None:
        raise NotImplementedError("pad: batching over the padding value is not supported")
    x = moveaxis_to_front(x, dx, axis.size)
    return pad(x, pv, ((0, 0, 0),) + tuple(padding_config)), 0


def pad(x, padding_value, padding_config):
    """Pad with ``(low, high, interior)`` per dimension (negative low/high crop): ``lax.pad(x, 0., [(1, 1, 0)])``."""
    return bind(pad_p, x, padding_value, padding_config=tuple(tuple(int(v) for v in c) for c in padding_config))
