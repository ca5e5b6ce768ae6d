"""What the call (jit, pmap) and control-flow primitives share: tracing a body into a closed sub-program, running
one on raw buffers, and deriving its jvp, transposed and batched programs (once, for all of them).

A sub-program is a ``ClosedProgram``; values it captures from outer transforms become leading operands of the
primitive (``close_program``), so every transform sees them. ``run_closed`` looks each impl up in the registry at
run time, so an impl swapped with ``register_impl`` reaches inside bodies eagerly and under jit.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from flfun.array import Array
from flfun.core import ShapedArray, Tracer, missing_rule, register_impl, short, to_array, trace_state
from flfun.ir import ClosedProgram, Eqn, Literal, Program, eval_program
from flfun.primitives.base import instantiate, moveaxis_to_front
from flfun.primitives.common import Zero, is_zero, not_mapped, tangent_aval
from flfun.transforms.staging import trace_to_program


def close_program(program: Program, consts: list) -> tuple[ClosedProgram, list]:
    """Turn traced constants into: literals (scalars), constants (concrete arrays) or, for tracers of outer
    transforms and arrays an eager grad tape is watching, leading inputs. Returns the closed program and those
    values."""
    tracers, keep, env = {}, {}, {}      # constvar -> outer tracer / concrete array / scalar Literal
    tape = trace_state.tape
    for v, c in zip(program.constvars, consts):
        if isinstance(c, Tracer) or tape is not None and id(c) in tape.index:   # the eager grad tape watches c
            tracers[v] = c
            continue
        arr = c if type(c) is Array else to_array(c, v.aval.dtype if type(c) in (int, float, bool, complex) else None)
        if arr.shape:
            keep[v] = arr
        else:
            env[v] = Literal(np.asarray(arr)[()], v.aval)
    eqns = [Eqn(e.prim, tuple(env.get(x, x) for x in e.inputs), e.outputs, e.params) for e in program.eqns]
    program = Program(list(keep), [*tracers, *program.invars], eqns, [env.get(x, x) for x in program.outvars])
    return ClosedProgram(program, list(keep.values())), list(tracers.values())


def trace_body(fn: Callable, avals: list) -> tuple[ClosedProgram, list]:
    """Trace ``fn(*tracers) -> flat list`` into ``(closed program, captured outer values)``: the captured values
    are the program's leading inputs."""
    return close_program(*trace_to_program(fn, list(avals), dynamic=True))


def trace_closed(fn: Callable, in_avals: list[ShapedArray]) -> ClosedProgram:
    """Trace ``fn(*tracers) -> list`` into a closed program (for derived programs: ``fn`` evaluates closed programs
    on its own inputs, so it never captures an outer tracer)."""
    return trace_body(fn, in_avals)[0]


def kept(xs, mask) -> list:
    """The ``xs`` that ``mask`` marks: ``kept("abc", [True, False, True]) == ["a", "c"]``."""
    return [x for x, k in zip(xs, mask) if k]


def with_zeros(mask, vals, avals) -> list:
    """The inverse of ``kept``: ``vals`` in the places ``mask`` marks, symbolic zeros (of ``avals``) elsewhere:
    ``with_zeros([True, False], [t], [x, y]) == [t, Zero(tangent_aval(y))]``."""
    it = iter(vals)
    return [next(it) if k else Zero(tangent_aval(a)) for k, a in zip(mask, avals)]


def split(xs, *sizes) -> list:
    """``xs`` cut into lists of ``sizes``, and the rest: ``split(range(5), 1, 2) == [[0], [1, 2], [3, 4]]``."""
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    return out + [list(xs[i:])]


def host_impls(prim, impl: Callable) -> None:
    """Register ``impl(backend, *vals, **params)`` as ``prim``'s impl on the numpy and cupy backends:
    ``host_impls(scan_p, _scan_impl)``."""
    for backend in ("numpy", "cupy"):
        register_impl(prim, backend, functools.partial(impl, backend))


def run_closed(closed: ClosedProgram, backend: str, vals: list) -> list:
    """Evaluate ``closed`` on raw buffers with the impls registered now (no tracing, no transform state)."""
    prog = closed.program
    env = {v.id: c._value for v, c in zip(prog.constvars, closed.consts)}
    env.update((v.id, x) for v, x in zip(prog.invars, vals))

    def read(v):
        return v.val if type(v) is Literal else env[v.id]

    for e in prog.eqns:
        impl = e.prim.impls.get(backend)
        if impl is None:
            raise missing_rule("impl", e.prim, backend)
        outs = impl(*map(read, e.inputs), **e.params)
        env.update((v.id, o) for v, o in zip(e.outputs, outs if e.prim.multiple_results else [outs]))
    return [read(v) for v in prog.outvars]


def fresh(outs: list, ins: list) -> list:
    """``outs`` with copies of those that are (views of) input buffers: outputs never alias operands."""
    ids = {id(x) for x in ins}
    return [o.copy() if id(o) in ids or getattr(o, "base", None) is not None else o for o in outs]


