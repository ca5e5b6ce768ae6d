"""Shape primitives: squeeze, expand_dims, rev, sort (broadcast_in_dim, reshape, transpose and iota are in
``base``, slices, pads and concatenation in ``slicing``; this module's namespace has them all, as ``lax`` does). All but sort and iota are linear: their transposes move
cotangents back to the operand's layout; sort carries tangents as extra operands (linear in them, so it transposes
too)."""
from __future__ import annotations

from typing import Sequence

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, is_weak, short
from flfun.primitives.common import from_end
from flfun.primitives.rules import (Zero, batch_axes, check_same, front_batch, is_undefined, is_zero, linear,
                                    tangent_aval)
from flfun.primitives.base import broadcast_in_dim, full, iota, reshape, transpose  # noqa: F401
from flfun.primitives.slicing import (concatenate, concatenate_p, dynamic_slice, dynamic_slice_p,  # noqa: F401
                                      dynamic_update_slice, pad, slice, slice_in_dim)


def _check_dims(op: str, x, dimensions, rank: int) -> None:
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < rank for d in dimensions):
        raise TypeError(f"{op}: dimensions {dimensions} must be distinct and within rank {rank} for {short(x)}")


def _bind_dims(prim: Primitive, x, dimensions, rank: int):
    """Bind ``prim`` with sorted ``dimensions``, negative ones counted from the end of ``rank`` (out-of-range ones
    are left for the abstract eval to reject); no dimensions: ``x`` itself."""
    dims = tuple(sorted(int(d) + rank if -rank <= int(d) < 0 else int(d) for d in dimensions))
    return bind(prim, x, dimensions=dims) if dims else x


# ------------------------------------------------------------------------------------------------------ squeeze
squeeze_p = Primitive("squeeze", linear_in="all")


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
expand_dims_p = Primitive("expand_dims", linear_in="all")


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
rev_p = Primitive("rev", linear_in="all")


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
    carried = [i for i, (p, t) in enumerate(zip(primals, tangents)) if not is_zero(t) and dtypes.is_inexact(p.dtype)]
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
    out = sort_p.bind(*ops, dimension=from_end(dimension, ops), is_stable=bool(is_stable), num_keys=int(num_keys))
    return out[0] if single else out


__all__ = ["squeeze", "expand_dims", "rev", "sort"]
