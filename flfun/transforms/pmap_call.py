"""The ``pmap`` call primitive and SPMD execution: axis frames, per-device executables, and the jvp, transpose
and batching rules that transform the per-device program.

While pmap traces its function, an axis frame (``SpmdAxisTrace``) names the mapped axis on the trace stack, so
collectives over it stage as equations. ``pmap_p`` applies a per-device program to operands whose mapped ones
carry the device axis first; its impl runs one executable per local device in parallel (``run_spmd``), and its
rules re-trace the program inside the same frames and bind ``pmap_p`` again, so pmap composes with grad, vmap
and jit.
"""
from __future__ import annotations

import functools

import numpy as np

from flfun import core
from flfun.core import Primitive, Trace, _state, full_raise, get_aval, new_main, register_impl, trace_stack
from flfun.distributed.spmd import Mesh, run_spmd
from flfun.ir import ClosedProgram
from flfun.primitives.common import Zero, is_zero, moveaxis, not_mapped, tangent_aval
from flfun.transforms.call import (BACKEND_COMPILERS, DEFAULT_STRATEGY, _batch_program, _cached, _jvp_split,
                                   compile_program, trace_closed)


# ------------------------------------------------------------------------------------------------- axis frames
class _Frame:
    """A pmap's named axis on the trace stack (``axis_main`` finds it by ``name``); ``axes`` collects the
    axes of pmaps nested inside, shared by all frames of one outermost pmap."""
    __slots__ = ("name", "size", "axes")

    def __init__(self, name, size: int, axes: list):
        self.name, self.size, self.axes = name, size, axes


class SpmdAxisTrace(Trace):
    """The trace of an axis frame. It makes no tracers; collectives routed to it (by their axis name) are
    handed to the staging trace that records the per-device program."""

    def pure(self, val):
        return val

    lift = pure

    def process_primitive(self, prim, tracers, params):
        dyn = _state.dynamic
        if dyn is None:
            raise RuntimeError(f"{prim.name}: a pmap axis is only bound while pmap traces its function")
        return dyn.trace.process_primitive(prim, [full_raise(dyn.trace, t) for t in tracers], params)


def _enclosing_frame() -> _Frame | None:
    for m in reversed(trace_stack):
        if m.trace_type is SpmdAxisTrace and m.active:
            return m.global_data
    return None


class _frames:
    """Push one axis frame per mesh axis (to re-trace a per-device program in the rules below)."""

    def __init__(self, mesh: Mesh):
        self.mesh, self.ctxs = mesh, []

    def __enter__(self):
        for name, size in zip(self.mesh.names, self.mesh.shape):
            ctx = new_main(SpmdAxisTrace, _Frame(name, size, []))
            ctx.__enter__()
            self.ctxs.append(ctx)

    def __exit__(self, *exc):
        for ctx in reversed(self.ctxs):
            ctx.__exit__(*exc)


# ---------------------------------------------------------------------------------------------- execution
def _executables(closed: ClosedProgram, mesh: Mesh) -> dict:
    """One executable per local device, sharing one optimised program and one memory plan per backend
    (each device gets its own arena), cached on the program."""
    from flfun.config import config
    from flfun.executor import Executable, writes_out
    from flfun.memory.planner import plan_program
    from flfun.passes import optimize
    key = ("pmap-exe", id(mesh), core.registry_version, config.jit_planned)
    hit = closed.cache.get(key)
    if hit is not None and hit[0] is mesh:
        return hit[1]
    program, consts = optimize(closed.program, closed.consts)
    plans: dict = {}
    exes = {}
    for g, d in mesh.local:
        if d.backend in BACKEND_COMPILERS:          # a backend that compiles its own executables (cupy)
            exes[g] = compile_program(closed, d)
            continue
        if config.jit_planned and d.backend not in plans:
            plans[d.backend] = plan_program(program, writes_out(d.backend), (), DEFAULT_STRATEGY)
        exes[g] = Executable(program, consts, d, plans.get(d.backend))
    closed.cache[key] = (mesh, exes)
    return exes


PER_DEVICE = "device"    # in/out axis kind: one slice per local device (residuals on a nested mesh)


def _count(mesh: Mesh, ax) -> int:
    """Leading size of an operand or result mapped with ``ax`` (0: shards, PER_DEVICE: local devices)."""
    return len(mesh.local) if ax == PER_DEVICE else len(mesh.heads)


def _residual_axis(mesh: Mesh):
    """How residuals (per-device values) travel between the primal and tangent programs."""
    return 0 if len(mesh.heads) == len(mesh.local) else PER_DEVICE


