"""Threads: the trace state is per thread (eager code never sees another thread's trace), concurrent first calls of
a jitted function trace and compile it once, and eager/grad/jit/vmap from many threads at once give exactly the
single-threaded results."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun.array import Array
from flfun.core import trace_state

N_THREADS = 8


def _run_threads(fns: list) -> list:
    """Run each of ``fns`` in its own thread, all started together; their results (re-raising the first error)."""
    with ThreadPoolExecutor(len(fns)) as pool:
        return [f.result(timeout=60) for f in [pool.submit(fn) for fn in fns]]


def test_eager_in_one_thread_while_another_traces():
    tracing, release = threading.Event(), threading.Event()

    def slow(x):
        tracing.set()
        assert release.wait(10)
        return x * 2.0

    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(fl.jit(slow), fnp.ones(3))
        assert tracing.wait(10)
        try:
            r = fnp.asarray([10, 20]) + 1.0
            g = fl.grad(lambda x: fnp.sum(x * x))(fnp.ones(2))
        finally:
            release.set()
        np.testing.assert_array_equal(fut.result(10), [2.0, 2.0, 2.0])
    assert type(r) is Array and float(r[0]) == 11.0
    assert type(g) is Array and g.tolist() == [2.0, 2.0]
    assert trace_state.eager and len(trace_state.stack) == 1


def test_first_calls_of_two_jitted_functions_overlap():
    both = threading.Barrier(2, timeout=10)   # each trace waits until the other one is tracing too

    def f(x):
        both.wait()
        return fnp.sin(x) + 1.0

    def g(x):
        both.wait()
        return fnp.cos(x) * 2.0

    x = fnp.linspace(0.0, 1.0, 5)
    rf, rg = _run_threads([lambda: fl.jit(f)(x), lambda: fl.jit(g)(x)])
    np.testing.assert_allclose(rf, np.sin(np.asarray(x)) + 1.0, rtol=1e-6)
    np.testing.assert_allclose(rg, np.cos(np.asarray(x)) * 2.0, rtol=1e-6)
    assert type(fnp.ones(2) + 1.0) is Array   # this thread stays eager


def test_concurrent_first_calls_trace_and_compile_once():
    entered = threading.Event()
    calls = []

    def f(x):
        calls.append(1)
        entered.set()
        threading.Event().wait(0.2)      # hold the trace so the other threads arrive while it runs
        return fnp.tanh(x) * 3.0

    jf = fl.jit(f)
    x = fnp.arange(6.0).reshape(2, 3)
    start = threading.Barrier(N_THREADS, timeout=10)

    def call():
        start.wait()
        return np.asarray(jf(x))
    outs = _run_threads([call] * N_THREADS)
    assert jf.trace_count == 1 and len(calls) == 1
    for o in outs:
        np.testing.assert_array_equal(o, np.tanh(np.arange(6.0, dtype=np.float32).reshape(2, 3)) * 3.0)
    closed = next(iter(jf._traces.values())).closed
    assert sum(1 for k in closed.cache if not isinstance(k[0], str)) == 1   # one executable


def _workloads():
    """``name -> fn(x)`` for every transform; jitted functions are made fresh per run so first calls race."""
    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)

    def fns():
        jit_loss = fl.jit(loss)
        jit_grad = fl.jit(fl.grad(loss))
        vm = fl.vmap(lambda r: fnp.sum(fnp.exp(-r * r)) * r)
        return {
            "eager": lambda w, x: fnp.mean(fnp.sin(x) * 2.0 + fnp.cos(x @ w).sum()),
            "grad": lambda w, x: fl.grad(loss)(w, x),
            "jit": jit_loss,
            "jit_grad": jit_grad,
            "vmap": lambda w, x: vm(x),
            "vmap_grad": lambda w, x: fl.vmap(fl.grad(lambda r: fnp.sum(fnp.sin(r) * r)))(x),
            "jit_vmap": fl.jit(lambda w, x: fl.vmap(lambda r: r @ w)(x)),
        }
    return fns


@pytest.mark.parametrize("seed", [0, 1])
def test_hammer_matches_single_thread(seed):
    rng = np.random.default_rng(seed)
    shapes = [(n, 3) for n in (1, 2, 4, 5)]
    w = fnp.asarray(rng.normal(size=(3, 3)).astype(np.float32))
    inputs = [fnp.asarray(rng.normal(size=s).astype(np.float32)) for s in shapes]
    make = _workloads()
    ref_fns = make()
    expected = {(name, i): np.asarray(fn(w, x)) for name, fn in ref_fns.items() for i, x in enumerate(inputs)}

    shared = make()        # one set of fresh jitted functions shared by all threads: their first calls race
    start = threading.Barrier(N_THREADS, timeout=10)

    def worker(t):
        start.wait()
        got = {}
        order = list(expected)
        np.random.default_rng(t).shuffle(order)
        for _ in range(3):
            for name, i in order:
                out = shared[name](w, inputs[i])
                assert type(out) is Array, (name, type(out))
                got.setdefault((name, i), []).append(np.asarray(out))
        assert trace_state.eager and len(trace_state.stack) == 1
        return got
    for got in _run_threads([lambda t=t: worker(t) for t in range(N_THREADS)]):
        for key, outs in got.items():
            for o in outs:
                np.testing.assert_array_equal(o, expected[key], err_msg=str(key))
    for name in ("jit", "jit_grad", "jit_vmap"):
        assert shared[name].trace_count == len(shapes), name
    assert type(fnp.ones(2) * 2.0) is Array
