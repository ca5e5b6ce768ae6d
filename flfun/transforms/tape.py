"""Eager reverse mode on a tape: the fast path of ``vjp``/``grad`` when nothing else is being traced.

While the function runs, every primitive evaluation (``core.eval_primitive``) whose operands descend from the
inputs is recorded; no tracers are involved, so the forward pass costs little more than plain eager execution.
The backward pass walks the tape in reverse. It has no rules of its own: each node's vector-Jacobian product is
derived from the primitive's jvp and transpose rules (the source of truth), by the cheapest exact route:
  - unary elementwise: the Jacobian is diagonal, so ``J^T ct`` is the jvp tangent rule applied to ``ct``;
  - linear in the needed operands: the transpose rule, one operand at a time (``mul``, ``dot_general``, ...);
  - broadcasting binary elementwise: the jvp with ``ct`` as the tangent of one operand, summed back to its shape;
  - anything else: linearize that single primitive and transpose it (the general path).
Nested transforms inside the function (vmap, jit, an inner grad via linearize) end in evaluations too, so they are
recorded as well. Tests compare tape gradients with linearize + transpose for every op-table record.
"""
from __future__ import annotations

from flfun import dtypes
from flfun.core import trace_state, get_aval, wrap
from flfun.primitives.rules import UndefinedPrimal, Zero, instantiate, is_zero, unbroadcast
from flfun.primitives.elementwise import add

class Tape:
    """Records evaluations whose operands descend from the watched inputs (``index``: ids of the Arrays that do)
    as ``(prim, params, args, outs, watched)``; the nodes keep those Arrays, and so their ids, alive."""

    def __init__(self, inputs):
        self.inputs, self.nodes, self.index = inputs, [], {id(x) for x in inputs}

    def record(self, prim, params, args, outs) -> None:
        index = self.index
        watched = [id(a) in index for a in args]
        if True in watched:
            self.nodes.append((prim, params, args, outs, watched))
            index.update(map(id, outs))


def node_vjp(prim, params, args, outs, cts: list, need: list[int]) -> dict[int, object]:
    """Cotangents of a node's operands ``need`` given its output cotangents (``None`` = zero)."""
    if not prim.multiple_results:
        ct = cts[0]
        tangent = prim.elementwise_tangent
        if tangent is not None:
            return {0: tangent(ct, args[0], outs[0])}
        linear = prim.linear_in    # the operands it is linear in: the transpose rule gives their vjp directly
        if prim.transpose is not None and linear is not None and (linear == "all" or set(need) <= set(linear)):
            return {i: prim.transpose(ct, *[UndefinedPrimal(get_aval(a)) if j == i else a for j, a in enumerate(args)],
                                      **params)[i] for i in need}
        if prim.elementwise:
            out = {}
            for i in need:
                _, t = prim.jvp(args, [ct if j == i else Zero(get_aval(a)) for j, a in enumerate(args)], **params)
                out[i] = None if is_zero(t) else unbroadcast(t, get_aval(args[i]))
            return out
    from flfun.transforms.transpose import vjp_flat_linearized
    single = (lambda *a: prim.bind(*a, **params)) if prim.multiple_results else \
        (lambda *a: [prim.bind(*a, **params)])
    _, f_vjp = vjp_flat_linearized(single, list(args))
    res = f_vjp([instantiate(Zero(get_aval(o))) if c is None else c for c, o in zip(cts, outs)])
    return {i: res[i] for i in need}


def tape_vjp_flat(f, primals: list):
    """``(outputs, f_vjp)`` for a flat function of concrete arrays, recording a tape (see module docstring)."""
    inputs = [wrap(p._value, p._device) for p in primals]   # fresh identities, even if an array is passed twice
    tape = trace_state.tape = Tape(inputs)
    trace_state.refresh()
    try:
        outs = f(*inputs)
    finally:
        trace_state.tape = None
        trace_state.refresh()

    def f_vjp(cts: list) -> list:
        acc: dict[int, object] = {}     # id of an Array on the tape -> its cotangent so far

        def accumulate(x, ct):
            prev = acc.get(id(x))
            acc[id(x)] = ct if prev is None else add(prev, ct)

        for o, ct in zip(outs, cts):
            if id(o) in tape.index and ct is not None and not is_zero(ct) and dtypes.is_inexact(o.dtype):
                accumulate(o, ct)
        for prim, params, args, node_outs, watched in reversed(tape.nodes):
            if acc.keys().isdisjoint(map(id, node_outs)):
                continue
            node_cts = [acc.pop(id(o), None) for o in node_outs]
            need = [i for i, w in enumerate(watched) if w and dtypes.is_inexact(args[i].dtype)]
            for i, ct in node_vjp(prim, params, args, node_outs, node_cts, need).items() if need else ():
                if ct is not None and not is_zero(ct):
                    accumulate(args[i], ct)
        return [Zero(get_aval(p)) if id(x) not in acc else acc[id(x)] for x, p in zip(inputs, primals)]

    return outs, f_vjp
