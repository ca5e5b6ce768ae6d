"""Collectives across processes through MPI (mpi4py), and the two-level communicator for several devices per
process.

Every collective first exchanges a small descriptor (what it is, the op, the operand's dtype and shape), so ranks
that disagree all raise ``CollectiveMismatchError`` instead of moving data. Every call is non-blocking underneath
(``Iallreduce``, ``Iallgather``, ...) and waited for by polling that backs off to sleeping, so a peer that died or
hangs becomes a ``CollectiveTimeoutError`` after the timeout, and a peer that raised or exited tells the others on
a separate control communicator, which raise ``CollectiveAbortedError`` at once.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import socket
import sys
import time

import numpy as np

from flfun.distributed.communicator import (CollectiveError, CollectiveMismatchError, Communicator, ThreadCommunicator, copy_into,
                                            reduce_list, resolve_timeout)

_ABORT_TAG, _LEAVE_TAG = 77, 78
_DESCR, _SEP = 256, "\x1f"   # a collective's descriptor: 256 bytes, an 8-byte digest, then its text
# A collective first waits for its peers to arrive (the descriptor exchange): that wait polls without pause only
# _ARRIVE_SPIN_S, then sleeps in doubling steps up to _NAP_S between polls, so a rank early for a late peer leaves
# the cores to the others. Its data then moves with every peer present, and MPI moves data only while polled: that
# wait polls without pause _SPIN_S plus _SPIN_PER_BYTE per byte before sleeping likewise.
_ARRIVE_SPIN_S, _SPIN_S, _SPIN_PER_BYTE, _NAP_S = 1e-4, 2e-4, 1e-9, 2e-4
_GRACE_S = 0.5         # how long a rank still waits for a collective after a peer announced it exited
_NATIVE = frozenset("f4 f8 i4 i8 u4 u8".split())       # dtypes MPI reduces natively (others: gather + reduce)



def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: a zombie (exited, not yet reaped by its launcher) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return True

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
        self.ctrl = self.comm.Dup()                 # control messages (abort, exit) never mix with data
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.timeout, self._reason, self._pending, self._left = resolve_timeout(timeout), None, [], {}
        me = socket.gethostname()
        #: rank -> pid of the peers on this host (watched while waiting: a rank gone without notice is an abort)
        self.local_peers = {r: pid for r, (host, pid) in enumerate(self.comm.allgather((me, os.getpid())))
                            if host == me and r != self.rank}

    # --- waiting with a timeout and abort notices
    def _check_abort(self, what: str) -> None:
        MPI, status = self.MPI, self.MPI.Status()
        while self._reason is None and self.ctrl.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            buf = bytearray(status.Get_count(MPI.BYTE))
            src, tag = status.Get_source(), status.Get_tag()
            self.ctrl.Recv([buf, MPI.BYTE], source=src, tag=tag)
            if tag == _ABORT_TAG:
                self._reason = f"rank {src} failed: {buf.decode(errors='replace')}"
            else:
                self._left.setdefault(src, (time.monotonic(), buf.decode(errors="replace")))
        if self._reason is not None:
            raise self._aborted(f"rank {self.rank}", what)

    def _check_peers(self, what: str) -> None:
        """Abort when a peer announced its exit ``_GRACE_S`` ago, or a peer on this host is gone."""
        now = time.monotonic()
        for r, (t, how) in self._left.items():
            if now - t > _GRACE_S:
                self._reason = f"rank {r} {how} while rank {self.rank} waits in {what}"
        for r, pid in self.local_peers.items():
            if not _alive(pid):
                self._reason = f"rank {r} (pid {pid}) is gone while rank {self.rank} waits in {what}"
        if self._reason is not None:
            raise self._aborted(f"rank {self.rank}", what)

    def _wait(self, reqs, what: str, out=None, nbytes: int = 0, spin: float | None = None):
        """Wait for the requests ``reqs`` moving ``nbytes`` (polling for aborts, exited peers and the timeout);
        returns ``out``. It polls without pause for ``spin`` seconds (default: by ``nbytes``), then sleeps
        between polls, so a rank waiting for a slower peer does not take a core from it."""
        Testall, t0 = self.MPI.Request.Testall, time.monotonic()
        self._check_abort(what)
        nap, check_at = 0.0, t0 + 0.02
        spin = _SPIN_S + _SPIN_PER_BYTE * nbytes if spin is None else spin
        while not Testall(reqs):
            now = time.monotonic()
            if now - t0 >= spin:       # (a spin that yielded lost the core to other work for whole time slices)
                nap = min(_NAP_S, max(2e-5, 2 * nap))
                time.sleep(nap)
            if now >= check_at:
                check_at = now + 0.1
                self._check_abort(what)
                self._check_peers(what)
                if now - t0 > self.timeout:
                    raise self._timed_out(f"rank {self.rank}", what, now - t0)
        return out

    def _agree(self, what: str, x, op=None) -> np.ndarray:
        """Every rank's ``(what, dtype and shape, op)`` must be the same: else every rank raises, naming them all.
        Returns ``x`` as a contiguous array."""
        x = np.ascontiguousarray(x)
        text = _SEP.join([what, _spec(x), "" if op is None else str(op)]).encode()
        mine = np.zeros(_DESCR, np.uint8)
        mine[:8] = np.frombuffer(hashlib.blake2b(text, digest_size=8).digest(), np.uint8)
        mine[8:8 + min(len(text), _DESCR - 8)] = np.frombuffer(text[:_DESCR - 8], np.uint8)
        every = np.empty((self.size, _DESCR), np.uint8)
        self._wait([self.comm.Iallgather(mine, every)], what, spin=_ARRIVE_SPIN_S)
        if (every == mine).all():
            return x
        calls = [(bytes(d[8:]).rstrip(b"\0").decode(errors="replace").split(_SEP) + ["", ""])[:3] for d in every]
        same_call = len({(c[0], c[2]) for c in calls}) == 1
        parts = [f"rank {r} {c[1]}" if same_call else f"rank {r} {c[0]}{f' ({c[2]})' if c[2] else ''} of {c[1]}"
                 for r, c in enumerate(calls)]
        raise CollectiveMismatchError(f"{what}: ranks disagree on the {'operand' if same_call else 'collective'}: "
                                      + ", ".join(parts))

    def abort(self, reason: str) -> None:
        if self._reason is None:
            self._reason = reason
            self._notify(_ABORT_TAG, reason)

    def announce_exit(self, how: str = "exited") -> None:
        """Tell the peers this rank is leaving: one that waits for it in a collective aborts within a second."""
        self._notify(_LEAVE_TAG, how)
        self.MPI.Request.Waitall(self._pending)

    def _notify(self, tag: int, text: str) -> None:
        msg = bytearray(str(text)[:2000].encode())
        self._pending += [self.ctrl.Isend([msg, self.MPI.BYTE], dest=r, tag=tag) for r in range(self.size)
                          if r != self.rank]

    # --- collectives
    def _gathered(self, rank, x, what, pick):
        return pick(self._allgather(x, what))

    def allreduce(self, rank, x, op="sum", out=None, what="allreduce"):
        x = self._agree(what, x, op)
        if x.dtype.str[1:] not in _NATIVE:
            return reduce_list(list(self._allgather(x, what)), op, out)
        res = np.empty(x.shape, x.dtype) if out is None or not out.flags.c_contiguous else out
        self._wait([self.comm.Iallreduce(x, res, op=getattr(self.MPI, op.upper()))], what, nbytes=x.nbytes)
        return res if out is None or res is out else copy_into(out, res)

    def allgather(self, rank, x, what="allgather"):
        x = self._agree(what, x)
        return self._allgather(x, what)

    def _allgather(self, x, what):
        x = np.ascontiguousarray(x)
        out = np.empty((self.size,) + x.shape, x.dtype)
        return self._wait([self.comm.Iallgather(_bytes(x), _bytes(out))], what, out, out.nbytes)

    def reduce_scatter(self, rank, x, op="sum", what="reduce_scatter"):
        x = self._agree(what, x, op)
        if x.dtype.str[1:] not in _NATIVE:
            return super().reduce_scatter(rank, x, op, what)
        out = np.empty(x.shape[1:], x.dtype)
        return self._wait([self.comm.Ireduce_scatter_block(x, out, op=getattr(self.MPI, op.upper()))], what, out,
                          x.nbytes)

    def alltoall(self, rank, x, what="alltoall"):
        x = self._agree(what, x)
        out = np.empty_like(x)
        return self._wait([self.comm.Ialltoall(_bytes(x), _bytes(out))], what, out, x.nbytes)

    def permute(self, rank, x, perm, what="permute"):
        x = self._agree(what, x, perm)
        out = np.zeros_like(x)
        reqs = [self.comm.Isend(_bytes(x), dest=d, tag=11) for s, d in perm if s == self.rank]
        reqs += [self.comm.Irecv(_bytes(out), source=s, tag=11) for s, d in perm if d == self.rank]
        return self._wait(reqs, what, out, x.nbytes)


_KINDS = {"f": "f", "i": "s", "u": "u", "c": "c"}


def _spec(x: np.ndarray) -> str:
    """``x``'s dtype and shape the way errors print them: ``f32[1,3]``."""
    d = x.dtype
    name = f"{_KINDS[d.kind]}{8 * d.itemsize}" if d.kind in _KINDS else {"b": "bool"}.get(d.kind, d.name)
    return f"{name}[{','.join(map(str, x.shape))}]"


