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


def test_along_axis_programs_are_one_batched_gather_or_scatter():
    """The leading dims are gather/scatter batch dims: no per-dim iota index arrays (1.5x slower)."""
    x, i = np.zeros((256, 10), np.float32), np.zeros((256, 1), np.int64)
    take = str(fl.make_ir(lambda x, i: fnp.take_along_axis(x, i, axis=1))(x, i))
    put = str(fl.make_ir(lambda x, i: fnp.put_along_axis(x, i, 1.0, axis=1))(x, i))
    for text, prim in ((take, "gather"), (put, "scatter")):
        assert text.count(f"{prim}[") == 1 and "batch_dims=1" in text, text
        assert "iota" not in text and "concatenate" not in text, text
        assert text.startswith("{ lambda ;"), text      # no closed-over index constants


@pytest.mark.parametrize("traced", [False, True])
def test_along_axis_broadcasting_matches_numpy(traced):
    """take broadcasts x against the indices outside axis; put broadcasts values (leading 1s allowed)."""
    x = np.arange(12.0, dtype=np.float32).reshape(3, 1, 4)
    ind = np.array([[[3, 0]], [[1, 1]]]).reshape(1, 2, 2)
    f = lambda a, i: fnp.take_along_axis(a, i, axis=2)
    got = (fl.jit(f) if traced else f)(fnp.asarray(x), fnp.asarray(ind))
    np.testing.assert_array_equal(_np(got), np.take_along_axis(x, ind, axis=2))
    put_ind = np.array([[[3, 0]], [[1, 2]], [[0, 1]]])
    g = lambda a, i, v: fnp.put_along_axis(a, i, v, axis=-1)
    want = x.copy()
    np.put_along_axis(want, put_ind, np.array([[[[5.0, 6.0]]]]), axis=-1)
    got = (fl.jit(g) if traced else g)(fnp.asarray(x), fnp.asarray(put_ind), fnp.asarray([[[[5.0, 6.0]]]]))
    np.testing.assert_array_equal(_np(got), want)


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


# ------------------------------------------------------------------------------------------ small numpy gaps
@pytest.mark.parametrize("value", [np.array([True, False]), np.array([-1, 0, 2]), np.array([1, 200], np.uint8),
                                   np.array([-0.0, 0.0, -1.5], np.float32)])
def test_signbit_matches_numpy(value):
    """A bool input used to fail inside lax.lt ('lt: requires numeric operands')."""
    got = fnp.signbit(fnp.asarray(value))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(_np(got), np.signbit(value))


@pytest.mark.parametrize("dtype, want", [(float, np.float32), ("float64", np.float64), (np.int32, np.int32)])
def test_einsum_dtype_follows_flfun_dtype_names(dtype, want):
    """``dtype=float`` is float32 in flfun (as in fnp.zeros); einsum used np.dtype(float) = float64."""
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    got = fnp.einsum("ij,jk->ik", a, b, dtype=dtype)
    assert got.dtype == want
    np.testing.assert_array_equal(_np(got), a @ b)


@pytest.mark.parametrize("obj, error, message", [
    ("abc", TypeError, r"^asarray: cannot convert str to an array: "),
    (object(), TypeError, r"^asarray: cannot convert object to an array: "),
    ([[1, 2], [3]], ValueError, r"^asarray: cannot convert list to an array: setting an array element"),
])
def test_asarray_errors_name_asarray_and_the_input(obj, error, message):
    with pytest.raises(error, match=message):
        fnp.asarray(obj)


