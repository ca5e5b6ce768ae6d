"""Loops and branches under jit: each body is its own planned sub-program, compiled once.

A ``Body`` turns a closed sub-program into generated code ``run(*inputs, *outputs)`` that writes every result into
a buffer it is handed (through ``out=`` where the impl takes one, by a copy otherwise); its intermediates live in
an arena of its own, planned once. ``lower_scan``, ``lower_while`` and ``lower_cond`` are the ``"planned"``
lowerings that ``flfun/transforms/loops.py`` and ``cond.py`` register: their runners keep the carries in two sets of
buffers used in turn (an iteration never overwrites what it reads; the last one lands in the output buffer), write
each step's ``ys`` straight into its row of the stacked output, and allocate nothing per iteration.

``optimize_loops`` rewrites the scans of an optimised program before it is planned: the body gets the standard
passes, equations that read only loop invariants move out of the loop, duplicate stacked outputs become one, and a
carry that accumulates ``dot_general`` products (the weight gradient of a backward scan) becomes one GEMM over the
stacked operands after the loop, and a stacked output that only a later scan reads and that a few elementwise
equations make from the other stacked outputs that scan reads (the ``σ(x)(1 - σ(x))`` residual of a backward
pass) is recomputed by the reader's body instead of stored.
"""
from __future__ import annotations

import numpy as np

from flfun import core
from flfun.compiler.executor import PLANNED, HostGen, load, setup_arena, writes_out
from flfun.compiler.liveness import plan_program
from flfun.compiler.passes import dce, optimize
from flfun.config import config
from flfun.ir import ClosedProgram, Eqn, Literal, Program, Var, sub_programs
from flfun.util import once


def optimized_body(closed: ClosedProgram) -> ClosedProgram:
    """``closed`` after the standard passes and ``optimize_loops`` (cached on it with the registry version)."""
    def make():
        program, consts = optimize(closed.program, closed.consts)
        return ClosedProgram(*optimize_loops(program, consts))
    return once(closed.cache, ("body", core.registry_version), make)


# ------------------------------------------------------------------------------------------------- bodies
class _BodyGen(HostGen):
    """Generated code whose outputs are parameters ``o0, o1, ...``: each result is written into its buffer."""

    def __init__(self, *args):
        super().__init__(*args)
        self.out_names: dict[int, str] = {}
        for j, v in enumerate(self.program.outvars):
            if type(v) is Var:
                self.out_names.setdefault(v.id, f"o{j}")
        self.written: set[str] = set()

    def target(self, v):
        name = self.out_names.get(v.id)
        rs = self.var_roots.get(v.id, ())
        if name is not None and len(rs) == 1 and self.roots[next(iter(rs))].kind == "output":
            self.written.add(name)
            return name
        return super().target(v)

    def copies(self) -> list[str]:
        """``o[...] = value`` for every output no impl wrote into its buffer (inputs, views, literals, repeats)."""
        return [f"o{j}[...] = {self.atom(v)}" for j, v in enumerate(self.program.outvars)
                if f"o{j}" not in self.written or self.out_names.get(v.id) != f"o{j}"]


class Body:
    """``closed`` compiled for ``device``: ``body.run(*inputs, *output_buffers)`` fills the buffers; ``source`` is
    the generated code, ``plan`` the body's memory plan (its arena is allocated once, here).

    Example::

        body = Body(scan_eqn.params["body"], "numpy", device)
        body.run(*consts, *carry, *x_row, *carry_out, *y_row)
    """

    def __init__(self, closed: ClosedProgram, backend: str, device):
        closed = optimized_body(closed)
        program = closed.program
        can = writes_out(backend, True) if config.jit_planned else (lambda e: False)
        self.plan = plan_program(program, can)
        plan, self._block, arena = setup_arena(self, program, device, self.plan)
        g = _BodyGen(program, plan, closed.consts, device, arena)
        lines = g.equations(backend, g.out_args)
        lines += g.copies() or ["pass"]
        self.source = g.source(lines, tuple(f"o{j}" for j in range(len(program.outvars))))
        self.run = load(self.source, g.names, f"<flfun.jit body {id(self):x}>")
        self.out_avals = program.out_avals
        self.xp = getattr(device, "xp", np)

    def empty(self, avals) -> list:
        return [self.xp.empty(a.shape, a.dtype) for a in avals]


