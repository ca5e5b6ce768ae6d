"""Forward mode: ``jvp`` and ``linearize``, an interpreter that carries a tangent beside every value.

Absent tangents are symbolic ``Zero``s, so inputs that are not differentiated cost nothing. ``linearize`` runs
the jvp with tangents staged into a ``Program`` (partial evaluation by trace level: primal work runs on the outer
levels, tangent work is recorded), which ``vjp`` then transposes.
"""
from __future__ import annotations

from typing import Any, Callable

from flfun import dtypes
from flfun.array import Array
from flfun.core import Trace, Tracer, full_lower, full_raise, get_aval, missing_rule, new_main, to_array
from flfun.ir import eval_program
from flfun.primitives.rules import Zero, instantiate, is_zero, tangent_aval
from flfun.transforms.staging import trace_to_program
from flfun.tree import tree_flatten, tree_unflatten


class JVPTracer(Tracer):
    """A value under ``jvp``: its ``primal`` and its ``tangent`` (a ``Zero`` while nothing it depends on has a
    tangent; ``full_lower`` then hands back the bare primal)."""
    __slots__ = ("primal", "tangent")

    def __init__(self, trace, primal, tangent):
        self._trace, self.primal, self.tangent = trace, primal, tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def full_lower(self):
        return full_lower(self.primal) if is_zero(self.tangent) else self


