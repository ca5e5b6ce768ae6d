"""The few primitives that every family's rules call, and the rule builders that call them.

``full``, ``convert_element_type``, ``broadcast_in_dim``, ``reshape``, ``transpose``, ``reduce_sum`` (and ``iota``) move
tangents and batch axes around: symbolic zeros are instantiated with ``full``, batching rules move mapped axes
with ``transpose`` and ``broadcast_in_dim``, transposes of broadcasting sum with ``reduce_sum``. They live here so
that the families import downward only (``base`` <- ``rules`` <- elementwise, shape, ...).
"""
from __future__ import annotations

from typing import Callable, Sequence

from flfun import dtypes
from flfun.array import Array
from flfun.core import Primitive, ShapedArray, bind, is_weak, short, to_array
from flfun.primitives.common import (Zero, batch_axes, check_kinds, guarded_jvp, jvp_rule, not_mapped, tangent_aval,
                                     vectorized_batch)
from flfun.util import prod


MAX_SIZE = 2 ** 63 - 1      # the most elements an array can index (numpy's intp)


def check_size(op: str, shape: Sequence[int]) -> None:
    """A ValueError naming ``op`` when ``shape`` has more elements than an array can index."""
    if prod(shape) > MAX_SIZE:
        raise ValueError(f"{op}: shape {tuple(shape)} has {prod(shape):.3g} elements, more than the 2**63 - 1 an "
                         f"array can hold")


# ------------------------------------------------------------------------------------------ rule builders
def instantiate(t):
    """A real zeros array for a symbolic Zero (other values pass through)."""
    if type(t) is Zero:
        return full(t.aval.shape, 0, t.aval.dtype)
    return t


def moveaxis_to_front(x, bdim, size: int):
    """``x`` with its mapped axis first; an unmapped ``x`` is broadcast to have one of length ``size``."""
    if bdim is not_mapped:
        return broadcast_in_dim(x, (size,) + tuple(x.shape), tuple(range(1, len(x.shape) + 1)))
    return moveaxis(x, bdim, 0)


def moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    perm = [i for i in range(len(x.shape)) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def broadcasting_batch(prim: Primitive) -> Callable:
    """Batch rule for broadcasting elementwise ops: align ranks with the mapped axis in front."""
    def rule(axis, args, dims, **params):
        rank = max(len(a.shape) - (d is not not_mapped) for a, d in zip(args, dims))
        new_args = []
        # numpy broadcasting aligns unmapped operands from the right; mapped ones get their mapped axis first and
        # then size-1 axes so that the rest lines up the same way
        for a, d in zip(args, dims):
            if d is not not_mapped:
                a = moveaxis(a, d, 0)
                if len(a.shape) <= rank:
                    a = reshape(a, (a.shape[0],) + (1,) * (rank + 1 - len(a.shape)) + tuple(a.shape[1:]))
            new_args.append(a)
        return prim.bind(*new_args, **params), 0
    return rule


def front_batch(fn: Callable) -> Callable:
    """Batch rule ``fn(size, *args, **params)`` on operands whose mapped axis was moved to the front (unmapped ones
    broadcast); the result (or each of a list of results) is mapped along axis 0."""
    def rule(axis, args, dims, **params):
        out = fn(axis.size, *[moveaxis_to_front(a, d, axis.size) for a, d in zip(args, dims)], **params)
        return out, ([0] * len(out) if isinstance(out, list) else 0)
    return rule


def unbroadcast(ct, aval):
    """Sum ``ct`` down to ``aval``'s shape: the transpose of numpy broadcasting."""
    shape = tuple(aval.shape)
    if tuple(ct.shape) == shape:
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1 and ct.shape[i + lead] != 1)
    if axes:
        ct = reduce_sum(ct, axes)
    return reshape(ct, shape) if tuple(ct.shape) != shape else ct


