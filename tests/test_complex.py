"""complex64/complex128 end to end, against numpy (forward) and JAX (derivatives): elementwise functions, the
promotion of weak Python complex scalars, reductions and contractions (vecdot conjugates), grad with JAX's
convention and ``holomorphic=True``, jvp/vjp, vmap and jit, and the fusion pass leaving complex equations alone."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import config, lax
from flfun.compiler.fusion import find_groups
from flfun.core import ShapedArray
from flfun.testing import arrays, check_grads, shapes
from peers import require

jax = require("jax")
jnp = require("jax.numpy")
pytestmark = pytest.mark.usefixtures("jax_x64")

Z = np.array([0.3 + 0.7j, -1.2 + 0.4j, 2.0 - 1.5j, -0.5 - 0.25j])
W = np.array([1.1 - 0.2j, 0.6 + 0.9j, -0.8 + 0.3j, 0.4 - 1.0j])
UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arcsin", "arccos",
         "arctan", "arcsinh", "arccosh", "arctanh", "abs", "conj", "real", "imag", "angle", "sign", "square",
         "log2", "log10", "reciprocal", "negative", "isnan", "isinf", "isfinite", "exp2", "round"]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", UNARY)
@settings(max_examples=4)
@given(z=arrays("complex128", shapes(max_dims=2), low=-3, high=3))
def test_unary_matches_numpy(name, dtype, z):
    z = np.where(np.abs(z) < 1e-3, 0.5, z).astype(dtype)     # away from the poles and branch points at 0
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
        got = np.asarray(getattr(fnp, name)(fnp.asarray(z)))
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "complex64" else 1e-12, atol=1e-6)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power", "equal", "not_equal"])
def test_binary_matches_numpy_with_weak_scalars(name):
    f, g = getattr(fnp, name), getattr(np, name)
    for a, b in [(Z, W), (Z.astype(np.complex64), 2.5), (Z, 1j), (np.float32([1.0, 2.0]), 1j),
                 (np.float64([1.0, 2.0]), np.complex64(1 + 1j))]:
        got = f(fnp.asarray(a) if isinstance(a, np.ndarray) else a, fnp.asarray(b) if isinstance(b, np.ndarray)
                else b)
        want = g(a, b)
        assert got.dtype == want.dtype, (name, a.dtype, b, got.dtype, want.dtype)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_creation_reductions_and_contractions():
    a, b = Z.reshape(2, 2), W.reshape(2, 2)
    fa, fb = fnp.asarray(a), fnp.asarray(b)
    for got, want in [(fnp.sum(fa, axis=0), a.sum(0)), (fnp.prod(fa), a.prod()), (fnp.mean(fa), a.mean()),
                      (fnp.cumsum(fa, axis=1), a.cumsum(1)), (fa @ fb, a @ b), (fnp.vecdot(fa, fb), np.vecdot(a, b)),
                      (fnp.einsum("ij,kj->ik", fa, fb), np.einsum("ij,kj->ik", a, b)),
                      (fnp.tensordot(fa, fb, axes=2), np.tensordot(a, b, axes=2)),
                      (fnp.linalg.vector_norm(fa), np.linalg.norm(a)),
                      (fnp.full((2,), 1 - 2j), np.full(2, 1 - 2j, np.complex64)),
                      (fnp.zeros(2, dtype="complex64"), np.zeros(2, np.complex64)),
                      (fnp.astype(fnp.asarray([1.5, 2.0]), "complex128"), np.array([1.5, 2.0], np.complex128)),
                      (fnp.where(fnp.asarray([True, False]), fa[0], 0j), np.where([True, False], a[0], 0j))]:
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    assert complex(fnp.asarray(1 + 2j)) == 1 + 2j
    with pytest.raises(TypeError, match="requires real numeric operands, got c128"):
        fnp.maximum(fa, fb)


REAL_FUNCTIONS = {   # real-valued functions of complex inputs: flfun and JAX spelled alike
    "abs2": lambda m, z, w: m.sum(m.abs(z) ** 2),
    "real_of_product": lambda m, z, w: m.real(m.sum(m.sin(z) * m.conj(w))),
    "imag_exp": lambda m, z, w: m.sum(m.imag(m.exp(z * w))),
    "angle_log": lambda m, z, w: m.sum(m.angle(w) * m.real(m.log(z))),
    "vecdot": lambda m, z, w: m.real(m.vecdot(z, w)) + m.imag(m.sum(m.sqrt(z) / w)),
    "matmul": lambda m, z, w: m.abs(m.sum(m.tanh(z.reshape(2, 2)) @ w.reshape(2, 2))),
    "mixed": lambda m, z, w: m.sum(m.real(z) * m.imag(w) + (z * 2.0).real),
}


@pytest.mark.parametrize("tape", [True, False])
@pytest.mark.parametrize("name", list(REAL_FUNCTIONS))
def test_grad_of_real_functions_of_complex_inputs_matches_jax(name, tape, monkeypatch):
    monkeypatch.setattr(config, "eager_tape", tape)
    f = REAL_FUNCTIONS[name]
    want = jax.grad(lambda z, w: f(jnp, z, w), argnums=(0, 1))(jnp.asarray(Z), jnp.asarray(W))
    ours = lambda z, w: f(fnp, z, w)
    for got in (fl.grad(ours, argnums=(0, 1))(fnp.asarray(Z), fnp.asarray(W)),
                fl.jit(fl.grad(ours, argnums=(0, 1)))(fnp.asarray(Z), fnp.asarray(W))):
        for g, w in zip(got, want):
            assert g.dtype == np.complex128
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)


def test_holomorphic_grad_jvp_vjp_and_vmap_match_jax():
    f = lambda m, z: m.sin(z) * m.exp(z) / (z + 2.0)
    for z in Z:
        got = fl.grad(lambda z: f(fnp, z), holomorphic=True)(fnp.asarray(z))
        assert complex(got) == pytest.approx(complex(jax.grad(lambda z: f(jnp, z), holomorphic=True)(z)), rel=1e-12)
    per = fl.vmap(fl.grad(lambda z: f(fnp, z), holomorphic=True))(fnp.asarray(Z))
    np.testing.assert_allclose(np.asarray(per), jax.vmap(jax.grad(lambda z: f(jnp, z), holomorphic=True))(Z),
                               rtol=1e-12)
    _, t = fl.jvp(lambda z: f(fnp, z), (fnp.asarray(Z),), (fnp.asarray(W),))
    np.testing.assert_allclose(np.asarray(t), jax.jvp(lambda z: f(jnp, z), (Z,), (W,))[1], rtol=1e-12)
    g = lambda m, z: m.abs(z) * m.conj(z)      # not holomorphic: vjp still follows JAX's transposes
    _, vjp = fl.vjp(lambda z: g(fnp, z), fnp.asarray(Z))
    np.testing.assert_allclose(np.asarray(vjp(fnp.asarray(W))[0]), jax.vjp(lambda z: g(jnp, z), Z)[1](W)[0],
                               rtol=1e-12)
    check_grads(lambda z: g(fnp, z) * fnp.sin(z), (Z,), order=2)


def test_grad_refuses_what_jax_refuses():
    with pytest.raises(TypeError, match=r"grad requires real-valued outputs \(output dtype that is a sub-dtype of np.floating\), but got complex128"):
        fl.grad(lambda z: fnp.sum(z))(fnp.asarray(Z))
    with pytest.raises(TypeError, match=r"grad with holomorphic=True requires inputs with complex dtype, but got float32 \(argument 0\)"):
        fl.grad(lambda x: fnp.sum(x) * 1j, holomorphic=True)(fnp.asarray([1.0]))


def test_vmap_and_jit_of_complex_programs():
    f = lambda z, w: fnp.exp(z) * fnp.conj(w) + fnp.abs(z)
    zs, ws = Z.reshape(2, 2), W.reshape(2, 2)
    want = np.exp(zs) * np.conj(ws) + np.abs(zs)
    np.testing.assert_allclose(np.asarray(fl.vmap(f)(fnp.asarray(zs), fnp.asarray(ws))), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fl.jit(fl.vmap(f, in_axes=(1, 1)))(fnp.asarray(zs), fnp.asarray(ws))),
                               want.T, rtol=1e-12)


def test_fusion_leaves_complex_equations_unfused():
    import flfun.backends.cuda.lowering  # noqa: F401  (registers the C templates of the "cuda" target)
    from flfun.compiler.passes import optimize
    from flfun.transforms.jit import close_program
    from flfun.transforms.staging import trace_to_program
    fnp.zeros(1)

    def groups(dtype):
        program, consts = trace_to_program(lambda z: [lax.exp(lax.mul(z, lax.sin(z)))],
                                           [ShapedArray((4,), np.dtype(dtype))], dynamic=True)
        closed, _ = close_program(program, consts)
        return find_groups(optimize(closed.program, closed.consts)[0])
    assert groups("complex64") == [] and groups("complex128") == [] and groups("float32") != []


@given(data=st.data())
def test_strategies_draw_complex_arrays(data):
    z = data.draw(arrays("complex64", (3,), low=-1, high=1))
    assert z.dtype == np.complex64 and np.all(np.abs(z.real) <= 1) and np.all(np.abs(z.imag) <= 1)


def test_linalg_of_complex_matrices_matches_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + np.eye(3)
    A, H = fnp.asarray(a), fnp.asarray(h)
    L = fnp.linalg
    eyes = np.broadcast_to(np.eye(3) + 0j, (2, 3, 3))
    for got, want in [(L.det(A), np.linalg.det(a)), (L.inv(A), np.linalg.inv(a)), (L.solve(A, A), eyes),
                      (L.cholesky(H), np.linalg.cholesky(h)), (L.eigvalsh(H), np.linalg.eigvalsh(h)),
                      (L.svdvals(A), np.linalg.svdvals(a)), (L.pinv(A), np.linalg.pinv(a)),
                      (L.slogdet(A).logabsdet, np.linalg.slogdet(a).logabsdet), (L.matrix_rank(A), [3, 3])]:
        assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)
    q, r = L.qr(A)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-12)
    g = fl.grad(lambda a: fnp.real(fnp.sum(fnp.linalg.solve(a, a[:, :, :1] * 2j))))(A)   # solve: holomorphic rule
    want = jax.grad(lambda a: jnp.real(jnp.sum(jnp.linalg.solve(a, a[:, :, :1] * 2j))))(a)
    np.testing.assert_allclose(np.asarray(g), want, atol=1e-10)   # (the decompositions': test_linalg_complex.py)


def test_var_and_std_of_complex_are_real_and_match_numpy_and_jax_grads():
    """var/std of complex input average |x - mean|^2 (numpy): a real result, not the complex square."""
    import jax
    import jax.numpy as jnp
    x = np.array([[1 + 1j, 2 - 1j, 0.5j], [3, 1j, -2]], np.complex128)
    for f in ("var", "std"):
        for axis in (None, 0, 1):
            got = getattr(fnp, f)(fnp.asarray(x), axis=axis)
            assert got.dtype == np.float64
            np.testing.assert_allclose(np.asarray(got), getattr(np, f)(x, axis=axis), rtol=1e-12)
    with jax.enable_x64(True):
        want = jax.grad(lambda z: jnp.std(z, ddof=1))(jnp.asarray(x))
    got = fl.grad(lambda z: fnp.std(z, ddof=1))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10)
