"""Transforms compose in any order: random differentiable programs, written once against an ``np``-like namespace,
run with flfun.numpy and with jax.numpy (float64, CPU); grad, jit, vmap, jvp, vjp, linearize, jacfwd/jacrev,
hessian and has_aux agree with JAX (the reference for transforms) to 1e-9, and vmap agrees with a Python loop."""
from __future__ import annotations

import numpy as np
import pytest
from peers import require
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import flfun as fl
from flfun import numpy as fnp
from flfun.testing import arrays

jax = require("jax")
jnp = jax.numpy

RTOL = 1e-9   # JAX references run under jax.jit: one XLA compile per program beats eager per-op dispatch
FEW = max(3, settings().max_examples // 3)   # examples for the expensive tests
OPS = ("sin", "tanh", "exp_bounded", "rational", "add", "sub", "mul", "maximum", "matmul", "einsum", "sum0",
       "mean1", "max1", "max0", "reshape", "index_row", "index_col", "at_add", "where", "concat0", "concat1",
       "log_softmax", "cumsum", "flip", "var", "pow3", "sqrt1p", "prod", "sort", "clip", "abs", "stack")


@pytest.fixture(scope="module", autouse=True)
def x64():
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def _apply(np_, op: str, a, b, i: int, j: int):
    """One instruction of a program on (m, n) operands ``a`` and ``b``; the result is (m, n) too."""
    m, n = a.shape
    if op == "sin":
        return np_.sin(a)
    if op == "tanh":
        return np_.tanh(a)
    if op == "exp_bounded":
        return np_.exp(np_.tanh(a))
    if op == "rational":
        return a / (1.0 + a * a)
    if op in ("add", "sub", "mul"):
        return {"add": a + b, "sub": a - b, "mul": a * b}[op]
    if op == "maximum":
        return np_.maximum(a, b)
    if op == "matmul":
        return (a @ b.T) @ a / n
    if op == "einsum":
        return np_.einsum("ij,ij->i", a, b)[:, None] * a
    if op == "sum0":
        return a + np_.sum(b, axis=0, keepdims=True)
    if op == "mean1":
        return a * np_.mean(b, axis=1, keepdims=True)
    if op == "max1":
        return a - np_.max(b, axis=1, keepdims=True)
    if op == "max0":
        return a * np_.max(b, axis=0)
    if op == "reshape":
        return np_.transpose(a.reshape(n, m)) + b.T.reshape(m, n)
    if op == "index_row":
        return a * b[i % m]
    if op == "index_col":
        return a + b[:, j % n:j % n + 1]
    if op == "at_add":
        return a.at[i % m].add(np_.sin(b[j % m]))
    if op == "where":
        return np_.where(a > b, a, 2.0 * b)
    if op == "concat0":
        return np_.concatenate([a[:i % (m + 1)], b[i % (m + 1):]], axis=0)
    if op == "concat1":
        return np_.concatenate([a[:, :j % (n + 1)], b[:, j % (n + 1):]], axis=1)
    if op == "log_softmax":
        top = np_.max(a, axis=1, keepdims=True)
        return a - top - np_.log(np_.sum(np_.exp(a - top), axis=1, keepdims=True))
    if op == "cumsum":
        return np_.cumsum(a, axis=1) - b
    if op == "flip":
        return np_.flip(a, axis=0) * b[::-1]
    if op == "var":
        return a * np_.var(b, axis=0)
    if op == "pow3":
        return a ** 3
    if op == "sqrt1p":
        return np_.sqrt(1.0 + a * a)
    if op == "prod":
        return a * np_.prod(b, axis=1, keepdims=True)
    if op == "sort":
        return np_.sort(a, axis=i % 2)
    if op == "clip":
        return np_.clip(a, -0.5, 0.5)
    if op == "abs":   # off the kink at 0, where flfun and JAX differ (test_abs_grad_at_zero)
        return np_.abs(a - 0.123456789) * b
    if op == "stack":
        return np_.sum(np_.stack([a, b, a * b], axis=i % 3), axis=i % 3)
    raise ValueError(op)


class Program:
    """A drawn program: ``vec(np_)`` is (x, y) -> (m, n) array and ``scalar(np_)`` is (x, y) -> float scalar."""

    def __init__(self, instrs, shape):
        self.instrs, self.shape = instrs, shape
        self.weights = np.linspace(-1.0, 1.0, shape[0] * shape[1]).reshape(shape)

    def vec(self, np_):
        def f(x, y):
            pool = [x, y]
            for op, i, j in self.instrs:
                pool.append(_apply(np_, op, pool[i % len(pool)], pool[j % len(pool)], i, j))
            return pool[-1] + 0.5 * pool[-2]
        return f

    def scalar(self, np_):
        vec, w = self.vec(np_), np_.asarray(self.weights)

        def f(x, y):
            out = vec(x, y)
            return np_.sum(out * w) + np_.sum(np_.tanh(out))
        return f

    def __repr__(self):
        return f"Program({self.instrs}, {self.shape})"


@st.composite
def programs(draw, max_ops: int = 6):
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    instrs = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99), st.integers(0, 99)),
                           min_size=1, max_size=max_ops))
    return Program(instrs, shape)


