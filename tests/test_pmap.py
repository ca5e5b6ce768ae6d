"""pmap on in-process CPU devices: pmap equals vmap with collectives, collective identities, gradients, errors,
sharded arrays, devices, failure handling, nesting and composition with jit/vmap/grad."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

from cpu_devices import cpu_devices
import flfun as fl
import flfun.numpy as fnp
from flfun.distributed.devices import (device_count, device_put, devices, local_device_count, process_count,
                                       process_index, set_cpu_device_count)
from flfun.distributed import CollectiveAbortedError, CollectiveTimeoutError, ThreadCommunicator
from flfun.lax import (all_gather, all_to_all, axis_index, axis_size, pmax, pmean, pmin, ppermute, psum,
                       psum_scatter)
from flfun.primitives import impl_override
from flfun.distributed.sharded import ShardedArray, device_put_replicated, device_put_sharded
from flfun.testing import check_grads
from flfun.distributed.pmap import pmap

COUNTS = (1, 2, 4, 8)


@pytest.fixture(scope="module", autouse=True)
def eight_devices():
    with cpu_devices(8):
        yield


def _mixed(v):
    n = axis_size("i")
    i = axis_index("i").astype(v.dtype)
    shift = [(k, (k + 1) % n) for k in range(n)]
    gathered = all_gather(v, "i")
    tiled = all_gather(v, "i", axis=-1, tiled=True)
    return (v * psum(v, "i") + pmax(v, "i") - pmin(v, "i") + pmean(v * i, "i")
            + fnp.sum(gathered * fnp.arange(n, dtype=v.dtype).reshape((n,) + (1,) * v.ndim), axis=0)
            + ppermute(v, "i", shift) + tiled[..., :v.shape[-1]] * i)


@st.composite
def mapped(draw, divisible=False):
    n = draw(st.sampled_from(COUNTS))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    if divisible:
        shape = (shape[0] * n,) + shape[1:]
    seed = draw(st.integers(0, 2**16))
    return np.random.default_rng(seed).standard_normal((n,) + shape)


@given(mapped())
def test_pmap_equals_vmap_with_collectives(x):
    expect = fl.vmap(_mixed, axis_name="i")(fnp.asarray(x))
    got = pmap(_mixed, axis_name="i")(x)
    assert isinstance(got, ShardedArray) and got.shape == x.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(expect), rtol=1e-12, atol=1e-12)


@given(mapped(divisible=True))
def test_reduce_scatter_and_all_to_all_match_vmap(x):
    def f(v):
        return (psum_scatter(v, "i", scatter_dimension=0, tiled=True),
                all_to_all(v, "i", 0, v.ndim - 1, tiled=True))
    for got, expect in zip(pmap(f, axis_name="i")(x), fl.vmap(f, axis_name="i")(fnp.asarray(x))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expect), rtol=1e-12, atol=1e-12)


@given(mapped(divisible=True))
def test_collective_identities(x):
    n = x.shape[0]

    def f(v):
        total = psum(v, "i")
        return (total, fnp.sum(all_gather(v, "i"), axis=0),
                all_gather(psum_scatter(v, "i", tiled=True), "i", tiled=True), pmean(v, "i") * n)
    total, gathered_sum, rs_ag, mean_n = pmap(f, axis_name="i")(x)
    for other in (gathered_sum, rs_ag, mean_n):
        np.testing.assert_allclose(np.asarray(other), np.asarray(total), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(total)[0], x.sum(0), rtol=1e-12, atol=1e-12)


def test_stacked_reduce_scatter_and_all_to_all():
    x = np.arange(4 * 4 * 3.0).reshape(4, 4, 3)
    out = pmap(lambda v: psum_scatter(v, "i"), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), x.sum(0))
    out = pmap(lambda v: all_to_all(v, "i", 0, 0), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), x.transpose(1, 0, 2))
    out = pmap(lambda v: axis_index("i") * 10, axis_name="i")(x)
    assert np.asarray(out).tolist() == [0, 10, 20, 30]


@pytest.mark.parametrize("n", [2, 4])
def test_grads_through_collectives_match_finite_differences(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 3))
    w = rng.standard_normal((n, 3))

    def per_device(v):
        return (fnp.sin(v) * psum(v * v, "i") + pmax(v, "i") + all_gather(v, "i")[0]
                + ppermute(v, "i", [(k, (k + 1) % n) for k in range(n)]) + psum_scatter(fnp.tile(v, n), "i",
                                                                                       tiled=True))
    f = pmap(per_device, axis_name="i")
    check_grads(lambda v: fnp.sum(f(v) * w), (x,), order=1)
    # grad inside pmap is the per-device derivative, as under vmap
    inner = pmap(fl.grad(lambda v: fnp.sum(per_device(v))), axis_name="i")(x)
    ref = fl.vmap(fl.grad(lambda v: fnp.sum(per_device(v))), axis_name="i")(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(inner), np.asarray(ref), rtol=1e-12)


def test_grad_of_broadcast_argument_and_replicated_output():
    xs = np.arange(12.0).reshape(4, 3)
    h = pmap(lambda v, w: (psum(fnp.sum(v * w), "i"), v * w), axis_name="i", in_axes=(0, None), out_axes=(None, 0))
    total, prod = h(xs, fnp.ones(3, dtype="float64"))
    assert isinstance(prod, ShardedArray) and not isinstance(total, ShardedArray) and float(total) == xs.sum()
    g = fl.grad(lambda w: h(xs, w)[0])(fnp.ones(3, dtype="float64"))
    np.testing.assert_allclose(np.asarray(g), xs.sum(0))
    closure = fl.grad(lambda w: fnp.sum(pmap(lambda v: v * w, axis_name="i")(xs)))(fnp.ones(3, dtype="float64"))
    np.testing.assert_allclose(np.asarray(closure), xs.sum(0))


def test_composes_with_jit_vmap_and_nesting():
    x = np.random.default_rng(1).standard_normal((2, 4, 3))
    f = lambda v: v * psum(v, "i") + axis_index("i")                   # noqa: E731
    ref = fl.vmap(fl.vmap(f, axis_name="i"))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(fl.vmap(pmap(f, axis_name="i"))(x)), np.asarray(ref), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fl.jit(pmap(f, axis_name="i"))(fnp.asarray(x[0]))), np.asarray(ref[0]),
                               rtol=1e-12)

    def g(v):
        return v + 100 * axis_index("i") + 10 * axis_index("j") + psum(v, ("i", "j")) + all_gather(v, ("i", "j"))[5]
    nested = pmap(pmap(g, axis_name="j"), axis_name="i")(x)
    expect = fl.vmap(fl.vmap(g, axis_name="j"), axis_name="i")(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(nested), np.asarray(expect), rtol=1e-12)
    w = np.random.default_rng(2).standard_normal(x.shape)
    h = lambda v: fnp.sin(v) * psum(v, "i") + psum(v * v, ("i", "j"))          # noqa: E731
    grad_p = fl.grad(lambda a: fnp.sum(pmap(pmap(h, axis_name="j"), axis_name="i")(a) * w))(x)
    grad_v = fl.grad(lambda a: fnp.sum(fl.vmap(fl.vmap(h, axis_name="j"), axis_name="i")(a) * w))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(grad_p), np.asarray(grad_v), rtol=1e-10)


def test_compiles_once_per_shard_shape_with_a_memory_plan():
    f = pmap(lambda v: fnp.tanh(v @ v.T) * psum(v, "i")[0, 0], axis_name="i")
    for _ in range(3):
        f(np.ones((4, 3, 3)))
    f(np.ones((2, 3, 3)))
    assert f.trace_count == 2          # one per shard signature (device count is part of it)
    f(np.ones((4, 5, 5)))
    assert f.trace_count == 3
    low = f.lower(np.ones((4, 3, 3)))
    assert "psum" in low.ir and low.compile().plan is not None


def test_static_and_pytree_arguments():
    f = pmap(lambda t, k, w: {"y": t["a"] * k + w}, axis_name="i", in_axes=({"a": 0}, None, None),
             static_broadcasted_argnums=1)
    out = f({"a": np.ones((2, 3))}, 3, fnp.arange(3.0, dtype="float64"))
    np.testing.assert_array_equal(np.asarray(out["y"]), np.ones((2, 3)) * 3 + np.arange(3.0))
    f({"a": np.ones((2, 3))}, 4, fnp.arange(3.0, dtype="float64"))
    assert f.trace_count == 2                                   # a new static value retraces
    with pytest.raises(ValueError, match="static argument 1 must be hashable"):
        f({"a": np.ones((2, 3))}, [1], np.zeros(3))


def test_sharded_arrays_behave_like_arrays():
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    y = pmap(lambda v: v * 2, axis_name="i")(x)
    assert isinstance(y, fl.Array) and y.shape == (4, 3) and y.dtype == np.float32
    assert [str(d) for d in y.devices] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    np.testing.assert_array_equal(y[1], x[1] * 2)
    np.testing.assert_array_equal(y[1:3, 0], x[1:3, 0] * 2)
    np.testing.assert_array_equal(np.asarray(y + fnp.ones(3)), x * 2 + 1)
    assert float(fnp.sum(y)) == x.sum() * 2 and "ShardedArray" in repr(y)
    fed = pmap(lambda v: v * 3, axis_name="i")(x)
    out = pmap(lambda v: v + 1, axis_name="i")(fed)
    assert fed._host is None                                 # consumed shard by shard, never assembled
    np.testing.assert_array_equal(np.asarray(out), x * 3 + 1)
    t = pmap(lambda v: v, axis_name="i", out_axes=1)(x)
    assert t.shape == (3, 4) and np.array_equal(np.asarray(t), x.T)
    back = pmap(lambda v: v * 2, axis_name="i", in_axes=1)(t)
    np.testing.assert_array_equal(np.asarray(back), x * 2)


def test_devices_and_device_put():
    devs = devices()
    assert len(devs) == device_count() == local_device_count() == 8
    assert process_index() == 0 and process_count() == 1
    a = device_put(fnp.arange(3.0), devs[2])
    assert a.device is devs[2] and (a * 2.0).device is devs[2] and fnp.sum(a).device is devs[2]
    assert fnp.arange(3.0).to_device(devs[1]).device is devs[1]
    with pytest.raises(ValueError, match="operands live on different devices"):
        a + fnp.arange(3.0)
    np.testing.assert_array_equal(device_put(a, devs[0]) + fnp.arange(3.0), [0.0, 2.0, 4.0])
    tree = device_put({"w": np.ones(2), "b": 1.0}, devs[3])
    assert tree["w"].device is devs[3] and tree["b"].device is devs[3]
    s = device_put_sharded([fnp.zeros(2), fnp.ones(2)], devs[:2])
    assert isinstance(s, ShardedArray) and s.shape == (2, 2) and s.devices == devs[:2]
    r = device_put_replicated({"w": fnp.ones(3)}, devs[:4])
    assert r["w"].shape == (4, 3) and r["w"].shards[3].device is devs[3]
    np.testing.assert_array_equal(pmap(lambda v: psum(v, "i"), axis_name="i")(r["w"]), np.full((4, 3), 4.0))
    with pytest.raises(ValueError, match="need one shard per device"):
        device_put_sharded([fnp.ones(2)], devs[:2])
    with pytest.raises(ValueError, match="n must be a positive int"):
        set_cpu_device_count(0)


def test_errors():
    with pytest.raises(ValueError, match="the mapped axis has size 9, which needs 9 devices, but only 8"):
        pmap(lambda v: v)(np.ones((9, 2)))
    with pytest.raises(ValueError, match="but devices= lists 2"):
        pmap(lambda v: v, devices=devices()[:2])(np.ones((3, 2)))
    with pytest.raises(NameError, match="psum: unbound axis name 'k'"):
        pmap(lambda v: psum(v, "k"), axis_name="i")(np.ones((2, 2)))
    with pytest.raises(NameError, match="all_gather: unbound axis name 'i'|axis_size: unbound axis name 'i'"):
        all_gather(fnp.ones(2), "i")
    with pytest.raises(ValueError, match="mapped axes have different sizes"):
        pmap(lambda a, b: a + b)(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="no argument is mapped"):
        pmap(lambda a: a, in_axes=None)(np.ones(3))
    with pytest.raises(ValueError, match="in_axes=2 is out of bounds"):
        pmap(lambda a: a, in_axes=2)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="ppermute: perm"):
        pmap(lambda v: ppermute(v, "i", [(0, 1), (1, 1)]), axis_name="i")(np.ones((2, 2)))
    with pytest.raises(ValueError, match="psum_scatter: dimension 0 of f64\\[3\\] must be divisible"):
        pmap(lambda v: psum_scatter(v, "i", tiled=True), axis_name="i")(np.ones((2, 3)))
    with pytest.raises(ValueError, match="pmap: fun must be callable"):
        pmap(3)


def _failing_sin(x, out=None):
    if np.any(np.asarray(x) < 0):
        raise FloatingPointError("negative input on this device")
    return np.sin(x, out=out)


def _slow_sin(x, out=None):
    if np.any(np.asarray(x) < 0):
        time.sleep(1.0)
    return np.sin(x, out=out)


def test_a_failing_device_raises_instead_of_hanging():
    f = pmap(lambda v: psum(fnp.sin(v), "i"), axis_name="i")
    x = np.ones((4, 3))
    x[2] = -1.0
    with impl_override("sin", "numpy", _failing_sin):
        t0 = time.monotonic()
        with pytest.raises(FloatingPointError, match="negative input"):
            f(x)
        assert time.monotonic() - t0 < 5
        np.testing.assert_allclose(np.asarray(f(np.ones((4, 3)))), 4 * np.sin(1.0))   # usable again
    comm = ThreadCommunicator(2, timeout=0.2)
    with pytest.raises(CollectiveTimeoutError, match=r"waited .* \(timeout 0.2 s\)"):
        comm.allreduce(0, np.ones(2))
    comm.reset()
    comm.abort("device 1 exploded")
    with pytest.raises(CollectiveAbortedError, match="because device 1 exploded"):
        comm.allgather(0, np.ones(2))


def test_thread_allreduce_into_a_strided_buffer():
    comm, x = ThreadCommunicator(2), np.arange(12.0).reshape(3, 4)
    outs = [np.zeros((4, 3)).T, np.zeros((4, 3)).T]         # non-contiguous destinations
    threads = [threading.Thread(target=comm.allreduce, args=(r, x * (r + 1)), kwargs={"out": outs[r]})
               for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in outs:
        np.testing.assert_array_equal(out, 3 * x)


def test_a_slow_device_times_out(monkeypatch):
    from flfun.distributed import communicator
    monkeypatch.setattr(communicator, "_timeout", 0.3)
    f = pmap(lambda v: psum(fnp.sin(v), "i"), axis_name="i", devices=devices()[4:6])
    x = np.ones((2, 3))
    x[1] = -1.0
    with impl_override("sin", "numpy", _slow_sin):
        with pytest.raises(CollectiveTimeoutError, match="psum over axis 'i'"):
            f(x)


def _regression(seed=0):
    rng = np.random.default_rng(seed)
    params = {"w": fnp.asarray(rng.standard_normal((7, 3)).astype(np.float32)), "b": fnp.zeros(3)}
    x = rng.standard_normal((4, 8, 7)).astype(np.float32)
    y = rng.standard_normal((4, 8, 3)).astype(np.float32)
    return params, x, y


def test_zero_matches_unsharded_training_and_shards_the_state():
    from flfun import optim
    from flfun.optim.sharded import sharded, state_bytes_per_device
    params, x, y = _regression()
    loss = lambda p, a, b: fnp.mean((a @ p["w"] + p["b"] - b) ** 2)       # noqa: E731
    base = optim.adamw(1e-2, weight_decay=0.1)
    zopt = sharded(base, "i", max_norm=0.5)
    clipped = optim.chain(optim.clip_by_global_norm(0.5), base)

    def dp_step(p, s, a, b):
        u, s = clipped.update(pmean(fl.grad(loss)(p, a, b), "i"), s, p)
        return optim.apply_updates(p, u), s

    def zero_step(p, s, a, b):
        u, s = zopt.update(fl.grad(loss)(p, a, b), s, p)
        return optim.apply_updates(p, u), s
    p1, s1 = params, clipped.init(params)
    p2, s2 = params, pmap(zopt.init, "i", in_axes=None, axis_size=4)(params)
    p3, s3 = params, fl.vmap(zopt.init, axis_name="i", in_axes=None, axis_size=4)(params)
    dp = pmap(dp_step, "i", in_axes=(None, None, 0, 0), out_axes=(None, None))
    zp = pmap(zero_step, "i", in_axes=(None, 0, 0, 0), out_axes=(None, 0))
    zv = fl.vmap(zero_step, axis_name="i", in_axes=(None, 0, 0, 0), out_axes=(None, 0))
    for _ in range(5):
        p1, s1 = dp(p1, s1, x, y)
        p2, s2 = zp(p2, s2, x, y)
        p3, s3 = zv(p3, s3, fnp.asarray(x), fnp.asarray(y))
    for k in params:
        np.testing.assert_allclose(np.asarray(p2[k]), np.asarray(p1[k]), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(np.asarray(p3[k]), np.asarray(p2[k]), rtol=1e-6, atol=1e-7)
    n_params = 7 * 3 + 3                                       # 24 floats: 8 bytes each in Adam, + the count
    assert state_bytes_per_device(base.init(params)) == 8 * n_params + 4
    assert state_bytes_per_device(s2) == 8 * n_params // 4 + 4
    s5 = pmap(zopt.init, "i", in_axes=None, axis_size=5, devices=devices()[:5])(params)
    assert state_bytes_per_device(s5) == 8 * 5 + 4             # 24 padded to 25: 5 per device


def test_data_parallel_training_matches_single_device():
    import flfun.random as fr
    from models import train as T
    from models.data_parallel import DataParallel
    task = T.make_task("mlp", 0)
    model = task.init(fr.key(0))
    opt = T.make_optimizer(4, 2e-3, 1e-4, 2)
    step = T.make_step(task.loss_fn, opt, True)
    dp = DataParallel(task.loss_fn, opt, devices=4)
    m1, s1, m2, s2 = model, opt.init(model), model, dp.init(model)
    for k in range(4):
        xb, yb = task.batch(k, 64)
        m1, s1, l1 = step(m1, s1, fnp.asarray(xb), fnp.asarray(yb))
        m2, s2, l2 = dp.step(m2, s2, xb, yb)
        assert float(l2) == pytest.approx(float(l1), rel=2e-5)
    for a, b in zip(fl.tree_leaves(m1), fl.tree_leaves(m2)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="global batch of 30 does not split evenly over 4 devices"):
        dp.shard_batch(np.ones((30, 2)))


def test_psum_of_a_pytree_is_one_collective_per_dtype():
    tree = {"w": np.arange(12.0, dtype=np.float32).reshape(4, 3) / 7, "b": np.ones((4, 2), np.float32),
            "s": np.arange(4.0, dtype=np.float32), "n": np.arange(4, dtype=np.int32).reshape(4, 1)}
    f = pmap(lambda t: psum(t, "i"), "i")
    ir = f.lower(tree).ir
    assert ir.count("psum[") == 2                 # the float32 leaves as one flat buffer, the int32 leaf alone
    out = f(tree)
    for k, v in tree.items():
        np.testing.assert_array_equal(np.asarray(out[k]), np.broadcast_to(v.sum(0), v.shape))
    g = fl.vmap(lambda t: psum(t, "i"), axis_name="i")(tree)
    assert all(np.array_equal(np.asarray(g[k]), np.asarray(out[k])) for k in tree)
