"""flfun.numpy creation, manipulation and dtype functions against numpy (hypothesis over shapes, dtypes and
axes), the default dtypes and weak-scalar promotion rules, ``__array_namespace_info__`` and error messages."""
from __future__ import annotations

import numpy as np
import pytest
from peers import require
from hypothesis import assume, given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.testing import arrays, check_grads, check_vmap, shapes, valid_axes

DTYPES = st.sampled_from(["float32", "float64", "int32", "int64", "uint8", "bool"])


def any_arrays(shape=shapes()):
    """numpy arrays of any of DTYPES."""
    return DTYPES.flatmap(lambda d: arrays(d, shape))


def same(out, expected, *, dtype=True, atol=0.0, rtol=1e-6):
    """``out`` (an Array) equals numpy's ``expected`` in shape, dtype (unless ``dtype=False``) and values."""
    assert isinstance(out, fnp.Array), type(out)
    expected = np.asarray(expected)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    if dtype:
        assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), expected.astype(np.float64), atol=atol,
                               rtol=rtol)


@st.composite
def array_and_axis(draw, min_dims=1, dtype=None):
    x = draw(arrays(dtype or draw(DTYPES), shapes(min_dims=min_dims)))
    return x, draw(st.integers(-x.ndim, x.ndim - 1))


# ======================================================================================================= creation
@pytest.mark.parametrize("obj,dtype", [
    ([1.0, 2.0], "float32"), ([1, 2], "int64"), ([True, False], "bool"), (3.0, "float32"), (3, "int64"),
    ([1, 2.5], "float32"), ([True, 2], "int64"), ([np.float64(1.0), 2.0], "float64"), ([np.int32(1), 2], "int32"),
    (np.arange(3.0), "float64"), (np.arange(3, dtype=np.int32), "int32"), (np.float64(2.0), "float64"),
    ([], "float32"), ([[1.0], [2.0]], "float32"),
])
def test_asarray_default_dtypes(obj, dtype):
    out = fnp.asarray(obj)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(obj))


@given(x=any_arrays(shapes()), dtype=DTYPES)
def test_asarray_dtype_and_copies(x, dtype):
    out = fnp.asarray(x, dtype=dtype)
    same(out, x.astype(dtype))
    before = np.asarray(out).copy()
    if x.size:
        x.flat[0] = 1 - x.flat[0] if x.dtype != bool else not x.flat[0]   # the Array copied: this can't reach it
    np.testing.assert_array_equal(np.asarray(out), before)


def test_asarray_copy_semantics():
    x = fnp.asarray([1.0, 2.0])
    assert fnp.asarray(x) is x and fnp.asarray(x, copy=False) is x and fnp.asarray(x, dtype="float32") is x
    y = fnp.asarray(x, copy=True)
    assert y is not x and not np.shares_memory(np.asarray(y), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(y), [1.0, 2.0])
    with pytest.raises(ValueError, match="asarray: copy=False, but converting f32\\[2\\] to float64 needs a copy"):
        fnp.asarray(x, dtype="float64", copy=False)
    with pytest.raises(ValueError, match="asarray: copy=False is only possible for flfun Arrays; a ndarray"):
        fnp.asarray(np.ones(2), copy=False)
    assert fnp.array([1, 2], dtype="int8").dtype == np.int8
    assert fnp.copy(x) is x
    assert fnp.asarray(x, device=fnp.__array_namespace_info__().default_device()) is x


def test_asarray_nested_arrays_and_transforms():
    a, b = fnp.asarray(1.0), fnp.asarray(2.0)
    out = fnp.asarray([[a, b], [3.0, a]])
    same(out, np.array([[1.0, 2.0], [3.0, 1.0]], np.float32))
    assert fnp.asarray([fnp.ones(2, dtype="float64"), [1.0, 2.0]]).dtype == np.float64
    assert fnp.asarray([fnp.asarray(1, dtype="int8"), 2]).dtype == np.int8
    g = fl.grad(lambda x: fnp.sum(fnp.asarray([x, 2.0 * x, [1.0, fnp.sum(x)]]) ** 2))(fnp.asarray([1.0, 3.0]))
    np.testing.assert_allclose(np.asarray(g), [2 * (1 + 4) + 8, 2 * (3 + 12) + 8])
    with pytest.raises(ValueError, match="asarray: the nested sequence is ragged"):
        fnp.asarray([fnp.ones(2), fnp.ones(3)])


