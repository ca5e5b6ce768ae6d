"""Tests for flfun.numpy code the rest of the suite never ran: numpy's take modes on traced indices, round with
decimals, nan_to_num, imag, float_power, take_along_axis / put_along_axis modes, reprs, and user-input errors."""
import warnings

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp

x25 = np.arange(10.0, dtype=np.float32).reshape(2, 5)


def _np(a):
    return np.asarray(a)


# ----------------------------------------------------------------------------------------------- take modes
@pytest.mark.parametrize("mode", ["wrap", "clip"])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int16, np.int8, np.uint8])
def test_take_wrap_clip_traced_matches_numpy(mode, idx_dtype):
    """The traced path of numpy's 'wrap' / 'clip' modes; an axis longer than the index dtype's range used to
    overflow (OverflowError from numpy) when the bounds were made in that dtype."""
    big = np.arange(300.0, dtype=np.float32)
    idx = np.array([100, -100, 5, -1] if idx_dtype != np.uint8 else [250, 120, 3, 0]).astype(idx_dtype)
    ref = np.take(big, idx, mode=mode)
    got = fl.jit(lambda i: fnp.take(fnp.asarray(big), i, mode=mode))(fnp.asarray(idx))
    np.testing.assert_array_equal(_np(got), ref)
    assert got.dtype == np.float32
    idx2 = np.array([[7, -8], [3, -1]], idx_dtype if idx_dtype != np.uint8 else np.int64)
    batched = fl.vmap(lambda i: fnp.take(fnp.asarray(x25), i, axis=1, mode=mode))(fnp.asarray(idx2))
    loop = np.stack([np.take(x25, i, axis=1, mode=mode) for i in idx2])
    np.testing.assert_array_equal(_np(batched), loop)


@pytest.mark.parametrize("mode", ["wrap", "clip"])
@pytest.mark.parametrize("traced", [False, True])
def test_take_wrap_clip_empty_axis_raises(mode, traced):
    """numpy raises for a non-empty take from an empty axis; 'wrap' used to return NaN (np.mod by 0)."""
    take = lambda i: fnp.take(fnp.zeros((2, 0)), i, axis=1, mode=mode)
    with pytest.raises(IndexError, match=rf"^take: cannot take from an empty axis with mode='{mode}'$"):
        (fl.jit(take) if traced else take)(fnp.asarray([1]))
    assert take(fnp.zeros(0, np.int64)).shape == (2, 0)


@pytest.mark.parametrize("traced", [False, True])
def test_take_wrap_float_indices_raise(traced):
    take = lambda i: fnp.take(fnp.arange(3.0), i, mode="wrap")
    with pytest.raises(IndexError, match=r"^take: indices must be integers, got dtype float32$"):
        (fl.jit(take) if traced else take)(fnp.asarray([1.0]))


def test_take_raise_mode_is_the_default():
    np.testing.assert_array_equal(_np(fnp.take(fnp.asarray(x25), [1, -1], axis=1, mode="raise")),
                                  np.take(x25, [1, -1], axis=1, mode="raise"))
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for axis 1 with size 5$"):
        fnp.take(fnp.asarray(x25), [5], axis=1, mode="raise")


# ------------------------------------------------------------------------------ take_along_axis / put_along_axis
idx_out = np.array([[5], [-7]])


@pytest.mark.parametrize("mode, fill_value, expected", [
    ("fill", None, [[np.nan], [np.nan]]),      # jax.numpy: out-of-range indices read the fill value
    ("fill", -1.0, [[-1.0], [-1.0]]),
    ("clip", None, [[4.0], [5.0]]),            # -7 wraps once to -2, then clips to 0 (as jax.numpy)
])
@pytest.mark.parametrize("traced", [False, True])
def test_take_along_axis_modes_with_out_of_range_indices(mode, fill_value, expected, traced):
    """Concrete out-of-range indices used to raise IndexError whatever the mode."""
    f = lambda i: fnp.take_along_axis(fnp.asarray(x25), i, axis=1, mode=mode, fill_value=fill_value)
    got = (fl.jit(f) if traced else f)(fnp.asarray(idx_out))
    np.testing.assert_array_equal(_np(got), np.asarray(expected, np.float32))


def test_take_along_axis_default_mode_still_raises():
    with pytest.raises(IndexError, match=r"^index -7 is out of bounds for axis 1 with size 5$"):
        fnp.take_along_axis(fnp.asarray(x25), fnp.asarray(idx_out), axis=1)


def test_put_along_axis_drop_mode_ignores_out_of_range():
    got = fnp.put_along_axis(fnp.asarray(x25), fnp.asarray([[5], [-1]]), 9.0, axis=1, mode="drop")
    ref = x25.copy()
    ref[1, -1] = 9.0
    np.testing.assert_array_equal(_np(got), ref)


