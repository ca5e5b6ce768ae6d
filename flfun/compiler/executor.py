"""Run a planned program fast: generated straight-line Python over arena views.

``Executable`` turns a ``Program`` and its ``MemoryPlan`` into one Python function whose body calls each
equation's impl in order, with ``out=`` set to the value's arena view when the impl accepts one. Impls,
parameters, literals and views are bound as closure variables, so a call does no dictionary lookups, tracing or
shape logic. Program outputs never alias the arena, the inputs, the constants or each other (unless donated).
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable

import numpy as np

from flfun.array import Array
from flfun.compiler.liveness import plan_program
from flfun.core import Primitive, missing_rule
from flfun.ir import Eqn, Literal, Program, Var
from flfun.memory.planner import MemoryPlan

def impl_for(prim: Primitive, backend: str) -> Callable:
    impl = prim.impls.get(backend)
    if impl is None:
        raise missing_rule("impl", prim, backend)
    return impl


PLANNED = "planned"    # the lowering target of primitives the planned executor compiles itself (loops, branches)


def writes_out(backend: str, lowered: bool = False) -> Callable[[Eqn], bool]:
    """The planner's ``can_write_out`` for ``backend``: the impl was registered as writing ``out=`` (see
    ``register_impl``) and has one result, or (``lowered``) the primitive has a ``"planned"`` lowering, whose
    runner writes all its results into ``out=(...)``."""
    return lambda e: (not e.prim.multiple_results and backend in e.prim.writes_out
                      or lowered and PLANNED in e.prim.lowerings)


def runner_for(e: Eqn, backend: str, device) -> Callable:
    """What the generated code calls for ``e``: the runner its primitive's ``"planned"`` lowering builds
    (``rule(eqn, backend, device)``, e.g. a scan whose body is compiled once), else the registered impl."""
    rule = e.prim.lowerings.get(PLANNED)
    return impl_for(e.prim, backend) if rule is None else rule(e, backend, device)


def _raw(c, device):
    if isinstance(c, Array) and (c._device is device or device is None):
        return c._value
    return np.asarray(c) if device is None else device.put(np.asarray(c))


def setup_arena(owner, program: Program, device, plan: MemoryPlan | None, donated: tuple = ()):
    """``(plan to generate from, arena block, arena buffer)`` for ``owner``: with ``plan=None`` an unplanned plan
    (every impl allocates) and no arena; otherwise one arena of ``plan.arena_bytes`` from the device's allocator,
    freed when ``owner`` is collected. ``owner.allocator`` is set to that allocator (``None`` without an arena)."""
    owner.allocator = None
    if plan is None:
        return plan_program(program, lambda e: False, donated), None, None
    if not plan.arena_bytes:
        return plan, None, None
    from flfun.memory import get_allocator
    alloc = owner.allocator = get_allocator(device)
    block = alloc.malloc(plan.arena_bytes)
    weakref.finalize(owner, alloc.free, block)
    return plan, block, block.buffer


def load(source: str, names: dict, filename: str) -> Callable:
    """The ``run`` function of generated ``source``, its closure bound to ``names``' values."""
    scope: dict = {}
    exec(compile(source, filename, "exec"), scope)
    return scope["_factory"](*names.values())


class Executable:
    """A compiled program: ``exe(*raw_inputs) -> list of raw outputs`` (numpy/cupy buffers).

    ``plan=None`` runs unplanned: every impl allocates its own result (the ``FLFUN_JIT_PLANNED=0`` mode).
    ``arena`` is the arena's bytes (a uint8 array) for tests and tools; ``source`` the generated code.
    """

    def __init__(self, program: Program, consts: list, device, plan: MemoryPlan | None = None,
                 donated: tuple = ()):
        self.program, self.device, self.plan, self.donated = program, device, plan, tuple(donated)
        self.backend = device.backend if device is not None else "numpy"
        plan, self._block, self.arena = setup_arena(self, program, device, plan, donated)
        self.source, names = _generate(program, plan, self.backend, consts, device, self.arena)
        self._run = load(self.source, names, f"<flfun.jit {id(self):x}>")
        self._lock = threading.Lock()
        self._fallback: Executable | None = None
        self._consts = consts

    def profile(self, *args, repeat: int = 5, clock: Callable = time.perf_counter) -> list[tuple[int, str, float]]:
        """``(equation index, primitive, median seconds)`` for every equation, from ``repeat`` instrumented runs
        of the same generated code (one ``clock()`` call around each equation; ``time.process_time`` is steadier
        on a busy machine)."""
        source, names = _generate(self.program, self.plan or plan_program(self.program, lambda e: False),
                                  self.backend, self._consts, self.device, self.arena, timed=clock)
        return timed_runs(self, load(source, names, "<flfun.jit profile>"), names["_times"], args, repeat)

    def __call__(self, *args):
        if self._lock.acquire(False):
            try:
                return self._run(*args)
            finally:
                self._lock.release()
        if self._fallback is None:     # re-entered from another thread: the arena is in use
            self._fallback = Executable(self.program, self._consts, self.device, None, self.donated)
        return self._fallback(*args)


