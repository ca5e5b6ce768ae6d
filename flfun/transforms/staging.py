"""Staging: trace a function with abstract values into a ``Program`` (used by linearize and jit).

A ``StagingTrace`` records every primitive applied to its tracers as an equation; values from outside (concrete
arrays or tracers of outer transforms) become the program's constants. As a *dynamic* trace (jit) it records
every bind, even on constants.
"""
from __future__ import annotations

from typing import Any, Callable

from flfun.core import ShapedArray, Trace, Tracer, full_raise, get_aval, new_main
from flfun.ir import Eqn, Literal, Program, Var


class StagingTracer(Tracer):
    __slots__ = ("aval",)

    def __init__(self, trace: "StagingTrace", aval: ShapedArray):
        self._trace = trace
        self.aval = aval


class ProgramBuilder:
    def __init__(self):
        self.eqns: list[Eqn] = []
        self.tracer_vars: dict[int, Var] = {}
        self.tracers: list[StagingTracer] = []      # keeps tracers alive so ids stay unique
        self.const_tracers: dict[int, StagingTracer] = {}
        self.consts: list[tuple[Var, Any]] = []

    def new_tracer(self, trace, aval) -> StagingTracer:
        t = StagingTracer(trace, aval)
        self.tracers.append(t)
        self.tracer_vars[id(t)] = Var(aval)
        return t

    def const(self, trace, val) -> StagingTracer:
        t = self.const_tracers.get(id(val))
        if t is None:
            t = self.new_tracer(trace, get_aval(val))
            self.const_tracers[id(val)] = t
            self.consts.append((self.tracer_vars[id(t)], val))
        return t

    def build(self, in_tracers, out_tracers) -> tuple[Program, list]:
        var = self.tracer_vars
        return (Program([v for v, _ in self.consts], [var[id(t)] for t in in_tracers], list(self.eqns),
                        [var[id(t)] for t in out_tracers]), [c for _, c in self.consts])


class StagingTrace(Trace):
    @property
    def builder(self) -> ProgramBuilder:
        return self.main.global_data

    def new_arg(self, aval: ShapedArray) -> StagingTracer:
        return self.builder.new_tracer(self, aval)

    def pure(self, val):
        return self.builder.const(self, val)


    def process_primitive(self, prim, tracers, params):
        avals_out = prim.abstract_eval(*[t.aval for t in tracers], **params)
        b = self.builder
        outs = [b.new_tracer(self, a) for a in (avals_out if prim.multiple_results else [avals_out])]
        b.eqns.append(Eqn(prim, tuple(b.tracer_vars[id(t)] for t in tracers),
                          tuple(b.tracer_vars[id(t)] for t in outs), params))
        return outs


def trace_to_program(f: Callable, in_avals: list[ShapedArray], dynamic: bool = True):
    """Trace ``f(*tracers) -> list of outputs`` into ``(program, consts)``."""
    builder = ProgramBuilder()
    with new_main(StagingTrace, builder, dynamic=dynamic) as main:
        trace = main.trace
        ins = [trace.new_arg(a) for a in in_avals]
        outs = [full_raise(trace, o) for o in f(*ins)]
        return builder.build(ins, outs)


__all__ = ["StagingTrace", "StagingTracer", "trace_to_program", "Program", "Literal"]
