"""Vectorising map: ``vmap`` runs a function over a mapped axis by carrying a batch dimension beside each value.

Each primitive's batching rule says how to apply it to batched operands. With ``axis_name`` the mapped axis
can be named by collectives (``psum(x, 'i')``), which is how the same code runs under ``pmap``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

from flfun.array import Array
from flfun.core import Trace, Tracer, full_lower, full_raise, get_aval, missing_rule, new_main, to_array
from flfun.primitives.rules import moveaxis, moveaxis_to_front, not_mapped
from flfun.transforms.jvp import flatten_fun
from flfun.tree import broadcast_prefix, tree_flatten, tree_unflatten
from flfun.util import canonical_axis, decorator_factory


@dataclass(frozen=True)
class AxisData:
    """The mapped axis of one vmap level: its size and optional name."""
    size: int
    name: Hashable | None = None


class BatchTracer(Tracer):
    """A value under ``vmap``: the batched ``val`` and the axis of it that is mapped (``bdim``, or
    ``not_mapped``); its ``aval`` is one element of the batch."""
    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim):
        self._trace, self.val, self.bdim = trace, val, bdim

    @property
    def aval(self):
        a = get_aval(self.val)
        if self.bdim is not_mapped:
            return a
        return a.update(shape=a.shape[:self.bdim] + a.shape[self.bdim + 1:])

    def full_lower(self):
        return full_lower(self.val) if self.bdim is not_mapped else self


class BatchTrace(Trace):
    """Batching: a value from outside is not mapped; a primitive runs its ``batch`` rule on the batched values
    and their mapped axes, which returns the results and theirs. ``main.global_data`` is the ``AxisData``."""

    def pure(self, val):
        return BatchTracer(self, val, not_mapped)

    @property
    def axis(self) -> AxisData:
        return self.main.global_data

    def process_primitive(self, prim, tracers, params):
        if prim.batch is None:
            raise missing_rule("batching", prim)
        # bind lowers unmapped tracers, so this trace only sees a mapped operand or a collective over its axis
        out, out_dim = prim.batch(self.axis, [t.val for t in tracers], [t.bdim for t in tracers], **params)
        return [BatchTracer(self, o, d) for o, d in (zip(out, out_dim) if prim.multiple_results else [(out, out_dim)])]


def vmap_flat(f: Callable, axis: AxisData, args: list, in_dims: list):
    with new_main(BatchTrace, axis) as main:
        ins = [BatchTracer(main.trace, a, d) if d is not not_mapped else a for a, d in zip(args, in_dims)]
        outs = [full_raise(main.trace, o) for o in f(*ins)]
        return [o.val for o in outs], [o.bdim for o in outs]


def _move_out(x, bdim, dst, size, index):
    if dst is None:
        if bdim is not_mapped:
            return x
        raise ValueError(f"vmap: out_axes is None for output {index}, but that output depends on the mapped "
                         f"axis (only unmapped outputs can use out_axes=None)")
    x = moveaxis_to_front(x, bdim, size)
    return moveaxis(x, 0, canonical_axis(dst, len(x.shape), "vmap out_axes"))


def mapped_axes(op: str, spec, tree, leaves: list, what: str = "in_axes", extra: int = 0) -> list:
    """Per-leaf mapped axes (non-negative ints or None) from ``spec``: an int, None or a pytree prefix of ``tree``
    (whose leaves are ``leaves``), a list counting as a tuple. ``extra`` counts pmap's device axis (1 for outputs);
    ``op`` (vmap, pmap) starts the error messages."""
    axes = broadcast_prefix(tuple(spec) if isinstance(spec, list) else spec, tree, f"{op} {what}")
    for i, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is not None:
            nd = len(get_aval(x).shape) + extra
            if not isinstance(ax, int) or isinstance(ax, bool):
                raise ValueError(f"{op}: {what} entries must be int or None, got {ax!r}")
            if not -nd <= ax < nd:
                raise ValueError(f"{op}: {what}={ax} is out of bounds for {('argument', 'output')[extra]} leaf {i} "
                                 f"of rank {nd - extra}")
            axes[i] = ax % nd
    return axes


def mapped_size(op: str, leaves: list, axes: list, axis_size: int | None) -> int:
    """The size of the mapped axis: ``axis_size``, or the common size of the mapped ``axes`` of ``leaves``."""
    sizes = {i: get_aval(x).shape[ax] for i, (x, ax) in enumerate(zip(leaves, axes)) if ax is not None}
    size = axis_size if axis_size is not None else next(iter(sizes.values()), None)
    if size is None:
        raise ValueError(f"{op}: no argument is mapped (all in_axes are None); pass axis_size")
    if any(s != size for s in sizes.values()):
        desc = ", ".join(f"leaf {i}: {s}" for i, s in sizes.items())
        raise ValueError(f"{op}: mapped axes have different sizes ({desc}"
                         f"{'' if axis_size is None else f', axis_size={axis_size}'})")
    return size


@decorator_factory
def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None,
         axis_name: Hashable | None = None) -> Callable:
    """Vectorise ``f`` over the ``in_axes`` of its arguments, stacking results along ``out_axes``.

    ``in_axes``/``out_axes`` are ints (negative allowed), ``None`` (not mapped) or pytrees of those matching
    the arguments / outputs. ``axis_name`` lets collectives such as ``psum`` refer to this axis.

    Example::

        >>> fl.vmap(lambda w, x: x @ w, in_axes=(None, 0))(w, xs)   # one matmul per row of xs
    """
    if not callable(f):
        raise TypeError(f"vmap: expected a function, got {f!r}")

    def batched(*args):
        leaves, tree = tree_flatten(args)
        dims = mapped_axes("vmap", in_axes, args, leaves)      # a None axis is not_mapped
        size = mapped_size("vmap", leaves, dims, axis_size)
        flat_f, out_tree = flatten_fun(f, tree)
        outs, out_dims = vmap_flat(flat_f, AxisData(size, axis_name), leaves, dims)
        wanted = [out_axes] * len(outs) if isinstance(out_axes, int) or out_axes is None else \
            broadcast_prefix(out_axes, tree_unflatten(out_tree[0], outs), "vmap out_axes")
        outs = [_move_out(x, d, w, size, i) for i, (x, d, w) in enumerate(zip(outs, out_dims, wanted))]
        return tree_unflatten(out_tree[0], [o if isinstance(o, Array) else to_array(o) for o in outs])
    return batched


__all__ = ["vmap", "AxisData", "BatchTrace", "BatchTracer", "vmap_flat", "mapped_axes", "mapped_size"]
