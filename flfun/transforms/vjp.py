"""Reverse mode: ``vjp`` and ``grad``. Concrete inputs outside any transform take the eager tape
(``transforms/tape.py``); everything else linearizes and transposes the linear program
(``transforms/transpose.py``), as in JAX.
"""
from __future__ import annotations

from typing import Callable, Sequence

from flfun import dtypes
from flfun.array import Array
from flfun.config import config
from flfun.core import trace_state, get_aval, wrap
from flfun.primitives.rules import UndefinedPrimal, instantiate
from flfun.primitives.shape import full as full_array
from flfun.transforms.tape import tape_vjp_flat
from flfun.transforms.transpose import backward_pass, vjp_flat_linearized
from flfun.transforms.jvp import JVPTracer, as_arrays, flatten_fun, leaf_like, split_aux
from flfun.tree import tree_flatten, tree_leaves, tree_map, tree_unflatten
from flfun.util import decorator_factory


def vjp_flat(f: Callable, primals: list):
    """``(outputs, f_vjp)`` for a flat function: on the eager tape when nothing is being traced and every
    primal is concrete (fast), else by linearize + transpose (works under any transform)."""
    primals = as_arrays(primals)
    if trace_state.eager and config.eager_tape and set(map(type, primals)) <= {Array}:   # no Tracer among them
        return tape_vjp_flat(f, primals)
    return vjp_flat_linearized(f, primals)


def _primal_aux(aux):
    """``has_aux`` values with the tracers of the finished linearize (under a transform) replaced by their
    primals; they would leak otherwise."""
    def lower(x):
        while isinstance(x, JVPTracer) and not x._trace.main.active:
            x = x.primal
        return x
    return tree_map(lower, aux)


def reduce_axes_removed(fname: str, reduce_axes) -> None:
    if reduce_axes:
        raise NotImplementedError(f"reduce_axes argument to {fname} is deprecated (JAX removed it, and so flfun "
                                  f"has none: reduce over {tuple(reduce_axes)} explicitly, e.g. with lax.psum)")


def check_inputs(fname: str, leaves, argnum_of: Callable, holomorphic: bool, allow_int: bool = False) -> None:
    """JAX's dtype rules for differentiated inputs: complex with ``holomorphic``, else float or complex, and
    with ``allow_int`` integers and bools too (their derivative is a zero array of their own dtype)."""
    for leaf in leaves:
        dt = leaf.dtype if isinstance(leaf, Array) else get_aval(leaf).dtype
        if holomorphic and not dtypes.is_complex(dt):
            raise TypeError(f"{fname} with holomorphic=True requires inputs with complex dtype, but got {dt.name} "
                            f"(argument {argnum_of(dt)}).")
        if not (dtypes.is_inexact(dt) or allow_int and dt.kind in "iub"):
            hint = ("use jvp directly" if fname == "jacfwd" else
                    "use vjp or set allow_int to True" if fname != "hessian" else "cast them with .astype")
            raise TypeError(f"{fname} requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
                            f"np.inexact), but got {dt.name} (argument {argnum_of(dt)}). If you want to use Boolean- "
                            f"or integer-valued inputs, {hint}.")


def check_output(fname: str, dt, holomorphic: bool, complex_ok: bool) -> None:
    """JAX's dtype rules for the differentiated outputs (grad: real; jacobians: also complex in flfun)."""
    if holomorphic and not dtypes.is_complex(dt):
        raise TypeError(f"{fname} with holomorphic=True requires outputs with complex dtype, but got {dt.name}.")
    if not holomorphic and not (dtypes.is_inexact(dt) if complex_ok else dtypes.is_float(dt)):
        what = ("real- or complex-valued outputs (output dtype that is a sub-dtype of np.inexact)" if complex_ok else
                "real-valued outputs (output dtype that is a sub-dtype of np.floating)")
        hint = ("For holomorphic differentiation, pass holomorphic=True. For differentiation of non-holomorphic "
                "functions involving complex outputs" if dtypes.is_complex(dt) else
                "For differentiation of functions with integer outputs")
        raise TypeError(f"{fname} requires {what}, but got {dt.name}. {hint}, use vjp directly.")


def vjp(f: Callable, *primals, has_aux: bool = False, reduce_axes=()):
    """``(f(*primals), f_vjp)`` where ``f_vjp(ct)`` returns one cotangent per primal (pytrees throughout).

    Example::

        >>> y, f_vjp = fl.vjp(fnp.sin, 0.5)
        >>> f_vjp(1.0)  # (cos(0.5),)
    """
    reduce_axes_removed("vjp", reduce_axes)
    p_leaves, p_tree = tree_flatten(tuple(primals))
    flat, out_tree = flatten_fun(f, p_tree, has_aux)
    outs, f_vjp_flat = vjp_flat(flat, p_leaves)
    out_avals = [get_aval(o) for o in outs]

    def f_vjp(ct):
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree[0]:
            raise ValueError(f"vjp: cotangent structure {ct_tree} does not match the output's {out_tree[0]}")
        ct_leaves = [leaf_like(c, a) for c, a in zip(ct_leaves, out_avals)]
        for i, (ca, a) in enumerate(zip(map(get_aval, ct_leaves), out_avals)):
            if ca.shape != a.shape or (dtypes.is_inexact(a.dtype) and ca.dtype != a.dtype):
                raise ValueError(f"vjp: cotangent {i} has aval {ca.str_short()} but the output has {a.str_short()}; "
                                 f"they must match")
        return tree_unflatten(p_tree, [instantiate(c) for c in f_vjp_flat(ct_leaves)])

    out = tree_unflatten(out_tree[0], outs)
    return (out, f_vjp, _primal_aux(out_tree[1])) if has_aux else (out, f_vjp)


