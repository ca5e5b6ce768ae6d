"""``jit``: trace once with abstract values, optimise the program, plan its memory and run generated code.

Compiled programs are cached by pytree structure, avals (with weak types), static arguments, device and the
primitive-registry version, so a replaced impl takes effect on the next call. Under another transform (or
inside another ``jit``) a jitted function binds the ``jit`` call primitive (``flfun/transforms/call.py``),
whose rules make jit compose with grad, vjp, jvp and vmap in every order.
"""
from __future__ import annotations

import collections
import functools
import inspect
import sys
from typing import Callable, Sequence

import numpy as np

from flfun import core
from flfun.array import Array
from flfun.compiler.cache import CacheInfo, ProgramCache, pinned_bytes
from flfun.compiler.executor import Executable, writes_out
from flfun.compiler.liveness import plan_program
from flfun.compiler import pipeline
from flfun.compiler.pipeline import DEFAULT_STRATEGY, compile_program, global_version
from flfun.config import config
from flfun.core import Tracer, trace_state, get_aval, short, wrap
from flfun.ir import ClosedProgram
from flfun.memory import get_allocator
from flfun.memory.planner import MemoryPlan
from flfun.transforms.call import jit_p
from flfun.transforms.jvp import flatten_fun
from flfun.transforms.subprogram import close_program, trace_body
from flfun.transforms.vjp import with_args
from flfun.tree import tree_flatten, tree_leaves, tree_unflatten
from flfun.util import once, decorator_factory


# --------------------------------------------------------------------------------------------- donation
class _Donated:
    """Stands in for the buffer of an Array that was donated to a jitted function."""

    def __getattr__(self, name):
        raise RuntimeError("this Array was donated to a jitted function (donate_argnums) and its buffer was "
                           "reused; use the function's outputs instead")   # (numpy's __array__ lookup lands here too)


_DONATED = _Donated()


def _value_refs(leaf) -> int:
    return sys.getrefcount(leaf._value)


_BASE_REFS = _value_refs(wrap(np.array([0.0]), None))  # an Array's buffer that nothing else references


def _take_donated(leaf, others: set):
    """The raw buffer of a donated Array, reusable in place only if nothing else can see it (else a copy)."""
    v = leaf._value
    if v is _DONATED:
        raise ValueError("jit: a donated argument was already donated (passed twice, or used after donation)")
    ok = (type(v).__name__ == "ndarray" and v.base is None and getattr(v.flags, "writeable", True)
          and v.flags.c_contiguous and id(v) not in others and _value_refs(leaf) <= _BASE_REFS + 1)
    leaf._value = _DONATED
    return v if ok else v.copy()     # numpy or cupy (a numpy scalar's copy is a scalar)


def _raw_args(leaves, avals, donated):
    raw = [None if i in donated and type(x) is Array else x._value if type(x) is Array else
           np.asarray(x, dtype=avals[i].dtype) for i, x in enumerate(leaves)]
    if donated:
        others = {id(r) for r in raw if r is not None}
        for i in donated:
            if raw[i] is None:
                raw[i] = _take_donated(leaves[i], others)
    return raw


def _fast_key(args, kwargs, positional: bool):
    """``(cache key, raw buffers, leaves)`` when every argument leaf is an Array, else None. ``positional``
    first tries Arrays and tuples of Arrays (``f(params, x, y)``, the W1/W4 path) without pytree work; a tuple
    adds its length to the key, so different nestings never share one."""
    if positional:
        key, items, leaves = [], args, None
    else:
        leaves, tree = tree_flatten((args, kwargs))
        key, items = [tree], leaves
    raw = []
    for a in items:
        if type(a) is tuple:      # (pytree leaves are never tuples)
            key.append(len(a))
        for b in a if type(a) is tuple else (a,):
            if type(b) is not Array:
                return _fast_key(args, kwargs, False) if positional else None
            v = b._value
            key += (v.shape, v.dtype, b._device)
            raw.append(v)
    return tuple(key), raw, leaves


