"""Reductions (reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_or, reduce_and, argmax, argmin) and
cumulative scans (cumsum, cumprod, cummax, cummin). Reductions take a tuple of distinct, non-negative ``axes``;
scans and arg-reductions one non-negative ``axis``. The derivatives of products and running extrema are built
from pairwise combinations (a tree or a log-step scan), so they stay exact when entries are zero."""
from __future__ import annotations

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, is_weak, short
from flfun.primitives import elementwise as E, shape as S
from flfun.primitives.base import reduce_sum, reduce_sum_p  # noqa: F401  (reduce.reduce_sum_p)
from flfun.primitives.rules import batch_axes, check_kinds, guarded_jvp, jvp_rule, linear_jvp, reduction, zero_jvp
from flfun.util import prod


def _axis_op(name: str, kinds: str, out_aval, keeps_axis: bool, jvp=None, **facts) -> Primitive:
    """A primitive over one ``axis`` (arg-reductions, scans): the shared checks, then ``out_aval(name, x, axis,
    **params)``; batching renumbers ``axis``; ``jvp(p)`` gives the jvp rule (None: the caller adds it)."""
    p = Primitive(name, **facts)
    if jvp is not None:
        p.def_jvp(jvp(p))

    @p.def_abstract_eval
    def abstract_eval(x, *, axis, **params):
        check_kinds(name, kinds, x)
        if type(axis) is not int or not 0 <= axis < len(x.shape):
            raise TypeError(f"{name}: axis {axis!r} is out of range for {short(x)} (it must be in [0, rank))")
        return out_aval(name, x, axis, **params)

    @p.def_batch
    def batch(axis_data, args, dims, *, axis, **params):
        (axis,), out_dim = batch_axes((axis,), dims[0])
        return p.bind(args[0], axis=axis, **params), dims[0] if keeps_axis else out_dim
    return p


def _norm_axes(axes) -> tuple[int, ...]:
    return (int(axes),) if isinstance(axes, int) else tuple(map(int, axes))


def _kept(x, axes) -> tuple[int, ...]:
    return tuple(i for i in range(len(x.shape)) if i not in axes)


# ------------------------------------------------------------------------------------------ reduce_max / reduce_min
def _chooser_jvp(prim: Primitive):
    """The tangent at the positions that attain the extremum, averaged over ties (JAX's chooser rule)."""
    def rule(out, primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        hit = E.convert_element_type(E.eq(x, S.broadcast_in_dim(out, x.shape, _kept(x, axes))), x.dtype)
        return E.div(reduce_sum(E.mul(t, hit), axes), reduce_sum(hit, axes))
    return guarded_jvp(prim, rule)


reduce_max_p = reduction("reduce_max", "any", _chooser_jvp)
reduce_min_p = reduction("reduce_min", "any", _chooser_jvp)


def reduce_max(x, axes):
    """Maximum over ``axes``; over an empty axis it is the identity (-inf, the integer minimum or False).

    Example::

        >>> lax.reduce_max(fnp.asarray([[1., 5.], [7., 2.]]), (0,)).tolist()
        [7.0, 5.0]
    """
    return bind(reduce_max_p, x, axes=_norm_axes(axes))


def reduce_min(x, axes):
    """Minimum over ``axes``; over an empty axis it is the identity (inf, the integer maximum or True).

    Example::

        >>> lax.reduce_min(fnp.asarray([[1., 5.], [7., 2.]]), (1,)).tolist()
        [1.0, 2.0]
    """
    return bind(reduce_min_p, x, axes=_norm_axes(axes))


# -------------------------------------------------------------------------------------------------- reduce_prod
reduce_prod_p = reduction("reduce_prod", "number")


@jvp_rule(reduce_prod_p)
def _reduce_prod_jvp(out, primals, tangents, *, axes):
    (x,), (t,) = primals, tangents
    # reduced axes last and flattened into axis k; then d prod = sum_i t_i * (product of the entries before i) *
    # (product of those after i), which divides by no entry
    perm, k = _kept(x, axes) + tuple(axes), len(out.shape)
    shape = tuple(out.shape) + (prod(x.shape[a] for a in axes),)
    x, t = (S.reshape(S.transpose(v, perm), shape) for v in (x, t))
    before, after = _shift(cumprod(x, k), k, 1, 1, False), _shift(cumprod(x, k, True), k, 1, 1, True)
    return reduce_sum(E.mul(t, E.mul(before, after)), (k,))


def reduce_prod(x, axes):
    """Product over ``axes``; its derivative is exact also where entries are zero.

    Example::

        >>> lax.reduce_prod(fnp.asarray([[1., 2.], [3., 4.]]), (0, 1)).tolist()
        24.0
    """
    return bind(reduce_prod_p, x, axes=_norm_axes(axes))


# ------------------------------------------------------------------------------------------ reduce_or / reduce_and
reduce_or_p = reduction("reduce_or", "bool", zero_jvp)
reduce_and_p = reduction("reduce_and", "bool", zero_jvp)


def reduce_or(x, axes):
    """Logical or of a boolean array over ``axes`` (False over an empty axis): ``lax.reduce_or(m, (0,))``."""
    return bind(reduce_or_p, x, axes=_norm_axes(axes))


def reduce_and(x, axes):
    """Logical and of a boolean array over ``axes`` (True over an empty axis): ``lax.reduce_and(m, (0,))``."""
    return bind(reduce_and_p, x, axes=_norm_axes(axes))


# ------------------------------------------------------------------------------------------------ argmax / argmin
def _arg_aval(name, x, axis, *, index_dtype):
    if not dtypes.is_int(index_dtype):
        raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype} for {short(x)}")
    if x.shape[axis] == 0:
        raise ValueError(f"{name}: axis {axis} of {short(x)} is empty; {name} needs at least one element")
    return ShapedArray(x.shape[:axis] + x.shape[axis + 1:], index_dtype)


