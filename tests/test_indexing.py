"""numpy-style indexing against numpy: random index expressions for ``x[idx]`` and ``x.at[idx].<op>``,
immutability, gradients and vmap through indexing, take / take_along_axis / put_along_axis, and error messages."""
from __future__ import annotations

import types

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.backends.xp.indexing import impls
from flfun.testing import arrays, check_grads, check_vmap, shapes
import op_table  # noqa: F401,I001  (first: it loads the records modules, records_indexing among them)
from records_indexing import scatter_ref


# -------------------------------------------------------------------------------------------------- strategies
@st.composite
def index_exprs(draw, shape, allow_bool=True, allow_arrays=True):
    """``(index, numpy_index)``: a random index for ``shape`` (ints, slices with steps, None, Ellipsis, integer
    arrays as numpy / list / Array, boolean masks) and the same index with numpy arrays only."""
    adv_shape = draw(st.sampled_from([(2,), (3,), (2, 3)]))
    items, dim, n_used = [], 0, draw(st.integers(0, len(shape)))
    kinds = ["int", "slice", "slice"] + (["array", "array"] if allow_arrays else []) + \
        (["bool"] if allow_bool else [])
    while dim < n_used:
        n, kind = shape[dim], draw(st.sampled_from(kinds))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 2, n + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
        elif kind == "array":
            sub = tuple(d if draw(st.booleans()) else 1 for d in adv_shape[draw(st.integers(0, len(adv_shape))):])
            items.append(draw(arrays("int64", sub, low=-n, high=n - 1)))
        else:
            k = draw(st.integers(1, min(2, n_used - dim)))
            items.append(draw(arrays("bool", shape[dim:dim + k])))
            dim += k - 1
        dim += 1
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    flf = []
    for it in items:
        if isinstance(it, np.ndarray):
            it = draw(st.sampled_from([it, fnp.asarray(it), it.tolist() if it.ndim else it]))
        flf.append(it)
    if len(items) == 1 and draw(st.booleans()):
        return flf[0], items[0]
    return tuple(flf), tuple(items)


def _data(shape, dtype="float64"):
    return (np.arange(int(np.prod(shape))) * 1.5 - 4).astype(dtype).reshape(shape)


MORE = settings(max_examples=max(50, settings.default.max_examples))   # the core checks get more examples


# ------------------------------------------------------------------------------------------------------ getitem
@MORE
@given(data=st.data())
def test_getitem_matches_numpy(data):
    shape = data.draw(shapes(0, 4, max_side=4), label="shape")
    a = _data(shape)
    idx, np_idx = data.draw(index_exprs(shape), label="idx")
    x = fnp.asarray(a)
    try:
        expected = a[np_idx]
    except IndexError:
        with pytest.raises(IndexError):
            x[idx]
        return
    if expected.size == 0:   # numpy skips the bounds check of an integer index broadcast to nothing; flfun does not
        try:
            x[idx]
        except IndexError:
            return
    out = x[idx]
    assert out.shape == expected.shape and out.dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(out), expected)
    np.testing.assert_array_equal(np.asarray(x), _data(shape))          # the Array is unchanged


@pytest.mark.parametrize("idx", [(0, slice(None), [0, 1]), (slice(None), 0, [0, 1]), ([0, 1], None, [1, 2]),
                                 ([[0], [1]], slice(None, None, -1), [0, 3]), (True,), (False, 0),
                                 (slice(None), True, [0, 1]), ([],), (np.array(1), slice(1, None)),
                                 (Ellipsis, None, slice(3, 0, -2)), ([0, 1], Ellipsis, [1, 2]),
                                 (slice(None), [0, 1, 2], Ellipsis, [0, 1, 2]),
                                 (slice(None), [[0], [1]], None, [0, 1, 2]), (slice(None), 1, Ellipsis, [0]),
                                 (1, slice(None), [0])])
def test_getitem_numpy_placement_rules(idx):
    a = _data((2, 3, 4))
    out = fnp.asarray(a)[idx]
    assert out.shape == a[idx].shape
    np.testing.assert_array_equal(np.asarray(out), a[idx])


