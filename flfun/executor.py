"""Run a planned program fast: generated straight-line Python over arena views.

``Executable`` turns a ``Program`` and its ``MemoryPlan`` into one Python function whose body calls each
equation's impl in order, with ``out=`` set to the value's arena view when the impl accepts one. Impls,
parameters, literals and views are bound as closure variables, so a call does no dictionary lookups, tracing or
shape logic. Program outputs never alias the arena, the inputs, the constants or each other (unless donated).
"""
from __future__ import annotations

import inspect
import threading
import time
import weakref
from typing import Any, Callable

import numpy as np

from flfun.array import Array
from flfun.core import Primitive, missing_rule
from flfun.ir import Eqn, Literal, Program, Var
from flfun.memory.planner import MemoryPlan, plan_program

_OUT_CACHE: dict[int, tuple[Any, bool]] = {}


def accepts_out(impl: Callable) -> bool:
    """Whether ``impl`` can write its result into an ``out=`` buffer: single-output ufuncs (numpy's or cupy's)
    and functions that declare an ``out`` parameter."""
    hit = _OUT_CACHE.get(id(impl))
    if hit is not None and hit[0] is impl:
        return hit[1]
    if isinstance(impl, np.ufunc) or type(impl).__name__ == "ufunc":
        ok = getattr(impl, "nout", 1) == 1
    else:
        try:
            ok = "out" in inspect.signature(impl).parameters
        except (TypeError, ValueError):
            ok = False
    _OUT_CACHE[id(impl)] = (impl, ok)
    return ok


def impl_for(prim: Primitive, backend: str) -> Callable:
    impl = prim.impls.get(backend)
    if impl is None:
        raise missing_rule("impl", prim, backend)
    return impl


def writes_out(backend: str) -> Callable[[Eqn], bool]:
    """The planner's ``can_write_out`` for ``backend``: the impl accepts ``out=`` and has one result."""
    return lambda e: not e.prim.multiple_results and accepts_out(impl_for(e.prim, backend))


def _raw(c, device):
    if isinstance(c, Array):
        v = c._value
        return v if c._device is device or device is None else device.put(np.asarray(c))
    if isinstance(c, Literal):
        return c.val
    return np.asarray(c) if device is None else device.put(np.asarray(c))


class Executable:
    """A compiled program: ``exe(*raw_inputs) -> list of raw outputs`` (numpy/cupy buffers).

    ``plan=None`` runs unplanned: every impl allocates its own result (the ``FLFUN_JIT_PLANNED=0`` mode).
    ``arena`` is the arena's bytes (a uint8 array) for tests and tools; ``source`` the generated code.
    """

    def __init__(self, program: Program, consts: list, device, plan: MemoryPlan | None = None,
                 donated: tuple = ()):
        self.program, self.device, self.plan, self.donated = program, device, plan, tuple(donated)
        backend = device.backend if device is not None else "numpy"
        self._block = None
        self.arena = None
        if plan is None:
            plan = plan_program(program, lambda e: False, donated)
        elif plan.arena_bytes:
            from flfun.memory import get_allocator
            alloc = get_allocator(device)
            self._block = alloc.malloc(plan.arena_bytes)
            self.arena = self._block.buffer
            weakref.finalize(self, alloc.free, self._block)
        self.source, names = _generate(program, plan, backend, consts, device, self.arena)
        scope: dict = {}
        exec(compile(self.source, f"<flfun.jit {id(self):x}>", "exec"), scope)
        self._run = scope["_factory"](*names.values())
        self._lock = threading.Lock()
        self._fallback: Executable | None = None
        self._consts = consts

    def profile(self, *args, repeat: int = 5, clock: Callable = time.perf_counter) -> list[tuple[int, str, float]]:
        """``(equation index, primitive, median seconds)`` for every equation, from ``repeat`` instrumented runs
        of the same generated code (one ``clock()`` call around each equation; ``time.process_time`` is steadier
        on a busy machine)."""
        source, names = _generate(self.program, self.plan or plan_program(self.program, lambda e: False),
                                  self.device.backend if self.device is not None else "numpy", self._consts,
                                  self.device, self.arena, timed=clock)
        scope: dict = {}
        exec(compile(source, "<flfun.jit profile>", "exec"), scope)
        run, times = scope["_factory"](*names.values()), names["_times"]
        runs = []
        for _ in range(repeat):
            times.clear()
            with self._lock:
                run(*args)
            runs.append(list(times))
        med = np.median(np.asarray(runs), axis=0)
        return [(i, e.prim.name, float(t)) for i, (e, t) in enumerate(zip(self.program.eqns, med))]

    def __call__(self, *args):
        if self._lock.acquire(False):
            try:
                return self._run(*args)
            finally:
                self._lock.release()
        if self._fallback is None:     # re-entered from another thread: the arena is in use
            self._fallback = Executable(self.program, self._consts, self.device, None, self.donated)
        return self._fallback(*args)


