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

from flfun.core import _refresh_state, _state, get_aval, wrap
from flfun.primitives.common import UndefinedPrimal, Zero, instantiate, is_zero, unbroadcast
from flfun.primitives.elementwise import add

# Operands in which each primitive is linear (given the others): the transpose rule gives their vjp directly.
LINEAR_IN: dict[str, tuple[int, ...] | str] = {
    "add": "all", "sub": "all", "neg": "all", "mul": "all", "div": (0,), "select_n": "all",
    "convert_element_type": "all", "broadcast_in_dim": "all", "reshape": "all", "transpose": "all",
    "reduce_sum": "all", "slice": "all", "pad": "all", "squeeze": "all", "expand_dims": "all", "rev": "all",
    "concatenate": "all", "dynamic_slice": (0,), "dynamic_update_slice": (0, 1), "gather": (0,),
    "dot_general": "all", "conv_general_dilated": "all", "cumsum": "all",
}


class TapeNode:
    __slots__ = ("prim", "params", "args", "outs", "parents")

    def __init__(self, prim, params, args, outs, parents):
        self.prim, self.params, self.args, self.outs, self.parents = prim, params, args, outs, parents


class Tape:
    """Records evaluations whose operands descend from the watched inputs (by Array identity)."""

    def __init__(self, inputs):
        self.index: dict[int, tuple[TapeNode, int]] = {}
        self.nodes: list[TapeNode] = []
        self.leaves = [TapeNode(None, None, None, [x], None) for x in inputs]
        for x, leaf in zip(inputs, self.leaves):
            self.index[id(x)] = (leaf, 0)

    def record(self, prim, params, args, outs) -> None:
        get = self.index.get
        parents = [get(id(a)) for a in args]
        if parents.count(None) == len(parents):
            return
        index = self.index
        node = TapeNode(prim, params, args, outs, parents)
        self.nodes.append(node)
        for i, o in enumerate(outs):
            index[id(o)] = (node, i)


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
    inputs = [wrap(p._value, p._device) for p in primals]   # fresh identities, even if an array is passed twice
    tape = Tape(inputs)
    _state.tape = tape
    _refresh_state()
    try:
        outs = f(*inputs)
    finally:
        _state.tape = None
        _refresh_state()

    def f_vjp(cts: list) -> list:
        acc: dict[int, object] = {}
        index = tape.index

        def accumulate(node, i, ct):
            key = (id(node), i)
            prev = acc.get(key)
            if prev is None:
                acc[key] = ct
            else:
                acc[key] = add(prev, ct)

        for o, ct in zip(outs, cts):
            where = index.get(id(o))
            if where is not None and ct is not None and not is_zero(ct) and o.dtype.kind == "f":
                accumulate(where[0], where[1], ct)
        for node in reversed(tape.nodes):
            key = id(node)
            if len(node.outs) == 1:
                ct = acc.pop((key, 0), None)
                if ct is None:
                    continue
                node_cts = [ct]
            else:
                node_cts = [acc.pop((key, i), None) for i in range(len(node.outs))]
                if all(c is None for c in node_cts):
                    continue
            need = [i for i, p in enumerate(node.parents) if p is not None and node.args[i].dtype.kind == "f"]
            if not need:
                continue
            for i, ct in node_vjp(node, node_cts, need).items():
                if ct is not None and not is_zero(ct):
                    parent, j = node.parents[i]
                    accumulate(parent, j, ct)
        grads = [acc.get((id(leaf), 0)) for leaf in tape.leaves]
        return [Zero(get_aval(p)) if g is None else g for g, p in zip(grads, primals)]

    return outs, f_vjp