def test_asarray_dlpack_object():
    torch = require("torch")
    t = torch.arange(4, dtype=torch.float64)
    out = fnp.asarray(t)
    same(out, np.arange(4.0))
    t += 1   # copied: the Array does not see it
    same(out, np.arange(4.0))
    assert fnp.asarray(torch.ones(2), dtype="int32").dtype == np.int32


@given(shape=shapes(), dtype=DTYPES)
def test_filled(shape, dtype):
    same(fnp.zeros(shape, dtype=dtype), np.zeros(shape, dtype))
    same(fnp.ones(shape, dtype), np.ones(shape, dtype))
    same(fnp.full(shape, 1, dtype=dtype), np.full(shape, 1, dtype))
    assert fnp.empty(shape, dtype=dtype).shape == shape and fnp.empty(shape).dtype == np.float32
    x = np.zeros(shape, dtype)
    same(fnp.zeros_like(x), np.zeros_like(x))
    same(fnp.ones_like(fnp.asarray(x)), np.ones_like(x))
    same(fnp.full_like(x, 1), np.full_like(x, 1))
    same(fnp.ones_like(x, dtype="float32"), np.ones(shape, np.float32))
    assert fnp.empty_like(x).shape == shape and fnp.empty_like(x).dtype == x.dtype


def test_filled_defaults_and_errors():
    assert fnp.zeros(3).dtype == np.float32 and fnp.ones((2, 2)).dtype == np.float32
    assert fnp.full(2, 7).dtype == np.int64 and fnp.full(2, 7.0).dtype == np.float32
    assert fnp.full(2, True).dtype == np.bool_ and fnp.full((), fnp.asarray(2, dtype="int8")).dtype == np.int8
    with pytest.raises(ValueError, match=r"zeros: negative dimensions are not allowed, got shape \(2, -1\)"):
        fnp.zeros((2, -1))
    with pytest.raises(TypeError, match="ones: shape must be an int or a sequence of ints"):
        fnp.ones((2.5,))
    with pytest.raises(ValueError, match="full: fill_value must be a scalar"):
        fnp.full((2,), np.ones(2))


@given(start=st.integers(-10, 10), stop=st.integers(-10, 10), step=st.integers(-4, 4).filter(bool))
def test_arange_ints(start, stop, step):
    same(fnp.arange(start, stop, step), np.arange(start, stop, step))
    same(fnp.arange(stop), np.arange(stop))
    same(fnp.arange(start, stop, step, dtype="int32"), np.arange(start, stop, step, dtype=np.int32))


@given(start=st.floats(-5, 5), stop=st.floats(-5, 5), step=st.floats(0.1, 2) | st.floats(-2, -0.1))
def test_arange_floats(start, stop, step):
    expected = np.arange(start, stop, step)
    same(fnp.arange(start, stop, step), expected.astype(np.float32), atol=1e-5, rtol=1e-5)
    same(fnp.arange(start, stop, step, dtype="float64"), expected, atol=1e-12)


def test_arange_details():
    assert fnp.arange(1.0, 0.0, -0.25).tolist() == [1.0, 0.75, 0.5, 0.25]
    assert fnp.arange(fnp.asarray(3)).tolist() == [0, 1, 2]
    assert fnp.arange(0, 5, 2, dtype="float64").dtype == np.float64
    with pytest.raises(ValueError, match="arange: step must not be zero"):
        fnp.arange(0, 3, 0)


@given(start=st.floats(-5, 5), stop=st.floats(-5, 5), num=st.integers(0, 9), endpoint=st.booleans(),
       dtype=st.sampled_from([None, "float64", "int32"]))
