"""``custom_jvp`` and ``custom_vjp``: functions whose derivative rule the user writes, with JAX's API.

Called under a transform, the function is traced into a closed program and bound as one primitive holding it and
the rule. The primitive evaluates the program; its jvp rule calls the user's rule (``custom_jvp``) or the user's
``fwd`` and a linear ``custom_lin`` whose transpose calls ``bwd`` (``custom_vjp``); its batching rule batches the
program and wraps the rule in a ``vmap``. With nothing to transform the function simply runs.
"""
from __future__ import annotations

import functools
from typing import Callable

from flfun.core import Primitive, trace_state, get_aval, short
from flfun.primitives.base import instantiate, moveaxis_to_front
from flfun.primitives.common import Zero, is_zero, tangent_aval
from flfun.transforms.jvp import as_arrays, flatten_fun
from flfun.transforms.subprogram import batch_program, fresh, host_impls, run_closed, split, strong, trace_body
from flfun.tree import tree_flatten, tree_unflatten

custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_lin_p = Primitive("custom_lin", multiple_results=True)


def _call_abstract_eval(*avals, call, num_consts, **rule):
    return [strong(a) for a in call.out_avals]


def _call_impl(backend, *vals, call, num_consts, **rule):
    return fresh(run_closed(call, backend, list(vals)), vals)


for _p in (custom_jvp_call_p, custom_vjp_call_p):
    _p.def_abstract_eval(_call_abstract_eval)
    host_impls(_p, _call_impl)


def _no_closure_tangents(name: str, tangents, num_consts: int) -> None:
    if any(not is_zero(t) for t in tangents[:num_consts]):
        raise TypeError(f"{name}: the function closes over a value that is being differentiated; pass it as an "
                        f"argument instead (its derivative rule only sees the arguments)")


def _check_like(name: str, what: str, got: list, want: list) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            raise TypeError(f"{name}: {what} {i} is {short(g)} but the primal value is {short(w)}")


# ---------------------------------------------------------------------------------------------- custom_jvp
def _custom_jvp_rule(primals, tangents, *, call, num_consts, jvp, name):
    _no_closure_tangents(f"custom_jvp {name}", tangents, num_consts)
    outs, touts = jvp(list(primals[num_consts:]), [instantiate(t) for t in tangents[num_consts:]])
    outs, touts = as_arrays(outs), as_arrays(touts)
    _check_like(f"custom_jvp {name}", "primal output", [get_aval(o) for o in outs], call.out_avals)
    _check_like(f"custom_jvp {name}", "tangent output", [get_aval(t) for t in touts], call.out_avals)
    return outs, touts


custom_jvp_call_p.def_jvp(_custom_jvp_rule)


def _front_all(axis, args, dims) -> list:
    return [moveaxis_to_front(a, d, axis.size) for a, d in zip(args, dims)]


def _vmapped(fn: Callable, axis) -> Callable:
    """``fn(*groups of flat lists) -> tuple of flat lists`` mapped over axis 0 of every input and output."""
    from flfun.transforms.vmap import vmap_flat

    def mapped(*groups):
        sizes = [len(g) for g in groups]
        shape = []

        def flat(*xs):
            res = fn(*split(xs, *sizes[:-1]))
            shape[:] = [len(r) for r in res]
            return [x for r in res for x in r]
        vals, bdims = vmap_flat(flat, axis, [x for g in groups for x in g], [0] * sum(sizes))
        return tuple(split(_front_all(axis, vals, bdims), *shape[:-1]))
    return mapped


def _batched_call(prim: Primitive, axis, args, dims, call, **params):
    """Bind ``prim`` on the operands and ``call`` with their mapped axis first (so the results have it first)."""
    args = _front_all(axis, args, dims)
    bcall, _ = batch_program(call, axis, [0] * len(args), [True] * len(call.out_avals))
    outs = prim.bind(*args, call=bcall, **params)
    return outs, [0] * len(outs)


