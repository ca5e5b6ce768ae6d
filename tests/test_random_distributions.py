"""flfun.random samplers beyond uniform/normal: Kolmogorov-Smirnov (continuous) and chi-square (discrete) tests
against scipy.stats with fixed seeds, structural known answers (simplex, ball, orthogonality, counts), gamma's
implicit-reparameterisation gradient against scipy's quantile function, jit vs eager, vmap over keys, errors."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sps
import scipy.stats as ss

import flfun as fl
import flfun.numpy as fnp
import flfun.random as R

N = 3000
P_MIN = 1e-4   # a fixed seed makes each p-value a constant; a wrong law gives p far below this

CONTINUOUS = {
    "gamma_small": (lambda k: R.gamma(k, 0.3, (N,), np.float64), ss.gamma(0.3).cdf),
    "gamma": (lambda k: R.gamma(k, 4.5, (N,)), ss.gamma(4.5).cdf),
    "loggamma": (lambda k: fnp.exp(R.loggamma(k, 0.2, (N,), np.float64)), ss.gamma(0.2).cdf),
    "beta": (lambda k: R.beta(k, 0.5, 2.0, (N,)), ss.beta(0.5, 2.0).cdf),
    "chisquare": (lambda k: R.chisquare(k, 3.0, (N,)), ss.chi2(3).cdf),
    "t": (lambda k: R.t(k, 4.0, (N,)), ss.t(4).cdf),
    "f": (lambda k: R.f(k, 3.0, 7.0, (N,)), ss.f(3, 7).cdf),
    "exponential": (lambda k: R.exponential(k, (N,)), ss.expon.cdf),
    "laplace": (lambda k: R.laplace(k, (N,)), ss.laplace.cdf),
    "logistic": (lambda k: R.logistic(k, (N,)), ss.logistic.cdf),
    "cauchy": (lambda k: R.cauchy(k, (N,)), ss.cauchy.cdf),
    "lognormal": (lambda k: R.lognormal(k, 0.5, (N,)), ss.lognorm(0.5).cdf),
    "pareto": (lambda k: R.pareto(k, 3.0, (N,)), ss.pareto(3).cdf),
    "weibull_min": (lambda k: R.weibull_min(k, 1.5, 2.0, (N,)), ss.weibull_min(2.0, scale=1.5).cdf),
    "rayleigh": (lambda k: R.rayleigh(k, 2.0, (N,)), ss.rayleigh(scale=2.0).cdf),
    "triangular": (lambda k: R.triangular(k, 0.0, 0.3, 1.0, (N,)), ss.triang(0.3).cdf),
    "wald": (lambda k: R.wald(k, 1.0, (N,)), ss.invgauss(1.0).cdf),
    "maxwell": (lambda k: R.maxwell(k, (N,)), ss.maxwell.cdf),
    "generalized_normal": (lambda k: R.generalized_normal(k, 1.5, (N,)), ss.gennorm(1.5).cdf),
    "double_sided_maxwell": (lambda k: R.double_sided_maxwell(k, 1.0, 2.0, (N,)),
                             lambda x: 0.5 + 0.5 * np.sign(x - 1) * ss.maxwell.cdf(np.abs(x - 1) / 2)),
    "truncated_normal": (lambda k: R.truncated_normal(k, -1.0, 2.0, (N,)), ss.truncnorm(-1.0, 2.0).cdf),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_ks(name):
    sample, cdf = CONTINUOUS[name]
    for seed in (0, 1):
        x = np.asarray(sample(R.key(seed)), np.float64)
        assert np.all(np.isfinite(x))
        assert ss.kstest(x, cdf).pvalue > P_MIN, (name, seed)


def test_ks_has_power():
    """The same test rejects a nearby wrong law, so the thresholds above are meaningful."""
    x = np.asarray(R.gamma(R.key(0), 4.5, (N,)), np.float64)
    assert ss.kstest(x, ss.gamma(4.8).cdf).pvalue < P_MIN


DISCRETE = {
    "poisson_small": (lambda k: R.poisson(k, 3.0, (N,)), ss.poisson(3.0).pmf, 30),
    "poisson_large": (lambda k: R.poisson(k, 40.0, (N,)), ss.poisson(40.0).pmf, 120),
    "binomial_small": (lambda k: R.binomial(k, 20, 0.3, (N,)), ss.binom(20, 0.3).pmf, 21),
    "binomial_large": (lambda k: R.binomial(k, 200, 0.6, (N,)), ss.binom(200, 0.6).pmf, 201),
    "binomial_rare": (lambda k: R.binomial(k, 1000, 0.05, (N,)), ss.binom(1000, 0.05).pmf, 201),
    "geometric": (lambda k: R.geometric(k, 0.3, (N,)), ss.geom(0.3).pmf, 60),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_chisquare(name):
    sample, pmf, top = DISCRETE[name]
    for seed in (0, 1):
        x = np.asarray(sample(R.key(seed)))
        assert np.all(x == np.round(x)) and x.min() >= 0
        counts = np.bincount(x.astype(int), minlength=top + 1)[:top + 1]
        expected = pmf(np.arange(top + 1)) * len(x)
        keep = expected > 5
        stat = ss.chisquare(counts[keep], expected[keep] * counts[keep].sum() / expected[keep].sum())
        assert stat.pvalue > P_MIN, (name, seed)


def test_structural_known_answers():
    k = R.key(3)
    d = np.asarray(R.dirichlet(k, fnp.asarray([0.5, 1.0, 3.0]), (500,), np.float64))
    assert d.shape == (500, 3) and np.allclose(d.sum(-1), 1, atol=1e-12) and d.min() >= 0
    np.testing.assert_allclose(d.mean(0), np.array([0.5, 1.0, 3.0]) / 4.5, atol=0.03)
    m = np.asarray(R.multinomial(k, 10.0, fnp.asarray([0.2, 0.3, 0.5]), shape=(400,)))
    assert m.shape == (400, 3) and np.all(m.sum(-1) == 10) and m.min() >= 0
    np.testing.assert_allclose(m.mean(0), [2, 3, 5], atol=0.3)
    b = np.asarray(R.ball(k, 3, p=1.5, shape=(500,)))
    assert b.shape == (500, 3) and np.all(np.sum(np.abs(b) ** 1.5, -1) <= 1)
    for n, m_ in ((4, None), (5, 3), (3, 5)):
        q = np.asarray(R.orthogonal(k, n, (2,), np.float64, m=m_))
        assert q.shape == (2, n, m_ or n)
        gram = np.swapaxes(q, -1, -2) @ q if n >= (m_ or n) else q @ np.swapaxes(q, -1, -2)
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(min(n, m_ or n)), gram.shape), atol=1e-12)
    r = np.asarray(R.rademacher(k, (1000,)))
    assert set(r.tolist()) == {-1, 1} and abs(r.mean()) < 0.1
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    for method in ("cholesky", "eigh", "svd"):
        x = np.asarray(R.multivariate_normal(k, np.array([1.0, -1.0]), cov, (4000,), np.float64, method=method))
        np.testing.assert_allclose(x.mean(0), [1, -1], atol=0.07)
        np.testing.assert_allclose(np.cov(x.T), cov, atol=0.1)
    assert R.poisson(k, fnp.asarray([0.0, 5.0]), (2,)).tolist()[0] == 0


def test_keys_api():
    k = R.key(42)
    assert np.asarray(R.key_data(k)).tolist() == np.asarray(k).tolist()
    assert np.asarray(R.wrap_key_data(R.key_data(R.split(k, 3)))).shape == (3, 2)
    assert R.PRNGKey is R.key and R.key_impl(k) == "threefry2x32"
    assert np.asarray(R.clone(k)).tolist() == np.asarray(k).tolist()
    with pytest.raises(ValueError, match=r"key_data: keys must be uint32\[..., 2\]"):
        R.key_data(np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="wrap_key_data: impl must be None or 'threefry2x32'"):
        R.wrap_key_data(k, impl="rbg")


@pytest.mark.parametrize("a", [0.3, 1.0, 4.0, 40.0])
def test_gamma_implicit_gradient(a):
    """dx/da at fixed u = P(a, x): the derivative of scipy's quantile function gammaincinv(a, u)."""
    key = R.key(1)
    f = lambda a: R.gamma(key, a, (6,), np.float64)  # noqa: E731
    a0 = fnp.asarray(a, dtype="float64")
    x = np.asarray(f(a0))
    u, h = sps.gammainc(a, x), 1e-6
    fd = (sps.gammaincinv(a + h, u) - sps.gammaincinv(a - h, u)) / (2 * h)
    np.testing.assert_allclose(np.asarray(fl.jacfwd(f)(a0)), fd, rtol=1e-6)
    np.testing.assert_allclose(float(fl.grad(lambda a: fnp.sum(f(a)))(a0)), fd.sum(), rtol=1e-6)
    lg = np.asarray(fl.jacfwd(lambda a: R.loggamma(key, a, (6,), np.float64))(a0))
    np.testing.assert_allclose(lg, fd / x, rtol=1e-6)
    beta_grad = fl.grad(lambda a: fnp.sum(R.beta(key, a, 2.0, (6,), np.float64)))(a0)
    assert np.isfinite(float(beta_grad))


