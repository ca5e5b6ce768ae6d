"""Structured control flow for ``flfun.lax``: ``cond``, ``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``.

Each traces its function(s) once with abstract values into closed sub-programs and binds one primitive
(``flfun/transforms/cond.py``, ``loops.py``), so it works under every transform in any nesting. Semantics and
signatures follow ``jax.lax``.
"""
from __future__ import annotations

import itertools
from typing import Callable, Sequence

from flfun import dtypes
from flfun.core import Tracer, get_aval, is_weak, short
from flfun.ir import ClosedProgram, Program, Var
from flfun.primitives.elementwise import add, clamp, convert_element_type, lt, ne
from flfun.transforms.cond import cond_p
from flfun.transforms.loops import check_predicate, scan_p, while_p
from flfun.transforms.subprogram import check_types, strong, trace_body
from flfun.tree import tree_flatten, tree_unflatten

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


def _trace(fn: Callable, in_tree, in_avals: list, out_store: list, star: bool = False):
    """Trace ``fn`` on a pytree of tracers (``star``: a tuple of arguments); ``out_store`` receives the output
    structure."""
    def flat(*leaves):
        args = tree_unflatten(in_tree, leaves)
        out = fn(*args) if star else fn(args)
        leaves_out, tree = tree_flatten(out)
        out_store.append(tree)
        return leaves_out
    return trace_body(flat, in_avals)


def _promote_weak(leaves: list, avals: list, outs: list):
    """A weakly typed carry (a Python scalar) takes the dtype the body gives it when promotion would give that
    dtype anyway, as in JAX (``0.0`` becomes float64 for a float64 body, never int32): ``(leaves, avals,
    whether any changed)``."""
    changed = False
    leaves, avals = list(leaves), list(avals)
    for k, (x, a, o) in enumerate(zip(leaves, avals, outs)):
        if (is_weak(x) and a.shape == o.shape and a.dtype != o.dtype
                and dtypes.result_type((a.dtype, True), (o.dtype, False))[0] == o.dtype):
            leaves[k], avals[k], changed = convert_element_type(x, o.dtype), strong(o), True
    return leaves, avals, changed


def _avals(leaves) -> list:
    return [strong(get_aval(x)) for x in leaves]


