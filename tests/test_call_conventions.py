"""The call conventions JAX users rely on: transforms as decorator factories (``@fl.jit(static_argnames=...)``,
``functools.partial(fl.jit, ...)``), ``flfun.tree_util`` under JAX's names (checked against ``jax.tree_util``),
``eval_shape``/``ShapeDtypeStruct`` (against ``jax.eval_shape``), ``make_jaxpr``, ``device_get`` and
``block_until_ready``."""
from __future__ import annotations

import functools
import operator

import numpy as np
import pytest
from peers import require

import flfun as fl
import flfun.numpy as fnp
from flfun import tree_util

jax = require("jax")
jnp = require("jax.numpy")


def test_jit_as_decorator_factory():
    @fl.jit(static_argnames="n")
    def power(x, n):
        return x ** n

    @functools.partial(fl.jit, static_argnums=1)
    def scale(x, k):
        return x * k if k > 0 else -x       # Python control flow on the static k

    assert float(power(fnp.asarray(2.0), n=3)) == 8.0 and isinstance(power, type(fl.jit(lambda x: x)))
    assert float(scale(fnp.asarray(2.0), 3)) == 6.0 and float(scale(fnp.asarray(2.0), -1)) == -2.0


def test_grad_and_value_and_grad_as_decorator_factories():
    @fl.grad(argnums=(0, 1))
    def g(a, b):
        return a * b * b

    @fl.value_and_grad(has_aux=True)
    def h(x):
        return x * x, "aux"

    assert [float(v) for v in g(2.0, 3.0)] == [9.0, 12.0]
    (value, aux), grad = h(3.0)
    assert (float(value), aux, float(grad)) == (9.0, "aux", 6.0)


def test_vmap_and_pmap_as_decorator_factories():
    @fl.vmap(in_axes=(0, None))
    def add(a, b):
        return a + b

    @fl.pmap(axis_name="i")
    def total(x):
        return fl.lax.psum(x, "i")

    np.testing.assert_array_equal(np.asarray(add(fnp.arange(3.0), 1.0)), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(total(fnp.ones((1, 2)))), [[1.0, 1.0]])


def test_remat_and_checkpoint_as_decorator_factories():
    @fl.remat(policy=fl.checkpoint_policies.dots_saveable)
    def layer(x):
        return fnp.sin(x) * x

    @functools.partial(fl.checkpoint, static_argnums=1)
    def power(x, n):
        return x ** n if n > 0 else -x      # Python control flow on the static n

    @fl.checkpoint(static_argnums=(1,), prevent_cse=False)
    def scaled(x, k):
        return x * k

    assert float(fl.grad(layer)(1.0)) == pytest.approx(float(jax.grad(lambda x: jnp.sin(x) * x)(1.0)), rel=1e-6)
    assert float(fl.grad(power)(2.0, 3)) == 12.0 and float(fl.grad(power)(2.0, -1)) == -1.0
    assert float(fl.jit(fl.grad(scaled), static_argnums=1)(2.0, 5)) == 5.0
    with pytest.raises(TypeError, match="checkpoint: fun must be callable"):
        fl.checkpoint(3)


def test_plain_calls_and_errors_are_unchanged():
    assert float(fl.jit(lambda x: x + 1)(1.0)) == 2.0
    with pytest.raises(ValueError, match="jit: fun must be callable"):
        fl.jit(3)
    with pytest.raises(TypeError, match="vmap: expected a function"):
        fl.vmap(in_axes=0)(3)


TREES = [{"a": [1, (2, 3)], "b": None, "c": {"d": 4}}, [(1, 2), (3, 4)], (1,), {"x": [5, 6, 7]}]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_key_paths_match_jax(tree):
    ours = [(tree_util.keystr(p), x) for p, x in tree_util.tree_flatten_with_path(tree)[0]]
    theirs = [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]]
    assert ours == theirs
    doubled = tree_util.tree_map_with_path(lambda p, x: (tree_util.keystr(p), 2 * x), tree)
    assert doubled == jax.tree_util.tree_map_with_path(lambda p, x: (jax.tree_util.keystr(p), 2 * x), tree)