def _buffers(out, specs: list, xp) -> list:
    """The output buffers the executor planned (``out``), the others (``None``: program outputs) made now."""
    out = out or (None,) * len(specs)
    return [o if o is not None else xp.empty(shape, dtype) for o, (shape, dtype) in zip(out, specs)]


def _specs(avals, lead: tuple = ()) -> list:
    return [(lead + a.shape, a.dtype) for a in avals]


class ScanRunner:
    """Runs a ``scan`` equation: ``runner(*consts, *carry, *xs, out=(carry buffers..., ys buffers...))``."""

    def __init__(self, e: Eqn, backend: str, device):
        p = e.params
        self.body = Body(p["body"], backend, device)
        self.nc, self.nk, self.length, self.reverse = p["num_consts"], p["num_carry"], p["length"], p["reverse"]
        avals = self.body.out_avals
        self.specs = _specs(avals[:self.nk]) + _specs(avals[self.nk:], (self.length,))
        self.spare = self.body.empty(avals[:self.nk])     # the other set of carry buffers

    def __call__(self, *vals, out=None, **params):
        nc, nk, run = self.nc, self.nk, self.body.run
        consts, carry, xs = list(vals[:nc]), list(vals[nc:nc + nk]), vals[nc + nk:]
        outs = _buffers(out, self.specs, self.body.xp)
        finals, ys = outs[:nk], outs[nk:]
        if self.length == 0:
            for f, c in zip(finals, carry):
                f[...] = c
            return outs
        sets = (finals, self.spare) if (self.length - 1) % 2 == 0 else (self.spare, finals)
        order = range(self.length - 1, -1, -1) if self.reverse else range(self.length)
        cur = carry
        for t, i in enumerate(order):       # iteration t reads ``cur`` and writes sets[t % 2]
            nxt = sets[t & 1]
            run(*consts, *cur, *[x[i, ...] for x in xs], *nxt, *[y[i, ...] for y in ys])   # (0-d rows are views too)
            cur = nxt
        return outs


class WhileRunner:
    """Runs a ``while`` equation: ``runner(*cond_consts, *body_consts, *carry, out=(carry buffers...))``."""

    def __init__(self, e: Eqn, backend: str, device):
        p = e.params
        self.cond, self.body = Body(p["cond"], backend, device), Body(p["body"], backend, device)
        self.ncc, self.nbc = p["cond_nconsts"], p["body_nconsts"]
        self.specs = _specs(self.body.out_avals)
        self.spare, self.pred = self.body.empty(self.body.out_avals), self.body.xp.empty((), bool)

    def __call__(self, *vals, out=None, **params):
        ncc, nbc, pred = self.ncc, self.nbc, self.pred
        cc, bc, carry = list(vals[:ncc]), list(vals[ncc:ncc + nbc]), list(vals[ncc + nbc:])
        finals = _buffers(out, self.specs, self.body.xp)
        sets, cur, n = (finals, self.spare), carry, 0
        self.cond.run(*cc, *cur, pred)
        while pred:
            nxt = sets[n & 1]
            self.body.run(*bc, *cur, *nxt)
            cur, n = nxt, n + 1
            self.cond.run(*cc, *cur, pred)
        if cur is not finals:
            for f, c in zip(finals, cur):
                f[...] = c
        return finals


class CondRunner:
    """Runs a ``cond`` equation: ``runner(index, *operands, out=(result buffers...))``; only one branch runs."""

    def __init__(self, e: Eqn, backend: str, device):
        self.branches = [Body(b, backend, device) for b in e.params["branches"]]
        self.specs = _specs(self.branches[0].out_avals)

    def __call__(self, index, *vals, out=None, **params):
        outs = _buffers(out, self.specs, self.branches[0].xp)
        self.branches[min(max(int(index), 0), len(self.branches) - 1)].run(*vals, *outs)
        return outs


