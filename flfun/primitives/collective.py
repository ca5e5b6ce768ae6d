"""Collectives over named mapped axes: psum, pmax, pmin (and pmean), axis_index.

A collective names the axes it reduces over (``axes``); ``bind`` routes it to the trace that maps that axis
(``vmap(..., axis_name=)`` or ``pmap``), whose batching rule does the reduction, so the same code runs under
both. Outside any mapped axis of that name it is an error.
"""
from __future__ import annotations

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, axis_main, bind, is_weak
from flfun.primitives.common import Zero, is_zero, not_mapped, tangent_aval_of


def _axes(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _collective(name: str) -> Primitive:
    p = Primitive(name)
    p.collective = True
    p.def_abstract_eval(lambda x, *, axes: ShapedArray(x.shape, x.dtype, is_weak(x)))
    return p


def _reduce_batch(prim, reduce_fn, scale_unmapped):
    """Reduce over the mapped axis when this level's name is among ``axes``; pass through otherwise."""
    def rule(axis, args, dims, *, axes):
        (x,), (d,) = args, dims
        if axis.name not in axes:
            return prim.bind(x, axes=axes), d
        out = scale_unmapped(x, axis.size) if d is not_mapped else reduce_fn(x, (d,))
        rest = tuple(a for a in axes if a != axis.name)
        return (prim.bind(out, axes=rest) if rest else out), not_mapped
    return rule


# --------------------------------------------------------------------------------------------------------- psum
psum_p = _collective("psum")


def _psum_unmapped(x, size):
    from flfun.primitives.elementwise import mul
    from flfun.primitives.shape import full
    return mul(x, full((), size, x.dtype))


def _reduce_sum(x, axes):
    from flfun.primitives.reduce import reduce_sum
    return reduce_sum(x, axes)


psum_p.def_batch(_reduce_batch(psum_p, _reduce_sum, _psum_unmapped))


@psum_p.def_jvp
def _psum_jvp(primals, tangents, *, axes):
    (x,), (t,) = primals, tangents
    out = psum_p.bind(x, axes=axes)
    return out, (Zero(tangent_aval_of(out)) if is_zero(t) else psum_p.bind(t, axes=axes))


# every member receives the sum, so the cotangent of each input is the sum of all members' cotangents
psum_p.def_transpose(lambda ct, x, *, axes: [psum_p.bind(ct, axes=axes)])


def psum(x, axis_name):
    """Sum ``x`` (a pytree) over the mapped axis ``axis_name`` (or a tuple of names).

    Example::

        >>> fl.vmap(lambda v: v / psum(v, 'i'), axis_name='i')(fnp.arange(1.0, 4.0))  # normalise
    """
    from flfun.tree import tree_map
    axes = _axes(axis_name)
    return tree_map(lambda a: bind(psum_p, a, axes=axes), x)


def axis_size(axis_name) -> int:
    """The size of the named mapped axis (a static Python int)."""
    size = 1
    for name in _axes(axis_name):
        size *= axis_main(name, "axis_size").global_data.size
    return size


def pmean(x, axis_name):
    """Mean of ``x`` over the named mapped axis: ``psum(x, name) / axis_size(name)``."""
    from flfun.primitives.elementwise import div
    from flfun.primitives.shape import full
    from flfun.tree import tree_map
    n = axis_size(axis_name)
    return tree_map(lambda s: div(s, full((), n, s.dtype)), psum(x, axis_name))


# ---------------------------------------------------------------------------------------------------- pmax/pmin
def _extreme(name, reduce_name):
    p = _collective(name)

    def reduce_fn(x, axes):
        from flfun.primitives import reduce as R
        return getattr(R, reduce_name)(x, axes)
    p.def_batch(_reduce_batch(p, reduce_fn, lambda x, size: x))

    @p.def_jvp
    def _jvp(primals, tangents, *, axes):
        from flfun.primitives.elementwise import convert_element_type, div, eq, mul
        (x,), (t,) = primals, tangents
        out = p.bind(x, axes=axes)
        if is_zero(t):
            return out, Zero(tangent_aval_of(out))
        # ties share the tangent evenly, as reduce_max does
        hit = convert_element_type(eq(x, out), x.dtype)
        return out, div(psum_p.bind(mul(t, hit), axes=axes), psum_p.bind(hit, axes=axes))
    return p


pmax_p = _extreme("pmax", "reduce_max")
pmin_p = _extreme("pmin", "reduce_min")


def pmax(x, axis_name):
    """Maximum of ``x`` over the named mapped axis."""
    return bind(pmax_p, x, axes=_axes(axis_name))


def pmin(x, axis_name):
    """Minimum of ``x`` over the named mapped axis."""
    return bind(pmin_p, x, axes=_axes(axis_name))


# -------------------------------------------------------------------------------------------------- axis_index
axis_index_p = Primitive("axis_index")
axis_index_p.collective = True
axis_index_p.def_abstract_eval(lambda *, axes: ShapedArray((), dtypes.int32))


@axis_index_p.def_batch
def _axis_index_batch(axis, args, dims, *, axes):
    from flfun.primitives.shape import iota
    return iota(dtypes.int32, (axis.size,), 0), 0


axis_index_p.def_jvp(lambda primals, tangents, *, axes: (axis_index_p.bind(axes=axes),
                                                         Zero(ShapedArray((), dtypes.int32))))


def axis_index(axis_name):
    """This member's position (int32) along the named mapped axis: ``fl.vmap(lambda _: axis_index('i'),
    axis_name='i')(fnp.zeros(3)) -> [0, 1, 2]``."""
    return bind(axis_index_p, axes=(axis_name,))


__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index", "axis_size", "psum_p", "pmax_p", "pmin_p",
           "axis_index_p"]
