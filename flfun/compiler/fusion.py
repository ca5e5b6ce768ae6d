"""Elementwise fusion: chains of elementwise equations of one loop shape become one kernel.

``fuse_elementwise(program, target)`` groups the equations whose primitive has a lowering for ``target``
(``Primitive.lowerings``, see ``flfun.core.register_lowering``) and whose outputs share a shape, plus an optional
reduction with a ``target + "_reduce"`` lowering that is the group's only consumer (an epilogue), and replaces
each group by one equation of a ``FusedPrimitive``. Its numpy impl evaluates the members in order (the
reference semantics); a backend adds its kernel (``register_kernel_builder``): for cupy,
``flfun/backends/cuda/`` lowers a group to C. This pass knows nothing of any target's code.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from flfun.core import PRIMITIVES, Primitive
from flfun.ir import Eqn, Literal, Program, Var

DEFAULT_TARGET = "cuda"
_ids = itertools.count()


# ---------------------------------------------------------------------------------------------------- groups
@dataclass(eq=False)
class FusionGroup:
    """One fused kernel: ``eqns`` (members in program order) computed per element of ``shape``, reading ``inputs``
    (external variables, viewed with ``in_shapes``, which broadcast numpy-style to ``shape``; literals are inlined)
    and writing ``outputs``. A member ``broadcast_in_dim`` of an external value reads its own input slot
    (``slot_of[member index]``), viewed with size-1 dims inserted. ``reduction`` (optional) reduces the group's
    single value over some axes; its result is then the only output."""
    eqns: list[Eqn]
    inputs: list[Var]
    in_shapes: list[tuple]
    outputs: list[Var]
    shape: tuple
    reduction: Eqn | None = None
    slot_of: dict = field(default_factory=dict)
    id: int = field(default_factory=lambda: next(_ids))
    name: str = ""

    def __post_init__(self):
        ops = "_".join(dict.fromkeys(e.prim.name for e in self.eqns + ([self.reduction] if self.reduction else [])))
        self.name = f"flfun_fused_{self.id}_{ops}"[:60]

    def inplace_operands(self) -> tuple[int, ...]:
        """Operands the (single) output may overwrite: elementwise kernels read element i before writing it."""
        if self.reduction is not None or len(self.outputs) != 1:
            return ()
        o = self.outputs[-1].aval
        return tuple(k for k, (v, s) in enumerate(zip(self.inputs, self.in_shapes))
                     if v.aval.shape == o.shape == s and v.aval.dtype == o.dtype and self.inputs.count(v) == 1)

    def evaluate(self, *args, out=None) -> list:
        """The reference semantics: the members' numpy impls, in order (results copied into ``out``'s buffers
        where given, after every input has been read)."""
        env = {v.id: a for v, a in zip(self.inputs, args)}
        read = lambda v: v.val if type(v) is Literal else env[v.id]
        for e in self.eqns + ([self.reduction] if self.reduction is not None else []):
            env[e.outputs[0].id] = e.prim.impls["numpy"](*[read(v) for v in e.inputs], **e.params)
        return [_into(env[v.id], o) for v, o in itertools.zip_longest(self.outputs, out or ())]

    def __repr__(self):
        return f"FusionGroup({self.name}, {len(self.inputs)} in, {len(self.outputs)} out, shape {self.shape})"


def _into(res, out):
    """``res``, or ``out`` holding a copy of it when given."""
    if out is None or out is res:
        return res
    out[...] = res
    return out


class FusedPrimitive(Primitive):
    """The primitive of one fused group. Internal to compiled programs, so it stays out of the public registry;
    ``impls['numpy']`` is the reference evaluation, a backend adds its kernel (see ``register_kernel_builder``)."""

    def __init__(self, group: FusionGroup):
        super().__init__(group.name, multiple_results=True)
        if PRIMITIVES.get(group.name) is self:
            del PRIMITIVES[group.name]
        self.group = group
        self.inplace = group.inplace_operands()
        self.impls["numpy"] = group.evaluate
        self.abstract_eval = lambda *avals: [v.aval for v in group.outputs]
        for backend, build in KERNEL_BUILDERS.items():
            self.impls[backend] = build(group)


KERNEL_BUILDERS: dict[str, Callable[[FusionGroup], Callable]] = {}


def register_kernel_builder(backend: str, build: Callable[[FusionGroup], Callable]) -> None:
    """Make ``build(group) -> impl`` give fused equations their impl on ``backend``.

    Example::

        register_kernel_builder("cupy", lambda group: make_elementwise_kernel(group))
    """
    KERNEL_BUILDERS[backend] = build


def fusible(e: Eqn, target: str = DEFAULT_TARGET) -> bool:
    """Whether ``e`` may join a fused group for ``target``: a single-output equation whose primitive's lowering
    for ``target`` supports it (its dtypes and parameters)."""
    rule = e.prim.lowerings.get(target)
    return len(e.outputs) == 1 and rule is not None and rule(e, [f"a{k}" for k in range(len(e.inputs))]) is not None


def _reduction_ok(e: Eqn, target: str) -> bool:
    rule = e.prim.lowerings.get(target + "_reduce")
    return rule is not None and len(e.outputs) == 1 and rule(e) is not None and e.outputs[0].aval.size > 0 \
        and e.inputs[0].aval.size > 0 and type(e.inputs[0]) is Var


def find_groups(program: Program, can_fuse: Callable[[Eqn], bool] | None = None, reductions: bool = True,
                min_size: int = 2, target: str = DEFAULT_TARGET) -> list[tuple[list[int], int | None]]:
    """Groups of equation indices ``(members, reduction index or None)``; each group runs at the position of its
    last equation. A group stops growing ("seals") once an equation outside it reads one of its values, so
    moving it there never reorders a value after its reader and never makes a cycle."""
    eqns, can_fuse = program.eqns, can_fuse or (lambda e: fusible(e, target))
    parent: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    growing: dict[int, tuple] = {}         # group root -> its loop shape, until the group seals
    produced: dict[int, int] = {}          # var id -> group id (before find)
    readers: dict[int, set] = {}           # group root -> indices of outside equations reading it

    def find(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for i, e in enumerate(eqns):
        gid = None
        if can_fuse(e):
            s = e.outputs[0].aval.shape
            cands = dict.fromkeys(find(produced[v.id]) for v in e.inputs if type(v) is Var and v.id in produced)
            cands = [g for g in cands if growing.get(g) == s]
            if cands:
                gid = cands[0]
                for g in cands[1:]:
                    parent[g] = gid
                    members[gid] += members.pop(g)
                    readers.setdefault(gid, set()).update(readers.pop(g, set()))
            else:
                gid = parent[i] = i
                members[i], growing[i] = [], s
            members[gid].append(i)
        for v in e.inputs:
            if type(v) is Var and v.id in produced:
                g = find(produced[v.id])
                if g != gid:
                    growing.pop(g, None)
                    readers.setdefault(g, set()).add(i)
        if gid is not None:
            for v in e.outputs:
                produced[v.id] = gid
    outs = {v.id for v in program.outvars if type(v) is Var}
    result = []
    for g, ms in members.items():
        red = None
        rd = readers.get(g, ())
        if reductions and len(rd) == 1:
            r, = rd
            read = eqns[r].inputs
            escaping = {v.id for m in ms for v in eqns[m].outputs if v.id in outs or any(u is v for u in read)}
            if _reduction_ok(eqns[r], target) and escaping == {eqns[r].inputs[0].id} and not escaping & outs:
                red = r
        if len(ms) >= min_size or red is not None:
            result.append((sorted(ms), red))
    return result


def _expanded(e: Eqn) -> tuple:
    """The operand of ``broadcast_in_dim`` ``e`` viewed at the output's rank (size-1 dims where it broadcasts)."""
    sizes = dict(zip(e.params["broadcast_dimensions"], e.inputs[0].aval.shape))
    return tuple(sizes.get(d, 1) for d in range(len(e.params["shape"])))


