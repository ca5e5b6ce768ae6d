"""``flfun.distributed``: processes joined by MPI, the communicators collectives run on, and their timeout.

Start every process with ``mpiexec -n N python script.py`` and call ``initialize()`` first: ``flfun.devices()``
then lists all processes' devices, ``pmap`` over them runs each process's local shards, and collectives cross
processes. Communicators (``communicator.py``: threads of one process; ``mpi.py``: MPI; ``nccl.py``: GPUs) share
one small interface; a member that waits longer than ``get_timeout()`` seconds raises instead of hanging.
"""
from __future__ import annotations

from types import SimpleNamespace

from flfun.backends import get_backend
from flfun.config import config
from flfun.distributed.communicator import (CollectiveAbortedError, CollectiveError, CollectiveMismatchError,
                                            CollectiveTimeoutError, Communicator, ThreadCommunicator, get_timeout,
                                            set_timeout)
from flfun.distributed.mpi import HierarchicalCommunicator, MPICommunicator, install_exit_hooks
from flfun.distributed.threads import default_cpu_threads, set_cpu_threads

_world: SimpleNamespace | None = None        # comm (MPICommunicator: rank, size), devices, all_comm


def is_initialized() -> bool:
    """Whether ``initialize()`` has joined this process to others."""
    return _world is not None


def initialize(abort_on_error: bool = True, cpu_threads: int | None = None) -> None:
    """Join the processes started by ``mpiexec``: afterwards ``flfun.devices()`` lists every process's devices
    and ``pmap`` runs across them. Safe to call in a single process (a world of one).

    With ``abort_on_error`` an uncaught exception on any rank is printed, reported to the other ranks (whose
    waiting collectives raise ``CollectiveAbortedError`` naming it) and then ends the whole job, so no rank is
    left waiting; a rank that exits (``sys.exit``) or dies (``os._exit``) also makes its peers' collectives
    raise within about a second. Each rank uses ``cpu_threads`` BLAS threads (``set_cpu_threads``): by default
    ``FLFUN_CPU_THREADS``, else its share of its host's cores (unless a BLAS thread variable such as
    ``OPENBLAS_NUM_THREADS`` is set).

    Example::

        # mpiexec -n 2 python train.py
        import flfun
        flfun.distributed.initialize()
        print(flfun.process_index(), flfun.process_count(), flfun.devices())
    """
    global _world
    if _world is not None:
        return
    try:
        from mpi4py import MPI
    except ImportError:
        raise ImportError("flfun.distributed.initialize needs mpi4py and an MPI library: "
                          "pip install 'flfun[distributed]' (installs mpi4py and the mpich wheel)") from None
    from flfun.backends.base import Device
    comm = MPICommunicator(MPI.COMM_WORLD)
    local = list(get_backend(config.default_backend).devices)
    for d in local:
        d.process_index = comm.rank
    layout = MPI.COMM_WORLD.allgather([(d.platform, d.id, d.backend) for d in local])
    if len({len(x) for x in layout}) != 1:
        raise ValueError(f"initialize: every process must have the same number of local devices, got "
                         f"{[len(x) for x in layout]} (set FLFUN_CPU_DEVICES alike on every rank)")
    devices = [d for p, descr in enumerate(layout) for d in (local if p == comm.rank else [
        Device(plat, i, backend, None, process_index=p) for plat, i, backend in descr])]
    _world = SimpleNamespace(comm=comm, devices=devices, all_comm=None)
    n = default_cpu_threads(len(comm.local_peers) + 1) if cpu_threads is None else cpu_threads
    if n is not None:
        set_cpu_threads(n)
    install_exit_hooks(comm, abort_on_error)


def world() -> SimpleNamespace | None:
    return _world


def world_communicator(devs: list) -> Communicator:
    """The communicator over all processes' devices ``devs`` (which must be every device, in order)."""
    if _world is None or list(devs) != list(_world.devices):
        raise NotImplementedError("pmap: a mesh axis that spans processes must cover all devices of all "
                                  "processes (flfun.devices()), in order")
    if _world.all_comm is None:
        local = [d for d in devs if d.process_index == _world.comm.rank]
        if local[0].platform == "gpu":
            if len(local) != 1:
                raise NotImplementedError("pmap across processes on GPUs needs one GPU per process")
            from flfun.distributed.nccl import NcclCommunicator
            _world.all_comm = NcclCommunicator.from_mpi(_world.comm.comm, local[0].id)
        elif len(local) == 1:
            _world.all_comm = _world.comm
        else:
            _world.all_comm = HierarchicalCommunicator(ThreadCommunicator(len(local)), _world.comm)
    return _world.all_comm


__all__ = ["initialize", "is_initialized", "get_timeout", "set_timeout", "Communicator", "ThreadCommunicator",
           "CollectiveError", "CollectiveTimeoutError", "CollectiveAbortedError", "CollectiveMismatchError",
           "world_communicator", "set_cpu_threads"]