def _generate(program: Program, plan: MemoryPlan, backend: str, consts: list, device, arena, timed=None):
    """Source of ``_factory(*closure_values) -> run`` and the closure values by name (with ``timed``, ``run``
    also appends each equation's wall time to the list ``_times``)."""
    names: dict[str, Any] = {"_clock": timed, "_times": []} if timed else {}
    by_id: dict[int, str] = {}

    def bound(prefix: str, value) -> str:
        key = id(value)
        if key in by_id and names[by_id[key]] is value:
            return by_id[key]
        name = f"{prefix}{len(names)}"
        names[name] = value
        by_id[key] = name
        return name

    roots, var_roots = plan.roots, plan.var_roots
    offsets = {b.id: b.offset for b in plan.buffers}
    views: dict[int, str] = {}        # arena root id -> name of its view
    var_names: dict[int, str] = {}
    for i, v in enumerate(program.invars):
        var_names[v.id] = f"a{i}"
    for v, c in zip(program.constvars, consts):
        var_names[v.id] = bound("k", _raw(c, device))

    def atom(v) -> str:
        return bound("c", v.val) if type(v) is Literal else var_names[v.id]

    last = {}
    for i, e in enumerate(program.eqns):
        for v in e.inputs:
            if type(v) is Var:
                last[v.id] = i
    outset = {v.id for v in program.outvars if type(v) is Var}
    body = []
    for i, e in enumerate(program.eqns):
        fn = impl_for(e.prim, backend)
        impl = bound("f", fn)
        args = [atom(v) for v in e.inputs]
        args += [f"{k}={bound('p', p)}" for k, p in e.params.items()]
        outs = [f"v{v.id}" for v in e.outputs]
        for v, n in zip(e.outputs, outs):
            var_names[v.id] = n
        target = _out_target(e, roots, var_roots, views, offsets, arena, bound, device)
        if target is not None:           # a ufunc takes out= positionally (a little faster)
            args.append(target if isinstance(fn, np.ufunc) and not e.params else f"out={target}")
        lhs = ", ".join(outs) + ("," if e.prim.multiple_results and len(outs) == 1 else "")
        if timed:
            body.append("_t = _clock()")
        body.append(f"{lhs} = {impl}({', '.join(args)})")
        if timed:
            body.append("_times.append(_clock() - _t)")
        # drop values the impl allocated itself once they are dead, so their memory goes back early
        dead = [var_names[v.id] for v in e.inputs if type(v) is Var and last.get(v.id) == i
                and v.id not in outset and var_names[v.id].startswith("v")
                and any(roots[r].kind == "heap" for r in var_roots[v.id])]
        if dead:
            body.append(f"del {', '.join(dict.fromkeys(dead))}")
    body += _outputs(program, roots, var_roots, arena, bound, atom)
    params = ", ".join(f"a{i}" for i in range(len(program.invars)))
    src = [f"def _factory({', '.join(names)}):", f"    def run({params}):"]
    src += [f"        {line}" for line in body]
    src += ["    return run"]
    return "\n".join(src) + "\n", names


def _out_target(e: Eqn, roots, var_roots, views, offsets, arena, bound, device) -> str | None:
    if len(e.outputs) != 1:
        return None
    v = e.outputs[0]
    rs = var_roots[v.id]
    if len(rs) != 1:
        return None
    r = roots[next(iter(rs))]
    if v.id not in r.exact:
        return None
    if r.kind == "arena":
        if r.id not in views:
            off = offsets[r.id]
            if arena is None:                 # only empty buffers were planned
                view = getattr(device, "xp", np).empty(v.aval.shape, v.aval.dtype)
            else:
                view = arena[off:off + v.aval.nbytes].view(v.aval.dtype).reshape(v.aval.shape)
            views[r.id] = bound("b", view)
        return views[r.id]
    if r.kind == "input" and r.donated:
        return f"a{r.index}"
    return None


def _outputs(program: Program, roots, var_roots, arena, bound, atom) -> list[str]:
    """Return statements that copy any output that may share memory with the arena, a non-donated input, a
    constant or an earlier output: exact aliases are copied outright, values an impl made are checked."""
    lines, outs = [], []
    claimed: dict[int, str] = {}       # root id -> name of the earlier output holding it
    msm = bound("_may_share", np.may_share_memory)
    for j, v in enumerate(program.outvars):
        name = f"o{j}"
        outs.append(name)
        if type(v) is Literal:
            lines.append(f"{name} = {atom(v)}")
            continue
        rs = var_roots[v.id]
        risky = []
        for r in sorted(rs):
            root = roots[r]
            if r in claimed:
                risky.append(claimed[r])
            if root.kind == "arena":
                risky.append(bound("A", arena))
            elif root.kind == "input" and not root.donated:
                risky.append(f"a{root.index}")
            elif root.kind == "const":
                risky.append(atom(program.constvars[root.index]))
        exact = any(v.id in roots[r].exact and (roots[r].kind in ("arena", "const") or r in claimed or
                                                (roots[r].kind == "input" and not roots[r].donated)) for r in rs)
        src = atom(v)
        if exact:
            lines.append(f"{name} = {src}.copy()")
        elif risky:
            cond = " or ".join(f"{msm}({src}, {x})" for x in dict.fromkeys(risky))
            lines.append(f"{name} = {src}.copy() if {cond} else {src}")
        else:
            lines.append(f"{name} = {src}")
        for r in rs:
            claimed.setdefault(r, name)
    lines.append(f"return [{', '.join(outs)}]")
    return lines


__all__ = ["Executable", "accepts_out", "writes_out", "impl_for"]