@st.composite
def cases(draw, batch: int = 0):
    """``(program, x, y)`` with float64 inputs; ``batch`` > 0 puts that many x's on a leading axis."""
    prog = draw(programs())
    x = draw(arrays("float64", ((batch,) if batch else ()) + prog.shape, low=-1.5, high=1.5))
    y = draw(arrays("float64", prog.shape, low=-1.5, high=1.5))
    return prog, _flush_subnormals(x), _flush_subnormals(y)


def _flush_subnormals(x):
    """XLA on CPU flushes subnormals to zero (so maximum(0, 5e-324) is a tie there); numpy does not."""
    return np.where(np.abs(x) < np.finfo(np.float64).tiny, 0.0, x)


def assert_tree_close(actual, expected, what=""):
    """Same containers (tuple vs list vs dict), same shapes and float64 values within RTOL (relative to the
    largest expected magnitude)."""
    if isinstance(expected, (tuple, list, dict)):
        assert type(actual) is type(expected), f"{what}: {type(actual).__name__} vs {type(expected).__name__}"
        keys = sorted(expected) if isinstance(expected, dict) else range(len(expected))
        assert len(actual) == len(expected) and (not isinstance(expected, dict) or sorted(actual) == keys), what
        for k in keys:
            assert_tree_close(actual[k], expected[k], f"{what}[{k}]")
        return
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} vs {e.dtype}"
    scale = float(np.max(np.abs(e), initial=1.0))
    np.testing.assert_allclose(a, e, rtol=RTOL, atol=RTOL * scale, err_msg=what, strict=True)


def well_conditioned(jfun, x, y) -> bool:
    """Whether JAX's answer moves by less than RTOL when x and y move by 1e-13 (relative): deep stacks over
    large values (sin of 1e10) are too ill-conditioned for any two float64 evaluation orders to agree to RTOL."""
    out = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jfun(*_j(x, y)))]
    moved = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jfun(*_j(x * (1 + 1e-13), y * (1 - 1e-13))))]
    return all(np.max(np.abs(a - b), initial=0.0) <= RTOL * float(np.max(np.abs(a), initial=1.0)) / 10
               for a, b in zip(out, moved))


def _j(*xs):
    return tuple(jnp.asarray(x) for x in xs)


def _f(*xs):
    return tuple(fnp.asarray(x) for x in xs)


# --------------------------------------------------------------------------------------------------- gradients
@given(cases())
def test_value_grad_and_jit_orders(case):
    prog, x, y = case
    f, jf = prog.scalar(fnp), prog.scalar(jnp)
    assert_tree_close(f(*_f(x, y)), jf(*_j(x, y)), "value")
    expected = jax.jit(jax.grad(jf, argnums=(0, 1)))(*_j(x, y))
    assert_tree_close(fl.grad(f, argnums=(0, 1))(*_f(x, y)), expected, "grad")
    assert_tree_close(fl.jit(fl.grad(f, argnums=(0, 1)))(*_f(x, y)), expected, "jit(grad)")
    assert_tree_close(fl.grad(fl.jit(f), argnums=(0, 1))(*_f(x, y)), expected, "grad(jit)")


@given(cases(batch=2))
def test_vmap_of_grad_matches_loop_and_jax(case):
    prog, xs, y = case
    g = fl.grad(prog.scalar(fnp))
    expected = jax.jit(jax.vmap(jax.grad(prog.scalar(jnp)), in_axes=(0, None)))(*_j(xs, y))
    loop = np.stack([np.asarray(g(*_f(x, y))) for x in xs])
    assert_tree_close(fl.vmap(g, in_axes=(0, None))(*_f(xs, y)), expected, "vmap(grad)")
    assert_tree_close(loop, expected, "loop of grad")
    assert_tree_close(fl.jit(fl.vmap(g, in_axes=(0, None)))(*_f(xs, y)), expected, "jit(vmap(grad))")


