"""Derivatives of flfun.numpy.linalg and flfun.scipy.linalg at complex64 / complex128 input against JAX: jvp and
vjp of the raw results (the gauge-dependent eigenvectors and singular vectors included, since LAPACK gives both
libraries the same primal), grad of real-valued losses (eager, taped and jitted), vmap against a loop and jit
against eager, finite differences and the dot-product identity for the scipy functions (the decompositions are
also op-table records, with gauge-invariant results, in records_decomp.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
import flfun.scipy.linalg as fsl
from flfun import config
from flfun.testing import check_grads, check_vmap, shapes
from peers import require

jax = require("jax")
jnp = require("jax.numpy")
jsl = require("jax.scipy.linalg")
pytestmark = pytest.mark.usefixtures("jax_x64")
FL, JX = (fnp, fnp.linalg, fsl), (jnp, jnp.linalg, jsl)


def _matrix(rng, shape, kind, dtype):
    """A well-conditioned complex matrix stack: 'sq' general square, 'pd' Hermitian positive definite, 'rect' any
    shape, all with a diagonal spread 4, 8, 12, ... so that eigen- and singular values are distinct."""
    a = (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)) * 0.5
    m, n = shape[-2:]
    a = a + np.eye(m, n) * 4.0 * np.arange(1, n + 1)
    if kind == "pd":
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + np.eye(m)
    return a.astype(dtype)


_B = np.array([[1.0 - 0.5j, 0.3j], [0.2 + 0.1j, -1.0], [0.5, 2.0 - 1.0j], [-0.3j, 0.7]])
# name: (fn(m, linalg, scipy_linalg, x), kind)
CASES = {
    "cholesky": (lambda m, L, S, x: L.cholesky(x), "pd"),
    "cholesky_upper": (lambda m, L, S, x: L.cholesky(x, upper=True), "pd"),
    "eigh": (lambda m, L, S, x: tuple(L.eigh(x)), "pd"),
    "eigvalsh": (lambda m, L, S, x: L.eigvalsh(x), "pd"),
    "svd": (lambda m, L, S, x: tuple(L.svd(x, full_matrices=False)), "rect"),
    "svd_square_full": (lambda m, L, S, x: tuple(L.svd(x)), "sq"),
    "svdvals": (lambda m, L, S, x: L.svdvals(x), "rect"),
    "qr": (lambda m, L, S, x: tuple(L.qr(x)), "tall"),
    "slogdet": (lambda m, L, S, x: tuple(L.slogdet(x)), "sq"),
    "det": (lambda m, L, S, x: L.det(x), "sq"),
    "inv": (lambda m, L, S, x: L.inv(x), "sq"),
    "solve": (lambda m, L, S, x: L.solve(x, m.sin(x)), "sq"),
    "pinv": (lambda m, L, S, x: L.pinv(x), "rect"),
    "matrix_power": (lambda m, L, S, x: (L.matrix_power(x, 3), L.matrix_power(x, -2)), "sq"),
    "norms": (lambda m, L, S, x: (L.norm(x, axis=(-2, -1)), L.matrix_norm(x, ord="nuc"), L.matrix_norm(x, ord=2),
                                  L.matrix_norm(x, ord=1), L.vector_norm(x, axis=-1)), "rect"),
    "lu": (lambda m, L, S, x: S.lu(x), "sq"),
    "lu_solve": (lambda m, L, S, x: tuple(S.lu_solve(S.lu_factor(x), _B[:x.shape[-1]], trans=t)
                                          for t in (0, 1, 2)), "sq"),
    "solve_triangular": (lambda m, L, S, x: tuple(S.solve_triangular(x, _B[:x.shape[-1]], trans=t, lower=lo)
                                                  for t in (0, 2) for lo in (True, False)), "sq"),
    "cho_solve": (lambda m, L, S, x: S.cho_solve(S.cho_factor(x), _B[:x.shape[-1]]), "pd"),
    "expm": (lambda m, L, S, x: S.expm(x * 0.1), "sq"),
}
BATCHED = [k for k in CASES if not k.startswith(("lu", "solve_triangular", "cho_solve"))]   # _B is one matrix


@st.composite
def _problem(draw, kind, batched=True):
    batch = draw(shapes(max_dims=2, max_side=2)) if batched else ()
    n = draw(st.integers(1 if kind != "tall" else 2, 4))
    m = n if kind in ("sq", "pd") else draw(st.integers(1, n) if kind == "tall" else st.integers(1, 4))
    shape = batch + ((n, m) if kind == "tall" else (n, m) if kind == "rect" else (n, n))
    return shape, draw(st.integers(0, 2 ** 16))


def _fns(name):
    fn = CASES[name][0]
    return (lambda x: fn(*FL, x)), (lambda x: fn(*JX, x))


def _herm(g, m=np):
    return (g + m.conj(m.swapaxes(g, -1, -2))) / 2


def _rand_like(rng, x):
    x = np.asarray(x)
    z = rng.standard_normal(x.shape) + (1j * rng.standard_normal(x.shape) if x.dtype.kind == "c" else 0)
    return z.astype(x.dtype)


def _close(got, want, tol):
    got, want = fl.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,dtype", [(k, "complex128") for k in CASES] + [
    (k, "complex64") for k in ("cholesky", "eigh", "svd", "qr", "slogdet", "inv")])
@settings(max_examples=max(2, settings().max_examples // 6))
@given(data=st.data())
def test_jvp_and_vjp_match_jax(name, dtype, data):
    kind = CASES[name][1]
    shape, seed = data.draw(_problem(kind, name in BATCHED))
    rng = np.random.default_rng(seed)
    # Hermitian input: the derivative is defined on Hermitian matrices (both read one triangle, differently)
    proj = _herm if kind == "pd" else lambda g: g      # noqa: E731
    x, t = _matrix(rng, shape, kind, dtype), proj(_rand_like(rng, np.zeros(shape, dtype)))
    ours, theirs = _fns(name)
    tol = 1e-9 if dtype == "complex128" else 2e-3
    out, t_out = fl.jvp(ours, (fnp.asarray(x),), (fnp.asarray(t),))
    want, t_want = jax.jvp(theirs, (x,), (t,))
    _close(out, want, tol)         # the same primal (LAPACK's phases) ...
    _close(t_out, t_want, tol)     # ... and the same tangents: JAX's gauge
    cts = jax.tree_util.tree_map(lambda o: _rand_like(rng, o), want)
    got = fl.vjp(ours, fnp.asarray(x))[1](jax.tree_util.tree_map(fnp.asarray, cts))[0]
    _close(proj(np.asarray(got)), proj(np.asarray(jax.vjp(theirs, x)[1](cts)[0])), tol)


LOSSES = {   # real-valued functions of complex matrices
    "abs_det_squared": lambda m, L, x: m.abs(L.det(x)) ** 2,
    "sum_abs_svdvals": lambda m, L, x: m.sum(m.abs(L.svdvals(x))),
    "real_trace_inv": lambda m, L, x: m.real(m.trace(L.inv(x), axis1=-2, axis2=-1)).sum(),
    "eigh_vectors": lambda m, L, x: m.sum(m.abs(L.eigh(x @ m.conj(x.T))[1][:, -1] * m.arange(4)) ** 2),
    "svd_phases": lambda m, L, x: m.sum(m.real(L.svd(x)[0]) * m.imag(L.svd(x)[2])),
    "qr_cholesky": lambda m, L, x: m.sum(m.angle(L.qr(x)[0] + 2) + m.imag(L.cholesky(x @ m.conj(x.T)))),
    "slogdet_sign": lambda m, L, x: m.real(L.slogdet(x)[0]) + L.slogdet(x)[1],
    "pinv_norm": lambda m, L, x: L.norm(L.pinv(x[:, :3])) + L.norm(x, ord="nuc"),
}


@pytest.mark.parametrize("tape", [True, False])
@pytest.mark.parametrize("name", list(LOSSES))
def test_grad_of_real_losses_matches_jax(name, tape, monkeypatch):
    monkeypatch.setattr(config, "eager_tape", tape)
    x = _matrix(np.random.default_rng(3), (4, 4), "sq", "complex128")
    loss = LOSSES[name]
    want = jax.grad(lambda x: loss(jnp, jnp.linalg, x))(x)
    ours = fl.grad(lambda x: loss(fnp, fnp.linalg, x))
    for got in (ours(fnp.asarray(x)), fl.jit(ours)(fnp.asarray(x))):
        assert got.dtype == np.complex128
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", BATCHED)
def test_vmap_of_values_and_derivatives_matches_loop_and_jit_matches_eager(name):
    rng = np.random.default_rng(5)
    kind = CASES[name][1]
    x = _matrix(rng, (3, 4, 3) if kind == "tall" else (3, 3, 3), kind, "complex128")
    t = _rand_like(rng, x)
    ours = _fns(name)[0]
    jvp = lambda x, t: fl.jvp(ours, (x,), (t,))[1]        # noqa: E731
    check_vmap(ours, [x], 0, atol=1e-10, rtol=1e-10)
    check_vmap(jvp, [x, t], (0, 0), atol=1e-10, rtol=1e-10)
    check_vmap(jvp, [np.moveaxis(x, 0, 2), t[0]], (2, None), atol=1e-10, rtol=1e-10)
    for f, args in ((ours, (x,)), (jvp, (x, t))):
        _close(fl.jit(f)(*map(fnp.asarray, args)), f(*map(fnp.asarray, args)), 1e-12)


@pytest.mark.parametrize("name", [k for k in CASES if k not in BATCHED])
def test_scipy_functions_finite_differences_and_dot_product_identity(name):
    x = _matrix(np.random.default_rng(7), (3, 3), CASES[name][1], "complex128")
    f = _fns(name)[0]
    check_grads((lambda x: f(_herm(x, fnp))) if CASES[name][1] == "pd" else f, (x,), atol=1e-6, rtol=1e-6)


SECOND_ORDER = {   # gauge-invariant results, differentiated twice
    "svd": lambda L, x: (L.svd(x)[0] @ L.svd(x)[2], L.svdvals(x)),
    "eigh": lambda L, x: (L.eigh(_herm(x, fnp))[1] * fnp.conj(L.eigh(_herm(x, fnp))[1]), L.eigvalsh(_herm(x, fnp))),
    "qr": lambda L, x: L.qr(x)[0] * fnp.sign(fnp.real(fnp.diagonal(L.qr(x)[1]))),
    "cholesky": lambda L, x: L.cholesky(_herm(x @ fnp.conj(x.T), fnp)),
    "slogdet": lambda L, x: tuple(L.slogdet(x)),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_derivatives(name):
    x = _matrix(np.random.default_rng(9), (3, 3), "sq", "complex128")
    check_grads(lambda x: SECOND_ORDER[name](fnp.linalg, x), (x,), order=2, atol=1e-5, rtol=1e-5)


def test_full_and_wide_refusals_stay_as_for_real_input():
    x = fnp.asarray(_matrix(np.random.default_rng(0), (2, 3), "rect", "complex128"))
    with pytest.raises(NotImplementedError, match="qr: derivatives need at least as many rows as columns"):
        fl.jvp(lambda x: fnp.linalg.qr(x).R, (x,), (x,))
    with pytest.raises(NotImplementedError, match="svd: derivatives of full_matrices=True are not implemented"):
        fl.jvp(lambda x: fnp.linalg.svd(x).U, (x,), (x,))
