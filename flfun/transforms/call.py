"""The ``jit`` call primitive: a closed program applied to operands, with jvp, transpose and batching rules.

A jitted function called under another transform (or inside another ``jit``) binds ``jit_p``. Its rules
transform the program itself (jvp split into a primal and a linear tangent program by partial evaluation,
transposition by ``backward_pass``, batching by ``vmap``) and bind ``jit_p`` again, so jit composes with every
transform in any order; derived programs and executables are cached on the ``ClosedProgram``.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from flfun import core
from flfun.array import Array
from flfun.config import config
from flfun.core import Primitive, ShapedArray, Tracer, _state, get_aval, register_impl, to_array
from flfun.executor import Executable, writes_out
from flfun.ir import ClosedProgram, Eqn, Literal, Program, eval_program
from flfun.memory.planner import plan_program
from flfun.passes import optimize, partial_eval
from flfun.primitives.common import UndefinedPrimal, Zero, is_zero, moveaxis_to_front, not_mapped, tangent_aval
from flfun.transforms.staging import trace_to_program

DEFAULT_STRATEGY = "auto"


# ------------------------------------------------------------------------------------------ closing programs
def close_program(program: Program, consts: list) -> tuple[ClosedProgram, list]:
    """Turn traced constants into: literals (scalars), constants (concrete arrays) or, for tracers of outer
    transforms and arrays an eager grad tape is watching, leading inputs. Returns the closed program and those
    values."""
    tracers, keep, env = {}, {}, {}      # constvar -> outer tracer / concrete array / scalar Literal
    tape = _state.tape
    for v, c in zip(program.constvars, consts):
        if isinstance(c, Tracer) or tape is not None and id(c) in tape.index:   # the eager grad tape watches c
            tracers[v] = c
            continue
        arr = c if type(c) is Array else to_array(c, v.aval.dtype if type(c) in (int, float, bool) else None)
        if arr.shape:
            keep[v] = arr
        else:
            env[v] = Literal(np.asarray(arr)[()], v.aval)
    eqns = [Eqn(e.prim, tuple(env.get(x, x) for x in e.inputs), e.outputs, e.params) for e in program.eqns]
    program = Program(list(keep), [*tracers, *program.invars], eqns, [env.get(x, x) for x in program.outvars])
    return ClosedProgram(program, list(keep.values())), list(tracers.values())


def trace_closed(fn: Callable, in_avals: list[ShapedArray]) -> ClosedProgram:
    """Trace ``fn(*tracers) -> list`` into a closed program (used by the call primitive's rules: ``fn`` evaluates
    closed programs on its own inputs, so it never captures an outer tracer)."""
    return close_program(*trace_to_program(fn, in_avals, dynamic=True))[0]


BACKEND_COMPILERS: dict[str, Callable] = {}   # backend -> fn(closed, device, donated, strategy): cupy's own


def compile_program(closed: ClosedProgram, device=None, donated: tuple = (), strategy: str | None = None
                    ) -> Executable:
    """The executable for ``closed`` on ``device`` (cached on the program with the registry version)."""
    device = device or core.default_device()
    strategy = strategy or DEFAULT_STRATEGY
    compiler = BACKEND_COMPILERS.get(device.backend)
    if compiler is not None:
        return compiler(closed, device, donated, strategy)
    key = ("exe", device, core.registry_version, config.jit_planned, donated, strategy)
    exe = closed.cache.get(key)
    if exe is None:
        program, consts = optimize(closed.program, closed.consts)
        plan = plan_program(program, writes_out(device.backend), donated, strategy) if config.jit_planned else None
        exe = closed.cache[key] = Executable(program, consts, device, plan, donated)
    return exe


# ------------------------------------------------------------------------------------------ call primitive
jit_p = Primitive("jit", multiple_results=True)


@jit_p.def_abstract_eval
def _jit_abstract_eval(*avals, closed, name, donated):
    return list(closed.out_avals)


def _cached(closed: ClosedProgram, key, make: Callable):
    hit = closed.cache.get(key)
    if hit is None:
        hit = closed.cache[key] = make()
    return hit


def _jvp_split(closed: ClosedProgram, nz: tuple):
    """jvp of the program, split into a primal program (outputs + residuals) and a linear tangent program."""
    from flfun.transforms.jvp import jvp_flat
    avals, n = closed.in_avals, len(closed.in_avals)
    out_nz: list = []

    def f(*xs):
        ts = iter(xs[n:])
        tangents = [next(ts) if z else Zero(tangent_aval(a)) for a, z in zip(avals, nz)]
        outs, touts = jvp_flat(lambda *a: eval_program(closed.program, closed.consts, a), list(xs[:n]), tangents)
        out_nz[:] = [not is_zero(t) for t in touts]
        return list(outs) + [t for t in touts if not is_zero(t)]
    t_avals = [tangent_aval(a) for a, z in zip(avals, nz) if z]
    jclosed = trace_closed(f, list(avals) + t_avals)
    num_out = len(closed.out_avals)
    known, unknown, res_invars = partial_eval(jclosed.program, [True] * n + [False] * len(t_avals), num_out)
    return (ClosedProgram(known, jclosed.consts), ClosedProgram(unknown, jclosed.consts), res_invars, num_out,
            tuple(out_nz))


@jit_p.def_jvp
def _jit_jvp(primals, tangents, *, closed, name, donated):
    nz = tuple(not is_zero(t) for t in tangents)
    known, lin, res_invars, num_out, out_nz = _cached(closed, ("jvp", nz), lambda: _jvp_split(closed, nz))
    outs = jit_p.bind(*primals, closed=known, name=name, donated=())
    residuals = [primals[i] for i in res_invars] + list(outs[num_out:])
    nzt = [t for t in tangents if not is_zero(t)]
    touts = jit_p.bind(*residuals, *nzt, closed=lin, name=f"jvp({name})", donated=()) if any(out_nz) else []
    it = iter(touts)
    return outs[:num_out], [next(it) if z else Zero(tangent_aval(a)) for z, a in zip(out_nz, closed.out_avals)]


def _transpose_program(closed: ClosedProgram, undef: tuple, ct_nz: tuple, adjust_ct=None, adjust_cts_in=None):
    """The transposed program of ``closed`` for the linear inputs ``undef`` and nonzero output cotangents
    ``ct_nz``; pmap hooks in ``adjust_ct(i, ct)`` (each output cotangent) and ``adjust_cts_in(cts)``."""
    from flfun.transforms.vjp import backward_pass
    prog = closed.program
    lin = [v for v, u in zip(prog.invars, undef) if u]
    nonlin = [v for v, u in zip(prog.invars, undef) if not u]
    view = Program(list(prog.constvars) + nonlin, lin, prog.eqns, prog.outvars)
    out_avals = [tangent_aval(v.aval) for v in prog.outvars]
    in_nz: list = []

    def f(*xs):
        cts = iter(xs[len(nonlin):])
        cts_out = [(adjust_ct(i, next(cts)) if adjust_ct else next(cts)) if z else Zero(a)
                   for i, (z, a) in enumerate(zip(ct_nz, out_avals))]
        res = backward_pass(view, list(closed.consts) + list(xs[:len(nonlin)]), cts_out)
        res = adjust_cts_in(res) if adjust_cts_in else res
        in_nz[:] = [not is_zero(c) for c in res]
        return [c for c in res if not is_zero(c)]
    tclosed = trace_closed(f, [v.aval for v in nonlin] + [a for a, z in zip(out_avals, ct_nz) if z])
    return tclosed, tuple(in_nz)


@jit_p.def_transpose
def _jit_transpose(cts, *args, closed, name, donated):
    undef = tuple(type(a) is UndefinedPrimal for a in args)
    ct_nz = tuple(not is_zero(c) for c in cts)
    tclosed, in_nz = _cached(closed, ("transpose", undef, ct_nz), lambda: _transpose_program(closed, undef, ct_nz))
    known = [a for a, u in zip(args, undef) if not u]
    outs = iter(jit_p.bind(*known, *[c for c in cts if not is_zero(c)], closed=tclosed,
                           name=f"transpose({name})", donated=()) if any(in_nz) else [])
    nzs = iter(in_nz)
    return [None if not u else (next(outs) if next(nzs) else Zero(a.aval)) for a, u in zip(args, undef)]


def _batch_program(closed: ClosedProgram, size: int, axis_name, dims: tuple, in_avals: list):
    from flfun.transforms.vmap import AxisData, vmap_flat
    mapped: list = []

    def f(*xs):
        vals, bdims = vmap_flat(lambda *a: eval_program(closed.program, closed.consts, a), AxisData(size, axis_name),
                                list(xs), list(dims))
        mapped[:] = [d is not not_mapped for d in bdims]
        return [moveaxis_to_front(v, d, size) if d is not not_mapped else v for v, d in zip(vals, bdims)]
    return trace_closed(f, in_avals), tuple(mapped)


@jit_p.def_batch
def _jit_batch(axis, args, dims, *, closed, name, donated):
    dims = tuple(dims)
    bclosed, mapped = _cached(closed, ("batch", axis.size, axis.name, dims),
                              lambda: _batch_program(closed, axis.size, axis.name, dims, [get_aval(a) for a in args]))
    outs = jit_p.bind(*args, closed=bclosed, name=f"vmap({name})", donated=())
    return outs, [0 if m else not_mapped for m in mapped]


def _jit_impl(backend: str, *vals, closed, name, donated):
    from flfun.backends import get_backend
    dev = core.default_device()
    return compile_program(closed, dev if dev.backend == backend else get_backend(backend).devices[0])(*vals)


for _backend in ("numpy", "cupy"):
    register_impl(jit_p, _backend, functools.partial(_jit_impl, _backend))


__all__ = ["jit_p", "close_program", "trace_closed", "compile_program", "DEFAULT_STRATEGY"]