x23 = fnp.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("call, error, message", [
    # creation
    (lambda: fnp.asarray([fnp.ones(2), []]), ValueError,
     r"^asarray: a nested sequence holding arrays cannot contain empty sequences$"),
    (lambda: fnp.arange(fnp.asarray([1, 2])), ValueError, r"^arange: start must be a scalar, got shape \(2,\)$"),
    (lambda: fnp.arange(0, "a"), TypeError, r"^arange: stop must be a real number, got str$"),
    (lambda: fnp.diag(fnp.ones((2, 2, 2))), ValueError, r"^diag: v must be 1-D or 2-D, got f32\[2,2,2\]$"),
    # elementwise
    (lambda: fnp.invert(fnp.ones(2)), TypeError, r"^invert: requires integer or boolean input, got float32$"),
    (lambda: fnp.negative(fnp.asarray([True])), TypeError, r"^negative: not defined for boolean input$"),
    (lambda: fnp.where(fnp.asarray([0, 1]), 1.0), ValueError, r"^where: pass both x1 and x2, or neither$"),
    # indexing
    (lambda: fl.jit(lambda i: x23[i])(fnp.asarray([1.0])), IndexError,
     r"^getitem: only integers, .* got an array of f32\[1\]$"),
    (lambda: fnp.getitem(x23, 0, mode="wrap"), ValueError,
     r"^getitem: mode must be one of \(None, 'clip', 'fill', 'promise_in_bounds'\), got 'wrap'$"),
    (lambda: x23.at[0].set(1.0, mode="wrap"), ValueError,
     r"^at\[\]\.set: mode must be one of \(None, 'clip', 'fill', 'promise_in_bounds', 'drop'\), got 'wrap'$"),
    (lambda: fnp.take(x23, [0], mode="bogus"), ValueError,
     r"^take: mode must be one of \(None, 'clip', 'fill', 'promise_in_bounds', 'raise', 'wrap'\), got 'bogus'$"),
    (lambda: fnp.take(x23, [1.0], mode="clip"), IndexError, r"^take: indices must be integers, got dtype float64$"),
    (lambda: fnp.take_along_axis(x23, fnp.asarray([[2]]), axis=None), ValueError,
     r"^take_along_axis: with axis=None, indices must be 1-d, got shape \(1, 1\)$"),
    (lambda: fnp.take_along_axis(x23, fnp.asarray([[2.0]]), axis=1), IndexError,
     r"^take_along_axis: indices must be integers, got dtype float32$"),
    (lambda: fnp.take_along_axis(x23, fnp.asarray([[2], [1], [0]]), axis=1), ValueError,
     r"^take_along_axis: indices of shape \(3, 1\) do not broadcast against f32\[2,3\] outside axis 1$"),
    (lambda: fnp.put_along_axis(fnp.ones((1, 3)), fnp.asarray([[2], [0]]), 1.0, axis=1), ValueError,
     r"^put_along_axis: indices of shape \(2, 1\) do not broadcast against f32\[1,3\] outside axis 1$"),
    (lambda: fnp.take_along_axis(x23, fnp.asarray([[2]]), axis=1, mode="wrap"), ValueError,
     r"^getitem: mode must be one of \(None, 'clip', 'fill', 'promise_in_bounds'\), got 'wrap'$"),
    (lambda: fnp.put_along_axis(x23, fnp.asarray([[2]]), 1.0, axis=1, mode="wrap"), ValueError,
     r"^at\[\]\.put_along_axis: mode must be one of \(None, 'clip', 'fill', 'promise_in_bounds', 'drop'\), "
     r"got 'wrap'$"),
    (lambda: fnp.put_along_axis(fnp.ones((2, 3)), fnp.asarray([[2], [0]]), [1.0, 2.0], axis=1), ValueError,
     r"^at\[\]\.put_along_axis: values of shape \(2,\) cannot be broadcast to the indexed shape \(2, 1\)$"),
    (lambda: fnp.put_along_axis(fnp.ones((2, 3)), fnp.asarray([[2], [0]]), np.ones((2, 2, 1)), axis=1), ValueError,
     r"^at\[\]\.put_along_axis: values of shape \(2, 2, 1\) cannot be broadcast to the indexed shape \(2, 1\)$"),
    (lambda: fnp.take_along_axis(fnp.ones((2, 0)), fnp.asarray([[0], [-1]]), axis=1, mode="clip"), ValueError,
     r"^gather: mode='clip' has no position to clamp to in the empty axis 1 of f32\[2,0\]$"),
    (lambda: fl.jit(lambda i: fnp.take_along_axis(fnp.ones((0, 2)), i, axis=0))(fnp.asarray([[0, 0]])), ValueError,
     r"^gather: mode='clip' has no position to clamp to in the empty axis 0 of f32\[0,2\]$"),
    (lambda: fnp.nonzero(fnp.asarray(1.0)), ValueError,
     r"^nonzero: 0-d arrays are not supported; use fnp.atleast_1d\(x\) first$"),
    (lambda: fnp.compress(fnp.asarray([[True]]), x23), ValueError,
     r"^compress: condition must be 1-d, got shape \(1, 1\)$"),
    (lambda: fnp.compress(fnp.asarray([True] * 7), x23), ValueError,
     r"^compress: condition has 7 entries but axis 0 of f32\[6\] has 6$"),
    # linalg
    (lambda: fnp.tensordot(x23, x23, axes=[0]), ValueError,
     r"^tensordot: axes must be an int or a pair of axis sequences, got \[0\]$"),
    (lambda: fnp.tensordot(x23, x23, axes=([1, 0], [0])), ValueError,
     r"^tensordot: axes must name as many axes of each operand, got \(\[1, 0\], \[0\]\)$"),
    (lambda: fnp.tensordot(x23, x23, axes=([1, 1], [0, 1])), ValueError,
     r"^tensordot: repeated axis in axes=\(\[1, 1\], \[0, 1\]\)$"),
    (lambda: fnp.vecdot(1.0, 2.0), ValueError, r"^vecdot: operands must have at least one dimension, got scalars$"),
    (lambda: fnp.vecdot(x23, fnp.ones(3), axis=0), ValueError,
     r"^vecdot: axis 0 is not an axis of both f32\[2,3\] and f32\[3\]$"),
    (lambda: fnp.diagonal(fnp.ones(3)), ValueError,
     r"^diagonal: the array must have at least 2 dimensions, got f32\[3\]$"),
    (lambda: fnp.einsum("ij,jk->i.k", x23, x23), ValueError, r"^einsum: invalid output subscripts 'i.k'$"),
    (lambda: fnp.einsum("ii", x23), ValueError,
     r"^einsum: repeated label 'i' has different sizes in an operand of shape \(2, 3\)$"),
    (lambda: fnp.einsum(x23, [0, 1]), ValueError, r"^einsum: the first argument must be a subscripts string"),
    (lambda: fnp.einsum("ij"), ValueError, r"^einsum: at least one operand is required$"),
    # manipulation
    (lambda: fnp.permute_dims(x23, (0.0, 1)), TypeError,
     r"^permute_dims: axes must be a sequence of ints, got \(0.0, 1\)$"),
    (lambda: fnp.squeeze(fnp.ones((1, 1)), axis=(0, -2)), ValueError, r"^squeeze: repeated axis in \(0, -2\)$"),
    (lambda: fnp.concat([]), ValueError, r"^concat: need at least one array$"),
    (lambda: fnp.array_split(x23, 0, axis=1), ValueError,
     r"^array_split: the number of sections must be positive, got 0$"),
    (lambda: fnp.tile(x23, (2, -1)), ValueError, r"^tile: repetitions must be non-negative, got \(2, -1\)$"),
    (lambda: fnp.roll(x23, 1.5), ValueError,
     r"^roll: shift and axis must be ints or 1-D sequences of ints, got 1.5, 0$"),
    # sequences of different lengths used to raise numpy's broadcast error
    (lambda: fnp.roll(x23, (1, 2), axis=(0, 1, 0)), ValueError,
     r"^roll: shift and axis must be ints or 1-D sequences of ints, got \(1, 2\), \(0, 1, 0\)$"),
    (lambda: fnp.diff(x23, n=-1), ValueError, r"^diff: n must be a non-negative int, got -1$"),
    (lambda: fnp.diff(x23, n=1.5), ValueError, r"^diff: n must be a non-negative int, got 1.5$"),   # was a bare
    # reductions and sorting
    (lambda: fnp.sum(fnp.asarray(1.0), axis=1), ValueError, r"^sum: axis 1 is out of bounds for an array of rank 0$"),
    (lambda: fnp.average(x23, axis=(0, 1), weights=fnp.ones(3)), ValueError,
     r"^average: weights must be 1-D along an int axis when shapes differ, got weights f32\[3\] for a f32\[2,3\] "
     r"and axis=\(0, 1\)$"),
    (lambda: fnp.searchsorted(fnp.arange(3.0), 1.0, side="middle"), ValueError,
     r"^searchsorted: side must be 'left' or 'right', got 'middle'$"),
    (lambda: fnp.searchsorted(x23, 1.0), ValueError, r"^searchsorted: x1 must be 1-d, got 2-d$"),
])
def test_user_input_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_traced_entries_of_an_index_list_and_out_of_range_ints_with_a_mode():
    """``x[[i, 0]]`` with a traced ``i`` builds the index array by stacking; an out-of-range int with a mode is an
    advanced index (jax.numpy's fill / clip)."""
    ref = np.asarray(x23)
    np.testing.assert_array_equal(_np(fl.jit(lambda i: x23[[i, 0]])(fnp.asarray(1))), ref[[1, 0]])
    got = fl.vmap(lambda i: x23[:, [i, -1]])(fnp.asarray([0, 1, -3]))
    np.testing.assert_array_equal(_np(got), np.stack([ref[:, [i, -1]] for i in (0, 1, -3)]))
    np.testing.assert_array_equal(_np(fnp.getitem(x23, (slice(None), 5), mode="fill", fill_value=-1)), [-1, -1])
    np.testing.assert_array_equal(_np(fnp.getitem(x23, (slice(None), -4), mode="clip")), ref[:, 0])
    np.testing.assert_array_equal(_np(x23.at[:, 5].add(1.0, mode="clip")), ref + [0, 0, 1])
    np.testing.assert_array_equal(_np(x23.at[5].set(1.0, mode="drop")), ref)


