"""Collective impls: each finds the communicator of its named axis in the running pmap's context
(``flfun.distributed.spmd.current_context``) and calls it; layout changes around the call use ``xp``.

Under ``vmap(axis_name=)`` these never run (the batching rules do the work); they run inside pmap, where every
device thread executes its program and meets the others in the communicator.
"""
from __future__ import annotations

from functools import partial

from flfun.backends.xp.common import WritesOut, finish


def _member(op: str, name):
    """``(communicator, this member's rank, what the call is)`` of axis ``name`` in the running pmap."""
    from flfun.distributed.spmd import current_context
    ctx = current_context()
    if ctx is None or name not in ctx:
        raise NameError(f"{op}: axis {name!r} is not mapped by a running pmap (collectives run inside pmap or "
                        f"vmap(..., axis_name=))")
    return (*ctx[name], f"{op} over axis {name!r}")


def reduction(xp, op: str, prim: str, x, *, axes, out=None):
    """psum / pmax / pmin: one allreduce per named axis (the last one into ``out``)."""
    x = xp.asarray(x)
    for i, name in enumerate(axes):
        comm, r, what = _member(prim, name)
        x = comm.allreduce(r, x, op, out=out if i == len(axes) - 1 else None, what=what)
    return finish(x, out)


def all_gather(xp, x, *, axes, axis, axis_size, tiled):
    comm, r, what = _member("all_gather", axes[0])
    out = xp.moveaxis(comm.allgather(r, xp.asarray(x), what=what), 0, axis)
    if tiled:
        s = out.shape
        out = out.reshape(s[:axis] + (s[axis] * s[axis + 1],) + s[axis + 2:])
    return out


def psum_scatter(xp, x, *, axes, scatter_dimension, axis_size, tiled):
    comm, r, what = _member("psum_scatter", axes[0])
    x, sd = xp.asarray(x), scatter_dimension
    if tiled:
        s = x.shape
        x = x.reshape(s[:sd] + (axis_size, s[sd] // axis_size) + s[sd + 1:])
    x = xp.ascontiguousarray(xp.moveaxis(x, sd, 0))
    return comm.reduce_scatter(r, x, "sum", what=what)


def ppermute(xp, x, *, axes, perm):
    comm, r, what = _member("ppermute", axes[0])
    return comm.permute(r, xp.asarray(x), perm, what=what)


def all_to_all(xp, x, *, axes, split_axis, concat_axis, axis_size):
    comm, r, what = _member("all_to_all", axes[0])
    x = xp.ascontiguousarray(xp.moveaxis(xp.asarray(x), split_axis, 0))
    return xp.moveaxis(comm.alltoall(r, x, what=what), 0, concat_axis)


def axis_index(xp, *, axes):
    return xp.int32(_member("axis_index", axes[0])[1])


def impls(xp) -> dict:
    """name -> impl for ``xp``."""
    return {**{f"p{op}": WritesOut(partial(reduction, xp, op, f"p{op}")) for op in ("sum", "max", "min")},
            **{fn.__name__: partial(fn, xp) for fn in (all_gather, psum_scatter, ppermute, all_to_all, axis_index)}}
