"""One BLAS thread pool per process sized to that process's share of the cores, so that ``mpiexec -n P`` ranks
on one machine do not steal each other's cores (numpy's default is a thread per core in every process)."""
from __future__ import annotations

import os

ENV = "FLFUN_BLAS_THREADS"
_LOCAL_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")

_POOL_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")
_limits = None      # keeps the threadpoolctl limit in force


def local_processes() -> int:
    """How many processes of this job share this machine (1 when not started by mpiexec)."""
    for var in _LOCAL_SIZE:
        if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
            return int(os.environ[var])
    return 1


def blas_threads(requested: int | None = None) -> int:
    """The BLAS threads for this process: ``requested``, else ``$FLFUN_BLAS_THREADS``, else its core share.

    Example::

        >>> blas_threads(2)
        2
    """
    if requested is None and os.environ.get(ENV):
        try:
            requested = int(os.environ[ENV])
        except ValueError:
            raise ValueError(f"{ENV} must be a positive integer, got {os.environ[ENV]!r}") from None
    if requested is not None:
        if requested < 1:
            raise ValueError(f"blas_threads: expected a positive number of threads, got {requested}")
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(cores // local_processes(), 1)


def size_blas_threads(requested: int | None = None) -> int | None:
    """Limit this process's BLAS pool (with ``threadpoolctl``) to ``blas_threads(requested)``; call it before
    heavy work. Only acts when asked or when several processes share the machine; returns the limit set.

    Example::

        >>> size_blas_threads(1)
        1
    """
    global _limits
    asked = requested is not None or bool(os.environ.get(ENV))
    if not asked and (local_processes() == 1 or any(os.environ.get(v) for v in _POOL_VARS)):
        return None             # one process, or the user sized the pools with the usual variables
    n = blas_threads(requested)
    for var in _POOL_VARS:      # for pools that start later (and child processes)
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return n
    import numpy  # noqa: F401  (threadpoolctl limits the BLAS libraries loaded so far)
    _limits = threadpool_limits(limits=n, user_api="blas")
    return n


__all__ = ["blas_threads", "local_processes", "size_blas_threads"]
