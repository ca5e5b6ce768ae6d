"""The custom_jvp rules of flfun's own functions: ``logsumexp``, ``log_softmax``, ``softplus`` and the 2-norm give
finite, exact derivatives at extreme values (against JAX) and agree with finite differences (``check_grads``)
elsewhere; the norm's gradient at the zero vector is 0, not NaN."""
import numpy as np

import flfun as fl
import flfun.numpy as fnp
from flfun import nn
from flfun.testing import check_grads
from tests.peers import require

jax = require("jax")
jnp = jax.numpy

EXTREME = np.asarray([[1e4, 1e4, -1e30, 0.0], [-np.inf, 3.0, -np.inf, -2.0], [-1e4, -1e4, -1e4, -1e4],
                      [88.0, -88.0, 1e-30, 50.0]], np.float32)


def fl_grad(f, x, **kw):
    def loss(v):
        out = f(v, **kw)
        return fnp.sum(out * fnp.arange(1, out.size + 1, dtype=out.dtype).reshape(out.shape))
    return np.asarray(fl.grad(loss)(fnp.asarray(x)))


def jax_weighted_grad(f, x, **kw):
    def loss(v):
        out = f(v, **kw)
        return jnp.sum(out * jnp.arange(1, out.size + 1, dtype=out.dtype).reshape(out.shape))
    return np.asarray(jax.grad(loss)(jnp.asarray(x)))


def softmax64(x, axis):
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return e / np.sum(e, axis=axis, keepdims=True)


def test_logsumexp_and_log_softmax_gradients_at_extreme_values():
    for axis, keepdims in ((1, False), (0, True), (None, False)):
        shape = np.sum(EXTREME, axis=axis, keepdims=True).shape      # fl_grad's weights, reduced axes kept
        w = np.arange(1, np.prod(shape) + 1, dtype=np.float64).reshape(shape)
        got = fl_grad(nn.logsumexp, EXTREME, axis=axis, keepdims=keepdims)
        want = softmax64(EXTREME, axis) * w
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)
    for axis in (1, 0):                       # d/dx sum(w * log_softmax(x)) = w - softmax(x) * sum(w)
        w = np.arange(1, EXTREME.size + 1, dtype=np.float64).reshape(EXTREME.shape)
        want = w - softmax64(EXTREME, axis) * w.sum(axis, keepdims=True)
        got = fl_grad(nn.log_softmax, EXTREME, axis=axis)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    jax_want = jax.grad(lambda v: jnp.sum(jax.nn.logsumexp(v, axis=1) * jnp.arange(4.0)))(jnp.asarray(EXTREME))
    np.testing.assert_allclose(fl_grad(lambda v: nn.logsumexp(v, axis=1) / fnp.arange(1.0, 5.0) *
                                       fnp.arange(4.0), EXTREME), np.asarray(jax_want), rtol=1e-6, atol=1e-30)


def test_softplus_gradient_is_the_sigmoid_over_the_whole_range():
    x = np.asarray([-1e4, -200.0, -100.0, -30.0, -1e-3, 0.0, 1e-3, 30.0, 100.0, 200.0, 1e4], np.float32)
    for dtype in (np.float32, np.float64):
        got = np.asarray(fl.vmap(fl.grad(nn.softplus))(fnp.asarray(x.astype(dtype))))
        want = np.exp(-np.logaddexp(0, -x.astype(np.float64))).astype(dtype)     # the sigmoid, rounded
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-14,
                                   atol=2 * np.finfo(dtype).smallest_subnormal)
        assert got.dtype == dtype
    np.testing.assert_allclose(fl_grad(nn.softplus, x), jax_weighted_grad(jax.nn.softplus, x), rtol=1e-6,
                               atol=1e-42)      # JAX flushes sigmoid(-100) = 3.7e-44 to 0; flfun keeps it


def test_norm_gradient_at_zero_is_zero_under_every_transform():
    zero = fnp.zeros(3)
    for g in (fl.grad(fnp.linalg.norm), fl.jit(fl.grad(fnp.linalg.norm))):
        assert np.asarray(g(zero)).tolist() == [0.0, 0.0, 0.0]
    rows = fnp.asarray([[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_allclose(np.asarray(fl.vmap(fl.grad(fnp.linalg.norm))(rows)), [[0, 0], [0.6, 0.8]], rtol=1e-7)
    np.testing.assert_array_equal(np.asarray(fl.grad(lambda m: fnp.linalg.norm(m, "fro"))(fnp.zeros((2, 2)))), 0)
    t = fnp.ones(3)
    assert np.asarray(fl.jvp(fnp.linalg.norm, (zero,), (t,))[1]).item() == 0.0


def test_finite_differences_and_second_derivatives_away_from_the_edges():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    check_grads(lambda v: nn.logsumexp(v, axis=1), (x,), order=2, rtol=1e-5, atol=1e-7)
    check_grads(lambda v: nn.log_softmax(v, axis=0), (x,), order=2, rtol=1e-5, atol=1e-7)
    check_grads(nn.softplus, (x * 5,), order=2, rtol=1e-5, atol=1e-7)
    check_grads(lambda v: fnp.linalg.norm(v, axis=1), (x,), order=2, rtol=1e-5, atol=1e-7)
    want = jax.hessian(lambda v: jnp.linalg.norm(v))(jnp.asarray(x[0], jnp.float32))
    got = fl.hessian(fnp.linalg.norm)(fnp.asarray(x[0], dtype=fnp.float32))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
