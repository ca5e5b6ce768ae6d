"""Collectives over named mapped axes: psum, pmax, pmin, pmean, all_gather, psum_scatter, ppermute, all_to_all,
axis_index, axis_size.

A collective names the axes it works over (``axes``); ``bind`` routes it to the trace that maps that axis. Under
``vmap(..., axis_name=)`` the batching rules below do the work on the stacked members; under ``pmap`` the
collective is staged into each device's program and its impl (``flfun/backends/xp/collective.py``) talks to a
communicator. Same rules, same results. Outside any mapped axis of that name a collective is an error.
"""
from __future__ import annotations

import itertools

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, axis_main, bind, is_weak, short
from flfun.primitives import elementwise as E, reduce as R, shape as S
from flfun.primitives.rules import guarded_jvp, linear, moveaxis, moveaxis_to_front, not_mapped, zero_jvp
from flfun.tree import tree_flatten, tree_map, tree_unflatten
from flfun.util import canonical_axis, prod


def _axes(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _one_axis(axis_name, op: str):
    axes = _axes(axis_name)
    if len(axes) != 1:
        raise ValueError(f"{op}: axis_name must name one mapped axis, got {axis_name!r}")
    return axes[0]


def _collective(name: str, abstract_eval=None, *, transpose=None, batch=None, dim_params=()) -> Primitive:
    """A collective primitive. With ``transpose`` it is linear (its jvp applies it to the tangent). ``batch``
    handles the members of a vmapped axis it names (``batch(axis, x, d, **params) -> (out, out_dim)``); over
    other axes it applies to the stacked members: in place for same-shape collectives, else with the members'
    dimension first and the dimension-valued params (``dim_params``) shifted past it."""
    p = Primitive(name)
    p.collective = True
    p.def_abstract_eval(abstract_eval or (lambda x, **params: ShapedArray(x.shape, x.dtype, is_weak(x))))
    if transpose is not None:
        linear(p)(transpose)

    def batch_rule(frame, args, dims, *, axes, **params):
        (x,), (d,) = args, dims
        if frame.name in axes:
            member = x.shape if d is not_mapped else x.shape[:d] + x.shape[d + 1:]
            p.abstract_eval(ShapedArray(member, x.dtype), axes=axes, **params)    # pmap's checks, on one member
            return batch(frame, x, d, axes=axes, **params)
        if not dim_params:
            return p.bind(x, axes=axes, **params), d
        x = moveaxis_to_front(x, d, frame.size)
        return p.bind(x, axes=axes, **{k: v + 1 if k in dim_params else v for k, v in params.items()}), 0
    p.def_batch(batch_rule)
    return p


def _sum_members(x, d, size: int):
    """The sum over a vmapped axis of members mapped along ``d`` (an unmapped ``x``: ``size`` times ``x``)."""
    return E.mul(x, S.full((), size, x.dtype)) if d is not_mapped else R.reduce_sum(x, (d,))


def _reduction(name: str, combine, transpose=None) -> Primitive:
    """Reduce over the vmapped axis when its name is among ``axes`` (then over the remaining names)."""
    def batch(axis, x, d, *, axes):
        rest = tuple(a for a in axes if a != axis.name)
        out = combine(x, d, axis.size)
        return (p.bind(out, axes=rest) if rest else out), not_mapped
    p = _collective(name, transpose=transpose, batch=batch)
    return p


# --------------------------------------------------------------------------------------------------------- psum
# every member receives the sum, so the cotangent of each input is the sum of all members' cotangents
psum_p = _reduction("psum", _sum_members, transpose=lambda ct, x, *, axes: [psum_p.bind(ct, axes=axes)])


def psum(x, axis_name):
    """Sum ``x`` (a pytree) over the mapped axis ``axis_name`` (or a tuple of names).

    Example::

        >>> fl.vmap(lambda v: v / psum(v, 'i'), axis_name='i')(fnp.arange(1.0, 4.0))  # normalise
    """
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, _fused_psum(leaves, _axes(axis_name)))


def _fused_psum(leaves: list, axes: tuple, n: int = 1) -> list:
    """``psum`` of each leaf divided by ``n``, with the arrays of one dtype summed (and divided) as one flat
    buffer: one collective for a whole gradient pytree instead of one per leaf."""
    scale = (lambda s: s) if n == 1 else (lambda s: E.div(s, S.full((), n, s.dtype)))
    groups: dict = {}
    for i, a in enumerate(leaves):
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            groups.setdefault((dtypes.canonicalize(a.dtype), is_weak(a)), []).append(i)
    out = [None] * len(leaves)
    for ids in [ids for ids in groups.values() if len(ids) > 1]:
        sizes = [prod(leaves[i].shape) for i in ids]
        flat = scale(bind(psum_p, S.concatenate([S.reshape(leaves[i], (k,)) for i, k in zip(ids, sizes)], 0),
                          axes=axes))
        for i, start, k in zip(ids, itertools.accumulate([0] + sizes), sizes):
            out[i] = S.reshape(S.slice(flat, (start,), (start + k,)), tuple(leaves[i].shape))
    return [scale(bind(psum_p, a, axes=axes)) if o is None else o for a, o in zip(leaves, out)]


