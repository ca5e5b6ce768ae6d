"""jit on the cupy backend: optimise, fuse elementwise chains, plan one device arena, generate straight-line code,
and replay the planned step as a CUDA graph.

``compile_program`` is what the compile pipeline (``flfun.compiler.pipeline``) calls for cupy devices.
``DeviceExecutable`` is written against the device's array module, so the same code runs (and is tested) on the
numpy backend: every intermediate that an impl can write with ``out=`` lives in the arena (a fused kernel's
several outputs too: ``plan`` shows the planner each of them as its own buffer), literals reach non-ufunc impls
as device scalars, and outputs never alias the arena, the inputs, the constants or each other (unless donated).
On a GPU a ``GraphRunner`` replays the step.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from flfun.backends.cuda import lowering
from flfun.compiler.executor import CodeGen, load, setup_arena, timed_runs, writes_out
from flfun.compiler.fusion import FusedPrimitive, fuse_elementwise
from flfun.compiler.liveness import plan_program
from flfun.compiler.pipeline import optimized
from flfun.config import config
from flfun.ir import ClosedProgram, Eqn, Literal, Program
from flfun.memory.planner import MemoryPlan


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
    """The executable of ``closed`` on ``device``: the optimised program, its elementwise chains fused into CUDA
    kernels (``config.fusion``), planned and run from one device arena. ``flfun.compiler.pipeline`` caches it.

    Example::

        exe = compile_program(closed, flfun.devices("gpu")[0])
    """
    program, consts = optimized(closed)
    if config.fusion:
        program = fuse_elementwise(program, target=lowering.TARGET)
    p = plan(program, device.backend, donated, strategy) if config.jit_planned else None
    return DeviceExecutable(program, consts, device, p, donated)


class DeviceExecutable:
    """``exe(*raw_inputs) -> list of raw outputs`` for one program on one device (see the module docstring).

    ``plan=None`` runs unplanned (every impl allocates). ``graphs`` is the ``GraphRunner`` on a GPU (``None``
    elsewhere); ``graph_status`` says whether the step is being replayed or why it fell back.
    """

    def __init__(self, program: Program, consts: list, device, plan: MemoryPlan | None = None,
                 donated: tuple = ()):
        self.program, self.device, self.plan, self.donated = program, device, plan, tuple(donated)
        self.xp = device.xp
        self._plan, self._block, self.arena = setup_arena(self, program, device, plan, donated)
        self.source, names = generate(program, self._plan, device, consts, self.arena)
        self._run = load(self.source, names, f"<flfun.jit cupy {id(self):x}>")
        self._consts = consts
        self._lock = threading.Lock()
        self.graphs = None
        if device.platform == "gpu" and self.plan is not None:
            from flfun.backends.cuda.graphs import CupyGraphAPI, GraphRunner
            self.graphs = GraphRunner(self._run, self.donated, CupyGraphAPI(self.xp, device.id),
                                      extra_key=lambda: config.tf32)
        self._ndarray = self.xp.ndarray

    def profile(self, *args, repeat: int = 5, clock=time.perf_counter) -> list[tuple[int, str, float]]:
        """``(equation index, primitive, median seconds)`` of every equation over ``repeat`` runs of this
        executable's own code with a ``clock()`` call around each equation (fused kernels write into the arena
        as in a plain run; on a GPU the clock sees launches, not kernel time, unless it synchronizes)."""
        source, names = generate(self.program, self._plan, self.device, self._consts, self.arena, timed=clock)
        return timed_runs(self, load(source, names, "<flfun.jit profile>"), names["_times"], args, repeat)

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
def generate(program: Program, plan: MemoryPlan, device, consts: list, arena, timed=None):
    """Source of ``_factory(*closure_values) -> run`` and the closure values by name. Unlike the CPU executor's,
    literals reach non-ufunc impls as device scalars and a fused equation writes all its outputs with
    ``out=(...)``. With a clock ``timed``, ``run`` appends each equation's time to the closure value ``_times``."""
    g = CodeGen(program, plan, consts, device, arena, {"_clock": timed, "_times": []} if timed else None)
    device_literals: dict = {}

    def device_literal(v: Literal) -> str:
        if v.key not in device_literals:
            device_literals[v.key] = g.bound("d", device.put(np.asarray(v.val)))
        return device_literals[v.key]

    def out_args(e: Eqn, fn) -> list[str]:
        if isinstance(e.prim, FusedPrimitive):
            return [f"out=({', '.join(g.target(v) or 'None' for v in e.outputs)},)"]
        if len(e.outputs) == 1 and not e.prim.multiple_results and device.backend in e.prim.writes_out:
            t = g.target(e.outputs[0])
            return [] if t is None else [f"out={t}"]
        return []
    body = g.equations(device.backend, out_args, device_literal, timed=bool(timed))
    body += g.outputs(device.xp.may_share_memory, lambda v: f"{device_literal(v)}.copy()")
    return g.source(body), g.names


__all__ = ["DeviceExecutable", "compile_program", "generate", "plan"]