class JVPTrace(Trace):
    """Forward mode: a value from outside gets a zero tangent; a primitive runs its ``jvp`` rule on the primals
    and tangents (or binds the primals alone when every tangent is zero)."""

    def pure(self, val):
        return JVPTracer(self, val, Zero(tangent_aval(get_aval(val))))

    def process_primitive(self, prim, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(is_zero(t) for t in tangents):
            out = prim.bind(*primals, **params)
            return [self.pure(o) for o in (out if prim.multiple_results else [out])]
        if prim.jvp is None:
            raise missing_rule("jvp", prim)
        out, t_out = prim.jvp(primals, tangents, **params)
        return [JVPTracer(self, p, t) for p, t in (zip(out, t_out) if prim.multiple_results else [(out, t_out)])]


def leaf_like(x, aval):
    """A tangent or cotangent leaf as an array: a Python number takes ``aval``'s dtype, numpy values are converted."""
    return x if isinstance(x, Array) else to_array(x, aval.dtype if type(x) in (int, float) else None)


def _tangent_leaves(fname: str, tangents: tuple, p_leaves: list, p_tree, structure_error: str) -> list:
    """The leaves of ``tangents`` after checking them against the primals (``structure_error`` is formatted with
    the primal and tangent structures ``p`` and ``t``); Python scalars take their primal's dtype."""
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if t_tree != p_tree:
        raise ValueError(structure_error.format(p=p_tree, t=t_tree))
    p_avals = [get_aval(p) for p in p_leaves]
    t_leaves = [leaf_like(t, a) for t, a in zip(t_leaves, p_avals)]
    for i, (pa, ta) in enumerate(zip(p_avals, map(get_aval, t_leaves))):
        if pa.shape != ta.shape or (dtypes.is_inexact(pa.dtype) and pa.dtype != ta.dtype):
            raise ValueError(f"{fname}: tangent {i} has aval {ta.str_short()} but its primal has {pa.str_short()}; "
                             f"they must match")
    return t_leaves


def as_arrays(xs: list) -> list:
    """Python scalars and numpy values become Arrays, so rules can rely on ``.dtype`` and ``.shape``."""
    return [x if isinstance(x, Array) else to_array(x) for x in xs]


def _input_tangent(primal, t):
    """Integer and boolean inputs have no tangent space: whatever tangent they were given is a symbolic zero."""
    if not dtypes.is_inexact(primal.dtype):
        return Zero(tangent_aval(primal))
    return t if is_zero(t) or isinstance(t, Array) else to_array(t)


def jvp_flat(f: Callable, primals: list, tangents: list) -> tuple[list, list]:
    """Flat jvp: ``f(*primals) -> list``; tangents may be ``Zero``; output tangents may be ``Zero``."""
    primals = as_arrays(primals)
    tangents = [_input_tangent(p, t) for p, t in zip(primals, tangents)]
    with new_main(JVPTrace) as main:
        outs = [full_raise(main.trace, o) for o in f(*[JVPTracer(main.trace, p, t) for p, t in zip(primals, tangents)])]
        return [o.primal for o in outs], [o.tangent for o in outs]


def split_aux(op: str, out) -> tuple:
    """``(output, aux)`` from the result of a ``has_aux=True`` function; a TypeError naming ``op`` if it is not
    a pair."""
    if type(out) is not tuple or len(out) != 2:
        got = f"a {type(out).__name__} of length {len(out)}" if isinstance(out, (tuple, list)) else \
            type(out).__name__
        raise TypeError(f"{op}: with has_aux=True the function must return a tuple (output, aux), got {got}")
    return out


def flatten_fun(f: Callable, in_tree, has_aux: bool = False, op: str = "vjp") -> tuple[Callable, list]:
    """Wrap a pytree function as a flat one; the returned list receives the output structure (and, with
    ``has_aux``, the auxiliary value of ``f``'s ``(output, aux)``)."""
    store = []

    def flat(*leaves):
        out = f(*tree_unflatten(in_tree, leaves))
        out, aux = split_aux(op, out) if has_aux else (out, None)
        leaves_out, td = tree_flatten(out)
        store[:] = [td, aux]
        return leaves_out
    return flat, store


def jvp(f: Callable, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """Forward-mode derivative: ``(f(*primals), df(primals) . tangents)``.

    Example::

        >>> fl.jvp(fnp.sin, (0.0,), (1.0,))
        (Array(0.), Array(1.))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument of f)")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves = _tangent_leaves("jvp", tangents, p_leaves, p_tree,
                               "jvp: primal and tangent structures differ: {p} and {t}")
    flat, out_tree = flatten_fun(f, p_tree)
    outs, touts = jvp_flat(flat, p_leaves, t_leaves)
    return tree_unflatten(out_tree[0], outs), tree_unflatten(out_tree[0], [instantiate(t) for t in touts])


def linearize_flat(f: Callable, primals: list):
    """Run ``f``'s jvp with staged tangents. Returns primal outputs, the linear program, its constants and
    which output tangents are symbolically zero (those are not program outputs)."""
    primals = as_arrays(primals)
    store = []

    def tangent_fun(*tangents_in):
        primals_out, tangents_out = jvp_flat(f, primals, list(tangents_in))
        store[:] = [primals_out, [t.aval if is_zero(t) else None for t in tangents_out]]
        return [t for t in tangents_out if not is_zero(t)]
    program, consts = trace_to_program(tangent_fun, [tangent_aval(get_aval(p)) for p in primals], dynamic=False)
    return store[0], program, consts, store[1]


def linearize(f: Callable, *primals) -> tuple[Any, Callable]:
    """``(f(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the linear map without re-running ``f``.

    Example::

        >>> y, f_jvp = fl.linearize(fnp.sin, 0.5)
        >>> f_jvp(1.0)  # cos(0.5)
    """
    p_leaves, p_tree = tree_flatten(tuple(primals))
    flat, out_tree = flatten_fun(f, p_tree)
    outs, program, consts, zero_avals = linearize_flat(flat, p_leaves)

    def f_jvp(*tangents):
        t_leaves = _tangent_leaves("linearize", tangents, p_leaves, p_tree, "linearize: tangent structure {t} does "
                                                                            "not match primals {p}")
        it = iter(eval_program(program, consts, t_leaves))
        return tree_unflatten(out_tree[0], [next(it) if a is None else instantiate(Zero(a)) for a in zero_avals])

    return tree_unflatten(out_tree[0], outs), f_jvp


__all__ = ["split_aux", "jvp", "linearize", "jvp_flat", "linearize_flat", "JVPTrace", "JVPTracer"]
