"""The communicator interface behind every collective, and its in-process implementation (threads).

A communicator joins ``size`` members; each call names the calling member (``rank``) because one
``ThreadCommunicator`` serves all the threads of one process. Every member must make the same sequence of calls.
A member that waits longer than the timeout, or whose peer failed (``abort``), gets a ``CollectiveError``
instead of hanging. Buffers are numpy (or cupy) arrays; results are new arrays unless ``out`` is given.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

_timeout = float(os.environ.get("FLFUN_COLLECTIVE_TIMEOUT", "300"))
_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


class CollectiveError(RuntimeError):
    """A collective could not complete on this member."""


class CollectiveTimeoutError(CollectiveError):
    """A member waited longer than the timeout for the others (one died, hangs or skipped the collective)."""


class CollectiveAbortedError(CollectiveError):
    """Another member failed or exited, so this collective was abandoned."""


class CollectiveMismatchError(CollectiveError, ValueError):
    """The members called different collectives, or passed operands of different shapes or dtypes."""


def reduce_list(xs: list, op: str, out=None):
    """``xs[0] op xs[1] op ...`` in member order (every member computes the same bits)."""
    fn = _UFUNCS[op]
    acc = np.array(xs[0], copy=True) if out is None else copy_into(out, xs[0])
    for x in xs[1:]:
        fn(acc, x, out=acc)
    return acc


def copy_into(out, x):
    out[...] = x
    return out


class Communicator:
    """What a collective needs: ``allreduce``, ``allgather``, ``reduce_scatter``, ``alltoall``, ``permute``.

    Implementations define ``allreduce(rank, x, op="sum", out=None, what="allreduce")`` (every member gets
    ``x_0 op x_1 op ...``, op in 'sum', 'max', 'min') and ``allgather(rank, x, what="allgather")`` (every member
    gets all members' ``x`` stacked: shape ``(size, *x.shape)``). The base class builds the last three from
    ``allgather`` (correct for any member layout, not the fastest); implementations override what their engine
    does natively.

    Example::

        comm = ThreadCommunicator(2)       # two threads; each calls comm.allreduce(its_rank, x)
    """
    size: int = 1
    timeout: float = 300.0
    _reason: str | None = None

    def _gathered(self, rank: int, x, what: str, pick):
        """``pick(xs)`` of all members' ``x`` (``xs[j]`` is member ``j``'s), here through ``allgather``."""
        return pick(self.allgather(rank, x, what))

    def reduce_scatter(self, rank: int, x, op: str = "sum", what: str = "reduce_scatter"):
        """``x`` has shape ``(size, ...)``; member ``rank`` gets ``x_0[rank] op x_1[rank] op ...``."""
        return self._gathered(rank, np.asarray(x), what, lambda xs: reduce_list([s[rank] for s in xs], op))

    def alltoall(self, rank: int, x, what: str = "alltoall"):
        """``x`` has shape ``(size, ...)``; member ``rank`` gets ``stack([x_j[rank] for j])``."""
        return self._gathered(rank, np.asarray(x), what, lambda xs: np.stack([s[rank] for s in xs]))

    def permute(self, rank: int, x, perm: tuple, what: str = "permute"):
        """Member ``d`` gets ``x_s`` for each ``(s, d)`` in ``perm``; the others get zeros."""
        x, src = np.asarray(x), {d: s for s, d in perm}.get(rank)
        return self._gathered(rank, x, what, lambda xs: np.zeros_like(x) if src is None else np.array(xs[src]))

    def abort(self, reason: str) -> None:
        """Make every member that waits (now or later) raise ``CollectiveAbortedError(reason)``."""

    def reset(self) -> None:
        """Make the communicator usable again after an abort or a timeout (in-process communicators only)."""

    def _aborted(self, member: str, what: str) -> CollectiveAbortedError:
        return CollectiveAbortedError(f"{what}: abandoned on {member} of {self.size} because {self._reason}")

    def _timed_out(self, member: str, what: str, waited: float) -> CollectiveTimeoutError:
        self._reason = f"{member} timed out in {what}"
        return CollectiveTimeoutError(
            f"{what}: {member} of {self.size} waited {waited:.1f} s (timeout {self.timeout:g} s) for the others; one "
            f"of them failed, died, hangs or did not call the same collective (set FLFUN_COLLECTIVE_TIMEOUT or "
            f"flfun.distributed.set_timeout to change the limit)")


def get_timeout() -> float:
    """Seconds a collective waits for the other members before raising ``CollectiveTimeoutError``
    (``FLFUN_COLLECTIVE_TIMEOUT``, default 300)."""
    return _timeout


def set_timeout(seconds: float) -> None:
    """Set the collective timeout for communicators created from now on.

    Example::

        flfun.distributed.set_timeout(30.0)
    """
    global _timeout
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
        raise ValueError(f"set_timeout: seconds must be a positive number, got {seconds!r}")
    _timeout = float(seconds)


def resolve_timeout(timeout: float | None) -> float:
    return get_timeout() if timeout is None else float(timeout)


class ThreadCommunicator(Communicator):
    """``size`` threads of one process exchange buffers through shared slots and a barrier.

    Reductions are split in chunks: member ``r`` reduces chunk ``r`` of all inputs (in member order) and writes
    it into every member's output, so the work is shared and every member holds identical bits.

    Example::

        comm = ThreadCommunicator(4, timeout=60)
    """

    def __init__(self, size: int, timeout: float | None = None):
        self.size, self.timeout = int(size), resolve_timeout(timeout)
        self.reset()

    def reset(self) -> None:
        self._slots: list = [None] * self.size
        self._barrier = threading.Barrier(self.size)
        self._reason = None

    def abort(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
        self._barrier.abort()

    def _wait(self, rank: int, what: str) -> None:
        if self.size == 1:
            return
        t0 = time.monotonic()
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            if self._reason is not None:
                raise self._aborted(f"member {rank}", what) from None
            raise self._timed_out(f"member {rank}", what, time.monotonic() - t0) from None

    def _gathered(self, rank, x, what, pick):
        self._slots[rank] = x
        self._wait(rank, what)
        out = pick(self._slots)
        self._wait(rank, what)        # nobody reads the slots any more: the next collective may reuse them
        self._slots[rank] = None
        return out

    def allreduce(self, rank, x, op="sum", out=None, what="allreduce"):
        x = np.asarray(x)
        if self.size == 1:
            return np.array(x, copy=True) if out is None else copy_into(out, x)
        # members write each other's results through flat views, so the buffer they write must be contiguous
        dest = out if out is not None and out.flags.c_contiguous else np.empty(x.shape, x.dtype)
        lo, hi = x.size * rank // self.size, x.size * (rank + 1) // self.size

        def reduce_chunk(slots):
            if hi > lo:
                chunk = reduce_list([s[0][lo:hi] for s in slots], op)
                for _, o in slots:
                    o[lo:hi] = chunk
        self._gathered(rank, (x.reshape(-1), dest.reshape(-1)), what, reduce_chunk)
        return dest if out is None else copy_into(out, dest)

    def allgather(self, rank, x, what="allgather"):
        return self._gathered(rank, np.asarray(x), what, np.stack)


__all__ = ["Communicator", "ThreadCommunicator", "CollectiveError", "CollectiveTimeoutError",
           "CollectiveAbortedError", "CollectiveMismatchError", "reduce_list", "resolve_timeout"]