def timed_runs(exe, run, times: list, args, repeat: int) -> list[tuple[int, str, float]]:
    """``(equation index, primitive, median seconds)`` from ``repeat`` calls of ``run``, the timed code of
    executable ``exe`` (it appends one time per equation to ``times``)."""
    runs = []
    for _ in range(repeat):
        times.clear()
        with exe._lock:
            run(*args)
        runs.append(list(times))
    med = np.median(np.asarray(runs), axis=0)
    return [(i, e.prim.name, float(t)) for i, (e, t) in enumerate(zip(exe.program.eqns, med))]


class CodeGen:
    """The state one code generation shares between the CPU and device executors: the closure values by name
    (``bound``), the Python name of every value (``atom``), arena views (``target``), last uses (``dead``), the
    output copies (``outputs``) and the final ``_factory`` source (``source``)."""

    def __init__(self, program: Program, plan: MemoryPlan, consts: list, device, arena, names: dict | None = None):
        self.program, self.device, self.arena = program, device, arena
        self.names: dict[str, Any] = {} if names is None else names
        self._by_id: dict[int, str] = {}
        self.roots, self.var_roots = plan.roots, plan.var_roots
        self.offsets = {b.id: b.offset for b in plan.buffers}
        self.views: dict[int, str] = {}        # arena root id -> name of its view
        self.var_names = {v.id: f"a{i}" for i, v in enumerate(program.invars)}
        for v, c in zip(program.constvars, consts):
            self.var_names[v.id] = self.bound("k", _raw(c, device))
        self.last = {v.id: i for i, e in enumerate(program.eqns) for v in e.inputs if type(v) is Var}
        self.outset = {v.id for v in program.outvars if type(v) is Var}

    def impl(self, e: Eqn, backend: str) -> Callable:
        return impl_for(e.prim, backend)

    def bound(self, prefix: str, value) -> str:
        """The closure variable holding ``value`` (one per object: ``names`` keeps it alive, so its id is unique)."""
        name = self._by_id.get(id(value))
        if name is None:
            name = self._by_id[id(value)] = f"{prefix}{len(self.names)}"
            self.names[name] = value
        return name

    def atom(self, v) -> str:
        return self.bound("c", v.val) if type(v) is Literal else self.var_names[v.id]

    def lhs(self, e: Eqn) -> str:
        """Names ``e``'s outputs and returns the left-hand side of its assignment."""
        self.var_names.update((v.id, f"v{v.id}") for v in e.outputs)
        trailing = "," if e.prim.multiple_results and len(e.outputs) == 1 else ""     # a one-element tuple
        return ", ".join(f"v{v.id}" for v in e.outputs) + trailing

    def target(self, v) -> str | None:
        """The buffer the planner gave ``v`` to be written with ``out=`` (an arena view or a donated input)."""
        rs = self.var_roots.get(v.id, ())
        if len(rs) != 1 or v.id not in (r := self.roots[next(iter(rs))]).exact:
            return None
        if r.kind == "arena":
            if r.id not in self.views:
                off = self.offsets[r.id]
                if self.arena is None:                 # only empty buffers were planned
                    view = getattr(self.device, "xp", np).empty(v.aval.shape, v.aval.dtype)
                else:
                    view = self.arena[off:off + v.aval.nbytes].view(v.aval.dtype).reshape(v.aval.shape)
                self.views[r.id] = self.bound("b", view)
            return self.views[r.id]
        if r.kind == "input" and r.donated:
            return f"a{r.index}"
        return None

    def dead(self, e: Eqn, i: int) -> list[str]:
        """A ``del`` of the values equation ``i`` read last that an impl allocated itself, so their memory goes
        back early."""
        roots, var_roots, names = self.roots, self.var_roots, self.var_names
        dead = [names[v.id] for v in e.inputs if type(v) is Var and self.last.get(v.id) == i
                and v.id not in self.outset and names[v.id].startswith("v")
                and any(roots[r].kind == "heap" for r in var_roots[v.id])]
        return [f"del {', '.join(dict.fromkeys(dead))}"] if dead else []

    def outputs(self, may_share: Callable = np.may_share_memory, literal: Callable | None = None) -> list[str]:
        """Return statements that copy any output that may share memory with the arena, a non-donated input, a
        constant or an earlier output: exact aliases are copied outright, values an impl made are checked.
        ``literal(v)`` is the expression returned for a literal output (default: the literal itself)."""
        roots, var_roots, atom = self.roots, self.var_roots, self.atom
        lines, outs = [], []
        claimed: dict[int, str] = {}       # root id -> name of the earlier output holding it
        msm = self.bound("_may_share", may_share)
        for j, v in enumerate(self.program.outvars):
            name = f"o{j}"
            outs.append(name)
            if type(v) is Literal:
                lines.append(f"{name} = {atom(v) if literal is None else literal(v)}")
                continue
            rs, risky, exact = var_roots[v.id], [], False
            for r in sorted(rs):        # the buffers v may share: an earlier output's, the arena, an input, a const
                root = roots[r]
                shared = [claimed[r]] if r in claimed else []
                if root.kind == "arena":
                    shared.append(self.bound("A", self.arena))
                elif root.kind == "input" and not root.donated:
                    shared.append(f"a{root.index}")
                elif root.kind == "const":
                    shared.append(atom(self.program.constvars[root.index]))
                risky += shared
                exact = exact or bool(shared) and v.id in root.exact
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

    def equations(self, backend: str, out_args: Callable, literal: Callable | None = None, timed: bool = False
                  ) -> list[str]:
        """One ``outputs = impl(inputs, params, out)`` statement per equation, each followed by its ``del``:
        ``out_args(e, impl)`` is the list of trailing ``out`` arguments (empty or one), ``literal(v)`` a literal
        input of an impl that is not a ufunc (default: the literal itself); ``timed`` appends each call's time
        to ``_times``."""
        body = []
        for i, e in enumerate(self.program.eqns):
            fn = self.impl(e, backend)
            impl = self.bound("f", fn)
            as_is = literal is None or type(fn).__name__ == "ufunc"
            args = [self.atom(v) if as_is or type(v) is not Literal else literal(v) for v in e.inputs]
            args += [f"{k}={self.bound('p', p)}" for k, p in e.params.items()]
            call = f"{self.lhs(e)} = {impl}({', '.join(args + out_args(e, fn))})"
            body += ["_t = _clock()", call, "_times.append(_clock() - _t)"] if timed else [call]
            body += self.dead(e, i)
        return body

    def source(self, body: list[str], extra: tuple = ()) -> str:
        """Source of ``_factory(*closure_values) -> run`` with ``body`` as ``run``'s body (``extra``: parameters
        after the inputs)."""
        params = ", ".join([f"a{i}" for i in range(len(self.program.invars))] + list(extra))
        src = [f"def _factory({', '.join(self.names)}):", f"    def run({params}):"]
        src += [f"        {line}" for line in body] + ["    return run"]
        return "\n".join(src) + "\n"