def fuse_elementwise(program: Program, can_fuse: Callable[[Eqn], bool] | None = None, reductions: bool = True,
                     min_size: int = 2, target: str = DEFAULT_TARGET) -> Program:
    """``program`` with each fusible group replaced by one ``FusedPrimitive`` equation (see ``find_groups``).

    Example::

        fused = fuse_elementwise(program)
        print(fused)          # the chains now read  ``a b = flfun_fused_3_add_gt_select_n c d``
    """
    eqns = program.eqns
    groups = find_groups(program, can_fuse, reductions, min_size, target)
    if not groups:
        return program
    outs = {v.id for v in program.outvars if type(v) is Var}
    at: dict[int, Eqn] = {}
    skip: set[int] = set()
    for ms, red in groups:
        mset = set(ms)
        defined = {v.id for m in ms for v in eqns[m].outputs}
        slots: dict[int, int] = {}
        inputs, in_shapes, slot_of = [], [], {}
        for t, m in enumerate(ms):
            e = eqns[m]
            if e.prim.name == "broadcast_in_dim" and type(e.inputs[0]) is Var and e.inputs[0].id not in defined:
                slot_of[t] = len(inputs)
                inputs.append(e.inputs[0])
                in_shapes.append(_expanded(e))
                continue
            for v in e.inputs:
                if type(v) is Var and v.id not in defined and v.id not in slots:
                    slots[v.id] = len(inputs)
                    inputs.append(v)
                    in_shapes.append(v.aval.shape)
        if red is not None:
            outputs = list(eqns[red].outputs)
        else:
            used_outside = {v.id for j, e in enumerate(eqns) if j not in mset for v in e.inputs if type(v) is Var}
            outputs = [v for m in ms for v in eqns[m].outputs if v.id in used_outside or v.id in outs]
        group = FusionGroup([eqns[m] for m in ms], inputs, in_shapes, outputs, eqns[ms[0]].outputs[0].aval.shape,
                            eqns[red] if red is not None else None, slot_of)
        pos = red if red is not None else ms[-1]
        at[pos] = Eqn(FusedPrimitive(group), tuple(group.inputs), tuple(outputs), {})
        skip.update(mset)
    new = [at.get(i, e) for i, e in enumerate(eqns) if i in at or i not in skip]
    return Program(list(program.constvars), list(program.invars), new, list(program.outvars))


__all__ = ["DEFAULT_TARGET", "KERNEL_BUILDERS", "FusedPrimitive", "FusionGroup", "find_groups", "fuse_elementwise",
           "fusible", "register_kernel_builder"]
