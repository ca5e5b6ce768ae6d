"""Paths of pmap and the collectives that the main suites do not reach: a collective over an outer named axis
while an inner vmap maps another one (its dimension params shift past the inner members), and grad of a pmapped
function that closes over a value the eager tape is differentiating (the value becomes an input of pmap)."""
from __future__ import annotations

import numpy as np
import pytest

from cpu_devices import cpu_devices
import flfun as fl
import flfun.numpy as fnp
from flfun.distributed.devices import device_count
from flfun.lax import all_gather, all_to_all, psum_scatter


@pytest.fixture(scope="module", autouse=True)
def _four_devices():
    with cpu_devices(max(device_count(), 4)):
        yield


def _outer_i_inner_j(fn, x):
    """``fn`` mapped over axis 'i' (dimension 0) and, inside, over 'j' (dimension 1 of x)."""
    return np.asarray(fl.vmap(fl.vmap(fn, axis_name="j"), axis_name="i")(fnp.asarray(x)))


def test_collectives_over_an_outer_axis_inside_an_inner_vmap():
    x = np.arange(24.0).reshape(2, 3, 4)
    out = _outer_i_inner_j(lambda v: all_gather(v, "i", axis=1), x)           # member (i, j) gets x[:, j].T
    np.testing.assert_array_equal(out, np.broadcast_to(x.transpose(1, 2, 0), (2, 3, 4, 2)))
    y = np.arange(48.0).reshape(2, 3, 2, 4)
    out = _outer_i_inner_j(lambda v: psum_scatter(v, "i", scatter_dimension=1, tiled=True), y)
    np.testing.assert_array_equal(out, np.stack([y.sum(0)[:, :, 2 * i:2 * i + 2] for i in range(2)]))
    z = np.arange(24.0).reshape(2, 3, 2, 2)
    out = _outer_i_inner_j(lambda v: all_to_all(v, "i", 0, 1), z)          # member (i, j) gets z[:, j, i].T
    np.testing.assert_array_equal(out, np.stack([np.stack([z[:, j, i].T for j in range(3)]) for i in range(2)]))


def test_grad_through_a_pmap_closing_over_the_differentiated_value():
    xs = np.arange(12.0).reshape(4, 3)
    w0 = np.array([1.0, 2.0, 3.0])

    def loss(w):
        return fnp.sum(fl.pmap(lambda x: fnp.sin(x * w), axis_name="i")(fnp.asarray(xs)))
    np.testing.assert_allclose(fl.grad(loss)(fnp.asarray(w0)), (np.cos(xs * w0) * xs).sum(0), rtol=1e-12)