def check_types(op: str, what_out: str, outs, what_in: str, ins) -> None:
    """``TypeError('<op>: <what_out> f32[3] does not match <what_in> f32[4]')`` at the first disagreement."""
    if len(outs) != len(ins):
        raise TypeError(f"{op}: {what_out} has {len(outs)} values but {what_in} has {len(ins)}")
    for k, (o, i) in enumerate(zip(outs, ins)):
        if tuple(o.shape) != tuple(i.shape) or o.dtype != i.dtype:
            leaf = f" (leaf {k})" if len(ins) > 1 else ""
            raise TypeError(f"{op}: {what_out} {short(o)} does not match {what_in} {short(i)}{leaf}")


def strong(aval) -> ShapedArray:
    return ShapedArray(aval.shape, aval.dtype)


# ------------------------------------------------------------------------------------------ derived programs
def jvp_program(closed: ClosedProgram, nz: list, inst_out: list | None = None) -> tuple[ClosedProgram, list]:
    """The jvp of ``closed``: inputs ``primals + nonzero tangents``, outputs ``primals + nonzero tangents`` (those
    ``inst_out`` marks are instantiated even if zero). Returns it and which output tangents it has."""
    from flfun.transforms.jvp import jvp_flat
    avals, n = closed.in_avals, len(closed.in_avals)
    out_nz: list = []

    def f(*xs):
        ts = iter(xs[n:])
        tangents = [next(ts) if z else Zero(tangent_aval(a)) for a, z in zip(avals, nz)]
        outs, touts = jvp_flat(lambda *a: eval_program(closed.program, closed.consts, a), list(xs[:n]), tangents)
        if inst_out is not None:
            touts = [instantiate(t) if i else t for t, i in zip(touts, inst_out)]
        out_nz[:] = [not is_zero(t) for t in touts]
        return list(outs) + [t for t in touts if not is_zero(t)]
    return trace_closed(f, list(avals) + [tangent_aval(a) for a in kept(avals, nz)]), out_nz


def transpose_program(closed: ClosedProgram, linear: list, ct_nz: list, site=None):
    """The transpose of ``closed`` (linear in the inputs ``linear`` marks): inputs ``non-linear inputs + the
    nonzero (``ct_nz``) output cotangents``, outputs the (instantiated) cotangents of the linear inputs. With a call
    ``site`` (``flfun/transforms/call.py``) the cotangents pass through its ``adjust_ct`` / ``adjust_cts_in``, only
    the nonzero input ones are outputs, and it returns the program and which those are."""
    from flfun.transforms.transpose import backward_pass
    prog = closed.program
    lin, nonlin = kept(prog.invars, linear), kept(prog.invars, [not k for k in linear])
    view = Program(list(prog.constvars) + nonlin, lin, prog.eqns, prog.outvars)
    out_avals = [tangent_aval(a) for a in closed.out_avals]
    in_nz: list = []

    def f(*xs):
        given = iter(xs[len(nonlin):])
        cts_out = [(site.adjust_ct(i, next(given)) if site else next(given)) if z else Zero(a)
                   for i, (a, z) in enumerate(zip(out_avals, ct_nz))]
        cts = backward_pass(view, list(closed.consts) + list(xs[:len(nonlin)]), cts_out)
        if site is None:
            return [instantiate(c) for c in cts]
        cts = site.adjust_cts_in(cts, linear)
        in_nz[:] = [not is_zero(c) for c in cts]
        return [c for c in cts if not is_zero(c)]
    tclosed = trace_closed(f, [v.aval for v in nonlin] + kept(out_avals, ct_nz))
    return tclosed if site is None else (tclosed, tuple(in_nz))


def batch_program(closed: ClosedProgram, axis, dims: list, force: list | None = None, avals: list | None = None
                  ) -> tuple[ClosedProgram, list]:
    """``closed`` batched along ``axis`` (inputs mapped at ``dims``, of ``avals`` if given); mapped outputs (and
    those ``force`` marks) come out mapped along axis 0. Returns it and which outputs are mapped."""
    from flfun.transforms.vmap import vmap_flat
    mapped: list = []
    avals = avals or [a if d is not_mapped else a.update(shape=(a.shape[:d] + (axis.size,) + a.shape[d:]))
                      for a, d in zip(closed.in_avals, dims)]

    def f(*xs):
        vals, bdims = vmap_flat(lambda *a: eval_program(closed.program, closed.consts, a), axis, list(xs), list(dims))
        keep = force or [False] * len(vals)
        mapped[:] = [d is not not_mapped or k for d, k in zip(bdims, keep)]
        return [moveaxis_to_front(v, d, axis.size) if m else v for v, d, m in zip(vals, bdims, mapped)]
    return trace_closed(f, avals), mapped


__all__ = ["close_program", "trace_body", "trace_closed", "kept", "with_zeros", "split", "host_impls", "run_closed",
           "fresh", "check_types", "jvp_program", "transpose_program", "batch_program", "strong"]