def lower_scan(e: Eqn, backend: str, device) -> ScanRunner:
    """The ``"planned"`` lowering of ``scan``: ``register_lowering(scan_p, "planned", lower_scan)``."""
    return ScanRunner(e, backend, device)


def lower_while(e: Eqn, backend: str, device) -> WhileRunner:
    """The ``"planned"`` lowering of ``while``: ``register_lowering(while_p, "planned", lower_while)``."""
    return WhileRunner(e, backend, device)


def lower_cond(e: Eqn, backend: str, device) -> CondRunner:
    """The ``"planned"`` lowering of ``cond``: ``register_lowering(cond_p, "planned", lower_cond)``."""
    return CondRunner(e, backend, device)


# -------------------------------------------------------------------------------------------- scan rewrites
def _is_scan(e: Eqn) -> bool:
    return e.prim.lowerings.get(PLANNED) is lower_scan


def optimize_loops(program: Program, consts: list) -> tuple[Program, list]:
    """Rewrite every ``scan`` of ``program`` (see the module docstring); other equations are kept.

    Example::

        program, consts = optimize_loops(*optimize(program, consts))
    """
    if not any(_is_scan(e) for e in program.eqns):
        return program, consts
    used = {v.id for e in program.eqns for v in e.inputs if type(v) is Var}
    used |= {v.id for v in program.outvars if type(v) is Var}
    constvars, consts = list(program.constvars), list(consts)
    env: dict = {}
    eqns: list[Eqn] = []
    sub = lambda v: env.get(v.id, v) if type(v) is Var else v
    for e in program.eqns:
        e = Eqn(e.prim, tuple(map(sub, e.inputs)), e.outputs, e.params)
        if not _is_scan(e):
            eqns.append(e)
            continue
        eqns += _rewrite_scan(e, used, env, constvars, consts)
    outvars = [sub(v) for v in program.outvars]
    eqns = _recompute_residuals(eqns, {v.id for v in outvars if type(v) is Var})
    program = Program(constvars, list(program.invars), eqns, outvars)
    return optimize(program, consts, pipeline=("simplify", "dce"))


def _scan_eqn(e: Eqn, body: Program, body_consts: list, ins: list, outs: list, nc: int, nk: int) -> Eqn:
    params = {**e.params, "body": ClosedProgram(body, body_consts), "num_consts": nc, "num_carry": nk}
    return Eqn(e.prim, tuple(ins), tuple(outs), params)


def _rewrite_scan(e: Eqn, used: set, env: dict, constvars: list, consts: list):
    """The equations replacing scan ``e``: hoisted invariants, the scan, the GEMMs of hoisted accumulations."""
    closed = optimized_body(e.params["body"])
    body, bconsts = closed.program, list(closed.consts)
    nc, nk = e.params["num_consts"], e.params["num_carry"]
    ins, outs = list(e.inputs), list(e.outputs)
    pre, body, bconsts, ins, nc = _hoist_invariants(body, bconsts, ins, nc, constvars, consts)
    body, ins, outs, nc, nk = _constant_carries(body, ins, outs, nc, nk, env)
    body, ins, outs, env_add = _merge_ys(body, ins, outs, nc, nk, used)
    env.update(env_add)
    post: list[Eqn] = []
    while True:
        r = _hoist_accumulation(e, body, bconsts, ins, outs, nc, nk)
        if r is None:
            break
        body, ins, outs, nk, extra = r
        post += extra
    body, bconsts = dce(body, bconsts)
    return pre + [_scan_eqn(e, body, bconsts, ins, outs, nc, nk)] + post


