"""flfun.nn: the jax.nn activations beyond the basic ones (values vs numpy float64, grads vs finite differences,
vmap), the NaN and tail regressions of relu/relu6/softplus, logsumexp/logmeanexp options, dot_product_attention
against a numpy reference, and the orthogonal initializers."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import nn
from flfun.nn import functional as F, initializers as I
from flfun.testing import arrays, check_grads, check_vmap, shapes

_SELU_A, _SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sp(x):
    return np.logaddexp(x, 0.0)


REFS = {
    "celu": lambda x: np.where(x > 0, x, 1.0 * np.expm1(np.minimum(x, 0.0))),
    "selu": lambda x: _SELU_S * np.where(x > 0, x, _SELU_A * np.expm1(np.minimum(x, 0.0))),
    "mish": lambda x: x * np.tanh(_sp(x)),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip((x + 1) / 2, 0, 1),
    "identity": lambda x: x,
    "tanh": np.tanh,
}
KINKS = {"hard_sigmoid": (-3, 3), "hard_silu": (-3, 3), "hard_swish": (-3, 3), "hard_tanh": (-1, 1),
         "sparse_plus": (-1, 1), "sparse_sigmoid": (-1, 1), "celu": (0,), "selu": (0,), "soft_sign": (0,)}


@pytest.mark.parametrize("name", sorted(REFS))
@settings(max_examples=15, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64"]))
def test_forward(name, data, dtype):
    x = data.draw(arrays(dtype, shapes(), low=-6.0, high=6.0))
    out = np.asarray(getattr(nn, name)(fnp.asarray(x)))
    assert out.dtype == np.dtype(dtype)
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, REFS[name](x.astype(np.float64)), rtol=tol * 10, atol=tol)


@pytest.mark.parametrize("name", sorted(REFS))
def test_grads_and_vmap(name):
    x = np.linspace(-4.3, 4.1, 11)
    for k in KINKS.get(name, ()):
        x = np.where(np.abs(x - k) < 1e-2, k + 0.3, x)
    check_grads(getattr(nn, name), (x,), order=1)
    check_vmap(getattr(nn, name), (x.reshape(11, 1),))


def test_relu_nan_and_softplus_tails():
    nan = fnp.asarray([math.nan, -1.0, 0.0, 7.0])
    assert np.isnan(np.asarray(F.relu(nan))[0]) and np.isnan(np.asarray(F.relu6(nan))[0])
    assert np.asarray(F.relu6(nan))[1:].tolist() == [0.0, 0.0, 6.0]
    assert fl.vmap(fl.grad(F.relu))(fnp.asarray([-1.0, 0.0, 2.0])).tolist() == [0.0, 0.0, 1.0]
    for dt in ("float32", "float64"):
        x = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], dt)
        np.testing.assert_allclose(np.asarray(F.softplus(fnp.asarray(x))), np.log1p(np.exp(x.astype(np.float64))),
                                   rtol=1e-6 if dt == "float32" else 1e-15, atol=3e-45)   # float32 subnormals
    assert float(F.softplus(fnp.asarray(-100.0))) > 3.7e-44
    assert float(fl.grad(F.softplus)(0.0)) == 0.5
    assert np.isnan(float(F.softplus(fnp.asarray(math.nan))))


def test_glu_celu_log1mexp():
    x = np.random.default_rng(0).normal(size=(3, 4))
    a, b = x[..., :2], x[..., 2:]
    np.testing.assert_allclose(np.asarray(F.glu(x)), a / (1 + np.exp(-b)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(F.glu(x[:2], axis=0))[0], x[0] / (1 + np.exp(-x[1])), rtol=1e-12)
    xs = np.array([-2.0, -0.5, 1.0])
    np.testing.assert_allclose(np.asarray(F.celu(xs, 2.0)), np.where(xs > 0, xs, 2 * np.expm1(xs / 2)), rtol=1e-12)
    y = np.array([1e-10, 1e-3, 0.5, math.log(2), 2.0, 50.0])
    ref = np.where(y > math.log(2), np.log1p(-np.exp(-y)), np.log(-np.expm1(-y)))   # Maechler (2012)
    np.testing.assert_allclose(np.asarray(F.log1mexp(y)), ref, rtol=1e-13)
    assert float(F.log1mexp(fnp.asarray(50.0, dtype="float64"))) == -math.exp(-50.0)
    check_grads(F.log1mexp, (np.array([0.1, 0.6, 2.0]),))
    with pytest.raises(ValueError, match="glu: axis -1 of x .* must have even length"):
        F.glu(np.ones((2, 3)))
    with pytest.raises(ValueError, match="celu: alpha must be non-zero"):
        F.celu(np.ones(2), 0.0)


def test_logsumexp_sign_where_and_logmeanexp():
    from scipy.special import logsumexp as ref
    rng = np.random.default_rng(1)
    x, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    out, sign = F.logsumexp(x, 1, b=b, return_sign=True)
    r_out, r_sign = ref(x, 1, b=b, return_sign=True)
    np.testing.assert_allclose(np.asarray(out), r_out, rtol=1e-12)
    assert np.asarray(sign).tolist() == r_sign.tolist()
    mask = x > 0
    np.testing.assert_allclose(np.asarray(F.logsumexp(x, 1, where=mask)),
                               [ref(r[m]) if m.any() else -np.inf for r, m in zip(x, mask)], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(F.logmeanexp(x, 1)), ref(x, 1) - np.log(4), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(F.logmeanexp(x, 1, where=mask)),
                               [ref(r[m]) - np.log(m.sum()) for r, m in zip(x, mask)], rtol=1e-12)
    check_grads(lambda x: F.logmeanexp(x, 0), (x,))


def _attention_ref(q, k, v, bias=None, keep=None, scale=None):
    groups = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    s = np.einsum("btnh,bsnh->bnts", q, k) * (scale or 1 / math.sqrt(q.shape[-1]))
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    m = np.max(s, -1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    p = e / np.maximum(e.sum(-1, keepdims=True), 1e-300)
    return np.einsum("bnts,bsnh->btnh", p, v)


def test_dot_product_attention():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 5, 4, 8)), rng.normal(size=(2, 5, 2, 8)), rng.normal(size=(2, 5, 2, 8))
    bias, keep = rng.normal(size=(2, 4, 5, 5)), rng.random((2, 1, 5, 5)) > 0.3
    causal = np.tril(np.ones((5, 5), bool))
    cases = [({}, {}), ({"bias": bias}, {"bias": bias}), ({"mask": keep}, {"keep": keep}),
             ({"bias": bias, "mask": keep, "scale": 0.3}, {"bias": bias, "keep": keep, "scale": 0.3}),
             ({"is_causal": True}, {"keep": causal}),
             ({"is_causal": True, "local_window_size": (2, 0)}, {"keep": causal & ~np.tril(causal, -3)}),
             ({"key_value_seq_lengths": np.array([3, 5])},
              {"keep": (np.arange(5)[None, :] < np.array([3, 5])[:, None])[:, None, None, :]})]
    for kw, ref_kw in cases:
        np.testing.assert_allclose(np.asarray(nn.dot_product_attention(q, k, v, **kw)),
                                   _attention_ref(q, k, v, **ref_kw), rtol=1e-10, atol=1e-12, err_msg=str(kw))
    out3 = nn.dot_product_attention(q[0], k[0], v[0], is_causal=True)
    np.testing.assert_allclose(np.asarray(out3), _attention_ref(q[:1], k[:1], v[:1], keep=causal)[0], rtol=1e-10)
    rows = np.asarray(nn.dot_product_attention(q, k, v, query_seq_lengths=np.array([2, 5])))
    assert np.all(rows[0, 2:] == 0)
    check_grads(lambda q, k: nn.dot_product_attention(q, k, v[:1, :3], is_causal=True), (q[:1, :3], k[:1, :3]))
    jitted = fl.jit(lambda q, k, v: nn.dot_product_attention(q, k, v, mask=keep))(q, k, v)
    np.testing.assert_allclose(np.asarray(jitted), _attention_ref(q, k, v, keep=keep), rtol=1e-10)


def test_dot_product_attention_errors():
    q = np.ones((2, 3, 4, 8))
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, N, H\)"):
        nn.dot_product_attention(np.ones((3, 8)), q, q)
    with pytest.raises(ValueError, match="key's heads must divide query's"):
        nn.dot_product_attention(q, np.ones((2, 3, 3, 8)), np.ones((2, 3, 3, 8)))
    with pytest.raises(ValueError, match="key .* and value .* must have one shape"):
        nn.dot_product_attention(q, q, np.ones((2, 3, 4, 7)))
    with pytest.raises(ValueError, match="implementation must be None or 'xla'"):
        nn.dot_product_attention(q, q, q, implementation="cudnn")


def test_orthogonal_initializers():
    key = fl.random.key(0)
    for shape, axis in (((6, 4), -1), ((4, 6), -1), ((3, 2, 5), 0)):
        w = np.asarray(I.orthogonal(2.0, axis)(key, shape, np.float64))
        assert w.shape == shape
        m = np.moveaxis(w, axis, -1).reshape(-1, shape[axis]) / 2.0
        small = min(m.shape)
        gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
        np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    d = np.asarray(I.delta_orthogonal()(key, (3, 3, 4, 8), np.float64))
    np.testing.assert_allclose(d[1, 1] @ d[1, 1].T, np.eye(4), atol=1e-12)
    assert np.count_nonzero(d[0]) == 0 and np.count_nonzero(d[:, 0]) == 0
    w = np.asarray(I.lecun_uniform()(key, (400, 300)))
    assert abs(w.var() * 400 - 1) < 0.05 and np.abs(w).max() <= math.sqrt(3 / 400)
    with pytest.raises(ValueError, match="orthogonal: shape must have at least 2 dimensions"):
        I.orthogonal()(key, (3,))
    with pytest.raises(ValueError, match="delta_orthogonal: shape must be"):
        I.delta_orthogonal()(key, (3, 3, 8, 4))
