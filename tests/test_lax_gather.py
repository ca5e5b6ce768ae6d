"""``lax.gather`` / ``lax.scatter*`` with XLA's dimension numbers against JAX in float64: random dimension
numbers (hypothesis), the layouts jnp's indexing lowers to, every mode, grads, vmap vs loop, jit vs eager, errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from peers import require

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.testing import check_grads, check_vmap

jax = require("jax")
jl, jnp = jax.lax, jax.numpy
pytestmark = pytest.mark.usefixtures("jax_x64")
SCATTERS = ("scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max")


def _dn(kind: str, dn):
    """The same dimension numbers as flfun's and jax's class."""
    name = "GatherDimensionNumbers" if kind == "gather" else "ScatterDimensionNumbers"
    return getattr(lax, name)(*dn), getattr(jl, name)(*dn)


def _close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-12, atol=1e-12)


@st.composite
def gather_cases(draw):
    """A random valid gather: operand, indices (some out of bounds), dimension numbers, slice sizes."""
    r = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=r, max_size=r)))
    obd = draw(st.lists(st.sampled_from(range(r)), unique=True, max_size=1))
    rest = [d for d in range(r) if d not in obd]
    index_map = draw(st.permutations(rest))[:draw(st.integers(0, len(rest)))]
    collapsed = sorted(draw(st.lists(st.sampled_from(rest), unique=True))) if rest else []
    sizes = tuple(1 if d in obd or d in collapsed else draw(st.integers(1, shape[d])) for d in range(r))
    batch = draw(st.lists(st.integers(0, 3), max_size=2))
    ibd = [draw(st.integers(0, len(batch)))] if obd else []
    if obd:
        batch.insert(ibd[0], shape[obd[0]])
    window = [d for d in range(r) if d not in collapsed and d not in obd]
    offset = sorted(draw(st.permutations(range(len(batch) + len(window))))[:len(window)])
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    hi = max(shape) + 1
    indices = rng.integers(-1, hi, size=(*batch, len(index_map)))
    dn = (tuple(offset), tuple(collapsed), tuple(index_map), tuple(obd), tuple(ibd))
    return rng.normal(size=shape), indices, dn, sizes


@given(gather_cases(), st.sampled_from([None, "clip", "fill", "promise_in_bounds"]))
def test_gather_matches_jax(case, mode):
    x, idx, dn, sizes = case
    ours, theirs = _dn("gather", dn)
    out = lax.gather(fnp.asarray(x), fnp.asarray(idx), ours, sizes, mode=mode)
    _close(out, jl.gather(jnp.asarray(x), jnp.asarray(idx), theirs, sizes, mode=mode))


@given(gather_cases(), st.sampled_from(SCATTERS), st.sampled_from([None, "clip", "fill"]))
def test_scatters_match_jax(case, name, mode):
    x, idx, dn, sizes = case
    ours, theirs = _dn("scatter", dn)
    upd = np.random.default_rng(1).normal(size=jl.gather(jnp.asarray(x), jnp.asarray(idx), _dn("gather", dn)[1],
                                                         sizes).shape)
    out = getattr(lax, name)(fnp.asarray(x), fnp.asarray(idx), fnp.asarray(upd), ours, mode=mode)
    _close(out, getattr(jl, name)(jnp.asarray(x), jnp.asarray(idx), jnp.asarray(upd), theirs, mode=mode))


X = np.arange(60.0).reshape(5, 4, 3) / 7


@pytest.mark.parametrize("fn, ref", [
    (lambda x: x[fnp.asarray([3, 0, 4, 0])], lambda x: x[jnp.asarray([3, 0, 4, 0])]),
    (lambda x: x[:, fnp.asarray([[1, 3], [0, 0]])], lambda x: x[:, jnp.asarray([[1, 3], [0, 0]])]),
    (lambda x: x[fnp.asarray([1, 2]), :, fnp.asarray([0, 2])],
     lambda x: x[jnp.asarray([1, 2]), :, jnp.asarray([0, 2])]),
    (lambda x: fnp.take_along_axis(x, fnp.asarray(np.arange(60).reshape(5, 4, 3) % 4), axis=1),
     lambda x: jnp.take_along_axis(x, jnp.asarray(np.arange(60).reshape(5, 4, 3) % 4), axis=1)),
])
def test_jnp_indexing_lowerings(fn, ref):
    """The gathers jnp's indexing builds: replay each gather of ``ref``'s jaxpr with flfun's lax.gather on the
    same operands, and compare flfun's own indexing too."""
    found = []
    _evaluate(jax.make_jaxpr(ref)(jnp.asarray(X)), [jnp.asarray(X)], found)
    assert found
    for p, operand, indices, expected in found:
        dn = lax.GatherDimensionNumbers(*p["dimension_numbers"])
        mode = {"FILL_OR_DROP": "fill"}.get(p["mode"].name, p["mode"].name.lower())
        _close(lax.gather(np.asarray(operand), np.asarray(indices), dn, p["slice_sizes"], mode=mode), expected)
    _close(fn(fnp.asarray(X)), ref(jnp.asarray(X)))


