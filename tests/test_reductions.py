"""flfun.numpy reductions and scans against numpy (values and array-API dtypes over random shapes, axes,
keepdims and dtypes), zero-size reductions, the error messages, and the derivative rules at ties and zeros."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import lax, primitives
from flfun.testing import arrays, check_grads, check_jvp, check_vjp, check_vmap, shapes, valid_axes

NUMERIC = ("float32", "float64", "int32", "int64", "uint8", "bool")


def _any_array(shape_strategy, dtypes=NUMERIC, low=-2.0, high=2.0):
    return st.sampled_from(dtypes).flatmap(lambda d: arrays(d, shape_strategy, low=low, high=high))


def _np(fn, *args, **kw):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def _close(out, expected, dtype, rtol=2e-5):
    out, expected = np.asarray(out), np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    tol = rtol if np.dtype(dtype) in (np.float32, np.uint8) or np.dtype(dtype).kind != "f" else 1e-12
    np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=tol, atol=tol * 10)


@st.composite
def _array_axis(draw, dtypes=NUMERIC, min_side=1, low=-3.0, high=3.0, nan=False):
    dtype = draw(st.sampled_from(dtypes))
    x = draw(arrays(dtype, shapes(max_dims=3, min_side=min_side), low=low, high=high))
    if nan and x.dtype.kind == "f" and x.size:
        x = np.where(draw(arrays("bool", x.shape)), np.nan, x).astype(x.dtype)
    return x, draw(valid_axes(x.ndim)), draw(st.booleans())


# the numpy reference must give the array API's dtype, which numpy 2 does for all of these
SAME_DTYPE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "amax": np.amax, "amin": np.amin,
              "any": np.any, "all": np.all, "count_nonzero": np.count_nonzero}


@pytest.mark.parametrize("name", sorted(SAME_DTYPE))
@given(data=_array_axis(low=-2.0, high=2.0))
def test_reduction_matches_numpy_with_its_dtype(name, data):
    x, axis, keepdims = data
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    expected = SAME_DTYPE[name](x, axis=axis, keepdims=keepdims)
    assert np.asarray(out).dtype == np.asarray(expected).dtype, f"{name}({x.dtype}): {out.dtype}"
    _close(out, expected, x.dtype, rtol=1e-4 if name == "prod" else 2e-5)


FLOAT_RESULT = {"mean": np.mean, "var": np.var, "std": np.std, "ptp": np.ptp, "nansum": np.nansum,
                "nanmean": np.nanmean, "nanmax": np.nanmax, "nanmin": np.nanmin}


@pytest.mark.parametrize("name", sorted(FLOAT_RESULT))
@given(data=_array_axis(dtypes=("float32", "float64", "int32"), nan=True))
def test_float_reduction_matches_numpy(name, data):
    x, axis, keepdims = data
    if not name.startswith("nan"):
        x = np.nan_to_num(x)
    out = np.asarray(getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims))
    expected = _np(FLOAT_RESULT[name], x, axis=axis, keepdims=keepdims)
    if x.dtype.kind == "f":
        assert out.dtype == x.dtype
    elif name in ("mean", "var", "std", "nanmean"):
        assert out.dtype == np.float32          # flfun's default float, where numpy gives float64
    _close(out, expected, "float32" if x.dtype.kind != "f" else x.dtype, rtol=1e-4)


@given(data=_array_axis(dtypes=("float32", "float64")), correction=st.sampled_from([0, 1, 0.5]))
def test_var_std_correction_and_ddof(data, correction):
    x, axis, keepdims = data
    for name in ("var", "std"):
        expected = _np(getattr(np, name), x.astype(np.float64), axis=axis, keepdims=keepdims, ddof=correction)
        for kw in ({"correction": correction}, {"ddof": correction}):
            out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims, **kw)
            np.testing.assert_allclose(np.asarray(out, np.float64), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(x=_any_array(shapes(max_dims=3)), data=st.data())
def test_argmax_argmin_match_numpy(name, x, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1)))
    keepdims = data.draw(st.booleans())
    if x.ndim and x.dtype.kind == "f" and data.draw(st.booleans()):
        x = np.where(data.draw(arrays("bool", x.shape)), np.nan, x).astype(x.dtype)
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@given(x=_any_array(shapes(max_dims=3)), data=st.data())
def test_cumsum_cumprod_match_numpy(name, x, data):
    axis = data.draw(st.one_of(st.none(), st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1)) if x.ndim
                     else st.none())
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis)
    expected = getattr(np, name)(x, axis=axis)
    assert out.dtype == expected.dtype
    _close(out, expected, x.dtype, rtol=1e-4)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@given(x=_any_array(shapes(min_dims=1, max_dims=3)), data=st.data())
def test_cumulative_sum_prod_match_numpy(name, x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1) if x.ndim > 1 else st.none() | st.just(0))
    include_initial = data.draw(st.booleans())
    out = getattr(fnp, name)(fnp.asarray(x), axis=axis, include_initial=include_initial)
    expected = getattr(np, name)(x, axis=axis, include_initial=include_initial)
    assert out.dtype == expected.dtype
    _close(out, expected, x.dtype, rtol=1e-4)


@given(x=arrays("float64", shapes(min_dims=1, max_dims=3)), data=st.data())
def test_average_matches_numpy(x, data):
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    one_d = axis is not None and data.draw(st.booleans())
    w = data.draw(arrays("float64", (x.shape[axis],) if one_d else x.shape, low=0.5, high=2.0))
    avg, total = fnp.average(fnp.asarray(x), axis=axis, weights=fnp.asarray(w), returned=True)
    ref_avg, ref_total = np.average(x, axis=axis, weights=w, returned=True)
    np.testing.assert_allclose(np.asarray(avg), ref_avg, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(total), ref_total, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(fnp.average(fnp.asarray(x), axis=axis)), np.average(x, axis=axis),
                               rtol=1e-10, atol=1e-12)


def test_dtype_rules():
    for dt, want in (("int8", "int64"), ("int32", "int64"), ("uint8", "uint64"), ("bool", "int64"),
                     ("float32", "float32"), ("float64", "float64"), ("int64", "int64")):
        x = fnp.ones(3, dtype=dt)
        for fn in (fnp.sum, fnp.prod, fnp.cumsum, fnp.cumulative_sum, fnp.cumulative_prod):
            assert fn(x).dtype == np.dtype(want), (fn.__name__, dt)
    assert fnp.sum(fnp.ones(3, dtype="int32"), dtype="int32").dtype == np.int32
    assert fnp.max(fnp.ones(3, dtype="int8")).dtype == np.int8
    assert fnp.mean(fnp.ones(3, dtype="int32")).dtype == np.float32
    assert fnp.argmax(fnp.ones(3, dtype="float64")).dtype == np.int64
    assert fnp.count_nonzero(fnp.ones((2, 3))).dtype == np.int64


def test_zero_size_reductions():
    e = fnp.zeros((0, 3))
    assert fnp.sum(e).tolist() == 0.0 and fnp.sum(e, axis=0).tolist() == [0.0] * 3
    assert fnp.prod(e, axis=0).tolist() == [1.0] * 3
    assert fnp.max(e, axis=1).shape == (0,)
    assert fnp.max(e, axis=0, initial=-1.0).tolist() == [-1.0] * 3
    assert fnp.any(e).tolist() is False and fnp.all(e).tolist() is True
    assert np.isnan(np.asarray(fnp.mean(e)))
    assert fnp.cumsum(e).shape == (0,)
    with pytest.raises(ValueError, match=r"max: zero-size reduction over axis 0 of f32\[0,3\]: max has no "
                                         r"identity \(pass initial=\)"):
        fnp.max(e, axis=0)
    with pytest.raises(ValueError, match=r"min: zero-size reduction over axis 0 of f32\[0,3\]"):
        fnp.min(e)
    with pytest.raises(ValueError, match=r"nanmax: zero-size reduction"):
        fnp.nanmax(e)
    with pytest.raises(ValueError, match=r"argmax: attempt to get argmax of an empty sequence \(f32\[0,3\]\)"):
        fnp.argmax(e)
    with pytest.raises(ValueError, match=r"argmin: attempt to get argmin of an empty sequence \(axis 0"):
        fnp.argmin(e, axis=0)
    # lax gives the identity, as JAX does
    assert lax.reduce_max(e, (0,)).tolist() == [-np.inf] * 3
    assert lax.reduce_min(fnp.zeros((0,), dtype="int32"), (0,)).tolist() == np.iinfo(np.int32).max


def test_nan_handling():
    x = fnp.asarray([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])
    assert fnp.argmax(x, axis=1).tolist() == [1, 0] and fnp.argmin(x).tolist() == 1
    assert np.isnan(np.asarray(fnp.max(x, axis=1))).all()
    np.testing.assert_array_equal(np.asarray(fnp.nanmax(x, axis=1)), [3.0, np.nan])
    np.testing.assert_array_equal(np.asarray(fnp.nanmin(x, axis=1)), [1.0, np.nan])
    np.testing.assert_array_equal(np.asarray(fnp.nanmean(x, axis=1)), [2.0, np.nan])
    assert fnp.nansum(x).tolist() == 4.0 and fnp.nanprod(x).tolist() == 3.0


# ------------------------------------------------------------------------------------------------------- errors
F3 = fnp.zeros(3)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: lax.reduce_max(F3, (1,)), TypeError,
     r"reduce_max: axes \(1,\) must be a tuple of distinct ints within the rank of f32\[3\]"),
    (lambda: lax.reduce_prod(fnp.zeros((2, 2)), (0, 0)), TypeError, r"reduce_prod: axes \(0, 0\) must be"),
    (lambda: lax.reduce_sum(fnp.zeros(3, dtype="bool"), (0,)), TypeError,
     r"reduce_sum: requires numeric operands, got bool\[3\]"),
    (lambda: lax.reduce_prod(fnp.zeros(3, dtype="bool"), (0,)), TypeError, r"reduce_prod: requires numeric"),
    (lambda: lax.reduce_or(F3, (0,)), TypeError, r"reduce_or: requires boolean operands, got f32\[3\]"),
    (lambda: lax.reduce_and(fnp.zeros(3, dtype="int32"), (0,)), TypeError, r"reduce_and: requires boolean"),
    (lambda: lax.argmax(F3, 0, "float32"), TypeError,
     r"argmax: index_dtype must be an integer dtype, got float32 for f32\[3\]"),
    (lambda: lax.argmin(F3, 1, "int32"), TypeError, r"argmin: axis 1 is out of range for f32\[3\]"),
    (lambda: lax.argmax(fnp.zeros((2, 0)), 1, "int32"), ValueError,
     r"argmax: axis 1 of f32\[2,0\] is empty; argmax needs at least one element"),
    (lambda: lax.cumsum(F3, 1), TypeError, r"cumsum: axis 1 is out of range for f32\[3\]"),
    (lambda: lax.cummax(fnp.zeros((), dtype="float32"), 0), TypeError, r"cummax: axis 0 is out of range for f32\[\]"),
    (lambda: lax.cumprod(fnp.zeros(3, dtype="bool"), 0), TypeError, r"cumprod: requires numeric operands"),
    (lambda: fnp.sum(F3, axis=1), ValueError, r"sum: axis 1 is out of bounds for an array of rank 1"),
    (lambda: fnp.max(fnp.zeros((2, 2)), axis=(0, -2)), ValueError, r"max: repeated axis in \(0, -2\)"),
    (lambda: fnp.argmax(F3, axis=(0,)), TypeError, r"argmax: axis must be an integer"),
    (lambda: fnp.cumulative_sum(fnp.zeros((2, 2))), ValueError,
     r"cumulative_sum: axis is required for arrays of rank > 1, got f32\[2,2\]"),
    (lambda: fnp.var(F3, correction=1, ddof=1), ValueError,
     r"var: pass either correction= \(array API\) or ddof= \(numpy\), not both"),
    (lambda: fnp.ptp(fnp.zeros(3, dtype="bool")), TypeError, r"ptp: boolean arrays are not supported"),
    (lambda: fnp.average(fnp.zeros((2, 3)), weights=fnp.ones(3)), ValueError,
     r"average: axis must be given when weights \(f32\[3\]\) and a \(f32\[2,3\]\) differ in shape"),
    (lambda: fnp.average(fnp.zeros((2, 3)), axis=1, weights=fnp.ones(2)), ValueError,
     r"average: length of weights \(2\) differs from a.shape\[1\] of f32\[2,3\]"),
])
def test_error_messages(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# --------------------------------------------------------------------------------------------------- derivatives
def test_max_min_split_the_gradient_between_ties():
    x = fnp.asarray([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype="float64")
    np.testing.assert_allclose(np.asarray(fl.grad(lambda v: fnp.sum(fnp.max(v, axis=1)))(x)),
                               [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(np.asarray(fl.grad(lambda v: fnp.min(v))(x)), [[1, 0, 0], [0, 0, 0]])
    check_vjp(lambda v: lax.reduce_max(v, (0, 1)), (np.asarray(x),))       # the rule is linear at ties too


def _others_product(x, axis):
    """d prod(x, axis) / dx_i = the product of the other entries, by brute force."""
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    out = np.stack([np.prod(np.delete(x, i, axis=-1), axis=-1) for i in range(n)], axis=-1)
    return np.moveaxis(out, -1, axis)


@given(x=arrays("float64", shapes(min_dims=1, max_dims=3), low=-2, high=2), data=st.data())
def test_prod_gradient_is_exact_with_zeros(x, data):
    x = np.where(data.draw(arrays("bool", x.shape)), 0.0, x)     # often one, two or more zeros per slice
    axis = data.draw(st.integers(0, x.ndim - 1))
    g = fl.grad(lambda v: fnp.sum(fnp.prod(v, axis=axis)))(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(g), _others_product(x, axis), rtol=1e-12, atol=1e-12)


@given(x=arrays("float64", shapes(min_dims=1, max_dims=2, max_side=5), low=-2, high=2), data=st.data())
def test_cumprod_derivatives_with_zeros(x, data):
    x = np.where(data.draw(arrays("bool", x.shape)), 0.0, x)
    axis, reverse = data.draw(st.integers(0, x.ndim - 1)), data.draw(st.booleans())
    # cumprod is multilinear, so central differences are exact up to rounding, zeros or not
    check_jvp(lambda v: lax.cumprod(v, axis, reverse), (x,), atol=1e-7, rtol=1e-7)
    check_vjp(lambda v: lax.cumprod(v, axis, reverse), (x,), atol=1e-9, rtol=1e-9)


def test_second_derivatives():
    x = np.array([[0.5, -1.2, 0.0, 2.0], [1.5, 0.3, -0.7, 0.9]])
    check_grads(lambda v: lax.reduce_prod(v, (1,)), (x,), order=2, atol=1e-5, rtol=1e-5)
    check_grads(lambda v: lax.cumprod(v, 1, True), (x,), order=2, atol=1e-5, rtol=1e-5)
    check_grads(lambda v: lax.cummax(v * v, 1), (x[:, [0, 1, 3]],), order=2, atol=1e-5, rtol=1e-5)
    check_grads(lambda v: lax.reduce_min(v * v, (0, 1)), (x[:, [0, 1, 3]],), order=2, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["mean", "var", "std", "nanmean", "nansum", "ptp", "nanmax", "average"])
def test_numpy_level_gradients(name):
    x = np.array([[0.5, -1.2, 3.0], [1.5, 0.3, -0.7]])
    fn = getattr(fnp, name)
    if name == "average":
        check_grads(lambda v, w: fn(v, axis=1, weights=w), (x, np.abs(x) + 0.5), order=2)
    else:
        check_grads(lambda v: fn(v, axis=0), (x,), order=2)


def test_cumsum_is_linear_with_a_transpose():
    assert primitives.get("cumsum").transpose is not None
    x = np.arange(6.0).reshape(2, 3)
    g = fl.grad(lambda v: fnp.sum(lax.cumsum(v, 1) * fnp.asarray([1.0, 10.0, 100.0], dtype="float64")))
    np.testing.assert_allclose(np.asarray(g(fnp.asarray(x))), [[111, 110, 100]] * 2)


@pytest.mark.parametrize("name", ["argmax", "var", "cumulative_sum", "nanmax", "average"])
def test_vmap_of_numpy_reductions(name):
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    kw = {"axis": -1} if name != "argmax" else {}
    check_vmap(lambda v: getattr(fnp, name)(v, **kw), (x,), in_axes=1, atol=1e-12, rtol=1e-12)


class _OtherXP:
    """numpy under another name: exercises the impls' path for array modules without ufunc.accumulate (cupy)."""
    __name__ = "other"

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@given(x=_any_array(shapes(min_dims=1, max_dims=3), dtypes=("float32", "int32")), data=st.data())
def test_scan_impl_without_ufunc_accumulate(name, x, data):
    from flfun.backends.xp.reduce import impls
    axis, reverse = data.draw(st.integers(0, x.ndim - 1)), data.draw(st.booleans())
    got = impls(_OtherXP())[name](x, axis=axis, reverse=reverse)
    np.testing.assert_array_equal(got, impls(np)[name](x, axis=axis, reverse=reverse))