def test_linspace(start, stop, num, endpoint, dtype):
    out, step = fnp.linspace(start, stop, num, endpoint=endpoint, dtype=dtype, retstep=True)
    exp, exp_step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True, dtype=np.float64)
    if dtype == "int32":
        assume(np.all(np.abs(exp - np.round(exp)) > 1e-6))   # floor is discontinuous at integers
        same(out, np.floor(exp).astype(np.int32))
        return
    same(out, exp.astype(dtype or np.float32), atol=1e-5)
    np.testing.assert_allclose(float(step), exp_step, atol=1e-6, rtol=1e-5)


def test_linspace_arrays_axis_and_grad():
    a, b = np.array([0.0, 1.0]), np.array([[1.0, 3.0], [2.0, 5.0], [0.0, 0.0]])
    same(fnp.linspace(a, b, 4, axis=-1), np.linspace(a, b, 4, axis=-1), atol=1e-12)
    same(fnp.linspace(a, b, 3, axis=1, endpoint=False), np.linspace(a, b, 3, axis=1, endpoint=False), atol=1e-12)
    g = fl.grad(lambda s: fnp.sum(fnp.linspace(0.0, s, 5)))(fnp.asarray(2.0))   # d/ds sum(s * [0, .25, .5, .75, 1])
    assert abs(float(g) - 2.5) < 1e-6
    same(fnp.logspace(0.0, 2.0, 3), np.logspace(0, 2, 3).astype(np.float32), rtol=1e-6)
    same(fnp.logspace(0.0, 3.0, 4, base=2.0, endpoint=False), np.logspace(0, 3, 4, base=2.0, endpoint=False)
         .astype(np.float32), rtol=1e-6)
    with pytest.raises(ValueError, match="linspace: num must be non-negative, got -1"):
        fnp.linspace(0.0, 1.0, -1)


@given(n=st.integers(0, 5), m=st.none() | st.integers(0, 5), k=st.integers(-6, 6),
       dtype=st.sampled_from([None, "int32", "bool", "float64"]))
def test_eye_tri(n, m, k, dtype):
    npdt = np.float32 if dtype is None else dtype
    same(fnp.eye(n, m, k=k, dtype=dtype), np.eye(n, m, k=k, dtype=npdt))
    same(fnp.tri(n, m, k, dtype=dtype), np.tri(n, m, k, dtype=npdt))
    same(fnp.identity(n, dtype=dtype), np.identity(n, dtype=npdt))


@given(x=any_arrays(shapes(min_dims=2)), k=st.integers(-4, 4))
def test_tril_triu(x, k):
    same(fnp.tril(x, k=k), np.tril(x, k))
    same(fnp.triu(fnp.asarray(x), k=k), np.triu(x, k))


def test_tril_errors_and_grad():
    with pytest.raises(ValueError, match=r"tril: x must have at least 2 dimensions, got f32\[3\]"):
        fnp.tril(fnp.ones(3))
    check_grads(lambda x: fnp.triu(x, k=1) * 3.0, (np.ones((3, 3)),))


@given(v=arrays("int32", shapes(1, 2)), k=st.integers(-4, 4))
def test_diag(v, k):
    same(fnp.diag(v, k=k), np.diag(v, k))
    same(fnp.diagflat(v, k), np.diagflat(v, k))


@given(sizes=st.lists(st.integers(1, 4), max_size=3), indexing=st.sampled_from(["xy", "ij"]),
       sparse=st.booleans())
def test_meshgrid(sizes, indexing, sparse):
    xs = [np.arange(n, dtype=np.float32) + i for i, n in enumerate(sizes)]
    outs = fnp.meshgrid(*xs, indexing=indexing, sparse=sparse)
    expected = np.meshgrid(*xs, indexing=indexing, sparse=sparse)
    assert len(outs) == len(expected)
    for o, e in zip(outs, expected):
        same(o, e)
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'xy' or 'ij', got 'xx'"):
        fnp.meshgrid(fnp.ones(2), indexing="xx")