def _execute(closed: ClosedProgram, mesh: Mesh, inputs: list, in_axes: tuple, out_axes: tuple) -> tuple[list, list]:
    """Run ``closed`` on every local device of ``mesh``. ``inputs[i]`` is a list of raw buffers, one per shard
    (in_axes 0) or per local device (PER_DEVICE), or one raw buffer (None: replicated). Returns, per output, the
    buffers of the shards' first devices (0), of every device (PER_DEVICE) or device 0's buffer (None), and the
    devices holding the shards."""
    outer = mesh.outer
    exes = _executables(closed, mesh)

    def task(i, g, dev):
        args = [x if ax is None else x[i if ax == PER_DEVICE else outer[g]] for x, ax in zip(inputs, in_axes)]
        if dev.platform != "cpu":
            args = [dev.put(a) for a in args]
        return exes[g](*args)

    tasks = [(g, functools.partial(task, i, g, d)) for i, (g, d) in enumerate(mesh.local)]
    results = run_spmd(mesh, tasks)
    heads = mesh.heads
    outs = [results[0][j] if ax is None else [r[j] for r in results] if ax == PER_DEVICE else
            [results[i][j] for i in heads] for j, ax in enumerate(out_axes)]
    return outs, [mesh.local[i][1] for i in heads]


# ------------------------------------------------------------------------------------------- call primitive
pmap_p = Primitive("pmap", multiple_results=True)


@pmap_p.def_abstract_eval
def _pmap_abstract_eval(*avals, program, mesh, in_axes, out_axes, name):
    for a, ax in zip(avals, in_axes):
        if ax is not None and (not a.shape or a.shape[0] != _count(mesh, ax)):
            raise ValueError(f"pmap: a mapped operand is {core.short(a)}, but {name} runs {_count(mesh, ax)} "
                             f"{'devices' if ax == PER_DEVICE else 'shards'} here")
    return [a if ax is None else a.update(shape=(_count(mesh, ax),) + a.shape)
            for a, ax in zip(program.out_avals, out_axes)]


def _pmap_impl(*vals, program, mesh, in_axes, out_axes, name):
    inputs = [v if ax is None else [v[k] for k in range(_count(mesh, ax))] for v, ax in zip(vals, in_axes)]
    outs, _ = _execute(program, mesh, inputs, in_axes, out_axes)
    return [np.stack([np.asarray(s) for s in o]) if ax is not None else o for o, ax in zip(outs, out_axes)]


register_impl(pmap_p, "numpy", _pmap_impl)


@pmap_p.def_jvp
def _pmap_jvp(primals, tangents, *, program, mesh, in_axes, out_axes, name):
    nz = tuple(not is_zero(t) for t in tangents)

    def split():
        with _frames(mesh):
            return _jvp_split(program, nz)
    known, lin, res_invars, num_out, out_nz = _cached(program, ("pmap-jvp", mesh.names, mesh.shape, nz), split)
    n_res, rax = len(known.out_avals) - num_out, _residual_axis(mesh)
    outs = pmap_p.bind(*primals, program=known, mesh=mesh, in_axes=in_axes,
                       out_axes=tuple(out_axes) + (rax,) * n_res, name=name)
    residuals = [primals[i] for i in res_invars] + list(outs[num_out:])
    nzt = [t for t in tangents if not is_zero(t)]
    lin_in_axes = tuple(in_axes[i] for i in res_invars) + (rax,) * n_res + tuple(a for a, z in zip(in_axes, nz)
                                                                                 if z)
    lin_out_axes = tuple(a for a, z in zip(out_axes, out_nz) if z)
    touts = pmap_p.bind(*residuals, *nzt, program=lin, mesh=mesh, in_axes=lin_in_axes, out_axes=lin_out_axes,
                        name=f"jvp({name})") if any(out_nz) else []
    it = iter(touts)
    out_avals = _pmap_abstract_eval(*[get_aval(p) for p in primals], program=program, mesh=mesh,
                                    in_axes=in_axes, out_axes=out_axes, name=name)
    return outs[:num_out], [next(it) if z else Zero(tangent_aval(a)) for z, a in zip(out_nz, out_avals)]


