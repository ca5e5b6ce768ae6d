"""Staging: trace a function with abstract values into a ``Program`` (used by linearize and jit).

A ``StagingTrace`` records every primitive applied to its tracers as an equation; values from outside (concrete
arrays or tracers of outer transforms) become the program's constants. As a *dynamic* trace (jit) it records
every bind, even on constants.
"""
from __future__ import annotations

from typing import Callable

from flfun.core import ShapedArray, Trace, Tracer, full_raise, get_aval, new_main
from flfun.ir import Eqn, Literal, Program, Var


class StagingTracer(Tracer):
    """A value being staged: only its abstract value and the program ``Var`` that will hold it."""
    __slots__ = ("aval", "var")

    def __init__(self, trace: "StagingTrace", aval: ShapedArray):
        self._trace, self.aval, self.var = trace, aval, Var(aval)


class StagingTrace(Trace):
    """Records into ``main.global_data``: ``(equations, {id(constant): (its tracer, the constant)})`` (the
    constants are kept alive, so their ids stay unique)."""

    def pure(self, val):
        _, consts = self.main.global_data
        if id(val) not in consts:
            consts[id(val)] = (StagingTracer(self, get_aval(val)), val)
        return consts[id(val)][0]

    def process_primitive(self, prim, tracers, params):
        eqns, _ = self.main.global_data
        avals_out = prim.abstract_eval(*[t.aval for t in tracers], **params)
        outs = [StagingTracer(self, a) for a in (avals_out if prim.multiple_results else [avals_out])]
        eqns.append(Eqn(prim, tuple(t.var for t in tracers), tuple(t.var for t in outs), params))
        return outs


def trace_to_program(f: Callable, in_avals: list[ShapedArray], dynamic: bool = True):
    """Trace ``f(*tracers) -> list of outputs`` into ``(program, consts)``; ``dynamic`` records every bind,
    even on values from outside."""
    eqns, consts = [], {}
    with new_main(StagingTrace, (eqns, consts), dynamic=dynamic) as main:
        ins = [StagingTracer(main.trace, a) for a in in_avals]
        outs = [full_raise(main.trace, o) for o in f(*ins)]
    constvars = [t.var for t, _ in consts.values()]
    return Program(constvars, [t.var for t in ins], eqns, [t.var for t in outs]), [c for _, c in consts.values()]


__all__ = ["StagingTrace", "StagingTracer", "trace_to_program", "Program", "Literal"]