# =================================================================================================== manipulation
@st.composite
def array_and_new_shape(draw):
    x = draw(any_arrays(shapes(max_dims=4)))
    dims = [d for d in x.shape if d != 1]
    factors = draw(st.permutations(dims)) + [1] * draw(st.integers(0, 2))
    new = list(draw(st.permutations(factors)))
    if new and draw(st.booleans()):
        new[draw(st.integers(0, len(new) - 1))] = -1
    return x, tuple(new)


@given(case=array_and_new_shape())
def test_reshape(case):
    x, shape = case
    same(fnp.reshape(x, shape), np.reshape(x, shape))
    same(fnp.asarray(x).reshape(shape), np.reshape(x, shape))
    same(fnp.ravel(x), np.ravel(x))
    same(fnp.asarray(x).flatten(), x.flatten())


def test_reshape_errors():
    x = fnp.ones((2, 3))
    with pytest.raises(ValueError, match=r"reshape: cannot reshape f32\[2,3\] \(6 elements\) into shape \(4, -1\)"):
        fnp.reshape(x, (4, -1))
    with pytest.raises(ValueError, match=r"reshape: shape \(-1, -1\) may hold at most one -1"):
        fnp.reshape(x, (-1, -1))
    with pytest.raises(ValueError, match=r"reshape: cannot reshape f32\[2,3\] \(6 elements\) into shape \(7,\)"):
        fnp.reshape(x, 7)
    assert fnp.reshape(x, (3, 2), copy=False).shape == (3, 2)


@given(x=any_arrays(shapes(max_dims=4)), data=st.data())
def test_transposes(x, data):
    perm = tuple(data.draw(st.permutations(range(x.ndim))))
    same(fnp.transpose(x), np.transpose(x))
    same(fnp.transpose(x, perm), np.transpose(x, perm))
    same(fnp.permute_dims(x, perm), np.transpose(x, perm))
    same(fnp.asarray(x).T, x.T)
    if x.ndim >= 2:
        same(fnp.matrix_transpose(x), np.swapaxes(x, -1, -2))
        same(fnp.asarray(x).mT, np.swapaxes(x, -1, -2))
    if x.ndim:
        a, b = data.draw(st.integers(-x.ndim, x.ndim - 1)), data.draw(st.integers(-x.ndim, x.ndim - 1))
        same(fnp.swapaxes(x, a, b), np.swapaxes(x, a, b))
        src = data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True, min_size=1))
        dst = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), unique_by=lambda i: i % x.ndim,
                                 min_size=len(src), max_size=len(src)))
        same(fnp.moveaxis(x, src, dst), np.moveaxis(x, src, dst))
        same(fnp.moveaxis(x, src[0], dst[0]), np.moveaxis(x, src[0], dst[0]))


def test_transpose_errors():
    x = fnp.ones((2, 3))
    with pytest.raises(ValueError, match=r"permute_dims: axes \(0, 0\) are not a permutation of the axes of "
                                         r"f32\[2,3\]"):
        fnp.permute_dims(x, (0, 0))
    with pytest.raises(ValueError, match=r"matrix_transpose: x must have at least 2 dimensions, got f32\[3\]"):
        fnp.matrix_transpose(fnp.ones(3))
    with pytest.raises(ValueError, match="moveaxis: source .* and destination .* must have the same length"):
        fnp.moveaxis(x, (0, 1), 0)


@given(x=any_arrays(shapes(max_dims=4, max_side=2)), data=st.data())
def test_squeeze_expand_dims(x, data):
    same(fnp.squeeze(x), np.squeeze(x))
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if ones:
        axes = tuple(data.draw(st.lists(st.sampled_from(ones), unique=True, min_size=1)))
        same(fnp.squeeze(x, axis=axes), np.squeeze(x, axis=axes))
        same(fnp.asarray(x).squeeze(axes[0]), np.squeeze(x, axes[0]))
    n = data.draw(st.integers(1, 3))
    out_nd = x.ndim + n
    axes = tuple(data.draw(st.lists(st.integers(-out_nd, out_nd - 1), unique_by=lambda a: a % out_nd,
                                    min_size=n, max_size=n)))
    same(fnp.expand_dims(x, axis=axes), np.expand_dims(x, axes))
    one = data.draw(st.integers(-x.ndim - 1, x.ndim))
    same(fnp.expand_dims(x, one), np.expand_dims(x, one))


