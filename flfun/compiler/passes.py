"""Semantics-preserving IR passes: call inlining, dead-code elimination, common-subexpression elimination,
constant folding, and simplification of the zeros, ones and broadcasts that autodiff produces.

Every pass maps ``(program, consts) -> (program, consts)`` and never mutates its input. ``optimize`` runs the
standard pipeline that ``jit`` uses; ``PASSES`` names them all for experiments.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np

from flfun.core import ShapedArray, eval_primitive
from flfun.ir import ClosedProgram, Eqn, Literal, Program, Var, sub_programs
from flfun.primitives.elementwise import optimization_barrier_p

FOLD_MAX_BYTES = 16384     # fold equations with constant inputs whose outputs are at most this big


def _atom(v, env: dict):
    """``v`` after the substitutions in ``env`` (var id -> replacement var or literal)."""
    while type(v) is Var and v.id in env:
        v = env[v.id]
    return v


def _rebuild(program: Program, eqns: list, env: dict, constvars=None) -> Program:
    return Program(list(program.constvars if constvars is None else constvars), list(program.invars), eqns,
                   [_atom(v, env) for v in program.outvars])


def _rewrite(program: Program, rule: Callable, constvars=None) -> Program:
    """Walk the equations, inputs substituted: ``rule(e)`` gives ``None`` (keep ``e``), a list of atoms (one per
    output) to stand for its outputs, or a list of equations to walk instead of it."""
    env: dict = {}
    eqns: list[Eqn] = []

    def visit(e: Eqn):
        ins = tuple(_atom(v, env) for v in e.inputs)
        e = Eqn(e.prim, ins, e.outputs, e.params) if ins != e.inputs else e
        new = rule(e)
        if new is None:
            eqns.append(e)
        elif new and type(new[0]) is Eqn:
            for x in new:
                visit(x)
        else:
            env.update((v.id, a) for v, a in zip(e.outputs, new))

    for e in program.eqns:
        visit(e)
    return _rebuild(program, eqns, env, constvars)


# ------------------------------------------------------------------------------------------------- inlining
def _call_param(e: Eqn) -> ClosedProgram | None:
    c = e.params.get("closed")
    return c if isinstance(c, ClosedProgram) else None


def inline_calls(program: Program, consts: list) -> tuple[Program, list]:
    """Replace every call equation (``jit`` nested in ``jit``) by the equations of its body, recursively."""
    if not any(_call_param(e) for e in program.eqns):
        return program, consts
    constvars, consts = list(program.constvars), list(consts)
    eqns: list[Eqn] = []

    def emit(prog: Program, env: dict) -> list:
        for e in prog.eqns:
            ins = [a if type(a) is Literal else env[a.id] for a in e.inputs]
            inner = _call_param(e)
            if inner is not None:
                if e.params.get("prevent_cse"):        # a remat body: never merged with the forward pass
                    ins = _barrier(ins, eqns, e.params["recomputes"])
                cvars = [Var(v.aval) for v in inner.program.constvars]
                constvars.extend(cvars)
                consts.extend(inner.consts)
                sub = {v.id: a for v, a in zip(inner.program.constvars + inner.program.invars, cvars + ins)}
                env.update((v.id, o) for v, o in zip(e.outputs, emit(inner.program, sub)))
                continue
            outs = tuple(Var(v.aval) for v in e.outputs)
            env.update((v.id, nv) for v, nv in zip(e.outputs, outs))
            eqns.append(Eqn(e.prim, tuple(ins), outs, e.params))
        return [v if type(v) is Literal else env[v.id] for v in prog.outvars]

    outvars = emit(program, {v.id: v for v in program.constvars + program.invars})
    return Program(constvars, list(program.invars), eqns, outvars), consts


def _barrier(ins: list, eqns: list, recomputes: tuple) -> list:
    """``ins`` passed through an ``optimization_barrier`` appended to ``eqns``."""
    vs = [a for a in ins if type(a) is Var]
    outs = [Var(v.aval) for v in vs]
    if vs:
        eqns.append(Eqn(optimization_barrier_p, tuple(vs), tuple(outs), {"remat": recomputes}))
    it = iter(outs)
    return [next(it) if type(a) is Var else a for a in ins]


# ---------------------------------------------------------------------------------------------------- DCE
def dce(program: Program, consts: list) -> tuple[Program, list]:
    """Drop equations none of whose outputs is used, and constants nothing reads (all primitives are pure)."""
    live = {v.id for v in program.outvars if type(v) is Var}
    kept = []
    for e in reversed(program.eqns):
        if any(v.id in live for v in e.outputs):
            kept.append(e)
            live.update(v.id for v in e.inputs if type(v) is Var)
    pairs = [(v, c) for v, c in zip(program.constvars, consts) if v.id in live]
    return _rebuild(program, kept[::-1], {}, [v for v, _ in pairs]), [c for _, c in pairs]


# ---------------------------------------------------------------------------------------------------- CSE
def _hashable(x):
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(y) for y in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    try:
        hash(x)
        return x
    except TypeError:
        return ("id", id(x))


def _key_atom(v):
    return ("l", v.key) if type(v) is Literal else v.id


def cse(program: Program, consts: list) -> tuple[Program, list]:
    """Merge equations that apply the same primitive with the same parameters to the same inputs."""
    seen: dict = {}

    def rule(e: Eqn):
        if e.prim is optimization_barrier_p:
            return None
        prev = seen.setdefault((e.prim.name, id(e.prim), tuple(map(_key_atom, e.inputs)), _hashable(e.params)), e)
        return None if prev is e else prev.outputs

    return _rewrite(program, rule), consts


# ------------------------------------------------------------------------------------------ constant folding
def fold_constants(program: Program, consts: list, max_bytes: int = FOLD_MAX_BYTES) -> tuple[Program, list]:
    """Evaluate, at compile time, equations whose inputs are all literals or constants and whose outputs are
    small (at most ``max_bytes``); scalar results become literals, others new constants. Folding calls the
    same registered impls as run time, so results are bit-identical."""
    known: dict[int, Any] = {v.id: c for v, c in zip(program.constvars, consts)}
    constvars, consts = list(program.constvars), list(consts)

    def rule(e: Eqn):
        # collectives depend on the device running the program (also inside a call's or a loop's sub-program):
        # never fold them at compile time
        if sum(v.aval.nbytes for v in e.outputs) > max_bytes or sub_programs(e.params) or e.prim.collective \
                or not all(type(v) is Literal or v.id in known for v in e.inputs):
            return None
        outs = eval_primitive(e.prim, [v.val if type(v) is Literal else known[v.id] for v in e.inputs], e.params)
        new = []
        for v, o in zip(e.outputs, outs if e.prim.multiple_results else [outs]):
            raw = np.asarray(o)
            if raw.shape == () and not v.aval.shape:
                new.append(Literal(raw[()], v.aval))
            else:
                new.append(Var(v.aval))
                known[new[-1].id] = o
                constvars.append(new[-1])
                consts.append(o)
        return new

    return _rewrite(program, rule, constvars), consts


# ---------------------------------------------------------------------------------------- AD simplification
# The algebraic facts come from the primitives' slots: ``elementwise`` (broadcasts like numpy), ``identities``,
# ``value_preserving``, ``chain`` and ``involution`` (see ``core.Primitive``).


def _same(a: ShapedArray, b: ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


def simplify(program: Program, consts: list) -> tuple[Program, list]:
    """Remove the identities that autodiff leaves behind: ``x + 0``, ``x - 0``, ``x * 1``, ``x / 1``,
    ``-(-x)``, ``x ** 1``, ``select_n(p, a, a)``, ``scatter_add(zeros, i, u) + y`` (as ``scatter_add(y, i, u)``: the
    gradient of a gather, accumulated), no-op reshape / transpose / broadcast / convert / reduce_sum, chains of
    reshapes, transposes and broadcasts, a broadcast scalar operand of a broadcasting op or select (numpy
    broadcasts the scalar itself), and ``transpose(dot_general(a, b))`` as ``dot_general(b, a)`` (the transpose
    rule of dot_general leaves these; the swapped product writes its layout directly). ``x * 0`` is left alone
    (it is not 0 for inf or nan); ``x + 0 -> x`` may turn a ``-0.0`` result into ``-0.0`` where IEEE gives ``+0.0``
    (as JAX's symbolic zeros do), and the scatter rewrite adds ``u`` to ``y`` in another order (rounding may
    differ, as under XLA's reassociation)."""
    uses = Counter(v.id for e in program.eqns for v in e.inputs if type(v) is Var)
    uses.update(v.id for v in program.outvars if type(v) is Var)
    # var id -> the scalar every element equals
    uniform = {v.id: np.asarray(c)[()] for v, c in zip(program.constvars, consts) if np.asarray(c).shape == ()}
    producer: dict[int, Eqn] = {}

    def uval(v):
        return v.val if type(v) is Literal else uniform.get(v.id)

    def rule(e: Eqn):          # a rewritten equation is walked again: it may simplify further
        new = _simplify_eqn(e, uval, producer, uses)
        if new is None and len(e.outputs) == 1:
            out = e.outputs[0]
            u = uval(e.inputs[0]) if e.prim.value_preserving else None
            if u is not None:
                uniform[out.id] = np.asarray(u).astype(out.aval.dtype)[()]
            producer[out.id] = e
        return new

    return _rewrite(program, rule), consts


def _swap_dot(dot: Eqn, perm) -> dict | None:
    """Params of ``dot_general(b, a)`` if transposing ``dot_general(a, b)`` by ``perm`` equals it, else None."""
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    a, b = dot.inputs
    nb = len(lb)
    nl = len(a.aval.shape) - len(lc) - nb
    nr = len(b.aval.shape) - len(rc) - nb
    want = tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) + tuple(range(nb, nb + nl))
    if tuple(perm) != want:
        return None
    return {**dot.params, "dimension_numbers": ((tuple(rc), tuple(lc)), (tuple(rb), tuple(lb)))}