def axis_size(axis_name) -> int:
    """The size of the named mapped axis, or the product of the sizes of a tuple of names (a Python int).

    Example::

        >>> fl.vmap(lambda v: v * axis_size('i'), axis_name='i')(fnp.ones(3)).tolist()
        [3.0, 3.0, 3.0]
    """
    return prod(axis_main(name, "axis_size").global_data.size for name in _axes(axis_name))


def pmean(x, axis_name):
    """Mean of ``x`` over the named mapped axis: ``psum(x, name) / axis_size(name)``.

    Example::

        >>> fl.vmap(lambda v: pmean(v, 'i'), axis_name='i')(fnp.arange(3.0)).tolist()
        [1.0, 1.0, 1.0]
    """
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, _fused_psum(leaves, _axes(axis_name), axis_size(axis_name)))


# ---------------------------------------------------------------------------------------------------- pmax/pmin
def _extreme_jvp(out, primals, tangents, *, axes):
    # ties share the tangent evenly, as reduce_max does
    hit = E.convert_element_type(E.eq(primals[0], out), out.dtype)
    return E.div(psum_p.bind(E.mul(tangents[0], hit), axes=axes), psum_p.bind(hit, axes=axes))


pmax_p = _reduction("pmax", lambda x, d, size: x if d is not_mapped else R.reduce_max(x, (d,)))
pmin_p = _reduction("pmin", lambda x, d, size: x if d is not_mapped else R.reduce_min(x, (d,)))
for _p in (pmax_p, pmin_p):
    _p.def_jvp(guarded_jvp(_p, _extreme_jvp, False))


def pmax(x, axis_name):
    """Maximum of ``x`` over the named mapped axis: ``fl.vmap(lambda v: pmax(v, 'i'), axis_name='i')(x)``."""
    return tree_map(lambda a: bind(pmax_p, a, axes=_axes(axis_name)), x)


def pmin(x, axis_name):
    """Minimum of ``x`` over the named mapped axis: ``fl.vmap(lambda v: pmin(v, 'i'), axis_name='i')(x)``."""
    return tree_map(lambda a: bind(pmin_p, a, axes=_axes(axis_name)), x)


# --------------------------------------------------------------------------------------------------- all_gather
def _all_gather_abstract_eval(x, *, axes, axis, axis_size, tiled):
    shape = list(x.shape)
    shape[axis:axis + tiled] = [shape[axis] * axis_size if tiled else axis_size]     # tiled: grow, else insert
    return ShapedArray(shape, x.dtype, is_weak(x))


def _merge_dims(x, d: int):
    """Merge dimensions ``d`` and ``d + 1`` of ``x`` (row-major)."""
    s = tuple(x.shape)
    return S.reshape(x, s[:d] + (s[d] * s[d + 1],) + s[d + 2:])


