"""custom_jvp / custom_vjp against JAX under jit, vmap and nested grad; nondiff_argnums; pinned errors."""
from __future__ import annotations

import numpy as np
import pytest

import flfun as fl
from flfun import lax
from flfun import numpy as fnp

jax = pytest.importorskip("jax")
jnp = jax.numpy


@pytest.fixture(scope="module", autouse=True)
def x64():
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


X = np.linspace(-1.5, 2.0, 4)


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def make_jvp(mod, np_, deco_args=()):
    """f(x) = sin(x) with the (deliberately wrong) derivative 2 cos(x) * scale, scale a nondiff argument."""
    @mod.custom_jvp
    def f(x):
        return np_.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2.0 * np_.cos(x) * t
    return f


def make_vjp(mod, np_):
    def f(scale, x, y):
        return np_.sin(x) * y * scale

    f = mod.custom_vjp(f, nondiff_argnums=(0,))
    f.defvjp(lambda scale, x, y: (f(scale, x, y), (x, y)),
             lambda scale, res, g: (3.0 * g * res[1], 5.0 * g * res[0] * scale))
    return f


TRANSFORMS = {
    "grad": lambda g, mod, np_: mod.grad(lambda x: np_.sum(g(x))),
    "jit_grad": lambda g, mod, np_: mod.jit(mod.grad(lambda x: np_.sum(g(x)))),
    "grad_jit": lambda g, mod, np_: mod.grad(lambda x: np_.sum(mod.jit(g)(x))),
    "vmap_grad": lambda g, mod, np_: mod.vmap(mod.grad(lambda x: np_.sum(g(x)))),
    "grad_vmap": lambda g, mod, np_: mod.grad(lambda x: np_.sum(mod.vmap(g)(x))),
    "grad_grad": lambda g, mod, np_: mod.grad(lambda x: np_.sum(mod.grad(lambda y: np_.sum(g(y) ** 2))(x))),
    "jacrev": lambda g, mod, np_: mod.jacrev(g),
    "in_scan": lambda g, mod, np_: mod.grad(lambda x: np_.sum(
        (lax if mod is fl else jax.lax).scan(lambda c, r: (c + np_.sum(g(r * c)), None), 1.0, x)[0])),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_custom_jvp_and_custom_vjp_under_transforms_match_jax(name):
    t = TRANSFORMS[name]
    xs = np.stack([X, X * 0.5]) if name in ("vmap_grad", "grad_vmap", "in_scan") else X
    fj, jj = make_jvp(fl, fnp), make_jvp(jax, jnp)
    close(t(fj, fl, fnp)(fnp.asarray(xs)), t(jj, jax, jnp)(xs))
    fv, jv = make_vjp(fl, fnp), make_vjp(jax, jnp)
    y = np.cos(X)
    if name == "grad_grad":      # second order through custom_vjp needs a differentiable bwd: it is (linear)
        pass
    close(t(lambda x: fv(2.0, x, fnp.asarray(y)), fl, fnp)(fnp.asarray(xs)),
          t(lambda x: jv(2.0, x, y), jax, jnp)(xs))


def test_custom_jvp_forward_mode_and_custom_vjp_errors():
    f = make_jvp(fl, fnp)
    close(fl.jvp(f, (fnp.asarray(X),), (fnp.asarray(np.ones(4)),))[1], 2 * np.cos(X))
    close(fl.jacfwd(f)(fnp.asarray(X)), np.diag(2 * np.cos(X)))
    close(f(fnp.asarray(X)), np.sin(X))            # eager: just the function
    g = make_vjp(fl, fnp)
    with pytest.raises(TypeError, match="forward-mode differentiation .* custom_vjp"):
        fl.jvp(lambda x: g(1.0, x, x), (fnp.asarray(X),), (fnp.asarray(X),))
    h = fl.custom_jvp(fnp.sin)
    with pytest.raises(AttributeError, match="no JVP rule defined"):
        fl.grad(h)(1.0)
    bad = fl.custom_vjp(lambda x: x * 2)
    bad.defvjp(lambda x: (x * 2, None), lambda res, g: g)
    with pytest.raises(TypeError, match="bwd must return a tuple"):
        fl.grad(bad)(1.0)
    wrong = fl.custom_jvp(lambda x: x * 2)
    wrong.defjvp(lambda p, t: (p[0] * 2, fnp.sum(t[0])))
    with pytest.raises(TypeError, match="tangent output 0 is f64\\[\\] but the primal value is f64\\[4\\]"):
        fl.jvp(wrong, (fnp.asarray(X),), (fnp.asarray(X),))


def test_custom_vjp_none_cotangent_and_pytree_arguments():
    @fl.custom_vjp
    def f(p, x):
        return p["w"] * x

    f.defvjp(lambda p, x: (f(p, x), x), lambda x, g: ({"w": fnp.sum(g * x) * 10.0}, None))
    gp, gx = fl.grad(lambda p, x: fnp.sum(f(p, x)), (0, 1))({"w": fnp.asarray(2.0, dtype="float64")},
                                                          fnp.asarray(X))
    close(gp["w"], 10 * X.sum())
    close(gx, np.zeros(4))
