"""Build and load the C kernels of fused groups: the host's gcc with OpenMP, one shared library per fused program,
cached in memory and on disk under the hash of its source, the compiler's version and the flags.

The disk cache is ``$FLFUN_CACHE_DIR/cfuse`` (default ``~/.cache/flfun/cfuse``); a library is written to a
temporary name and renamed, so concurrent processes never load a half-written file. ``toolchain()`` is ``None``
where there is no gcc (or ``$CC``) able to build an OpenMP library; jit then keeps numpy's impls.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable

import numpy as np

from flfun.compiler.fusion import FusionGroup

# no -ffast-math: NaN, inf and signed zeros behave as in numpy; no FMA contraction (numpy rounds a*b, then +c);
# -fwrapv: integer overflow wraps as numpy's does; -fno-trapping-math lets selects vectorize (no FP flags are
# read); -march=native: the host's vector width (the disk cache is keyed by the host's CPU too)
FLAGS = ("-O3", "-march=native", "-std=gnu11", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno",
         "-fno-trapping-math", "-ffp-contract=off", "-fwrapv")
# OpenMP threads per kernel. One: BLAS keeps the process's thread pool (FLFUN_NUM_THREADS), and a second pool
# beside it lost on the 2-core host: OpenBLAS's idle workers spin for ~2^28 cycles after every GEMM, so W6 took
# 198 ms with 2-thread kernels and 109 ms with 1; with that spin cut (OPENBLAS_THREAD_TIMEOUT=4) 2 threads were
# still no faster (115 vs 100-121 ms): the kernels are bound by memory, not by a core.
KERNEL_THREADS = 1
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()


@functools.cache
def toolchain() -> tuple[str, str] | None:
    """``(compiler path, version)`` of the C compiler that builds the kernels, or ``None`` if there is none."""
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        return None
    try:
        version = subprocess.run([cc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (cc, version) if version else None


def cache_dir() -> str:
    root = os.environ.get("FLFUN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "flfun")
    return os.path.join(root, "cfuse")


def library(source: str) -> ctypes.CDLL:
    """The loaded shared library of C ``source``: from memory, from the disk cache, or compiled now.

    Example::

        lib = library(PRELUDE + "void k0(int nt) {}")
        lib.k0(1)
    """
    cc, version = toolchain() or (None, None)
    if cc is None:
        raise RuntimeError("cfuse: no C compiler (gcc, or $CC) to build fused kernels")
    key = hashlib.sha256("\0".join((source, cc, version, _host_cpu(), *FLAGS)).encode()).hexdigest()[:32]
    with _lock:
        if key not in _loaded:
            _loaded[key] = ctypes.CDLL(_compiled(source, key, cc))
        return _loaded[key]


@functools.cache
def _host_cpu() -> str:
    """What ``-march=native`` compiles for: the compiler's predefined macros under it (its view of the CPU)."""
    cc, _ = toolchain() or ("", "")
    try:
        return subprocess.run([cc, "-march=native", "-E", "-dM", "-x", "c", os.devnull], capture_output=True,
                              text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _compiled(source: str, key: str, cc: str) -> str:
    """The path of ``source``'s library in the disk cache, compiling it first if it is not there."""
    os.environ.setdefault("GOMP_SPINCOUNT", "20000")   # idle OpenMP threads soon stop spinning (BLAS runs next)
    d = cache_dir()
    path = os.path.join(d, key + ".so")
    if os.path.exists(path):
        return path
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        src = os.path.join(tmp, "k.c")
        with open(src, "w") as f:
            f.write(source)
        done = subprocess.run([cc, *FLAGS, "-o", os.path.join(tmp, "k.so"), src, "-lm"], capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"cfuse: {cc} failed to build fused kernels:\n{done.stderr[-2000:]}")
        os.replace(os.path.join(tmp, "k.so"), path)
    return path


def kernel_impl(fn, group: FusionGroup) -> Callable:
    """The impl of ``group``'s fused equation calling C function ``fn``: ``impl(*inputs, out=None | buffer |
    tuple of buffers or None) -> list of outputs`` (missing or non-contiguous output buffers are replaced by new
    ones, copied back into the given buffer after the call)."""
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * (len(group.inputs) + len(group.outputs)) + [ctypes.c_int]
    in_dtypes = [v.aval.dtype for v in group.inputs]
    out_avals = [(v.aval.shape, v.aval.dtype) for v in group.outputs]
    empty = any(0 in v.aval.shape for v in group.outputs) or any(0 in v.aval.shape for v in group.inputs)
    ndarray, contiguous = np.ndarray, np.ascontiguousarray

    def impl(*ins, out=None):
        outs = out if type(out) is tuple else (out,) * len(out_avals) if out is None else (out,)
        bufs = [o if type(o) is ndarray and o.flags.c_contiguous else np.empty(s, d)
                for o, (s, d) in zip(outs, out_avals)]
        if not empty:
            ins = [x if type(x) is ndarray and x.flags.c_contiguous and x.dtype == d else contiguous(x, d)
                   for x, d in zip(ins, in_dtypes)]
            fn(*[x.ctypes.data for x in ins], *[b.ctypes.data for b in bufs], KERNEL_THREADS)
        for o, b in zip(outs, bufs):
            if o is not None and o is not b:
                o[...] = b
        return [b if o is None or o is b else o for o, b in zip(outs, bufs)]
    return impl


__all__ = ["FLAGS", "KERNEL_THREADS", "cache_dir", "kernel_impl", "library", "toolchain"]
