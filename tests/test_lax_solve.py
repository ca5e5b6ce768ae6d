"""``lax.custom_root`` / ``lax.custom_linear_solve`` (implicit derivatives: values, grads, hessians, jvp, vmap and
jit against JAX in float64, with while_loop solvers and closures) and ``lax.betainc``."""
from __future__ import annotations

import numpy as np
import pytest
from peers import require

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.testing import check_grads

jax = require("jax")
jl, jnp = jax.lax, jax.numpy
pytestmark = pytest.mark.usefixtures("jax_x64")
A = np.array([[3.0, 1.0, 0.5], [1.0, 2.0, 0.2], [0.5, 0.2, 4.0]])


def _newton(m, L):
    """A scalar-or-vector Newton solve in library ``m`` (flfun or jax), iterated by a while_loop."""
    def solve(f, x0):
        step = lambda x: x - L.linalg.solve(m.jacfwd(f)(x), f(x))
        return m.lax.while_loop(lambda x: L.max(L.abs(f(x))) > 1e-13, step, x0)
    return solve


def _root(m, L):
    """The root of ``x^3 / 3 + p * x - c`` per component (closing over the parameters)."""
    def root(p, c):
        f = lambda x: x ** 3 / 3 + p * x - c
        tangent_solve = lambda g, y: L.linalg.solve(m.jacfwd(g)(y), y)
        return m.lax.custom_root(f, L.asarray(np.ones(3)), _newton(m, L), tangent_solve)
    return root


def _close(ours, theirs, rtol=1e-10):
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=1e-12)


def test_custom_root_matches_jax():
    p, c = np.array([1.0, 2.0, 0.5]), np.array([0.3, -1.0, 2.0])
    ours, theirs = _root(fl, fnp), _root(jax, jnp)
    _close(ours(p, c), theirs(p, c))
    loss = lambda r: lambda p, c: (r(p, c) ** 2).sum()
    _close(fl.grad(loss(ours), argnums=(0, 1))(p, c), jax.grad(loss(theirs), argnums=(0, 1))(p, c))
    check_grads(loss(ours), (p, c), order=2, atol=1e-6)                  # second order: vs finite differences
    x = np.asarray(ours(p, c))
    _close(fl.jvp(ours, (p, c), (c, p))[1], (p - x * c) / (x ** 2 + p))    # implicit: dx = (dc - x dp) / f'(x)
    _close(fl.jit(fl.grad(loss(ours)))(p, c), fl.grad(loss(ours))(p, c))
    _close(fl.vmap(fl.grad(loss(ours)))(np.stack([p, 2 * p]), np.stack([c, c])),
           np.stack([fl.grad(loss(ours))(p, c), fl.grad(loss(ours))(2 * p, c)]))


def test_custom_root_has_aux():
    solve = lambda f, x0: (_newton(fl, fnp)(f, x0), fnp.asarray(7))
    root, aux = lax.custom_root(lambda x: x * x - 2.0, np.ones(1), solve, lambda g, y: y / g(np.ones(1)),
                                has_aux=True)
    assert float(root[0]) == pytest.approx(2 ** 0.5, rel=1e-14) and int(aux) == 7


def _linear(m, L, cg: bool):
    """``solve(s * A, b)`` by ``custom_linear_solve`` with a direct or a fixed-iteration CG solve."""
    def direct(mv, rhs):
        return L.linalg.solve(m.jacfwd(mv)(rhs), rhs)

    def conjugate_gradients(mv, rhs):
        def body(i, carry):
            x, r, d = carry
            ad = mv(d)
            alpha = (r @ r) / (d @ ad)
            r2 = r - alpha * ad
            return x + alpha * d, r2, r2 + (r2 @ r2) / (r @ r) * d
        return m.lax.fori_loop(0, 3, body, (L.zeros_like(rhs), rhs, rhs))[0]

    def solve(s, b):
        return m.lax.custom_linear_solve(lambda v: s * (L.asarray(A) @ v), b,
                                         conjugate_gradients if cg else direct, symmetric=True)
    return solve


