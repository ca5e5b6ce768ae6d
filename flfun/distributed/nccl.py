"""Collectives across GPUs through NCCL (``cupy.cuda.nccl``).

One NCCL rank per GPU: in one process, ``NcclCommunicator.for_devices([0, 1, ...])`` makes a clique that the
device threads of ``pmap`` share (member ``r`` uses GPU ``r``); across processes, pass a unique id created on rank 0
and broadcast by MPI (``NcclCommunicator.from_mpi``). A machine with one GPU can only form a one-rank
communicator, which still runs every NCCL call (tested that way). Waiting polls a CUDA event, so a hung peer
becomes a ``CollectiveTimeoutError`` (and the NCCL communicator is aborted) instead of a hang.
"""
from __future__ import annotations

import time

from flfun.distributed.communicator import CollectiveTimeoutError, Communicator, resolve_timeout


def _nccl():
    from cupy.cuda import nccl
    return nccl


def _dtype(nccl, dtype) -> int:
    table = {"f4": nccl.NCCL_FLOAT32, "f8": nccl.NCCL_FLOAT64, "f2": nccl.NCCL_FLOAT16, "i4": nccl.NCCL_INT32,
             "i8": nccl.NCCL_INT64, "u1": nccl.NCCL_UINT8, "i1": nccl.NCCL_INT8, "u4": nccl.NCCL_UINT32,
             "u8": nccl.NCCL_UINT64}
    key = dtype.str[1:]
    if key not in table:
        raise TypeError(f"NcclCommunicator: NCCL cannot reduce {dtype}")
    return table[key]


class NcclCommunicator(Communicator):
    """NCCL ranks ``offset .. offset + len(comms) - 1`` held by this process (one per local GPU).

    Example::

        comm = NcclCommunicator.for_devices([0])           # a one-rank clique on GPU 0
        y = comm.allreduce(0, cupy.ones(4, cupy.float32))
    """

    def __init__(self, comms: list, device_ids: list[int], size: int, offset: int = 0, timeout: float | None = None):
        self.comms, self.device_ids, self.size, self.offset = comms, device_ids, size, offset
        self.timeout, self._reason = resolve_timeout(timeout), None

    @classmethod
    def for_devices(cls, device_ids: list[int], timeout: float | None = None) -> "NcclCommunicator":
        """A clique over GPUs ``device_ids`` of this process."""
        ids = list(device_ids)
        return cls(list(_nccl().NcclCommunicator.initAll(ids)), ids, len(ids), 0, timeout)

    @classmethod
    def from_mpi(cls, mpi_comm, device_id: int, timeout: float | None = None) -> "NcclCommunicator":
        """One GPU per MPI rank: rank 0 makes the NCCL id, MPI broadcasts it, every rank joins."""
        import cupy
        nccl = _nccl()
        uid = mpi_comm.bcast(nccl.get_unique_id() if mpi_comm.Get_rank() == 0 else None, root=0)
        with cupy.cuda.Device(device_id):
            comm = nccl.NcclCommunicator(mpi_comm.Get_size(), uid, mpi_comm.Get_rank())
        return cls([comm], [device_id], mpi_comm.Get_size(), mpi_comm.Get_rank(), timeout)

    def _run(self, rank: int, what: str, launch, out):
        """``launch(NCCL communicator, stream pointer)`` on this rank's GPU, waited for; returns ``out``."""
        import cupy
        if self._reason is not None:
            raise self._aborted(f"rank {rank}", what)
        i = rank - self.offset
        with cupy.cuda.Device(self.device_ids[i]):
            stream = cupy.cuda.get_current_stream()
            launch(self.comms[i], stream.ptr)
            event = stream.record()
            t0 = time.monotonic()
            while not event.done:
                if time.monotonic() - t0 > self.timeout:
                    self.abort(f"rank {rank} timed out in {what}")
                    raise CollectiveTimeoutError(f"{what}: NCCL rank {rank} of {self.size} waited more than "
                                                 f"{self.timeout:g} s for the other ranks")
                time.sleep(0)
        return out

    def abort(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
            for c in self.comms:
                try:
                    c.abort()
                except Exception:      # already destroyed or not supported: nothing more to stop
                    pass

    def allreduce(self, rank, x, op="sum", out=None, what="allreduce"):
        import cupy
        nccl, x = _nccl(), cupy.ascontiguousarray(x)
        out = cupy.empty_like(x) if out is None else out
        return self._run(rank, what, lambda c, s: c.allReduce(x.data.ptr, out.data.ptr, x.size, _dtype(nccl, x.dtype),
                                                              getattr(nccl, "NCCL_" + op.upper()), s), out)

    def allgather(self, rank, x, what="allgather"):
        import cupy
        nccl, x = _nccl(), cupy.ascontiguousarray(x)
        out = cupy.empty((self.size,) + x.shape, x.dtype)
        return self._run(rank, what, lambda c, s: c.allGather(x.data.ptr, out.data.ptr, x.nbytes, nccl.NCCL_UINT8, s),
                         out)

    def reduce_scatter(self, rank, x, op="sum", what="reduce_scatter"):
        import cupy
        nccl, x = _nccl(), cupy.ascontiguousarray(x)
        out = cupy.empty(x.shape[1:], x.dtype)
        return self._run(rank, what, lambda c, s: c.reduceScatter(x.data.ptr, out.data.ptr, out.size, _dtype(
            nccl, x.dtype), getattr(nccl, "NCCL_" + op.upper()), s), out)

    def _sendrecv(self, rank, pairs, what, out):
        """Grouped point-to-point: ``pairs`` lists ("send" or "recv", buffer, peer); returns ``out``."""
        nccl = _nccl()

        def launch(c, s):
            nccl.groupStart()
            for kind, buf, peer in pairs:
                getattr(c, kind)(buf.data.ptr, buf.nbytes, nccl.NCCL_UINT8, peer, s)
            nccl.groupEnd()
        return self._run(rank, what, launch, out)

    def alltoall(self, rank, x, what="alltoall"):
        import cupy
        x = cupy.ascontiguousarray(x)
        out = cupy.empty_like(x)
        pairs = [("send", x[j], j) for j in range(self.size)] + [("recv", out[j], j) for j in range(self.size)]
        return self._sendrecv(rank, pairs, what, out)

    def permute(self, rank, x, perm, what="permute"):
        import cupy
        x = cupy.ascontiguousarray(x)
        out = cupy.zeros_like(x)
        pairs = [("send", x, d) for s, d in perm if s == rank] + [("recv", out, s) for s, d in perm if d == rank]
        return self._sendrecv(rank, pairs, what, out)


__all__ = ["NcclCommunicator"]
