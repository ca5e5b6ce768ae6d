"""jit on the cupy backend: optimise, fuse elementwise chains, plan one device arena, generate straight-line code,
and replay the planned step as a CUDA graph.

``compile_program`` is what ``flfun.jit`` calls for cupy devices. ``DeviceExecutable`` is written against the
device's array module, so the same code runs (and is tested) on the numpy backend: every intermediate that an
impl can write with ``out=`` lives in the arena (a fused kernel's several outputs too: ``plan`` shows the planner
each of them as its own buffer), literals reach non-ufunc impls as device scalars, and outputs never alias the
arena, the inputs, the constants or each other (unless donated). On a GPU a ``GraphRunner`` replays the step.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from flfun import core
from flfun.array import Array
from flfun.config import config
from flfun.executor import accepts_out, impl_for, writes_out
from flfun.fusion import FusedPrimitive, fuse_elementwise
from flfun.ir import ClosedProgram, Eqn, Literal, Program, Var
from flfun.memory.planner import MemoryPlan, plan_program
from flfun.passes import optimize


class _PlanPrim:
    """What the planner sees of a fused equation: one single-output equation per output (see ``plan``)."""
    multiple_results = False

    def __init__(self, name: str, inplace: tuple = ()):
        self.name, self.inplace = name, inplace


_RESERVE = _PlanPrim("reserve")


def plan(program: Program, backend: str, donated: tuple = (), strategy: str = "auto") -> MemoryPlan:
    """The memory plan of ``program`` on ``backend``. The planner gives arena buffers to single-output equations,
    so a fused equation with outputs ``o1..on`` is shown to it as ``n-1`` reservations (``o1..o(n-1)``, from then on
    live) followed by one equation reading the inputs and ``o1..o(n-1)`` and writing ``on``: every output gets
    its own buffer, none overlapping an input or another output."""
    can = writes_out(backend)
    eqns = []
    for e in program.eqns:
        if isinstance(e.prim, FusedPrimitive):
            *first, last = e.outputs
            eqns += [Eqn(_RESERVE, (), (v,), {}) for v in first]
            eqns.append(Eqn(_PlanPrim(e.prim.name, e.prim.inplace), tuple(e.inputs) + tuple(first), (last,), {}))
        else:
            eqns.append(e)
    pseudo = Program(list(program.constvars), list(program.invars), eqns, list(program.outvars))
    return plan_program(pseudo, lambda e: isinstance(e.prim, _PlanPrim) or can(e), donated, strategy)


def compile_program(closed: ClosedProgram, device, donated: tuple = (), strategy: str = "auto"
                    ) -> DeviceExecutable:
    """The executable of ``closed`` on ``device`` (cached on the program, keyed by the registry version and the
    fusion / planning switches)."""
    key = ("device-exe", device, core.registry_version, config.jit_planned, config.fusion, donated, strategy)
    exe = closed.cache.get(key)
    if exe is None:
        program, consts = optimize(closed.program, closed.consts)
        if config.fusion:
            program = fuse_elementwise(program)
        p = plan(program, device.backend, donated, strategy) if config.jit_planned else None
        exe = closed.cache[key] = DeviceExecutable(program, consts, device, p, donated)
    return exe


class DeviceExecutable:
    """``exe(*raw_inputs) -> list of raw outputs`` for one program on one device (see the module docstring).

    ``plan=None`` runs unplanned (every impl allocates). ``graphs`` is the ``GraphRunner`` on a GPU (``None``
    elsewhere); ``graph_status`` says whether the step is being replayed or why it fell back.
    """

    def __init__(self, program: Program, consts: list, device, plan: MemoryPlan | None = None,
                 donated: tuple = ()):
        self.program, self.device, self.plan, self.donated = program, device, plan, tuple(donated)
        self.xp = device.xp
        self._block = self.arena = None
        if plan is None:
            plan = plan_program(program, lambda e: False, donated)
        elif plan.arena_bytes:
            from flfun.memory import get_allocator
            alloc = get_allocator(device)
            self._block = alloc.malloc(plan.arena_bytes)
            self.arena = self._block.buffer
            weakref.finalize(self, alloc.free, self._block)
        self.source, names = generate(program, plan, device, consts, self.arena)
        scope: dict = {}
        exec(compile(self.source, f"<flfun.jit cupy {id(self):x}>", "exec"), scope)
        self._run = scope["_factory"](*names.values())
        self._consts = consts
        self._lock = threading.Lock()
        self.graphs = None
        if device.platform == "gpu" and self.plan is not None:
            from flfun.backends.cuda.graphs import CupyGraphAPI, GraphRunner
            self.graphs = GraphRunner(self._run, self.donated, CupyGraphAPI(self.xp, device.id),
                                      extra_key=lambda: config.tf32)
        self._ndarray = self.xp.ndarray

    @property
    def graph_status(self) -> str:
        return "no graphs on this device" if self.graphs is None else self.graphs.status

    def __call__(self, *args):
        nd = self._ndarray
        if any(type(a) is not nd for a in args):
            args = [a if type(a) is nd else self.device.put(np.asarray(a)) for a in args]
        if not self._lock.acquire(False):    # re-entered from another thread: run without the arena
            return DeviceExecutable(self.program, self._consts, self.device, None, self.donated)(*args)
        try:
            if self.graphs is not None and config.cuda_graphs:
                return self.graphs(list(args))
            return self._run(*args)
        finally:
            self._lock.release()


# -------------------------------------------------------------------------------------------- code generation
def _raw(c, device):
    if isinstance(c, Array):
        return c._value if c._device is device else device.put(np.asarray(c))
    return device.put(np.asarray(c))


def generate(program: Program, plan: MemoryPlan, device, consts: list, arena):
    """Source of ``_factory(*closure_values) -> run`` and the closure values by name."""
    xp, backend = device.xp, device.backend
    names: dict[str, Any] = {}
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
    views: dict[int, str] = {}
    var_names = {v.id: f"a{i}" for i, v in enumerate(program.invars)}
    for v, c in zip(program.constvars, consts):
        var_names[v.id] = bound("k", _raw(c, device))
    device_literals: dict = {}

    def atom(v, ufunc: bool = True) -> str:
        if type(v) is not Literal:
            return var_names[v.id]
        if ufunc:
            return bound("c", v.val)
        key = (v.val.dtype.str, v.val.tobytes())
        if key not in device_literals:
            device_literals[key] = bound("d", device.put(np.asarray(v.val)))
        return device_literals[key]

    def target(v) -> str | None:
        rs = var_roots.get(v.id, ())
        if len(rs) != 1:
            return None
        r = roots[next(iter(rs))]
        if v.id not in r.exact:
            return None
        if r.kind == "arena":
            if r.id not in views:
                off = offsets[r.id]
                views[r.id] = bound("b", arena[off:off + v.aval.nbytes].view(v.aval.dtype).reshape(v.aval.shape))
            return views[r.id]
        if r.kind == "input" and r.donated:
            return f"a{r.index}"
        return None

    last = {}
    for i, e in enumerate(program.eqns):
        for v in e.inputs:
            if type(v) is Var:
                last[v.id] = i
    outset = {v.id for v in program.outvars if type(v) is Var}
    body = []
    for i, e in enumerate(program.eqns):
        fn = impl_for(e.prim, backend)
        ufunc = type(fn).__name__ == "ufunc"
        args = [atom(v, ufunc) for v in e.inputs] + [f"{k}={bound('p', p)}" for k, p in e.params.items()]
        outs = [f"v{v.id}" for v in e.outputs]
        for v, n in zip(e.outputs, outs):
            var_names[v.id] = n
        if isinstance(e.prim, FusedPrimitive):
            args.append(f"out=({', '.join(target(v) or 'None' for v in e.outputs)},)")
        elif len(e.outputs) == 1 and not e.prim.multiple_results and accepts_out(fn):
            t = target(e.outputs[0])
            if t is not None:
                args.append(f"out={t}")
        lhs = ", ".join(outs) + ("," if e.prim.multiple_results and len(outs) == 1 else "")
        body.append(f"{lhs} = {bound('f', fn)}({', '.join(args)})")
        dead = [var_names[v.id] for v in e.inputs if type(v) is Var and last.get(v.id) == i
                and v.id not in outset and var_names[v.id].startswith("v")
                and any(roots[r].kind == "heap" for r in var_roots[v.id])]
        if dead:
            body.append(f"del {', '.join(dict.fromkeys(dead))}")
    body += _outputs(program, roots, var_roots, arena, bound, atom, xp)
    params = ", ".join(f"a{i}" for i in range(len(program.invars)))
    src = [f"def _factory({', '.join(names)}):", f"    def run({params}):"]
    src += [f"        {line}" for line in body] + ["    return run"]
    return "\n".join(src) + "\n", names


def _outputs(program: Program, roots, var_roots, arena, bound, atom, xp) -> list[str]:
    """Copy every output that may share memory with the arena, a non-donated input, a constant or an earlier
    output: exact aliases are copied outright, values an impl made are checked."""
    lines, outs = [], []
    claimed: dict[int, str] = {}
    msm = bound("_may_share", xp.may_share_memory)
    for j, v in enumerate(program.outvars):
        name = f"o{j}"
        outs.append(name)
        if type(v) is Literal:
            lines.append(f"{name} = {atom(v, False)}.copy()")
            continue
        risky = []
        for r in sorted(var_roots[v.id]):
            root = roots[r]
            if r in claimed:
                risky.append(claimed[r])
            if root.kind == "arena":
                risky.append(bound("A", arena))
            elif root.kind == "input" and not root.donated:
                risky.append(f"a{root.index}")
            elif root.kind == "const":
                risky.append(atom(program.constvars[root.index]))
        rs = var_roots[v.id]
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


__all__ = ["DeviceExecutable", "compile_program", "generate", "plan"]