def _split_dim(x, d: int, n: int):
    """Split dimension ``d`` of ``x`` into ``(n, size // n)`` (row-major): the inverse of ``_merge_dims``."""
    s = tuple(x.shape)
    return S.reshape(x, s[:d] + (n, s[d] // n) + s[d + 1:])


def _all_gather_batch(frame, x, d, *, axes, axis, axis_size, tiled):
    out = moveaxis(moveaxis_to_front(x, d, frame.size), 0, axis)     # all members' values, in member order
    return (_merge_dims(out, axis) if tiled else out), not_mapped


# member i's input appears in slot i of every member's output: sum those slots over the members
all_gather_p = _collective(
    "all_gather", _all_gather_abstract_eval, batch=_all_gather_batch, dim_params=("axis",),
    transpose=lambda ct, x, *, axes, axis, axis_size, tiled: [
        psum_scatter_p.bind(ct, axes=axes, scatter_dimension=axis, axis_size=axis_size, tiled=tiled)])


def all_gather(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """Every member's ``x`` (a pytree), stacked along a new dimension ``axis`` in member order, or with
    ``tiled=True`` concatenated along the existing dimension ``axis``. A tuple of names gathers over all of
    them, the first name varying slowest.

    Example::

        >>> fl.vmap(lambda v: all_gather(v, 'i'), axis_name='i')(fnp.arange(3.0))[0].tolist()
        [0.0, 1.0, 2.0]
    """
    names = _axes(axis_name)
    sizes = [axis_size(n) for n in names]
    tile = tiled or len(names) > 1

    def one(a):
        nd = len(a.shape)
        ax = canonical_axis(axis, nd if tiled else nd + 1, "all_gather axis")
        if not tiled and len(names) > 1:
            a = S.expand_dims(a, (ax,))
        for name, n in zip(reversed(names), reversed(sizes)):
            a = bind(all_gather_p, a, axes=(name,), axis=ax, axis_size=n, tiled=tile)
        return a
    return tree_map(one, x)


# ------------------------------------------------------------------------------------------------- psum_scatter
def _psum_scatter_abstract_eval(x, *, axes, scatter_dimension, axis_size, tiled):
    shape, d = list(x.shape), scatter_dimension
    if shape[d] % axis_size if tiled else shape[d] != axis_size:
        raise ValueError(f"psum_scatter: dimension {d} of {short(x)} must " + (
            f"be divisible by the axis size {axis_size} (tiled=True)" if tiled else
            f"equal the axis size {axis_size} (or pass tiled=True)"))
    shape[d:d + 1] = [shape[d] // axis_size] if tiled else []
    return ShapedArray(shape, x.dtype, is_weak(x))


def _psum_scatter_batch(axis, x, d, *, axes, scatter_dimension, axis_size, tiled):
    total = _sum_members(x, d, axis.size)
    # tiled: split the dimension into (members, chunk), so that member i's chunk is slot i
    return (_split_dim(total, scatter_dimension, axis.size) if tiled else total), scatter_dimension


psum_scatter_p = _collective(
    "psum_scatter", _psum_scatter_abstract_eval, batch=_psum_scatter_batch, dim_params=("scatter_dimension",),
    transpose=lambda ct, x, *, axes, scatter_dimension, axis_size, tiled: [
        all_gather_p.bind(ct, axes=axes, axis=scatter_dimension, axis_size=axis_size, tiled=tiled)])


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, tiled: bool = False):
    """Reduce-scatter: sum ``x`` over the members and give member ``i`` slot ``i`` of dimension
    ``scatter_dimension`` (whose size must be the axis size; the dimension is removed), or with ``tiled=True``
    the ``i``-th of ``axis_size`` equal chunks of it. ``all_gather(psum_scatter(x, n, tiled=True), n,
    tiled=True) == psum(x, n)``.

    Example::

        >>> fl.vmap(lambda v: psum_scatter(v, 'i'), axis_name='i')(fnp.ones((2, 2))).tolist()
        [2.0, 2.0]
    """
    names = _axes(axis_name)
    sizes = [axis_size(n) for n in names]
    multi = len(names) > 1

    def one(a):
        sd = canonical_axis(scatter_dimension, len(a.shape), "psum_scatter scatter_dimension")
        if multi and not tiled and a.shape[sd] != prod(sizes):
            raise ValueError(f"psum_scatter: dimension {sd} of {short(a)} must equal the axis size "
                             f"{prod(sizes)} (or pass tiled=True)")
        for name, n in zip(names, sizes):
            a = bind(psum_scatter_p, a, axes=(name,), scatter_dimension=sd, axis_size=n, tiled=tiled or multi)
        return S.squeeze(a, (sd,)) if multi and not tiled else a
    return tree_map(one, x)


# ----------------------------------------------------------------------------------------------------- ppermute
def _ppermute_batch(axis, x, d, *, axes, perm):
    x = moveaxis_to_front(x, d, axis.size)
    rest = tuple(x.shape[1:])
    src_of = {dst: src for src, dst in perm}
    rows = [S.slice(x, (src_of[m],) + (0,) * len(rest), (src_of[m] + 1,) + rest) if m in src_of
            else S.full((1,) + rest, 0, x.dtype) for m in range(axis.size)]
    return S.concatenate(rows, 0), 0


ppermute_p = _collective("ppermute", batch=_ppermute_batch, transpose=lambda ct, x, *, axes, perm: [
    ppermute_p.bind(ct, axes=axes, perm=tuple((d, s) for s, d in perm))])


def ppermute(x, axis_name, perm):
    """Send ``x`` (a pytree) along the named axis: ``perm`` lists ``(source, destination)`` member pairs; a
    member that is no destination receives zeros.

    Example::

        >>> shift = [(i, (i + 1) % 3) for i in range(3)]
        >>> fl.vmap(lambda v: ppermute(v, 'i', shift), axis_name='i')(fnp.arange(3.0)).tolist()
        [2.0, 0.0, 1.0]
    """
    name = _one_axis(axis_name, "ppermute")
    n = axis_size(name)
    try:
        pairs = tuple((int(s), int(d)) for s, d in perm)
    except (TypeError, ValueError):
        raise ValueError(f"ppermute: perm must be a sequence of (source, destination) pairs, got {perm!r}") from None
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if any(not 0 <= i < n for i in srcs + dsts) or len(set(srcs)) < len(srcs) or len(set(dsts)) < len(dsts):
        raise ValueError(f"ppermute: perm {perm!r} must pair distinct sources with distinct destinations in "
                         f"[0, {n}) (the size of axis {name!r})")
    return tree_map(lambda a: bind(ppermute_p, a, axes=(name,), perm=pairs), x)


# --------------------------------------------------------------------------------------------------- all_to_all
def _all_to_all_abstract_eval(x, *, axes, split_axis, concat_axis, axis_size):
    shape = list(x.shape)
    if shape[split_axis] != axis_size:
        raise ValueError(f"all_to_all: dimension {split_axis} of {short(x)} must equal the axis size {axis_size}")
    del shape[split_axis]
    shape.insert(concat_axis, axis_size)
    return ShapedArray(shape, x.dtype, is_weak(x))


def _all_to_all_batch(axis, x, d, *, axes, split_axis, concat_axis, axis_size):
    # x[j, ..., i, ...] is what member j sends to member i: a transpose of the stacked members
    return moveaxis(moveaxis(moveaxis_to_front(x, d, axis.size), split_axis + 1, 0), 1, concat_axis + 1), 0


all_to_all_p = _collective(
    "all_to_all", _all_to_all_abstract_eval, batch=_all_to_all_batch, dim_params=("split_axis", "concat_axis"),
    transpose=lambda ct, x, *, axes, split_axis, concat_axis, axis_size: [
        all_to_all_p.bind(ct, axes=axes, split_axis=concat_axis, concat_axis=split_axis, axis_size=axis_size)])


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, tiled: bool = False):
    """Member ``i`` sends slot ``j`` of dimension ``split_axis`` to member ``j`` and stacks what it receives
    along a new dimension ``concat_axis`` (the split dimension, of the axis size, is removed). With
    ``tiled=True`` the split dimension is cut into ``axis_size`` chunks and the received chunks are concatenated
    along the existing ``concat_axis`` (no dimension is added or removed).

    Example::

        >>> x = fnp.arange(4.0).reshape(2, 2)   # member i holds row i
        >>> fl.vmap(lambda v: all_to_all(v, 'i', 0, 0), axis_name='i')(x).tolist()   # a transpose
        [[0.0, 2.0], [1.0, 3.0]]
    """
    name = _one_axis(axis_name, "all_to_all")
    n = axis_size(name)

    def one(a):
        nd = len(a.shape)
        sa = canonical_axis(split_axis, nd, "all_to_all split_axis")
        ca = canonical_axis(concat_axis, nd, "all_to_all concat_axis")
        if not tiled:
            return bind(all_to_all_p, a, axes=(name,), split_axis=sa, concat_axis=ca, axis_size=n)
        if a.shape[sa] % n:
            raise ValueError(f"all_to_all: dimension {sa} of {short(a)} must be divisible by the axis size {n} "
                             f"(tiled=True)")
        a = bind(all_to_all_p, _split_dim(a, sa, n), axes=(name,), split_axis=sa, concat_axis=ca, axis_size=n)
        return _merge_dims(a, ca)
    return tree_map(one, x)


# -------------------------------------------------------------------------------------------------- axis_index
axis_index_p = _collective("axis_index", lambda *, axes: ShapedArray((), dtypes.int32))
axis_index_p.def_jvp(zero_jvp(axis_index_p))
axis_index_p.def_batch(lambda axis, args, dims, *, axes: (S.iota(dtypes.int32, (axis.size,), 0), 0))


def axis_index(axis_name):
    """This member's position (int32) along the named mapped axis; for a tuple of names, the row-major
    position over all of them (the first name varying slowest).

    Example::

        >>> fl.vmap(lambda _: axis_index('i'), axis_name='i')(fnp.zeros(3)).tolist()
        [0, 1, 2]
    """
    names = _axes(axis_name)
    if not names:
        raise ValueError(f"axis_index: axis_name must name at least one mapped axis, got {axis_name!r}")
    out = bind(axis_index_p, axes=(names[0],))
    for name in names[1:]:
        out = E.add(E.mul(out, S.full((), axis_size(name), dtypes.int32)), bind(axis_index_p, axes=(name,)))
    return out


__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index",
           "axis_size", "psum_p", "pmax_p", "pmin_p", "all_gather_p", "psum_scatter_p", "ppermute_p",
           "all_to_all_p", "axis_index_p"]