def _hoist_invariants(body: Program, bconsts: list, ins: list, nc: int, constvars: list, consts: list):
    """Move body equations that read only the body's constants and const operands out of the loop; their
    results enter the body as new const operands."""
    outer = {v.id: a for v, a in zip(body.invars[:nc], ins[:nc])}
    for v, c in zip(body.constvars, bconsts):
        outer[v.id] = nv = Var(v.aval)
        constvars.append(nv)
        consts.append(c)
    pre, kept, moved = [], [], set()
    for be in body.eqns:
        if (not be.prim.collective and not sub_programs(be.params) and be.prim.impls
                and all(type(v) is Literal or v.id in outer for v in be.inputs)):
            nouts = tuple(Var(v.aval) for v in be.outputs)
            pre.append(Eqn(be.prim, tuple(v if type(v) is Literal else outer[v.id] for v in be.inputs), nouts,
                           be.params))
            outer.update((v.id, nv) for v, nv in zip(be.outputs, nouts))
            moved.add(id(be))
        else:
            kept.append(be)
    if not pre:
        # the body's constants become unused outer constants again (dce drops them)
        return [], body, bconsts, ins, nc
    needed = {v.id for be in kept for v in be.inputs if type(v) is Var} | {v.id for v in body.outvars
                                                                            if type(v) is Var}
    new_in = [v for be in body.eqns if id(be) in moved for v in be.outputs if v.id in needed]
    invars = body.invars[:nc] + new_in + body.invars[nc:]
    ins = ins[:nc] + [outer[v.id] for v in new_in] + ins[nc:]
    return pre, Program(list(body.constvars), invars, kept, list(body.outvars)), bconsts, ins, nc + len(new_in)


def _constant_carries(body: Program, ins: list, outs: list, nc: int, nk: int, env: dict):
    """Carries the body returns unchanged become const operands; their final value is the initial one."""
    same = [k for k in range(nk) if body.outvars[k] is body.invars[nc + k]]
    if not same:
        return body, ins, outs, nc, nk
    env.update((outs[k].id, ins[nc + k]) for k in same)
    order = list(range(nc)) + [nc + k for k in same] + [j for j in range(nc, len(ins)) if j - nc not in same]
    keep = [j for j in range(len(outs)) if j not in same]
    body = Program(list(body.constvars), [body.invars[j] for j in order], list(body.eqns),
                   [body.outvars[j] for j in keep])
    return body, [ins[j] for j in order], [outs[j] for j in keep], nc + len(same), nk - len(same)


def _merge_ys(body: Program, ins: list, outs: list, nc: int, nk: int, used: set):
    """Stacked outputs that repeat another, or that are a stacked input, or that nothing reads: the repeat's
    uses read the first, the input's read the input, and the unread ones are not produced."""
    xs_in = {v.id: ins[nc + nk + k] for k, v in enumerate(body.invars[nc + nk:])}
    first: dict = {}
    env, keep = {}, []
    for j, (v, o) in enumerate(zip(body.outvars, outs)):
        if j < nk:
            keep.append(j)
        elif type(v) is Var and v.id in xs_in and o.aval.shape == xs_in[v.id].aval.shape:
            env[o.id] = xs_in[v.id]
        elif type(v) is Var and v.id in first:
            env[o.id] = outs[first[v.id]]
        elif o.id in used:
            if type(v) is Var:
                first[v.id] = j
            keep.append(j)
    body = Program(list(body.constvars), list(body.invars), list(body.eqns), [body.outvars[j] for j in keep])
    return body, ins, [outs[j] for j in keep], env


def _hoist_accumulation(e: Eqn, body: Program, bconsts: list, ins: list, outs: list, nc: int, nk: int):
    """One carry ``acc + dot_general(a, b)`` (optionally transposed) whose ``acc`` nothing else reads, as a GEMM
    over the stacked ``a`` and ``b`` after the loop (``None`` when there is none)."""
    producer = {v.id: be for be in body.eqns for v in be.outputs}
    reads: dict = {}
    for be in body.eqns:
        for v in be.inputs:
            if type(v) is Var:
                reads[v.id] = reads.get(v.id, 0) + 1
    for v in body.outvars:
        if type(v) is Var:
            reads[v.id] = reads.get(v.id, 0) + 1
    xs_pos = {v.id: nc + nk + k for k, v in enumerate(body.invars[nc + nk:])}
    consts_ids = {v.id for v in body.invars[:nc]} | {v.id for v in body.constvars}
    for k in range(nk):
        acc, new = body.invars[nc + k], body.outvars[k]
        add = producer.get(new.id) if type(new) is Var else None
        if (add is None or add.prim.name != "add" or reads.get(acc.id) != 1 or reads.get(new.id) != 1
                or acc not in add.inputs or add.inputs[0] is add.inputs[1]):
            continue
        d = add.inputs[1] if add.inputs[0] is acc else add.inputs[0]
        dot, perm = producer.get(d.id) if type(d) is Var else None, None
        if dot is not None and dot.prim.name == "transpose" and type(dot.inputs[0]) is Var:
            perm, dot = dot.params["permutation"], producer.get(dot.inputs[0].id)
        if dot is None or dot.prim.name != "dot_general" or dot.params["dimension_numbers"][1] != ((), ()):
            continue
        if any(type(v) is not Var or v.id in consts_ids for v in dot.inputs) or d.aval != new.aval:
            continue
        return _accumulate_after(e, body, ins, outs, nc, nk, k, add, dot, perm, xs_pos)
    return None


