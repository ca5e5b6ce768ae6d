"""``pmap``: compile a function once per shard shape and run it SPMD on many devices, with named-axis collectives.

The function is traced with one shard's abstract values inside an axis frame (``SpmdAxisTrace``), so collectives
over the axis stage as equations; every local device then runs its executable in its own thread (``run_spmd``),
meeting the others in the mesh's communicators, and results come back as ``ShardedArray``s. Under grad, vmap or jit
a pmap binds ``pmap_p``, whose rules re-trace the per-device program. A nested pmap adds a mesh axis.
"""
from __future__ import annotations

import functools
from contextlib import ExitStack
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from flfun.array import Array
from flfun import config
from flfun.compiler.cache import CacheInfo, ProgramCache, pinned_bytes
from flfun.compiler.pipeline import compile_program, global_version
from flfun.core import (Primitive, ShapedArray, Trace, Tracer, full_raise, get_aval, new_main, register_impl,
                        trace_state, wrap)
from flfun.distributed.devices import devices as all_devices, local_device_count, process_count
from flfun.distributed.spmd import Mesh, run_spmd
from flfun.ir import ClosedProgram
from flfun.memory import get_allocator
from flfun.primitives.collective import all_gather, axis_index, psum
from flfun.primitives.rules import is_zero, moveaxis
from flfun.primitives.elementwise import eq, select_n
from flfun.primitives.shape import dynamic_slice, full, squeeze
from flfun.distributed.sharded import ShardedArray
from flfun.transforms.call import CallSite, close_program, def_call_rules
from flfun.transforms.staging import trace_to_program
from flfun.transforms.vmap import mapped_axes, mapped_size
from flfun.tree import tree_flatten, tree_unflatten
from flfun.util import once, prod, decorator_factory


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


    def process_primitive(self, prim, tracers, params):     # frames are only pushed around a staging trace
        dyn = trace_state.dynamic.trace
        return dyn.process_primitive(prim, [full_raise(dyn, t) for t in tracers], params)


def _enclosing_frame() -> _Frame | None:
    return next((m.global_data for m in reversed(trace_state.stack) if m.trace_type is SpmdAxisTrace and m.active),
                None)


def _in_frames(mesh: Mesh, fn: Callable, *args):
    """``fn(*args)`` with one axis frame pushed per mesh axis (to re-trace a per-device program in the rules)."""
    with ExitStack() as stack:
        for name, size in zip(mesh.names, mesh.shape):
            stack.enter_context(new_main(SpmdAxisTrace, _Frame(name, size, [])))
        return fn(*args)


class _Unnamed:
    """The name of a pmap axis given no ``axis_name`` (no collective can refer to it)."""

    def __repr__(self):
        return "<unnamed>"


def _bound_axis_names() -> tuple:
    return tuple(m.global_data.name for m in trace_state.stack if getattr(m.global_data, "name", None) is not None)


