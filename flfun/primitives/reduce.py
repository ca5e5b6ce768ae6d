"""Reductions (sum, max, min, prod, argmax, argmin, any, all) and cumulative scans (cumsum, cumprod, cummax,
cummin). Reductions take a tuple of distinct, non-negative ``axes``."""
from __future__ import annotations

from flfun.core import Primitive, ShapedArray, bind, is_weak, short
from flfun.primitives.common import check_kinds, linear_jvp, not_mapped


def _reduce_shape(op: str, x, axes) -> tuple[int, ...]:
    if len(set(axes)) != len(axes) or any(not 0 <= a < len(x.shape) for a in axes):
        raise TypeError(f"{op}: axes {axes} must be distinct and within the rank of {short(x)}")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def batch_axes(axes, bdim):
    """Reduction axes after a mapped axis was inserted at ``bdim``, and where the mapped axis ends up."""
    new_axes = tuple(a + (a >= bdim) for a in axes)
    return new_axes, bdim - sum(a < bdim for a in axes)


def reduction_batch(prim: Primitive):
    def rule(axis, args, dims, **params):
        (x,), (d,) = args, dims
        new_axes, out_dim = batch_axes(params.pop("axes"), d)
        return prim.bind(x, axes=new_axes, **params), out_dim
    return rule


# --------------------------------------------------------------------------------------------------- reduce_sum
reduce_sum_p = Primitive("reduce_sum")


@reduce_sum_p.def_abstract_eval
def _reduce_sum_abstract_eval(x, *, axes):
    check_kinds("reduce_sum", "num", x)
    return ShapedArray(_reduce_shape("reduce_sum", x, axes), x.dtype, is_weak(x))


reduce_sum_p.def_jvp(linear_jvp(reduce_sum_p))


@reduce_sum_p.def_transpose
def _reduce_sum_transpose(ct, x, *, axes):
    from flfun.primitives.shape import broadcast_in_dim
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


reduce_sum_p.def_batch(reduction_batch(reduce_sum_p))


def reduce_sum(x, axes):
    """Sum over ``axes`` (a tuple of non-negative ints): ``lax.reduce_sum(x, (0,))``."""
    return bind(reduce_sum_p, x, axes=tuple(int(a) for a in axes))


del not_mapped
