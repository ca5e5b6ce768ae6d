"""Dense Jacobians and Hessians built from jvp/vjp and vmap: ``jacfwd``, ``jacrev``, ``hessian``."""
from __future__ import annotations

from typing import Callable, Sequence

from flfun.core import get_aval
from flfun.primitives.elementwise import convert_element_type, eq
from flfun.primitives.shape import iota, reshape, slice as slice_
from flfun.transforms.jvp import jvp
from flfun.transforms.vjp import check_argnums, check_inputs, check_output, with_args, vjp
from flfun.transforms.vmap import vmap
from flfun.tree import tree_flatten, tree_leaves, tree_unflatten
from flfun.util import prod


def _split_axis(x, avals, axis: int) -> list:
    """Split ``x``'s ``axis`` (the avals' elements end to end) into one block per aval, with that axis reshaped to
    the aval's shape."""
    shape, outs, start = tuple(x.shape), [], 0
    for a in avals:
        k = prod(a.shape)
        lo, hi = [0] * len(shape), list(shape)
        lo[axis], hi[axis] = start, start + k
        block = x if k == shape[axis] else slice_(x, lo, hi)
        outs.append(reshape(block, shape[:axis] + tuple(a.shape) + shape[axis + 1:]))
        start += k
    return outs


def _basis(avals) -> list:
    """A batch of one-hot tangents: the identity, split into per-leaf blocks shaped like the leaves."""
    n = sum(prod(a.shape) for a in avals)
    eye = eq(iota("int64", (n, n), 0), iota("int64", (n, n), 1))
    return [convert_element_type(b, a.dtype) for b, a in zip(_split_axis(eye, avals, 1), avals)]


def _setup(fname, f, argnums, args, holomorphic=False, allow_int=False):
    """The differentiated arguments, their leaves and tree, whether ``argnums`` is a sequence, and ``f`` as a
    function of those arguments."""
    nums, multiple = check_argnums(fname, argnums, len(args))
    dargs = tuple(args[n] for n in nums)
    for n, arg in zip(nums, dargs):
        check_inputs(fname, tree_leaves(arg), lambda dt: n, holomorphic, allow_int)
    leaves, tree = tree_flatten(dargs)

    def g(*d):
        return f(*with_args(args, nums, d))
    return dargs, leaves, tree, multiple, g


def _check_outputs(fname: str, out, holomorphic: bool) -> None:
    for leaf in tree_leaves(out):
        check_output(fname, get_aval(leaf).dtype, holomorphic, complex_ok=True)


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Callable:
    """Jacobian by forward mode (one jvp per input element, vectorised with vmap). ``holomorphic=True`` requires
    complex inputs and outputs (JAX's check; complex inputs and outputs work without it too).

    The result has shape ``out.shape + in.shape`` (nested as output-tree of input-tree for pytrees).

    Example::

        >>> fl.jacfwd(fnp.sin)(fnp.zeros(3))   # identity matrix
    """
    def jac(*args):
        dargs, leaves, tree, multiple, g = _setup("jacfwd", f, argnums, args, holomorphic)
        in_avals = [get_aval(x) for x in leaves]
        out = vmap(lambda *t: jvp(g, dargs, tree_unflatten(tree, t))[1], in_axes=0, out_axes=-1)(*_basis(in_avals))
        if holomorphic:                       # the tangents have the outputs' dtypes
            _check_outputs("jacfwd", out, holomorphic)
        out_leaves, out_tree = tree_flatten(out)
        per_out = [tree_unflatten(tree, _split_axis(o, in_avals, len(o.shape) - 1)) for o in out_leaves]
        return tree_unflatten(out_tree, [t if multiple else t[0] for t in per_out])
    return jac


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False,
           allow_int: bool = False) -> Callable:
    """Jacobian by reverse mode (one vjp per output element, vectorised with vmap); same layout as jacfwd.
    ``holomorphic`` as in ``jacfwd``; ``allow_int=True`` admits integer and bool inputs (zero Jacobian blocks of
    the input's dtype, as ``grad``).

    Example::

        >>> fl.jacrev(lambda x: x ** 2)(fnp.arange(3.0))   # diag(0, 2, 4)
    """
    def jac(*args):
        dargs, _, in_tree, multiple, g = _setup("jacrev", f, argnums, args, holomorphic, allow_int)
        out, f_vjp = vjp(g, *dargs)
        out_leaves, out_tree = tree_flatten(out)
        out_avals = [get_aval(o) for o in out_leaves]
        _check_outputs("jacrev", out, holomorphic)
        cts = vmap(lambda *ct: tree_flatten(f_vjp(tree_unflatten(out_tree, ct)))[0])(*_basis(out_avals))
        blocks = [_split_axis(c, out_avals, 0) for c in cts]    # per input leaf, per output leaf
        per_out = [tree_unflatten(in_tree, [b[i] for b in blocks]) for i in range(len(out_avals))]
        return tree_unflatten(out_tree, [t if multiple else t[0] for t in per_out])
    return jac


def hessian(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False) -> Callable:
    """Hessian of a scalar function: ``jacfwd(jacrev(f))``.

    Example::

        >>> fl.hessian(lambda x: fnp.sum(x ** 3))(fnp.ones(2))   # diag(6, 6)
    """
    hess = jacfwd(jacrev(f, argnums, holomorphic), argnums, holomorphic)

    def checked(*args):
        _setup("hessian", f, argnums, args, holomorphic)     # errors name hessian, not the jacfwd inside
        return hess(*args)
    return checked


__all__ = ["jacfwd", "jacrev", "hessian"]