SAMPLERS = {
    "gamma": lambda k: R.gamma(k, fnp.asarray([0.5, 3.0]), (3, 2)),
    "poisson": lambda k: R.poisson(k, fnp.asarray([1.0, 30.0]), (3, 2)),
    "binomial": lambda k: R.binomial(k, 50.0, fnp.asarray([0.1, 0.7]), (3, 2)),
    "multinomial": lambda k: R.multinomial(k, 10.0, fnp.asarray([0.2, 0.8])),
    "multivariate_normal": lambda k: R.multivariate_normal(k, fnp.zeros(2), fnp.eye(2), (3,)),
    "orthogonal": lambda k: R.orthogonal(k, 3),
    "dirichlet": lambda k: R.dirichlet(k, fnp.ones(3), (2,)),
    "geometric": lambda k: R.geometric(k, 0.2, (4,)),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_vmap_over_keys_matches_loop(name):
    f, keys = SAMPLERS[name], R.split(R.key(7), 3)
    np.testing.assert_allclose(np.asarray(fl.vmap(f)(keys)), np.stack([np.asarray(f(k)) for k in keys]),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["gamma", "poisson", "orthogonal"])
def test_jit_matches_eager(name):
    f, k = SAMPLERS[name], R.key(5)
    np.testing.assert_allclose(np.asarray(fl.jit(f)(k)), np.asarray(f(k)), rtol=1e-6, atol=1e-6)


def test_errors():
    k = R.key(0)
    with pytest.raises(ValueError, match="gamma: dtype must be a floating-point type"):
        R.gamma(k, 1.0, (2,), np.int32)
    with pytest.raises(ValueError, match=r"beta: a of shape \(3,\) does not broadcast to shape \(2,\)"):
        R.beta(k, fnp.ones(3), 1.0, (2,))
    with pytest.raises(ValueError, match="multivariate_normal: method must be one of"):
        R.multivariate_normal(k, np.zeros(2), np.eye(2), method="lu")
    with pytest.raises(ValueError, match=r"multivariate_normal: mean \(..., n\) and cov \(..., n, n\) must agree"):
        R.multivariate_normal(k, np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match="ball: d must be a positive int"):
        R.ball(k, 0)
    with pytest.raises(ValueError, match="orthogonal: m must be a positive int"):
        R.orthogonal(k, 3, m=0)
    with pytest.raises(ValueError, match="dirichlet: alpha must have at least one dimension"):
        R.dirichlet(k, 1.0)
    with pytest.raises(ValueError, match="poisson: key must be a uint32"):
        R.poisson(np.zeros(3), 1.0)