def test_getitem_empty_dims_and_scalars():
    a = _data((0, 3))
    np.testing.assert_array_equal(np.asarray(fnp.asarray(a)[:, [2, 0]]), a[:, [2, 0]])
    assert fnp.asarray(a)[:, 1].shape == (0,)
    s = fnp.asarray(3.0)
    assert s[()].shape == () and s[None].shape == (1,) and s[...].shape == ()


def test_getitem_with_traced_scalar_index_matches_numpy():
    a = _data((4, 3))
    f = lambda x, i: x[i, ::-1]                          # noqa: E731
    out = fl.vmap(f, in_axes=(None, 0))(fnp.asarray(a), fnp.asarray([0, -1, 2]))
    np.testing.assert_array_equal(np.asarray(out), np.stack([a[i, ::-1] for i in (0, -1, 2)]))


# ------------------------------------------------------------------------------------------------------ updates
_NP_AT = {"add": np.add.at, "multiply": np.multiply.at, "min": np.minimum.at, "max": np.maximum.at}


@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "max"])
@MORE
@given(data=st.data())
def test_at_update_matches_numpy(op, data):
    shape = data.draw(shapes(1, 3, max_side=4), label="shape")
    a = _data(shape)
    a_copy = a.copy()
    idx, np_idx = data.draw(index_exprs(shape), label="idx")
    try:
        pos = np.arange(a.size).reshape(shape)[np_idx]
    except IndexError:
        return
    if op == "set":
        assume(len(np.unique(pos)) == pos.size)          # which duplicate wins is unspecified
    vshape = data.draw(st.sampled_from([pos.shape, pos.shape[1:], (1,) + pos.shape[1:], ()]), label="vshape")
    v = data.draw(arrays("float64", vshape))
    v_copy = v.copy()
    expected = a.copy().ravel()
    vb = np.broadcast_to(v.reshape(v.shape[v.ndim - pos.ndim:]) if v.ndim > pos.ndim else v, pos.shape).ravel()
    if op == "set":
        expected[pos.ravel()] = vb
    else:
        _NP_AT[op](expected, pos.ravel(), vb)
    x = fnp.asarray(a)
    out = getattr(x.at[idx], op)(v)
    np.testing.assert_allclose(np.asarray(out), expected.reshape(shape), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(x), a_copy)                 # nothing was mutated
    np.testing.assert_array_equal(a, a_copy)
    np.testing.assert_array_equal(v, v_copy)


def test_at_divide_power_get_and_modes():
    x = fnp.asarray([1.0, 2.0, 4.0, 8.0])
    np.testing.assert_allclose(np.asarray(x.at[[1, 1, 3]].divide(2.0)), [1.0, 0.5, 4.0, 4.0])
    np.testing.assert_allclose(np.asarray(x.at[2:].power(2)), [1.0, 2.0, 16.0, 64.0])
    np.testing.assert_allclose(np.asarray(x.at[::2].mul(3.0)), [3.0, 2.0, 12.0, 8.0])
    np.testing.assert_allclose(np.asarray(x.at[[0, 9]].get(mode="fill", fill_value=-1.0)), [1.0, -1.0])
    np.testing.assert_allclose(np.asarray(x.at[[0, 9]].get(mode="clip")), [1.0, 8.0])
    np.testing.assert_allclose(np.asarray(x.at[[0, 9]].set(0.0, mode="drop")), [0.0, 2.0, 4.0, 8.0])
    np.testing.assert_allclose(np.asarray(x.at[[0, 9]].add(1.0, mode="clip")), [2.0, 2.0, 4.0, 9.0])
    np.testing.assert_allclose(np.asarray(x.at[...].set(0.0)), np.zeros(4))
    assert fnp.asarray([1, 2, 3]).at[0].set(7.9).tolist() == [7, 2, 3]     # values take x's dtype
    np.testing.assert_allclose(np.asarray(x.at[True].add(1.0)), [2.0, 3.0, 5.0, 9.0])  # no indexed dims
    np.testing.assert_allclose(np.asarray(x.at[False].set(0.0)), np.asarray(x))


