"""Liveness for memory plans: which values of a program need an arena buffer, which reuse an operand's buffer
in place, and when each buffer is live.

``plan_program`` decides where every intermediate of a ``Program`` lives. Values whose primitive can write
into an ``out=`` buffer get a buffer in the arena, or reuse the buffer of an operand that dies at that
equation when the primitive's ``inplace`` hint allows (never a caller's input unless donated). Values from
impls that allocate for themselves may be views of their operands, so they keep those operands' buffers
alive. A strategy from ``flfun.memory.planner`` then assigns the arena offsets.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flfun.ir import Eqn, Program, Var
from flfun.memory.raw import ALIGNMENT
from flfun.primitives.elementwise import optimization_barrier_p
from flfun.memory.planner import STRATEGIES, BufferSpec, MemoryPlan, arena_size


@dataclass
class Root:
    """A piece of memory a value may live in: an input, a constant, an arena buffer, a fresh output, or memory
    an impl allocated itself (``heap``)."""
    id: int
    kind: str                      # "input" | "const" | "arena" | "output" | "heap"
    nbytes: int = 0
    index: int = -1                # input/const position, or the equation that created it
    end: int = -1                  # last program point at which a value in it is read
    donated: bool = False
    exact: set = field(default_factory=set)   # var ids whose array is this root's whole buffer, in layout
    label: str = ""


def plan_program(program: Program, can_write_out: Callable[[Eqn], bool] = lambda e: False,
                 donated: Iterable[int] = (), strategy: str = "auto",
                 alignment: int = ALIGNMENT, inplace: bool = True) -> MemoryPlan:
    """Plan the memory of ``program``.

    ``can_write_out(eqn)`` says whether the equation's impl writes into an ``out=`` buffer; ``donated`` lists
    input positions whose buffers the program may overwrite. ``inplace=False`` turns in-place reuse off.

    Example::

        plan = plan_program(program, lambda e: True, strategy="best_fit")
        print(plan.summary())
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"plan_program: unknown strategy {strategy!r}; registered: {sorted(STRATEGIES)}")
    if alignment < 1 or alignment & (alignment - 1):
        raise ValueError(f"plan_program: alignment must be a power of two, got {alignment}")
    donated = set(donated)
    n = len(program.eqns)
    outputs = {v.id for v in program.outvars if type(v) is Var}
    # var id -> the last equation reading it (n for program outputs)
    last = {v.id: i for i, e in enumerate(program.eqns) for v in e.inputs if type(v) is Var} | dict.fromkeys(outputs, n)
    roots: dict[int, Root] = {}
    var_roots: dict[int, frozenset] = {}

    def bind(v: Var, r: Root, views: frozenset | None = None) -> None:
        """``v`` lives in ``r`` as its whole buffer or, given the roots it ``views``, somewhere in them or in r."""
        var_roots[v.id] = rs = frozenset((r.id,)) if views is None else views | {r.id}
        for rid in rs:
            roots[rid].end = max(roots[rid].end, last.get(v.id, -1))
        if views is None:
            r.exact.add(v.id)

    def fresh(v: Var, kind: str, index: int, views: frozenset | None = None, **kw) -> None:
        roots[len(roots)] = r = Root(len(roots), kind, v.aval.nbytes, index, **kw)
        bind(v, r, views)

    for i, v in enumerate(program.constvars):
        fresh(v, "const", i)
    for i, v in enumerate(program.invars):
        fresh(v, "input", i, donated=i in donated)
    hits = 0
    for i, e in enumerate(program.eqns):
        in_roots = [var_roots[v.id] if type(v) is Var else frozenset() for v in e.inputs]
        writes = can_write_out(e)
        if not writes or len(e.outputs) != 1:
            barrier = e.prim is optimization_barrier_p        # output k is operand k
            for k, v in enumerate(e.outputs):      # (a runner writing several results gives each its own buffer)
                if writes:
                    fresh(v, "output" if v.id in outputs else "arena", i, label=f"{v.aval.str_short()} {e.prim.name}")
                else:
                    fresh(v, "heap", i, in_roots[k] if barrier else frozenset().union(*in_roots))
            continue
        v = e.outputs[0]
        target = _inplace_target(e, i, v, in_roots, roots, v.id in outputs) if inplace else None
        if target is not None:
            hits += 1
            bind(v, target)
        else:
            fresh(v, "output" if v.id in outputs else "arena", i, label=f"{v.aval.str_short()} {e.prim.name}")

    return _place(program, roots, var_roots, last, hits, strategy, alignment)


def _place(program: Program, roots: dict, var_roots: dict, last: dict, hits: int, strategy: str,
           alignment: int) -> MemoryPlan:
    """The checked plan: the arena roots as buffers, placed by ``strategy``, with the plan's byte figures."""
    buffers = [BufferSpec(r.id, -(-r.nbytes // alignment) * alignment, r.index, max(r.end, r.index), label=r.label,
                          values=len(r.exact)) for r in roots.values() if r.kind == "arena"]
    offsets = STRATEGIES[strategy](buffers, alignment)
    for b in buffers:
        b.offset = offsets[b.id]
    plan = MemoryPlan(strategy, alignment, buffers, arena_size(buffers, offsets),
                      sum(v.aval.nbytes for e in program.eqns for v in e.outputs), sum(b.size for b in buffers),
                      _peak((b.start, b.end, b.size) for b in buffers),
                      _peak((i, max(last.get(v.id, i), i), v.aval.nbytes) for i, e in enumerate(program.eqns)
                            for v in e.outputs), hits, len(program.eqns), roots, var_roots, program)
    remat = [e.params.get("remat", (0, 0)) for e in program.eqns if e.prim is optimization_barrier_p]
    plan.recomputed_eqns, plan.recomputed_bytes = (sum(r[k] for r in remat) for k in (0, 1))
    plan.check()
    return plan


def _inplace_target(e: Eqn, i: int, v: Var, in_roots: list, roots: dict, is_out: bool) -> Root | None:
    """The buffer of an operand that ``v`` may overwrite: the primitive allows it, the operand is that buffer
    in full, same shape and dtype, the buffer is dead after this equation, and no other operand reads it."""
    for j in e.prim.inplace:
        x = e.inputs[j] if j < len(e.inputs) else None
        if type(x) is not Var or len(in_roots[j]) != 1:
            continue
        r = roots[next(iter(in_roots[j]))]
        if (x.id in r.exact and x.aval.shape == v.aval.shape and x.aval.dtype == v.aval.dtype and r.end <= i
                and ((r.kind == "arena" and not is_out) or (r.kind == "input" and r.donated))
                and not any(r.id in rs and e.inputs[k] is not x for k, rs in enumerate(in_roots) if k != j)):
            return r
    return None


def _peak(intervals: Iterable[tuple[int, int, int]]) -> int:
    """The most bytes live at once over ``(first, last, nbytes)`` intervals (both ends inclusive): the arena's
    lower bound, or JAX's ``peak_live_intermediates`` (each equation output live until its last use)."""
    delta: dict[int, int] = {}
    for first, last, nbytes in intervals:
        delta[first] = delta.get(first, 0) + nbytes
        delta[last + 1] = delta.get(last + 1, 0) - nbytes
    return max(itertools.accumulate(delta[t] for t in sorted(delta)), default=0)


__all__ = ["Root", "plan_program"]
