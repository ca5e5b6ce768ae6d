"""Dense Jacobians and Hessians built from jvp/vjp and vmap: ``jacfwd``, ``jacrev``, ``hessian``."""
from __future__ import annotations

from typing import Callable, Sequence

from flfun import dtypes
from flfun.core import get_aval
from flfun.transforms.jvp import jvp
from flfun.transforms.vjp import _check_argnums, vjp
from flfun.transforms.vmap import vmap
from flfun.tree import tree_flatten, tree_unflatten
from flfun.util import prod


def _basis(avals):
    """A batch of one-hot tangents: the identity, split into per-leaf blocks shaped like the leaves."""
    from flfun.primitives.elementwise import convert_element_type, eq
    from flfun.primitives.shape import broadcast_in_dim, iota, reshape
    n = sum(prod(a.shape) for a in avals)
    dt = avals[0].dtype
    rows = iota("int64", (n, n), 0)
    cols = iota("int64", (n, n), 1)
    eye = convert_element_type(eq(rows, cols), dt)
    out, start = [], 0
    from flfun.primitives.shape import slice as slice_
    for a in avals:
        k = prod(a.shape)
        block = slice_(eye, (0, start), (n, start + k)) if n != k else eye
        out.append(reshape(convert_element_type(block, a.dtype), (n,) + tuple(a.shape)))
        start += k
    del broadcast_in_dim
    return out, n


def _split_rows(x, in_avals, lead_shape):
    """Turn the trailing flat-input axis of ``x`` into per-leaf blocks shaped like the inputs."""
    from flfun.primitives.shape import reshape, slice as slice_
    outs, start = [], 0
    n = x.shape[-1]
    for a in in_avals:
        k = prod(a.shape)
        block = x if k == n else slice_(x, (0,) * (len(x.shape) - 1) + (start,), tuple(x.shape[:-1]) + (start + k,))
        outs.append(reshape(block, tuple(lead_shape) + tuple(a.shape)))
        start += k
    return outs


def _float_check(fname, leaves):
    for leaf in leaves:
        if not dtypes.is_float(get_aval(leaf).dtype):
            raise TypeError(f"{fname}: differentiated inputs must be floating point, got {get_aval(leaf).str_short()}")


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Jacobian by forward mode (one jvp per input element, vectorised with vmap).

    The result has shape ``out.shape + in.shape`` (nested as output-tree of input-tree for pytrees).

    Example::

        >>> fl.jacfwd(fnp.sin)(fnp.zeros(3))   # identity matrix
    """
    def jac(*args):
        nums, multiple = _check_argnums("jacfwd", argnums, len(args))
        dargs = tuple(args[n] for n in nums)
        leaves, tree = tree_flatten(dargs)
        _float_check("jacfwd", leaves)
        in_avals = [get_aval(x) for x in leaves]

        def pushfwd(*tangent_leaves):
            def g(*d):
                full = list(args)
                for n, v in zip(nums, d):
                    full[n] = v
                return f(*full)
            return jvp(g, dargs, tree_unflatten(tree, tangent_leaves))[1]
        basis, n = _basis(in_avals)
        out = vmap(pushfwd, in_axes=0, out_axes=-1)(*basis)
        out_leaves, out_tree = tree_flatten(out)
        per_out = []
        for o in out_leaves:
            blocks = _split_rows(o, in_avals, o.shape[:-1])
            per_out.append(tree_unflatten(tree, blocks) if multiple else blocks[0] if len(blocks) == 1
                           else tree_unflatten(tree, blocks)[0])
        return tree_unflatten(out_tree, per_out)
    return jac


def jacrev(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Jacobian by reverse mode (one vjp per output element, vectorised with vmap); same layout as jacfwd.

    Example::

        >>> fl.jacrev(lambda x: x ** 2)(fnp.arange(3.0))   # diag(0, 2, 4)
    """
    def jac(*args):
        nums, multiple = _check_argnums("jacrev", argnums, len(args))
        dargs = tuple(args[n] for n in nums)
        _float_check("jacrev", tree_flatten(dargs)[0])

        def g(*d):
            full = list(args)
            for n, v in zip(nums, d):
                full[n] = v
            return f(*full)
        out, f_vjp = vjp(g, *dargs)
        out_leaves, out_tree = tree_flatten(out)
        out_avals = [get_aval(o) for o in out_leaves]
        basis, n = _basis(out_avals)
        in_leaves, in_tree = tree_flatten(dargs)

        def pullback(*ct_leaves):
            return tree_flatten(f_vjp(tree_unflatten(out_tree, ct_leaves)))[0]
        cts = vmap(pullback)(*basis)          # per input leaf: (n_out, *in_shape)
        from flfun.primitives.shape import reshape, slice as slice_
        per_out, start = [], 0
        for a in out_avals:
            k = prod(a.shape)
            blocks = []
            for c in cts:
                blk = c if k == n else slice_(c, (start,) + (0,) * (len(c.shape) - 1), (start + k,) + tuple(c.shape[1:]))
                blocks.append(reshape(blk, tuple(a.shape) + tuple(c.shape[1:])))
            start += k
            t = tree_unflatten(in_tree, blocks)
            per_out.append(t if multiple else t[0])
        return tree_unflatten(out_tree, per_out)
    return jac


def hessian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Hessian of a scalar function: ``jacfwd(jacrev(f))``.

    Example::

        >>> fl.hessian(lambda x: fnp.sum(x ** 3))(fnp.ones(2))   # diag(6, 6)
    """
    return jacfwd(jacrev(f, argnums), argnums)


__all__ = ["jacfwd", "jacrev", "hessian"]
