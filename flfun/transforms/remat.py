"""Rematerialisation: ``checkpoint`` (alias ``remat``) with JAX's meaning, its policies and ``checkpoint_name``.

``checkpoint(fun)`` traces ``fun`` into a closed program bound as one ``remat`` primitive. Its jvp splits the
jvp program by partial evaluation, as a call's does, except that a residual the policy does not save is no output
of the primal part: the tangent part recomputes it from what is saved (the inputs and the values the policy
keeps). Transposing the tangent part puts that recomputation in the backward pass, next to its use. jit inlines
remat bodies behind an optimization barrier (``prevent_cse``), so its memory planner sees a block's forward values
die at the end of the block and the recomputed ones live only while the block's backward pass runs.
"""
from __future__ import annotations

import functools
import types
from typing import Callable, Sequence

from flfun.core import Primitive, get_aval, register_impl, trace_state
from flfun.ir import ClosedProgram, Program, Var
from flfun.compiler.passes import dce, partial_eval
from flfun.primitives.common import Zero, is_undefined, is_zero, not_mapped, tangent_aval, vectorized_batch
from flfun.primitives.base import linear
from flfun.transforms.loops import float_nz
from flfun.transforms.subprogram import (batch_program, check_types, fresh, jvp_program, run_closed, strong,
                                         trace_body, transpose_program)
from flfun.tree import tree_flatten, tree_map, tree_unflatten
from flfun.util import decorator_factory

remat_p = Primitive("remat", multiple_results=True)
name_p = Primitive("name")


# ------------------------------------------------------------------------------------------------- policies
def everything_saveable(prim, *avals, **params) -> bool:
    """Save every value: no recomputation (like no ``checkpoint`` at all)."""
    return True


def nothing_saveable(prim, *avals, **params) -> bool:
    """Save only the block's inputs; the backward pass recomputes everything else (the default)."""
    return False


def dots_saveable(prim, *avals, **params) -> bool:
    """Save the results of matrix products (``dot_general``); recompute the cheap elementwise work."""
    return prim.name == "dot_general"


def dots_with_no_batch_dims_saveable(prim, *avals, **params) -> bool:
    """Save the results of matrix products without batch dimensions (weights times activations)."""
    return prim.name == "dot_general" and not params["dimension_numbers"][1][0]


def save_only_these_names(*names: str) -> Callable:
    """Save only the values named with ``checkpoint_name(x, name)`` for one of ``names``."""
    keep = frozenset(names)
    return lambda prim, *avals, **params: prim is name_p and params["name"] in keep


def save_anything_except_these_names(*names: str) -> Callable:
    """Save every value except those named with ``checkpoint_name(x, name)`` for one of ``names``."""
    drop = frozenset(names)
    return lambda prim, *avals, **params: not (prim is name_p and params["name"] in drop)


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable, dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable, dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names, save_anything_except_these_names=save_anything_except_these_names)


# ---------------------------------------------------------------------------------------- checkpoint_name
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_batch(vectorized_batch(name_p))
linear(name_p)(lambda ct, x, *, name: [ct])
name_p.linear_in = "all"
for _b in ("numpy", "cupy"):
    register_impl(name_p, _b, lambda x, *, name: x)


