"""``pmap``: compile a function once per shard shape and run it SPMD on many devices, with named-axis collectives.

The function is traced, with abstract values of one shard, inside an axis frame that names the mapped axis (so
collectives stage as equations), then compiled by the jit pipeline (passes, memory plan, generated code) once
per device. Each call runs every local device's executable in its own thread (numpy and BLAS release the GIL);
collective impls meet in the mesh's communicators (threads in one process, MPI across processes). Results come
back as ``ShardedArray``s. Under grad, vmap or jit a pmap binds the call primitive ``pmap_p`` (``pmap_call.py``),
whose rules transform the per-device program. A pmap inside another pmap adds an axis to the device mesh.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from flfun.array import Array
from flfun.core import ShapedArray, Tracer, _state, get_aval, new_main, trace_stack, wrap
from flfun.distributed.spmd import Mesh
from flfun.ir import ClosedProgram
from flfun.primitives.common import moveaxis
from flfun.sharded import ShardedArray
from flfun.transforms.pmap_call import SpmdAxisTrace, _enclosing_frame, _execute, _Frame, pmap_p
from flfun.transforms.call import close_program, compile_program
from flfun.transforms.staging import trace_to_program
from flfun.tree import broadcast_prefix, tree_flatten, tree_unflatten


# ---------------------------------------------------------------------------------------------------- pmap
class _Traced:
    __slots__ = ("closed", "out_tree", "mesh_axes", "tracers", "out_axes")

    def __init__(self, closed, out_tree, mesh_axes, tracers):
        self.closed, self.out_tree, self.mesh_axes, self.tracers = closed, out_tree, mesh_axes, tracers
        self.out_axes = None


class _Unnamed:
    """The name of a pmap axis given no ``axis_name`` (no collective can refer to it)."""

    def __repr__(self):
        return "<unnamed>"


def _as_tuple(x) -> tuple:
    return (x,) if isinstance(x, int) else tuple(x)


def _bound_axis_names() -> tuple:
    return tuple(m.global_data.name for m in trace_stack if getattr(m.global_data, "name", None) is not None)


class PmapFunction:
    """A function mapped over devices (see ``pmap``)."""

    def __init__(self, fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices, axis_size):
        functools.update_wrapper(self, fun)
        if axis_size is not None and (not isinstance(axis_size, int) or isinstance(axis_size, bool)
                                      or axis_size < 1):
            raise ValueError(f"pmap: axis_size must be a positive int or None, got {axis_size!r}")
        self.axis_size = axis_size
        self.fun, self.in_axes, self.out_axes = fun, in_axes, out_axes
        self.axis_name = _Unnamed() if axis_name is None else axis_name
        self.static = _as_tuple(static_broadcasted_argnums)
        if any(not isinstance(i, int) or isinstance(i, bool) for i in self.static):
            raise ValueError(f"pmap: static_broadcasted_argnums must be ints, got {static_broadcasted_argnums!r}")
        self.devices = None if devices is None else list(devices)
        self._traces: dict = {}
        self._meshes: dict = {}
        self._lifted: dict = {}
        self.trace_count = 0

    # --- arguments
    def _leaf_axes(self, args, static_pos, leaves) -> list:
        if self.in_axes is None or isinstance(self.in_axes, int):
            axes = [self.in_axes] * len(leaves)
        else:
            spec = tuple(self.in_axes) if isinstance(self.in_axes, list) else self.in_axes
            if isinstance(spec, tuple) and len(spec) == len(args):
                spec = tuple(a for i, a in enumerate(spec) if i not in static_pos)
            dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
            axes = broadcast_prefix(spec, dyn, "pmap in_axes")
        out = []
        for i, (x, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                out.append(None)
                continue
            if not isinstance(ax, int) or isinstance(ax, bool):
                raise ValueError(f"pmap: in_axes entries must be int or None, got {ax!r}")
            nd = len(get_aval(x).shape)
            if not -nd <= ax < nd:
                raise ValueError(f"pmap: in_axes={ax} is out of bounds for argument leaf {i} of rank {nd}")
            out.append(ax % nd)
        return out

    def _out_axes(self, out_tree, leaves) -> list:
        example = tree_unflatten(out_tree, [object()] * out_tree.num_leaves)
        spec = self.out_axes
        axes = [spec] * out_tree.num_leaves if spec is None or isinstance(spec, int) else \
            broadcast_prefix(tuple(spec) if isinstance(spec, list) else spec, example, "pmap out_axes")
        out = []
        for i, (ax, x) in enumerate(zip(axes, leaves)):
            if ax is not None:
                nd = len(get_aval(x).shape) + 1
                if not isinstance(ax, int) or isinstance(ax, bool) or not -nd <= ax < nd:
                    raise ValueError(f"pmap: out_axes entry {ax!r} is invalid for output leaf {i} of rank {nd - 1}")
                ax %= nd
            out.append(ax)
        return out

    # --- calling
    def __call__(self, *args, **kwargs):
        if kwargs:
            raise ValueError(f"pmap: keyword arguments are not supported (got {sorted(kwargs)}); pass them "
                             f"positionally")
        nargs = len(args)
        static_pos = {i % nargs for i in self.static if -nargs <= i < nargs}
        static = tuple((i, args[i]) for i in sorted(static_pos))
        for i, v in static:
            try:
                hash(v)
            except TypeError:
                raise ValueError(f"pmap: static argument {i} must be hashable, got {type(v).__name__}") from None
        dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
        leaves, in_tree = tree_flatten(dyn)
        axes = self._leaf_axes(args, static_pos, leaves)
        sizes = [(i, get_aval(x).shape[a]) for i, (x, a) in enumerate(zip(leaves, axes)) if a is not None]
        if not sizes and self.axis_size is None:
            raise ValueError("pmap: no argument is mapped (all in_axes are None); pass axis_size")
        n = sizes[0][1] if sizes else self.axis_size
        if any(s != n for _, s in sizes) or (self.axis_size is not None and self.axis_size != n):
            raise ValueError(f"pmap: mapped axes have different sizes "
                             f"({', '.join(f'leaf {i}: {s}' for i, s in sizes)}"
                             f"{'' if self.axis_size is None else f', axis_size={self.axis_size}'})")
        frame = _enclosing_frame()
        if frame is not None:
            return self._nested(frame, args, static_pos, leaves, in_tree, axes, n)
        return self._call(args, static, static_pos, leaves, in_tree, axes, n)

    def _global_size(self, n: int) -> int:
        from flfun.devices import local_device_count, process_count
        if self.devices is None and process_count() > 1:
            if n != local_device_count():
                raise ValueError(f"pmap: the mapped axis has size {n}, but this process has {local_device_count()} "
                                 f"devices; across processes each passes one shard per local device")
            return n * process_count()
        return n

    def _trace(self, in_tree, avals, axes, static, args, static_pos, n_global) -> _Traced:
        key = (in_tree, avals, tuple(axes), static, n_global, _bound_axis_names())
        hit = self._traces.get(key)
        if hit is not None:
            return hit
        out_tree, mesh_axes = [], []

        def flat_fun(*xs):
            it = iter(tree_unflatten(in_tree, xs))
            out = self.fun(*[args[i] if i in static_pos else next(it) for i in range(len(args))])
            ol, td = tree_flatten(out)
            out_tree.append(td)
            return ol
        with new_main(SpmdAxisTrace, _Frame(self.axis_name, n_global, mesh_axes)):
            closed, tracers = close_program(*trace_to_program(flat_fun, list(avals), dynamic=True))
        self.trace_count += 1
        traced = _Traced(closed, out_tree[0], tuple(mesh_axes), tracers)
        if not tracers:
            self._traces[key] = traced
        return traced

    def _mesh(self, n_global: int, inner: tuple) -> Mesh:
        from flfun.devices import devices as all_devices
        hit = self._meshes.get((n_global, inner))
        if hit is not None:
            avail = self.devices if self.devices is not None else all_devices()
            if len(avail) >= len(hit.devices) and all(a is b for a, b in zip(avail, hit.devices)):
                return hit
        shape = (n_global,) + tuple(s for _, s in inner)
        names = (self.axis_name,) + tuple(nm for nm, _ in inner)
        need = int(np.prod(shape))
        if self.devices is not None:
            devs = self.devices
            if len(devs) != need:
                raise ValueError(f"pmap: the mapped axis has size {n_global}{_mesh_note(inner)}, which needs "
                                 f"{need} devices, but devices= lists {len(devs)}")
        else:
            avail = all_devices()
            if need > len(avail):
                raise ValueError(f"pmap: the mapped axis has size {n_global}{_mesh_note(inner)}, which needs "
                                 f"{need} devices, but only {len(avail)} are available (set FLFUN_CPU_DEVICES "
                                 f"or call flfun.set_cpu_device_count)")
            devs = avail[:need]
        key = (tuple(id(d) for d in devs), names, shape)
        mesh = self._meshes.get(key)
        if mesh is None:
            mesh = self._meshes[key] = Mesh(devs, names, shape)
        self._meshes[(n_global, inner)] = mesh
        return mesh

    def _call(self, args, static, static_pos, leaves, in_tree, axes, n):
        n_global = self._global_size(n)
        avals = tuple(_shard_aval(x, a) for x, a in zip(leaves, axes))
        traced = self._trace(in_tree, avals, axes, static, args, static_pos, n_global)
        mesh = self._mesh(n_global, traced.mesh_axes)
        if traced.out_axes is None:
            out_axes = self._out_axes(traced.out_tree, traced.closed.out_avals)
            traced.out_axes = out_axes, tuple(None if a is None else 0 for a in out_axes)
        out_axes, p_out_axes = traced.out_axes
        if _state.eager and not traced.tracers and not any(isinstance(x, Tracer) for x in leaves):
            heads = [mesh.local[i][1] for i in mesh.heads]
            inputs = [_shards_of(x, a, heads) if a is not None else _replicated(x, av)
                      for x, a, av in zip(leaves, axes, avals)]
            outs, head_devs = _execute(traced.closed, mesh, inputs, tuple(None if a is None else 0 for a in axes),
                                       p_out_axes)
            res = [ShardedArray([wrap(b, d) for b, d in zip(o, head_devs)], ax) if ax is not None
                   else wrap(o, mesh.local[0][1]) for o, ax in zip(outs, out_axes)]
            return tree_unflatten(traced.out_tree, res)
        closed, extra = traced.closed, list(traced.tracers)
        if _state.tape is not None:
            closed, lifted = self._lift_tape_consts(closed, len(extra))
            extra = lifted + extra
        moved = [moveaxis(x, a, 0) if a else x for x, a in zip(leaves, axes)]
        in_ax = (None,) * len(extra) + tuple(None if a is None else 0 for a in axes)
        outs = pmap_p.bind(*extra, *moved, program=closed, mesh=mesh, in_axes=in_ax, out_axes=p_out_axes,
                           name=getattr(self.fun, "__name__", "fun"))
        outs = [moveaxis(o, 0, a) if a else o for o, a in zip(outs, out_axes)]
        return tree_unflatten(traced.out_tree, outs)

    def _lift_tape_consts(self, closed: ClosedProgram, n_tracers: int):
        """Constants the eager tape is recording become inputs, so that grad sees them (closed-over params)."""
        from flfun.ir import Program
        index = _state.tape.index
        pos = tuple(i for i, c in enumerate(closed.consts) if id(c) in index)
        if not pos:
            return closed, []
        key = (id(closed), pos)
        hit = self._lifted.get(key)
        if hit is None or hit[0] is not closed:
            p = closed.program
            keep = [i for i in range(len(p.constvars)) if i not in pos]
            prog = Program([p.constvars[i] for i in keep], [p.constvars[i] for i in pos] + list(p.invars), p.eqns,
                           p.outvars)
            hit = self._lifted[key] = (closed, ClosedProgram(prog, [closed.consts[i] for i in keep]))
        return hit[1], [closed.consts[i] for i in pos]

    def _nested(self, frame, args, static_pos, leaves, in_tree, axes, n):
        """A pmap inside another pmap's function: a new mesh axis. Each device takes its slice of the mapped
        arguments; outputs are gathered along the axis, so the enclosing function sees stacked values."""
        from flfun.primitives.collective import all_gather, axis_index
        from flfun.primitives.shape import dynamic_slice, squeeze
        if self.devices is not None:
            raise ValueError("pmap: devices= can only be given to the outermost pmap")
        for name, size in frame.axes:
            if name == self.axis_name and size != n:
                raise ValueError(f"pmap: nested axis {name!r} is used with sizes {size} and {n}")
        if all(name != self.axis_name for name, _ in frame.axes):
            frame.axes.append((self.axis_name, n))
        with new_main(SpmdAxisTrace, _Frame(self.axis_name, n, frame.axes)):
            j = axis_index(self.axis_name)

            def take(x, a):
                shape = get_aval(x).shape
                starts = [0] * len(shape)
                starts[a] = j
                return squeeze(dynamic_slice(x, starts, shape[:a] + (1,) + shape[a + 1:]), (a,))
            it = iter(tree_unflatten(in_tree, [take(x, a) if a is not None else x for x, a in zip(leaves, axes)]))
            out = self.fun(*[args[i] if i in static_pos else next(it) for i in range(len(args))])
            ol, td = tree_flatten(out)
            oaxes = self._out_axes(td, ol)
            res = [all_gather(o, self.axis_name, axis=a) if a is not None else o for o, a in zip(ol, oaxes)]
        return tree_unflatten(td, res)

    def lower(self, *args):
        """The per-device program for these arguments (``.ir`` text) and its mesh, without running it."""
        nargs = len(args)
        static_pos = {i % nargs for i in self.static if -nargs <= i < nargs}
        dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
        leaves, in_tree = tree_flatten(dyn)
        axes = self._leaf_axes(args, static_pos, leaves)
        n = next((get_aval(x).shape[a] for x, a in zip(leaves, axes) if a is not None), self.axis_size)
        n_global = self._global_size(n)
        traced = self._trace(in_tree, tuple(_shard_aval(x, a) for x, a in zip(leaves, axes)), axes,
                             tuple((i, args[i]) for i in sorted(static_pos)), args, static_pos, n_global)
        return _Lowered(traced.closed, self._mesh(n_global, traced.mesh_axes))


class _Lowered:
    def __init__(self, closed, mesh):
        self.closed, self.mesh = closed, mesh

    @property
    def ir(self) -> str:
        return str(self.closed.program)

    def compile(self, device=None):
        """The per-device executable (with its memory plan) on ``device`` (default: the mesh's first)."""
        return compile_program(self.closed, device or self.mesh.local[0][1])


def _mesh_note(inner) -> str:
    return "".join(f" x {s} (nested axis {nm!r})" for nm, s in inner)


def _shard_aval(x, ax) -> ShapedArray:
    a = get_aval(x)
    if ax is None:
        return a
    return ShapedArray(a.shape[:ax] + a.shape[ax + 1:], a.dtype, a.weak_type)


def _shards_of(x, ax: int, devs: list) -> list:
    """Per-device raw buffers of a mapped argument: a ShardedArray's own shards when they already sit on
    ``devs`` along ``ax``, else views of the host value."""
    if isinstance(x, ShardedArray) and x.axis == ax and len(x.shards) == len(devs) and \
            all(s._device is d for s, d in zip(x.shards, devs)):
        return [s._value for s in x.shards]
    if type(x) is Array:
        v = x._device.to_host(x._value)
    else:
        v = np.asarray(x)
    idx = (slice(None),) * ax
    return [v[idx + (k,)] for k in range(len(devs))]


def _replicated(x, aval: ShapedArray):
    if type(x) is Array and x._device.platform == "cpu":
        return x._value
    return np.asarray(x, dtype=aval.dtype)


def pmap(fun: Callable, axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence | None = None,
         axis_size: int | None = None) -> PmapFunction:
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
    return PmapFunction(fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices, axis_size)


__all__ = ["pmap", "pmap_p", "PmapFunction", "SpmdAxisTrace"]