class HostGen(CodeGen):
    """The CPU executor's code generation: loops and branches run by their ``"planned"`` lowering's runner."""

    def impl(self, e: Eqn, backend: str) -> Callable:
        return runner_for(e, backend, self.device)

    def out_args(self, e: Eqn, fn) -> list[str]:
        """``out=`` for ``e``'s planned buffer (positional for a bare ufunc: faster), ``out=(...)`` for a runner."""
        if len(e.outputs) != 1 or e.prim.multiple_results:
            targets = [self.target(v) for v in e.outputs] if PLANNED in e.prim.lowerings else []
            return [f"out=({', '.join(t or 'None' for t in targets)},)"] if any(targets) else []
        target = self.target(e.outputs[0])
        if target is None:
            return []
        return [target if isinstance(fn, np.ufunc) and not e.params else f"out={target}"]


def _generate(program: Program, plan: MemoryPlan, backend: str, consts: list, device, arena, timed=None):
    """Source of ``_factory(*closure_values) -> run`` and the closure values by name (with ``timed``, ``run``
    also appends each equation's wall time to the list ``_times``)."""
    g = HostGen(program, plan, consts, device, arena, {"_clock": timed, "_times": []} if timed else None)
    return g.source(g.equations(backend, g.out_args, timed=bool(timed)) + g.outputs()), g.names


__all__ = ["CodeGen", "Executable", "HostGen", "PLANNED", "impl_for", "load", "runner_for", "setup_arena", "writes_out"]