# ---------------------------------------------------------------------------------------------------- pmap
class PmapFunction:
    """A function mapped over devices (see ``pmap``)."""

    def __init__(self, fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices, axis_size,
                 memory_strategy=None, cache_size: int | None = None, cache_bytes: int | None = None):
        functools.update_wrapper(self, fun)
        self.memory_strategy = memory_strategy
        if axis_size is not None and (type(axis_size) is not int or axis_size < 1):
            raise ValueError(f"pmap: axis_size must be a positive int or None, got {axis_size!r}")
        self.fun, self.in_axes, self.out_axes, self.axis_size = fun, in_axes, out_axes, axis_size
        self.axis_name = _Unnamed() if axis_name is None else axis_name
        s = static_broadcasted_argnums
        self.static = (s,) if isinstance(s, int) else tuple(s)
        if any(type(i) is not int for i in self.static):
            raise ValueError(f"pmap: static_broadcasted_argnums must be ints, got {static_broadcasted_argnums!r}")
        self.devices = None if devices is None else list(devices)
        self._traces = ProgramCache(config.jit_cache_size if cache_size is None else cache_size,
                                    config.jit_cache_bytes if cache_bytes is None else cache_bytes,
                                    self._evicted, "pmap")
        self._meshes, self.trace_count, self._fast, self._fast_version = {}, 0, {}, None

    def _prepare(self, args: tuple, kwargs: dict):
        """The static positions, the dynamic leaves with their tree and mapped axes, and the mapped size."""
        if kwargs:
            raise ValueError(f"pmap: keyword arguments are not supported (got {sorted(kwargs)}); pass them by position")
        nargs = len(args)
        static_pos = {i % nargs for i in self.static if -nargs <= i < nargs}
        for i in sorted(static_pos):
            try:
                hash(args[i])
            except TypeError:
                raise ValueError(f"pmap: static argument {i} must be hashable, got {type(args[i]).__name__}") from None
        dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
        leaves, in_tree = tree_flatten(dyn)
        spec = tuple(self.in_axes) if isinstance(self.in_axes, list) else self.in_axes
        if isinstance(spec, tuple) and len(spec) == nargs:
            spec = tuple(a for i, a in enumerate(spec) if i not in static_pos)
        axes = mapped_axes("pmap", spec, dyn, leaves)
        n = mapped_size("pmap", leaves, axes, self.axis_size)
        return static_pos, leaves, in_tree, axes, n

    def _apply(self, args: tuple, static_pos: set, in_tree, xs) -> tuple:
        """``fun`` on the static arguments and the dynamic ones rebuilt from ``xs``: (output leaves, tree)."""
        it = iter(tree_unflatten(in_tree, xs))
        return tree_flatten(self.fun(*[args[i] if i in static_pos else next(it) for i in range(len(args))]))

    def __call__(self, *args, **kwargs):
        fast = trace_state.eager and not kwargs and not self.static and _fast_key(args)
        if fast:
            if self._fast_version != global_version():
                self._fast.clear()
                self._fast_version = global_version()
            hit = self._fast.get(fast[0])
            if hit is not None and all(e.allocator is None or e.allocator is get_allocator(d)
                                       for e, (_, d) in zip(hit.exes.values(), hit.mesh.local)):
                self._traces.touch(hit.key)
                return hit(fast[1])
        static_pos, leaves, in_tree, axes, n = self._prepare(args, kwargs)
        if (frame := _enclosing_frame()) is not None:
            return self._nested(frame, args, static_pos, leaves, in_tree, axes, n)
        closed, out_tree, extra, out_axes, mesh, key = self._trace(args, static_pos, leaves, in_tree, axes, n)
        in_ax, p_out_axes = (tuple(None if a is None else 0 for a in ax) for ax in (axes, out_axes))
        if trace_state.eager and not extra and not any(isinstance(x, Tracer) for x in leaves):
            run = _EagerRun(closed, out_tree, axes, out_axes, mesh, _executables(closed, mesh, self.memory_strategy),
                            key)
            self._traces.pin(key, pinned_bytes(closed.cache))
            if fast:
                self._fast[fast[0]] = run
            return run(leaves)
        moved = [moveaxis(x, a, 0) if a else x for x, a in zip(leaves, axes)]
        outs = pmap_p.bind(*extra, *moved, program=closed, mesh=mesh, in_axes=(None,) * len(extra) + in_ax,
                           out_axes=p_out_axes, name=getattr(self.fun, "__name__", "fun"))
        return tree_unflatten(out_tree, [moveaxis(o, 0, a) if a else o for o, a in zip(outs, out_axes)])

    def _evicted(self, key, entry) -> None:
        for k in [k for k, run in list(self._fast.items()) if run.key == key]:
            self._fast.pop(k, None)

    def _global_size(self, n: int) -> int:
        if self.devices is None and process_count() > 1:
            if n != local_device_count():
                raise ValueError(f"pmap: the mapped axis has size {n}, but this process has {local_device_count()} "
                                 f"devices; across processes each passes one shard per local device")
            return n * process_count()
        return n

    def _trace(self, args, static_pos, leaves, in_tree, axes, n):
        """The per-device program (traced once per signature, LRU-cached like jit's), its output tree, outer
        tracers, output axes, the mesh it runs on and its cache key."""
        n_global = self._global_size(n)
        avals = tuple(_shard_aval(x, a) for x, a in zip(leaves, axes))
        key = (in_tree, avals, tuple(axes), tuple((i, args[i]) for i in sorted(static_pos)), n_global,
               _bound_axis_names())

        def make():
            out_tree, mesh_axes = [], []

            def flat_fun(*xs):
                ol, td = self._apply(args, static_pos, in_tree, xs)
                out_tree.append(td)
                return ol
            with new_main(SpmdAxisTrace, _Frame(self.axis_name, n_global, mesh_axes)):
                closed, tracers = close_program(*trace_to_program(flat_fun, list(avals), dynamic=True))
            self.trace_count += 1
            out_avals = closed.out_avals
            out_axes = mapped_axes("pmap", self.out_axes, tree_unflatten(out_tree[0], out_avals), out_avals,
                                   "out_axes", 1)
            return closed, out_tree[0], tracers, out_axes, tuple(mesh_axes)
        hit = once(self._traces, key, make, lambda hit: not hit[2])
        closed, out_tree, tracers, out_axes, mesh_axes = hit
        return closed, out_tree, tracers, out_axes, self._mesh(n_global, mesh_axes), key

    def _mesh(self, n_global: int, inner: tuple) -> Mesh:
        shape = (n_global,) + tuple(s for _, s in inner)
        need, avail = prod(shape), self.devices if self.devices is not None else all_devices()
        if need > len(avail) or self.devices is not None and need != len(avail):
            have = f"devices= lists {len(avail)}" if self.devices is not None else \
                f"only {len(avail)} are available (set FLFUN_CPU_DEVICES or call flfun.set_cpu_device_count)"
            raise ValueError(f"pmap: the mapped axis has size {n_global}"
                             f"{''.join(f' x {s} (nested axis {nm!r})' for nm, s in inner)}, which needs {need} "
                             f"devices, but {have}")
        devs, names = avail[:need], (self.axis_name,) + tuple(nm for nm, _ in inner)
        key = (tuple(id(d) for d in devs), names, shape)
        if key not in self._meshes:
            self._meshes[key] = Mesh(devs, names, shape)
        return self._meshes[key]

    def _nested(self, frame, args, static_pos, leaves, in_tree, axes, n):
        """A pmap inside another pmap's function: a new mesh axis. Each device takes its slice of the mapped
        arguments; outputs are gathered along the axis, so the enclosing function sees stacked values."""
        if self.devices is not None:
            raise ValueError("pmap: devices= can only be given to the outermost pmap")
        known = dict(frame.axes)
        if known.get(self.axis_name, n) != n:
            raise ValueError(f"pmap: nested axis {self.axis_name!r} is used with sizes {known[self.axis_name]} and {n}")
        if self.axis_name not in known:
            frame.axes.append((self.axis_name, n))
        with new_main(SpmdAxisTrace, _Frame(self.axis_name, n, frame.axes)):
            j = axis_index(self.axis_name)

            def take(x, a):
                shape = get_aval(x).shape
                starts = [0] * len(shape)
                starts[a] = j
                return squeeze(dynamic_slice(x, starts, shape[:a] + (1,) + shape[a + 1:]), (a,))
            ol, td = self._apply(args, static_pos, in_tree, [take(x, a) if a is not None else x
                                                              for x, a in zip(leaves, axes)])
            oaxes = mapped_axes("pmap", self.out_axes, tree_unflatten(td, ol), ol, "out_axes", 1)
            res = [all_gather(o, self.axis_name, axis=a) if a is not None else o for o, a in zip(ol, oaxes)]
        return tree_unflatten(td, res)

    def cache_info(self) -> CacheInfo:
        """Hits, misses, entries, evictions and pinned arena bytes of the per-device program cache (LRU, bounded by
        ``cache_size`` entries and ``cache_bytes`` arena bytes as for ``jit``).

        Example::

            >>> f = fl.pmap(fnp.sin); f(fnp.ones(1)); f(fnp.ones(1)); f.cache_info().hits
            1
        """
        return self._traces.info()

    def clear_cache(self) -> None:
        self._traces.clear()
        self._fast.clear()

    def lower(self, *args):
        """The per-device program for these arguments (``.ir`` text) and its mesh, without running it."""
        closed, _, _, _, mesh, _ = self._trace(args, *self._prepare(args, {}))
        return _Lowered(closed, mesh, self.memory_strategy)