def test_squeeze_errors():
    with pytest.raises(ValueError, match=r"squeeze: cannot remove axis 1 of f32\[1,3\]: its size is 3, not 1"):
        fnp.squeeze(fnp.ones((1, 3)), axis=1)
    with pytest.raises(ValueError, match="expand_dims: axis 3 is out of bounds for an array of rank 2"):
        fnp.expand_dims(fnp.ones(3), axis=3)


@given(data=st.data(), dtype=DTYPES)
def test_broadcasting(data, dtype):
    s1, s2 = data.draw(st.tuples(shapes(), shapes()).filter(lambda s: _broadcastable(*s)))
    x, y = data.draw(arrays(dtype, s1)), data.draw(arrays(dtype, s2))
    shape = np.broadcast_shapes(s1, s2)
    assert fnp.broadcast_shapes(s1, s2) == shape
    same(fnp.broadcast_to(x, shape), np.broadcast_to(x, shape))
    for o, e in zip(fnp.broadcast_arrays(x, y), np.broadcast_arrays(x, y)):
        same(o, e)


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def test_broadcast_errors():
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast f32\[3\] to shape \(4,\)"):
        fnp.broadcast_to(fnp.ones(3), (4,))
    with pytest.raises(ValueError, match=r"broadcast_shapes: shapes \(3,\), \(4,\) do not broadcast"):
        fnp.broadcast_shapes((3,), (4,))
    same(fnp.broadcast_to(fnp.asarray(2.0), 3), np.full(3, 2.0, np.float32))


@given(x=any_arrays(shapes(min_dims=1)), n=st.integers(1, 3), data=st.data())
def test_stack_concat(x, n, data):
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim))
    xs = [x + i if x.dtype != bool else x for i in range(n)]
    same(fnp.stack(xs, axis=axis), np.stack(xs, axis=axis))
    cat_axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    same(fnp.concat(xs, axis=cat_axis), np.concatenate(xs, axis=cat_axis))
    same(fnp.concatenate(xs, cat_axis), np.concatenate(xs, cat_axis))
    same(fnp.concat(xs, axis=None), np.concatenate(xs, axis=None))
    for fn in ("hstack", "vstack", "dstack"):
        same(getattr(fnp, fn)(xs), getattr(np, fn)(xs))
    if x.ndim <= 2:
        same(fnp.column_stack(xs), np.column_stack(xs))


def test_stack_concat_promotion_and_errors():
    out = fnp.concat([fnp.ones(2, dtype="int8"), fnp.ones(1, dtype="uint8")])
    assert out.dtype == np.int16
    assert fnp.stack([fnp.ones(2, dtype="int32"), fnp.ones(2)]).dtype == np.float32
    assert fnp.stack([1.0, 2.0]).dtype == np.float32
    same(fnp.concat([[1, 2], np.array([3], np.int8)]), np.array([1, 2, 3]))
    assert fnp.stack([fnp.ones(2, dtype="float16"), [1.0, 2.0]]).dtype == np.float32
    with pytest.raises(ValueError, match=r"stack: all arrays must have the same shape, got f32\[2\], f32\[3\]"):
        fnp.stack([fnp.ones(2), fnp.ones(3)])
    with pytest.raises(ValueError, match=r"concat: shapes must match except along axis 0, got f32\[2,2\], "
                                         r"f32\[2,3\]"):
        fnp.concat([fnp.ones((2, 2)), fnp.ones((2, 3))])
    with pytest.raises(ValueError, match="concat: zero-dimensional arrays cannot be concatenated"):
        fnp.concat([fnp.asarray(1.0), fnp.asarray(2.0)])
    with pytest.raises(TypeError, match="stack: expected a sequence of arrays, got Array"):
        fnp.stack(fnp.ones((2, 2)))