def switch(index, branches: Sequence[Callable], *operands):
    """``branches[index](*operands)``, the index clamped to the valid range; every branch must return the same
    structure and types. Only the chosen branch runs (under vmap with a batched index, all run, then a select).

    Example::

        >>> lax.switch(1, [lambda x: x + 1, lambda x: x * 2], 3.0)   # 6.0
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("switch: branches must be a non-empty sequence of functions")
    ia = get_aval(index)
    if ia.shape != () or not dtypes.is_int(ia.dtype):
        raise TypeError(f"switch: the index must be an integer scalar, got {short(ia)}")
    index = convert_element_type(index, dtypes.int32)
    index = clamp(convert_element_type(0, dtypes.int32), index, convert_element_type(len(branches) - 1, dtypes.int32))
    return _branch("switch", index, branches, operands)


def _branch(op: str, index, branches: list, operands: tuple, labels=None):
    labels = labels or [f"branch {i}" for i in range(len(branches))]
    leaves, tree = tree_flatten(operands)
    avals = _avals(leaves)
    trees: list = []
    traced = [_trace(fn, tree, avals, trees, star=True) for fn in branches]
    for i, (c, _) in enumerate(traced[1:], 1):
        if trees[i] != trees[0]:
            raise TypeError(f"{op}: {labels[i]} returns {trees[i]} but {labels[0]} returns {trees[0]}")
        check_types(op, f"{labels[i]} output", c.out_avals, f"{labels[0]} output", traced[0][0].out_avals)
    captured = [x for _, cap in traced for x in cap]
    cap_avals = [get_aval(x) for x in captured]
    starts = itertools.accumulate([len(cap) for _, cap in traced], initial=0)
    # every branch takes all branches' captured values and uses its own
    progs = [_with_unused(c, cap_avals, start, len(cap)) for (c, cap), start in zip(traced, starts)]
    outs = cond_p.bind(index, *captured, *leaves, branches=tuple(progs))
    return tree_unflatten(trees[0], outs)


def _with_unused(closed: ClosedProgram, cap_avals: list, start: int, n: int) -> ClosedProgram:
    """``closed`` (inputs: its ``n`` captured values, then the operands) taking all ``cap_avals`` first."""
    p = closed.program
    unused = [Var(strong(a)) for a in cap_avals]
    invars = unused[:start] + p.invars[:n] + unused[start + n:] + p.invars[n:]
    return ClosedProgram(Program(p.constvars, invars, p.eqns, p.outvars), closed.consts)


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``; ``pred`` is a boolean (or numeric)
    scalar. Both branches are traced and must return the same structure and types.

    Example::

        >>> lax.cond(x > 0, lambda x: x, lambda x: -x, x)   # abs(x)
    """
    pa = get_aval(pred)
    if pa.shape != ():
        raise TypeError(f"cond: the predicate must be a scalar, got {short(pa)}")
    if dtypes.kind(pa.dtype) not in "biuf":
        raise TypeError(f"cond: the predicate must be boolean or numeric, got {short(pa)}")
    if pa.dtype != dtypes.bool_:
        pred = ne(pred, convert_element_type(0, pa.dtype))
    index = convert_element_type(pred, dtypes.int32)
    return _branch("cond", index, [false_fun, true_fun], operands, ["false_fun", "true_fun"])


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val)``, with a carry of fixed structure and types.

    Forward-mode differentiable; reverse mode needs a static trip count (use ``fori_loop`` with Python int
    bounds, or ``scan``). Under vmap with a batched predicate it runs until every lane is done.

    Example::

        >>> lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1)   # 16
    """
    leaves, tree = tree_flatten(init_val)
    avals = _avals(leaves)
    c_trees, b_trees = [], []
    cond_c, cond_cap = _trace(cond_fun, tree, avals, c_trees)
    if len(cond_c.out_avals) != 1 or c_trees[0] != tree_flatten(0)[1]:
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got {c_trees[0]}")
    check_predicate("while_loop", cond_c.out_avals[0])
    body_c, body_cap = _trace(body_fun, tree, avals, b_trees)
    leaves, avals, retrace = _promote_weak(leaves, avals, body_c.out_avals)
    if retrace:
        cond_c, cond_cap = _trace(cond_fun, tree, avals, c_trees)
        body_c, body_cap = _trace(body_fun, tree, avals, b_trees)
    if b_trees[0] != tree:
        raise TypeError(f"while_loop: body_fun must return the carry's structure {tree}, got {b_trees[0]}")
    check_types("while_loop", "body_fun carry output", body_c.out_avals, "carry input", avals)
    outs = while_p.bind(*cond_cap, *body_cap, *leaves, cond=cond_c, body=body_c, cond_nconsts=len(cond_cap),
                        body_nconsts=len(body_cap))
    return tree_unflatten(tree, outs)


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False, unroll: int | bool = 1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs`` (pytrees), returning the final carry and
    the ``y``s stacked: ``(carry, ys)``. With ``xs=None``, ``length`` iterations get ``x=None``; ``reverse`` runs
    from the end. Differentiable in both modes (grad keeps the per-step residuals, stacked).

    Example::

        >>> lax.scan(lambda c, x: (c + x, c), 0.0, fnp.arange(4.0))   # (6.0, [0., 0., 1., 3.])
    """
    x_leaves, x_tree = tree_flatten(xs)
    lengths = {int(get_aval(x).shape[0]) if get_aval(x).shape else -1 for x in x_leaves}
    if -1 in lengths:
        raise TypeError("scan: every leaf of xs needs a leading axis to scan over; got a scalar")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ValueError(f"scan: xs leaves and length disagree on the trip count: {sorted(lengths)}"
                         if lengths else "scan: pass xs or length")
    n = lengths.pop()
    if isinstance(unroll, bool):
        unroll = n if unroll else 1
    if not isinstance(unroll, int) or unroll < 1:
        raise ValueError(f"scan: unroll must be a positive int or a bool, got {unroll!r}")
    c_leaves, c_tree = tree_flatten(init)
    c_avals = _avals(c_leaves)
    x_avals = [strong(get_aval(x)).update(shape=get_aval(x).shape[1:]) for x in x_leaves]
    trees = []

    def flat(*leaves):
        out = f(tree_unflatten(c_tree, leaves[:len(c_leaves)]), tree_unflatten(x_tree, leaves[len(c_leaves):]))
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"scan: the body must return a pair (carry, y), got {type(out).__name__}")
        (c_out, c_out_tree), (ys, y_tree) = tree_flatten(out[0]), tree_flatten(out[1])
        if c_out_tree != c_tree:
            raise TypeError(f"scan: body carry output {c_out_tree} does not match carry input {c_tree}")
        trees.append(y_tree)
        return c_out + ys
    body, captured = trace_body(flat, c_avals + x_avals)
    c_leaves, c_avals, retrace = _promote_weak(c_leaves, c_avals, body.out_avals)
    if retrace:
        body, captured = trace_body(flat, c_avals + x_avals)
    check_types("scan", "body carry output", body.out_avals[:len(c_leaves)], "carry input", c_avals)
    outs = scan_p.bind(*captured, *c_leaves, *x_leaves, body=body, num_consts=len(captured),
                       num_carry=len(c_leaves), length=n, reverse=bool(reverse), unroll=unroll)
    return tree_unflatten(c_tree, outs[:len(c_leaves)]), tree_unflatten(trees[0], outs[len(c_leaves):])


def fori_loop(lower, upper, body_fun: Callable, init_val):
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``. With Python int bounds it is a
    ``scan`` (reverse-differentiable); with traced bounds a ``while_loop``.

    Example::

        >>> lax.fori_loop(0, 5, lambda i, acc: acc + i, 0)   # 10
    """
    dt = dtypes.int32 if isinstance(lower, int) else get_aval(lower).dtype
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lo, hi = int(lower), int(upper)

        def step(carry, _):
            i, val = carry
            return (add(i, convert_element_type(1, dt)), body_fun(i, val)), None
        (_, val), _ = scan(step, (convert_element_type(lo, dt), init_val), length=max(hi - lo, 0))
        return val
    lower, upper = convert_element_type(lower, dt), convert_element_type(upper, dt)
    _, _, val = while_loop(lambda c: lt(c[0], c[1]),
                           lambda c: (add(c[0], convert_element_type(1, dt)), c[1], body_fun(c[0], c[2])),
                           (lower, upper, init_val))
    return val


def map(f: Callable, xs):     # noqa: A001 - jax.lax.map's name
    """``stack([f(x) for x in xs])`` over the leading axis of the pytree ``xs``, as one ``scan``.

    Example::

        >>> lax.map(lambda x: x ** 2, fnp.arange(3.0))   # [0., 1., 4.]
    """
    return scan(lambda _, x: ((), f(x)), (), xs)[1]
