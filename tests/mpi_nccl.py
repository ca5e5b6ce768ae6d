"""GPU collectives through NCCL (cupy), for a machine with a GPU: ``python tests/mpi_nccl.py``.

A one-GPU machine can only form a one-rank NCCL clique, so this checks that every NCCL call runs and returns the
right values for one rank, through the communicator and through the collective impls (``xp = cupy``) in a device
mesh, as pmap runs them. With several GPUs it uses all of them (one thread each) and checks against numpy.
Prints ``NCCL_OK`` at the end.
"""
from __future__ import annotations

import numpy as np


def main() -> None:
    import cupy
    from cupy.cuda import nccl

    from flfun.backends.base import Device
    from flfun.backends.xp.collective import impls
    from flfun.distributed.nccl import NcclCommunicator
    from flfun.distributed.spmd import Mesh, run_spmd
    n = cupy.cuda.runtime.getDeviceCount()
    print(f"{n} GPU(s); NCCL {nccl.get_version()}", flush=True)
    comm = NcclCommunicator.for_devices(list(range(n)))
    xs = [np.arange(n * 6, dtype=np.float32).reshape(n, 6) + 100 * r for r in range(n)]

    def member(r):
        with cupy.cuda.Device(r):
            x = cupy.asarray(xs[r])
            out = {"allreduce": comm.allreduce(r, x), "max": comm.allreduce(r, x, "max"),
                   "allgather": comm.allgather(r, x), "reduce_scatter": comm.reduce_scatter(r, x),
                   "alltoall": comm.alltoall(r, x), "permute": comm.permute(r, x, tuple((i, (i + 1) % n)
                                                                                        for i in range(n)))}
            cupy.cuda.Device(r).synchronize()
            return {k: cupy.asnumpy(v) for k, v in out.items()}
    import threading
    results = [None] * n
    threads = [threading.Thread(target=lambda r=r: results.__setitem__(r, member(r))) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(xs)
    for r in range(n):
        res = results[r]
        np.testing.assert_allclose(res["allreduce"], total)
        np.testing.assert_allclose(res["max"], np.maximum.reduce(xs))
        np.testing.assert_allclose(res["allgather"], np.stack(xs))
        np.testing.assert_allclose(res["reduce_scatter"], total[r])
        np.testing.assert_allclose(res["alltoall"], np.stack([x[r] for x in xs]))
        np.testing.assert_allclose(res["permute"], xs[(r - 1) % n])
    # the impls pmap calls, with xp = cupy, in a mesh of GPU devices
    devs = [Device("gpu", r, "cupy", cupy) for r in range(n)]
    mesh = Mesh(devs, ("i",), (n,))
    fns = impls(cupy)

    def task(r):
        with cupy.cuda.Device(r):
            x = cupy.asarray(xs[r])
            out = [fns["psum"](x, axes=("i",)), fns["all_gather"](x, axes=("i",), axis=1, axis_size=n, tiled=True),
                   fns["psum_scatter"](x, axes=("i",), scatter_dimension=0, axis_size=n, tiled=False),
                   fns["axis_index"](axes=("i",))]
            return [cupy.asnumpy(o) for o in out]
    outs = run_spmd(mesh, [(r, lambda r=r: task(r)) for r in range(n)])
    for r, (s, g, rs, i) in enumerate(outs):
        np.testing.assert_allclose(s, total)
        np.testing.assert_allclose(g, np.concatenate(xs, axis=1))
        np.testing.assert_allclose(rs, total[r])
        assert int(i) == r
    print("NCCL_OK", flush=True)


if __name__ == "__main__":
    main()
