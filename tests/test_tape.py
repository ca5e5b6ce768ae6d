"""The eager tape (fast path of grad/vjp) derives its VJPs from the jvp/transpose rules; here it must agree with
linearize + transpose on every differentiable op-table record."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.config import config
from op_table import RECORDS

DIFF = [(r, d) for r in RECORDS for d in ("float64", "complex128") if r.diff and d in r.dtypes]


def _vjp(f, args, ct_seed, tape: bool):
    old = config.eager_tape
    config.eager_tape = tape
    try:
        out, f_vjp = fl.vjp(f, *args)
        rng = np.random.default_rng(ct_seed)
        cts = fl.tree_map(lambda o: fnp.asarray((rng.standard_normal(o.shape) + (1j * rng.standard_normal(o.shape)
                                                 if o.dtype.kind == "c" else 0)).astype(o.dtype)
                                                if o.dtype.kind in "fc" else np.zeros(o.shape, o.dtype)), out)
        return out, f_vjp(cts)
    finally:
        config.eager_tape = old


@pytest.mark.parametrize("rec,dtype", DIFF, ids=[r.name + ("" if d == "float64" else "-complex") for r, d in DIFF])
@given(data=st.data())
def test_tape_matches_linearize(rec, dtype, data):
    args, params = data.draw(rec.diff_args(dtype))
    f = lambda *a: rec.fn(*a, **params)  # noqa: E731
    xs = [fnp.asarray(a) for a in args]
    out_t, ct_t = _vjp(f, xs, 0, tape=True)
    out_l, ct_l = _vjp(f, xs, 0, tape=False)
    for a, b in zip(fl.tree_leaves(out_t), fl.tree_leaves(out_l)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(fl.tree_leaves(ct_t), fl.tree_leaves(ct_l)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=rec.name)


def test_tape_handles_fanout_constants_and_unused_inputs():
    def f(x, y, z):
        a = x * x
        return fnp.sum(a + a * 2.0 + fnp.sin(a)) + 3.0
    x, y, z = fnp.asarray([1.0, 2.0]), fnp.asarray(5.0), fnp.asarray([1, 2])
    gx, gy = fl.grad(f, argnums=(0, 1))(x, y, z)
    expected = 2 * np.asarray(x) * (3 + np.cos(np.asarray(x) ** 2))
    np.testing.assert_allclose(gx, expected, rtol=1e-6)
    assert float(gy) == 0.0


def test_tape_output_is_an_input():
    assert float(fl.grad(lambda x: x)(2.0)) == 1.0
    out, f_vjp = fl.vjp(lambda x, y: (x, y * 2), fnp.ones(2), fnp.ones(2))
    gx, gy = f_vjp((fnp.ones(2), fnp.ones(2)))
    np.testing.assert_allclose(gx, 1.0)
    np.testing.assert_allclose(gy, 2.0)


def test_operator_fast_paths_record_on_the_tape():
    """flfun.numpy's eager fast paths (operators, full sums) must record on the tape like any evaluation."""
    def f(x, y):
        return fnp.sum((2.0 - x) * y / 3.0 + x * x - 1) + fnp.sum(y * 2)
    x, y = fnp.asarray([0.5, -1.0, 2.0]), fnp.asarray([1.5, 0.25, -3.0])
    grads = {}
    for tape in (True, False):
        old = config.eager_tape
        config.eager_tape = tape
        try:
            grads[tape] = fl.grad(f, argnums=(0, 1))(x, y)
        finally:
            config.eager_tape = old
    for a, b in zip(grads[True], grads[False]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(grads[True][0], -np.asarray(y) / 3 + 2 * np.asarray(x), rtol=1e-6)