def _is(val, target) -> bool:
    return val is not None and bool(np.asarray(val) == target)


def _simplify_eqn(e: Eqn, uval: Callable, producer: dict, uses: dict) -> list | None:
    """A replacement atom for ``e``'s output or the equations to replace ``e`` with (as a list), or ``None``."""
    name, ins, p = e.prim.name, e.inputs, e.params
    if len(e.outputs) != 1:
        return None
    out = e.outputs[0].aval
    x = ins[0] if ins else None
    if e.prim.value_preserving and _same(x.aval, out) and (name != "transpose" or tuple(p["permutation"]) == tuple(
            range(len(out.shape)))) or name == "reduce_sum" and not p["axes"] or name == "integer_pow" and p["y"] == 1:
        return [x]
    prev = producer.get(x.id) if type(x) is Var else None
    if prev is not None and prev.prim is e.prim and (e.prim.involution or e.prim.chain is not None):
        y = prev.inputs[0]
        return [y if e.prim.involution else Eqn(e.prim, (y,), e.outputs, e.prim.chain(prev.params, p))]
    if name == "transpose" and prev is not None and prev.prim.name == "dot_general" and uses[x.id] == 1:
        swapped = _swap_dot(prev, p["permutation"])
        if swapped is not None:
            return [Eqn(prev.prim, prev.inputs[::-1], e.outputs, swapped)]
    if name == "select_n" and len(ins) == 3 and ins[1] is ins[2] and _same(ins[1].aval, out):
        return [ins[1]]
    if name == "select_n":
        cases = [Literal(uval(c), ShapedArray((), c.aval.dtype)) if type(c) is Var and uval(c) is not None
                 and c.aval.shape else c for c in ins[1:]]
        full = [v for v in (ins[0], *cases) if type(v) is Var and v.aval.shape == out.shape]
        if full and any(c is not o for c, o in zip(cases, ins[1:])):
            return [Eqn(e.prim, (ins[0], *cases), e.outputs, p)]
    if name == "pad" and not any(any(c) for c in p["padding_config"]):
        return [x]
    if name == "add" and len(ins) == 2:
        joined = _join_pads(e, producer, uses, uval)
        if joined is not None:
            return joined
        for s, other in (ins, ins[::-1]):      # scatter-add into zeros, plus y: scatter-add into y
            sc = producer.get(s.id) if type(s) is Var else None
            if sc is not None and sc.prim.name == "scatter" and sc.params["op"] == "add" and uses[s.id] == 1 \
                    and _is(uval(sc.inputs[0]), 0) and type(other) is Var and _same(other.aval, out) \
                    and _same(s.aval, out):
                return [Eqn(sc.prim, (other,) + tuple(sc.inputs[1:]), e.outputs, sc.params)]
    if e.prim.elementwise and len(ins) == 2:
        us = uval(ins[0]), uval(ins[1])
        for k, identity in e.prim.identities:
            if _is(us[k], identity) and _same(ins[1 - k].aval, out):
                return [ins[1 - k]]
        for k in (1, 0):     # a broadcast scalar operand: numpy broadcasts the scalar without materialising it
            if us[k] is not None and type(ins[k]) is Var and _same(ins[1 - k].aval, out):
                lit = Literal(us[k], ShapedArray((), ins[k].aval.dtype))
                return [Eqn(e.prim, (ins[0], lit) if k else (lit, ins[1]), e.outputs, p)]
    if e.prim.elementwise:
        return _implicit_broadcast(e, producer)
    return None