@pytest.mark.parametrize("op", ["set", "add", "mul", "min", "max"])
def test_scatter_and_gather_without_indexed_axes(op):
    x, upd = np.arange(3.0), np.array([[5.0, -1.0, 2.0], [0.5, 4.0, 3.0]])
    ind = np.zeros((2, 0), np.int64)
    out = lax.scatter(fnp.asarray(x), ind, fnp.asarray(upd), axes=(), op=op)
    np.testing.assert_allclose(np.asarray(out), scatter_ref(x, ind, upd, axes=(), op=op))
    np.testing.assert_array_equal(np.asarray(lax.gather(fnp.asarray(x), ind, axes=())), np.stack([x, x]))


def test_traced_out_of_range_updates_are_dropped_and_reads_clamped():
    x = fnp.arange(4.0)
    out = fl.vmap(lambda i: x.at[i].set(-1.0), in_axes=0)(fnp.asarray([1, 7]))
    np.testing.assert_array_equal(np.asarray(out), [[0, -1, 2, 3], [0, 1, 2, 3]])
    np.testing.assert_array_equal(np.asarray(fl.vmap(lambda i: x[i])(fnp.asarray([1, 7, -9]))), [1, 3, 0])


def test_scatter_and_gather_never_mutate_inputs():
    f = impls(np)
    operand, updates = np.zeros((3, 2)), np.ones((2, 2))
    indices = np.array([[0], [0]])
    for op in ("set", "add", "mul", "min", "max"):
        for mode in ("clip", "fill", "promise_in_bounds"):
            out = f["scatter"](operand, indices, updates, axes=(0,), batch_dims=0, mode=mode, op=op)
            assert not np.shares_memory(out, operand)
    assert (operand == 0).all() and (updates == 1).all() and (indices == 0).all()
    a = np.arange(6.0).reshape(3, 2)
    x = fnp.asarray(a)
    lax.scatter(x, np.array([[1]]), np.full((1, 2), 9.0), axes=(0,))
    np.testing.assert_array_equal(np.asarray(x), a)
    np.testing.assert_array_equal(a, np.arange(6.0).reshape(3, 2))


def test_scatter_impl_handles_non_contiguous_operands():
    f, base = impls(np), np.arange(12.0).reshape(3, 4)
    for operand in (base.T, base[:, ::2], np.broadcast_to(base[:1], (3, 4))):
        for op, ind in (("add", [[0], [0]]), ("mul", [[1], [1]]), ("max", [[0], [2]]), ("set", [[0], [2]])):
            ind = np.array(ind)
            upd = np.full((2,) + operand.shape[1:], 7.0)
            out = f["scatter"](operand, ind, upd, axes=(0,), batch_dims=0, mode="clip", op=op)
            np.testing.assert_array_equal(out, scatter_ref(operand, ind, upd, axes=(0,), op=op), err_msg=op)


@given(st.data())
def test_scatter_with_one_index_per_batch_entry_matches_reference(data):
    """The plain-indexing path (positions distinct by construction) against the element-by-element reference,
    out-of-range indices in every mode and narrow index dtypes included."""
    f = impls(np)
    bshape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))
    rest = tuple(data.draw(st.lists(st.integers(1, 3), max_size=1)))
    op = data.draw(st.sampled_from(["add", "mul", "min", "max", "set"]))
    mode = data.draw(st.sampled_from(["clip", "fill", "promise_in_bounds"]))
    dtype = data.draw(st.sampled_from(["float32", "int32", "bool"]))
    idtype = data.draw(st.sampled_from(["int64", "int32", "int8", "uint8"]))
    nb, ns = len(bshape), len(sizes)
    operand = data.draw(arrays(dtype, bshape + tuple(sizes) + rest))
    operand = np.moveaxis(np.ascontiguousarray(np.moveaxis(operand, -1, 0)), 0, -1)    # not C-ordered
    axes = tuple(range(nb, nb + ns))
    low = 0 if idtype == "uint8" else -2
    ind = np.stack([data.draw(arrays("int64", bshape, low=low, high=n + 1)) for n in sizes], -1).astype(idtype)
    upd = data.draw(arrays(dtype, bshape + rest))
    kw = dict(axes=axes, batch_dims=nb, mode=mode, op=op)
    got = f["scatter"](operand, ind, upd, **kw)
    ref_mode = "fill" if mode == "fill" else "clip"
    np.testing.assert_array_equal(got, scatter_ref(operand, ind.astype(np.int64), upd, **{**kw, "mode": ref_mode}))
    assert got.dtype == operand.dtype