argmax_p = _axis_op("argmax", "any", _arg_aval, False, zero_jvp)
argmin_p = _axis_op("argmin", "any", _arg_aval, False, zero_jvp)


def argmax(x, axis: int, index_dtype):
    """Index of the first maximum along ``axis`` (the first NaN, if any, as numpy does).

    Example::

        >>> lax.argmax(fnp.asarray([1., 7., 7.]), 0, "int32").tolist()
        1
    """
    return bind(argmax_p, x, axis=int(axis), index_dtype=dtypes.canonicalize(index_dtype))


def argmin(x, axis: int, index_dtype):
    """Index of the first minimum along ``axis`` (the first NaN, if any, as numpy does).

    Example::

        >>> lax.argmin(fnp.asarray([3., 1., 1.]), 0, "int64").tolist()
        1
    """
    return bind(argmin_p, x, axis=int(axis), index_dtype=dtypes.canonicalize(index_dtype))


# ----------------------------------------------------------------------------------------------------- scans
def _scan(name: str, jvp=None, kinds: str = "num", **facts) -> Primitive:
    return _axis_op(name, kinds, lambda name, x, axis, *, reverse: ShapedArray(x.shape, x.dtype, is_weak(x)), True,
                    jvp, inplace=(0,), **facts)


def _shift(x, axis: int, d: int, fill, reverse: bool):
    """``x`` moved ``d`` places along ``axis`` in scan order; the vacated places hold ``fill``."""
    cfg = [(0, 0, 0)] * len(x.shape)
    cfg[axis] = (-d, d, 0) if reverse else (d, -d, 0)     # negative padding crops what moves out
    return S.pad(x, S.full((), fill, x.dtype), cfg)


def _log_step_scan(x, t, axis, reverse, identity, combine):
    """Inclusive scan of (value, tangent) pairs in log2(n) steps (Hillis-Steele); returns the tangents.
    ``combine(prev, tprev, cur, tcur)`` joins the earlier partial result with the later one."""
    d = 1
    while d < x.shape[axis]:
        prev, tprev = _shift(x, axis, d, identity, reverse), _shift(t, axis, d, 0, reverse)
        x, t = combine(prev, tprev, x, t)
        d *= 2
    return t


cumsum_p = _scan("cumsum", linear_jvp, "number", linear_in="all")


@cumsum_p.def_transpose
def _cumsum_transpose(ct, x, *, axis, reverse):
    return [cumsum(ct, axis, not reverse)]


def cumsum(x, axis: int, reverse: bool = False):
    """Running sum along ``axis`` (from the end with ``reverse``).

    Example::

        >>> lax.cumsum(fnp.asarray([1., 2., 3.]), 0).tolist()
        [1.0, 3.0, 6.0]
    """
    return bind(cumsum_p, x, axis=int(axis), reverse=bool(reverse))


cumprod_p = _scan("cumprod", kinds="number")


@jvp_rule(cumprod_p)
def _cumprod_jvp(out, primals, tangents, *, axis, reverse):
    def combine(a, ta, b, tb):   # the product rule, so no division by entries that may be zero
        return E.mul(a, b), E.add(E.mul(ta, b), E.mul(a, tb))
    return _log_step_scan(*primals, *tangents, axis, reverse, 1, combine)


def cumprod(x, axis: int, reverse: bool = False):
    """Running product along ``axis`` (from the end with ``reverse``).

    Example::

        >>> lax.cumprod(fnp.asarray([1., 2., 3.]), 0).tolist()
        [1.0, 2.0, 6.0]
    """
    return bind(cumprod_p, x, axis=int(axis), reverse=bool(reverse))


def _cum_extremum_jvp(prim: Primitive, earlier_wins):
    """The tangent of the element each running extremum comes from (the earliest one on ties)."""
    def rule(out, primals, tangents, *, axis, reverse):
        def combine(a, ta, b, tb):   # the NaN fill never wins a comparison, so it is never picked
            pick = earlier_wins(a, b)
            return E.select(pick, a, b), E.select(pick, ta, tb)
        return _log_step_scan(*primals, *tangents, axis, reverse, float("nan"), combine)
    return guarded_jvp(prim, rule)


cummax_p = _scan("cummax", lambda p: _cum_extremum_jvp(p, lambda a, b: E.ge(a, b)))
cummin_p = _scan("cummin", lambda p: _cum_extremum_jvp(p, lambda a, b: E.le(a, b)))


def cummax(x, axis: int, reverse: bool = False):
    """Running maximum along ``axis`` (from the end with ``reverse``).

    Example::

        >>> lax.cummax(fnp.asarray([1., 3., 2.]), 0).tolist()
        [1.0, 3.0, 3.0]
    """
    return bind(cummax_p, x, axis=int(axis), reverse=bool(reverse))


def cummin(x, axis: int, reverse: bool = False):
    """Running minimum along ``axis`` (from the end with ``reverse``).

    Example::

        >>> lax.cummin(fnp.asarray([3., 1., 2.]), 0).tolist()
        [3.0, 1.0, 1.0]
    """
    return bind(cummin_p, x, axis=int(axis), reverse=bool(reverse))


__all__ = ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_or", "reduce_and", "argmax", "argmin",
           "cumsum", "cumprod", "cummax", "cummin", "reduce_max_p", "reduce_min_p", "reduce_prod_p",
           "reduce_or_p", "reduce_and_p", "argmax_p", "argmin_p", "cumsum_p", "cumprod_p", "cummax_p", "cummin_p"]
