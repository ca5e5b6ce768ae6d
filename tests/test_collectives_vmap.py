"""Collectives under vmap(axis_name=...): the same code pmap runs, checked against explicit reductions."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

import flfun as fl
import flfun.numpy as fnp
from flfun.lax import axis_index, axis_size, pmax, pmean, pmin, psum
from flfun.testing import arrays, check_grads, shapes


@given(arrays("float64", shapes(1, 3)))
def test_psum_pmean_pmax_pmin_match_reductions(x):
    xs = fnp.asarray(x)
    for coll, ref in ((psum, np.sum), (pmean, np.mean), (pmax, np.max), (pmin, np.min)):
        out = fl.vmap(lambda v: coll(v, "i"), axis_name="i")(xs)
        np.testing.assert_allclose(out, np.broadcast_to(ref(x, axis=0), x.shape), rtol=1e-12)


def test_every_reduction_collective_maps_over_a_pytree():
    tree = {"a": fnp.asarray(np.arange(6.0).reshape(3, 2)), "b": [fnp.asarray(np.arange(3.0))]}
    for coll, ref in ((psum, np.sum), (pmean, np.mean), (pmax, np.max), (pmin, np.min)):
        out = fl.vmap(lambda t: coll(t, "i"), axis_name="i")(tree)
        np.testing.assert_allclose(out["a"], np.broadcast_to(ref(np.asarray(tree["a"]), axis=0), (3, 2)))
        np.testing.assert_allclose(out["b"][0], np.full(3, ref(np.arange(3.0))))


def test_unmapped_operand_and_axis_index():
    out = fl.vmap(lambda v: psum(fnp.asarray(2.0), "i"), axis_name="i")(fnp.zeros(5))
    np.testing.assert_allclose(out, 10.0)
    np.testing.assert_allclose(fl.vmap(lambda v: axis_index("i"), axis_name="i")(fnp.zeros(4)), [0, 1, 2, 3])
    assert fl.vmap(lambda v: v * axis_size("i"), axis_name="i")(fnp.ones(3)).tolist() == [3.0, 3.0, 3.0]


def test_nested_named_axes():
    x = fnp.asarray(np.arange(6.0).reshape(2, 3))
    both = fl.vmap(fl.vmap(lambda v: psum(v, ("i", "j")), axis_name="j"), axis_name="i")(x)
    np.testing.assert_allclose(both, np.full((2, 3), 15.0))
    inner = fl.vmap(fl.vmap(lambda v: psum(v, "j"), axis_name="j"), axis_name="i")(x)
    np.testing.assert_allclose(inner, np.repeat(np.asarray(x).sum(1, keepdims=True), 3, 1))
    outer = fl.vmap(fl.vmap(lambda v: psum(v, "i"), axis_name="j"), axis_name="i")(x)
    np.testing.assert_allclose(outer, np.repeat(np.asarray(x).sum(0, keepdims=True), 2, 0))


def test_gradients_through_collectives():
    def f(x):
        normalised = fl.vmap(lambda v: v / psum(v * v, "i") + pmax(v, "i"), axis_name="i")(x)
        return fnp.sum(normalised * fnp.arange(1.0, 4.0, dtype="float64"))
    check_grads(f, (np.array([0.5, 2.0, -1.0]),), order=2)


def test_collective_outside_a_mapped_axis():
    with pytest.raises(NameError, match="psum: unbound axis name 'k'"):
        psum(fnp.ones(2), "k")
    with pytest.raises(NameError, match="unbound axis name 'k'"):
        fl.vmap(lambda v: psum(v, "k"), axis_name="i")(fnp.ones(2))
