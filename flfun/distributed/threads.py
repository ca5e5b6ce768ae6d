"""How many CPU threads this process uses: BLAS gets them (threadpoolctl, or OpenBLAS's own API) and pmap's CPU
devices split them. ``flfun.distributed.initialize`` gives each rank its share of its host's cores, so ranks on
one machine do not fight over the cores.
"""
from __future__ import annotations

import functools
import os
from contextlib import contextmanager


@functools.cache
def blas_libraries() -> list:
    """The BLAS libraries loaded in this process, each with ``num_threads`` and ``set_num_threads(n)``:
    threadpoolctl's controllers, or without threadpoolctl the OpenBLAS builds found in the process's memory map."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        ThreadpoolController = None
    try:
        if ThreadpoolController is not None:
            return [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1].lower()})
        return [lib for lib in map(_OpenBLAS.load, paths) if lib is not None]
    except Exception:        # threadpoolctl cannot inspect, or no /proc (not Linux): leave BLAS alone
        return []


class _OpenBLAS:
    """An OpenBLAS shared library's thread count through its C API (the prefix differs between builds)."""
    PREFIXES = ("scipy_openblas", "openblas")
    SUFFIXES = ("64_", "")

    def __init__(self, get, set_):
        self._get, self._set = get, set_

    @classmethod
    def load(cls, path: str):
        import ctypes
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            return None
        for p in cls.PREFIXES:
            for s in cls.SUFFIXES:
                get, set_ = (getattr(lib, f"{p}_{k}_num_threads{s}", None) for k in ("get", "set"))
                if get is not None and set_ is not None:
                    get.restype, set_.argtypes = ctypes.c_int, [ctypes.c_int]
                    return cls(get, set_)
        return None

    @property
    def num_threads(self) -> int:
        return int(self._get())

    def set_num_threads(self, n: int) -> None:
        self._set(int(n))


@contextmanager
def blas_threads(n: int):
    """Limit BLAS to ``n`` threads inside the block (restored after)."""
    saved = [(lib, lib.num_threads) for lib in blas_libraries()]
    for lib, k in saved:
        lib.set_num_threads(min(k, n))
    try:
        yield
    finally:
        for lib, k in saved:
            lib.set_num_threads(k)


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
count = CORES             # the threads this process uses (BLAS; pmap's CPU devices split them)
_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def set_cpu_threads(n: int) -> None:
    """Use ``n`` threads in this process: BLAS gets ``n`` (threadpoolctl, when installed) and pmap's CPU devices
    share them. ``flfun.distributed.initialize`` calls it with each rank's share of its host's cores.

    Example::

        flfun.distributed.set_cpu_threads(1)
    """
    global count
    if type(n) is not int or n < 1:
        raise ValueError(f"set_cpu_threads: n must be a positive int, got {n!r}")
    count = n
    for lib in blas_libraries():
        lib.set_num_threads(n)


_LOCAL_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")


def local_processes() -> int:
    """How many processes of this job share this host, from the launcher's environment (1 outside ``mpiexec``);
    known before MPI starts, so a program can size its threads before any heavy work.

    Example::

        set_cpu_threads(default_cpu_threads(local_processes()) or CORES)
    """
    for var in _LOCAL_SIZE:
        if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
            return int(os.environ[var])
    return 1


def default_cpu_threads(ranks_on_host: int) -> int | None:
    """The threads of one of ``ranks_on_host`` processes on this host: ``FLFUN_NUM_THREADS`` (or its older name
    ``FLFUN_CPU_THREADS``) if set; ``None`` (leave BLAS alone) when a BLAS thread variable is set; else its share
    of the cores."""
    name = "FLFUN_NUM_THREADS" if "FLFUN_NUM_THREADS" in os.environ else "FLFUN_CPU_THREADS"
    env = os.environ.get(name)
    if env is not None:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"{name} must be a positive int, got {env!r}")
        return int(env)
    if any(v in os.environ for v in _BLAS_VARS):
        return None
    return max(1, CORES // ranks_on_host)


__all__ = ["CORES", "count", "set_cpu_threads", "default_cpu_threads", "local_processes", "blas_threads",
           "blas_libraries"]