@given(cases(), st.integers(0, 2**31 - 1))
def test_jvp_vjp_linearize(case, seed):
    prog, x, y = case
    rng = np.random.default_rng(seed)
    tx, ty, ct = (rng.standard_normal(prog.shape) for _ in range(3))
    f, jf = prog.vec(fnp), prog.vec(jnp)
    out, t_out = fl.jvp(f, _f(x, y), _f(tx, ty))
    assert_tree_close((out, t_out), jax.jvp(jf, _j(x, y), _j(tx, ty)), "jvp")
    _, f_vjp = fl.vjp(f, *_f(x, y))
    ct_in = f_vjp(fnp.asarray(ct))
    assert_tree_close(ct_in, jax.vjp(jf, *_j(x, y))[1](jnp.asarray(ct)), "vjp")
    lhs = float(np.vdot(ct, np.asarray(t_out)))
    rhs = float(np.vdot(np.asarray(ct_in[0]), tx) + np.vdot(np.asarray(ct_in[1]), ty))
    assert abs(lhs - rhs) <= RTOL * (1 + abs(lhs)), f"<ct, J t> = {lhs} but <J^T ct, t> = {rhs}"
    lin_out, f_lin = fl.linearize(f, *_f(x, y))
    assert_tree_close((lin_out, f_lin(*_f(tx, ty))), (out, t_out), "linearize")


@settings(max_examples=FEW)
@given(cases())
def test_jacobians_and_hessian(case):
    prog, x, y = case
    f, jf = prog.vec(fnp), prog.vec(jnp)
    expected = jax.jit(jax.jacrev(jf, argnums=(0, 1)))(*_j(x, y))
    assert_tree_close(fl.jacfwd(f, argnums=(0, 1))(*_f(x, y)), expected, "jacfwd")
    assert_tree_close(fl.jacrev(f, argnums=(0, 1))(*_f(x, y)), expected, "jacrev")
    s, js = prog.scalar(fnp), prog.scalar(jnp)
    assert_tree_close(fl.hessian(s)(*_f(x, y)), jax.jit(jax.hessian(js))(*_j(x, y)), "hessian")


@settings(max_examples=FEW)
@given(cases(batch=2))
def test_value_and_grad_has_aux_under_jit_and_vmap(case):
    prog, xs, y = case

    def with_aux(np_):
        vec, scalar = prog.vec(np_), prog.scalar(np_)
        return lambda x, y: (scalar(x, y), {"vec": vec(x, y), "pair": (np_.sum(x), y[0]), "i": np_.argmax(x)})
    vg, jvg = (tf.value_and_grad(with_aux(np_), argnums=(0, 1), has_aux=True) for tf, np_ in ((fl, fnp), (jax, jnp)))
    assert_tree_close(fl.jit(vg)(*_f(xs[0], y)), jvg(*_j(xs[0], y)), "jit(value_and_grad(has_aux))")
    expected = jax.jit(jax.vmap(jvg, in_axes=(0, None)))(*_j(xs, y))
    assert_tree_close(fl.vmap(fl.jit(vg), in_axes=(0, None))(*_f(xs, y)), expected, "vmap(jit(value_and_grad))")


@settings(max_examples=FEW)
@given(cases(batch=2))
def test_pytree_params(case):
    """Dict/list parameters keep their structure through grad, jit, vmap, jacfwd, jacrev and hessian."""
    prog, xs, y = case

    def make(np_):
        scalar = prog.scalar(np_)
        return lambda p: scalar(p["w"], p["b"][0]) + np_.sum(p["b"][1] * p["w"][0] ** 2)
    f, jf = make(fnp), make(jnp)

    def params(to, w):
        return {"w": to(w), "b": [to(y), to(y[-1] * 0.5)]}
    p, jp = params(fnp.asarray, xs[0]), params(jnp.asarray, xs[0])
    expected = jax.jit(jax.grad(jf))(jp)
    assert_tree_close(fl.grad(f)(p), expected, "grad")
    assert_tree_close(fl.jit(fl.grad(f))(p), expected, "jit(grad)")
    assert_tree_close(fl.jacfwd(f)(p), jax.jit(jax.jacfwd(jf))(jp), "jacfwd")
    assert_tree_close(fl.jit(fl.hessian(f))(p), jax.jit(jax.hessian(jf))(jp), "jit(hessian)")   # jacfwd(jacrev)
    axes = {"w": 0, "b": [None, None]}
    expected = jax.jit(jax.vmap(jax.grad(jf), in_axes=(axes,)))(params(jnp.asarray, xs))
    assert_tree_close(fl.vmap(fl.grad(f), in_axes=(axes,))(params(fnp.asarray, xs)), expected, "vmap(grad)")


