"""Collectives across processes through MPI (mpi4py), and the two-level communicator for several devices per
process.

Every call is non-blocking underneath (``Iallreduce``, ``Iallgather``, ...) and waited for by polling, so a peer
that died or hangs becomes a ``CollectiveTimeoutError`` after the timeout, and a peer that raised tells the others
on a separate control communicator, which raise ``CollectiveAbortedError`` at once.
"""
from __future__ import annotations

import time

import numpy as np

from flfun.distributed.communicator import Communicator, ThreadCommunicator, _copy_into, reduce_list, resolve_timeout

_ABORT_TAG = 77
_NATIVE = frozenset("f4 f8 i4 i8 u4 u8".split())       # dtypes MPI reduces natively (others: gather + reduce)


class MPICommunicator(Communicator):
    """One member per process of an mpi4py communicator (``MPI.COMM_WORLD`` by default).

    Example::

        comm = MPICommunicator()                       # under mpiexec -n 2
        total = comm.allreduce(comm.rank, np.ones(3))  # [2, 2, 2] on both ranks
    """

    def __init__(self, comm=None, timeout: float | None = None):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.ctrl = self.comm.Dup()                 # control messages (abort) never mix with data
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.timeout, self._reason, self._pending = resolve_timeout(timeout), None, []

    # --- waiting with a timeout and abort notices
    def _check_abort(self, what: str) -> None:
        MPI, status = self.MPI, self.MPI.Status()
        if self._reason is None and self.ctrl.Iprobe(source=MPI.ANY_SOURCE, tag=_ABORT_TAG, status=status):
            buf = bytearray(status.Get_count(MPI.BYTE))
            self.ctrl.Recv([buf, MPI.BYTE], source=status.Get_source(), tag=_ABORT_TAG)
            self._reason = f"rank {status.Get_source()} failed: {buf.decode(errors='replace')}"
        if self._reason is not None:
            raise self._aborted(f"rank {self.rank}", what)

    def _wait(self, reqs, what: str, out=None):
        """Wait for the requests ``reqs`` (polling for aborts and the timeout); returns ``out``."""
        t0, spins = time.monotonic(), 0
        self._check_abort(what)
        while not self.MPI.Request.Testall(reqs):
            spins += 1
            if spins & 1023 == 0:
                self._check_abort(what)
                waited = time.monotonic() - t0
                if waited > self.timeout:
                    raise self._timed_out(f"rank {self.rank}", what, waited)
                if waited > 0.5:
                    time.sleep(0.001)        # a long wait: stop spinning on a core another rank may need
        return out

    def abort(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
            msg = bytearray(str(reason)[:2000].encode())
            self._pending += [self.ctrl.Isend([msg, self.MPI.BYTE], dest=r, tag=_ABORT_TAG) for r in range(self.size)
                              if r != self.rank]

    # --- collectives
    def allreduce(self, rank, x, op="sum", out=None, what="allreduce"):
        x = np.ascontiguousarray(x)
        if x.dtype.str[1:] not in _NATIVE:
            return reduce_list(list(self.allgather(rank, x, what)), op, out)
        res = np.empty(x.shape, x.dtype) if out is None or not out.flags.c_contiguous else out
        self._wait([self.comm.Iallreduce(x, res, op=getattr(self.MPI, op.upper()))], what)
        return res if out is None or res is out else _copy_into(out, res)

    def allgather(self, rank, x, what="allgather"):
        x = np.ascontiguousarray(x)
        out = np.empty((self.size,) + x.shape, x.dtype)
        return self._wait([self.comm.Iallgather(_bytes(x), _bytes(out))], what, out)

    def reduce_scatter(self, rank, x, op="sum", what="reduce_scatter"):
        x = np.ascontiguousarray(x)
        if x.dtype.str[1:] not in _NATIVE:
            return super().reduce_scatter(rank, x, op, what)
        out = np.empty(x.shape[1:], x.dtype)
        return self._wait([self.comm.Ireduce_scatter_block(x, out, op=getattr(self.MPI, op.upper()))], what, out)

    def alltoall(self, rank, x, what="alltoall"):
        x = np.ascontiguousarray(x)
        out = np.empty_like(x)
        return self._wait([self.comm.Ialltoall(_bytes(x), _bytes(out))], what, out)

    def permute(self, rank, x, perm, what="permute"):
        x = np.ascontiguousarray(x)
        out = np.zeros_like(x)
        reqs = [self.comm.Isend(_bytes(x), dest=d, tag=11) for s, d in perm if s == self.rank]
        reqs += [self.comm.Irecv(_bytes(out), source=s, tag=11) for s, d in perm if d == self.rank]
        return self._wait(reqs, what, out)


def _bytes(a: np.ndarray):
    """``a``'s memory as an MPI byte buffer (MPI moves any dtype as bytes)."""
    return [a.reshape(-1).view(np.uint8), "B"]


class HierarchicalCommunicator(Communicator):
    """``P`` processes with ``L`` members (threads) each: member ``g = p * L + l``. Sums reduce locally, then
    across processes (by the local leader), then broadcast locally; other collectives gather everything once
    (the base class's route).

    Example::

        comm = HierarchicalCommunicator(ThreadCommunicator(2), MPICommunicator())
    """

    def __init__(self, local: ThreadCommunicator, world: MPICommunicator):
        self.local, self.world, self.size, self.timeout = local, world, local.size * world.size, world.timeout

    def _two_level(self, rank: int, x, what: str, op):
        """``op(communicator, member, value)`` among this process's members, then (on the first) among the
        processes; the result is broadcast to this process's members."""
        lr = rank - self.world.rank * self.local.size
        y = op(self.local, lr, x)
        y = op(self.world, 0, y) if lr == 0 else None
        return self.local._gathered(lr, y, what, lambda ys: ys[0] if lr == 0 else np.array(ys[0]))

    def allreduce(self, rank, x, op="sum", out=None, what="allreduce"):
        z = self._two_level(rank, x, what, lambda c, r, v: c.allreduce(r, v, op, what=what))
        return z if out is None else _copy_into(out, z)

    def allgather(self, rank, x, what="allgather"):
        z = self._two_level(rank, x, what, lambda c, r, v: c.allgather(r, v, what))
        return z.reshape((self.size,) + tuple(np.shape(x)))

    def abort(self, reason: str) -> None:
        self.local.abort(reason)
        self.world.abort(reason)

    def reset(self) -> None:
        self.local.reset()


__all__ = ["MPICommunicator", "HierarchicalCommunicator"]
