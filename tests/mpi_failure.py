"""Run under ``mpiexec -n 2 python tests/mpi_failure.py MODE`` (tests/test_distributed.py does). After one good
collective, rank 1 misbehaves while rank 0 enters the next one: ``raise`` (an exception before the collective),
``hang`` (never arrives) or ``die`` (the process exits). Rank 0 must end with a clear error, never hang."""
from __future__ import annotations

import os
import sys
import time

import numpy as np

import flfun.distributed as dist
import flfun.numpy as fnp
from flfun.devices import process_index
from flfun.lax import psum
from flfun.transforms.pmap import pmap


def main(mode: str) -> None:
    dist.initialize()
    rank = process_index()
    f = pmap(lambda v: psum(v, "i"), axis_name="i")
    print(f"rank {rank} first psum {np.asarray(f(fnp.ones((1, 3))))[0].tolist()}", flush=True)
    t0 = time.monotonic()
    if rank == 1:
        if mode == "raise":
            raise ValueError("rank 1 failed on purpose")
        if mode == "hang":
            time.sleep(120)
        if mode == "die":
            os._exit(3)
    try:
        f(fnp.ones((1, 3)))
    except dist.CollectiveError as e:
        print(f"rank {rank} got {type(e).__name__} after {time.monotonic() - t0:.1f} s: {e}", flush=True)
        raise


if __name__ == "__main__":
    main(sys.argv[1])