def test_take_along_axis_and_put_along_axis_with_axis_none():
    ref = np.asarray(x23)
    idx = np.array([5, 0, -1])
    np.testing.assert_array_equal(_np(fnp.take_along_axis(x23, fnp.asarray(idx), axis=None)),
                                  np.take_along_axis(ref, idx, axis=None))
    want = ref.copy()
    np.put_along_axis(want, np.array([2, 0]), 9.0, axis=None)
    np.testing.assert_array_equal(_np(fnp.put_along_axis(x23, fnp.asarray([2, 0]), 9.0, axis=None)), want)


@pytest.mark.parametrize("cond, axis", [([True, False, True, True], None), ([1, 0, 2], 1)])
def test_compress_matches_numpy(cond, axis):
    np.testing.assert_array_equal(_np(fnp.compress(fnp.asarray(cond), x23, axis=axis)),
                                  np.compress(cond, np.asarray(x23), axis=axis))


@pytest.mark.parametrize("args", [(0.5, 5.5, 1.0), (0.0, 1.0, 0.3), (1, 10, 3)])
def test_arange_int_dtype_with_float_bounds(args):
    np.testing.assert_array_equal(_np(fnp.arange(*args, dtype="int64")), np.arange(*args, dtype="int64"))


@pytest.mark.parametrize("stop, num, dtype", [(2.0, 3, "int64"), (2.0, 5, "int32"), (-2.0, 3, "int64"),
                                              (2.0, 5, "float64")])
def test_logspace_dtype(stop, num, dtype):
    got, ref = fnp.logspace(0.0, stop, num, dtype=dtype), np.logspace(0.0, stop, num, dtype=dtype)
    assert got.dtype == ref.dtype
    np.testing.assert_allclose(_np(got), ref, rtol=1e-6)


def test_where_with_one_argument_is_nonzero():
    cond = np.array([[0, 3], [4, 0]])
    assert [_np(i).tolist() for i in fnp.where(fnp.asarray(cond))] == [i.tolist() for i in np.where(cond)]
    with pytest.raises(fl.core.ConcretizationError, match=r"^nonzero: the result's shape depends on the values"):
        fl.jit(lambda c: fnp.where(c))(fnp.asarray(cond))


@pytest.mark.parametrize("fn", [fnp.add, fnp.less, fnp.hypot, fnp.power])
@pytest.mark.parametrize("operand, message", [(object(), r"unsupported dtype <object")])
def test_binary_ops_name_themselves_for_a_bad_operand(fn, operand, message):
    with pytest.raises(TypeError, match=rf"^{fn.__name__}: {message}"):
        fn(fnp.ones(2), operand)