def test_narrow_indices_are_clamped_on_long_axes():
    ind = np.array([[-5], [100], [127]], np.int8)
    for idt in ("int8", "uint8", "int16"):
        out = impls(np)["gather"](np.arange(300.0), ind.astype(idt), axes=(0,), batch_dims=0, mode="clip",
                                  fill_value=None)
        assert out.tolist() == [0.0 if idt != "uint8" else 251.0, 100.0, 127.0]


class _LimitedUfunc:
    """A numpy ufunc with cupy's ``at`` limits: none at all, or only for 32/64-bit dtypes."""

    def __init__(self, f, has_at):
        self.f, self.has_at = f, has_at

    def __call__(self, *args):
        return self.f(*args)

    def at(self, a, i, b):
        if not self.has_at:
            raise NotImplementedError("`multiply.at` is not supported yet")
        if a.dtype.name not in ("int32", "int64", "float32", "float64", "uint32", "uint64"):
            raise TypeError(f"at does not support {a.dtype}")
        self.f.at(a, i, b)


def _cupy_like_numpy():
    xp = types.ModuleType("cupy_like")
    xp.__dict__.update({k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    xp.add, xp.minimum, xp.maximum = (_LimitedUfunc(f, True) for f in (np.add, np.minimum, np.maximum))
    xp.multiply = _LimitedUfunc(np.multiply, False)
    return xp


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint16", "bool"])
@pytest.mark.parametrize("op", ["add", "mul", "min", "max"])
def test_scatter_fallbacks_without_full_ufunc_at(op, dtype):
    f, ref = impls(_cupy_like_numpy()), impls(np)
    rng = np.random.default_rng(3)
    operand = (rng.standard_normal((4, 3, 5)) * 3).astype(dtype)
    for axes, bd in (((0,), 0), ((2, 0), 0), ((2,), 1)):
        ishape = operand.shape[:bd] + (6,)
        ind = np.stack([rng.integers(-1, operand.shape[a] + 1, ishape) for a in axes], -1)
        upd = (rng.standard_normal(ishape + tuple(d for i, d in enumerate(operand.shape)
                                                  if i >= bd and i not in axes)) * 3).astype(dtype)
        for mode in ("clip", "fill"):
            kw = dict(axes=axes, batch_dims=bd, mode=mode, op=op)
            np.testing.assert_allclose(f["scatter"](operand, ind, upd, **kw), ref["scatter"](operand, ind, upd, **kw),
                                       rtol=1e-6)      # products of duplicates may round in another order


def test_xp_impls_match_numpy_on_cupy():
    cp = pytest.importorskip("cupy")
    f, ref = impls(cp), impls(np)
    rng = np.random.default_rng(4)
    operand = rng.standard_normal((4, 3, 5)).astype("float32")
    ind = np.stack([rng.integers(-1, 6, (4, 6)), rng.integers(0, 4, (4, 6))], -1)
    kw = dict(axes=(2, 1), batch_dims=1, mode="fill")
    out = f["gather"](cp.asarray(operand), cp.asarray(ind), fill_value=None, **kw)
    np.testing.assert_array_equal(cp.asnumpy(out), ref["gather"](operand, ind, fill_value=None, **kw))
    upd = rng.standard_normal((4, 6)).astype("float32")
    for op in ("add", "mul", "min", "max"):
        out = f["scatter"](cp.asarray(operand), cp.asarray(ind), cp.asarray(upd), op=op, **kw)
        np.testing.assert_allclose(cp.asnumpy(out), ref["scatter"](operand, ind, upd, op=op, **kw), rtol=1e-6)


# ------------------------------------------------------------------------------------------------- derivatives
@given(data=st.data())
def test_grads_through_getitem(data):
    shape = data.draw(shapes(1, 3, max_side=4), label="shape")
    idx, _ = data.draw(index_exprs(shape, allow_bool=False), label="idx")
    a = data.draw(arrays("float64", shape))
    try:
        fnp.asarray(a)[idx]
    except IndexError:
        return
    check_grads(lambda x: fnp.sin(x[idx]), (a,), order=2, atol=1e-6)


@pytest.mark.parametrize("op", ["set", "add", "multiply", "max"])
def test_grads_through_at_updates(op):
    rng = np.random.default_rng(0)
    a = rng.permutation(20).reshape(4, 5) * 0.3 - 2.0
    v = rng.permutation(np.arange(20, 26)).reshape(2, 3) * 0.3 - 4.0
    idx = (slice(1, 3), [4, 0, 2])                     # unique positions; values distinct (no ties)
    check_grads(lambda x, u: getattr(x.at[idx], op)(u) ** 2, (a, v), order=2, atol=1e-6)


def test_scatter_max_ties_and_duplicates_split_the_derivative():
    g = fl.grad(lambda x, v: x.at[0].max(v)[0], argnums=(0, 1))(fnp.asarray([1.0, 5.0]), 1.0)
    np.testing.assert_allclose(np.asarray(g[0]), [0.5, 0.0])
    np.testing.assert_allclose(float(g[1]), 0.5)
    g = fl.grad(lambda v: fnp.zeros(2).at[[0, 0, 1]].max(v).sum())(fnp.asarray([3.0, 3.0, -1.0]))
    np.testing.assert_allclose(np.asarray(g), [0.5, 0.5, 0.0])


def test_grad_of_take_along_axis_and_put_along_axis():
    rng = np.random.default_rng(1)
    a, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    ind = np.array([[0, 3], [2, 2], [1, 0]])
    check_grads(lambda x: fnp.take_along_axis(x, ind, axis=1) ** 2, (a,), order=2, atol=1e-6)
    check_grads(lambda x, u: fnp.put_along_axis(x, np.array([[0, 3], [2, 1], [1, 0]]), u, axis=1) ** 2, (a, v),
                atol=1e-6)


# ------------------------------------------------------------------------------------------------------- vmap
@given(data=st.data())
def test_vmap_getitem_with_batched_index(data):
    a = _data((4, 3, 2))
    i = data.draw(arrays("int64", (3,), low=-4, high=3))
    j = data.draw(arrays("int64", (3, 2), low=0, high=2))
    check_vmap(lambda k: fnp.asarray(a)[k, 1:], (i,), 0)
    check_vmap(lambda k, m: fnp.asarray(a)[k, m, ::-1], (i, j), (0, 0))
    check_vmap(lambda x, k: x[:, k], (np.stack([a, -a]), np.array([1, 0])), (0, 0))
    check_vmap(lambda x, k, u: x.at[k, 1:].add(u), (np.stack([a, -a, a]), i, np.ones((3, 2, 2))), (0, 0, 0))
    check_vmap(lambda x, k: fnp.take_along_axis(x, k, axis=0), (np.stack([a, a * 2]), np.zeros((2, 1, 3, 2), int)),
               (0, 0))


# ------------------------------------------------------------------------------------------ take and friends
@pytest.mark.parametrize("mode", [None, "wrap", "clip", "fill"])
@given(data=st.data())
def test_take_matches_numpy(mode, data):
    shape = data.draw(shapes(1, 3, max_side=4), label="shape")
    a = _data(shape)
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1), label="axis")
    n = a.size if axis is None else shape[axis]
    lo, hi = (-n, n - 1) if mode in (None, "fill") else (-2 * n, 2 * n)
    ind = data.draw(arrays("int64", shapes(0, 2, max_side=3), low=lo, high=hi))
    out = fnp.take(fnp.asarray(a), ind, axis=axis, mode=mode)
    expected = np.take(a, ind, axis=axis, mode=mode if mode in ("wrap", "clip") else "raise")
    np.testing.assert_array_equal(np.asarray(out), expected)