@given(case=array_and_axis(), data=st.data())
def test_split(case, data):
    x, axis = case
    n = x.shape[axis]
    k = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    for o, e in zip(fnp.split(x, k, axis=axis), np.split(x, k, axis=axis), strict=True):
        same(o, e)
    idx = sorted(data.draw(st.lists(st.integers(-n - 1, n + 1), max_size=3)))
    for o, e in zip(fnp.split(x, idx, axis=axis), np.split(x, idx, axis=axis), strict=True):
        same(o, e)
    sections = data.draw(st.integers(1, 5))
    for o, e in zip(fnp.array_split(x, sections, axis), np.array_split(x, sections, axis), strict=True):
        same(o, e)
    for o, e in zip(fnp.unstack(x, axis=axis), np.moveaxis(x, axis, 0), strict=True):
        same(o, e)


def test_split_errors():
    with pytest.raises(ValueError, match=r"split: indices_or_sections=2 does not divide axis 0 of f32\[3\] into "
                                         r"equal sections"):
        fnp.split(fnp.ones(3), 2)


@given(x=any_arrays(shapes()), reps=st.integers(0, 3) | st.lists(st.integers(0, 3), max_size=4).map(tuple))
def test_tile(x, reps):
    same(fnp.tile(x, reps), np.tile(x, reps))


@given(x=any_arrays(shapes()), data=st.data())
def test_repeat(x, data):
    r = data.draw(st.integers(0, 3))
    same(fnp.repeat(x, r), np.repeat(x, r))
    if x.ndim:
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        same(fnp.repeat(x, r, axis=axis), np.repeat(x, r, axis=axis))
        same(fnp.asarray(x).repeat(r, axis=axis), np.repeat(x, r, axis=axis))
        counts = data.draw(st.lists(st.integers(0, 3), min_size=x.shape[axis], max_size=x.shape[axis]))
        same(fnp.repeat(x, counts, axis=axis), np.repeat(x, counts, axis=axis))
        same(fnp.repeat(x, fnp.asarray(counts), axis=axis), np.repeat(x, counts, axis=axis))


def test_repeat_errors_and_tracing():
    with pytest.raises(ValueError, match="repeat: repeats must be non-negative"):
        fnp.repeat(fnp.ones(2), -1)
    with pytest.raises(ValueError, match=r"repeat: repeats must be an int or have one entry per element along "
                                         r"axis 0 \(2\), got shape \(3,\)"):
        fnp.repeat(fnp.ones(2), [1, 2, 3])
    from flfun.transforms.jit import jit
    with pytest.raises(fl.ConcretizationError):     # per-element repeats give a data-dependent shape
        jit(lambda r: fnp.repeat(fnp.ones(2), r))(fnp.asarray([1, 2]))
    with pytest.raises(ValueError, match="repeat: repeats must be integers, got float32"):
        fnp.repeat(fnp.ones(2), fnp.asarray([1.0, 2.0]))


@given(x=any_arrays(shapes()), data=st.data())
def test_flip_roll(x, data):
    axis = data.draw(valid_axes(x.ndim))
    same(fnp.flip(x, axis=axis), np.flip(x, axis=axis))
    shift = data.draw(st.integers(-5, 5))
    same(fnp.roll(x, shift), np.roll(x, shift))
    if x.ndim:
        axes = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=3))
        shifts = data.draw(st.lists(st.integers(-5, 5), min_size=len(axes), max_size=len(axes)))
        same(fnp.roll(x, tuple(shifts), axis=tuple(axes)), np.roll(x, shifts, axis=axes))
        same(fnp.roll(x, shift, axis=tuple(axes)), np.roll(x, shift, axis=axes))


@given(x=any_arrays(shapes(max_dims=4)))
def test_atleast(x):
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        same(getattr(fnp, fn)(x), getattr(np, fn)(x))
        pair = getattr(fnp, fn)(x, x)
        assert len(pair) == 2
        same(pair[1], getattr(np, fn)(x))


