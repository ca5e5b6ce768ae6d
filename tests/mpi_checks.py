"""Run under ``mpiexec -n P python tests/mpi_checks.py`` (tests/test_distributed.py does): collectives and pmap
across processes against vmap on the whole array, gradients, a short data-parallel training run against
single-process training, ZeRO-1 against plain data parallelism, and each rank's CPU thread share. Prints ``MPI_CHECKS_OK <rank>`` at the end."""
from __future__ import annotations

import numpy as np

import flfun as fl
import flfun.distributed as dist
import flfun.numpy as fnp
from flfun.distributed import threads
from flfun.distributed.devices import devices, local_device_count, process_count, process_index
from flfun.lax import (all_gather, all_to_all, axis_index, axis_size, pmax, pmean, pmin, ppermute, psum,
                       psum_scatter)
from flfun.distributed.pmap import pmap


def mixed(v):
    n = axis_size("i")
    i = axis_index("i").astype(v.dtype)
    return (v * psum(v, "i") + pmax(v, "i") - pmin(v, "i") + pmean(v * i, "i")
            + fnp.sum(all_gather(v, "i"), axis=0) + ppermute(v, "i", [(k, (k + 1) % n) for k in range(n)])
            + psum_scatter(fnp.tile(v, (n, 1)), "i", tiled=True)
            + all_to_all(fnp.tile(v, (n, 1)), "i", 0, 0, tiled=True)[v.shape[0]:2 * v.shape[0]] * i)


def check_collectives(rank: int, size: int, local: int) -> None:
    x = np.random.default_rng(0).standard_normal((size, 2, 3))
    mine = x[rank * local:(rank + 1) * local]
    got = pmap(mixed, axis_name="i")(mine)
    expect = np.asarray(fl.vmap(mixed, axis_name="i")(fnp.asarray(x)))[rank * local:(rank + 1) * local]
    np.testing.assert_allclose(np.asarray(got), expect, rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(1).standard_normal(x.shape)
    g = fl.grad(lambda v: fnp.sum(pmap(mixed, axis_name="i")(v) * w[rank * local:(rank + 1) * local]))(mine)
    g_ref = fl.grad(lambda v: fnp.sum(fl.vmap(mixed, axis_name="i")(v) * w))(fnp.asarray(x))
    # the transposed program runs on every rank, so each rank's gradient holds all ranks' contributions
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref)[rank * local:(rank + 1) * local], rtol=1e-10,
                               atol=1e-10)


def check_training(rank: int) -> None:
    import flfun.random as fr
    from models import train as T
    from models.data_parallel import DataParallel, zero_optimizer
    from flfun.optim.sharded import state_bytes_per_device
    task = T.make_task("mlp", 0)
    model0 = task.init(fr.key(0))
    steps, bs = 4, 64
    opt = T.make_optimizer(steps, 2e-3, 1e-4, 2)
    ref_step = T.make_step(task.loss_fn, opt, True)
    m, s, ref = model0, opt.init(model0), []
    for k in range(steps):
        x, y = task.batch(k, bs)
        m, s, loss = ref_step(m, s, fnp.asarray(x), fnp.asarray(y))
        ref.append(float(loss))
    dp = DataParallel(task.loss_fn, opt)
    m1, s1, losses = model0, dp.init(model0), []
    zopt = zero_optimizer(steps, 2e-3, 1e-4, 2)
    dz = DataParallel(task.loss_fn, zopt, zero=True)
    m2, s2, zlosses = model0, dz.init(model0), []
    for k in range(steps):
        x, y = task.batch(k, bs)
        m1, s1, loss = dp.step(m1, s1, x, y)
        losses.append(float(loss))
        m2, s2, loss = dz.step(m2, s2, x, y)
        zlosses.append(float(loss))
    np.testing.assert_allclose(losses, ref, rtol=2e-5)
    np.testing.assert_allclose(zlosses, losses, rtol=2e-5)
    for a, b, c in zip(fl.tree_leaves(m), fl.tree_leaves(m1), fl.tree_leaves(m2)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(c), np.asarray(b), rtol=1e-4, atol=1e-6)
    full, shard = state_bytes_per_device(s1), state_bytes_per_device(s2)
    n_params = sum(int(np.prod(p.shape)) for p in fl.tree_leaves(model0))
    assert full >= 8 * n_params and shard <= 8 * (-(-n_params // dz.size)) + 64, (full, shard, n_params)


def main() -> None:
    dist.initialize()
    rank, procs, local = process_index(), process_count(), local_device_count()
    assert len(devices()) == procs * local and procs > 1, (devices(), procs)
    assert [d.process_index for d in devices()] == sorted(p for p in range(procs) for _ in range(local))
    want = threads.default_cpu_threads(procs)         # the tests start every rank on this host
    assert threads.count == (threads.CORES if want is None else want), (threads.count, want)
    blas = [lib.num_threads for lib in threads.blas_libraries()]      # [] without threadpoolctl
    assert want is None or all(k == want for k in blas), (blas, want)
    check_collectives(rank, procs * local, local)
    if local == 1:
        check_training(rank)
    print(f"MPI_CHECKS_OK {rank}", flush=True)


if __name__ == "__main__":
    main()
