"""ZeRO-1 optimizer-state sharding: ``sharded(optimizer, axis_name)`` keeps 1/N of the state on each of the N
members of a mapped axis (pmap devices or vmap members), built from ``psum_scatter`` and ``all_gather``.

Parameters and gradients are flattened into one vector per dtype, padded to a multiple of N and cut into N
chunks; member ``i`` owns chunk ``i``. An update reduce-scatters the local gradients (each member receives the
mean of its chunk over the axis), runs the wrapped optimizer on the owned chunk only, and all-gathers the
updated chunk, so every member ends with the full update.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from flfun import numpy as fnp
from flfun.optim.transformation import GradientTransformation
from flfun.primitives.collective import all_gather, axis_index, axis_size, psum, psum_scatter
from flfun.primitives.shape import dynamic_slice
from flfun.tree import tree_leaves, tree_structure, tree_unflatten
from flfun.util import prod


class ShardedState(NamedTuple):
    """The wrapped optimizer's state for this member's chunks (a tuple of 1-D chunks, one per dtype)."""
    inner: Any


def _layout(tree) -> list[tuple[np.dtype, list[int]]]:
    """Leaf indices grouped by dtype, in order of first appearance."""
    groups: dict = {}
    for i, leaf in enumerate(tree_leaves(tree)):
        groups.setdefault(np.dtype(leaf.dtype), []).append(i)
    return list(groups.items())


def _flat(tree, layout, n: int) -> tuple:
    """One 1-D vector per dtype group, zero-padded to a multiple of ``n``."""
    leaves = tree_leaves(tree)
    flats = [[fnp.reshape(leaves[i], (-1,)) for i in idx] for _, idx in layout]
    return tuple(fnp.concatenate(p + [fnp.zeros((-sum(x.shape[0] for x in p) % n,), dtype=dt)])
                 for p, (dt, _) in zip(flats, layout))


def _unflat(flats: tuple, layout, like) -> Any:
    leaves, out = tree_leaves(like), {}
    for flat, (_, idx) in zip(flats, layout):
        ends = np.cumsum([prod(leaves[i].shape) for i in idx])
        out.update((i, fnp.reshape(flat[e - prod(leaves[i].shape):e], leaves[i].shape)) for i, e in zip(idx, ends))
    return tree_unflatten(tree_structure(like), [out[i] for i in range(len(leaves))])


def _my_chunks(tree, layout, axis_name) -> tuple:
    """This member's chunk of each of ``_flat(tree, layout, axis size)``."""
    n = axis_size(axis_name)
    return tuple(dynamic_slice(f, (axis_index(axis_name) * (f.shape[0] // n),), (f.shape[0] // n,))
                 for f in _flat(tree, layout, n))


def sharded(optimizer, axis_name, *, average: bool = True, max_norm: float | None = None):
    """ZeRO-1: wrap an elementwise optimizer (``sgd``, ``adam``, ``adamw``) so that each member of the mapped
    axis ``axis_name`` keeps and updates only its 1/N of the optimizer state.

    Call ``init`` and ``update`` inside ``pmap`` (or ``vmap(..., axis_name=)``). ``update`` takes this member's
    *local* gradients: they are reduce-scattered (averaged over the axis with ``average``, else summed), so do
    not ``pmean`` them first. The updates it returns are complete (all-gathered) and identical on every member;
    adding them to the replicated parameters equals updating the owned parameter chunk and all-gathering the
    parameters. With ``max_norm`` the averaged gradients are clipped to that global L2 norm first (as
    ``clip_by_global_norm``; the norm is computed across the chunks). Transformations that look at all
    gradients at once (``clip_by_global_norm`` inside ``optimizer``) would only see the chunk: use ``max_norm``.

    Example::

        >>> opt = sharded(adamw(1e-3), "i")
        >>> state = fl.pmap(opt.init, axis_name="i", in_axes=None, axis_size=4)(params)   # 1/4 on each device
        >>> def step(params, state, x, y):                          # run with pmap(step, axis_name="i")
        ...     grads = fl.grad(loss)(params, x, y)                 # local gradients
        ...     updates, state = opt.update(grads, state, params)   # reduce-scatter, update chunk, all-gather
        ...     return apply_updates(params, updates), state
    """
    if not isinstance(optimizer, GradientTransformation):
        raise ValueError(f"sharded: optimizer must be a GradientTransformation, got {optimizer!r:.60}")
    if max_norm is not None and not (isinstance(max_norm, (int, float)) and max_norm > 0):
        raise ValueError(f"sharded: max_norm must be a positive number or None, got {max_norm!r}")

    def init(params):
        return ShardedState(optimizer.init(_my_chunks(params, _layout(params), axis_name)))

    def update(grads, state, params=None):
        layout, n = _layout(grads), axis_size(axis_name)
        g = [psum_scatter(f, axis_name, tiled=True) for f in _flat(grads, layout, n)]
        g = [c / np.asarray(n, c.dtype) for c in g] if average else g
        if max_norm is not None:
            coef = fnp.minimum(max_norm / (fnp.sqrt(psum(sum(fnp.sum(c * c) for c in g), axis_name)) + 1e-6), 1.0)
            g = [c * fnp.astype(coef, c.dtype) for c in g]
        p = None if params is None else _my_chunks(params, layout, axis_name)
        u, inner = optimizer.update(tuple(g), state.inner, p)
        return _unflat(tuple(all_gather(c, axis_name, tiled=True) for c in u), layout, grads), ShardedState(inner)

    return GradientTransformation(init, update)


def state_bytes_per_device(state) -> int:
    """Bytes of optimizer state one device holds: for the ``ShardedArray``s that ``pmap`` returns, one shard
    of each leaf; other arrays count whole.

    Example::

        >>> init = fl.pmap(sharded(adamw(1e-3), "i").init, axis_name="i", in_axes=None, axis_size=4)
        >>> state_bytes_per_device(init(params))      # about 8 * n_params / 4 for fp32 Adam
    """
    from flfun.distributed.sharded import ShardedArray
    return sum(leaf.shards[0].nbytes if isinstance(leaf, ShardedArray) else int(getattr(leaf, "nbytes", 0))
               for leaf in tree_leaves(state))


__all__ = ["sharded", "ShardedState", "state_bytes_per_device"]