def _custom_jvp_batch(axis, args, dims, *, call, num_consts, jvp, name):
    return _batched_call(custom_jvp_call_p, axis, args, dims, call, num_consts=num_consts, jvp=_vmapped(jvp, axis),
                         name=name)


custom_jvp_call_p.def_batch(_custom_jvp_batch)


class _Custom:
    """What custom_jvp and custom_vjp share: splitting the arguments and tracing the function."""

    def __init__(self, fun: Callable, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums = fun, tuple(nondiff_argnums)

    def _split(self, args: tuple):
        nums = [n % len(args) for n in self.nondiff_argnums]
        nondiff = [args[i] for i in sorted(nums)]
        diff = tuple(a for i, a in enumerate(args) if i not in nums)

        def merge(d):
            it, fixed = iter(d), dict(zip(sorted(nums), nondiff))
            return [fixed[i] if i in fixed else next(it) for i in range(len(args))]
        return nondiff, diff, merge

    def _bind(self, prim: Primitive, args: tuple, **rule):
        nondiff, diff, merge = self._split(args)
        leaves, in_tree = tree_flatten(diff)
        flat, trees = flatten_fun(lambda *d: self.fun(*merge(d)), in_tree)
        call, captured = trace_body(flat, [strong(get_aval(x)) for x in leaves])
        made = {k: v(nondiff, merge, in_tree, trees[0], call) for k, v in rule.items()}
        outs = prim.bind(*captured, *leaves, call=call, num_consts=len(captured),
                         name=getattr(self.fun, "__name__", "fun"), **made)
        return tree_unflatten(trees[0], outs)


class custom_jvp(_Custom):
    """A function with a custom forward-mode rule (JAX's ``jax.custom_jvp``); reverse mode follows by
    transposing the rule's (linear) tangent computation.

    Example::

        @fl.custom_jvp
        def log1pexp(x):
            return fnp.log1p(fnp.exp(x))

        @log1pexp.defjvp
        def log1pexp_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return log1pexp(x), t * fl.nn.sigmoid(x)
    """

    jvp = None

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``."""
        self.jvp = jvp
        return jvp

    def __call__(self, *args):
        if self.jvp is None:
            raise AttributeError(f"custom_jvp {self.__name__}: no JVP rule defined; use .defjvp")
        if trace_state.eager:
            return self.fun(*args)
        return self._bind(custom_jvp_call_p, args, jvp=self._flat_jvp)

    def _flat_jvp(self, nondiff, merge, in_tree, out_tree, call):
        def rule(primals, tangents):
            out, t_out = self.jvp(*nondiff, tree_unflatten(in_tree, primals), tree_unflatten(in_tree, tangents))
            (o, o_tree), (t, t_tree) = tree_flatten(out), tree_flatten(t_out)
            if o_tree != out_tree or t_tree != out_tree:
                raise TypeError(f"custom_jvp {self.__name__}: the rule returns primal {o_tree} and tangent {t_tree}, "
                                f"but the function returns {out_tree}")
            return o, t
        return rule


# ---------------------------------------------------------------------------------------------- custom_vjp
def _custom_vjp_rule(primals, tangents, *, call, num_consts, fwd, bwd, name):
    _no_closure_tangents(f"custom_vjp {name}", tangents, num_consts)
    outs, res = fwd(list(primals[num_consts:]))
    outs, res = as_arrays(outs), as_arrays(res)
    ts = tangents[num_consts:]
    nz = tuple(not is_zero(t) for t in ts)
    touts = custom_lin_p.bind(*res, *[t for t in ts if not is_zero(t)], num_res=len(res), bwd=bwd, nz=nz,
                              out_avals=tuple(tangent_aval(a) for a in call.out_avals), name=name)
    return outs, touts


custom_vjp_call_p.def_jvp(_custom_vjp_rule)


def _custom_vjp_batch(axis, args, dims, *, call, num_consts, fwd, bwd, name):
    bwd_b = _vmapped(lambda res, cts: ([instantiate(c) for c in bwd(res, cts)],), axis)
    return _batched_call(custom_vjp_call_p, axis, args, dims, call, num_consts=num_consts, fwd=_vmapped(fwd, axis),
                         bwd=lambda res, cts: bwd_b(res, cts)[0], name=name)


custom_vjp_call_p.def_batch(_custom_vjp_batch)


@custom_lin_p.def_abstract_eval
def _lin_abstract_eval(*avals, num_res, bwd, nz, out_avals, name):
    return list(out_avals)


def _lin_impl(backend, *vals, name, **params):
    raise TypeError(f"custom_vjp {name}: forward-mode differentiation (jvp, jacfwd) does not work through a "
                    f"custom_vjp function; use custom_jvp, or reverse mode (grad, vjp, jacrev)")


host_impls(custom_lin_p, _lin_impl)


@custom_lin_p.def_transpose
def _lin_transpose(cts, *args, num_res, bwd, nz, out_avals, name):
    cts_in = bwd(list(args[:num_res]), [instantiate(c) for c in cts])
    it = iter(c for c, z in zip(cts_in, nz) if z)
    return [None] * num_res + [None if is_zero(c) else c for c in it]


class custom_vjp(_Custom):
    """A function with a custom reverse-mode rule (JAX's ``jax.custom_vjp``): ``fwd`` returns the output and
    residuals, ``bwd(*nondiff_args, residuals, cotangent)`` one cotangent per differentiable argument.

    Example::

        @fl.custom_vjp
        def clip_gradient(x):
            return x

        clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -1, 1),))
    """

    fwd = bwd = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Set ``fwd(*args) -> (output, residuals)`` and ``bwd(*nondiff_args, residuals, g) -> tuple``."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        if self.fwd is None:
            raise AttributeError(f"custom_vjp {self.__name__}: no VJP rule defined; use .defvjp")
        if trace_state.eager:
            return self.fun(*args)
        return self._bind(custom_vjp_call_p, args, fwd=self._flat_fwd, bwd=self._flat_bwd)

    def _flat_fwd(self, nondiff, merge, in_tree, out_tree, call):
        store = self._res_tree = []

        def fwd(primals):
            out, res = self.fwd(*merge(tree_unflatten(in_tree, primals)))
            o, o_tree = tree_flatten(out)
            if o_tree != out_tree:
                raise TypeError(f"custom_vjp {self.__name__}: fwd returns {o_tree} but the function returns "
                                f"{out_tree}")
            r, r_tree = tree_flatten(res)
            store[:] = [r_tree]
            return o, r
        return fwd

    def _flat_bwd(self, nondiff, merge, in_tree, out_tree, call):
        store = self._res_tree
        in_avals = call.in_avals[len(call.in_avals) - in_tree.num_leaves:]

        def bwd(res, cts):
            g = self.bwd(*nondiff, tree_unflatten(store[0], res), tree_unflatten(out_tree, cts))
            if not isinstance(g, (tuple, list)) or len(g) != len(in_tree.children):
                raise TypeError(f"custom_vjp {self.__name__}: bwd must return a tuple with one cotangent per "
                                f"differentiable argument ({len(in_tree.children)}), got {type(g).__name__}")
            leaves = []
            for part, sub in zip(g, in_tree.children):     # None: a zero cotangent for a whole argument
                leaves.extend([None] * sub.num_leaves if part is None else as_arrays(tree_flatten(part)[0]))
            leaves = [Zero(tangent_aval(a)) if x is None else x for x, a in zip(leaves, in_avals)]
            _check_like(f"custom_vjp {self.__name__}", "cotangent",
                        [x.aval if is_zero(x) else get_aval(x) for x in leaves], in_avals)
            return leaves
        return bwd


__all__ = ["custom_jvp", "custom_vjp", "custom_jvp_call_p", "custom_vjp_call_p", "custom_lin_p"]
