"""jit on the CPU with fused C kernels: the optimised program's elementwise chains (with their broadcasts and
reduction epilogues: softmax and layer-norm rows, bias gradients, the optimizer's update) are grouped by
``flfun.compiler.fusion``, compiled into one shared library of vectorized OpenMP loops (``codegen``, ``build``)
and run over the planned arena (``flfun.backends.cuda.executor``'s executable, which writes every output of a
fused equation with ``out=``). GEMMs, convolutions and the rest keep their numpy impls.

Why C through gcc and ctypes: gcc is on every Linux host, OpenMP ships with it, the kernels are the C the CUDA
path already generates and tests, and nothing joins the runtime dependencies (numba would be a 40 MB
dependency with its own LLVM and a slower first compile).

It is the numpy backend's compiler (``register_backend_compiler``) when ``config.cpu_fusion`` is on (the
default; ``FLFUN_CPU_FUSION=0`` turns it off) and a C compiler is found; otherwise jit runs the numpy impls. An
equation whose impl was replaced (``register_impl``) is left out of fusion, so the replacement is what runs.
BLAS owns the process's threads (``FLFUN_NUM_THREADS``); kernels run on the calling thread
(``build.KERNEL_THREADS``), one after the other with the GEMMs, so the two never compete for the cores.
"""
from __future__ import annotations

import functools
import os
import warnings

import numpy as np

from flfun.backends.cfuse.build import kernel_impl, library, toolchain
from flfun.backends.cfuse.codegen import library_source
from flfun.backends.cuda import executor as device_executor
from flfun.backends.cuda import lowering
from flfun.compiler.executor import Executable
from flfun.compiler.fusion import FusedPrimitive, fuse_elementwise, fusible
from flfun.compiler.pipeline import optimized, plan_for, register_backend_compiler
from flfun.config import config
from flfun.distributed import threads
from flfun.ir import ClosedProgram, Eqn, Program


class CpuExecutable(device_executor.DeviceExecutable):
    """The executable of a fused program on a CPU device."""
    backend = "numpy"


MIN_WORK = 1 << 20      # element-operations below which a program keeps numpy's impls (W3: 5.3M, W6: 93M)
# elements below which an equation keeps numpy's impl: a kernel call costs ~10 us, so a 5-op chain of 4K
# elements ran 11.0 us as a kernel against 8.4 us in numpy, and 14.7 against 18.3 us at 16K
MIN_ELEMENTS = 1 << 14


def compile_program(closed: ClosedProgram, device, donated: tuple = (), strategy: str = "auto"):
    """The executable of ``closed`` on CPU ``device``: fused kernels where the program has groups doing at
    least ``MIN_WORK`` element-operations (and ``config.cpu_fusion`` is on and a compiler is found), else the
    planned numpy executor.

    Example::

        exe = compile_program(closed, flfun.devices("cpu")[0])
        print(exe.source)         # calls of flfun_fused_* kernels between the numpy GEMMs
    """
    program, consts = optimized(closed)
    fused = fuse_elementwise(program, _worth_a_kernel, target=lowering.TARGET) if enabled() else program
    if fused is program or not attach_kernels(fused, MIN_WORK):
        return Executable(program, consts, device, plan_for(closed, device.backend, donated, strategy), donated)
    plan = device_executor.plan(fused, device.backend, donated, strategy) if config.jit_planned else None
    return CpuExecutable(fused, consts, device, plan, donated)


def attach_kernels(fused: Program, min_work: int = 0) -> bool:
    """Give every fused equation of ``fused`` its C kernel as its numpy impl (one library for all of them);
    ``False`` (nothing attached) when the groups do less than ``min_work`` element-operations or the kernels
    cannot be built (with a warning).

    Example::

        fused = fuse_elementwise(program, can_fuse, min_size=1, target="cuda")
        attach_kernels(fused)     # fused's equations now run C kernels
    """
    prims = [e.prim for e in fused.eqns if isinstance(e.prim, FusedPrimitive)]
    if sum(int(np.prod(p.group.shape)) * len(p.group.eqns) for p in prims) < max(min_work, 1):
        return False
    try:
        lib = library(library_source([p.group for p in prims]))
    except (RuntimeError, OSError) as e:    # OSError: an unwritable cache folder, a noexec mount, ...
        warnings.warn(f"cfuse: {e}\njit runs numpy's impls instead", RuntimeWarning, stacklevel=3)
        return False
    for i, p in enumerate(prims):
        p.impls["numpy"] = kernel_impl(getattr(lib, f"k{i}"), p.group)
    return True


