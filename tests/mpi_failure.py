"""Run under ``mpiexec -n 2 python tests/mpi_failure.py MODE`` (tests/test_distributed.py does). After one good
collective, rank 1 misbehaves while rank 0 enters the next one: ``raise`` (an exception before the collective),
``hang`` (never arrives), ``die`` / ``die0`` (``os._exit(3)`` / ``os._exit(0)``), ``exit`` (``sys.exit(0)``),
``interrupt`` (SIGINT: a ``KeyboardInterrupt``), or it calls the collective wrongly: ``shape`` (a (1, 4) operand
where rank 0 passes (1, 3)), ``dtype`` (float32 where rank 0 passes float64), ``kind`` (all_gather where rank 0
calls psum). Rank 0 must end with a clear error, never hang; for a wrong call, both ranks must."""
from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

import flfun.distributed as dist
import flfun.numpy as fnp
from flfun.distributed.devices import process_index
from flfun.lax import all_gather, psum
from flfun.distributed.pmap import pmap


def main(mode: str) -> None:
    dist.initialize()
    rank = process_index()
    f = pmap(lambda v: psum(v, "i"), axis_name="i")
    print(f"rank {rank} first psum {np.asarray(f(fnp.ones((1, 3))))[0].tolist()}", flush=True)
    x = fnp.ones((1, 3), dtype=fnp.float64)
    print(f"rank {rank} misbehaves from {time.time():.3f}", flush=True)
    t0 = time.monotonic()
    if rank == 1:
        if mode == "raise":
            raise ValueError("rank 1 failed on purpose")
        if mode == "hang":
            time.sleep(120)
        if mode in ("die", "die0"):
            os._exit(3 if mode == "die" else 0)
        if mode == "exit":
            sys.exit(0)
        if mode == "interrupt":
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(120)
        x = {"shape": fnp.ones((1, 4), dtype=fnp.float64), "dtype": fnp.ones((1, 3), dtype=fnp.float32)}.get(mode, x)
        if mode == "kind":
            f = pmap(lambda v: all_gather(v, "i"), axis_name="i")
    try:
        f(x)
        print(f"rank {rank} second collective returned", flush=True)
    except dist.CollectiveError as e:
        print(f"rank {rank} got {type(e).__name__} after {time.monotonic() - t0:.1f} s: {e}", flush=True)
        raise


if __name__ == "__main__":
    main(sys.argv[1])
