"""Eager reverse mode on a tape: the fast path of ``vjp``/``grad`` when nothing else is being traced.

The forward pass runs eagerly and records each primitive application; the backward pass walks the tape in
reverse. It has no rules of its own: each node's vector-Jacobian product is derived from the primitive's jvp
and transpose rules (the source of truth), by the cheapest route that is exact:
  - unary elementwise: the Jacobian is diagonal, so ``J^T ct`` is the jvp tangent rule applied to ``ct``;
  - linear in the needed operands: the transpose rule, one operand at a time (``mul``, ``dot_general``, ...);
  - broadcasting binary elementwise: the jvp with ``ct`` as the tangent of one operand, summed back to its shape;
  - anything else: linearize that single primitive and transpose it (the general path).
Tests compare tape gradients against the linearize-then-transpose path for every op-table record.
"""
from __future__ import annotations

from flfun.core import ShapedArray, Trace, Tracer, eval_primitive, full_raise, get_aval, new_main
from flfun.primitives.common import Zero, instantiate, is_zero, unbroadcast

# Operands in which each primitive is linear (given the others): the transpose rule gives their vjp directly.
LINEAR_IN: dict[str, tuple[int, ...] | str] = {
    "add": "all", "sub": "all", "neg": "all", "mul": "all", "div": (0,), "select_n": "all",
    "convert_element_type": "all", "broadcast_in_dim": "all", "reshape": "all", "transpose": "all",
    "reduce_sum": "all", "slice": "all", "pad": "all", "squeeze": "all", "expand_dims": "all", "rev": "all",
    "concatenate": "all", "dynamic_slice": (0,), "dynamic_update_slice": (0, 1), "gather": (0,),
    "dot_general": "all", "conv_general_dilated": "all", "cumsum": "all", "psum": "all",
}


class TapeNode:
    __slots__ = ("prim", "params", "args", "outs", "parents")

    def __init__(self, prim, params, args, outs, parents):
        self.prim, self.params, self.args, self.outs, self.parents = prim, params, args, outs, parents


class TapeTracer(Tracer):
    __slots__ = ("value", "node", "index")

    def __init__(self, trace, value, node, index):
        self._trace = trace
        self.value = value
        self.node = node
        self.index = index

    @property
    def aval(self):
        return get_aval(self.value)

    def full_lower(self):
        return self if self.node is not None else self.value


class TapeTrace(Trace):
    def pure(self, val):
        return TapeTracer(self, val, None, 0)

    lift = pure

    def process_primitive(self, prim, tracers, params):
        vals = [t.value for t in tracers]
        # tape values are concrete and the tape is the innermost level, so evaluate directly
        out = eval_primitive(prim, vals, params) if prim.collective is False else prim.bind(*vals, **params)
        outs = out if prim.multiple_results else [out]
        parents = [(t.node, t.index) if t.node is not None else None for t in tracers]
        if all(p is None for p in parents):
            return [TapeTracer(self, o, None, 0) for o in outs]
        node = TapeNode(prim, params, vals, outs, parents)
        return [TapeTracer(self, o, node, i) for i, o in enumerate(outs)]


def _is_float(x) -> bool:
    return x.dtype.kind == "f"


def node_vjp(node: TapeNode, cts: list, need: list[int]) -> dict[int, object]:
    """Cotangents of ``node``'s operands ``need`` given its output cotangents (``None`` = zero)."""
    prim, args, params = node.prim, node.args, node.params
    if not prim.multiple_results:
        ct = cts[0]
        tangent = prim.elementwise_tangent
        if tangent is not None:
            return {0: tangent(ct, args[0], node.outs[0])}
        linear = LINEAR_IN.get(prim.name)
        if prim.transpose is not None and linear is not None and (linear == "all" or set(need) <= set(linear)):
            from flfun.transforms.vjp import UndefinedPrimal
            out = {}
            for i in need:
                targs = [UndefinedPrimal(get_aval(a)) if j == i else a for j, a in enumerate(args)]
                out[i] = prim.transpose(ct, *targs, **params)[i]
            return out
        if prim.elementwise:
            out = {}
            for i in need:
                tangents = [ct if j == i else Zero(get_aval(a)) for j, a in enumerate(args)]
                _, t = prim.jvp(args, tangents, **params)
                out[i] = None if is_zero(t) else unbroadcast(t, get_aval(args[i]))
            return out
    from flfun.transforms.vjp import vjp_flat_linearized
    single = (lambda *a: prim.bind(*a, **params)) if prim.multiple_results else \
        (lambda *a: [prim.bind(*a, **params)])
    _, f_vjp = vjp_flat_linearized(single, list(args))
    full = [instantiate(Zero(get_aval(o))) if c is None else c for c, o in zip(cts, node.outs)]
    res = f_vjp(full)
    return {i: res[i] for i in need}


def tape_vjp_flat(f, primals: list):
    """``(outputs, f_vjp)`` for a flat function of concrete arrays, recording a tape (see module docstring)."""
    with new_main(TapeTrace) as main:
        trace = main.trace
        leaves = [TapeNode(None, None, None, [p], None) for p in primals]
        ins = [TapeTracer(trace, p, n, 0) for p, n in zip(primals, leaves)]
        outs = [full_raise(trace, o) for o in f(*ins)]
    out_vals = [o.value for o in outs]

    def f_vjp(cts: list) -> list:
        acc: dict[tuple[int, int], object] = {}
        order: dict[int, TapeNode] = {}

        def add(node, index, ct):
            key = (id(node), index)
            if key in acc:
                from flfun.primitives.elementwise import add as add_
                acc[key] = add_(acc[key], ct)
            else:
                acc[key] = ct
                order[id(node)] = node

        for o, ct in zip(outs, cts):
            if o.node is not None and ct is not None and not is_zero(ct) and _is_float(o.value):
                add(o.node, o.index, ct)
        seen = _toposort([o.node for o in outs if o.node is not None])
        for node in reversed(seen):
            if node.prim is None:
                continue
            node_cts = [acc.pop((id(node), i), None) for i in range(len(node.outs))]
            if all(c is None for c in node_cts):
                continue
            need = [i for i, (p, a) in enumerate(zip(node.parents, node.args)) if p is not None and _is_float(a)]
            if not need:
                continue
            for i, ct in node_vjp(node, node_cts, need).items():
                if ct is not None and not is_zero(ct):
                    parent, index = node.parents[i]
                    add(parent, index, ct)
        return [acc.get((id(n), 0), Zero(ShapedArray(p.shape, p.dtype))) for n, p in zip(leaves, primals)]

    return out_vals, f_vjp


def _toposort(roots: list) -> list:
    """Nodes reachable from ``roots`` in an order where every node follows its parents."""
    order, visited = [], set()
    stack = [(n, False) for n in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for p in node.parents or ():
            if p is not None and id(p[0]) not in visited:
                stack.append((p[0], False))
    return order