@pytest.mark.xfail(strict=True, reason="abs's jvp is t * sign(x) (0 at 0); JAX's is select(x >= 0, t, -t)")
def test_abs_grad_at_zero():
    x = np.array([0.0, -1.0, 2.0])
    assert_tree_close(fl.grad(lambda x: fnp.sum(fnp.abs(x)))(fnp.asarray(x)),
                      jax.grad(lambda x: jnp.sum(jnp.abs(x)))(jnp.asarray(x)), "grad of abs")


# ------------------------------------------------------------------------------------ random transform stacks
SCALES = np.array([0.5, -1.0])
STACK = ("jit", "jit_closure", "grad", "vmap", "vmap_axes", "jvp", "vjp", "linearize", "jacrev", "jacfwd", "value_and_grad_aux")


def _wrap(tf, np_, name: str, g, tx, ty):
    """One layer of a transform stack: a function of (x, y) built from ``g`` by transform module ``tf``."""
    if name == "jit":
        return tf.jit(g)
    if name == "jit_closure":   # x enters the jitted body as a closed-over (possibly traced) value
        return lambda x, y: tf.jit(lambda y: g(x, y))(y)
    if name == "grad":
        return tf.grad(lambda x, y: np_.sum(np_.sin(g(x, y))))
    if name == "vmap":
        return lambda x, y: tf.vmap(lambda s: g(x * s, y))(np_.asarray(SCALES))
    if name == "vmap_axes":   # y mapped along its axis 1, the output's mapped axis last
        return lambda x, y: tf.vmap(lambda s, y: g(x * s, y), in_axes=(0, 1), out_axes=-1)(
            np_.asarray(SCALES), np_.stack([y, y * y], axis=1))
    if name == "jvp":
        return lambda x, y: tf.jvp(g, (x, y), (np_.asarray(tx), np_.asarray(ty)))[1]
    if name == "vjp":   # the cotangent is computed from the primal output
        def pulled(x, y):
            out, pull = tf.vjp(g, x, y)
            return pull(np_.cos(out))[1]
        return pulled
    if name == "value_and_grad_aux":
        def vg(x, y):
            (v, aux), gx = tf.value_and_grad(lambda x: (np_.sum(np_.sin(g(x, y))), g(x, y)), has_aux=True)(x)
            return gx * v + np_.sum(aux)
        return vg
    if name == "linearize":
        return lambda x, y: tf.linearize(g, x, y)[1](np_.asarray(tx), np_.asarray(ty))
    if name == "jacrev":
        return lambda x, y: tf.jacrev(lambda y: g(x, y))(y)
    return lambda x, y: tf.jacfwd(lambda x: np_.sum(g(x, y), axis=0))(x)


@settings(max_examples=FEW)
@given(cases(), st.lists(st.sampled_from(STACK), min_size=1, max_size=3), st.integers(0, 2**31 - 1))
def test_random_transform_stacks(case, stack, seed):
    prog, x, y = case
    rng = np.random.default_rng(seed)
    tx, ty = rng.standard_normal(prog.shape), rng.standard_normal(prog.shape)
    f, jf = prog.vec(fnp), prog.vec(jnp)
    for name in stack:
        f, jf = _wrap(fl, fnp, name, f, tx, ty), _wrap(jax, jnp, name, jf, tx, ty)
    assume(well_conditioned(jf, x, y))
    assert_tree_close(f(*_f(x, y)), jf(*_j(x, y)), " o ".join(reversed(stack)))


@settings(max_examples=FEW)
@given(cases(), st.integers(0, 99), st.integers(0, 99))
def test_integer_argument_through_transforms(case, k0, k1):
    """An integer index argument rides along grad, jit and vmap (traced under jit and vmap, never differentiated)."""
    prog, x, y = case
    m = prog.shape[0]

    def make(np_):
        scalar = prog.scalar(np_)
        return lambda x, y, k: scalar(x, y) * np_.sum(np_.sin(x[k]) * y[k])
    f, jf = make(fnp), make(jnp)
    k, ks = np.int64(k0 % m), np.array([k0 % m, k1 % m])
    expected = jax.jit(jax.grad(jf, argnums=(0, 1)))(*_j(x, y, k))
    assert_tree_close(fl.jit(fl.grad(f, argnums=(0, 1)))(*_f(x, y, k)), expected, "jit(grad) with int arg")
    batched = jax.jit(jax.vmap(jax.grad(jf), in_axes=(None, None, 0)))(*_j(x, y, ks))
    assert_tree_close(fl.vmap(fl.grad(f), in_axes=(None, None, 0))(*_f(x, y, ks)), batched, "vmap(grad) over ints")
    assert_tree_close(fl.jit(fl.vmap(fl.grad(f), in_axes=(None, None, 0)))(*_f(x, y, ks)), batched, "jit(vmap)")