@given(data=st.data())
def test_take_put_along_axis_match_numpy(data):
    shape = data.draw(shapes(1, 3, max_side=4), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    ax = axis % len(shape)
    a = _data(shape)
    ishape = tuple(data.draw(st.integers(1, 3)) if d == ax else data.draw(st.sampled_from([1, s]))
                   for d, s in enumerate(shape))
    ind = data.draw(arrays("int64", ishape, low=-shape[ax], high=shape[ax] - 1))
    np.testing.assert_array_equal(np.asarray(fnp.take_along_axis(fnp.asarray(a), ind, axis=axis)),
                                  np.take_along_axis(a, ind, axis=axis))
    unique = len({tuple(r) for r in np.moveaxis(ind % shape[ax], ax, -1).reshape(-1, ishape[ax])}) and \
        all(len(set(r)) == len(r) for r in np.moveaxis(ind % shape[ax], ax, -1).reshape(-1, ishape[ax]).tolist())
    assume(unique)
    v = -np.arange(np.prod(ishape)).reshape(ishape) - 1.0
    expected = a.copy()
    np.put_along_axis(expected, ind, v, axis=axis)
    np.testing.assert_array_equal(np.asarray(fnp.put_along_axis(fnp.asarray(a), ind, v, axis=axis)), expected)


def test_nonzero_family_eager():
    a = np.array([[0, 1, 0], [2, 0, 3]])
    for o, e in zip(fnp.nonzero(fnp.asarray(a)), np.nonzero(a)):
        np.testing.assert_array_equal(np.asarray(o), e)
    np.testing.assert_array_equal(np.asarray(fnp.argwhere(fnp.asarray(a))), np.argwhere(a))
    np.testing.assert_array_equal(np.asarray(fnp.flatnonzero(fnp.asarray(a))), np.flatnonzero(a))
    np.testing.assert_array_equal(np.asarray(fnp.compress([True, False, True], fnp.asarray(a), axis=1)),
                                  np.compress([True, False, True], a, axis=1))
    np.testing.assert_array_equal(np.asarray(fnp.asarray(a)[fnp.asarray(a) > 0]), a[a > 0])


# ------------------------------------------------------------------------------------------------------ errors
def test_index_errors():
    x = fnp.zeros((2, 3))
    with pytest.raises(IndexError, match=r"^index 3 is out of bounds for axis 1 with size 3$"):
        x[0, 3]
    with pytest.raises(IndexError, match=r"^index -3 is out of bounds for axis 0 with size 2$"):
        x[-3]
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for axis 1 with size 3$"):
        x[:, [0, 5]]
    with pytest.raises(IndexError, match=r"too many indices for array: array is 2-dimensional, but 3 were"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"only integers, slices .* got 1.5 \(float\)"):
        x[1.5]
    with pytest.raises(IndexError, match=r"only integers, slices .* got an array of dtype float64"):
        x[np.array([0.0])]
    with pytest.raises(IndexError, match=r"single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match=r"boolean index did not match indexed array along axis 0; size of "
                                         r"axis is 2 but size of corresponding boolean axis is 3"):
        x[np.array([True, False, True])]
    with pytest.raises(IndexError, match=r"could not be broadcast together"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ValueError, match=r"at\[\]\.set: values of shape \(4,\) cannot be broadcast to the "
                                         r"indexed shape \(3,\)"):
        x.at[0].set(fnp.ones(4))
    with pytest.raises(TypeError, match=r"at\[\]\.divide: needs a floating-point array, got i64\[2\]"):
        fnp.asarray([1, 2]).at[0].divide(2)
    with pytest.raises(TypeError, match="immutable"):
        x[0] = 1.0


def test_traced_boolean_masks_and_data_dependent_shapes_name_where():
    x = fnp.arange(3.0)
    with pytest.raises(fl.ConcretizationError, match=r"getitem: a boolean mask .* bool\[3\] is traced; use "
                                                     r"fnp\.where"):
        fl.vmap(lambda m: x[m])(fnp.asarray([[True, False, True]]))
    with pytest.raises(fl.ConcretizationError, match=r"nonzero: .* traced f32\[3\]; .* fnp\.where"):
        fl.vmap(lambda y: fnp.nonzero(y)[0])(fnp.ones((2, 3)))
    with pytest.raises(fl.ConcretizationError, match=r"slice bounds along axis 0 must be concrete.*dynamic_slice"):
        fl.vmap(lambda i: x[i:])(fnp.asarray([0, 1]))


def test_gather_scatter_shape_errors():
    x, i = fnp.zeros((2, 3)), fnp.asarray([[0], [1]])
    with pytest.raises(TypeError, match=r"^gather: indices must be integers, got f32\[2,1\]$"):
        lax.gather(x, fnp.zeros((2, 1)), axes=(0,))
    with pytest.raises(TypeError, match=r"^gather: the last dim of indices must equal len\(axes\)=1, got "
                                        r"i64\[2,2\]$"):
        lax.gather(x, fnp.asarray([[0, 1], [1, 0]]), axes=(0,))
    with pytest.raises(TypeError, match=r"^gather: axes \(0,\) must be distinct operand dims in \[1, 2\) \(not "
                                        r"batch dims\) for f32\[2,3\]$"):
        lax.gather(x, i, axes=(0,), batch_dims=1)
    with pytest.raises(TypeError, match=r"^gather: axes \(2,\) must be distinct operand dims in \[0, 2\)"):
        lax.gather(x, i, axes=(2,))
    with pytest.raises(TypeError, match=r"^gather: the 1 leading batch dims of operand and indices must match, "
                                        r"got f32\[2,3\] and i64\[3,1\]$"):
        lax.gather(x, fnp.asarray([[0], [1], [2]]), axes=(1,), batch_dims=1)
    with pytest.raises(TypeError, match=r"^scatter: updates must be f32\[2,3\] for operand f32\[2,3\] and "
                                        r"indices i64\[2,1\] with axes=\(0,\), batch_dims=0; got f32\[3\]$"):
        lax.scatter(x, i, fnp.zeros(3), axes=(0,))
    with pytest.raises(TypeError, match=r"^scatter: updates must be f32\[2,3\] .* got f64\[2,3\]$"):
        lax.scatter(x, i, fnp.zeros((2, 3), dtype="float64"), axes=(0,), op="add")
    with pytest.raises(ValueError, match=r"^gather: mode must be one of"):
        lax.gather(x, i, axes=(0,), mode="wrap")
    with pytest.raises(ValueError, match=r"^scatter: op must be one of"):
        lax.scatter(x, i, fnp.zeros((2, 3)), axes=(0,), op="sub")
    with pytest.raises(ValueError, match=r"^take_along_axis: indices must have the same rank as x"):
        fnp.take_along_axis(x, np.array([0]), axis=0)


def test_at_updates_lower_to_one_scatter_with_only_the_indexed_positions():
    """An update costs the indexed positions, not the array: no iota over x, index rows of size ``len(axes)``."""
    table, rows, grads = fnp.zeros((1000, 64)), fnp.asarray([3, 1, 3]), fnp.ones((3, 64))
    ir = str(fl.make_ir(lambda t, i, g: t.at[i].add(g))(table, rows, grads))
    assert "iota" not in ir and ir.count("scatter") == 1 and "i64[3,1]" in ir
    ir = str(fl.make_ir(lambda t, g: t.at[2, 1:9].set(g))(table, fnp.ones(8)))
    assert "iota" not in ir and ir.count("scatter") == 1