def _accumulate_after(e, body, ins, outs, nc, nk, k, add, dot, perm, xs_pos):
    """The rewrite of ``_hoist_accumulation`` for carry ``k``."""
    from flfun.primitives import get      # (the rules of dot_general, add and transpose: the registry)
    length = e.params["length"]
    outvars = list(body.outvars)
    stacked = []
    for v in dot.inputs:
        if v.id in xs_pos:
            stacked.append(ins[xs_pos[v.id]])
            continue
        if v in outvars[nk:]:
            stacked.append(outs[outvars.index(v, nk)])
            continue
        outvars.append(v)
        outs = outs + [Var(core.ShapedArray((length,) + v.aval.shape, v.aval.dtype))]
        stacked.append(outs[-1])
    (lc, rc), _ = dot.params["dimension_numbers"]
    dims = (((0,) + tuple(d + 1 for d in lc), (0,) + tuple(d + 1 for d in rc)), ((), ()))
    total = Var(dot.outputs[0].aval)
    post = [Eqn(dot.prim, tuple(stacked), (total,), {**dot.params, "dimension_numbers": dims})]
    if perm is not None:
        post.append(Eqn(get("transpose"), (total,), (Var(add.outputs[0].aval),), {"permutation": perm}))
        total = post[-1].outputs[0]
    post.append(Eqn(add.prim, (ins[nc + k], total), (outs[k],), {}))
    keep = [j for j in range(len(outvars)) if j != k]
    invars = [v for j, v in enumerate(body.invars) if j != nc + k]
    new_body = Program(list(body.constvars), invars, [be for be in body.eqns if be is not add],
                       [outvars[j] for j in keep])
    return (new_body, [a for j, a in enumerate(ins) if j != nc + k], [outs[j] for j in keep], nk - 1, post)


# ------------------------------------------------------------------------------- residuals recomputed
RECOMPUTE_EQNS = 4     # elementwise equations a reader's body may add per stacked output it no longer reads


def _recompute_residuals(eqns: list, outset: set) -> list:
    """``eqns`` with scan pairs (writer, reader) rewritten by ``_recompute_pair`` until none changes."""
    while True:
        for a_i, b_i, pos in _scan_pairs(eqns, outset):
            new = _recompute_pair(eqns[a_i], eqns[b_i], pos)
            if new is not None:
                eqns = list(eqns)
                eqns[a_i], eqns[b_i] = new
                break
        else:
            return eqns


def _scan_pairs(eqns: list, outset: set):
    """``(writer index, reader index, {writer output index: (reader xs position, read by the reader alone)})`` for
    every scan whose stacked outputs another scan of the same length reads as rows."""
    reads: dict = {}
    for e in eqns:
        for v in e.inputs:
            if type(v) is Var:
                reads.setdefault(v.id, []).append(e)
    writer = {v.id: (i, j) for i, e in enumerate(eqns) if _is_scan(e) for j, v in enumerate(e.outputs)
              if j >= e.params["num_carry"]}
    for b_i, b in enumerate(eqns):
        if not _is_scan(b):
            continue
        first, rows = b.params["num_consts"] + b.params["num_carry"], {}
        for p, v in enumerate(b.inputs[first:], first):
            a_i, j = writer.get(v.id, (None, 0)) if type(v) is Var else (None, 0)
            if a_i is not None and eqns[a_i].params["length"] == b.params["length"] and v.id not in outset:
                rows.setdefault(a_i, {})[j] = (p, [id(r) for r in reads[v.id]] == [id(b)])
        yield from ((a_i, b_i, pos) for a_i, pos in rows.items())


