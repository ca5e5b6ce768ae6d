"""The one compile pipeline of jit, pmap and the backends: optimise, plan memory, build the executable.

``compile_program(closed, device, donated, strategy)`` returns the executable of a closed program on a device,
cached on the program under ``compile_key(...)``: everything besides the program that the executable depends on.
A backend with its own code generator (cupy: fusion, device arenas, CUDA graphs) registers it with
``register_backend_compiler``; every other backend gets the planned executor (``flfun.compiler.executor``).
"""
from __future__ import annotations

from typing import Callable

from flfun import core
from flfun.compiler.bodies import optimize_loops
from flfun.compiler.executor import Executable, writes_out
from flfun.compiler.liveness import plan_program
from flfun.compiler.passes import optimize
from flfun.config import config
from flfun.ir import ClosedProgram, Program
from flfun.memory import get_allocator
from flfun.memory.planner import MemoryPlan
from flfun.util import once

DEFAULT_STRATEGY = "auto"
_COMPILERS: dict[str, Callable] = {}      # backend -> fn(closed, device, donated, strategy) -> executable
_compilers_version = 0


def register_backend_compiler(backend: str, fn: Callable | None) -> Callable | None:
    """Make ``fn(closed, device, donated, strategy) -> executable`` compile programs for ``backend``'s devices
    (``None`` restores the planned executor); returns the previous one. Executables are cached by
    ``compile_program``, so ``fn`` need not cache.

    Example::

        register_backend_compiler("cupy", flfun.backends.cuda.executor.compile_program)
    """
    if not isinstance(backend, str) or not backend:
        raise ValueError(f"register_backend_compiler: backend must be a non-empty str, got {backend!r}")
    if fn is not None and not callable(fn):
        raise ValueError(f"register_backend_compiler: fn must be callable or None, got {fn!r:.60}")
    global _compilers_version
    old = _COMPILERS.pop(backend, None)
    if fn is not None:
        _COMPILERS[backend] = fn
    _compilers_version += 1
    return old


def backend_compiler(backend: str) -> Callable | None:
    """The compiler registered for ``backend`` (``None``: the planned executor)."""
    return _COMPILERS.get(backend)


def compile_key(device, donated: tuple = (), strategy: str | None = None) -> tuple:
    """What an executable of a program depends on besides the program: the device, the planner strategy, the
    device's allocator (the arena comes from it), the donated inputs and ``global_version()``.

    Example::

        with flfun.memory.use_allocator(CachingAllocator()):
            assert compile_key(dev) != key_before      # so jit compiles again, with an arena from it
    """
    return (device, strategy or DEFAULT_STRATEGY, get_allocator(device), tuple(donated)) + global_version()


def global_version() -> tuple:
    """The part of ``compile_key`` shared by all devices: the primitive registry version (impls, lowerings), the
    backend compilers' version and the switches that change generated code (``jit_planned``, ``fusion``,
    ``cpu_fusion``). jit's per-call fast path compares it (and the allocator) before reusing an executable.

    Example::

        v = global_version(); flfun.config.jit_planned = False; assert global_version() != v
    """
    return (core.registry_version, _compilers_version, config.jit_planned, config.fusion,
            config.cpu_fusion)


def compile_program(closed: ClosedProgram, device=None, donated: tuple = (), strategy: str | None = None):
    """The executable for ``closed`` on ``device`` (default: the default device), cached on the program under
    ``compile_key``; ``exe(*raw_inputs) -> list of raw outputs``.

    Example::

        exe = compile_program(closed, strategy="best_fit")
        print(exe.plan, exe.source)
    """
    device = device or core.default_device()
    strategy = strategy or DEFAULT_STRATEGY
    key = compile_key(device, donated, strategy)
    compiler = _COMPILERS.get(device.backend, _compile_planned)
    return once(closed.cache, key, lambda: compiler(closed, device, tuple(donated), strategy))


def optimized(closed: ClosedProgram) -> tuple[Program, list]:
    """``closed`` after the standard passes and the loop rewrites (cached on it with the registry version, which
    folding depends on)."""
    key = ("optimized", core.registry_version)
    return once(closed.cache, key, lambda: optimize_loops(*optimize(closed.program, closed.consts)))


def plan_for(closed: ClosedProgram, backend: str, donated: tuple = (), strategy: str | None = None
             ) -> MemoryPlan | None:
    """The memory plan of ``optimized(closed)`` on ``backend`` (``None`` when ``config.jit_planned`` is off),
    shared by the executables of all devices of the backend."""
    if not config.jit_planned:
        return None
    strategy = strategy or DEFAULT_STRATEGY
    key = ("plan", backend, core.registry_version, strategy, tuple(donated))
    return once(closed.cache, key, lambda: plan_program(optimized(closed)[0], writes_out(backend, True), donated, strategy))


def _compile_planned(closed: ClosedProgram, device, donated: tuple, strategy: str) -> Executable:
    program, consts = optimized(closed)
    return Executable(program, consts, device, plan_for(closed, device.backend, donated, strategy), donated)


__all__ = ["DEFAULT_STRATEGY", "backend_compiler", "compile_key", "compile_program", "global_version", "optimized",
           "plan_for", "register_backend_compiler"]
