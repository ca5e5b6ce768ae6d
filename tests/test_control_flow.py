"""Structured control flow (lax.cond/switch/while_loop/fori_loop/scan/map): forward vs Python loops in float64,
jvp vs finite differences, the vjp/jvp dot-product identity, vmap vs loops, jit vs eager, grad of a scan vs
grad of the unrolled program, random programs vs JAX under composed transforms, impl swaps inside bodies, and
the pinned errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flfun as fl
from flfun import lax
from flfun import numpy as fnp
from flfun.core import ConcretizationError, UnexpectedTracerError
from flfun.primitives import impl_override

jax = pytest.importorskip("jax")
jnp = jax.numpy


@pytest.fixture(scope="module", autouse=True)
def x64():
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


RNG = np.random.default_rng(0)
XS = RNG.normal(size=(5, 3))
W = RNG.normal(size=(3,))


def close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------ forward vs loops
def rnn(np_, lax_, w, xs, reverse=False):
    """A scan with a pytree carry and pytree ys."""
    def step(c, x):
        h, s = c["h"], c["s"]
        h = np_.tanh(h * w + x)
        return {"h": h, "s": s + np_.sum(h)}, (h, np_.sum(h * x))
    return lax_.scan(step, {"h": xs[0] * 0, "s": np_.sum(xs[0]) * 0}, xs, reverse=reverse)


def rnn_loop(w, xs, reverse=False):
    h, s, hs, ps = np.zeros(3), 0.0, [None] * len(xs), [None] * len(xs)
    for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
        h = np.tanh(h * w + xs[t])
        s += h.sum()
        hs[t], ps[t] = h, (h * xs[t]).sum()
    return h, s, np.stack(hs), np.asarray(ps)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_forward_matches_python_loop(reverse):
    c, (hs, ps) = rnn(fnp, lax, fnp.asarray(W), fnp.asarray(XS), reverse)
    h, s, hs0, ps0 = rnn_loop(W, XS, reverse)
    for a, b in ((c["h"], h), (c["s"], s), (hs, hs0), (ps, ps0)):
        assert a.dtype == np.float64
        close(a, b)


def test_cond_switch_while_fori_map_forward():
    x = fnp.asarray(XS[0])
    close(lax.cond(True, fnp.sin, fnp.cos, x), np.sin(XS[0]))
    close(lax.cond(0, fnp.sin, fnp.cos, x), np.cos(XS[0]))
    close(lax.cond(2.5, fnp.sin, fnp.cos, x), np.sin(XS[0]))          # a numeric predicate: nonzero is true
    fns = [lambda x, k: x + k, lambda x, k: x * k, lambda x, k: x - k]
    for i, expect in ((-3, XS[0] + 2), (1, XS[0] * 2), (7, XS[0] - 2)):   # the index is clamped
        close(lax.switch(i, fns, x, 2.0), expect)
    assert int(lax.while_loop(lambda c: c < 100, lambda c: c * 3, 1)) == 243
    close(lax.fori_loop(2, 6, lambda i, acc: acc * x + i, fnp.ones(3, dtype="float64")),
          (((1 * XS[0] + 2) * XS[0] + 3) * XS[0] + 4) * XS[0] + 5)
    close(lax.map(lambda r: fnp.sum(r ** 2), fnp.asarray(XS)), (XS ** 2).sum(1))
    c, ys = lax.scan(lambda c, _: (c + 1, c * 2), 0, None, length=4)
    assert int(c) == 4 and ys.tolist() == [0, 2, 4, 6]
    assert lax.scan(lambda c, x: (c + x, x), fnp.zeros(3), fnp.zeros((0, 3)))[1].shape == (0, 3)


# ------------------------------------------------------------------------------------------- derivatives
def loss(w, xs):
    c, (hs, ps) = rnn(fnp, lax, w, xs)
    return c["s"] + fnp.sum(hs ** 2) + fnp.sum(ps)


def loss_unrolled(w, xs):
    h, s, total = fnp.zeros(3), 0.0, 0.0
    for t in range(xs.shape[0]):
        h = fnp.tanh(h * w + xs[t])
        s = s + fnp.sum(h)
        total = total + fnp.sum(h ** 2) + fnp.sum(h * xs[t])
    return s + total


def test_grad_of_scan_matches_grad_of_unrolled_program():
    w, xs = fnp.asarray(W), fnp.asarray(XS)
    for argnums in (0, 1):
        close(fl.grad(loss, argnums)(w, xs), fl.grad(loss_unrolled, argnums)(w, xs), 1e-12)
        close(fl.jit(fl.grad(loss, argnums))(w, xs), fl.grad(loss_unrolled, argnums)(w, xs), 1e-12)


def test_tape_and_linearize_gradients_agree():
    w, xs = fnp.asarray(W), fnp.asarray(XS)
    g = fl.grad(loss, (0, 1))(w, xs)
    with fl.config.override(eager_tape=False) if hasattr(fl.config, "override") else _tape_off():
        g2 = fl.grad(loss, (0, 1))(w, xs)
    for a, b in zip(g, g2):
        close(a, b, 1e-12)


class _tape_off:
    def __enter__(self):
        self.before, fl.config.eager_tape = fl.config.eager_tape, False

    def __exit__(self, *exc):
        fl.config.eager_tape = self.before


def test_jvp_matches_finite_differences_and_dot_product_identity():
    w, xs = fnp.asarray(W), fnp.asarray(XS)
    tw, txs = RNG.normal(size=3), RNG.normal(size=XS.shape)
    _, t = fl.jvp(loss, (w, xs), (fnp.asarray(tw), fnp.asarray(txs)))
    eps = 1e-6
    fd = (float(loss(fnp.asarray(W + eps * tw), fnp.asarray(XS + eps * txs)))
          - float(loss(fnp.asarray(W - eps * tw), fnp.asarray(XS - eps * txs)))) / (2 * eps)
    close(t, fd, 1e-6)

    def f(w, xs):
        c, (hs, ps) = rnn(fnp, lax, w, xs)
        return hs
    ct = RNG.normal(size=XS.shape)
    _, t = fl.jvp(f, (w, xs), (fnp.asarray(tw), fnp.asarray(txs)))
    _, f_vjp = fl.vjp(f, w, xs)
    gw, gxs = f_vjp(fnp.asarray(ct))
    close(np.sum(np.asarray(t) * ct), np.sum(np.asarray(gw) * tw) + np.sum(np.asarray(gxs) * txs), 1e-10)


def test_grad_of_scan_keeps_stacked_residuals_not_an_unrolled_program():
    def lin_size(T):
        xs = fnp.asarray(RNG.normal(size=(T, 3)))
        _, f_jvp = fl.linearize(lambda w: loss(w, xs), fnp.asarray(W))
        ir = fl.make_ir(f_jvp)(fnp.asarray(W)) if False else None
        del ir
        from flfun.transforms.jvp import linearize_flat
        _, program, consts, _ = linearize_flat(lambda w: [loss(w, xs)], [fnp.asarray(W)])
        scans = [e for e in program.eqns if e.prim.name == "scan"]
        assert len(scans) == 1 and scans[0].params["length"] == T
        stacked = [c for c in consts if getattr(c, "shape", ())[:1] == (T,)]
        assert stacked                  # the residuals are T-stacked constants of the linear program
        return len(program.eqns)
    assert lin_size(4) == lin_size(32)


def test_cond_and_switch_derivatives_and_jacobians_vs_jax():
    def f(np_, lax_, x):
        y = lax_.cond(np_.sum(x) > 0, lambda x: np_.sin(x) * x, lambda x: np_.cos(x) + x ** 3, x)
        z = lax_.switch(np_.argmax(x), [lambda v: v * 2, lambda v: np_.exp(v), lambda v: np_.tanh(v) ** 2], y)
        return np_.sum(z * y)
    for x in (XS[0], -XS[0], XS[1]):
        close(fl.grad(lambda x: f(fnp, lax, x))(fnp.asarray(x)), jax.grad(lambda x: f(jnp, jax.lax, x))(x))
        close(fl.hessian(lambda x: f(fnp, lax, x))(fnp.asarray(x)), jax.hessian(lambda x: f(jnp, jax.lax, x))(x))
        close(fl.jacfwd(lambda x: f(fnp, lax, x))(fnp.asarray(x)), jax.jacfwd(lambda x: f(jnp, jax.lax, x))(x))


def test_scan_jacobians_hessian_and_vmap_of_grad_vs_jax():
    jf = lambda w, xs: rnn(jnp, jax.lax, w, xs)[0]["s"] + jnp.sum(rnn(jnp, jax.lax, w, xs)[1][0] ** 2)
    ff = lambda w, xs: rnn(fnp, lax, w, xs)[0]["s"] + fnp.sum(rnn(fnp, lax, w, xs)[1][0] ** 2)
    w, xs = fnp.asarray(W), fnp.asarray(XS)
    close(fl.hessian(ff)(w, xs), jax.hessian(jf)(W, XS), 1e-8)
    close(fl.jacrev(lambda w: rnn(fnp, lax, w, xs)[1][0])(w), jax.jacrev(lambda w: rnn(jnp, jax.lax, w, XS)[1][0])(W))
    close(fl.jacfwd(lambda w: rnn(fnp, lax, w, xs)[1][0])(w), jax.jacfwd(lambda w: rnn(jnp, jax.lax, w, XS)[1][0])(W))
    ws = RNG.normal(size=(4, 3))
    close(fl.vmap(fl.grad(ff), in_axes=(0, None))(fnp.asarray(ws), xs), jax.vmap(jax.grad(jf), (0, None))(ws, XS))
    xss = RNG.normal(size=(5, 2, 3))     # xs mapped along axis 1: the scan axis stays first
    close(fl.vmap(fl.grad(ff, 1), in_axes=(None, 1))(w, fnp.asarray(xss)),
          jax.vmap(jax.grad(jf, 1), (None, 1))(W, xss))
    close(fl.jit(fl.vmap(fl.jit(fl.grad(ff))))(fnp.asarray(ws), fnp.asarray(np.stack([XS] * 4))),
          jax.vmap(jax.grad(jf))(ws, np.stack([XS] * 4)))


def test_while_loop_forward_mode_and_batched_predicate():
    def f(np_, lax_, x):
        def body(c):
            i, v = c
            return i + 1, v * np_.sin(x) + x
        return lax_.while_loop(lambda c: (c[0] < 4) & (np_.sum(c[1]) < 50.0), body, (0, x))[1]
    x = np.abs(XS[0]) + 0.5
    close(fl.jvp(lambda x: f(fnp, lax, x), (fnp.asarray(x),), (fnp.asarray(np.ones(3)),))[1],
          jax.jvp(lambda x: f(jnp, jax.lax, x), (x,), (np.ones(3),))[1])
    close(fl.jacfwd(lambda x: f(fnp, lax, x))(fnp.asarray(x)), jax.jacfwd(lambda x: f(jnp, jax.lax, x))(x))
    xs = np.abs(RNG.normal(size=(6, 3))) * 4      # lanes finish after different trip counts
    out = fl.vmap(lambda x: f(fnp, lax, x))(fnp.asarray(xs))
    close(out, np.stack([np.asarray(f(fnp, lax, fnp.asarray(r))) for r in xs]))
    close(out, jax.vmap(lambda x: f(jnp, jax.lax, x))(xs))
    close(fl.jit(fl.vmap(lambda x: f(fnp, lax, x)))(fnp.asarray(xs)), out)
    counts = fl.vmap(lambda n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] + 2.0), (0, 0.0))[1])(
        fnp.asarray([0, 3, 1]))
    assert counts.tolist() == [0.0, 6.0, 2.0]


def test_fori_loop_static_bounds_is_reverse_differentiable_dynamic_is_not():
    f = lambda x: lax.fori_loop(0, 3, lambda i, v: fnp.sin(v) * x, x)
    jf = lambda x: jax.lax.fori_loop(0, 3, lambda i, v: jnp.sin(v) * x, x)
    close(fl.grad(f)(np.float64(0.7)), jax.grad(jf)(0.7))
    dyn = lambda x, n: lax.fori_loop(0, n, lambda i, v: v * x, x)
    close(fl.jit(dyn)(np.float64(1.5), 3), 1.5 ** 4)
    close(fl.jvp(lambda x: fl.jit(dyn)(x, 3), (np.float64(1.5),), (np.float64(1.0),))[1], 4 * 1.5 ** 3)
    with pytest.raises(TypeError, match="reverse-mode differentiation .* while_loop with a dynamic trip count"):
        fl.grad(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * x, 1.0))(2.0)
    with pytest.raises(TypeError, match="dynamic trip count"):
        fl.jit(fl.grad(lambda x, n: dyn(x, n)))(1.5, 3)


# ------------------------------------------------------------------------- vmap / jit / pmap / named axes
def test_vmap_of_cond_batched_and_unbatched_predicate_vs_loop():
    f = lambda p, x: lax.cond(p, lambda x: fnp.sin(x), lambda x: x * 3.0, x)
    ps, xs = fnp.asarray([True, False, True, False, False]), fnp.asarray(XS)
    expect = np.stack([np.sin(XS[i]) if p else XS[i] * 3 for i, p in enumerate([1, 0, 1, 0, 0])])
    close(fl.vmap(f)(ps, xs), expect)
    close(fl.vmap(f, in_axes=(None, 0))(True, xs), np.sin(XS))
    close(fl.jit(fl.vmap(f))(ps, xs), expect)
    close(fl.vmap(fl.grad(lambda p, x: fnp.sum(f(p, x)), 1))(ps, xs),
          np.stack([np.cos(XS[i]) if p else np.full(3, 3.0) for i, p in enumerate([1, 0, 1, 0, 0])]))


def test_jit_matches_eager_and_prints_nested_bodies():
    f = lambda w, xs: loss(w, xs)
    close(fl.jit(f)(fnp.asarray(W), fnp.asarray(XS)), f(fnp.asarray(W), fnp.asarray(XS)), 1e-12)
    from flfun.core import ShapedArray
    from flfun.transforms.staging import trace_to_program
    prog, _ = trace_to_program(lambda x: [lax.cond(x > 0, lambda y: y + 1.0, lambda y: y * 2.0, x)],
                               [ShapedArray((), np.float32)])
    text = str(prog)
    assert "      branches=(\n        { lambda ; " in text and "\n            g:f32[] = mul f 2.0:f32\n" in text, text


def test_collective_inside_scan_under_vmap_axis_name_and_pmap():
    import sys
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from cpu_devices import cpu_devices
    g = lambda x: lax.scan(lambda c, xi: (c + lax.psum(xi * xi, "i"), c), 0.0, x)[0]
    x = RNG.normal(size=(2, 3))
    expect = np.full(2, (x ** 2).sum())
    close(fl.vmap(g, axis_name="i")(fnp.asarray(x)), expect)
    close(fl.jit(fl.vmap(g, axis_name="i"))(fnp.asarray(x)), expect)
    close(fl.grad(lambda x: fnp.sum(fl.vmap(g, axis_name="i")(x)))(fnp.asarray(x)), 4 * x)
    with cpu_devices(2):
        close(fl.pmap(g, axis_name="i")(fnp.asarray(x)), expect)
        close(fl.pmap(fl.grad(g), axis_name="i")(fnp.asarray(x)), 4 * x)


# ---------------------------------------------------------------------------------------------- impl swaps
def test_swapped_impl_reaches_inside_bodies_eagerly_under_jit_and_in_the_backward_pass():
    calls = []
    real = fl.primitives.get("sin").impls["numpy"]

    def spy(x, **kw):
        calls.append(1)
        return real(x, **kw)
    scan_f = lambda x: lax.scan(lambda c, v: (c + fnp.sin(v), c), 0.0, x)[0]
    cond_f = lambda x: lax.cond(x[0] > -10, lambda y: fnp.sum(fnp.sin(y)), lambda y: fnp.sum(y), x)
    while_f = lambda x: lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, fnp.sin(c[1])), (0, x))[1]
    jitted = [fl.jit(f) for f in (scan_f, cond_f, while_f)]
    for f in jitted:
        f(fnp.asarray(XS[0]))          # compiled before the swap
    with impl_override("sin", "numpy", spy):
        for f, jf in zip((scan_f, cond_f, while_f), jitted):
            for g in (f, jf, fl.jit(f)):
                calls.clear()
                g(fnp.asarray(XS[0]))
                assert calls, g
        calls.clear()
        fl.grad(lambda x: fnp.sum(lax.scan(lambda c, v: (c * fnp.cos(v), fnp.sin(c)), 1.0, x)[1]))(
            fnp.asarray(XS[0]))
        assert calls                   # sin of the carry runs in the forward scan that saves residuals


# ---------------------------------------------------------------------------------------------------- errors
def test_errors_are_pinned():
    x = fnp.ones(3, dtype="float64")
    with pytest.raises(TypeError, match=r"scan: body carry output f32\[3\] does not match carry input f32\[4\]"):
        lax.scan(lambda c, _: (c[:3], None), fnp.ones(4, dtype="float32"), None, length=2)
    with pytest.raises(TypeError, match=r"cond: true_fun output f64\[3\] does not match false_fun output f64\[2\]"):
        lax.cond(True, lambda x: x, lambda x: x[:2], x)
    with pytest.raises(TypeError, match="true_fun returns"):
        lax.cond(True, lambda x: x, lambda x: (x, x), x)
    with pytest.raises(TypeError, match=r"cond: the predicate must be a scalar, got bool\[3\]"):
        lax.cond(x > 0, lambda x: x, lambda x: x, x)
    with pytest.raises(TypeError, match=r"while_loop: cond_fun must return a boolean scalar, got (f64\[\]|.*)"):
        lax.while_loop(lambda c: c, lambda c: c - 1.0, 3.0)
    with pytest.raises(TypeError, match=r"while_loop: cond_fun must return a boolean scalar, got bool\[3\]"):
        lax.while_loop(lambda c: c > 0, lambda c: c - 1.0, x)
    with pytest.raises(TypeError, match=r"while_loop: body_fun carry output i32\[\] does not match carry input"):
        lax.while_loop(lambda c: c < 3.0, lambda c: lax.convert_element_type(1, "int32"), 0.0)
    with pytest.raises(TypeError, match="switch: the index must be an integer scalar"):
        lax.switch(1.0, [lambda x: x], x)
    with pytest.raises(ValueError, match="scan: xs leaves and length disagree"):
        lax.scan(lambda c, x: (c, x), 0.0, fnp.asarray(np.ones(3)), length=4)
    leaked = []
    lax.scan(lambda c, x: (leaked.append(c) or c, x), 0.0, fnp.asarray(np.ones(3)))
    with pytest.raises(UnexpectedTracerError):
        fnp.sin(leaked[0])
    with pytest.raises(ConcretizationError, match=r"lax\.cond .* lax\.while_loop"):
        fl.jit(lambda x: x if x > 0 else -x)(1.0)


# ----------------------------------------------------------------------- random programs vs JAX, composed
CF_OPS = ("sin", "tanh", "mul", "add", "cond", "switch", "scan", "fori", "map", "while")


def _cf_apply(np_, lax_, op, a, b):
    if op == "sin":
        return np_.sin(a)
    if op == "tanh":
        return np_.tanh(a) * b
    if op == "mul":
        return a * b
    if op == "add":
        return a + b
    if op == "cond":
        return lax_.cond(np_.sum(a) > np_.sum(b), lambda u, v: np_.sin(u) * v, lambda u, v: u - v * v, a, b)
    if op == "switch":
        return lax_.switch(np_.argmax(a), [lambda u: u * 2.0, lambda u: np_.tanh(u), lambda u: u * u * 0.5], b)
    if op == "scan":
        c, ys = lax_.scan(lambda c, x: (np_.tanh(c * x + b), c * x), a, np_.stack([a, b, a * b]))
        return c + np_.sum(ys, axis=0)
    if op == "fori":
        return lax_.fori_loop(0, 3, lambda i, v: np_.sin(v) * b + i, a)
    if op == "map":
        return lax_.map(lambda r: r * np_.sum(r), np_.stack([a, b]))[1]
    if op == "while":     # forward-only; its trip count depends on the values
        return lax_.while_loop(lambda c: (c[0] < 6) & (np_.sum(c[1] * c[1]) < 20.0),
                               lambda c: (c[0] + 1, c[1] * 1.5 + 0.1), (0, a * 0.1 + b * 0.1))[1]
    raise ValueError(op)


def _cf_program(np_, lax_, instrs):
    def f(x, y):
        pool = [x, y]
        for op, i, j in instrs:
            pool.append(_cf_apply(np_, lax_, op, pool[i % len(pool)], pool[j % len(pool)]))
        return np_.sum(pool[-1] * pool[-2])
    return f


@settings(max_examples=5, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(CF_OPS), st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=5),
       st.sampled_from(["value", "grad", "jit_grad", "vmap_grad", "grad_vmap", "jvp", "jit_vmap_jvp"]))
def test_random_control_flow_programs_vs_jax(instrs, stack):
    has_while = any(op == "while" for op, _, _ in instrs)
    if has_while and "grad" in stack:
        stack = "jvp"
    f, jf = _cf_program(fnp, lax, instrs), _cf_program(jnp, jax.lax, instrs)
    x, y = RNG.normal(size=3) * 0.5, RNG.normal(size=3) * 0.5
    xb = RNG.normal(size=(2, 3)) * 0.5
    if stack == "value":
        got, want = f(fnp.asarray(x), fnp.asarray(y)), jf(x, y)
    elif stack == "grad":
        got, want = fl.grad(f, (0, 1))(fnp.asarray(x), fnp.asarray(y)), jax.grad(jf, (0, 1))(x, y)
    elif stack == "jit_grad":
        got, want = fl.jit(fl.grad(f))(fnp.asarray(x), fnp.asarray(y)), jax.grad(jf)(x, y)
    elif stack == "vmap_grad":
        got = fl.vmap(fl.grad(f), in_axes=(0, None))(fnp.asarray(xb), fnp.asarray(y))
        want = jax.vmap(jax.grad(jf), in_axes=(0, None))(xb, y)
    elif stack == "grad_vmap":
        got = fl.grad(lambda a: fnp.sum(fl.vmap(f, in_axes=(0, None))(a, fnp.asarray(y))))(fnp.asarray(xb))
        want = jax.grad(lambda a: jnp.sum(jax.vmap(jf, in_axes=(0, None))(a, y)))(xb)
    elif stack == "jvp":
        got = fl.jvp(f, (fnp.asarray(x), fnp.asarray(y)), (fnp.asarray(np.ones(3)), fnp.asarray(y)))[1]
        want = jax.jvp(jf, (x, y), (np.ones(3), y))[1]
    else:
        got = fl.jit(fl.vmap(lambda a: fl.jvp(lambda u: f(u, fnp.asarray(y)), (a,), (fnp.asarray(np.ones(3)),))[1]))(
            fnp.asarray(xb))
        want = jax.vmap(lambda a: jax.jvp(lambda u: jf(u, y), (a,), (np.ones(3),))[1])(xb)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        close(g, w, 1e-8)