@given(x=any_arrays(shapes()), dtype=DTYPES)
def test_astype(x, dtype):
    same(fnp.astype(x, dtype), x.astype(dtype))
    same(fnp.asarray(x).astype(dtype), x.astype(dtype))
    a = fnp.asarray(x)
    assert fnp.astype(a, a.dtype, copy=False) is a


def test_manipulation_grads_and_vmap():
    x = np.random.default_rng(0).standard_normal((2, 3))

    def f(x):
        parts = [fnp.roll(x, (1, -1), axis=(0, 1)), fnp.flip(x, axis=1), fnp.split(fnp.tile(x, (1, 2)), 2, axis=1)[1],
                 fnp.repeat(x, [2, 0, 1], axis=1), fnp.squeeze(fnp.moveaxis(fnp.expand_dims(x, 0), 0, -1), -1),
                 fnp.concat(fnp.split(x, 3, axis=1)[::-1], axis=1), fnp.stack(fnp.unstack(x), axis=0),
                 fnp.tril(x), fnp.broadcast_to(fnp.split(x, 2)[0], (2, 3)), fnp.squeeze(fnp.reshape(x, (1, 2, 3)), 0)]
        return sum(fnp.sum(p * (i + 1.0)) for i, p in enumerate(parts))
    check_grads(f, (x,))
    check_vmap(lambda x: fnp.concat([fnp.roll(x, 1), fnp.flip(x), fnp.repeat(x, 2), fnp.tile(x, 2)]),
               (np.arange(12.0).reshape(3, 4),))
    check_vmap(lambda x: fnp.stack([fnp.ravel(x), fnp.ravel(fnp.transpose(x))]),
               (np.arange(24.0).reshape(2, 3, 4),), in_axes=1)


# ========================================================================================== dtypes and promotion
def test_weak_scalar_promotion():
    f32, i32 = fnp.ones(2, dtype="float32"), fnp.ones(2, dtype="int32")
    assert (f32 * 2.0).dtype == np.float32 and (2.0 * f32).dtype == np.float32
    assert (i32 + 1).dtype == np.int32 and (1 + i32).dtype == np.int32
    assert (i32 + 1.0).dtype == np.float32
    assert (fnp.asarray(np.ones(2)) * 2.0).dtype == np.float64
    assert (fnp.asarray(np.ones(2)) + f32).dtype == np.float64
    assert (fnp.ones(2, dtype="int8") + fnp.ones(2, dtype="uint8")).dtype == np.int16
    assert (fnp.ones(2, dtype="bool") + 1).dtype == np.int64


@pytest.mark.parametrize("args,expected", [
    (("int8", "uint8"), "int16"), (("int32", "float32"), "float32"), (("float32", "float64"), "float64"),
    (("bool", "int8"), "int8"), (("uint32", "int32"), "int64"), (("uint8",), "uint8"),
])
def test_result_type_dtypes(args, expected):
    assert fnp.result_type(*args) == np.dtype(expected)
    assert fnp.result_type(*[fnp.ones(1, dtype=a) for a in args]) == np.dtype(expected)


def test_result_type_weak_and_errors():
    assert fnp.result_type(fnp.ones(1, dtype="int32"), 1) == np.int32
    assert fnp.result_type(fnp.ones(1, dtype="int32"), 1.0) == np.float32
    assert fnp.result_type(fnp.float16, 1.0) == np.float16
    assert fnp.result_type(1, 2.0) == np.float32
    assert fnp.result_type(np.ones(2)) == np.float64
    with pytest.raises(ValueError, match="result_type: at least one array or dtype is required"):
        fnp.result_type()
    with pytest.raises(TypeError, match=r"unsupported dtype datetime64\[s\]"):
        fnp.result_type("datetime64[s]")
    assert fnp.result_type("complex64", 1.0) == np.complex64 and fnp.result_type(fnp.float64, 1j) == np.complex128


@given(a=DTYPES, b=DTYPES)
def test_can_cast(a, b):
    assert fnp.can_cast(a, b) == np.can_cast(a, b, casting="safe")
    assert fnp.can_cast(fnp.zeros(1, dtype=a), b) == np.can_cast(a, b, casting="safe")