def enabled() -> bool:
    """Whether jit on the CPU fuses: ``config.cpu_fusion`` is on and a C compiler is found."""
    return config.cpu_fusion and toolchain() is not None


# transcendentals: numpy's loops beat scalar libm calls, which gcc cannot vectorize without -ffast-math (1M
# float32 on one core: log 0.44 ms in numpy vs 3.1 ms through logf). float32 exp and tanh (and logistic, made
# of exp) are the exception: the prelude's own vectorizable code (0.76 and 1.42 ms against numpy's 1.57 and
# 2.82 ms on an AVX2 host), which also lets GELU, softmax and sigmoid chains fuse whole.
NUMPY_FASTER = frozenset({"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "asin", "acos", "atan",
                          "sinh", "cosh", "erf", "logistic", "pow", "atan2"})
OWN_FLOAT32 = frozenset({"exp", "tanh", "logistic"})


def can_fuse(e: Eqn, exclude: frozenset | None = None) -> bool:
    """Whether ``e`` may join a fused CPU kernel: it has a C lowering, its numpy impl is the stock one and its
    primitive is not in ``exclude`` (default: ``NUMPY_FASTER``, less ``OWN_FLOAT32`` where ``e`` is float32)."""
    name = e.prim.name
    if exclude is None:
        float32 = all(v.aval.dtype == np.float32 for v in e.outputs)
        exclude = NUMPY_FASTER - OWN_FLOAT32 if float32 else NUMPY_FASTER
    return name not in exclude and fusible(e, lowering.TARGET) and _is_stock(name, e.prim.impls.get("numpy"))


def _worth_a_kernel(e: Eqn) -> bool:
    """``can_fuse(e)`` and ``e`` touches an operand of at least ``MIN_ELEMENTS`` elements."""
    big = max((int(np.prod(v.aval.shape)) for v in (*e.inputs, *e.outputs) if hasattr(v, "aval")), default=0)
    return big >= MIN_ELEMENTS and can_fuse(e)


@functools.cache
def _stock_impls() -> dict:
    from flfun.backends.xp import FAMILIES, WritesOut
    table: dict = {}
    for family in FAMILIES:
        for name, fn in family.impls(np).items():
            table.setdefault(name, fn.fn if type(fn) is WritesOut else fn)
    return table


def _is_stock(name: str, fn) -> bool:
    """Whether ``fn`` is the impl the numpy backend installs for ``name`` (a fresh ``functools.partial`` of the
    same function and arguments counts as the same)."""
    stock = _stock_impls().get(name)
    if fn is stock:
        return True
    same = lambda a, b: a is b or (type(a) is type(b) and a == b)
    return type(fn) is functools.partial and type(stock) is functools.partial and fn.func is stock.func and \
        len(fn.args) == len(stock.args) and all(map(same, fn.args, stock.args)) and fn.keywords == stock.keywords


def install() -> None:
    """Make the fused CPU path the numpy backend's jit compiler (the numpy backend calls this when it installs)."""
    register_backend_compiler("numpy", compile_program)
    set_threads_from_env()


def set_threads_from_env() -> None:
    """Give kernels and BLAS ``FLFUN_NUM_THREADS`` threads when it is set (otherwise the count stays what the
    program chose, e.g. ``models.train --cpu-threads``)."""
    if not {"FLFUN_NUM_THREADS", "FLFUN_CPU_THREADS"} & set(os.environ):
        return
    n = threads.default_cpu_threads(threads.local_processes())
    if n != threads.count:
        threads.set_cpu_threads(n)


__all__ = ["MIN_ELEMENTS", "MIN_WORK", "NUMPY_FASTER", "OWN_FLOAT32", "CpuExecutable", "attach_kernels", "can_fuse",
           "compile_program", "enabled", "install", "set_threads_from_env"]