def _join_pads(e: Eqn, producer: dict, uses: dict, uval: Callable) -> list | None:
    """``pad(a) + pad(b)`` with zeros around adjacent windows along one axis as ``pad(concatenate(a, b))``:
    the transpose of splitting an array into slices (an LSTM's four gates) then builds it in one pass. (Uses of
    0 are values an earlier rewrite made, for this add alone.)"""
    pads = [producer.get(v.id) if type(v) is Var and uses[v.id] <= 1 else None for v in e.inputs]
    if any(q is None or q.prim.name != "pad" or not _is(uval(q.inputs[1]), 0) for q in pads):
        return None
    (a, ca), (b, cb) = sorted(((q.inputs[0], q.params["padding_config"]) for q in pads), key=lambda t: t[1])
    axes = [d for d, (x, y) in enumerate(zip(ca, cb)) if x != y or x != (0, 0, 0)]
    if len(axes) != 1 or any(c[2] for c in (ca[axes[0]], cb[axes[0]])) or min(ca[axes[0]] + cb[axes[0]]) < 0:
        return None
    d = axes[0]
    if ca[d][0] + a.aval.shape[d] != cb[d][0]:
        return None
    from flfun.primitives import get
    shape = list(a.aval.shape)
    shape[d] += b.aval.shape[d]
    cat = Var(ShapedArray(tuple(shape), a.aval.dtype))
    config = tuple((ca[d][0], cb[d][1], 0) if k == d else c for k, c in enumerate(ca))
    parts = []
    for v in (a, b):      # a concatenate made by an earlier join is extended instead of copied again
        q = producer.get(v.id) if type(v) is Var and uses[v.id] <= 1 else None
        parts += q.inputs if q is not None and q.prim.name == "concatenate" and q.params["dimension"] == d else [v]
    return [Eqn(get("concatenate"), tuple(parts), (cat,), {"dimension": d}),
            Eqn(pads[0].prim, (cat, pads[0].inputs[1]), e.outputs, {"padding_config": config})]