def _check_arg_specs(name: str, params: list, static: tuple, names: tuple, donate: tuple) -> None:
    """ValueError for argument numbers or names that ``fun``'s signature (``params``, when known) cannot have,
    and for an argument that is both static and donated."""
    kinds = {p.kind for p in params}
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    n = len(positional)
    if params and inspect.Parameter.VAR_POSITIONAL not in kinds:
        for what, nums in (("static_argnums", static), ("donate_argnums", donate)):
            if any(not -n <= i < n for i in nums):
                raise ValueError(f"jit: {what}={nums} for {name}, which takes {n} positional argument(s)")
    if params and inspect.Parameter.VAR_KEYWORD not in kinds:
        unknown = [k for k in names if k not in {p.name for p in params}]
        if unknown:
            raise ValueError(f"jit: static_argnames {unknown} are not parameters of {name} "
                             f"({', '.join(p.name for p in params)})")
    norm = (lambda i: i % n) if n else (lambda i: i)
    static_pos = {norm(i) for i in static} | {positional.index(k) for k in names if k in positional}
    both = static_pos & {norm(i) for i in donate}
    if both:
        raise ValueError(f"jit: argument(s) {sorted(both)} of {name} are both static and donated; a static "
                         f"argument is a Python value, which has no buffer to donate")


# ---------------------------------------------------------------------------------------------------- jit
_Traced = collections.namedtuple("_Traced", "closed out_tree tracers avals in_tree key")