class _Lowered:
    def __init__(self, closed, mesh, strategy=None):
        self.closed, self.mesh, self.ir, self.strategy = closed, mesh, str(closed.program), strategy

    def compile(self, device=None):
        """The per-device executable (with its memory plan) on ``device`` (default: the mesh's first)."""
        return compile_program(self.closed, device or self.mesh.local[0][1], (), self.strategy)


def _fast_key(args: tuple):
    """``(key, leaves)`` when every argument leaf is an Array or a numpy array (the eager fast path), else None."""
    leaves, tree = tree_flatten(args)
    key = [tree]
    for x in leaves:
        t = type(x)
        if t is Array:
            key += (x._value.shape, x._value.dtype, x._device)
        elif t is np.ndarray:
            key += (x.shape, x.dtype, None)
        else:
            return None
    return tuple(key), leaves


class _EagerRun:
    """A traced pmap ready to run on concrete leaves: its program, executables, axes and output tree."""

    def __init__(self, closed, out_tree, axes, out_axes, mesh, exes, key):
        self.closed, self.out_tree, self.axes, self.out_axes, self.mesh, self.exes, self.key = \
            closed, out_tree, axes, out_axes, mesh, exes, key
        self.in_ax, self.p_out_axes = (tuple(None if a is None else 0 for a in ax) for ax in (axes, out_axes))
        self.heads = [mesh.local[i][1] for i in mesh.heads]

    def __call__(self, leaves: list):
        heads = self.heads
        outs = _execute(self.closed, self.mesh, [_host_input(x, a, heads) for x, a in zip(leaves, self.axes)],
                        self.in_ax, self.p_out_axes, exes=self.exes)
        res = [ShardedArray([wrap(b, d) for b, d in zip(o, heads)], ax) if ax is not None
               else wrap(o, self.mesh.local[0][1]) for o, ax in zip(outs, self.out_axes)]
        return tree_unflatten(self.out_tree, res)