def _implicit_broadcast(e: Eqn, producer: dict):
    """Feed a ``broadcast_in_dim`` operand's source to an op that broadcasts like numpy anyway (when another
    operand has the output shape), reshaped to the output's rank if its dimensions are not the trailing ones."""
    out = e.outputs[0].aval
    ins, new = list(e.inputs), []
    def is_broadcast(v):
        return type(v) is Var and v.id in producer and producer[v.id].prim.name == "broadcast_in_dim"
    if not any(type(v) is Var and v.aval.shape == out.shape and not is_broadcast(v) for v in ins):
        return None
    for k, v in enumerate(ins):
        if not is_broadcast(v) or v.aval.shape != out.shape:
            continue
        prev = producer[v.id]
        y, dims, rank = prev.inputs[0], tuple(prev.params["broadcast_dimensions"]), len(out.shape)
        if dims != tuple(range(rank - len(y.aval.shape), rank)):
            shape = tuple(dict(zip(dims, y.aval.shape)).get(d, 1) for d in range(rank))
            from flfun.primitives import get     # (a literal source is a scalar: its dimensions are trailing)
            new.append(Eqn(get("reshape"), (y,), (Var(ShapedArray(shape, y.aval.dtype)),), {"new_sizes": shape}))
            y = new[-1].outputs[0]
        ins[k] = y
    if not new and ins == list(e.inputs):
        return None
    return new + [Eqn(e.prim, tuple(ins), e.outputs, e.params)]