def _transpose_program(closed: ClosedProgram, mesh: Mesh, undef: tuple, ct_nz: tuple, in_axes, out_axes):
    """The per-device transposed program. An output is read from one device (device 0 for out_axes None, the
    first along the nested axes for mapped ones), so only that device receives its cotangent; an input given to
    several devices (replicated, or a shard shared along nested axes) gets the sum of their cotangents."""
    from flfun.ir import Program
    from flfun.primitives.collective import axis_index, psum
    from flfun.primitives.elementwise import eq, select_n
    from flfun.primitives.shape import full
    from flfun.transforms.vjp import backward_pass
    prog = closed.program
    lin = [v for v, u in zip(prog.invars, undef) if u]
    nonlin = [v for v, u in zip(prog.invars, undef) if not u]
    view = Program(list(prog.constvars) + nonlin, lin, prog.eqns, prog.outvars)
    out_avals = [tangent_aval(v.aval) for v in prog.outvars]
    lin_axes = [a for a, u in zip(in_axes, undef) if u]
    in_nz: list = []

    def f(*xs):
        cts = iter(xs[len(nonlin):])
        cts_out = []
        for z, a, ax in zip(ct_nz, out_avals, out_axes):
            c = next(cts) if z else Zero(a)
            names = mesh.names if ax is None else () if ax == PER_DEVICE else mesh.names[1:]
            if z and names:
                first = eq(axis_index(names), full((), 0, np.int32))
                c = select_n(first, full(a.shape, 0, a.dtype), c)
            cts_out.append(c)
        res = backward_pass(view, list(closed.consts) + list(xs[:len(nonlin)]), cts_out)
        shared = [mesh.names if ax is None else () if ax == PER_DEVICE else mesh.names[1:] for ax in lin_axes]
        res = [psum(c, names) if names and not is_zero(c) else c for c, names in zip(res, shared)]
        in_nz[:] = [not is_zero(c) for c in res]
        return [c for c in res if not is_zero(c)]
    with _frames(mesh):
        tclosed = trace_closed(f, [v.aval for v in nonlin] + [a for a, z in zip(out_avals, ct_nz) if z])
    return tclosed, tuple(in_nz)


@pmap_p.def_transpose
def _pmap_transpose(cts, *args, program, mesh, in_axes, out_axes, name):
    from flfun.transforms.vjp import UndefinedPrimal
    undef = tuple(type(a) is UndefinedPrimal for a in args)
    ct_nz = tuple(not is_zero(c) for c in cts)
    tclosed, in_nz = _cached(program, ("pmap-transpose", mesh.names, mesh.shape, undef, ct_nz),
                             lambda: _transpose_program(program, mesh, undef, ct_nz, in_axes, out_axes))
    known = [a for a, u in zip(args, undef) if not u]
    t_in_axes = tuple(a for a, u in zip(in_axes, undef) if not u) + tuple(a for a, z in zip(out_axes, ct_nz) if z)
    lin_axes = [a for a, u in zip(in_axes, undef) if u]
    t_out_axes = tuple(a for a, z in zip(lin_axes, in_nz) if z)
    outs = iter(pmap_p.bind(*known, *[c for c in cts if not is_zero(c)], program=tclosed, mesh=mesh,
                            in_axes=t_in_axes, out_axes=t_out_axes, name=f"transpose({name})")
                if any(in_nz) else [])
    nzs = iter(in_nz)
    return [None if not u else (next(outs) if next(nzs) else Zero(a.aval)) for a, u in zip(args, undef)]


@pmap_p.def_batch
def _pmap_batch(frame, args, dims, *, program, mesh, in_axes, out_axes, name):
    new_args, dev_dims = [], []
    for a, d, ax in zip(args, dims, in_axes):
        if d is not_mapped:
            new_args.append(a)
            dev_dims.append(not_mapped)
        elif ax is not None:                 # pmap's axis first, then the vmapped one
            new_args.append(moveaxis(a, d, 1))
            dev_dims.append(0)
        else:
            new_args.append(a)
            dev_dims.append(d)
    dev_avals = [get_aval(a).update(shape=tuple(a.shape[1:]) if ax is not None else tuple(a.shape))
                 for a, ax in zip(new_args, in_axes)]

    def make():
        with _frames(mesh):
            return _batch_program(program, frame.size, frame.name, tuple(dev_dims), dev_avals)
    bclosed, mapped = _cached(program, ("pmap-batch", frame.size, frame.name, tuple(dev_dims), mesh.names,
                                        mesh.shape), make)
    outs = pmap_p.bind(*new_args, program=bclosed, mesh=mesh, in_axes=in_axes, out_axes=out_axes,
                       name=f"vmap({name})")
    return outs, [not_mapped if not m else (1 if ax is not None else 0) for m, ax in zip(mapped, out_axes)]


__all__ = ["pmap_p", "SpmdAxisTrace", "Mesh"]
