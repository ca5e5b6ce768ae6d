"""The SPMD runner's input checks and the per-process CPU thread share (``flfun.distributed.threads``), in one
process: a size-0 pmap axis is a clear error, and thread counts are validated and defaulted as documented."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import flfun.numpy as fnp
from flfun.distributed import threads
from flfun.distributed.mpi import _spec
from flfun.distributed.pmap import pmap


@pytest.mark.parametrize("shape", [(0,), (0, 3), (0, 2, 2)])
def test_pmap_over_a_size_0_axis_is_a_clear_error(shape):
    with pytest.raises(ValueError, match=r"pmap: the mapped axis .* has size 0"):
        pmap(lambda v: v * 2, axis_name="i")(fnp.ones(shape))


def test_pmap_size_0_axis_size_is_rejected():
    with pytest.raises(ValueError, match="pmap: axis_size must be a positive int"):
        pmap(lambda: fnp.zeros(2), axis_size=0)()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None, True])
def test_set_cpu_threads_rejects_non_positive_ints(bad):
    with pytest.raises(ValueError, match="set_cpu_threads: n must be a positive int"):
        threads.set_cpu_threads(bad)


def test_set_cpu_threads_sets_the_share_pmap_splits(monkeypatch):
    monkeypatch.setattr(threads, "count", threads.count)       # restored after the test
    threads.set_cpu_threads(1)
    assert threads.count == 1
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(pmap(lambda v: v * 2)(fnp.asarray(x[:1]))), x[:1] * 2)


@pytest.mark.parametrize("env,ranks,expect", [
    ({}, 1, threads.CORES), ({}, 2, max(1, threads.CORES // 2)), ({}, 10 ** 6, 1),
    ({"FLFUN_CPU_THREADS": "3"}, 2, 3), ({"OPENBLAS_NUM_THREADS": "1"}, 2, None), ({"OMP_NUM_THREADS": "4"}, 1, None),
    ({"FLFUN_CPU_THREADS": "2", "OMP_NUM_THREADS": "4"}, 1, 2)])
def test_default_cpu_threads_is_the_hosts_share_unless_set(monkeypatch, env, ranks, expect):
    for v in ("FLFUN_CPU_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(v, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert threads.default_cpu_threads(ranks) == expect


@pytest.mark.parametrize("bad", ["0", "x", "-2", ""])
def test_bad_flfun_cpu_threads_is_a_clear_error(monkeypatch, bad):
    monkeypatch.setenv("FLFUN_CPU_THREADS", bad)
    with pytest.raises(ValueError, match="FLFUN_CPU_THREADS must be a positive int"):
        threads.default_cpu_threads(2)


@pytest.mark.parametrize("x,text", [(np.zeros((1, 3), np.float32), "f32[1,3]"), (np.zeros(4, np.int64), "s64[4]"),
                                    (np.zeros((), np.uint8), "u8[]"), (np.zeros(2, bool), "bool[2]"),
                                    (np.zeros((2, 0), np.complex128), "c128[2,0]")])
def test_collective_descriptors_print_dtype_and_shape(x, text):
    assert _spec(x) == text


def test_blas_threads_are_set_without_threadpoolctl(monkeypatch):
    """The fallback drives numpy's OpenBLAS through its C API (what a fresh install without threadpoolctl uses)."""
    with open("/proc/self/maps") as f:
        if "openblas" not in f.read().lower():
            pytest.skip("numpy's BLAS is not OpenBLAS")
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    threads.blas_libraries.cache_clear()
    try:
        libs = threads.blas_libraries()
        assert libs and all(type(lib).__name__ == "_OpenBLAS" for lib in libs)
        before = [lib.num_threads for lib in libs]
        with threads.blas_threads(1):
            assert [lib.num_threads for lib in libs] == [1] * len(libs)
        assert [lib.num_threads for lib in libs] == before
    finally:
        threads.blas_libraries.cache_clear()