def _shard_aval(x, ax) -> ShapedArray:
    a = get_aval(x)
    return a if ax is None else ShapedArray(a.shape[:ax] + a.shape[ax + 1:], a.dtype, a.weak_type)


def _host_input(x, ax, devs: list):
    """The raw input of one argument: for a mapped one (``ax``) one buffer per device of ``devs``, a ShardedArray's
    own shards when they already sit on ``devs`` along ``ax``, else views of the host value; else the host value."""
    if isinstance(x, ShardedArray) and x.axis == ax and len(x.shards) == len(devs) and \
            all(s._device is d for s, d in zip(x.shards, devs)):
        return [s._value for s in x.shards]
    v = x._device.to_host(x._value) if type(x) is Array else np.asarray(x, dtype=get_aval(x).dtype)
    return v if ax is None else [v[(slice(None),) * ax + (k,)] for k in range(len(devs))]


# ---------------------------------------------------------------------------------------------- execution
def _executables(closed: ClosedProgram, mesh: Mesh, strategy: str | None) -> dict:
    """One executable per local device (the pipeline shares the optimised program and the memory plan among the
    devices of a backend; each device gets its own arena)."""
    return {g: compile_program(closed, d, (), strategy) for g, d in mesh.local}


PER_DEVICE = "device"    # in/out axis kind: one slice per local device (residuals on a nested mesh)


def _count(mesh: Mesh, ax) -> int:
    """Leading size of an operand or result mapped with ``ax`` (0: shards, PER_DEVICE: local devices)."""
    return len(mesh.local) if ax == PER_DEVICE else len(mesh.heads)


def _sharing(mesh: Mesh, ax) -> tuple:
    """The mesh axes along which devices hold the same value of an operand or result mapped with ``ax``."""
    return mesh.names if ax is None else () if ax == PER_DEVICE else mesh.names[1:]


def _execute(closed: ClosedProgram, mesh: Mesh, inputs: list, in_axes: tuple, out_axes: tuple,
             strategy: str | None = None, exes: dict | None = None) -> list:
    """Run ``closed`` on every local device of ``mesh``. ``inputs[i]`` is a list of raw buffers, one per shard
    (in_axes 0) or per local device (PER_DEVICE), or one raw buffer (None: replicated). Returns, per output, the
    buffers of the shards' first devices (``mesh.heads``; 0), of every device (PER_DEVICE) or device 0's buffer
    (None). ``strategy`` is the memory planner's; ``exes`` the executables when already compiled."""
    outer, exes = mesh.outer, exes or _executables(closed, mesh, strategy)

    def task(i, g, dev):
        args = [x if ax is None else x[i if ax == PER_DEVICE else outer[g]] for x, ax in zip(inputs, in_axes)]
        if dev.platform != "cpu":
            args = [dev.put(a) for a in args]
        return exes[g](*args)

    results = run_spmd(mesh, [(g, functools.partial(task, i, g, d)) for i, (g, d) in enumerate(mesh.local)])
    return [results[0][j] if ax is None else [r[j] for r in results] if ax == PER_DEVICE else
            [results[i][j] for i in mesh.heads] for j, ax in enumerate(out_axes)]


# ------------------------------------------------------------------------------------------- call primitive
pmap_p = Primitive("pmap", multiple_results=True)


@pmap_p.def_abstract_eval
def _pmap_abstract_eval(*avals, program, mesh, in_axes, out_axes, name):
    # mapped operands (checked by PmapFunction, kept so by the rules) lead with the size _count(mesh, ax)
    return [a if ax is None else a.update(shape=(_count(mesh, ax),) + a.shape)
            for a, ax in zip(program.out_avals, out_axes)]


