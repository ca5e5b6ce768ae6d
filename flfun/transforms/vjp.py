"""Reverse mode: ``vjp = linearize, then transpose the linear program`` (as in JAX); ``grad`` on top.

The backward pass walks the linear program from the end, calling each primitive's transpose rule with the
output cotangent and ``UndefinedPrimal`` markers for its linear inputs. Cotangents are ``Zero`` until a rule
produces one, so unused branches cost nothing.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flfun import dtypes
from flfun.array import Array
from flfun.config import config
from flfun.core import ShapedArray, _state, get_aval, missing_rule, wrap
from flfun.ir import Literal, Program
from flfun.primitives.common import UndefinedPrimal, Zero, instantiate, is_zero
from flfun.primitives.elementwise import add
from flfun.primitives.shape import full as full_array
from flfun.transforms.tape import tape_vjp_flat
from flfun.transforms.jvp import as_arrays, flatten_fun, linearize_flat
from flfun.tree import tree_flatten, tree_map, tree_structure, tree_unflatten


def add_cotangents(a, b):
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    return add(a, b)


def backward_pass(program: Program, consts: list, cts_out: Sequence) -> list:
    """Transpose a linear program: cotangents of the outputs -> cotangents of the inputs (``Zero`` if none)."""
    known = {v.id: c for v, c in zip(program.constvars, consts)}
    linear = {v.id for v in program.invars}
    for e in program.eqns:       # an equation is linear if any input is; its outputs are then linear too
        if any(not isinstance(v, Literal) and v.id in linear for v in e.inputs):
            linear.update(v.id for v in e.outputs)
        else:
            from flfun.core import bind
            outs = bind(e.prim, *[v.val if isinstance(v, Literal) else known[v.id] for v in e.inputs],
                        **e.params)
            for v, x in zip(e.outputs, outs if e.prim.multiple_results else [outs]):
                known[v.id] = x
    ct_env: dict[int, Any] = {}

    def write(v, ct):
        if not isinstance(v, Literal) and v.id in linear and ct is not None and not is_zero(ct):
            ct_env[v.id] = add_cotangents(ct_env.get(v.id, Zero(v.aval)), ct)

    for v, ct in zip(program.outvars, cts_out):
        write(v, ct)
    for e in reversed(program.eqns):
        if not any(v.id in linear for v in e.outputs):
            continue
        cts = [ct_env.pop(v.id, Zero(v.aval)) for v in e.outputs]
        if all(is_zero(c) for c in cts):
            continue
        if e.prim.transpose is None:
            raise missing_rule("transpose", e.prim)
        args = [v.val if isinstance(v, Literal) else
                (UndefinedPrimal(v.aval) if v.id in linear else known[v.id]) for v in e.inputs]
        ct_arg = cts if e.prim.multiple_results else cts[0]
        if not e.prim.multiple_results and is_zero(ct_arg):
            continue
        cts_in = e.prim.transpose(ct_arg, *args, **e.params)
        for v, ct in zip(e.inputs, cts_in):
            write(v, ct)
    return [ct_env.pop(v.id, Zero(v.aval)) for v in program.invars]


def vjp_flat(f: Callable, primals: list):
    """``(outputs, f_vjp)`` for a flat function: on the eager tape when nothing is being traced and every
    primal is concrete (fast), else by linearize + transpose (works under any transform)."""
    primals = as_arrays(primals)
    if _state.eager and config.eager_tape:   # as_arrays made every primal an Array (maybe a Tracer)
        for p in primals:
            if type(p) is not Array:
                break
        else:
            return tape_vjp_flat(f, primals)
    return vjp_flat_linearized(f, primals)


def vjp_flat_linearized(f: Callable, primals: list):
    outs, program, consts, zero_out, _ = linearize_flat(f, primals)

    def f_vjp(cts: list) -> list:
        nonzero_cts = [ct for ct, z in zip(cts, zero_out) if not z]
        return backward_pass(program, consts, nonzero_cts)
    return outs, f_vjp


def vjp(f: Callable, *primals, has_aux: bool = False):
    """``(f(*primals), f_vjp)`` where ``f_vjp(ct)`` returns one cotangent per primal (pytrees throughout).

    Example::

        >>> y, f_vjp = fl.vjp(fnp.sin, 0.5)
        >>> f_vjp(1.0)  # (cos(0.5),)
    """
    p_leaves, p_tree = tree_flatten(tuple(primals))
    if has_aux:
        aux_box = []

        def main_f(*a):
            out, aux = f(*a)
            aux_box.append(aux)
            return out
    else:
        main_f = f
    flat, out_tree = flatten_fun(main_f, p_tree)
    outs, f_vjp_flat = vjp_flat(flat, p_leaves)
    out_avals = [get_aval(o) for o in outs]

    def f_vjp(ct):
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree[0]:
            raise ValueError(f"vjp: cotangent structure {ct_tree} does not match the output's {out_tree[0]}")
        for i, (c, a) in enumerate(zip(ct_leaves, out_avals)):
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise ValueError(f"vjp: cotangent {i} has shape {ca.shape} but the output has {a.shape}")
        cts_in = f_vjp_flat(ct_leaves)
        cts_in = [instantiate(c) for c in cts_in]
        return tree_unflatten(p_tree, cts_in)

    out = tree_unflatten(out_tree[0], outs)
    if has_aux:
        return out, f_vjp, aux_box[0]
    return out, f_vjp


def _check_argnums(fname, argnums, nargs):
    if type(argnums) is int and -nargs <= argnums < nargs:
        return (argnums % nargs,), False
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)
    for n in nums:
        if not isinstance(n, int) or not -nargs <= n < nargs:
            raise ValueError(f"{fname}: argnums {argnums} out of range for {nargs} positional arguments")
    return tuple(n % nargs for n in nums), multiple


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """Like ``grad`` but returns ``(value, gradient)``; with ``has_aux``, ``((value, aux), gradient)``.

    Example::

        >>> fl.value_and_grad(lambda x: x ** 2)(3.0)
        (Array(9.), Array(6.))
    """
    def vg(*args, **kwargs):
        nums, multiple = _check_argnums("grad", argnums, len(args))
        if not multiple and isinstance(args[nums[0]], Array):   # one array argument: no pytree work
            leaves, tree = [args[nums[0]]], None
        else:
            leaves, tree = tree_flatten(tuple(args[n] for n in nums))
        for i, leaf in enumerate(leaves):
            dt = leaf.dtype if isinstance(leaf, Array) else get_aval(leaf).dtype
            if dt.kind != "f":
                n = nums[min(i, len(nums) - 1)] if len(nums) == 1 else nums[_leaf_owner(tree, i)]
                raise TypeError(f"grad: argument {n} has dtype {dt}; grad requires floating-point inputs "
                                f"(cast with .astype or differentiate other argnums)")
        aux_box = []

        def flat_f(*leaves_in):
            full = list(args)
            for n, v in zip(nums, leaves_in if tree is None else tree_unflatten(tree, leaves_in)):
                full[n] = v
            out = f(*full, **kwargs)
            if has_aux:
                out, aux = out
                aux_box.append(aux)
            return [out]
        outs, f_vjp = vjp_flat(flat_f, leaves)
        out = outs[0]
        aval = get_aval(out) if isinstance(out, Array) or type(out) in (int, float) else None
        if aval is None or aval.shape != () or aval.dtype.kind != "f":
            what = aval.str_short() if aval is not None else f"a {type(out).__name__}"
            raise TypeError(f"grad: the function must return a float scalar, got {what}; use jacrev or vjp "
                            f"for non-scalar outputs")
        seed = full_array((), 1, aval.dtype)
        if type(out) is Array and out._device is not seed._device:   # seed the cotangent where the output lives
            seed = wrap(out._device.put(seed._value), out._device)
        cts = f_vjp([seed])
        if tree is None:
            return ((out, aux_box[0]) if has_aux else out), instantiate(cts[0])
        grads = tree_unflatten(tree, [instantiate(c) for c in cts])
        grads = grads if multiple else grads[0]
        return ((out, aux_box[0]) if has_aux else out), grads
    return vg


def _leaf_owner(tree, leaf_index: int) -> int:
    """Which differentiated argument (position in argnums) a flat leaf index belongs to."""
    seen = 0
    for i, child in enumerate(tree.children):
        seen += child.num_leaves
        if leaf_index < seen:
            return i
    return len(tree.children) - 1


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of a float-scalar function with respect to argument(s) ``argnums`` (pytrees allowed).

    Example::

        >>> fl.grad(lambda x: fnp.sum(x ** 2))(fnp.arange(3.0))
        Array([0., 2., 4.])
    """
    vg = value_and_grad(f, argnums, has_aux)

    def g(*args, **kwargs):
        (out, aux), grads = vg(*args, **kwargs) if has_aux else ((None, None), vg(*args, **kwargs)[1])
        return (grads, aux) if has_aux else grads
    return g


__all__ = ["vjp", "grad", "value_and_grad", "backward_pass", "UndefinedPrimal", "tree_map"]
