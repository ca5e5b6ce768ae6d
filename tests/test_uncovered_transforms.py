"""Transform code the rest of the suite never ran: pytree Jacobians and Hessians against jax, jit's inspection
API, user-input errors with their messages, and compositions users hit, checked against jax on float64."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp

jax = pytest.importorskip("jax")
jnp = jax.numpy


@pytest.fixture(autouse=True)
def _x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


X = np.array([0.3, -0.7, 1.1])
W = np.array([[0.5, 0.2], [-0.4, 0.9]])


def _args(m, single):
    """``(a, b)`` pytree arguments built with array module ``m`` (a single-leaf dict when ``single``)."""
    a = {"w": m.asarray(X)} if single else {"w": m.asarray(X), "u": (m.asarray(W[0]),)}
    return a, (m.asarray(np.float64(2.0)), m.asarray(W))


def _fn(m, out):
    def f(a, b):
        s = m.sum(m.sin(a["w"]) * b[0]) + m.sum(m.tanh(b[1] @ a.get("u", (a["w"][:2],))[0]))
        if out == "scalar":
            return s * s
        if out == "array":
            return m.exp(a["w"]) * s
        if out == "single_dict":
            return {"y": s * m.cos(b[1])}
        return {"s": s, "v": (m.exp(b[1]) * m.sum(a["w"]), a["w"] ** 2)}
    return f


def _assert_tree_close(got, want, rtol=1e-10):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=1e-12)


@functools.lru_cache(maxsize=None)
def _jax_reference(name, single, out):
    """jax's jacfwd (for both Jacobians) or hessian over argnums (0, 1), jitted (eager jax is slow), with the
    output and argument structures; other argnums are blocks of it."""
    jname = "hessian" if name == "hessian" else "jacfwd"
    args = _args(jnp, single)
    ref = jax.jit(getattr(jax, jname)(_fn(jnp, out), (0, 1)))(*args)
    structure = jax.tree_util.tree_structure
    return ref, structure(jax.eval_shape(_fn(jnp, out), *args)), [structure(a) for a in args]


def _block(ref, arg_trees, hess, argnums):
    """The block of a per-output-leaf (0, 1) Jacobian/Hessian ``ref`` for ``argnums`` (a Hessian nests
    ``H[i]`` shaped like argument i, with a tuple over j at each leaf)."""
    if argnums == (0, 1):
        return ref
    i = argnums if isinstance(argnums, int) else argnums[0]
    block = ref[i]
    if hess:
        block = arg_trees[i].unflatten([t[i] for t in arg_trees[i].flatten_up_to(block)])
        if not isinstance(argnums, int):
            block = arg_trees[i].unflatten([(leaf,) for leaf in arg_trees[i].flatten_up_to(block)])
    return block if isinstance(argnums, int) else (block,)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,)])
@pytest.mark.parametrize("out", ["scalar", "array", "single_dict", "tree"])
@pytest.mark.parametrize("single", [True, False])
@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
def test_jacobians_of_pytrees_match_jax(name, single, out, argnums):
    got = getattr(fl, name)(_fn(fnp, out), argnums)(*_args(fnp, single))
    ref, out_tree, arg_trees = _jax_reference(name, single, out)
    want = out_tree.unflatten([_block(r, arg_trees, name == "hessian", argnums) for r in out_tree.flatten_up_to(ref)])
    _assert_tree_close(got, want)