def test_tree_functions_match_jax():
    tree = TREES[0]
    assert tree_util.tree_leaves(tree) == jax.tree_util.tree_leaves(tree)
    assert tree_util.tree_reduce(operator.add, tree) == jax.tree_util.tree_reduce(operator.add, tree)
    assert tree_util.tree_reduce(operator.add, tree, 10) == 20 and tree_util.tree_all((True, [1]))
    assert tree_util.tree_map(lambda x: x * 2, [1, (2,)]) == jax.tree_util.tree_map(lambda x: x * 2, [1, (2,)])
    outer, inner = tree_util.tree_structure([0, 0, 0]), tree_util.tree_structure((0, 0))
    x = [(1, 2), (3, 4), (5, 6)]
    expected = jax.tree_util.tree_transpose(jax.tree_util.tree_structure([0, 0, 0]),
                                            jax.tree_util.tree_structure((0, 0)), x)
    assert tree_util.tree_transpose(outer, inner, x) == expected
    with pytest.raises(TypeError, match="tree_transpose"):
        tree_util.tree_transpose(outer, inner, [(1, 2)])
    assert tree_util.treedef_is_leaf(tree_util.tree_structure(1))
    assert not tree_util.treedef_is_leaf(tree_util.tree_structure([1]))


def test_tree_map_is_leaf():
    out = tree_util.tree_map(lambda t: sum(t), [(1, 2), (3, 4)], is_leaf=lambda x: isinstance(x, tuple))
    assert out == jax.tree_util.tree_map(lambda t: sum(t), [(1, 2), (3, 4)], is_leaf=lambda x: isinstance(x, tuple))


@tree_util.register_pytree_node_class
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten(self):
        return (self.a, self.b), "pair"

    @classmethod
    def tree_unflatten(cls, aux, children):
        assert aux == "pair"
        return cls(*children)


def test_register_pytree_node_class_and_partial_cross_transforms():
    out = fl.jit(lambda p: Pair(p.b, p.a * 2))(Pair(fnp.asarray(1.0), fnp.asarray(5.0)))
    assert (float(out.a), float(out.b)) == (5.0, 2.0)
    scale = tree_util.Partial(lambda k, x: k * x, fnp.asarray(3.0))
    assert float(fl.jit(lambda f, x: f(x))(scale, fnp.asarray(2.0))) == 6.0
    assert len(tree_util.tree_leaves(scale)) == 1
    grads = fl.grad(lambda f: f(fnp.asarray(2.0)))(scale)
    assert isinstance(grads, tree_util.Partial) and float(grads.args[0]) == 2.0


@pytest.mark.parametrize("fn,args", [
    (lambda x, y: {"p": x @ y, "s": (x.sum(axis=0), x.shape[0] * 1.0)}, ((3, 4), (4, 2))),
    (lambda x, y: [x[:, None] * y, x.T], ((5, 2), (2,))),
], ids=["dict", "list"])
def test_eval_shape_matches_jax(fn, args):
    specs = [fl.ShapeDtypeStruct(s, "float32") for s in args]
    ours = fl.eval_shape(fn, *specs)
    theirs = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(s, jnp.float32) for s in args])
    assert fl.tree_structure(ours) == fl.tree_structure(jax.tree_util.tree_map(lambda s: s, theirs,
                                                                               is_leaf=lambda s: hasattr(s, "shape")))
    assert [(o.shape, o.dtype) for o in fl.tree_leaves(ours)] == [(t.shape, t.dtype) for t in
                                                                   jax.tree_util.tree_leaves(theirs)]


def test_eval_shape_takes_arrays_and_computes_nothing():
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return fnp.sin(x) * 2

    out = fl.eval_shape(f, np.ones((2, 3), np.float64))
    assert out == fl.ShapeDtypeStruct((2, 3), "float64") and calls and "Array" not in calls
    assert fl.eval_shape(f, fnp.ones(4)).shape == (4,) and fl.ShapeDtypeStruct((2,), "int32").ndim == 1


def test_make_jaxpr_device_get_block_until_ready():
    text = str(fl.make_jaxpr(lambda x: fnp.sin(x) * 2.0)(1.0))
    assert "sin" in text and "mul" in text
    got = fl.device_get({"w": fnp.ones(2), "n": 3})
    assert isinstance(got["w"], np.ndarray) and got["n"] == 3
    x = [fnp.ones(2), {"b": fnp.zeros(1)}]
    assert fl.block_until_ready(x) is x