def _evaluate(closed, args: list, found: list) -> list:
    """Evaluate a jaxpr (entering nested jits), appending ``(params, operand, indices, out)`` for each gather."""
    env = dict(zip(closed.jaxpr.invars, args))
    env.update(zip(closed.jaxpr.constvars, closed.consts))
    for e in closed.jaxpr.eqns:
        ins = [v.val if type(v).__name__ == "Literal" else env[v] for v in e.invars]
        if "jaxpr" in e.params and e.primitive.name in ("jit", "pjit"):
            outs = _evaluate(e.params["jaxpr"], ins, found)
        else:
            outs = e.primitive.bind(*ins, **e.params)
            outs = outs if e.primitive.multiple_results else [outs]
        if e.primitive.name == "gather":
            found.append((e.params, *ins, outs[0]))
        env.update(zip(e.outvars, outs))
    return [env[v] for v in closed.jaxpr.outvars]


ROWS = ((1,), (0,), (0,), (), ())                                   # x[idx] for x of rank 2
BATCHED = ((), (1,), (1,), (0,), (0,))                               # x[b, idx[b]]
IDX, BIDX = np.array([[3], [0], [7], [1]]), np.array([[2], [0], [3], [1], [1]])


@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_gather_grads_match_jax(mode):
    x = np.random.default_rng(0).normal(size=(5, 3))
    w = np.random.default_rng(1).normal(size=(4, 3))
    f = lambda lx, L: lambda a: (lx.gather(a, IDX, _dn("gather", ROWS)[L is jnp], (1, 3), mode=mode) * w).sum()
    ours, theirs = fl.grad(f(lax, fnp))(fnp.asarray(x)), jax.grad(f(jl, jnp))(jnp.asarray(x))
    _close(ours, theirs)
    check_grads(lambda a: lax.gather(a, BIDX, _dn("gather", BATCHED)[0], (1, 1), mode=mode, fill_value=0.5), [x],
                atol=1e-6)   # BIDX[2] is out of bounds


@pytest.mark.parametrize("name", ["scatter", *SCATTERS])
def test_scatter_grads_match_jax(name):
    """Unique indices (the derivative of a duplicated set / mul is unspecified) and distinct values (no ties)."""
    x = np.random.default_rng(0).permutation(15).reshape(5, 3) / 4.0 - 1
    upd = np.random.default_rng(1).permutation(9).reshape(3, 3) / 3.0 - 1.1
    idx = np.array([[3], [0], [4]])

    def f(lx, L):
        dn = _dn("scatter", ROWS)[L is jnp]
        weights = L.arange(15.0).reshape(5, 3)
        return lambda a, u: (getattr(lx, name)(a, idx, u, dn, unique_indices=True) ** 2 * weights).sum()
    ours = fl.grad(f(lax, fnp), argnums=(0, 1))(fnp.asarray(x), fnp.asarray(upd))
    for a, b in zip(ours, jax.grad(f(jl, jnp), argnums=(0, 1))(jnp.asarray(x), jnp.asarray(upd))):
        _close(a, b)


def test_vmap_and_jit_match_loop_and_eager():
    rng = np.random.default_rng(0)
    x, upd, idx = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 2, 4)), np.array([[[1], [4]], [[0], [0]], [[9], [2]]])
    g = lambda a, i: lax.gather(a, i, _dn("gather", ROWS)[0], (1, 4), mode="fill")
    s = lambda a, i, u: lax.scatter_add(a, i, u, _dn("scatter", ROWS)[0])
    check_vmap(g, [x, idx])
    check_vmap(g, [x, idx[0]], in_axes=(0, None))
    check_vmap(g, [x[0], idx], in_axes=(None, 0))
    check_vmap(s, [x, idx, upd])
    check_vmap(s, [x[0], idx, upd], in_axes=(None, 0, 0))
    _close(fl.jit(g)(fnp.asarray(x[0]), fnp.asarray(idx[2])), g(fnp.asarray(x[0]), fnp.asarray(idx[2])))
    _close(fl.jit(s)(x[0], idx[2], upd[0]), s(fnp.asarray(x[0]), fnp.asarray(idx[2]), fnp.asarray(upd[0])))


