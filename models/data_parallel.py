"""Data-parallel training with pmap: every device runs the same step on its slice of the global batch.

Devices are in-process CPU devices (``--devices N``) or, under ``mpiexec -n P``, one process each (times
``--devices`` per process). Gradients are averaged with ``pmean`` (or, with ZeRO-1, reduce-scattered into
per-device optimizer-state shards and all-gathered back), so the parameters stay identical everywhere and the
loss curve matches single-device training with the same global batch.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

import numpy as np

AXIS = "batch"
_STOP_CODES = 65          # stop requests 0..64 (signal numbers): averaged one-hot, the largest asked wins


def launched_by_mpiexec() -> bool:
    """Whether this process was started by ``mpiexec`` with more than one process (MPICH or Open MPI)."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"):
        if int(os.environ.get(var, "1") or 1) > 1:
            return True
    return False


def setup(devices: int | None = None) -> tuple[int, int, int]:
    """Join the mpiexec processes (if any) and make ``devices`` CPU devices per process available; returns
    ``(process index, process count, local devices used)``."""
    import flfun.distributed as dist
    from flfun.distributed.devices import local_device_count, process_count, process_index, set_cpu_device_count
    n = devices or 1
    if not dist.is_initialized():
        if local_device_count("numpy") < n:
            set_cpu_device_count(n)
        if launched_by_mpiexec():
            dist.initialize()
    if local_device_count() < n:
        raise ValueError(f"--devices {n}: this process has only {local_device_count()} devices (set "
                         f"FLFUN_CPU_DEVICES={n} before starting the processes)")
    return process_index(), process_count(), n


def zero_optimizer(steps: int, lr: float, weight_decay: float, warmup: int):
    """The training command's optimizer (warm-up + cosine AdamW, clipping at global norm 1) as ZeRO-1."""
    from flfun import optim
    from flfun.optim.sharded import sharded
    warmup = min(warmup, max(steps // 10, 1))
    sched = optim.warmup_cosine_schedule(lr, warmup, max(steps, warmup + 1), end_value=lr * 0.05)
    return sharded(optim.adamw(sched, weight_decay=weight_decay), AXIS, max_norm=1.0)


class DataParallel:
    """A training step ``(model, opt_state, x, y) -> (model, opt_state, loss)`` over all devices of all
    processes, taking the *global* batch (identical on every process) and returning the global mean loss.

    Example::

        dp = DataParallel(mlp.loss_fn, optim.adamw(1e-3), devices=4)
        state = dp.init(model)
        model, state, loss = dp.step(model, state, x_global, y_global)
    """

    def __init__(self, loss_fn: Callable, opt, devices: int | None = None, zero: bool = False,
                 agree_stop: bool = False):
        import flfun
        from flfun import optim
        from flfun.distributed.devices import local_devices
        from flfun.lax import pmean
        from flfun.distributed.pmap import pmap
        self.rank, self.procs, self.local = setup(devices)
        self.opt, self.zero = opt, zero
        self.devices = local_devices()[:self.local] if self.procs == 1 else None

        def step(model, opt_state, x, y, *stop):
            # one allreduce (a float32 flat buffer) of the gradients, the loss and the stop requests together
            loss, grads = flfun.value_and_grad(loss_fn)(model, x, y)
            if zero:
                loss, stop = pmean((loss, stop), AXIS)
            else:
                grads, loss, stop = pmean((grads, loss, stop), AXIS)
            updates, opt_state = opt.update(grads, opt_state, model)
            return (optim.apply_updates(model, updates), opt_state, loss, *stop)
        s, more = 0 if zero else None, (0,) * agree_stop
        self.agree_stop = agree_stop
        self._step = pmap(step, AXIS, in_axes=(None, s, 0, 0, *more), out_axes=(None, s, None, *(None,) * len(more)),
                          devices=self.devices)
        self._init = pmap(opt.init, AXIS, in_axes=None, axis_size=self.local, devices=self.devices) if zero else None

    @property
    def size(self) -> int:
        """Devices in all processes."""
        return self.local * self.procs

    def init(self, model):
        """The optimizer state: replicated, or with ZeRO one shard per device (a ``ShardedArray`` per leaf)."""
        return self._init(model) if self.zero else self.opt.init(model)

    def shard_batch(self, x):
        """This process's part of a global batch, split per local device: ``(local, B / size, ...)``."""
        x = np.asarray(x)
        if x.shape[0] % self.size:
            raise ValueError(f"data parallel: the global batch of {x.shape[0]} does not split evenly over "
                             f"{self.size} devices")
        per = x.shape[0] // self.procs
        mine = x[self.rank * per:(self.rank + 1) * per]
        return mine.reshape((self.local, per // self.local) + mine.shape[1:])

    def step(self, model, opt_state, x, y, stop: int = 0):
        """One step on the global batch ``(x, y)``; with ``agree_stop`` also takes this process's stop request
        (e.g. a signal number, 0 for none) and returns the largest over all processes as a fourth value, so that
        every process stops after the same step."""
        xs, ys = self.shard_batch(x), self.shard_batch(y)
        if not self.agree_stop:
            return self._step(model, opt_state, xs, ys)
        if not 0 <= stop < _STOP_CODES:
            raise ValueError(f"data parallel: the stop request must be in [0, {_STOP_CODES}), got {stop!r}")
        requests = np.zeros((self.local, _STOP_CODES), np.float32)    # one-hot: the mean is > 0 where any asked
        requests[:, stop] = 1
        model, opt_state, loss, asked = self._step(model, opt_state, xs, ys, requests)
        return model, opt_state, loss, int(np.flatnonzero(np.asarray(asked))[-1])


def attach(args, loss_fn: Callable, opt, model, opt_state, schedule: tuple, batch_size: int | None = None):
    """Switch ``python -m models.train`` to data parallelism (``--devices``, ``--zero``, or under mpiexec).

    ``schedule`` is ``(steps, lr, weight_decay, warmup)`` for the ZeRO optimizer; ``batch_size`` (the global
    batch) must split evenly over the devices. Returns the step function,
    the optimizer state to start from, and whether this process is the one that reports and writes files.
    The step takes a fifth argument, this process's stop request, and returns the agreed one fourth.
    """
    if args.zero and (args.checkpoint_dir or args.resume):
        raise SystemExit("error: --zero shards the optimizer state across devices; it cannot be combined with "
                         "--checkpoint-dir or --resume yet")
    if args.zero:
        opt = zero_optimizer(*schedule)
    dp = DataParallel(loss_fn, opt, devices=args.devices, zero=args.zero, agree_stop=True)
    if batch_size is not None and batch_size % dp.size:
        raise SystemExit(f"error: the batch size {batch_size} does not split evenly over {dp.size} devices; pass "
                         f"a --batch-size that is a multiple of {dp.size}")
    if args.zero:
        opt_state = dp.init(model)
    if dp.rank == 0:
        print(f"data parallel: {dp.size} devices ({dp.procs} processes x {dp.local}), global batch split "
              f"evenly{', optimizer state sharded (ZeRO-1)' if args.zero else ''}", file=sys.stderr)
    return dp.step, opt_state, dp.rank == 0


__all__ = ["DataParallel", "setup", "launched_by_mpiexec", "zero_optimizer", "attach"]