def broadcast_to_shape(x, shape: Sequence[int]):
    """numpy-style broadcast of ``x`` to ``shape`` via broadcast_in_dim (a no-op when shapes match)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    lead = len(shape) - len(x.shape)
    return broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def linear_jvp(prim: Primitive, nlinear: int | None = None) -> Callable:
    """jvp of a primitive linear in its first ``nlinear`` operands (default: all), the rest (start indices)
    being held fixed: apply it to those tangents (zeros instantiated) and the other primals."""
    def rule(out, primals, tangents, **params):
        lin = tangents[:nlinear]
        return prim.bind(*[instantiate(t) for t in lin], *primals[len(lin):], **params)
    return guarded_jvp(prim, rule, False, slice(nlinear))


def linear(prim: Primitive, nlinear: int | None = None) -> Callable:
    """Register ``linear_jvp(prim, nlinear)`` and return ``prim.def_transpose`` (to decorate the transpose)."""
    prim.def_jvp(linear_jvp(prim, nlinear))
    return prim.def_transpose


def reduction(name: str, kinds: str, jvp=None, **facts) -> Primitive:
    """A reduction primitive over a tuple of ``axes`` with its shape rule and batching rule; ``jvp(p)`` gives its
    jvp rule (None: the caller adds it)."""
    p = Primitive(name, **facts)
    if jvp is not None:
        p.def_jvp(jvp(p))

    @p.def_abstract_eval
    def abstract_eval(x, *, axes):
        check_kinds(name, kinds, x)
        if (not isinstance(axes, tuple) or len(set(axes)) != len(axes)
                or any(type(a) is not int or not 0 <= a < len(x.shape) for a in axes)):
            raise TypeError(f"{name}: axes {axes!r} must be a tuple of distinct ints within the rank of {short(x)}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, is_weak(x))

    @p.def_batch
    def batch(axis_data, args, dims, *, axes):
        axes, out_dim = batch_axes(axes, dims[0])
        return p.bind(args[0], axes=axes), out_dim
    return p


# ------------------------------------------------------------------------------------------------- full
def full(shape, fill_value, dtype):
    """An array of ``shape`` filled with a scalar or 0-d array: ``lax.full((2, 3), 0.0, 'float32')``."""
    dtype = dtypes.canonicalize(dtype)
    if not isinstance(fill_value, Array):
        fill_value = to_array(fill_value, dtype)
    elif fill_value.dtype != dtype:
        fill_value = convert_element_type(fill_value, dtype)
    shape = tuple(shape)
    return fill_value if shape == () and fill_value.shape == () else broadcast_in_dim(fill_value, shape, ())


# ------------------------------------------------------------------------------------------ convert_element_type
convert_element_type_p = Primitive("convert_element_type", linear_in="all", value_preserving=True)


@convert_element_type_p.def_abstract_eval
def _convert_element_type_abstract_eval(x, *, new_dtype, weak_type=False):
    return ShapedArray(x.shape, dtypes.canonicalize(new_dtype), weak_type)


@jvp_rule(convert_element_type_p)
def _convert_element_type_jvp(out, primals, tangents, *, new_dtype, weak_type=False):
    (x,), (t,) = primals, tangents
    return convert_element_type(t, new_dtype) if dtypes.is_inexact(x.dtype) else Zero(tangent_aval(out))


@convert_element_type_p.def_transpose
def _convert_element_type_transpose(ct, x, *, new_dtype, weak_type=False):
    return [convert_element_type(ct, x.aval.dtype)]


convert_element_type_p.def_batch(vectorized_batch(convert_element_type_p))


def convert_element_type(x, new_dtype, weak_type: bool = False):
    """Cast to ``new_dtype``: ``lax.convert_element_type(x, 'float32')``."""
    return bind(convert_element_type_p, x, new_dtype=dtypes.canonicalize(new_dtype), weak_type=weak_type)


# -------------------------------------------------------------------------------------------- broadcast_in_dim
broadcast_in_dim_p = Primitive("broadcast_in_dim", linear_in="all", value_preserving=True, chain=lambda p1, p2: {
    **p2, "broadcast_dimensions": tuple(p2["broadcast_dimensions"][i] for i in p1["broadcast_dimensions"])})


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
    check_size("broadcast_in_dim", shape)
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
    return [reshape(reduce_sum(ct, summed) if summed else ct, in_shape)]


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
# (reshape(reshape(y)) is one reshape)
reshape_p = Primitive("reshape", linear_in="all", value_preserving=True, chain=lambda p1, p2: p2)


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
transpose_p = Primitive("transpose", linear_in="all", value_preserving=True, chain=lambda p1, p2: {
    **p2, "permutation": tuple(p1["permutation"][i] for i in p2["permutation"])})


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


# --------------------------------------------------------------------------------------------------- reduce_sum
reduce_sum_p = reduction("reduce_sum", "number", linear_jvp, linear_in="all")


@reduce_sum_p.def_transpose
def _reduce_sum_transpose(ct, x, *, axes):
    return [broadcast_in_dim(ct, x.aval.shape, tuple(i for i in range(len(x.aval.shape)) if i not in axes))]


def reduce_sum(x, axes):
    """Sum over ``axes`` (non-negative ints).

    Example::

        >>> lax.reduce_sum(fnp.ones((2, 3)), (1,)).tolist()
        [3.0, 3.0]
    """
    return bind(reduce_sum_p, x, axes=(int(axes),) if isinstance(axes, int) else tuple(map(int, axes)))


# --------------------------------------------------------------------------------------------------------- iota
iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype, shape, dimension, device=None):
    if not (dtypes.is_int(dtype) or dtypes.is_float(dtype)):
        raise TypeError(f"iota: dtype must be an integer or floating type, got {dtype}")
    if any(d < 0 for d in shape):
        raise TypeError(f"iota: negative size in shape {shape}")
    check_size("iota", shape)
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


__all__ = ["MAX_SIZE", "check_size",
           "broadcast_in_dim", "broadcast_in_dim_p", "broadcast_to_shape", "broadcasting_batch", "convert_element_type",
           "convert_element_type_p", "front_batch", "full", "instantiate", "iota", "iota_p", "linear", "linear_jvp", "moveaxis",
           "moveaxis_to_front", "reduce_sum", "reduce_sum_p", "reduction", "reshape", "reshape_p", "transpose",
           "transpose_p", "unbroadcast"]