def test_scatter_set_apply_and_defaults_match_jax():
    x, idx, upd = np.arange(8.0).reshape(4, 2), np.array([[2], [7], [0]]), -np.ones((3, 2))
    ours, theirs = _dn("scatter", ROWS)
    _close(lax.scatter(x, idx, upd, ours), jl.scatter(x, idx, upd, theirs))              # drops the 7 (default)
    _close(lax.scatter(x, idx, upd, ours, mode="clip"), jl.scatter(x, idx, upd, theirs, mode="clip"))
    pts = (((), (0, 1), (0, 1)))
    _close(lax.scatter_apply(x, np.array([[1, 1], [3, 0], [3, 0]]), fnp.exp, _dn("scatter", pts)[0], update_shape=(3,)),
           jl.scatter_apply(jnp.asarray(x), jnp.array([[1, 1], [3, 0]]), jnp.exp, _dn("scatter", pts)[1],
                            update_shape=(2,)))
    ints = lax.gather(fnp.arange(4), fnp.asarray([[5]]), _dn("gather", ((), (0,), (0,)))[0], (1,), mode="fill")
    assert ints.tolist() == [np.iinfo(np.int64).min]                                     # JAX's fill defaults
    assert lax.GatherScatterMode.from_any(None) is lax.GatherScatterMode.FILL_OR_DROP
    # flfun's own axes= form still reaches the primitive
    assert lax.gather(fnp.arange(4.0), fnp.asarray([[2]]), axes=(0,)).tolist() == [2.0]


@pytest.mark.parametrize("call, match", [
    (lambda: lax.gather(X, [[0]], lax.GatherDimensionNumbers((1, 0), (0,), (0,)), (1, 4, 3)),
     r"gather: dimension_numbers.offset_dims must be sorted, distinct dims in \[0, 3\), got \(1, 0\)"),
    (lambda: lax.gather(X, [[0]], lax.GatherDimensionNumbers((1, 2), (0,), (0, 1)), (1, 4, 3)),
     r"gather: len\(dimension_numbers.start_index_map\)=2 must equal the last dim of indices i64\[1,1\]"),
    (lambda: lax.gather(X, [[0]], lax.GatherDimensionNumbers((1, 2), (0,), (0,)), (2, 4, 3)),
     r"gather: slice_sizes \(2, 4, 3\) must be 0 or 1 at collapsed_slice_dims"),
    (lambda: lax.gather(X, [[0]], lax.GatherDimensionNumbers((1,), (0,), (0,)), (1, 4, 3)),
     r"gather: len\(dimension_numbers.offset_dims\)=1 must equal the 2 operand dims"),
    (lambda: lax.gather(X, [[0.0]], lax.GatherDimensionNumbers((1, 2), (0,), (0,)), (1, 4, 3)),
     r"gather: indices must be integers"),
    (lambda: lax.gather(X, [[0]], lax.GatherDimensionNumbers((1, 2), (0,), (0,), (0,), (0,)), (1, 4, 3)),
     r"gather: dimension_numbers.collapsed_slice_dims \(0,\) and operand_batching_dims \(0,\) must be disjoint"),
    (lambda: lax.gather(X, [[0]], lax.GatherDimensionNumbers((1, 2), (0,), (0,)), (1, 4, 3), mode="wrap"),
     r'Unknown gather mode "wrap"'),
    (lambda: lax.scatter_add(X, [[0]], np.ones((1, 4)), lax.ScatterDimensionNumbers((1, 2), (0,), (0,))),
     r"scatter_add: dimension_numbers.update_window_dims must be sorted, distinct dims in \[0, 2\)"),
    (lambda: lax.scatter_mul(X, [[0]], np.ones((2, 4, 3)), lax.ScatterDimensionNumbers((1, 2), (0,), (0,))),
     r"scatter_mul: updates f64\[2,4,3\] must have indices' batch dims \(1,\)"),
    (lambda: lax.gather(X, [[0]]), r"gather: pass dimension_numbers and slice_sizes"),
])
def test_errors_name_op_and_field(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()