def test_isdtype_finfo_iinfo_sizes():
    assert fnp.isdtype(fnp.float32, "real floating") and not fnp.isdtype(fnp.int8, "real floating")
    assert fnp.isdtype(fnp.uint8, "integral") and fnp.isdtype(fnp.uint8, "unsigned integer")
    assert not fnp.isdtype(fnp.uint8, "signed integer") and fnp.isdtype(fnp.bool, "bool")
    assert not fnp.isdtype(fnp.bool, "numeric") and fnp.isdtype(fnp.int64, ("bool", "numeric"))
    assert fnp.isdtype(fnp.float64, fnp.float64) and not fnp.isdtype(fnp.float32, "complex floating")
    with pytest.raises(ValueError, match="isdtype: unknown kind 'float'"):
        fnp.isdtype(fnp.float32, "float")
    assert fnp.finfo(fnp.float32).eps == np.finfo(np.float32).eps
    assert fnp.finfo(fnp.ones(1)).bits == 32 and fnp.iinfo(fnp.int8).max == 127
    assert fnp.iinfo(fnp.ones(1, dtype="uint16")).max == 65535
    x = fnp.ones((2, 3))
    assert fnp.size(x) == 6 and fnp.size(x, 1) == 3 and fnp.ndim(x) == 2 and fnp.shape(x) == (2, 3)
    assert fnp.shape([[1, 2]]) == (1, 2) and fnp.ndim(3.0) == 0


# =========================================================================================================== info
def test_namespace_info():
    info = fnp.__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": None}
    assert info.default_device() is fnp.zeros(1).device
    assert info.default_device() in info.devices()
    d = info.default_dtypes()
    assert d["real floating"] == np.float32 and d["integral"] == np.int64 and d["indexing"] == np.int64
    assert d["complex floating"] == np.complex64
    assert set(info.dtypes()) == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                  "float32", "float64", "complex64", "complex128"}
    assert set(info.dtypes(kind="signed integer")) == {"int8", "int16", "int32", "int64"}
    assert set(info.dtypes(kind=("bool", "real floating"))) == {"bool", "float32", "float64"}
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}
    with pytest.raises(ValueError, match="dtypes: unknown kind 'floats'"):
        info.dtypes(kind="floats")
    assert fnp.__array_api_version__ == "2024.12"
    assert fnp.ones(2).__array_namespace__() is fnp


# ================================================================================================ transforms
def test_creation_and_manipulation_under_jit_and_vmap():
    from flfun.transforms.jit import jit
    from flfun.nn import functional as F

    def f(x):
        parts = [fnp.roll(x, 1), fnp.flip(x), fnp.repeat(x, [1, 2, 0]), fnp.tile(x, 2), fnp.linspace(0.0, 1.0, 3),
                 fnp.arange(2.0), fnp.asarray([fnp.sum(x), 2.0]),
                 fnp.ravel(fnp.tril(fnp.ones((2, 2)))), fnp.ravel(fnp.eye(2, k=1)), F.softmax(x)]
        return fnp.concat(parts) * fnp.sum(fnp.zeros_like(x) + 1.0)
    x = fnp.arange(3.0)
    np.testing.assert_allclose(np.asarray(jit(f)(x)), np.asarray(f(x)), rtol=1e-6)
    check_vmap(f, (np.arange(6.0).reshape(2, 3),))
    g = jit(lambda s: fnp.linspace(s, 2 * s, 3))(fnp.asarray(1.0))
    np.testing.assert_allclose(np.asarray(g), [1.0, 1.5, 2.0])


def test_device_argument():
    from flfun.backends.base import Device
    other = Device("cpu", 7, "numpy", np)
    for x in (fnp.zeros(2, device=other), fnp.asarray([1.0], device=other), fnp.arange(3, device=other),
              fnp.eye(2, device=other), fnp.full_like(fnp.ones(2), 3.0, device=other)):
        assert x.device is other
    assert fnp.asarray(fnp.zeros(2, device=other)).device is other
    assert fnp.ones(2).device is fnp.__array_namespace_info__().default_device()
