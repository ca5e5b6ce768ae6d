"""Shape primitives beyond the op table: exact error messages, zero-size and negative-padding edge cases, batched
start indices of the dynamic slices, iota (no operands), and flfun.numpy's sort/argsort semantics."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.testing import arrays, check_grads, check_vmap, shapes


def f32(*shape):
    return fnp.asarray(np.arange(np.prod(shape, dtype=int), dtype=np.float32).reshape(shape))


def i64(v):
    return fnp.asarray(np.int64(v))


# ----------------------------------------------------------------------------------------------------- errors
ERRORS = [
    (lambda: lax.squeeze(f32(3, 2), (1,)), r"squeeze: dimension 1 of f32\[3,2\] has size 2, not 1"),
    (lambda: lax.squeeze(f32(3, 1), (2,)), r"squeeze: dimensions \(2,\) must be distinct and within rank 2"),
    (lambda: lax.expand_dims(f32(3), (3,)), r"expand_dims: dimensions \(3,\) must be distinct .* for f32\[3\]"),
    (lambda: lax.rev(f32(3), (0, 0)), r"rev: dimensions \(0, 0\) must be distinct"),
    (lambda: lax.concatenate([f32(2), fnp.zeros(2, dtype="int32")], 0),
     r"concatenate: operands must have one dtype, got f32\[2\], i32\[2\]"),
    (lambda: lax.concatenate([f32(2, 3), f32(3, 2)], 0),
     r"concatenate: operand shapes must match except along dimension 0, got f32\[2,3\], f32\[3,2\]"),
    (lambda: lax.concatenate([f32(2), f32(2)], 1), r"concatenate: dimension 1 is out of range for f32\[2\]"),
    (lambda: lax.dynamic_slice(f32(4, 4), (1,), (2, 2)),
     r"dynamic_slice: needs one start index per dimension of f32\[4,4\], got 1"),
    (lambda: lax.dynamic_slice(f32(4), (fnp.asarray(1.0),), (2,)),
     r"dynamic_slice: start indices must be integer scalars, got f32\[\] for f32\[4\]"),
    (lambda: lax.dynamic_slice(f32(4), (fnp.asarray([1]),), (2,)),
     r"dynamic_slice: start indices must be integer scalars, got i64\[1\]"),
    (lambda: lax.dynamic_slice(f32(4), (0,), (5,)), r"dynamic_slice: slice_sizes \(5,\) must give a size"),
    (lambda: lax.dynamic_update_slice(f32(4), fnp.zeros(2, dtype="float64"), (0,)),
     r"dynamic_update_slice: update f64\[2\] must have the dtype of the operand f32\[4\]"),
    (lambda: lax.dynamic_update_slice(f32(4), f32(5), (0,)),
     r"dynamic_update_slice: update f32\[5\] must have the operand's rank and fit inside f32\[4\]"),
    (lambda: lax.sort((f32(3), f32(4))), r"sort: operands must have one shape, got f32\[3\], f32\[4\]"),
    (lambda: lax.sort((f32(3), f32(3)), num_keys=3), r"sort: num_keys=3 must be between 1 and the number of "
                                                     r"operands \(2\)"),
    (lambda: lax.sort(fnp.asarray(np.float32(1)), 0), r"sort: dimension 0 is out of range for f32\[\]"),
    (lambda: lax.pad(f32(2), fnp.asarray(0.0, dtype="float64"), [(0, 0, 0)]),
     r"pad: padding_value must be a scalar of the operand's dtype, got f64\[\] for f32\[2\]"),
    (lambda: lax.pad(f32(2), fnp.asarray(np.float32(0)), [(-2, -1, 0)]),
     r"pad: padding_config \(\(-2, -1, 0\),\) gives a negative size for f32\[2\]"),
    (lambda: lax.pad(f32(2), fnp.asarray(np.float32(0)), [(0, 0, -1)]), "pad: interior padding must be >= 0"),
    (lambda: lax.pad(f32(2), fnp.asarray(np.float32(0)), []), r"pad: padding_config \(\) needs one"),
    (lambda: lax.slice(f32(4), (1,), (5,)), r"slice: .* are out of bounds for f32\[4\]"),
    (lambda: lax.slice(f32(4), (3,), (1,)), r"slice: .* are out of bounds for f32\[4\]"),
    (lambda: lax.slice(f32(4), (0,), (4,), (0,)), r"slice: strides \(0,\) must be positive for f32\[4\]"),
    (lambda: lax.slice(f32(4, 4), (0,), (4,)), r"slice: .* must each have one entry per dimension of f32\[4,4\]"),
    (lambda: lax.broadcast_in_dim(f32(3), (4,), (0,)),
     r"broadcast_in_dim: operand f32\[3\] cannot be broadcast to shape \(4,\)"),
    (lambda: lax.broadcast_in_dim(f32(3, 1), (3, 2), (1, 0)), "broadcast_in_dim: broadcast_dimensions .* must be "
                                                              "strictly increasing"),
    (lambda: lax.broadcast_in_dim(f32(3), (3, 2), ()), r"one entry per operand dimension of f32\[3\]"),
    (lambda: lax.reshape(f32(2, 3), (4,)), r"reshape: cannot reshape f32\[2,3\] \(6 elements\) into shape \(4,\)"),
    (lambda: lax.transpose(f32(2, 3), (0, 0)), r"transpose: permutation \(0, 0\) is not a permutation of the axes "
                                               r"of f32\[2,3\]"),
    (lambda: lax.iota("int32", (3,), 1), r"iota: dimension 1 is out of range for shape \(3,\)"),
    (lambda: lax.iota("bool", (3,), 0), "iota: dtype must be an integer or floating type, got bool"),
    (lambda: lax.iota("int32", (-1,), 0), r"iota: negative size in shape \(-1,\)"),
]


@pytest.mark.parametrize("fn,match", ERRORS, ids=[m[:40] for _, m in ERRORS])
def test_shape_errors(fn, match):
    with pytest.raises(TypeError, match=match):
        fn()


def test_errors_are_the_same_under_transforms():
    with pytest.raises(TypeError, match="squeeze: dimension 0 of f32\\[3\\] has size 3, not 1"):
        fl.grad(lambda x: lax.squeeze(x, (0,)).sum())(f32(3))
    with pytest.raises(TypeError, match="dynamic_slice: start indices must be integer scalars"):
        fl.vmap(lambda x: lax.dynamic_slice(x, (fnp.asarray(0.5),), (1,)))(f32(2, 3))


def test_sort_keys_cannot_be_linear_inputs():
    # the keys of the tangent sort are primals: transposing with respect to them must fail clearly
    from flfun.transforms.vjp import UndefinedPrimal
    from flfun.core import ShapedArray
    from flfun.primitives import shape as S
    key = UndefinedPrimal(ShapedArray((3,), "float32"))
    with pytest.raises(TypeError, match="sort: the sort keys are not linear inputs"):
        S.sort_p.transpose([f32(3), f32(3)], key, f32(3), dimension=0, is_stable=True, num_keys=1)


# -------------------------------------------------------------------------------------- negative axes, wrappers
def test_negative_dimensions_and_no_op_wrappers():
    x = f32(1, 3, 1)
    assert lax.squeeze(x, (-1, 0)).shape == (3,)
    assert lax.expand_dims(f32(3), (-1, 0)).shape == (1, 3, 1)
    np.testing.assert_array_equal(lax.rev(f32(2, 3), (-1,)), np.arange(6.0).reshape(2, 3)[:, ::-1])
    assert lax.concatenate([f32(2, 3), f32(2, 1)], -1).shape == (2, 4)
    assert lax.squeeze(x, ()) is x and lax.rev(x, ()) is x and lax.concatenate([x], 0) is x
    assert lax.sort(f32(2, 3), -2).shape == (2, 3)


def test_shape_ops_keep_weak_types():
    from flfun.core import ShapedArray
    from flfun.primitives import shape as S
    weak, strong = ShapedArray((1,), "float32", weak_type=True), ShapedArray((1,), "float32")
    for p, params in [(S.squeeze_p, {"dimensions": (0,)}), (S.expand_dims_p, {"dimensions": (0,)}),
                      (S.rev_p, {"dimensions": (0,)}), (S.dynamic_slice_p, {"slice_sizes": (1,)})]:
        idx = [ShapedArray((), "int64")] if p is S.dynamic_slice_p else []
        assert p.abstract_eval(weak, *idx, **params).weak_type
        assert not p.abstract_eval(strong, *idx, **params).weak_type
    assert S.concatenate_p.abstract_eval(weak, weak, dimension=0).weak_type
    assert not S.concatenate_p.abstract_eval(weak, strong, dimension=0).weak_type


# -------------------------------------------------------------------------------------------- zero-size dims
def test_zero_size_dims():
    empty = fnp.zeros((0, 3))
    assert lax.slice(f32(4, 3), (2, 0), (2, 3)).shape == (0, 3)
    assert lax.pad(empty, fnp.asarray(np.float32(7)), [(1, 1, 2), (0, 0, 0)]).shape == (2, 3)
    np.testing.assert_array_equal(lax.pad(empty, fnp.asarray(np.float32(7)), [(1, 1, 2), (0, 0, 0)]), 7)
    np.testing.assert_array_equal(lax.concatenate([empty, f32(2, 3)], 0), np.arange(6.0).reshape(2, 3))
    assert lax.dynamic_slice(f32(4), (i64(9),), (0,)).shape == (0,)
    assert lax.dynamic_update_slice(f32(4), fnp.zeros(0), (i64(2),)).tolist() == [0, 1, 2, 3]
    assert lax.sort(fnp.zeros((0, 3)), 0).shape == (0, 3)
    assert fnp.argsort(fnp.zeros((2, 0))).shape == (2, 0)
    assert lax.rev(empty, (0, 1)).shape == (0, 3) and lax.squeeze(fnp.zeros((0, 1)), (1,)).shape == (0,)
    g = fl.grad(lambda x: lax.concatenate([x, lax.slice(x, (1,), (1,))], 0).sum())(f32(3))
    np.testing.assert_array_equal(g, np.ones(3))


# ------------------------------------------------------------------------------------------------------- pad
@pytest.mark.parametrize("config", [[(-1, 2, 1)], [(2, -3, 0)], [(-3, 5, 0)], [(-2, -2, 2)], [(1, -4, 1)]])
def test_pad_negative_and_interior(config):
    x = np.arange(1.0, 4.0)
    out = lax.pad(fnp.asarray(x), fnp.asarray(np.float64(-1.0)), config)
    lo, hi, interior = config[0]
    spread = np.full(len(x) + (len(x) - 1) * interior, -1.0)
    spread[::interior + 1] = x
    full = np.concatenate([np.full(max(lo, 0), -1.0), spread, np.full(max(hi, 0), -1.0)])
    np.testing.assert_array_equal(out, full[max(-lo, 0):len(full) - max(-hi, 0)])
    check_grads(lambda a, v: lax.pad(a, v, config), (x, np.float64(-1.0)), order=2)


def test_pad_with_a_mapped_padding_value():
    xs, vs = np.arange(6.0).reshape(2, 3), np.array([-1.0, -2.0])
    check_vmap(lambda x, v: lax.pad(x, v, [(1, -1, 1)]), (xs, vs), (0, 0))
    check_vmap(lambda x, v: lax.pad(x, v, [(2, 0, 0)]), (xs[0], vs), (None, 0))


# ------------------------------------------------------------------------------------- dynamic slices: clamping
def test_dynamic_slice_clamps_like_lax():
    x = f32(5)
    for start, want in [(-3, [0, 1]), (0, [0, 1]), (3, [3, 4]), (4, [3, 4]), (99, [3, 4])]:
        assert lax.dynamic_slice(x, (i64(start),), (2,)).tolist() == want
        assert lax.dynamic_update_slice(fnp.zeros(5), fnp.ones(2), (start,)).tolist() == \
            [1.0 if i in want else 0.0 for i in range(5)]
    assert lax.dynamic_slice(x, (fnp.asarray(np.uint8(2)),), (2,)).tolist() == [2, 3]


@st.composite
def _batched_slices(draw):
    shape = draw(shapes(1, 3, min_side=1, max_side=4))
    sizes = tuple(draw(st.integers(0, d)) for d in shape)
    x = draw(arrays("float64", (3,) + shape))
    starts = [np.asarray(draw(st.lists(st.integers(-2, d + 2), min_size=3, max_size=3))) for d in shape]
    mapped = [draw(st.booleans()) for _ in shape]
    return x, sizes, starts, mapped


@given(_batched_slices())
def test_dynamic_slice_with_mapped_start_indices(case):
    x, sizes, starts, mapped = case
    idx = [s if m else s[0] for s, m in zip(starts, mapped)]
    axes = (0,) + tuple(0 if m else None for m in mapped)
    check_vmap(lambda x, *i: lax.dynamic_slice(x, i, sizes), (x, *idx), axes)
    u = x[(slice(None),) + tuple(slice(0, s) for s in sizes)] + 10.0
    check_vmap(lambda x, u, *i: lax.dynamic_update_slice(x, u, i), (x, u, *idx), (0, 0) + axes[1:])
    check_vmap(lambda u, *i: lax.dynamic_update_slice(fnp.asarray(x[0]), u, i), (u, *idx), (0,) + axes[1:])


def test_dynamic_slices_under_vmap_of_grad():
    xs, idx = np.arange(12.0).reshape(3, 4), np.array([0, 2, 9])

    def f(x, i):
        return (lax.dynamic_slice(x, (i,), (2,)) ** 2).sum()
    g = fl.vmap(fl.grad(f))(fnp.asarray(xs), fnp.asarray(idx))
    want = np.zeros((3, 4))
    for b, s in enumerate([0, 2, 2]):
        want[b, s:s + 2] = 2 * xs[b, s:s + 2]
    np.testing.assert_allclose(g, want)
    check_grads(lambda x, u: lax.dynamic_update_slice(x, u * u, (i64(1),)), (xs[0], np.ones(2)), order=2)


# ------------------------------------------------------------------------------------------------------ iota
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "uint8"])
def test_iota(dtype):
    out = lax.iota(dtype, (2, 3), 1)
    assert out.dtype == np.dtype(dtype) and out.shape == (2, 3)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(3), (2, 3)))
    np.testing.assert_array_equal(lax.iota(dtype, (3, 2), 0), np.arange(3)[:, None] * np.ones((1, 2)))
    assert lax.iota(dtype, (0, 2), 0).shape == (0, 2)


def test_iota_inside_transforms():
    # no operands: under vmap and grad iota is a constant that mixes with traced values
    out = fl.vmap(lambda x: x + lax.iota("float32", (3,), 0))(f32(2, 3))
    np.testing.assert_array_equal(out, np.arange(6.0).reshape(2, 3) + np.arange(3.0))
    assert fl.grad(lambda x: (x * lax.iota("float32", (3,), 0)).sum())(f32(3)).tolist() == [0, 1, 2]


# ------------------------------------------------------------------------------------------------------- sort
def test_sort_nans_go_last_and_carry_values():
    keys = fnp.asarray([np.nan, 2.0, -np.inf, 1.0, np.nan, 0.0])
    k, v = lax.sort((keys, lax.iota("int64", (6,), 0)))
    np.testing.assert_array_equal(k, [-np.inf, 0, 1, 2, np.nan, np.nan])
    assert v.tolist() == [2, 5, 3, 1, 0, 4]
    assert fnp.sort(keys, descending=True).tolist()[2:] == [2.0, 1.0, 0.0, -np.inf]


def test_sort_two_keys_is_lexicographic():
    a = fnp.asarray([1, 0, 1, 0, 1])
    b = fnp.asarray([3.0, 9.0, 1.0, 9.0, 2.0])
    _, _, idx = lax.sort((a, b, lax.iota("int64", (5,), 0)), num_keys=2)
    assert idx.tolist() == [1, 3, 2, 4, 0]


@given(arrays("int32", shapes(1, 3), low=0, high=3), st.data())
def test_argsort_is_stable_in_both_directions(x, data):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    np.testing.assert_array_equal(fnp.argsort(fnp.asarray(x), axis=axis), np.argsort(x, axis=axis, kind="stable"))
    # descending: ties keep their original order too
    want = np.argsort(-x.astype(np.int64), axis=axis, kind="stable")
    np.testing.assert_array_equal(fnp.argsort(fnp.asarray(x), axis=axis, descending=True), want)
    np.testing.assert_array_equal(fnp.sort(fnp.asarray(x), axis=axis, descending=True),
                                  np.flip(np.sort(x, axis=axis), axis))


def test_argsort_of_ties():
    x = fnp.asarray([2, 1, 2, 1, 2])
    assert fnp.argsort(x).tolist() == [1, 3, 0, 2, 4]
    assert fnp.argsort(x, descending=True).tolist() == [0, 2, 4, 1, 3]
    assert fnp.argsort(x).dtype == np.int64
    assert fnp.argsort(fnp.asarray([True, False, True])).tolist() == [1, 0, 2]


def test_numpy_sorting_helpers():
    x = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]], dtype=np.float32)
    assert fnp.sort(x).dtype == np.float32 and x.tolist() == [[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]]
    np.testing.assert_array_equal(fnp.sort(x, axis=0), np.sort(x, axis=0))
    np.testing.assert_array_equal(fnp.asarray(x).sort(axis=0), np.sort(x, axis=0))
    np.testing.assert_array_equal(fnp.asarray(x).argsort(), np.argsort(x))
    k1, k2 = np.array([1, 0, 2, 0]), np.array([0, 0, 1, 0])
    np.testing.assert_array_equal(fnp.lexsort([k1, k2]), np.lexsort([k1, k2]))
    part = np.asarray(fnp.partition(x, 1, axis=1))
    assert np.all(part[:, :1] <= part[:, 1:2]) and np.all(part[:, 1:2] <= part[:, 2:])
    np.testing.assert_array_equal(np.take_along_axis(x, np.asarray(fnp.argpartition(x, 1)), 1), part)
    for bad, match in [(lambda: fnp.sort(fnp.asarray(1.0)), "sort: x must have at least one dimension"),
                       (lambda: fnp.argsort(x, axis=2), "argsort: axis 2 is out of bounds"),
                       (lambda: fnp.partition(x, 3), "partition: kth=3 must be an int"),
                       (lambda: fnp.lexsort([]), "lexsort: keys must contain at least one array"),
                       (lambda: fnp.lexsort([k1, k2[:2]]), "lexsort: all keys must have one shape")]:
        with pytest.raises(ValueError, match=match):
            bad()


def test_sort_gradients():
    x = np.array([[0.3, -1.0, 2.0], [1.5, 0.1, -0.7]])
    g = fl.grad(lambda a: (fnp.sort(a, axis=1) * fnp.arange(3.0, dtype="float64")).sum())(fnp.asarray(x))
    ranks = np.argsort(np.argsort(x, axis=1), axis=1)
    np.testing.assert_allclose(g, ranks)
    check_grads(lambda a: fnp.sort(a, axis=0, descending=True), (x,), order=2)
    check_grads(lambda a, v: lax.sort((a, v), 1)[1], (x, x * 3), order=2)
    # the keys and an integer payload: the payload gets no tangent
    jac = fl.jacfwd(lambda a: lax.sort((a, lax.iota("int64", a.shape, 1)), 1)[0])(fnp.asarray(x))
    assert jac.shape == (2, 3, 2, 3)