# ------------------------------------------------------------------------------------------ partial eval
def partial_eval(program: Program, known: list, num_known_outs: int) -> tuple[Program, Program, list[int]]:
    """Split ``program`` by which inputs are known (the primal/tangent split of a jvp program).

    Equations that read an unknown value are unknown. Returns ``(known_prog, unknown_prog, res_invars)``:
    ``known_prog`` takes the known inputs and returns the first ``num_known_outs`` outputs followed by the
    computed residuals; ``unknown_prog`` takes the residuals (first the known inputs listed by position in
    ``res_invars``, then the computed ones) and the unknown inputs, and returns the remaining outputs.
    """
    unknown = {v.id for v, k in zip(program.invars, known) if not k}
    k_eqns, u_eqns = [], []
    for e in program.eqns:
        if any(type(v) is Var and v.id in unknown for v in e.inputs):
            u_eqns.append(e)
            unknown.update(v.id for v in e.outputs)
        else:
            k_eqns.append(e)
    k_outs, u_outs = program.outvars[:num_known_outs], program.outvars[num_known_outs:]
    bad = [v for v in k_outs if type(v) is Var and v.id in unknown]
    if bad:
        raise ValueError(f"partial_eval: outputs {bad} were asked of the known part but depend on unknown inputs")
    consts = {v.id for v in program.constvars}
    pos = {v.id: i for i, (v, k) in enumerate(zip(program.invars, known)) if k}
    res = list({v.id: v for v in [x for e in u_eqns for x in e.inputs] + list(u_outs)
                if type(v) is Var and v.id not in unknown and v.id not in consts}.values())
    res_in, res_computed = [v for v in res if v.id in pos], [v for v in res if v.id not in pos]
    known_prog = Program(list(program.constvars), [v for v, k in zip(program.invars, known) if k], k_eqns,
                         list(k_outs) + res_computed)
    unknown_prog = Program(list(program.constvars),
                           res_in + res_computed + [v for v, k in zip(program.invars, known) if not k],
                           u_eqns, list(u_outs))
    return known_prog, unknown_prog, [pos[v.id] for v in res_in]


# ----------------------------------------------------------------------------------------------- pipeline
PASSES: dict[str, Callable] = {"inline": inline_calls, "simplify": simplify, "fold": fold_constants, "cse": cse,
                               "dce": dce}
DEFAULT_PIPELINE = ("inline", "simplify", "fold", "cse", "simplify", "dce")


def optimize(program: Program, consts: list, pipeline=DEFAULT_PIPELINE) -> tuple[Program, list]:
    """Run the named passes in order (the default is what ``jit`` uses).

    Example::

        program, consts = optimize(program, consts)
        program, consts = optimize(program, consts, pipeline=("dce",))
    """
    for name in pipeline:
        if name not in PASSES:
            raise ValueError(f"optimize: unknown pass {name!r}; known passes: {sorted(PASSES)}")
        program, consts = PASSES[name](program, consts)
    return program, consts


__all__ = ["inline_calls", "dce", "cse", "fold_constants", "simplify", "optimize", "partial_eval",
           "PASSES"]