def check_argnums(fname, argnums, nargs):
    if type(argnums) is int and -nargs <= argnums < nargs:
        return (argnums % nargs,), False
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)
    if any(not isinstance(n, int) or isinstance(n, bool) for n in nums):
        raise ValueError(f"{fname}: argnums must be an int or a tuple of ints, got {argnums!r}")
    if any(not -nargs <= n < nargs for n in nums):
        raise ValueError(f"{fname}: argnums {argnums} out of range for {nargs} positional arguments")
    return tuple(n % nargs for n in nums), multiple


def with_args(args: tuple, nums: tuple, values) -> list:
    """``args`` with ``args[n]`` replaced by the matching value for each ``n`` in ``nums``."""
    new = dict(zip(nums, values))
    return [new.get(i, a) for i, a in enumerate(args)]


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False, reduce_axes=()) -> Callable:
    """Like ``grad`` but returns ``(value, gradient)``; with ``has_aux``, ``((value, aux), gradient)``.

    Example::

        >>> fl.value_and_grad(lambda x: x ** 2)(3.0)
        (Array(9.), Array(6.))
    """
    reduce_axes_removed("grad", reduce_axes)

    def vg(*args, **kwargs):
        nums, multiple = check_argnums("grad", argnums, len(args))
        if not multiple and isinstance(args[nums[0]], Array):   # one array argument: no pytree work
            leaves, tree = [args[nums[0]]], None
        else:
            leaves, tree = tree_flatten(tuple(args[n] for n in nums))
        check_inputs("grad", leaves, lambda dt: next(n for n in nums if any(get_aval(x).dtype == dt
                                                                         for x in tree_leaves(args[n]))),
                     holomorphic, allow_int)
        aux_box = []

        def flat_f(*leaves_in):
            out = f(*with_args(args, nums, leaves_in if tree is None else tree_unflatten(tree, leaves_in)), **kwargs)
            out, aux = split_aux("grad", out) if has_aux else (out, None)
            aux_box.append(aux)
            return [out]
        (out,), f_vjp = vjp_flat(flat_f, leaves)
        aval = get_aval(out) if isinstance(out, Array) or type(out) in (int, float, complex) else None
        if aval is None or aval.shape != ():
            what = aval.str_short() if aval is not None else f"a {type(out).__name__}"
            raise TypeError(f"grad: the function must return a real float scalar, got {what}; use jacrev or vjp for "
                            f"non-scalar outputs")
        check_output("grad", aval.dtype, holomorphic, complex_ok=False)
        seed = full_array((), 1, aval.dtype)
        if type(out) is Array and out._device is not seed._device:   # seed the cotangent where the output lives
            seed = wrap(out._device.put(seed._value), out._device)
        grads = [instantiate(g) for g in f_vjp([seed])]
        grads = grads if tree is None else tree_unflatten(tree, grads)
        return ((out, _primal_aux(aux_box[0])) if has_aux else out), grads if multiple else grads[0]
    return vg


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes=()) -> Callable:
    """The gradient of a real float-scalar function with respect to argument(s) ``argnums`` (pytrees allowed).

    Complex inputs follow JAX's convention: for real ``f`` of complex ``z = x + iy`` the result is
    ``df/dx - i df/dy`` (``grad(lambda z: abs(z) ** 2)(z) == 2 * conj(z)``); ``holomorphic=True`` differentiates
    a complex-valued holomorphic ``f`` of complex inputs (``grad(fnp.sin, holomorphic=True)(z) == cos(z)``).
    ``allow_int=True`` admits integer and bool inputs: their gradient is a zero array of the input's own shape and
    dtype (JAX gives a numpy ``float0`` array instead; flfun has no float0 dtype, and a zero array of the input's
    dtype works in ``tree_map`` updates, jit and vmap). ``reduce_axes`` (removed from JAX) raises
    NotImplementedError.

    Example::

        >>> fl.grad(lambda x: fnp.sum(x ** 2))(fnp.arange(3.0))
        Array([0., 2., 4.])
    """
    vg = value_and_grad(f, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    def g(*args, **kwargs):
        value, grads = vg(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return g


grad, value_and_grad = decorator_factory(grad), decorator_factory(value_and_grad)   # @grad(argnums=...) too

__all__ = ["vjp", "grad", "value_and_grad", "check_inputs", "check_output", "backward_pass", "UndefinedPrimal",
           "tree_map"]