@pytest.mark.parametrize("cg", [False, True], ids=["direct", "cg"])
def test_custom_linear_solve_matches_jax(cg):
    s, b = np.asarray(1.5), np.array([1.0, -2.0, 0.5])
    ours, theirs = _linear(fl, fnp, cg), _linear(jax, jnp, cg)
    _close(ours(s, b), np.linalg.solve(s * A, b))
    loss = lambda f: lambda s, b: (f(s, b) ** 2).sum()
    _close(fl.grad(loss(ours), argnums=(0, 1))(s, b), jax.grad(loss(theirs), argnums=(0, 1))(s, b))
    check_grads(loss(ours), (s, b), order=2, atol=1e-6)
    _close(fl.jit(fl.grad(loss(ours)))(s, b), fl.grad(loss(ours))(s, b))
    _close(fl.vmap(ours, in_axes=(None, 0))(s, np.stack([b, 2 * b])), np.linalg.solve(s * A, np.stack([b, 2 * b]).T).T)


def test_betainc_matches_jax():
    a, b, x = np.array([0.5, 2.0, 30.0]), np.array([1.5, 7.0, 3.0]), np.array([0.2, 0.5, 0.95])
    _close(lax.betainc(a, b, x), jl.betainc(a, b, x), rtol=1e-12)
    _close(fl.grad(lambda x: lax.betainc(a, b, x).sum())(x), jax.grad(lambda x: jl.betainc(a, b, x).sum())(x))


def test_gamma_derivatives_match_jax():
    a, x = np.array([0.5, 2.0, 7.0]), np.array([0.3, 1.5, 9.0])
    _close(lax.igamma_grad_a(a, x), jl.igamma_grad_a(a, x), rtol=1e-9)
    _close(lax.random_gamma_grad(a, x), jl.random_gamma_grad(a, x), rtol=1e-9)
    _close(fl.vmap(lax.random_gamma_grad)(a, x), lax.random_gamma_grad(a, x))


@pytest.mark.parametrize("args, kw", [
    (((2, 3), (1, 1), "VALID"), {}),
    (((2, 3), (2, 1), "SAME"), {}),
    (((2, 2), (1, 2), [(1, 0), (0, 1)]), {"rhs_dilation": (2, 1)}),
    (((2, 3), (2, 1), "SAME"), {"dimension_numbers": ("NHWC", "HWIO", "NHWC")}),
])
def test_conv_general_dilated_patches_matches_jax(args, kw):
    x = np.random.default_rng(0).normal(size=(2, 3, 5, 4))
    x = np.moveaxis(x, 1, -1) if "dimension_numbers" in kw else x
    _close(lax.conv_general_dilated_patches(x, *args, **kw), jl.conv_general_dilated_patches(x, *args, **kw))
    w = np.random.default_rng(1).normal(size=jl.conv_general_dilated_patches(x, *args, **kw).shape)
    _close(fl.grad(lambda v: (lax.conv_general_dilated_patches(v, *args, **kw) * w).sum())(x),
           jax.grad(lambda v: (jl.conv_general_dilated_patches(v, *args, **kw) * w).sum())(x))


def test_bitcast_convert_type_matches_jax():
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    for dt in ("uint32", "int16", "uint8", "float32"):
        np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(x, dt)), jl.bitcast_convert_type(x, dt))
    u = np.arange(8, dtype=np.uint16).reshape(4, 2)
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(u, "float32")),
                                  jl.bitcast_convert_type(u, jnp.float32))
    np.testing.assert_array_equal(np.asarray(fl.vmap(lambda v: lax.bitcast_convert_type(v, "uint8"), in_axes=1)(x)),
                                  jax.vmap(lambda v: jl.bitcast_convert_type(v, jnp.uint8), in_axes=1)(x))
    np.testing.assert_array_equal(np.asarray(fl.jit(lambda v: lax.bitcast_convert_type(v, "int16"))(x.T)),
                                  jl.bitcast_convert_type(x.T, jnp.int16))
    assert not np.asarray(fl.grad(lambda v: lax.bitcast_convert_type(v, "float32").sum())(x)).any()
    with pytest.raises(ValueError, match=r"bitcast_convert_type: u16\[2,3\] to float32 needs a last dim of 2"):
        lax.bitcast_convert_type(np.ones((2, 3), np.uint16), "float32")