def _pmap_impl(*vals, program, mesh, in_axes, out_axes, name):
    inputs = [v if ax is None else [v[k] for k in range(_count(mesh, ax))] for v, ax in zip(vals, in_axes)]
    outs = _execute(program, mesh, inputs, in_axes, out_axes)
    return [np.stack([np.asarray(s) for s in o]) if ax is not None else o for o, ax in zip(outs, out_axes)]


register_impl(pmap_p, "numpy", _pmap_impl)


class _PmapSite(CallSite):
    """A bound ``pmap_p`` for the shared call rules: operands and results carry their device axes, and derived
    programs are traced inside the mesh's axis frames."""

    def __init__(self, program: ClosedProgram, mesh: Mesh, in_axes: tuple, out_axes: tuple, name: str):
        self.closed, self.mesh, self.in_axes, self.out_axes, self.name = program, mesh, in_axes, out_axes, name
        self.residual_axis = 0 if len(mesh.heads) == len(mesh.local) else PER_DEVICE

    def derive(self, key: tuple, make: Callable, *args):
        return once(self.closed.cache, ("pmap", self.mesh.names, self.mesh.shape) + key,
                    lambda: _in_frames(self.mesh, make, self.closed, *args))

    def bind(self, args: list, closed: ClosedProgram, name: str, in_axes: tuple, out_axes: tuple) -> list:
        return pmap_p.bind(*args, program=closed, mesh=self.mesh, in_axes=in_axes, out_axes=out_axes, name=name)

    def adjust_ct(self, i: int, ct):
        """An output is read from one device (device 0 for out_axes None, the first along the nested axes for
        mapped ones), so only that device receives its cotangent."""
        names = _sharing(self.mesh, self.out_axes[i])
        if not names:
            return ct
        first = eq(axis_index(names), full((), 0, np.int32))
        return select_n(first, full(ct.shape, 0, ct.dtype), ct)

    def adjust_cts_in(self, cts: list, undef: tuple) -> list:
        """An input given to several devices (replicated, or a shard shared along nested axes) gets the sum of
        their cotangents."""
        shared = [_sharing(self.mesh, ax) for ax, u in zip(self.in_axes, undef) if u]
        return [psum(c, names) if names and not is_zero(c) else c for c, names in zip(cts, shared)]


def_call_rules(pmap_p, _PmapSite)


@decorator_factory
def pmap(fun: Callable, axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence | None = None,
         axis_size: int | None = None, memory_strategy: str | None = None, cache_size: int | None = None,
         cache_bytes: int | None = None) -> PmapFunction:
    """Map ``fun`` over devices: shard ``i`` of every mapped argument runs on device ``i``, all at once.

    ``fun`` is compiled once per shard shape (the jit pipeline: passes, memory plan, generated code) and runs
    SPMD; collectives (``psum``, ``pmean``, ``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``, ...)
    naming ``axis_name`` communicate between the devices. The mapped size must not exceed the number of devices
    (the first ones are used, or ``devices``); across processes (``flfun.distributed.initialize()``) each process
    passes one shard per local device and the axis spans all processes' devices.

    Args:
        fun: a function of arrays (pytrees allowed).
        axis_name: the name collectives use for the mapped axis.
        in_axes: int, None (broadcast to every device) or a pytree prefix of those, per positional argument.
        out_axes: where the device axis goes in each output; ``None`` returns device 0's value (for outputs
            that are equal everywhere, e.g. after ``psum``).
        static_broadcasted_argnums: positional arguments passed as static (hashable) Python values.
        devices: the devices to use (as many as the mapped size).
        axis_size: the mapped size when no argument is mapped (e.g. to initialise per-device state).
        memory_strategy: the planner's offset strategy for the per-device programs, as for ``jit``.
        cache_size, cache_bytes: the LRU bounds of the per-device program cache, as for ``jit`` (``cache_info()``).

    Returns:
        A function returning ``ShardedArray``s (which behave like Arrays and feed later pmaps without copies).

    Example::

        >>> flfun.set_cpu_device_count(4)
        >>> f = flfun.pmap(lambda x: x / flfun.lax.psum(x, 'i'), axis_name='i')
        >>> f(fnp.arange(1.0, 5.0)).tolist()
        [0.1, 0.2, 0.3, 0.4]
    """
    if not callable(fun):
        raise ValueError(f"pmap: fun must be callable, got {fun!r:.60}")
    return PmapFunction(fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices, axis_size,
                        memory_strategy, cache_size, cache_bytes)


__all__ = ["pmap", "pmap_p", "PmapFunction", "SpmdAxisTrace"]