def _bytes(a: np.ndarray):
    """``a``'s memory as an MPI byte buffer (MPI moves any dtype as bytes)."""
    return [a.reshape(-1).view(np.uint8), "B"]


def install_exit_hooks(comm: MPICommunicator, abort_on_error: bool) -> None:
    """Make a rank that leaves end the job instead of leaving its peers waiting: on exit (``sys.exit``, the end
    of the script) it announces its exit to the peers, and with ``abort_on_error`` an uncaught exception
    (``KeyboardInterrupt`` included) is printed, reported to the peers and ends the whole job. A rank that dies
    without either (``os._exit``, a signal) is noticed by its peers' waits: the launcher ends the job, and peers
    on the same host also check that its process still exists."""
    if comm.size == 1:
        return
    atexit.register(comm.announce_exit, "exited (sys.exit, the end of its script, or an error it did not abort on)")
    if not abort_on_error:
        return
    previous = sys.excepthook

    def hook(tp, value, tb):
        previous(tp, value, tb)
        sys.stderr.flush()
        sys.stdout.flush()
        if not issubclass(tp, CollectiveError):
            comm.abort(f"{tp.__name__}: {value}")
        time.sleep(1.0)           # let the other ranks report the failure before the job is torn down
        comm.MPI.COMM_WORLD.Abort(1)
    sys.excepthook = hook


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
        return z if out is None else copy_into(out, z)

    def allgather(self, rank, x, what="allgather"):
        z = self._two_level(rank, x, what, lambda c, r, v: c.allgather(r, v, what))
        return z.reshape((self.size,) + tuple(np.shape(x)))

    def abort(self, reason: str) -> None:
        self.local.abort(reason)
        self.world.abort(reason)

    def reset(self) -> None:
        self.local.reset()


__all__ = ["MPICommunicator", "HierarchicalCommunicator", "install_exit_hooks"]
