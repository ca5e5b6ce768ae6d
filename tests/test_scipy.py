"""flfun.scipy: special functions, stats distributions and linalg against scipy in float64 (values), finite
differences (grads), vmap vs loop, jit vs eager, hypothesis inputs, and pinned errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.special as sp
import scipy.stats as ss
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.scipy import linalg as L, special as S, stats as T
from flfun.testing import arrays, check_grads, check_vmap, shapes

_POS = np.concatenate([np.linspace(0.01, 60, 120), [1e3, 1e5]])
_ANY = np.concatenate([np.linspace(-7.3, -0.1, 25), _POS])
# name: (flfun function, scipy function, argument grids, relative tolerance)
SPECIAL = {
    "gammaln": (S.gammaln, sp.gammaln, (_ANY,), 1e-12),
    "digamma": (S.digamma, sp.digamma, (_ANY,), 1e-12),
    "gamma": (S.gamma, sp.gamma, (np.linspace(-4.5, 30, 60),), 1e-12),
    "betaln": (S.betaln, sp.betaln, (np.linspace(0.1, 20, 30), np.linspace(0.3, 9, 30)), 1e-12),
    "gammainc": (S.gammainc, sp.gammainc, (np.array([0.1, 0.5, 1, 2, 5, 10, 30.])[:, None], _POS[:120]), 1e-12),
    "gammaincc": (S.gammaincc, sp.gammaincc, (np.array([0.1, 0.5, 1, 2, 5, 10, 30.])[:, None], _POS[:120]), 1e-12),
    "betainc": (S.betainc, sp.betainc, (np.array([0.05, 0.5, 1, 3, 20, 95.])[:, None, None],
                                         np.array([0.1, 1, 4.5, 60.])[:, None], np.linspace(0, 1, 41)), 1e-11),
    "xlogy": (S.xlogy, sp.xlogy, (np.array([0.0, 0.0, 1.5, -2.0]), np.array([0.0, 3.0, 2.0, 0.5])), 1e-14),
    "xlog1py": (S.xlog1py, sp.xlog1py, (np.array([0.0, 0.0, 1.5, -2.0]), np.array([-1.0, 3.0, 2.0, 0.5])), 1e-14),
    "entr": (S.entr, sp.entr, (np.array([-1.0, 0.0, 0.3, 1.0, 7.0]),), 1e-14),
    "expit": (S.expit, sp.expit, (np.linspace(-40, 40, 81),), 1e-14),
    "logit": (S.logit, sp.logit, (np.linspace(0.001, 0.999, 50),), 1e-12),
    "erf": (S.erf, sp.erf, (np.linspace(-5, 5, 41),), 1e-14),
    "erfc": (S.erfc, sp.erfc, (np.linspace(-6, 26, 129),), 1e-11),
    "erfinv": (S.erfinv, sp.erfinv, (np.linspace(-0.999999, 0.999999, 101),), 1e-12),
    "ndtr": (S.ndtr, sp.ndtr, (np.linspace(-37, 9, 93),), 1e-12),
    "log_ndtr": (S.log_ndtr, sp.log_ndtr, (np.linspace(-100, 30, 131),), 1e-12),
    "ndtri": (S.ndtri, sp.ndtri, (np.concatenate([np.logspace(-300, -1, 40), np.linspace(0.02, 0.98, 25),
                                                   1 - np.logspace(-15, -2, 14)]),), 1e-12),
    "i0e": (S.i0e, sp.i0e, (np.linspace(-90, 90, 181),), 1e-13),
    "i1e": (S.i1e, sp.i1e, (np.linspace(-90, 90, 181),), 1e-13),
    "i0": (S.i0, sp.i0, (np.linspace(-20, 20, 41),), 1e-13),
    "i1": (S.i1, sp.i1, (np.linspace(-20, 20, 41),), 1e-13),
    "zeta": (S.zeta, sp.zeta, (np.linspace(1.01, 30, 50), np.linspace(0.1, 10, 50)), 1e-13),
    "multigammaln": (lambda a: S.multigammaln(a, 3), lambda a: sp.multigammaln(a, 3), (np.linspace(1.1, 20, 20),),
                     1e-13),
}


@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_values(name):
    f, ref, args, rtol = SPECIAL[name]
    out, expected = np.asarray(f(*args)), ref(*args)
    assert out.dtype == np.float64
    finite = np.isfinite(expected)
    np.testing.assert_allclose(out[finite], expected[finite], rtol=rtol, atol=0)
    assert np.array_equal(np.isfinite(out), finite) or name in ("gamma",)


def test_special_edges():
    assert float(S.gammaln(fnp.asarray(0.0, dtype="float64"))) == math.inf
    assert np.isnan(float(S.digamma(fnp.asarray(-2.0, dtype="float64"))))
    assert float(S.zeta(fnp.asarray(1.0, dtype="float64"))) == math.inf
    assert float(S.ndtri(fnp.asarray(0.0, dtype="float64"))) == -math.inf
    assert float(S.ndtri(fnp.asarray(1.0, dtype="float64"))) == math.inf
    assert S.gammaln(1.0).dtype == np.float32 and S.gammaln(np.float64(1.0)).dtype == np.float64
    np.testing.assert_allclose(np.asarray(S.gammaln(np.linspace(0.1, 30, 50).astype(np.float32))),
                               sp.gammaln(np.linspace(0.1, 30, 50).astype(np.float32)), rtol=2e-5, atol=2e-6)
    out, sign = S.logsumexp(np.array([0.0, 1.0]), b=np.array([1.0, -1.0]), return_sign=True)
    ref, ref_sign = sp.logsumexp([0.0, 1.0], b=[1.0, -1.0], return_sign=True)
    assert np.isclose(float(out), ref) and float(sign) == ref_sign
    with pytest.raises(ValueError, match="multigammaln: d must be a positive int"):
        S.multigammaln(2.0, 0)
    with pytest.raises(ValueError, match=r"logsumexp: b of shape \(2, 3\) must broadcast to x.s \(2,\)"):
        S.logsumexp(np.zeros(2), b=np.ones((2, 3)))


# name: (function, points away from poles/kinks)
GRADS = {
    "gammaln": (S.gammaln, (np.array([-2.5, 0.3, 1.7, 9.0]),)),
    "digamma": (S.digamma, (np.array([-2.5, 0.3, 1.7, 9.0]),)),
    "betaln": (S.betaln, (np.array([0.5, 2.0]), np.array([1.5, 7.0]))),
    "betainc": (S.betainc, (np.array([0.5, 2.0, 30.0]), np.array([1.5, 7.0, 3.0]), np.array([0.2, 0.5, 0.9]))),
    "gammainc": (S.gammainc, (np.array([0.5, 2.0, 8.0]), np.array([0.3, 4.0, 6.0]))),
    "gammaincc": (S.gammaincc, (np.array([0.5, 2.0, 8.0]), np.array([0.3, 4.0, 6.0]))),
    "xlogy": (S.xlogy, (np.array([0.5, -2.0]), np.array([1.5, 3.0]))),
    "logit": (S.logit, (np.array([0.1, 0.5, 0.9]),)),
    "erfc": (S.erfc, (np.array([-1.0, 0.5, 2.5, 4.0]),)),
    "erfinv": (S.erfinv, (np.array([-0.9, 0.1, 0.7]),)),
    "log_ndtr": (S.log_ndtr, (np.array([-30.0, -3.0, 0.5, 4.0]),)),
    "ndtri": (S.ndtri, (np.array([1e-3, 0.2, 0.7]),)),
    "i0e": (S.i0e, (np.array([-3.0, 0.5, 40.0]),)),
    "i1e": (S.i1e, (np.array([-3.0, 0.5, 40.0]),)),
    "zeta": (S.zeta, (np.array([2.0, 3.5]), np.array([1.0, 0.5]))),
    "xlog1py": (S.xlog1py, (np.array([0.5, -2.0]), np.array([1.5, -0.3]))),
    "expit": (S.expit, (np.array([-3.0, 0.2, 5.0]),)),
    "erf": (S.erf, (np.array([-1.5, 0.2, 2.0]),)),
    "ndtr": (S.ndtr, (np.array([-4.0, 0.2, 2.0]),)),
    "entr": (S.entr, (np.array([0.1, 0.5, 3.0]),)),
    "multigammaln": (lambda a: S.multigammaln(a, 3), (np.array([1.5, 4.0]),)),
    "logsumexp": (lambda a, b: S.logsumexp(a, axis=0, b=b), (np.array([[0.5, -1.0], [2.0, 0.3]]),
                                                               np.array([[1.0, 2.0], [0.5, 3.0]]))),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_special_grads(name):
    f, args = GRADS[name]
    check_grads(f, args, atol=1e-6, rtol=1e-5)


def test_special_grads_match_scipy_derivatives():
    x = np.array([0.4, 2.0, 7.5])
    np.testing.assert_allclose(np.asarray(fl.vmap(fl.grad(S.gammaln))(x)), sp.digamma(x), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(fl.vmap(fl.grad(S.digamma))(x)), sp.polygamma(1, x), rtol=1e-8)
    np.testing.assert_allclose(np.asarray(fl.vmap(fl.grad(S.ndtri))(np.array([0.1, 0.6]))),
                               1 / ss.norm.pdf(sp.ndtri([0.1, 0.6])), rtol=1e-8)


@settings(max_examples=8, deadline=None)
@given(x=arrays("float64", shapes(min_dims=1, max_dims=2), low=0.2, high=12.0))
def test_special_vmap(x):
    for f in (S.gammaln, S.digamma, S.log_ndtr, S.i1e, lambda v: S.gammainc(2.5, v), lambda v: S.betainc(v, 2.0, 0.3)):
        check_vmap(f, (x,), atol=1e-12, rtol=1e-12)


def test_special_jit():
    x = np.linspace(0.2, 12.0, 7)
    for f, ref in ((S.gammaln, sp.gammaln), (S.ndtri, sp.ndtri), (lambda v: S.gammainc(2.5, v), None)):
        v = x / 13.0 if f is S.ndtri else x
        np.testing.assert_allclose(np.asarray(fl.jit(f)(v)), np.asarray(f(v)), rtol=1e-13, atol=1e-14)
        if ref is not None:
            np.testing.assert_allclose(np.asarray(f(v)), ref(v), rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------------------------------- stats
_X = np.linspace(-3, 8, 23)
_K = np.arange(-2, 15.0)
STATS = [
    ("norm", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (_X, 1.0, 2.0), ss.norm),
    ("expon", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (_X, 0.5, 2.0), ss.expon),
    ("laplace", ("logpdf", "pdf", "cdf"), (_X, 0.5, 2.0), ss.laplace),
    ("logistic", ("logpdf", "pdf", "cdf", "logcdf", "sf"), (_X, 0.5, 2.0), ss.logistic),
    ("uniform", ("logpdf", "pdf", "cdf"), (_X, 0.5, 2.0), ss.uniform),
    ("t", ("logpdf", "pdf"), (_X, 3.0, 0.5, 2.0), ss.t),
    ("gamma", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (_X, 2.5, -1.0, 2.0), ss.gamma),
    ("beta", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"), (np.linspace(-0.5, 1.5, 21), 2.5, 0.7), ss.beta),
    ("poisson", ("logpmf", "pmf", "cdf"), (_K, 3.5), ss.poisson),
    ("bernoulli", ("logpmf", "pmf", "cdf"), (_K, 0.3), ss.bernoulli),
]


@pytest.mark.parametrize("name,methods,args,ref", STATS, ids=[s[0] for s in STATS])
def test_stats_values(name, methods, args, ref):
    for m in methods:
        out, expected = np.asarray(getattr(getattr(T, name), m)(*args)), getattr(ref, m)(*args)
        assert out.dtype == np.float64, (name, m)
        finite = np.isfinite(expected)
        np.testing.assert_allclose(out[finite], expected[finite], rtol=1e-12, err_msg=f"{name}.{m}")
        assert np.array_equal(out[~finite], expected[~finite]), f"{name}.{m}"


def test_poisson_entropy():
    mu = np.array([0.0, 1e-3, 0.5, 1.0, 5.0, 10.0, 50.0, 99.9, 100.0, 150.0, 1e3])   # scipy's sum fails above
    np.testing.assert_allclose(np.asarray(T.poisson.entropy(mu)), ss.poisson.entropy(mu), rtol=1e-9)
    assert np.isnan(np.asarray(T.poisson.entropy(-1.0)))
    check_grads(T.poisson.entropy, (np.array([0.7, 20.0, 300.0]),), atol=1e-6)
    check_vmap(T.poisson.entropy, (np.array([[0.7, 20.0], [300.0, 2.0]]),), atol=1e-12, rtol=1e-12)


def test_stats_quantiles_and_multivariate():
    q = np.linspace(0.01, 0.99, 9)
    for name in ("norm", "expon", "logistic", "uniform"):
        np.testing.assert_allclose(np.asarray(getattr(T, name).ppf(q, 1.0, 2.0)), getattr(ss, name).ppf(q, 1.0, 2.0),
                                   rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(np.asarray(T.norm.isf(q, 1.0, 2.0)), ss.norm.isf(q, 1.0, 2.0), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(T.bernoulli.ppf(np.linspace(0, 1, 11), 0.3)),
                                  [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    alpha, x = np.array([1.5, 2.0, 3.0]), np.array([[0.2, 0.3], [0.3, 0.3], [0.5, 0.4]])
    np.testing.assert_allclose(np.asarray(T.dirichlet.logpdf(x, alpha)), ss.dirichlet.logpdf(x, alpha), rtol=1e-12)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    cov, xs, mu = a @ a.T + np.eye(3), rng.normal(size=(5, 3)), rng.normal(size=3)
    np.testing.assert_allclose(np.asarray(T.multivariate_normal.logpdf(xs, mu, cov)),
                               ss.multivariate_normal.logpdf(xs, mu, cov), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(T.multivariate_normal.pdf(xs[0], mu, cov)),
                               ss.multivariate_normal.pdf(xs[0], mu, cov), rtol=1e-12)
    with pytest.raises(ValueError, match="dirichlet.logpdf: alpha must have shape"):
        T.dirichlet.logpdf(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="multivariate_normal.logpdf: x of shape"):
        T.multivariate_normal.logpdf(np.ones(3), np.zeros(3), np.eye(2))


def test_stats_grads_and_vmap():
    check_grads(lambda x, m, s: T.norm.logpdf(x, m, s), (np.array([0.3, -1.0]), np.array([0.1, 0.2]),
                                                         np.array([1.5, 0.7])))
    check_grads(lambda x, a: T.gamma.logpdf(x, a), (np.array([0.5, 3.0]), np.array([1.5, 4.0])))
    check_grads(lambda x, a: T.gamma.cdf(x, a), (np.array([0.5, 3.0]), np.array([1.5, 4.0])), atol=1e-6)
    check_grads(lambda x, a, b: T.beta.logpdf(x, a, b), (np.array([0.3, 0.8]), np.array([1.5, 4.0]),
                                                        np.array([2.0, 0.5])))
    check_grads(lambda x: T.t.logpdf(x, 3.0), (np.array([0.3, -2.0]),))
    check_grads(lambda x, a, b: T.beta.cdf(x, a, b), (np.array([0.3, 0.8]), np.array([1.5, 4.0]), np.array([2.0, 0.5])),
                atol=1e-6)
    check_grads(lambda m: T.multivariate_normal.logpdf(np.array([0.2, -0.3]), m, np.array([[2.0, 0.3], [0.3, 1.0]])),
                (np.array([0.1, 0.4]),))
    check_vmap(lambda x: T.norm.logcdf(x), (np.linspace(-40, 5, 6).reshape(3, 2),), atol=1e-12, rtol=1e-12)
    check_vmap(lambda x: T.poisson.logpmf(x, 4.0), (np.arange(6.0).reshape(3, 2),), atol=1e-12, rtol=1e-12)


# -------------------------------------------------------------------------------------------------- linalg
def _mats(seed=0, n=4):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n))
    return a, rng.normal(size=(n, 2)), a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("trans", [0, 1, "T", "C"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(trans, lower, unit):
    a, b, _ = _mats()
    a = a + 4 * np.eye(4)
    kw = dict(trans=trans, lower=lower, unit_diagonal=unit)
    np.testing.assert_allclose(np.asarray(L.solve_triangular(a, b, **kw)), sl.solve_triangular(a, b, **kw),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.asarray(L.solve_triangular(a, b[:, 0], **kw)),
                               sl.solve_triangular(a, b[:, 0], **kw), rtol=1e-12, atol=1e-13)


def test_cholesky_lu_expm_values():
    a, b, spd = _mats()
    for lower in (True, False):
        c = L.cho_factor(spd, lower=lower)
        np.testing.assert_allclose(np.asarray(c[0]), sl.cholesky(spd, lower=lower), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(np.asarray(L.cho_solve(c, b)), np.linalg.solve(spd, b), rtol=1e-11)
    p, low, up = (np.asarray(x) for x in L.lu(a))
    for mine, ref in zip((p, low, up), sl.lu(a)):
        np.testing.assert_allclose(mine, ref, rtol=1e-12, atol=1e-14)
    lu_, piv = L.lu_factor(a)
    ref_lu, ref_piv = sl.lu_factor(a)
    np.testing.assert_allclose(np.asarray(lu_), ref_lu, rtol=1e-12, atol=1e-14)
    assert np.asarray(piv).tolist() == ref_piv.tolist()
    for trans in (0, 1):
        np.testing.assert_allclose(np.asarray(L.lu_solve((lu_, piv), b, trans=trans)),
                                   sl.lu_solve((ref_lu, ref_piv), b, trans=trans), rtol=1e-11)
    pl, u2 = L.lu(a, permute_l=True)
    np.testing.assert_allclose(np.asarray(pl) @ np.asarray(u2), a, atol=1e-13)
    for s in (1e-3, 1.0, 10.0, 60.0):
        ref = sl.expm(a * s)
        np.testing.assert_allclose(np.asarray(L.expm(a * s)), ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    np.testing.assert_allclose(np.asarray(L.det(a)), np.linalg.det(a), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(L.inv(a)), np.linalg.inv(a), rtol=1e-11)
    w, v = L.eigh(spd)
    np.testing.assert_allclose(np.asarray(w), sl.eigh(spd)[0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(L.eigh(np.triu(spd), lower=False, eigvals_only=True)), sl.eigh(spd)[0],
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(L.svd(a, compute_uv=False)), sl.svd(a, compute_uv=False), rtol=1e-12)
    u, s, vh = L.svd(a[:, :3])
    assert u.shape == (4, 4) and vh.shape == (3, 3)
    q, r = L.qr(a[:, :3])
    assert q.shape == (4, 4) and r.shape == (4, 3)
    np.testing.assert_allclose(np.asarray(q @ r), a[:, :3], atol=1e-13)
    assert L.qr(a[:, :3], mode="economic")[0].shape == (4, 3) and len(L.qr(a, mode="r")) == 1
    blocks = (np.ones((1, 1)), 2 * np.ones((2, 3)), np.array([5.0, 6.0]))
    np.testing.assert_array_equal(np.asarray(L.block_diag(*blocks)), sl.block_diag(*blocks))


def test_linalg_grads():
    a, b, spd = _mats(1, 3)
    check_grads(lambda a: L.solve_triangular(a, b, lower=True), (a + 3 * np.eye(3),), atol=1e-6)
    check_grads(lambda s: L.cho_solve(L.cho_factor(s + s.T), b), (spd / 2,), atol=1e-6)
    check_grads(lambda a: L.lu_solve(L.lu_factor(a), b), (a,), atol=1e-6)
    check_grads(lambda a: L.lu(a)[2], (a,), atol=1e-6)
    check_grads(L.expm, (a,), atol=1e-6)
    check_grads(L.det, (a,), atol=1e-6)


@pytest.mark.parametrize("f", [
    L.inv, lambda m: L.eigh(m + m.T, eigvals_only=True), lambda m: L.svd(m, compute_uv=False),
    lambda m: L.qr(m)[1], lambda m: L.block_diag(m, m[:2, :1]), lambda m: L.cho_factor(m @ m.T + 4 * np.eye(3))[0],
    lambda m: L.solve_triangular(m + 3 * np.eye(3), m[:, 0], lower=False),
], ids=["inv", "eigh", "svd", "qr", "block_diag", "cho_factor", "solve_triangular"])
def test_linalg_grads_and_vmap_of_the_rest(f):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3)) + np.diag([3.0, 1.0, -2.0])      # well separated eigen- and singular values
    check_grads(f, (a,), atol=1e-6)
    check_vmap(f, (np.stack([a, a.T, 2 * a]),), atol=1e-10, rtol=1e-10)


def test_linalg_batched_vmap_jit():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(3, 4, 4)), rng.normal(size=(3, 4))
    ref = np.linalg.solve(a, b[..., None])[..., 0]
    np.testing.assert_allclose(np.asarray(L.lu_solve(L.lu_factor(a), b)), ref, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(fl.vmap(lambda m, v: L.lu_solve(L.lu_factor(m), v))(a, b)), ref,
                               rtol=1e-10)
    np.testing.assert_allclose(np.asarray(L.expm(a)), np.stack([sl.expm(m) for m in a]), rtol=1e-11, atol=1e-13)
    check_vmap(L.expm, (a,), atol=1e-12, rtol=1e-12)
    p, low, up = L.lu(a)
    np.testing.assert_allclose(np.asarray(p @ low @ up), a, atol=1e-13)
    np.testing.assert_allclose(np.asarray(fl.jit(L.expm)(a[0])), sl.expm(a[0]), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.asarray(fl.jit(lambda m: L.lu_factor(m)[0])(a[0])), sl.lu_factor(a[0])[0],
                               rtol=1e-12, atol=1e-13)


def test_linalg_errors():
    with pytest.raises(ValueError, match=r"solve_triangular: a must be a \(..., M, M\) stack of square matrices"):
        L.solve_triangular(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match=r"solve_triangular: b of shape \(3,\) does not match a of shape \(2, 2\)"):
        L.solve_triangular(np.eye(2), np.ones(3))
    with pytest.raises(ValueError, match="solve_triangular: trans must be"):
        L.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(ValueError, match="expm: a must be"):
        L.expm(np.ones(3))
    with pytest.raises(ValueError, match="qr: mode must be 'full', 'economic' or 'r'"):
        L.qr(np.eye(2), mode="reduced")
    with pytest.raises(NotImplementedError, match="eigh: the generalized problem"):
        L.eigh(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="block_diag: blocks must have at most 2 dimensions"):
        L.block_diag(np.ones((1, 1, 1)))
