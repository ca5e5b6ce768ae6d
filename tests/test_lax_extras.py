"""flfun.lax's jax.lax math and shape helpers (flfun/lax_math.py, flfun/lax_shape.py) against jax.lax in float64,
with grads by finite differences, jit vs eager, vmap vs a loop, and pinned errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.testing import check_grads
from peers import require

jax = require("jax")
jl, jnp = jax.lax, jax.numpy


pytestmark = pytest.mark.usefixtures("jax_x64")


def same(ours, theirs, rtol=1e-10, atol=0.0):
    ours, theirs = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


X = np.linspace(-3.0, 3.0, 13)
POS = np.linspace(0.2, 9.0, 12)
INTS = np.array([0, 1, 7, 255, -1, 2 ** 20, -(2 ** 31)], np.int32)
UNARY = {"acosh": 1.0 + POS, "asinh": X, "atanh": X / 3.5, "cbrt": np.concatenate([X, [-27.0, 8.0, 0.0]]),
         "erfc": X, "erf_inv": X / 3.2, "exp2": X, "square": X, "reciprocal": POS, "lgamma": POS,
         "digamma": POS, "bessel_i0e": X, "bessel_i1e": X, "population_count": INTS, "clz": INTS,
         "bitwise_not": INTS}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_jax(name):
    x = UNARY[name]
    same(getattr(lax, name)(fnp.asarray(x)), getattr(jl, name)(jnp.asarray(x)), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name, a, x", [("igamma", POS[:6], POS[6:]), ("igammac", POS[:6], POS[6:]),
                                        ("zeta", 1.5 + POS[:6], POS[6:]), ("bitwise_and", INTS, INTS[::-1]),
                                        ("bitwise_or", INTS, INTS[::-1]), ("bitwise_xor", INTS, INTS[::-1])])
def test_binary_matches_jax(name, a, x):
    same(getattr(lax, name)(fnp.asarray(a), fnp.asarray(x)), getattr(jl, name)(jnp.asarray(a), jnp.asarray(x)),
         rtol=1e-9)


@pytest.mark.parametrize("m", [0, 1, 2, 3])
def test_polygamma_matches_jax(m):
    same(lax.polygamma(m, fnp.asarray(POS)), jl.polygamma(float(m), jnp.asarray(POS)), rtol=1e-8)


@pytest.mark.parametrize("name", ["asinh", "cbrt", "lgamma", "digamma", "erfc"])
def test_unary_grads(name):
    check_grads(getattr(lax, name), (fnp.asarray(POS),), order=1)


def test_approx_k_mulhi_and_small_helpers():
    x = np.array([[3.0, 1.0, 4.0, 1.0, 5.0]])
    same(lax.approx_max_k(fnp.asarray(x), 2), jl.approx_max_k(jnp.asarray(x), 2, recall_target=1.0))
    same(lax.approx_min_k(fnp.asarray(x), 2), jl.approx_min_k(jnp.asarray(x), 2, recall_target=1.0))
    for dt in ("int32", "uint32", "int16", "uint8"):
        info = np.iinfo(dt)
        a = np.array([info.min, info.max, 12345 % info.max, 3, info.max // 3], dt)
        same(lax.mulhi(fnp.asarray(a), fnp.asarray(a[::-1])), jl.mulhi(jnp.asarray(a), jnp.asarray(a[::-1])))
    same(lax.broadcast_like(fnp.ones(3), fnp.ones((2, 3))), jl.broadcast_like(jnp.ones(3, "float32"), jnp.ones((2, 3))))
    assert lax.stage(2.0).dtype == np.float32 and lax.GatherScatterMode.CLIP.name == "CLIP"
    with pytest.raises(TypeError, match="mulhi: needs two integer"):
        lax.mulhi(fnp.ones(2), fnp.ones(2))


def test_top_k_and_sort_key_val():
    x = np.array([[3.0, 1.0, 4.0, 1.0, 5.0], [9.0, 2.0, 6.0, 5.0, 3.0]])
    same(lax.top_k(fnp.asarray(x), 3), jl.top_k(jnp.asarray(x), 3))
    same(lax.sort_key_val(fnp.asarray(x), fnp.asarray(-x), 1), jl.sort_key_val(jnp.asarray(x), jnp.asarray(-x), 1))
    g = fl.grad(lambda v: fnp.sum(lax.top_k(v, 2)[0] * fnp.asarray([1.0, 10.0])))(fnp.asarray(x[0]))
    assert g.tolist() == [0.0, 0.0, 10.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="top_k: need 0 <= k"):
        lax.top_k(fnp.asarray(x), 9)


@given(st.integers(1, 17), st.booleans(), st.integers(0, 1))
def test_associative_scan_and_cumlogsumexp(n, reverse, axis):
    x = np.random.default_rng(n).standard_normal((n, 3) if axis == 0 else (3, n)) * 30
    flip = (lambda v: np.flip(v, axis)) if reverse else (lambda v: v)
    same(lax.associative_scan(lax.add, fnp.asarray(x), reverse=reverse, axis=axis),
         flip(np.cumsum(flip(x), axis)), rtol=1e-12, atol=1e-12)
    same(lax.cumlogsumexp(fnp.asarray(x), axis, reverse), flip(np.logaddexp.accumulate(flip(x), axis)), rtol=1e-12)
    a, b = lax.associative_scan(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), (fnp.asarray(x), fnp.asarray(x)),
                                axis=axis)          # a non-commutative pytree op: h_t = x_t * h_(t-1) + x_t
    h, ref = np.zeros(x.shape[1 - axis]), []
    for t in range(n):
        xt = np.take(x, t, axis)
        h = xt * h + xt
        ref.append(h)
    same(b, np.stack(ref, axis), rtol=1e-9, atol=1e-9)


def test_associative_scan_matches_jax_and_differentiates():
    x = np.random.default_rng(0).standard_normal((6, 2))
    same(lax.associative_scan(lax.max, fnp.asarray(x), reverse=True),
         jl.associative_scan(jl.max, jnp.asarray(x), reverse=True))
    check_grads(lambda v: lax.cumlogsumexp(v, 0), (fnp.asarray(x),), order=1)


def test_reduce_monoids_and_general():
    x = np.arange(24.0).reshape(2, 3, 4)
    for op in ("add", "mul", "max", "min"):
        same(lax.reduce(fnp.asarray(x), 1.0, getattr(lax, op), (0, 2)),
             jl.reduce(jnp.asarray(x), 1.0, getattr(jl, op), (0, 2)))
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    same(lax.reduce_xor(fnp.asarray(i), (1,)), jl.reduce_xor(jnp.asarray(i), (1,)))
    same(lax.reduce(fnp.asarray(x), -1.0, lambda a, b: fnp.maximum(a, b * 2.0), (1,)),
         jl.reduce(jnp.asarray(x), -1.0, lambda a, b: jnp.maximum(a, b * 2.0), (1,)))
    eager = lax.reduce(fnp.asarray(x), 0.0, lax.add, (1,))
    assert np.array_equal(fl.jit(lambda v: lax.reduce(v, 0.0, lax.add, (1,)))(fnp.asarray(x)), eager)


def test_shape_helpers_match_jax():
    x = np.arange(24.0).reshape(2, 3, 4)
    f, j = fnp.asarray(x), jnp.asarray(x)
    same(lax.broadcast(f, (5,)), jl.broadcast(j, (5,)))
    same(lax.broadcast_to_rank(f, 5), jl.broadcast_to_rank(j, 5))
    same(lax.broadcasted_iota("int32", (2, 3), 1), jl.broadcasted_iota("int32", (2, 3), 1))
    same(lax.collapse(f, 1), jl.collapse(j, 1))
    same(lax.collapse(f, 0, 2), jl.collapse(j, 0, 2))
    for keep in (True, False):
        same(lax.index_in_dim(f, -1, 1, keep), jl.index_in_dim(j, -1, 1, keep))
        same(lax.dynamic_index_in_dim(f, -2, 2, keep), jl.dynamic_index_in_dim(j, -2, 2, keep))
    same(lax.dynamic_slice_in_dim(f, 2, 2, 2), jl.dynamic_slice_in_dim(j, 2, 2, 2))
    same(lax.dynamic_slice_in_dim(f, 5, 2, 2), jl.dynamic_slice_in_dim(j, 5, 2, 2))       # clamped, as in JAX
    upd = np.full((2, 1, 4), -1.0)
    same(lax.dynamic_update_slice_in_dim(f, fnp.asarray(upd), 1, 1), jl.dynamic_update_slice_in_dim(j, upd, 1, 1))
    same(lax.dynamic_update_index_in_dim(f, fnp.asarray(upd[:, 0]), 2, 1),
         jl.dynamic_update_index_in_dim(j, upd[:, 0], 2, 1))
    idx = (np.array([0, 1, 1]), np.array([2, 0, 1]))
    same(lax.index_take(f, [fnp.asarray(i) for i in idx], (0, 1)),
         jl.index_take(j, [jnp.asarray(i) for i in idx], (0, 1)))
    same(lax.tile(f, (1, 2, 1)), jl.tile(j, (1, 2, 1)))
    same(lax.split(f, (1, 3), 2), jl.split(j, (1, 3), 2))
    same(lax.unstack(f, 1), jl.unstack(j, 1))
    same(lax.full_like(f, 7.0, "int32"), jl.full_like(j, 7.0, "int32"))
    assert lax.dtype(1.0) == np.float32 and lax.optimization_barrier(f) is f


def test_dynamic_in_dim_under_jit_and_vmap():
    x = fnp.arange(10.0)
    f = fl.jit(lambda v, i: lax.dynamic_slice_in_dim(v, i, 3))
    assert f(x, fnp.asarray(4)).tolist() == [4.0, 5.0, 6.0] and f(x, fnp.asarray(-3)).tolist() == [7.0, 8.0, 9.0]
    rows = fl.vmap(lambda i: lax.dynamic_index_in_dim(x, i, keepdims=False))(fnp.asarray([0, 3, 9]))
    assert rows.tolist() == [0.0, 3.0, 9.0]


def test_dot_and_batch_matmul():
    rng = np.random.default_rng(0)
    a, b, v = rng.standard_normal((4, 2, 3)), rng.standard_normal((4, 3, 5)), rng.standard_normal(3)
    same(lax.dot(fnp.asarray(a[0]), fnp.asarray(v)), jl.dot(jnp.asarray(a[0]), jnp.asarray(v)), rtol=1e-12)
    same(lax.batch_matmul(fnp.asarray(a), fnp.asarray(b)), jl.batch_matmul(jnp.asarray(a), jnp.asarray(b)),
         rtol=1e-12)
    with pytest.raises(ValueError, match="batch_matmul"):
        lax.batch_matmul(fnp.asarray(a), fnp.asarray(b[0]))


@pytest.mark.parametrize("padding", ["SAME", "VALID", "SAME_LOWER"])
@pytest.mark.parametrize("n, k, s", [(5, 3, 1), (6, 3, 2), (7, 2, 3), (4, 4, 1)])
def test_padding_and_conv_shape_helpers(padding, n, k, s):
    assert lax.padtype_to_pads((n,), (k,), (s,), padding) == list(jl.padtype_to_pads((n,), (k,), (s,), padding))
    dn = ("NHWC", "HWIO", "NHWC")
    lhs, rhs = (2, n, n + 1, 3), (k, k, 3, 4)
    if padding != "SAME_LOWER":
        assert lax.conv_general_shape_tuple(lhs, rhs, (s, s), padding, dn) == \
            tuple(jl.conv_general_shape_tuple(lhs, rhs, (s, s), padding, dn))
        assert lax.reduce_window_shape_tuple((n, n), (k, k), (s, s), padding) == \
            tuple(jl.reduce_window_shape_tuple((n, n), (k, k), (s, s),
                                                 jl.padtype_to_pads((n, n), (k, k), (s, s), padding)))
    assert lax.conv_dimension_numbers(lhs, rhs, dn) == tuple(jl.conv_dimension_numbers(lhs, rhs, dn))
    assert lax.conv_general_permutations(dn) == jl.conv_general_permutations(dn)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("k, s", [(3, 1), (3, 2), (2, 3), (4, 2)])
def test_conv_and_conv_transpose_match_jax(padding, k, s):
    rng = np.random.default_rng(k * 10 + s)
    x, w = rng.standard_normal((2, 6, 5, 3)), rng.standard_normal((k, k, 3, 4))
    dn = ("NHWC", "HWIO", "NHWC")
    same(lax.conv_transpose(fnp.asarray(x), fnp.asarray(w), (s, s), padding, dimension_numbers=dn),
         jl.conv_transpose(jnp.asarray(x), jnp.asarray(w), (s, s), padding, dimension_numbers=dn), rtol=1e-10)
    wt = rng.standard_normal((k, k, 4, 3))
    same(lax.conv_transpose(fnp.asarray(x), fnp.asarray(wt), (s, s), padding, dimension_numbers=dn,
                            transpose_kernel=True),
         jl.conv_transpose(jnp.asarray(x), jnp.asarray(wt), (s, s), padding, dimension_numbers=dn,
                           transpose_kernel=True), rtol=1e-10)
    xc, wc = np.moveaxis(x, 3, 1), np.moveaxis(w, (2, 3), (1, 0))
    same(lax.conv(fnp.asarray(xc), fnp.asarray(wc), (s, s), padding),
         jl.conv(jnp.asarray(xc), jnp.asarray(wc), (s, s), padding), rtol=1e-10)


@pytest.mark.parametrize("op, init", [("max", -np.inf), ("add", 0.0), ("min", np.inf)])
@pytest.mark.parametrize("padding", ["VALID", "SAME", ((1, 0), (0, 2))])
def test_reduce_window_matches_jax(op, init, padding):
    x = np.random.default_rng(1).standard_normal((5, 7))
    args = ((2, 3), (1, 2), padding)
    same(lax.reduce_window(fnp.asarray(x), init, getattr(lax, op), *args),
         jl.reduce_window(jnp.asarray(x), init, getattr(jl, op), *args), rtol=1e-12)
    same(lax.reduce_window(fnp.asarray(x), init, getattr(lax, op), (2, 2), (1, 1), "VALID", window_dilation=(2, 1)),
         jl.reduce_window(jnp.asarray(x), init, getattr(jl, op), (2, 2), (1, 1), "VALID", window_dilation=(2, 1)),
         rtol=1e-12)
    check_grads(lambda v: lax.reduce_window(v, 0.0, lax.add, *args), (fnp.asarray(x),), order=1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reduce_precision_matches_jax(dtype):
    x = np.concatenate([np.random.default_rng(2).standard_normal(50) * 10.0 ** np.arange(-6, 6.5, 0.25)[:50],
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, 1e-30, 1 + 2 ** -8, 1 + 3 * 2 ** -8]])
    x = x.astype(dtype)
    for e, m in [(8, 7), (5, 10), (4, 3)] + ([(11, 52), (8, 23)] if dtype == "float64" else [(8, 23)]):
        same(lax.reduce_precision(fnp.asarray(x), e, m), jl.reduce_precision(jnp.asarray(x), e, m))


def test_errors_name_the_function():
    with pytest.raises(ValueError, match="polygamma: m must be"):
        lax.polygamma(-1, fnp.ones(2))
    with pytest.raises(TypeError, match="population_count: needs an integer"):
        lax.population_count(fnp.ones(2))
    with pytest.raises(ValueError, match="padtype_to_pads: padding must be"):
        lax.padtype_to_pads((3,), (2,), (1,), "FULL")
    with pytest.raises(ValueError, match="reduce: operands"):
        lax.reduce((fnp.ones(2), fnp.ones(2)), 0.0, lax.add, (0,))
    with pytest.raises(ValueError, match="reduce_precision: needs a float"):
        lax.reduce_precision(fnp.ones(2, "int32"), 8, 7)