class JitFunction:
    """A function compiled on first call for each new argument signature (see ``jit``)."""

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(), memory_strategy=None,
                 cache_size: int | None = None, cache_bytes: int | None = None):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.__name__ = getattr(fun, "__name__", type(fun).__name__)
        as_tuple = lambda x: (x,) if isinstance(x, (int, str)) else tuple(x)
        self.static_argnums, self.static_argnames, self.donate_argnums = map(
            as_tuple, (static_argnums, static_argnames, donate_argnums))
        for what, kind, vals in (("static_argnums", int, self.static_argnums), ("donate_argnums", int,
                                 self.donate_argnums), ("static_argnames", str, self.static_argnames)):
            if any(type(v) is not kind for v in vals):
                raise ValueError(f"jit: {what} must be {'ints' if kind is int else 'strings'}, got {vals!r}")
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            params = []
        _check_arg_specs(self.__name__, params, self.static_argnums, self.static_argnames, self.donate_argnums)
        params = [p.name for p in params]
        self.static_argnames += tuple(params[i] for i in self.static_argnums if 0 <= i < len(params))
        self.static_argnums += tuple(params.index(n) for n in self.static_argnames if n in params
                                     and params.index(n) not in self.static_argnums)
        self.memory_strategy = memory_strategy
        self._static = bool(self.static_argnums or self.static_argnames)
        self._traces = ProgramCache(config.jit_cache_size if cache_size is None else cache_size,
                                    config.jit_cache_bytes if cache_bytes is None else cache_bytes,
                                    self._evicted)
        self._fast, self._fast_version, self.trace_count = {}, None, 0

    # --- calling
    def __call__(self, *args, **kwargs):
        if trace_state.eager and not self._static:
            version = global_version()
            if version != self._fast_version:
                self._fast.clear()
                self._fast_version = version
            else:
                fast = _fast_key(args, kwargs, not (kwargs or self.donate_argnums))
                hit = fast and self._fast.get(fast[0])
                # (an executable whose arena came from another allocator than the device's now is recompiled)
                if hit and (hit[0].allocator is None or hit[0].allocator is get_allocator(hit[2])):
                    exe, out_tree, dev, donated, traced = hit
                    self._traces.touch(traced.key)
                    outs = exe(*(_raw_args(fast[2], None, donated) if donated else fast[1]))
                    return wrap(outs[0], dev) if out_tree is None else \
                        tree_unflatten(out_tree, [wrap(o, dev) for o in outs])
        return self._call(args, kwargs)

    def _trace(self, args, kwargs):
        """``(traced program, argument leaves, their avals, donated leaf indices)`` for these arguments."""
        nargs = len(args)
        static_pos = {i % nargs for i in self.static_argnums if -nargs <= i < nargs}
        static = tuple([(i, args[i]) for i in sorted(static_pos)] + [(k, kwargs[k]) for k in sorted(kwargs)
                                                                     if k in self.static_argnames])
        for where, val in static:
            try:
                hash(val)
            except TypeError:
                raise ValueError(f"jit: static argument {where!r} of {self.__name__} must be hashable, got "
                                 f"{type(val).__name__} {val!r:.60} (use a tuple instead of a list, or pass it "
                                 f"as a traced array instead of through static_argnums)") from None
        dyn_pos = [i for i in range(nargs) if i not in static_pos]
        dyn_kw = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        leaves, in_tree = tree_flatten((tuple(args[i] for i in dyn_pos), dyn_kw))
        donate = {i % nargs for i in self.donate_argnums if -nargs <= i < nargs}
        mask = [i in donate for i in dyn_pos for _ in tree_leaves(args[i])]
        donated = tuple(i for i, d in enumerate(mask) if d)
        avals = []
        for i, x in enumerate(leaves):
            try:
                avals.append(get_aval(x))
            except TypeError:
                raise ValueError(f"jit: argument leaf {i} of {self.__name__} is a {type(x).__name__}, not an "
                                 f"array; mark it static (static_argnums / static_argnames)") from None
        avals = tuple(avals)
        key = (in_tree, avals, static)

        def make():
            def fun(dyn, dyn_kw):
                return self.fun(*with_args(args, dyn_pos, dyn), **{**kwargs, **dyn_kw})
            flat_fun, out_tree = flatten_fun(fun, in_tree)
            closed, tracers = trace_body(flat_fun, avals)
            self.trace_count += 1
            return _Traced(closed, out_tree[0], tracers, avals, in_tree, key)
        return once(self._traces, key, make, lambda traced: not traced.tracers), leaves, avals, donated

    def _call(self, args, kwargs):
        traced, leaves, avals, donated = self._trace(args, kwargs)
        if not trace_state.eager or traced.tracers or any(isinstance(x, Tracer) for x in leaves):
            outs = jit_p.bind(*traced.tracers, *leaves, closed=traced.closed, name=self.__name__, donated=())
            return tree_unflatten(traced.out_tree, outs)
        dev = _device_of(leaves)
        exe = compile_program(traced.closed, dev, donated, self.memory_strategy)
        self._traces.pin(traced.key, pinned_bytes(traced.closed.cache))
        if not self._static and all(type(x) is Array for x in leaves):
            key = _fast_key(args, kwargs, not (kwargs or self.donate_argnums))[0]
            self._fast[key] = (exe, None if traced.out_tree.node_type is None else traced.out_tree, dev, donated,
                               traced)
        outs = exe(*_raw_args(leaves, avals, donated))
        return tree_unflatten(traced.out_tree, [wrap(o, dev) for o in outs])

    # --- inspection
    def lower(self, *args, **kwargs) -> Lowered:
        """Trace and optimise for these arguments: ``.ir`` (text), ``.plan`` (memory plan), ``.compile()``."""
        traced, leaves, _, donated = self._trace(args, kwargs)
        if traced.tracers:
            raise ValueError("jit.lower: the function closes over values traced by an outer transform; lower it "
                             "outside that transform")
        return Lowered(self, traced, traced.in_tree, _device_of(leaves), donated)

    def _cache_size(self) -> int:
        return len(self._traces)

    def cache_info(self) -> CacheInfo:
        """Hits, misses, entries, evictions and pinned arena bytes of the compiled-program cache (LRU, bounded by
        ``cache_size`` entries and ``cache_bytes`` arena bytes; defaults in ``flfun.config``).

        Example::

            >>> f = fl.jit(fnp.sin); f(fnp.ones(2)); f(fnp.ones(2)); f.cache_info().hits
            1
        """
        return self._traces.info()

    def _evicted(self, key, traced: _Traced) -> None:
        for k in [k for k, v in list(self._fast.items()) if v[4] is traced]:
            self._fast.pop(k, None)

    def clear_cache(self) -> None:
        self._traces.clear()
        self._fast.clear()

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)


def _device_of(leaves):
    devs = list(dict.fromkeys(x._device for x in leaves if type(x) is Array))
    if len(devs) > 1:
        raise ValueError(f"jit: arguments live on different devices ({devs[0]} and {devs[1]}); move them "
                         f"with flfun.device_put first")
    return devs[0] if devs else core.default_device()


