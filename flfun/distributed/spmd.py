"""Running one program on many devices at once: the device mesh, its communicators, and the SPMD runner.

A ``Mesh`` lays a pmap's devices out along named axes and owns one communicator per group of devices that
share all coordinates but one (the members of one named axis). ``run_spmd`` runs one task per local device
in parallel threads, with the calling thread taking the first; each task sees its device's collective context
(``current_context``), which is how collective impls find their communicator and member index. When a task
raises, every communicator of the mesh is aborted, so the others stop waiting and the first real error is raised.
While several CPU devices run at once, BLAS gets ``cores // devices`` threads, so
concurrent matrix products do not fight over the cores; the cores are this process's share
(``flfun.distributed.threads``).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable, Sequence

import numpy as np

from flfun.distributed.devices import process_index
from flfun.distributed import threads
from flfun.distributed.communicator import CollectiveError, Communicator, ThreadCommunicator
from flfun.distributed.threads import blas_threads

_tls = threading.local()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def current_context() -> dict | None:
    """``{axis name: (communicator, member index)}`` of the device this thread is running, or ``None``."""
    return getattr(_tls, "ctx", None)


class Mesh:
    """Devices (all processes', row-major) laid out with ``shape`` along ``names``.

    Example::

        mesh = Mesh(tuple(flfun.devices()[:4]), ("i",), (4,))
    """

    def __init__(self, devices: Sequence, names: tuple[Hashable, ...], shape: tuple[int, ...]):
        if not all(shape) or not devices:
            empty = [nm for nm, s in zip(names, shape) if not s]
            raise ValueError(f"pmap: the mapped axis {empty[0] if empty else names[0]!r} has size 0, but pmap "
                             f"runs one device per index of the mapped axis, so it needs a size of at least 1")
        self.devices, self.names, self.shape = tuple(devices), tuple(names), tuple(shape)
        self.local = [(g, d) for g, d in enumerate(self.devices) if d.process_index == process_index()]
        firsts = sorted({int(np.unravel_index(g, self.shape)[0]) for g, _ in self.local})
        #: local device index -> which shard (along the first axis) of this process's inputs it runs
        self.outer = {g: firsts.index(int(np.unravel_index(g, self.shape)[0])) for g, _ in self.local}
        #: positions in ``local`` of the devices whose other coordinates are 0: they hand back the outputs
        self.heads = [i for i, (g, _) in enumerate(self.local) if not any(np.unravel_index(g, self.shape)[1:])]
        self._ids = np.arange(len(self.devices)).reshape(self.shape)
        self._comms, self._contexts, self._lock = {}, {}, threading.Lock()

    def __repr__(self):
        return f"Mesh({dict(zip(self.names, self.shape))}, {list(self.devices)})"

    def _make_comm(self, members: tuple) -> Communicator:
        devs = [self.devices[m] for m in members]
        if all(d.process_index == process_index() for d in devs):
            if devs[0].platform == "gpu":           # NCCL; one GPU makes a one-rank clique
                from flfun.distributed.nccl import NcclCommunicator
                return NcclCommunicator.for_devices([d.id for d in devs])
            return ThreadCommunicator(len(devs))
        from flfun.distributed import world_communicator
        return world_communicator(devs)

    def context(self, g: int) -> dict:
        """The collective context of global device index ``g``: ``{name: (communicator, member index)}``."""
        ctx = self._contexts.get(g)
        if ctx is None:
            ctx, coords = {}, np.unravel_index(g, self.shape)
            with self._lock:
                for k, name in enumerate(self.names):     # the members of axis k: g's coordinates but the k-th
                    km = (k, tuple(int(m) for m in self._ids[coords[:k] + (slice(None),) + coords[k + 1:]]))
                    comm = self._comms.get(km) or self._comms.setdefault(km, self._make_comm(km[1]))
                    ctx[name] = (comm, int(coords[k]))
            self._contexts[g] = ctx
        return ctx

    def abort(self, reason: str) -> None:
        for c in list(self._comms.values()):
            c.abort(reason)

    def reset(self) -> None:
        for c in self._comms.values():
            c.reset()


def _executor(workers: int) -> ThreadPoolExecutor:
    """The device threads' pool, with room for ``workers`` tasks at once (they wait for each other)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=max(workers, 16), thread_name_prefix="flfun-device")
        return _pool


def run_spmd(mesh: Mesh, tasks: list[tuple[int, Callable[[], object]]]) -> list:
    """Run ``fn()`` for every ``(global device index, fn)`` in parallel, each in its device's collective context;
    return the results in order. The first task runs on the calling thread."""
    if not tasks:
        raise ValueError(f"pmap: nothing to run on this process's devices of {mesh!r} (a mapped axis of size 0?)")
    contexts = [mesh.context(g) for g, _ in tasks]

    def call(i):            # -> (result, None) or (None, the exception)
        g, fn = tasks[i]
        prev, _tls.ctx = getattr(_tls, "ctx", None), contexts[i]
        try:
            return fn(), None
        except BaseException as e:
            mesh.abort(f"device {mesh.devices[g]} raised {type(e).__name__}: {e}")
            return None, e
        finally:
            _tls.ctx = prev

    if len(tasks) == 1:
        outs = [call(0)]
    else:
        with blas_threads(max(1, threads.count // len(tasks))):
            pool = _executor(len(tasks) - 1)
            futures = [pool.submit(call, i) for i in range(1, len(tasks))]
            outs = [call(0)] + [f.result() for f in futures]
    errors = [e for _, e in outs if e is not None]
    if errors:
        mesh.reset()
        raise next((e for e in errors if not isinstance(e, CollectiveError)), errors[0])
    return [r for r, _ in outs]


__all__ = ["Mesh", "run_spmd", "current_context"]
