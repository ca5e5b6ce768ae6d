"""flfun.nn.functional: activations against numpy references, gradients (float64, check_grads), softmax and
logsumexp stability, one_hot."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.nn import functional as F
from flfun.testing import arrays, check_grads, check_vmap, shapes, valid_axes

_erf = np.vectorize(math.erf)


def _softplus(x):
    return np.logaddexp(x, 0.0)


REFS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "relu6": lambda x: np.clip(x, 0.0, 6.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "swish": lambda x: x / (1.0 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "softplus": _softplus,
    "log_sigmoid": lambda x: -_softplus(-x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
}
KINKED = {"relu", "relu6", "elu", "leaky_relu"}


def _close(out, expected, dtype, atol=None):
    out = np.asarray(out)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=atol or tol, rtol=tol * 10)


@pytest.mark.parametrize("name", sorted(REFS))
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64"]))
def test_activation_forward(name, data, dtype):
    x = data.draw(arrays(dtype, shapes(), low=-8.0, high=8.0))
    _close(getattr(F, name)(fnp.asarray(x)), REFS[name](x.astype(np.float64)), dtype)


@pytest.mark.parametrize("name", sorted(REFS))
@given(data=st.data())
def test_activation_grads(name, data):
    x = data.draw(arrays("float64", shapes(min_dims=1), low=-4.0, high=4.0))
    if name in KINKED:   # finite differences are meaningless at the kinks (0, and 6 for relu6)
        x = np.where(np.abs(x) < 1e-2, 0.5, x)
        x = np.where(np.abs(x - 6.0) < 1e-2, 5.0, x)
    check_grads(getattr(F, name), (x,), order=2)


def test_activation_details():
    x = fnp.asarray([-1.0, 0.0, 2.0, 7.0])
    g = fl.vmap(fl.grad(F.relu))(x)
    assert g.tolist() == [0.0, 0.0, 1.0, 1.0]                     # relu'(0) = 0, as in JAX
    assert fl.vmap(fl.grad(F.relu6))(x).tolist() == [0.0, 0.0, 1.0, 0.0]
    ref = 0.5 * np.array([-1, 0, 2, 7.0]) * (1 + _erf(np.array([-1, 0, 2, 7.0]) / np.sqrt(2)))
    _close(F.gelu(x, approximate=False), ref, "float32")
    check_grads(lambda x: F.gelu(x, approximate=False), (np.array([-2.0, 0.3, 1.5]),), order=2)
    xs = np.array([-1, 0, 2, 7.0])
    _close(F.elu(x, alpha=2.0), np.where(xs > 0, xs, 2 * np.expm1(np.minimum(xs, 0))), "float32")
    _close(F.leaky_relu(x, negative_slope=0.5), [-0.5, 0, 2, 7], "float32")
    assert F.relu(fnp.asarray([1, -2])).dtype == np.float32        # integers become float32
    big = fnp.asarray([-1000.0, 1000.0])
    assert np.all(np.isfinite(np.asarray(F.softplus(big)))) and np.all(np.isfinite(np.asarray(F.log_sigmoid(big))))
    assert F.log_sigmoid(big).tolist() == [-1000.0, 0.0]
    # elu must not produce NaN gradients for large positive inputs (the exp branch is masked first)
    assert fl.grad(lambda x: fnp.sum(F.elu(x)))(fnp.asarray([1000.0, -1.0])).tolist()[0] == 1.0
    assert F.swish is F.silu


@st.composite
def array_and_axes(draw, dtype="float64", allow_none=False):
    x = draw(arrays(dtype, shapes(min_dims=1), low=-5.0, high=5.0))
    return x, draw(valid_axes(x.ndim, allow_none=allow_none).filter(lambda a: a != ()))


def _np_lse(x, axis, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else tuple(range(x.ndim)))


@given(case=array_and_axes(), dtype=st.sampled_from(["float32", "float64"]))
def test_softmax_family(case, dtype):
    x, axis = case
    x = x.astype(dtype)
    x64 = x.astype(np.float64)
    sm = F.softmax(fnp.asarray(x), axis=axis)
    e = np.exp(x64 - np.max(x64, axis=axis, keepdims=True))
    _close(sm, e / np.sum(e, axis=axis, keepdims=True), dtype)
    np.testing.assert_allclose(np.sum(np.asarray(sm, np.float64), axis=axis), 1.0, rtol=1e-5)
    _close(F.log_softmax(fnp.asarray(x), axis=axis), x64 - _np_lse(x64, axis, keepdims=True), dtype, atol=1e-5)


@given(case=array_and_axes(allow_none=True), keepdims=st.booleans())
def test_logsumexp(case, keepdims):
    x, axis = case
    out = F.logsumexp(fnp.asarray(x), axis=axis, keepdims=keepdims)
    _close(out, _np_lse(x, axis, keepdims), "float64")
    _close(F.logsumexp(fnp.asarray(x.astype(np.float32)), axis=axis, keepdims=keepdims),
           _np_lse(x, axis, keepdims), "float32", atol=1e-5)


@given(case=array_and_axes())
def test_softmax_logsumexp_grads(case):
    x, axis = case
    check_grads(lambda x: F.softmax(x, axis=axis), (x,), order=2)
    check_grads(lambda x: F.log_softmax(x, axis=axis), (x,), order=1)
    check_grads(lambda x: F.logsumexp(x, axis=axis), (x,), order=2)


def test_logsumexp_stability_and_gradient():
    x = fnp.asarray([1e4, 1e4, 1e4 - 1.0])
    out = F.logsumexp(x)
    expected = 1e4 + np.log(2 + np.exp(-1.0))
    assert abs(float(out) - expected) < 1e-2 and np.isfinite(float(out))
    assert np.all(np.isfinite(np.asarray(F.softmax(x)))) and np.all(np.isfinite(np.asarray(F.log_softmax(x))))
    g = fl.grad(F.logsumexp)(x)            # the gradient of logsumexp is softmax, even at 1e4
    np.testing.assert_allclose(np.asarray(g), np.asarray(F.softmax(x)), rtol=1e-6)
    np.testing.assert_allclose(float(np.sum(np.asarray(g))), 1.0, rtol=1e-6)
    x64 = fnp.asarray(np.array([[1e4, -1e4], [0.0, 1.0]]))
    assert F.logsumexp(x64, axis=1).dtype == np.float64
    np.testing.assert_allclose(np.asarray(F.logsumexp(x64, axis=1)), [1e4, np.log(1 + np.e)], rtol=1e-12)
    ninf = fnp.asarray([-np.inf, -np.inf])
    assert float(F.logsumexp(ninf)) == -np.inf             # an all -inf row stays -inf, not NaN
    b = fnp.asarray([1.0, 2.0, 0.0])
    np.testing.assert_allclose(float(F.logsumexp(fnp.asarray([0.0, 1.0, 5.0]), b=b)), np.log(1 + 2 * np.e),
                               rtol=1e-6)
    check_grads(lambda x: F.logsumexp(x, b=np.array([0.5, 2.0])), (np.array([0.3, -1.2]),))
    check_vmap(lambda x: F.softmax(x), (np.arange(12.0).reshape(3, 4),))


@given(labels=arrays("int32", shapes(max_dims=2), low=-1, high=5), num=st.integers(1, 5),
       dtype=st.sampled_from([None, "int32", "bool", "float64"]))
def test_one_hot(labels, num, dtype):
    out = F.one_hot(fnp.asarray(labels), num, dtype=dtype)
    expected = (labels[..., None] == np.arange(num)).astype(dtype or np.float32)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(out), expected)
    np.testing.assert_array_equal(np.asarray(F.one_hot(labels, num, axis=0)),
                                  np.moveaxis(expected, -1, 0).astype(np.float32))


def test_one_hot_errors_and_vmap():
    with pytest.raises(ValueError, match="one_hot: num_classes must be non-negative, got -1"):
        F.one_hot(fnp.asarray([0]), -1)
    with pytest.raises(ValueError, match="one_hot: num_classes must be a concrete int, got 2.5"):
        F.one_hot(fnp.asarray([0]), 2.5)
    check_vmap(lambda labels: F.one_hot(labels, 4), (np.array([[0, 3], [1, 2]]),))


def test_standardize():
    x = np.random.default_rng(0).standard_normal((3, 5))
    out = np.asarray(F.standardize(fnp.asarray(x), axis=-1))
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    check_grads(lambda x: F.standardize(x, axis=0), (x,))