class Lowered:
    """A traced and optimised program for one argument signature."""

    def __init__(self, jitted: JitFunction, traced: _Traced, in_tree, device, donated):
        self.jitted, self.traced, self.in_tree, self.device, self.donated = jitted, traced, in_tree, device, donated
        self.program, self.consts = pipeline.optimized(traced.closed)
        self._plans: dict = {}

    @property
    def ir(self) -> str:
        """The optimised program as text (stable: variables are named in order of appearance)."""
        return str(self.program)

    @property
    def traced_ir(self) -> str:
        """The program as traced, before the passes."""
        return str(self.traced.closed.program)

    def plan_with(self, strategy: str) -> MemoryPlan:
        """The memory plan made by the named strategy."""
        if strategy not in self._plans:
            self._plans[strategy] = plan_program(self.program, writes_out(self.device.backend, True), self.donated,
                                                 strategy)
        return self._plans[strategy]

    @property
    def plan(self) -> MemoryPlan:
        return self.plan_with(self.jitted.memory_strategy or DEFAULT_STRATEGY)

    def compile(self, strategy: str | None = None) -> Compiled:
        exe = compile_program(self.traced.closed, self.device, self.donated,
                              strategy or self.jitted.memory_strategy)
        return Compiled(exe, self.traced, self.in_tree, self.device, self.donated)


class Compiled:
    """An executable for one argument signature; call it with the non-static arguments."""

    def __init__(self, exe: Executable, traced: _Traced, in_tree, device, donated):
        self.executable, self.traced, self.in_tree, self.device, self.donated = exe, traced, in_tree, device, donated

    def __call__(self, *args, **kwargs):
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise ValueError(f"jit: compiled for arguments of structure {self.in_tree}, but called with a changed "
                             f"pytree structure {tree}")
        avals = tuple(get_aval(x) for x in leaves)
        if avals != self.traced.avals:
            got, want = (", ".join(map(short, a)) for a in (avals, self.traced.avals))
            raise ValueError(f"jit: compiled for arguments ({want}) but called with ({got})")
        outs = self.executable(*_raw_args(leaves, avals, self.donated))
        return tree_unflatten(self.traced.out_tree, [wrap(o, self.device) for o in outs])

    @property
    def plan(self) -> MemoryPlan | None:
        return self.executable.plan


@decorator_factory
def jit(fun: Callable, static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
        donate_argnums: int | Sequence[int] = (), memory_strategy: str | None = None, *,
        cache_size: int | None = None, cache_bytes: int | None = None) -> JitFunction:
    """Compile ``fun``: trace it once per argument signature, optimise, plan memory, and run generated code.

    Args:
        fun: a function of arrays (pytrees allowed) returning arrays (pytrees allowed).
        static_argnums / static_argnames: arguments that are hashable Python values, not traced (a new value
            retraces); use them for shapes, flags or anything used in Python control flow.
        donate_argnums: arguments whose buffers the program may overwrite (their Arrays become unusable).
        memory_strategy: the planner's offset strategy ('auto', 'naive', 'greedy_by_size', 'best_fit', ...).
        cache_size / cache_bytes: bounds of the compiled-program cache, in entries and in bytes of the arenas
            they pin; least recently used programs beyond them are dropped (``cache_info()`` has the counts).

    Example::

        >>> f = fl.jit(lambda x, y: fnp.sum(x * y + 1.0))
        >>> f(fnp.ones(3), fnp.ones(3))
        Array(6., dtype=float32)
        >>> print(f.lower(fnp.ones(3), fnp.ones(3)).ir)
    """
    if not callable(fun):
        raise ValueError(f"jit: fun must be callable, got {fun!r:.60}")
    return JitFunction(fun, static_argnums, static_argnames, donate_argnums, memory_strategy, cache_size, cache_bytes)


def make_ir(fun: Callable, static_argnums: int | Sequence[int] = (), optimized: bool = False) -> Callable:
    """``make_ir(f)(*args)`` returns ``f``'s program for these arguments (``print`` it for the jaxpr-like text).

    Example::

        >>> print(fl.make_ir(lambda x: fnp.sin(x) * 2.0)(1.0))
        { lambda ; a:f32[]. let
            b:f32[] = sin a
            c:f32[] = mul b 2.0:f32
          in (c,) }
    """
    def make(*args, **kwargs):
        traced = JitFunction(fun, static_argnums)._trace(args, kwargs)[0]
        return ClosedProgram(*pipeline.optimized(traced.closed)) if optimized else traced.closed
    return make


__all__ = ["jit", "make_ir", "jit_p", "JitFunction", "Lowered", "Compiled", "close_program"]