def _recompute_pair(a: Eqn, b: Eqn, pos: dict):
    """Drop the stacked outputs of scan ``a`` (``pos``: output index -> (xs position in scan ``b``, read by ``b``
    alone)) that ``a``'s body computes with at most ``RECOMPUTE_EQNS`` elementwise equations each from the outputs
    ``b`` keeps reading: ``b``'s body computes them first. ``None`` when none can be dropped."""
    body = a.params["body"].program
    producer = {v.id: e for e in body.eqns for v in e.outputs}
    var_of = {j: body.outvars[j] for j in pos if type(body.outvars[j]) is Var}
    leaves = {var_of[j].id for j in pos if j in var_of}
    drop: list = []

    def cone(v, seen: dict) -> bool:
        if type(v) is Literal or v.id in leaves or v.id in seen:
            return True
        e = producer.get(v.id)
        if e is None or len(e.outputs) != 1 or not (e.prim.elementwise or e.prim.elementwise_tangent):
            return False
        seen[v.id] = e
        return all(cone(u, seen) for u in e.inputs)
    for j in sorted(j for j, (_, alone) in pos.items() if alone and j in var_of):
        leaves.discard(var_of[j].id)
        seen: dict = {}
        if all(cone(var_of[k], seen) for k in drop + [j]) and len(seen) <= RECOMPUTE_EQNS * (len(drop) + 1):
            drop.append(j)
        else:
            leaves.add(var_of[j].id)
    if not drop:
        return None
    seen = {}
    for k in drop:
        cone(var_of[k], seen)
    return _drop_rows(a, drop), _recompute_rows(b, body, seen, {var_of[j].id: pos[j][0] for j in pos if j in var_of},
                                               {var_of[k].id: pos[k][0] for k in drop})


def _drop_rows(a: Eqn, drop: list) -> Eqn:
    body, nk = a.params["body"], a.params["num_carry"]
    keep = [j for j in range(len(a.outputs)) if j not in drop]
    program, consts = dce(Program(list(body.program.constvars), list(body.program.invars), list(body.program.eqns),
                                  [body.program.outvars[j] for j in keep]), list(body.consts))
    return _scan_eqn(a, program, consts, list(a.inputs), [a.outputs[j] for j in keep], a.params["num_consts"], nk)


def _recompute_rows(b: Eqn, a_body: Program, cone: dict, rows: dict, dropped: dict) -> Eqn:
    """Scan ``b`` with the xs positions ``dropped.values()`` computed by ``cone``'s equations (``a``'s body vars
    by id) from the rows it reads (``rows``: ``a`` body var id -> xs position of ``b``)."""
    body, closed = b.params["body"].program, b.params["body"]
    env = {vid: body.invars[p] for vid, p in rows.items()}
    pre = []
    for e in a_body.eqns:       # the body's order is a topological one
        if e.outputs[0].id in cone:
            v = e.outputs[0]
            out = body.invars[dropped[v.id]] if v.id in dropped else Var(v.aval)
            env[v.id] = out
            pre.append(Eqn(e.prim, tuple(env[u.id] if type(u) is Var else u for u in e.inputs), (out,), e.params))
    gone = set(dropped.values())
    invars = [v for p, v in enumerate(body.invars) if p not in gone]
    program = Program(list(body.constvars), invars, pre + list(body.eqns), list(body.outvars))
    return _scan_eqn(b, program, list(closed.consts), [v for p, v in enumerate(b.inputs) if p not in gone],
                     list(b.outputs), b.params["num_consts"], b.params["num_carry"])


__all__ = ["Body", "CondRunner", "ScanRunner", "WhileRunner", "lower_cond", "lower_scan", "lower_while",
           "optimize_loops", "optimized_body"]
