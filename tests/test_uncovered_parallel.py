"""Paths of pmap, the collectives, sharded arrays, devices and the sharded optimizer that the rest of the suite
never reached: user-input errors (exact messages) and small features checked against a reference."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from cpu_devices import cpu_devices
import flfun as fl
import flfun.numpy as fnp
from flfun.backends.base import Device
from flfun.distributed.devices import device_put, devices
from flfun.distributed import ThreadCommunicator, get_timeout, set_timeout
from flfun.lax import all_to_all, axis_index, ppermute, psum_scatter
from flfun.optim import sgd
from flfun.optim.sharded import sharded
from flfun.distributed.sharded import ShardedArray, device_put_sharded
from flfun.distributed.pmap import pmap


@pytest.fixture(scope="module", autouse=True)
def four_devices():
    with cpu_devices(4):
        yield


X = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def _ident(v):
    return v


@pytest.mark.parametrize("make, message", [
    (lambda: pmap(_ident, axis_size=0), "pmap: axis_size must be a positive int or None, got 0"),
    (lambda: pmap(_ident, axis_size=2.0), "pmap: axis_size must be a positive int or None, got 2.0"),
    (lambda: pmap(_ident, static_broadcasted_argnums=(1.0,)),
     r"pmap: static_broadcasted_argnums must be ints, got \(1.0,\)"),
    (lambda: pmap(_ident)(v=X), r"pmap: keyword arguments are not supported \(got \['v'\]\); pass them by position"),
    (lambda: pmap(_ident, in_axes=None)(X), r"pmap: no argument is mapped \(all in_axes are None\); pass axis_size"),
    (lambda: pmap(_ident, axis_size=3)(X), r"pmap: mapped axes have different sizes \(leaf 0: 2, axis_size=3\)"),
    (lambda: pmap(lambda v, k: v * k[0], static_broadcasted_argnums=1)(X, [3.0]),
     "pmap: static argument 1 must be hashable, got list"),
    (lambda: pmap(_ident, in_axes=1.5)(X), "pmap: in_axes entries must be int or None, got 1.5"),
    (lambda: pmap(_ident, out_axes=True)(X), "pmap: out_axes entries must be int or None, got True"),
    (lambda: pmap(_ident, devices=devices()[:3])(X),
     "pmap: the mapped axis has size 2, which needs 2 devices, but devices= lists 3"),
    (lambda: pmap(lambda v: pmap(_ident, devices=devices()[:2])(v))(np.ones((2, 2), np.float32)),
     "pmap: devices= can only be given to the outermost pmap"),
    (lambda: pmap(lambda v: pmap(_ident, "j")(v) + pmap(_ident, "j")(v[:1]), "i")(np.ones((2, 2), np.float32)),
     "pmap: nested axis 'j' is used with sizes 2 and 1"),
    (lambda: pmap(lambda v: pmap(_ident)(v))(np.ones((2, 3), np.float32)),
     r"pmap: the mapped axis has size 2 x 3 \(nested axis <unnamed>\), which needs 6 devices, but only 4 are "),
])
def test_pmap_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("static, in_axes", [(1, 0), (-1, (0, None)), ((1,), (0, 0))])
def test_pmap_static_broadcasted_argnums(static, in_axes):
    f = pmap(lambda v, k: v * k, static_broadcasted_argnums=static, in_axes=in_axes)
    np.testing.assert_array_equal(np.asarray(f(X, 3.0)), X * 3.0)
    np.testing.assert_array_equal(np.asarray(f(X, 3.0)), X * 3.0)
    assert f.trace_count == 1
    f(X, 2.0)
    assert f.trace_count == 2                  # a new static value is a new program


def test_pmap_axis_size_without_mapped_arguments():
    out = pmap(lambda v: v + fl.lax.axis_index("i").astype(v.dtype), "i", in_axes=None, axis_size=3)(X)
    np.testing.assert_array_equal(np.asarray(out), X[None] + np.arange(3.0, dtype=np.float32)[:, None, None])


def test_sharded_array_and_mesh():
    y = pmap(lambda v: v * 2)(X)
    assert isinstance(y, ShardedArray) and y.block_until_ready() is y
    assert y.device is fl.core.default_device() and y.devices == devices()[:2]
    assert repr(pmap(_ident).lower(X).mesh) == f"Mesh({{<unnamed>: 2}}, {devices()[:2]})"
    s = ShardedArray([fnp.asarray(X[:, 0]), fnp.asarray(X[:, 1]), fnp.asarray(X[:, 2])], axis=1)
    assert s.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(s), X)


@pytest.mark.parametrize("shards, axis, message", [
    ([], 0, "ShardedArray: shards must not be empty"),
    ([fnp.ones(2), fnp.ones(3)], 0, r"ShardedArray: shards must share shape and dtype, got \['f32\[2\]', 'f32\[3\]'\]"),
    ([fnp.ones(2), fnp.ones(2, dtype="int32")], 0, "ShardedArray: shards must share shape and dtype"),
    ([np.ones(2), np.ones(3)], 0, r"ShardedArray: shards must share shape and dtype, got \['f64\[2\]', 'f64\[3\]'\]"),
    ([fnp.ones(2)], 2, "ShardedArray: axis 2 is out of range for shards of rank 1"),
    ([fnp.ones(2)], -1, "ShardedArray: axis -1 is out of range for shards of rank 1"),
])
def test_sharded_array_checks(shards, axis, message):
    with pytest.raises(ValueError, match=message):
        ShardedArray(shards, axis)


@pytest.mark.parametrize("call, message", [
    (lambda: device_put(X, "cpu:1"), "device_put: device must be a flfun Device"),
    (lambda: device_put(X, Device("cpu", 0, "numpy", np, process_index=1)),
     r"device_put: device cpu:0 belongs to process 1, not this one \(0\)"),
    (lambda: device_put_sharded([X, (X,)], devices()[:2]),
     "device_put_sharded: the shards have different pytree structures"),
    (lambda: set_timeout(0), "set_timeout: seconds must be a positive number, got 0"),
    (lambda: set_timeout(True), "set_timeout: seconds must be a positive number, got True"),
    (lambda: sharded(lambda g: g, "i"), "sharded: optimizer must be a GradientTransformation, got <function"),
    (lambda: sharded(sgd(0.1), "i", max_norm=-1.0), "sharded: max_norm must be a positive number or None, got -1.0"),
])
def test_device_and_setup_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_device_put_under_jit_passes_tracers_through():
    out = fl.jit(lambda v: device_put(v, devices()[1]) * 2)(fnp.asarray(X))
    np.testing.assert_array_equal(np.asarray(out), X * 2)


@pytest.mark.parametrize("fn, message", [
    (lambda v: ppermute(v, ("i", "j"), [(0, 1)]),
     r"ppermute: axis_name must name one mapped axis, got \('i', 'j'\)"),
    (lambda v: ppermute(v, "i", [0, 1]),
     r"ppermute: perm must be a sequence of \(source, destination\) pairs, got \[0, 1\]"),
    (lambda v: all_to_all(v, ("i", "j"), 0, 0), r"all_to_all: axis_name must name one mapped axis"),
    (lambda v: all_to_all(v, "i", 0, 0), r"all_to_all: dimension 0 of f32\[3\] must equal the axis size 2"),
    (lambda v: all_to_all(v, "i", 0, 0, tiled=True),
     r"all_to_all: dimension 0 of f32\[3\] must be divisible by the axis size 2 \(tiled=True\)"),
    (lambda v: psum_scatter(v, "i"),
     r"psum_scatter: dimension 0 of f32\[3\] must equal the axis size 2 \(or pass tiled=True\)"),
    (lambda v: psum_scatter(v, "i", tiled=True),
     r"psum_scatter: dimension 0 of f32\[3\] must be divisible by the axis size 2 \(tiled=True\)"),
    (lambda v: axis_index(()), r"axis_index: axis_name must name at least one mapped axis, got \(\)"),
])
@pytest.mark.parametrize("mapper", ["vmap", "pmap"])
def test_collective_errors(fn, message, mapper):
    """vmap (whose batching rules skip the abstract evaluation) and pmap report the same misuse the same way."""
    with pytest.raises(ValueError, match=message):
        getattr(fl, mapper)(fn, axis_name="i")(fnp.asarray(X))


def test_multi_axis_collectives_match_a_reference():
    y = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    nested = fl.vmap(fl.vmap(lambda v: axis_index(("i", "j")), axis_name="j"), axis_name="i")(y)
    np.testing.assert_array_equal(np.asarray(nested), np.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match=r"psum_scatter: dimension 0 of f32\[4\] must equal the axis size 6 "):
        fl.vmap(fl.vmap(lambda v: psum_scatter(v, ("i", "j")), axis_name="j"), axis_name="i")(y)
    z = np.arange(72.0, dtype=np.float32).reshape(2, 3, 6, 2)
    out = fl.vmap(fl.vmap(lambda v: psum_scatter(v, ("i", "j")), axis_name="j"), axis_name="i")(z)
    np.testing.assert_allclose(np.asarray(out), z.sum((0, 1)).reshape(2, 3, 2))


def test_set_timeout_applies_to_new_communicators():
    before = get_timeout()
    try:
        set_timeout(12)
        assert get_timeout() == 12.0 and ThreadCommunicator(2).timeout == 12.0
    finally:
        set_timeout(before)


def test_pmap_without_threadpoolctl(monkeypatch):
    """threadpoolctl is optional: without it BLAS is reached through OpenBLAS's own API (or left alone) and pmap
    still runs."""
    from flfun.distributed import threads
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)      # import fails
    threads.blas_libraries.cache_clear()
    try:
        w = np.arange(9.0, dtype=np.float32).reshape(3, 3)
        out = pmap(lambda v: fnp.matmul(v, fnp.asarray(w)))(X)
        np.testing.assert_allclose(np.asarray(out), X @ w)
        assert all(type(lib).__name__ == "_OpenBLAS" for lib in threads.blas_libraries())
    finally:
        threads.blas_libraries.cache_clear()


def test_device_put_replicated_takes_any_iterable_of_devices():
    out = fl.device_put_replicated({"w": fnp.arange(3.0)}, (d for d in devices()[:4]))
    assert out["w"].shape == (4, 3)
    np.testing.assert_array_equal(np.asarray(out["w"]), np.tile(np.arange(3.0), (4, 1)))