# --------------------------------------------------------------------------------------------------- round
round_values = np.concatenate([np.random.default_rng(0).normal(size=64) * 10.0 ** np.arange(-3, 5).repeat(8),
                               np.arange(-20, 20) * 5.0, np.arange(-20, 20) * 0.05, np.arange(-20, 20) * 0.5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decimals", [-3, -1, 1, 2])
def test_round_decimals_matches_numpy(dtype, decimals):
    """Negative decimals used to multiply by the inexact 10**decimals (13040 -> 12999.999 for decimals=-3)."""
    v = round_values.astype(dtype)
    got = fnp.round(fnp.asarray(v), decimals=decimals)
    assert got.dtype == dtype
    np.testing.assert_array_equal(_np(got), np.round(v, decimals))
    jitted = fl.jit(lambda a: fnp.round(a, decimals=decimals))(fnp.asarray(v))
    np.testing.assert_array_equal(_np(jitted), np.round(v, decimals))


@pytest.mark.parametrize("dtype, values, decimals", [
    (np.int64, [1234, 1250, 1350, -1250, -1251], -2), (np.uint8, [15, 25, 250], -1), (np.int8, [15, 25, 120], -2),
    (np.int32, [7, -7], 1)])
def test_round_integers_matches_numpy(dtype, values, decimals):
    """Integers with negative decimals used to come back unchanged."""
    v = np.array(values, dtype)
    got = fnp.round(fnp.asarray(v), decimals=decimals)
    assert got.dtype == dtype
    np.testing.assert_array_equal(_np(got), np.round(v, decimals))


def test_round_decimals_must_be_an_int():
    with pytest.raises(TypeError, match=r"^round: decimals must be an int, got 1.5$"):
        fnp.round(fnp.ones(2), decimals=1.5)


# ------------------------------------------------------------------------------------ nan_to_num, imag, ...
nonfinite = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0], np.float32)


@pytest.mark.parametrize("kwargs", [{}, dict(nan=5, posinf=7, neginf=-7), dict(nan=np.inf, posinf=1.0),
                                    dict(nan=1e40)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_nan_to_num_matches_numpy(kwargs, dtype):
    """numpy picks the positions to replace before replacing; a NaN replaced by inf used to be replaced again."""
    v = nonfinite.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # 1e40 overflows float32, in numpy too
        ref = np.nan_to_num(v, **kwargs)
        got = fnp.nan_to_num(fnp.asarray(v), **kwargs)
        jitted = fl.jit(lambda a: fnp.nan_to_num(a, **kwargs))(fnp.asarray(v))
    assert got.dtype == dtype
    np.testing.assert_array_equal(_np(got), ref)
    np.testing.assert_array_equal(_np(jitted), ref)


def test_nan_to_num_vmap_and_integers():
    v = np.stack([nonfinite, nonfinite[::-1]])
    np.testing.assert_array_equal(_np(fl.vmap(fnp.nan_to_num)(fnp.asarray(v))), np.stack([np.nan_to_num(r) for r in v]))
    ints = fnp.asarray([1, 2])
    assert fnp.nan_to_num(ints) is ints


@pytest.mark.parametrize("value, dtype", [(np.array([1.5, -2.0], np.float32), np.float32),
                                          (np.array([3, 4]), np.int64), (np.array([True]), np.bool_)])
def test_imag_and_real_of_real_input(value, dtype):
    im = fnp.imag(fnp.asarray(value))
    assert im.dtype == dtype and im.shape == value.shape
    np.testing.assert_array_equal(_np(im), np.imag(value))
    np.testing.assert_array_equal(_np(fnp.real(fnp.asarray(value))), np.real(value))


def test_imag_has_zero_gradient():
    np.testing.assert_array_equal(_np(fl.grad(lambda v: fnp.sum(fnp.imag(v) + v))(fnp.ones(3))), np.ones(3))


@pytest.mark.parametrize("x1, x2", [(np.array([2, 3]), 2), (np.array([2.0], np.float32), 0.5), (2, 3),
                                    (np.array([4.0], np.float32), np.array([-0.5], np.float32))])
def test_float_power_is_float64(x1, x2):
    ref = np.float_power(x1, x2)
    for got in (fnp.float_power(x1, x2), fl.jit(fnp.float_power)(fnp.asarray(x1), fnp.asarray(x2))):
        assert got.dtype == np.float64
        np.testing.assert_allclose(_np(got), ref, rtol=1e-15)


# ------------------------------------------------------------------------------------------ cumsum of a 0-d
@pytest.mark.parametrize("value, axis", [(np.float32(3.0), 0), (np.float32(3.0), None), (np.bool_(True), 0)])
def test_cumsum_of_0d(value, axis):
    got, ref = fnp.cumsum(fnp.asarray(value), axis=axis), np.cumsum(value, axis=axis)
    np.testing.assert_array_equal(_np(got), ref)
    assert got.shape == ref.shape == (1,)


# -------------------------------------------------------------------------------------------------- reprs
def test_reprs():
    assert repr(fnp.asarray([1.0, 2.0]).at) == "IndexUpdateHelper(Array([1., 2.]))"
    assert repr(fnp.__array_namespace_info__()) == "flfun.numpy.__array_namespace_info__()"