def checkpoint_name(x, name: str):
    """``x`` (any pytree) named ``name`` for ``save_only_these_names`` policies; otherwise the identity.

    Example::

        h = checkpoint_name(fnp.tanh(x @ w), "hidden")
        fl.checkpoint(f, policy=fl.checkpoint_policies.save_only_these_names("hidden"))
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a str, got {name!r:.60}")
    return tree_map(lambda a: name_p.bind(a, name=name), x)


# ----------------------------------------------------------------------------------------- remat primitive
@remat_p.def_abstract_eval
def _remat_abstract_eval(*avals, closed, prevent_cse, policy, recomputes):
    check_types("checkpoint", "operand", avals, "body input", closed.in_avals)
    return [strong(a) for a in closed.out_avals]


def _remat_impl(backend, *vals, closed, prevent_cse, policy, recomputes):
    return fresh(run_closed(closed, backend, list(vals)), vals)


for _b in ("numpy", "cupy"):
    register_impl(remat_p, _b, functools.partial(_remat_impl, _b))


def remat_split(program: Program, n: int, num_tangents: int, num_out: int, saveable: Callable):
    """``partial_eval`` of a jvp program (``n`` primal inputs, then tangents) in which the known part outputs only
    the residuals ``saveable(eqn)`` keeps; the unknown part recomputes the others from those and the primal
    inputs. Returns ``(known, unknown, residual input positions, (recomputed equations, their output bytes))``."""
    known, unknown, res_pos = partial_eval(program, [True] * n + [False] * num_tangents, num_out)
    producer = {v.id: e for e in known.eqns for v in e.outputs}
    pos = {v.id: i for i, v in enumerate(known.invars)}
    saved, redo, inputs = set(), set(), set(res_pos)
    todo = list(unknown.invars[len(res_pos):len(unknown.invars) - num_tangents])
    while todo:
        v = todo.pop()
        e = producer.get(v.id)
        if e is None:
            inputs.update([pos[v.id]] if v.id in pos else [])     # a primal input (or a constant)
        elif saveable(e):
            saved.add(v.id)
        elif id(e) not in redo:
            redo.add(id(e))
            todo.extend(x for x in e.inputs if type(x) is Var)
    res = [v for e in known.eqns for v in e.outputs if v.id in saved]
    again = [e for e in known.eqns if id(e) in redo]
    in_pos = sorted(inputs)
    known = Program(known.constvars, known.invars, known.eqns, known.outvars[:num_out] + res)
    unknown = Program(unknown.constvars, [known.invars[p] for p in in_pos] + res +
                      unknown.invars[len(unknown.invars) - num_tangents:], again + unknown.eqns, unknown.outvars)
    return known, unknown, in_pos, (len(again), sum(v.aval.nbytes for e in again for v in e.outputs))


def _saveable(policy: Callable) -> Callable:
    return lambda e: bool(policy(e.prim, *[v.aval for v in e.inputs], **e.params))


def _remat_jvp(primals, tangents, *, closed, prevent_cse, policy, recomputes):
    nz = float_nz(tangents, closed.in_avals)
    jclosed, out_nz = jvp_program(closed, nz)
    n, n_out = len(primals), len(closed.out_avals)
    known, unknown, in_pos, stats = remat_split(jclosed.program, n, sum(nz), n_out, _saveable(policy))
    params = dict(prevent_cse=prevent_cse, policy=policy)
    outs = remat_p.bind(*primals, closed=ClosedProgram(*dce(known, jclosed.consts)), recomputes=recomputes, **params)
    touts = iter(remat_p.bind(*[primals[p] for p in in_pos], *outs[n_out:], *[t for t, z in zip(tangents, nz) if z],
                              closed=ClosedProgram(unknown, jclosed.consts), recomputes=stats, **params)
                 if any(out_nz) else [])
    return outs[:n_out], [next(touts) if z else Zero(tangent_aval(a)) for a, z in zip(closed.out_avals, out_nz)]


remat_p.def_jvp(_remat_jvp)


@remat_p.def_transpose
def _remat_transpose(cts, *args, closed, **params):
    lin = [is_undefined(a) for a in args]
    tclosed = transpose_program(closed, lin, [not is_zero(c) for c in cts])
    outs = iter(remat_p.bind(*[a for a, k in zip(args, lin) if not k], *[c for c in cts if not is_zero(c)],
                             closed=tclosed, **params))
    return [next(outs) if k else None for k in lin]


def _remat_batch(axis, args, dims, *, closed, **params):
    bclosed, mapped = batch_program(closed, axis, list(dims))
    return remat_p.bind(*args, closed=bclosed, **params), [0 if m else not_mapped for m in mapped]


remat_p.def_batch(_remat_batch)


# -------------------------------------------------------------------------------------------- checkpoint
def _static_nums(fname: str, static_argnums) -> tuple:
    nums = (static_argnums,) if isinstance(static_argnums, int) else static_argnums
    if not isinstance(nums, (tuple, list)) or any(not isinstance(k, int) or isinstance(k, bool) for k in nums):
        raise TypeError(f"{fname}: static_argnums must be an int or a tuple of ints, got {static_argnums!r}")
    return tuple(nums)


def checkpoint(fun: Callable, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = ()) -> Callable:
    """``fun`` whose intermediate values reverse mode recomputes in the backward pass instead of keeping them from
    the forward pass (JAX's ``jax.checkpoint`` / ``jax.remat``): less memory for one more forward pass. ``policy``
    (see ``flfun.checkpoint_policies``) decides which values are saved anyway (default: none but the inputs);
    ``prevent_cse=False`` lets jit merge the recomputation back into the forward pass; ``static_argnums`` are
    arguments passed as Python values, not traced. Values and gradients are those of ``fun``, bit for bit.

    Example::

        block = fl.checkpoint(lambda x, w: fnp.tanh(x @ w))
        g = fl.grad(lambda x, w: fnp.sum(block(block(x, w), w)), argnums=1)(x, w)
        fl.checkpoint(f, policy=fl.checkpoint_policies.dots_saveable)

        @fl.remat(static_argnums=1)          # options first: a decorator
        def layer(x, n): ...
    """
    if not callable(fun):
        raise TypeError(f"checkpoint: fun must be callable, got {fun!r:.60}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be callable(prim, *avals, **params) -> bool or None, got "
                        f"{policy!r:.60}")
    if not isinstance(prevent_cse, bool):
        raise TypeError(f"checkpoint: prevent_cse must be a bool, got {prevent_cse!r:.60}")
    nums = _static_nums("checkpoint", static_argnums)
    policy = policy or nothing_saveable

    @functools.wraps(fun)
    def remat_fun(*args, **kwargs):
        if any(not -len(args) <= k < len(args) for k in nums):
            raise ValueError(f"checkpoint: static_argnums {nums} out of range for {len(args)} positional arguments")
        if trace_state.eager:
            return fun(*args, **kwargs)
        static = {k % len(args) for k in nums}
        leaves, in_tree = tree_flatten(([a for i, a in enumerate(args) if i not in static], kwargs))
        trees = []

        def flat(*xs):
            dyn, kw = tree_unflatten(in_tree, xs)
            it = iter(dyn)
            out, tree = tree_flatten(fun(*[args[i] if i in static else next(it) for i in range(len(args))], **kw))
            trees.append(tree)
            return out
        closed, captured = trace_body(flat, [strong(_aval(x)) for x in leaves])
        outs = remat_p.bind(*captured, *leaves, closed=closed, prevent_cse=prevent_cse, policy=policy,
                            recomputes=(0, 0))
        return tree_unflatten(trees[0], outs)
    return remat_fun


def _aval(x):
    try:
        return get_aval(x)
    except TypeError:
        raise TypeError(f"checkpoint: argument leaf {x!r:.60} is not an array; pass it with static_argnums") from None


checkpoint = remat = decorator_factory(checkpoint)    # @checkpoint(policy=...) too

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "remat_p", "name_p", "remat_split",
           "everything_saveable", "nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
           "save_only_these_names", "save_anything_except_these_names"]
