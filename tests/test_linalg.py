"""flfun.numpy's products (matmul, dot, einsum, ...) and flfun.numpy.linalg against numpy; dot_general and
conv_general_dilated error messages; convolutions against a naive loop; the impls' ``out=`` and both conv paths."""
from __future__ import annotations

import itertools
import math

import numpy as np
import op_table  # noqa: F401  (must load before records_linalg: it gathers the records)
import pytest
from hypothesis import given
from hypothesis import strategies as st
from records_linalg import conv_ref

import flfun as fl
import flfun.numpy as fnp
from flfun import lax, primitives
from flfun.numpy import linalg as LA
from flfun.testing import arrays, check_grads, check_vmap

rng = np.random.default_rng(0)


def _rand(shape, dtype="float64"):
    a = rng.standard_normal(shape) * 3
    return a.astype(dtype)


def _close(got, expected, atol=1e-6):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    np.testing.assert_allclose(got, expected, atol=atol, rtol=1e-6)


# ------------------------------------------------------------------------------------------------------ matmul
MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((1, 2, 3), (5, 3, 4)), ((5, 2, 3), (1, 3, 4)),
                 ((3,), (5, 3, 4)), ((5, 2, 3), (3,)), ((2, 1, 2, 3), (1, 4, 3, 2)), ((0, 2, 3), (3, 1))]


@pytest.mark.parametrize("s1,s2", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_matmul_matches_numpy(s1, s2, dtype):
    a, b = _rand(s1, dtype), _rand(s2, dtype)
    out = fnp.matmul(fnp.asarray(a), fnp.asarray(b))
    assert out.dtype == np.dtype(dtype)
    _close(out, a @ b, atol=1e-4)
    _close(fnp.asarray(a) @ fnp.asarray(b), a @ b, atol=1e-4)


def test_integer_products_are_exact():
    big = 2 ** 40 + 1
    a, b = np.array([[big, 3]], np.int64), np.array([[3], [big]], np.int64)
    assert np.asarray(fnp.matmul(fnp.asarray(a), fnp.asarray(b))).tolist() == [[6 * big]]
    assert int(fnp.einsum("ij,jk->", fnp.asarray(a), fnp.asarray(b))) == 6 * big


def test_matmul_promotes_and_vmaps():
    out = fnp.matmul(fnp.ones((2, 3), dtype="int32"), fnp.ones((3,), dtype="float32"))
    assert out.dtype == np.float32 and out.tolist() == [3.0, 3.0]
    check_vmap(fnp.matmul, [_rand((4, 2, 3)), _rand((3, 4, 5))], (0, 1))
    check_vmap(fnp.matmul, [_rand((4, 3)), _rand((4, 1, 3, 2))], (0, 0))


def test_matmul_grads():
    check_grads(fnp.matmul, (_rand((5, 2, 3)), _rand((1, 3, 4))), order=2)
    check_grads(fnp.matmul, (_rand((3,)), _rand((2, 3, 4))), order=1)


@pytest.mark.parametrize("s1,s2", [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
                                   ((), (3,)), ((2, 4, 3), (3,))])
def test_dot_matches_numpy(s1, s2):
    a, b = _rand(s1), _rand(s2)
    _close(fnp.dot(fnp.asarray(a), fnp.asarray(b)), np.dot(a, b))
    _close(fnp.asarray(a).dot(fnp.asarray(b)) if a.ndim else fnp.dot(a, b), np.dot(a, b))


def test_inner_outer_vdot_tensordot_kron_match_numpy():
    for s1, s2 in [((3,), (3,)), ((2, 3), (4, 3)), ((2, 5, 3), (4, 3)), ((), (2,))]:
        a, b = _rand(s1), _rand(s2)
        _close(fnp.inner(fnp.asarray(a), fnp.asarray(b)), np.inner(a, b))
    a, b = _rand((2, 3)), _rand((3, 2))
    _close(fnp.vdot(fnp.asarray(a), fnp.asarray(b)), np.vdot(a, b))
    _close(fnp.outer(fnp.asarray(a), fnp.asarray(b)), np.outer(a, b))
    a, b = _rand((2, 3, 4)), _rand((3, 4, 5))
    for axes in [2, 0, ([1, 2], [0, 1]), ((2, 1), (1, 0)), (1, 0), ([-1], [1])]:
        _close(fnp.tensordot(fnp.asarray(a), fnp.asarray(b), axes=axes), np.tensordot(a, b, axes=axes))
    for s1, s2 in [((2, 3), (4, 5)), ((2,), (3, 4)), ((2, 2, 2), (3,))]:
        a, b = _rand(s1), _rand(s2)
        _close(fnp.kron(fnp.asarray(a), fnp.asarray(b)), np.kron(a, b))


@pytest.mark.parametrize("s1,s2,axis", [((4, 3), (3,), -1), ((2, 4, 3), (4, 3), -1), ((3, 4), (3, 4), 0),
                                        ((2, 1, 3), (5, 3), -1)])
def test_vecdot_matches_numpy(s1, s2, axis):
    a, b = _rand(s1), _rand(s2)
    _close(fnp.vecdot(fnp.asarray(a), fnp.asarray(b), axis=axis), np.linalg.vecdot(a, b, axis=axis))


@pytest.mark.parametrize("offset,axis1,axis2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2), (-3, 2, 0),
                                                (10, 0, 1), (0, -1, -2)])
def test_diagonal_and_trace_match_numpy(offset, axis1, axis2):
    x = _rand((3, 4, 5))
    _close(fnp.diagonal(fnp.asarray(x), offset, axis1, axis2), np.diagonal(x, offset, axis1, axis2))
    _close(fnp.asarray(x).trace(offset, axis1, axis2), np.trace(x, offset, axis1, axis2))
    check_grads(lambda a: fnp.diagonal(a, offset, axis1, axis2), (x,), order=1)


def test_diagonal_keeps_nan_and_inf_off_the_diagonal_out():
    x = np.array([[1.0, np.inf], [np.nan, 2.0]])
    assert np.asarray(fnp.diagonal(fnp.asarray(x))).tolist() == [1.0, 2.0]
    assert np.asarray(fnp.einsum("ii->i", fnp.asarray(x))).tolist() == [1.0, 2.0]


# ------------------------------------------------------------------------------------------------------ einsum
EINSUM = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
          ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iij->ji", [(3, 3, 2)]), ("iii->i", [(2, 2, 2)]),
          ("ij->", [(2, 3)]), ("ij->ji", [(2, 3)]), ("ba", [(2, 3)]), ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
          ("...j,j", [(2, 3), (3,)]), ("...j,...j", [(2, 3), (4, 1, 3)]), ("i,i->i", [(1,), (3,)]),
          ("ij,j->i", [(2, 1), (3,)]), ("bi,bj->bij", [(4, 2), (4, 3)]), ("i,j,k->ijk", [(2,), (3,), (4,)]),
          ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("ij,jk,kl", [(20, 3), (3, 40), (40, 5)]),
          ("abc,cd,da->b", [(2, 3, 4), (4, 5), (5, 2)]), (",i->i", [(), (3,)]), ("i,i", [(3,), (3,)]),
          ("ijk,ikl,ilm->jm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]), ("ij,ij->ij", [(2, 3), (2, 3)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ii,i->", [(3, 3), (3,)]),
          ("a...,...a->...", [(3, 2), (2, 3)]), ("i j , j k -> i k", [(2, 3), (3, 4)])]


@pytest.mark.parametrize("spec,shapes", EINSUM, ids=[e[0] for e in EINSUM])
@pytest.mark.parametrize("optimize", ["greedy", False])
def test_einsum_matches_numpy(spec, shapes, optimize):
    ops = [_rand(s) for s in shapes]
    _close(fnp.einsum(spec, *map(fnp.asarray, ops), optimize=optimize), np.einsum(spec, *ops), atol=1e-5)


@st.composite
def _einsum_problem(draw):
    labels = "abcde"
    sizes = {c: draw(st.integers(1, 3)) for c in labels}
    n_ops = draw(st.integers(1, 3))
    specs = [draw(st.lists(st.sampled_from(labels), max_size=3)) for _ in range(n_ops)]
    used = sorted({c for s in specs for c in s})
    out = draw(st.permutations(used).flatmap(lambda p: st.integers(0, len(p)).map(lambda k: p[:k])))
    ops = [draw(arrays("float64", tuple(sizes[c] for c in s))) for s in specs]
    return ",".join("".join(s) for s in specs) + "->" + "".join(out), ops


@given(_einsum_problem())
def test_einsum_random_specs_match_numpy(problem):
    spec, ops = problem
    _close(fnp.einsum(spec, *map(fnp.asarray, ops)), np.einsum(spec, *ops), atol=1e-8)


def test_einsum_grads_and_vmap():
    a, b = _rand((3, 3, 2)), _rand((2, 4))
    check_grads(lambda x, y: fnp.einsum("iij,jk->ik", x, y), (a, b), order=2)
    check_vmap(lambda x, y: fnp.einsum("ij,jk->ki", x, y), [_rand((5, 2, 3)), _rand((3, 5, 4))], (0, 1))


@pytest.mark.parametrize("spec,shapes,msg", [
    ("ij,jk->ik", [(2, 3), (4, 4)], "einsum: label 'j' has sizes 3 and 4"),
    ("ij", [(2,)], "einsum: subscripts 'ij' do not fit an operand of rank 1"),
    ("i->j", [(2,)], "einsum: output label 'j'"),
    ("ij,j", [(2, 3)], "einsum: subscripts 'ij,j' name 2 operands but 1 were given"),
    ("i1", [(2, 3)], "einsum: invalid subscripts"),
    ("ij,ij", [(2, 2, 2), (2, 2)], "do not fit"),
])
def test_einsum_errors(spec, shapes, msg):
    with pytest.raises(ValueError, match=msg):
        fnp.einsum(spec, *[fnp.ones(s) for s in shapes])


# ------------------------------------------------------------------------------------------------------ linalg
def test_vector_and_matrix_norms_match_numpy():
    x = _rand((3, 4, 5), "float32")
    for ord_ in [2, 1, math.inf, -math.inf, 0, 3, 0.5]:
        for axis in [None, 0, -1, (0, 2)]:
            for kd in (False, True):
                _close(LA.vector_norm(fnp.asarray(x), axis=axis, ord=ord_, keepdims=kd),
                       np.linalg.vector_norm(x, axis=axis, ord=ord_, keepdims=kd), atol=1e-3)
    for ord_ in ["fro", 1, -1, math.inf, -math.inf]:
        _close(LA.matrix_norm(fnp.asarray(x), ord=ord_, keepdims=True),
               np.linalg.matrix_norm(x, ord=ord_, keepdims=True), atol=1e-4)
        _close(LA.norm(fnp.asarray(x[0]), ord=ord_), np.linalg.norm(x[0], ord=ord_), atol=1e-4)
        _close(LA.norm(fnp.asarray(x), ord=ord_, axis=(2, 0), keepdims=True),
               np.linalg.norm(x, ord=ord_, axis=(2, 0), keepdims=True), atol=1e-4)
    for ord_ in [None, 1, 2, math.inf, 0, 3]:
        _close(LA.norm(fnp.asarray(x[0, 0]), ord=ord_), np.linalg.norm(x[0, 0], ord=ord_), atol=1e-4)
        _close(LA.norm(fnp.asarray(x), ord=ord_, axis=1), np.linalg.norm(x, ord=ord_, axis=1), atol=1e-4)
    _close(LA.norm(fnp.asarray(x)), np.linalg.norm(x), atol=1e-4)
    assert LA.vector_norm(fnp.arange(3)).dtype == np.float32


def test_norm_gradient():
    m = _rand((3, 4))
    check_grads(lambda a: LA.norm(a), (m,), order=2)
    check_grads(lambda a: LA.matrix_norm(a, ord=1), (m,), order=1)


def test_linalg_extension_functions():
    x, a, b = _rand((2, 3, 4)), _rand((4, 3)), _rand((2, 1, 3))
    _close(LA.diagonal(fnp.asarray(x), offset=1), np.linalg.diagonal(x, offset=1))
    _close(LA.trace(fnp.asarray(x), offset=-1), np.linalg.trace(x, offset=-1))
    _close(LA.cross(fnp.asarray(a), fnp.asarray(b)), np.cross(a, b))
    _close(LA.cross(fnp.asarray(a.T), fnp.asarray(a.T[::-1]), axis=0), np.cross(a.T, a.T[::-1], axis=0))
    _close(LA.outer(fnp.asarray(a[0]), fnp.asarray(a[1])), np.linalg.outer(a[0], a[1]))
    _close(LA.matmul(fnp.asarray(a), fnp.asarray(a.T)), a @ a.T)
    _close(LA.tensordot(fnp.asarray(a), fnp.asarray(a.T), axes=1), np.linalg.tensordot(a, a.T, axes=1))
    _close(LA.vecdot(fnp.asarray(a), fnp.asarray(a)), np.linalg.vecdot(a, a))
    _close(LA.matrix_transpose(fnp.asarray(x)), np.linalg.matrix_transpose(x))
    sq = _rand((2, 3, 3))
    for n in range(5):
        _close(LA.matrix_power(fnp.asarray(sq), n), np.linalg.matrix_power(sq, n), atol=1e-6)


def test_linalg_unsupported_and_misuse():
    with pytest.raises(AttributeError, match="flfun.numpy.linalg.lstsq is not implemented"):
        _ = LA.lstsq
    assert not hasattr(LA, "eig")
    with pytest.raises(ValueError, match="outer: x1 and x2 must be 1-d"):
        LA.outer(fnp.ones((2, 2)), fnp.ones(2))
    with pytest.raises(ValueError, match="cross: axis -1 must have size 3"):
        LA.cross(fnp.ones(2), fnp.ones(2))
    with pytest.raises(ValueError, match="norm: ord='fro' is a matrix norm"):
        LA.norm(fnp.ones((2, 2)), ord="fro", axis=0)


# ----------------------------------------------------------------------------------------------------- errors
def test_dot_general_errors():
    x, y = fnp.ones((3, 4)), fnp.ones((5, 2))
    with pytest.raises(TypeError, match=r"^dot_general: contracting dimensions must match, got f32\[3,4\] and "
                                        r"f32\[5,2\]"):
        lax.dot_general(x, y, (((1,), (0,)), ((), ())))
    with pytest.raises(TypeError, match=r"dot_general: operands must have the same dtype, got f32\[3,4\] and "
                                        r"i32\[4\]"):
        lax.dot_general(x, fnp.ones(4, dtype="int32"), (((1,), (0,)), ((), ())))
    with pytest.raises(TypeError, match=r"dot_general: lhs contracting dimensions \(2,\) and batch dimensions "
                                        r"\(\) must be distinct and within the rank of f32\[3,4\]"):
        lax.dot_general(x, y, (((2,), (0,)), ((), ())))
    with pytest.raises(TypeError, match=r"dot_general: rhs contracting dimensions \(0,\) and batch dimensions "
                                        r"\(0,\) must be distinct"):
        lax.dot_general(x, fnp.ones((3, 3)), (((1,), (0,)), ((0,), (0,))))
    with pytest.raises(TypeError, match="dot_general: batch dimensions must match"):
        lax.dot_general(x, fnp.ones((4, 4)), (((1,), (1,)), ((0,), (0,))))
    with pytest.raises(TypeError, match="dot_general: lhs and rhs need as many contracting dimensions"):
        lax.dot_general(x, y, (((0, 1), (0,)), ((), ())))
    with pytest.raises(ValueError, match="dot_general: dimension_numbers must be"):
        lax.dot_general(x, y, ((1,), (0,)))


def test_numpy_product_errors():
    with pytest.raises(TypeError, match=r"matmul: contracting dimensions must match, got f32\[2,3\] and f32\[4,5\]"):
        fnp.matmul(fnp.ones((2, 3)), fnp.ones((4, 5)))
    with pytest.raises(TypeError, match=r"matmul: batch dimensions do not broadcast"):
        fnp.matmul(fnp.ones((2, 2, 3)), fnp.ones((4, 3, 5)))
    with pytest.raises(ValueError, match="matmul: operands must have at least one dimension"):
        fnp.matmul(fnp.ones(()), fnp.ones(3))
    with pytest.raises(TypeError, match="tensordot: contracting dimensions must match"):
        fnp.tensordot(fnp.ones((2, 3)), fnp.ones((2, 3)), axes=1)
    with pytest.raises(ValueError, match="tensordot: axes=3 must be between 0"):
        fnp.tensordot(fnp.ones((2, 3)), fnp.ones((2, 3)), axes=3)
    with pytest.raises(ValueError, match="diagonal: axis1 and axis2 must differ"):
        fnp.diagonal(fnp.ones((2, 2)), 0, 1, 1)


def test_conv_errors():
    x, w = fnp.ones((1, 3, 5, 5)), fnp.ones((4, 2, 3, 3))
    with pytest.raises(TypeError, match=r"conv_general_dilated: lhs feature size \(3\) must equal rhs input "
                                        r"feature size \(2\) times feature_group_count \(1\), got f32\[1,3,5,5\]"):
        lax.conv_general_dilated(x, w, (1, 1), "VALID")
    with pytest.raises(TypeError, match="conv_general_dilated: lhs and rhs must have the same rank"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3)), (1,), "VALID")
    with pytest.raises(TypeError, match="conv_general_dilated: operands must have the same dtype"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3, 3), dtype="int32"), (1, 1), "VALID")
    with pytest.raises(TypeError, match=r"conv_general_dilated: window_strides \(1,\) needs one entry per spatial"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3, 3)), (1,), "VALID")
    with pytest.raises(TypeError, match=r"conv_general_dilated: window_strides \(0, 1\) must be positive"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3, 3)), (0, 1), "VALID")
    with pytest.raises(TypeError, match=r"rhs output feature size \(3\) must be divisible by feature_group_count"):
        lax.conv_general_dilated(fnp.ones((1, 4, 5, 5)), fnp.ones((3, 2, 3, 3)), (1, 1), "VALID",
                                 feature_group_count=2)
    with pytest.raises(ValueError, match="conv_general_dilated: padding must be 'VALID', 'SAME'"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3, 3)), (1, 1), "FULL")
    with pytest.raises(ValueError, match="conv_general_dilated: dimension_numbers"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3, 3)), (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW"))
    with pytest.raises(ValueError, match="is not a valid layout"):
        lax.conv_general_dilated(x, fnp.ones((4, 3, 3, 3)), (1, 1), "VALID",
                                 dimension_numbers=("NCHW", "OIHX", "NCHW"))


# ------------------------------------------------------------------------------------------------ convolution
def _naive_conv(x, w, strides, pads, lhs_dil, rhs_dil, groups):
    """2-d NCHW/OIHW convolution with nested loops over every output element and kernel tap."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    hd, wdd = (h - 1) * lhs_dil[0] + 1, (wd - 1) * lhs_dil[1] + 1
    ho = max(0, (hd + sum(pads[0]) - ((kh - 1) * rhs_dil[0] + 1)) // strides[0] + 1)
    wo = max(0, (wdd + sum(pads[1]) - ((kw - 1) * rhs_dil[1] + 1)) // strides[1] + 1)
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for b, f, i, j in itertools.product(range(n), range(o), range(ho), range(wo)):
        g = f // og
        for ci, p, q in itertools.product(range(cg), range(kh), range(kw)):
            r = i * strides[0] + p * rhs_dil[0] - pads[0][0]      # position in the dilated input
            s = j * strides[1] + q * rhs_dil[1] - pads[1][0]
            if 0 <= r < hd and 0 <= s < wdd and r % lhs_dil[0] == 0 and s % lhs_dil[1] == 0:
                out[b, f, i, j] += x[b, g * cg + ci, r // lhs_dil[0], s // lhs_dil[1]] * w[f, ci, p, q]
    return out


@given(data=st.data())
def test_conv_matches_naive_loop(data):
    groups = data.draw(st.sampled_from([1, 2]))
    x = data.draw(arrays("float64", (2, 2 * groups, data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5)))))
    w = data.draw(arrays("float64", (2 * groups, 2, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))))
    strides = tuple(data.draw(st.integers(1, 3)) for _ in range(2))
    pads = tuple(tuple(data.draw(st.integers(-1, 2)) for _ in range(2)) for _ in range(2))
    lhs_dil = tuple(data.draw(st.integers(1, 2)) for _ in range(2))
    rhs_dil = tuple(data.draw(st.integers(1, 2)) for _ in range(2))
    out = lax.conv_general_dilated(fnp.asarray(x), fnp.asarray(w), strides, pads, lhs_dil, rhs_dil,
                                   feature_group_count=groups)
    _close(out, _naive_conv(x, w, strides, pads, lhs_dil, rhs_dil, groups), atol=1e-9)


@pytest.mark.parametrize("force", [True, False])
def test_conv_scatter_and_im2col_paths_agree(monkeypatch, force):
    import flfun.backends.xp.linalg as impl
    monkeypatch.setattr(impl, "_scatter_is_cheaper", lambda *a: force)
    x, w = _rand((2, 3, 6, 5)), _rand((4, 3, 3, 2))
    for pads in [((0, 0), (0, 0)), ((2, 1), (1, 1)), ((-1, 2), (0, -1))]:
        for rd in [(1, 1), (2, 1)]:
            out = lax.conv_general_dilated(fnp.asarray(x), fnp.asarray(w), (1, 1), pads, rhs_dilation=rd)
            ref = conv_ref(x, w, (1, 1), pads, (1, 1), rd, None, 1, 1)
            _close(out, ref, atol=1e-9)
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME"), (x, w), order=1)


def test_conv_layouts_and_1d_3d():
    x, w = _rand((2, 5, 6, 3)), _rand((3, 2, 3, 4))              # NHWC, HWIO
    out = lax.conv_general_dilated(fnp.asarray(x), fnp.asarray(w), (1, 2), "SAME",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
    _close(out, conv_ref(x, w, (1, 2), "SAME", (1, 1), (1, 1), ("NHWC", "HWIO", "NHWC"), 1, 1))
    out2 = lax.conv_general_dilated(fnp.asarray(x), fnp.asarray(w), (1, 2), "SAME",
                                    dimension_numbers=("N...C", "...IO", "N...C"))
    _close(out2, out)
    x3, w3 = _rand((1, 2, 4, 3, 5)), _rand((3, 2, 2, 2, 3))
    out3 = lax.conv_general_dilated(fnp.asarray(x3), fnp.asarray(w3), (1, 1, 2), "VALID")
    expected = np.zeros((1, 3, 3, 2, 2))
    for i, j, k in itertools.product(range(3), range(2), range(2)):
        expected[:, :, i, j, k] = np.einsum("ncabd,ocabd->no", x3[:, :, i:i + 2, j:j + 2, 2 * k:2 * k + 3], w3)
    _close(out3, expected)


def test_conv_vmap_grad_and_w5_shapes():
    x, w = _rand((3, 2, 2, 6, 6)), _rand((3, 4, 2, 3, 3))
    for axes in [(0, 0), (0, None), (None, 0)]:
        args = [x if axes[0] is not None else x[0], w if axes[1] is not None else w[0]]
        check_vmap(lambda a, b: lax.conv_general_dilated(a, b, (2, 1), "SAME"), args, axes, atol=1e-9)
    x5 = fnp.ones((4, 1, 28, 28))
    h = lax.conv_general_dilated(x5, fnp.ones((32, 1, 3, 3)), (1, 1), "VALID")
    assert h.shape == (4, 32, 26, 26)
    g = fl.grad(lambda k: fnp.sum(lax.conv_general_dilated(h, k, (1, 1), "VALID")))(fnp.ones((8, 32, 3, 3)))
    _close(g, np.full((8, 32, 3, 3), 4 * 9 * 24 * 24), atol=1e-2)


# ------------------------------------------------------------------------------------------------------ impls
def test_impls_write_into_out():
    fnp.zeros(1)
    dot = primitives.get("dot_general").impls["numpy"]
    a, b = _rand((4, 3, 5)), _rand((5, 4, 2))
    out = np.empty((4, 3, 2))
    assert dot(a, b, dimension_numbers=(((2,), (0,)), ((0,), (1,))), out=out) is out
    _close(out, np.einsum("bik,kbj->bij", a, b))
    conv = primitives.get("conv_general_dilated").impls["numpy"]
    for c in (3, 4):     # thin GEMMs per example (C*K <= 32) and one wide GEMM
        _check_conv_out(conv, _rand((2, c, 5, 5)), _rand((4, c, 3, 3)))


def _check_conv_out(conv, x, w):
    dn = lax.conv_dimension_numbers((1,) * 4, (1,) * 4, None)
    params = {"window_strides": (1, 1), "padding": ((1, 1), (1, 1)), "lhs_dilation": (1, 1),
              "rhs_dilation": (1, 1), "dimension_numbers": dn, "feature_group_count": 1, "batch_group_count": 1}
    expected = conv(x, w, **params)
    _close(expected, conv_ref(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), None, 1, 1))
    out = np.empty(expected.shape)
    assert conv(x, w, out=out, **params) is out
    _close(out, expected)
    spec = lax.conv_dimension_numbers((1,) * 4, (1,) * 4, ("NCHW", "OIHW", "CNHW"))   # the layout the GEMM writes directly
    out = np.empty((4, 2, 5, 5))
    assert conv(x, w, out=out, **{**params, "dimension_numbers": spec}) is out
    _close(out, np.transpose(expected, (1, 0, 2, 3)))


@pytest.mark.parametrize("s1, s2, dn", [
    ((5, 3), (5, 4), (((), ()), ((0,), (0,)))),            # per-example outer products
    ((3, 5), (2, 4, 5), (((), ()), ((1,), (2,)))),
    ((2, 3, 5), (5, 4, 2), (((), ()), ((0, 2), (2, 0)))),
    ((3,), (4, 2), (((), ()), ((), ())))])
def test_dot_general_without_contraction_matches_matmul(s1, s2, dn):
    fnp.zeros(1)
    from flfun.backends.xp.linalg import dot_operands
    dot = primitives.get("dot_general").impls["numpy"]
    a, b = _rand(s1), _rand(s2)
    l, r, shape = dot_operands(np, a, b, dn)
    expected = np.reshape(np.matmul(l, r), shape)
    _close(dot(a, b, dimension_numbers=dn), expected)
    out = np.empty(shape)
    assert dot(a, b, dimension_numbers=dn, out=out) is out
    _close(out, expected)
    check_vmap(lambda x, y: lax.dot_general(x, y, dn), [_rand((2,) + s1), _rand((2,) + s2)], (0, 0))


def test_dot_general_int8_with_preferred_int32():
    a = np.full((2, 64), 100, np.int8)
    out = lax.dot_general(fnp.asarray(a), fnp.asarray(a.T.copy()), (((1,), (0,)), ((), ())),
                          preferred_element_type="int32")
    assert out.dtype == np.int32 and np.asarray(out).tolist() == [[640000] * 2] * 2



def test_matmul_fast_path_uses_the_registered_impl():
    fnp.zeros(1)
    old = primitives.get("dot_general").impls["numpy"]
    a = fnp.ones((2, 3))
    with primitives.impl_override("dot_general", "numpy", lambda *args, **kw: old(*args, **kw) * 0):
        assert np.asarray(a @ fnp.ones((3, 2))).sum() == 0
    assert np.asarray(a @ fnp.ones((3, 2))).sum() == 12


@pytest.mark.parametrize("pads", [((0, 0), (0, 0)), ((1, 2), (0, 1))])
def test_channels_last_conv_paths(pads):
    x, w = np.ascontiguousarray(_rand((2, 3, 6, 5)).transpose(0, 2, 3, 1)), _rand((3, 2, 3, 4))   # NHWC, HWIO
    dn = ("NHWC", "HWIO", "NHWC")
    out = lax.conv_general_dilated(fnp.asarray(x), fnp.asarray(w), (1, 2), pads, dimension_numbers=dn)
    _close(out, conv_ref(x, w, (1, 2), pads, (1, 1), (1, 1), dn, 1, 1))
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), pads, dimension_numbers=dn), (x, w), order=1)


@pytest.mark.parametrize("force", [True, False])
def test_channels_last_scatter_and_kernel_gradient_layouts(monkeypatch, force):
    import flfun.backends.xp.linalg as impl
    monkeypatch.setattr(impl, "_scatter_is_cheaper", lambda *a: force)
    x, w = np.ascontiguousarray(_rand((3, 4, 6, 5)).transpose(0, 2, 3, 1)), _rand((3, 2, 4, 2))   # NHWC, HWIO
    dn = ("NHWC", "HWIO", "NHWC")
    for pads in [((0, 0), (0, 0)), ((2, 1), (1, 1)), ((-1, 2), (0, -1))]:
        for rd in [(1, 1), (2, 1)]:
            out = lax.conv_general_dilated(fnp.asarray(x), fnp.asarray(w), (1, 1), pads, rhs_dilation=rd,
                                           dimension_numbers=dn)
            _close(out, conv_ref(x, w, (1, 1), pads, (1, 1), rd, dn, 1, 1), atol=1e-9)
    # the kernel gradient contracts over (batch, space) with the channels as the unit-stride "batch" role
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), ((1, 0), (2, 1)), dimension_numbers=dn),
                (x, w), order=1)
    conv = primitives.get("conv_general_dilated").impls["numpy"]
    ct = _rand((3, 4, 4, 2))                                           # NHWC cotangent of a VALID conv
    spec = lax.conv_dimension_numbers((1,) * 4, (1,) * 4, ("CHWN", "IHWO", "HWNC"))     # the kernel gradient's dimension numbers
    params = {"window_strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1),
              "rhs_dilation": (1, 1), "dimension_numbers": spec, "feature_group_count": 1, "batch_group_count": 1}
    out = np.empty((3, 2, 4, 2))
    assert conv(x, ct, out=out, **params) is out
    _close(out, [[np.einsum("nhwc,nhwo->co", x[:, i:i + 4, j:j + 4], ct) for j in range(2)] for i in range(3)])


# -------------------------------------------------------------------------------------------- decompositions
def test_decomposition_errors():
    from flfun.core import ShapedArray
    from flfun.primitives import decomp
    from flfun.primitives.rules import UndefinedPrimal
    kinds = "float32, float64, complex64 or complex128 matrices, got "
    with pytest.raises(TypeError, match=rf"^cholesky: expected a stack of square {kinds}f32\[3,4\]$"):
        decomp.cholesky(fnp.ones((3, 4)))
    with pytest.raises(TypeError, match=rf"^svd: expected a stack of {kinds}i32\[3,4\]$"):
        decomp.svd(fnp.ones((3, 4), dtype="int32"))
    with pytest.raises(TypeError, match=rf"^eigh: expected a stack of square {kinds}f32\[3\]$"):
        decomp.eigh(fnp.ones(3))
    with pytest.raises(TypeError, match=r"^solve: expected matrices a \(\.\.\., n, n\) and b \(\.\.\., n, k\) of one "
                                        r"dtype and batch shape, got f32\[2,3,3\] and f32\[3,1\]$"):
        decomp.solve(fnp.ones((2, 3, 3)), fnp.ones((3, 1)))
    with pytest.raises(NotImplementedError, match=r"qr: derivatives need at least as many rows as columns, got "
                                                  r"f64\[2,3\]"):
        fl.jvp(decomp.qr, (fnp.ones((2, 3), dtype="float64"),), (fnp.ones((2, 3), dtype="float64"),))
    with pytest.raises(TypeError, match="solve: the matrix a is not a linear input"):
        decomp.solve_p.transpose(fnp.ones((2, 1)), UndefinedPrimal(ShapedArray((2, 2), np.float32)), fnp.ones((2, 1)))
    with pytest.raises(ValueError, match=r"cholesky: x must be a \(stack of\) square matrices, got f32\[2,3\]"):
        LA.cholesky(fnp.ones((2, 3)))
    with pytest.raises(NotImplementedError, match=r"^svd: derivatives of full_matrices=True are not implemented for "
                                                  r"f32\[2,3\] \(the extra columns of u / rows of vh are not "
                                                  r"unique\); use full_matrices=False$"):
        fl.grad(lambda a: LA.svd(a).U.sum())(fnp.ones((2, 3)))
    with pytest.raises(NotImplementedError, match=r"^qr: derivatives of full_matrices=True are not implemented for "
                                                  r"f64\[2,3,2\] \(the extra columns of q are not unique\); use "
                                                  r"full_matrices=False \(mode='reduced' in fnp.linalg.qr\)$"):
        fl.jvp(lambda a: LA.qr(a, mode="complete").R, (_rand((2, 3, 2)),), (_rand((2, 3, 2)),))
    with pytest.raises(ValueError, match="qr: mode must be 'reduced' or 'complete', got 'r'"):
        LA.qr(fnp.ones((3, 2)), mode="r")
    with pytest.raises(ValueError, match=r"solve: x2 must be \(M,\) or \(\.\.\., M, K\) with M = 2, got f32\[3\]"):
        LA.solve(fnp.eye(2), fnp.ones(3))


def test_decomposition_extras():
    """Orders 2 / -2 / 'nuc', negative matrix powers, integer inputs, jit and second derivatives."""
    x = _rand((2, 3, 4))
    for ord in (2, -2, "nuc"):
        _close(LA.matrix_norm(fnp.asarray(x), ord=ord), np.linalg.norm(x, ord=ord, axis=(-2, -1)))
    sq = _rand((3, 3)) + 10 * np.eye(3)
    _close(LA.matrix_power(fnp.asarray(sq), -3), np.linalg.matrix_power(sq, -3), atol=1e-12)
    assert LA.inv(fnp.asarray([[2, 0], [0, 4]])).tolist() == [[0.5, 0.0], [0.0, 0.25]]
    _close(fl.jit(LA.pinv)(fnp.asarray(x)), np.linalg.pinv(x))
    spd = sq @ sq.T
    check_grads(lambda a: LA.slogdet(a).logabsdet, (spd,), order=2)
    check_grads(lambda a: LA.cholesky(a + fnp.matrix_transpose(a)), (spd,), order=2, atol=1e-3)
    check_grads(lambda a: LA.svdvals(a), (x[0],), order=2, atol=1e-3)


def test_full_svd_and_complete_qr():
    """The standard's defaults (full U / Vh, complete Q) on tall, wide and batched matrices, eager and under jit;
    on square matrices full_matrices=True is the reduced form and differentiates like it."""
    for shape in [(4, 2), (2, 5), (3, 4, 2), (2, 1, 3)]:
        x = _rand(shape)
        for fn in (LA.svd, fl.jit(LA.svd)):
            u, s, vh = fn(fnp.asarray(x))
            assert (u.shape, vh.shape) == (shape[:-1] + shape[-2:-1], shape[:-2] + shape[-1:] * 2)
            _close(s, np.linalg.svd(x, compute_uv=False))
            _close(fnp.matrix_transpose(u) @ u, np.broadcast_to(np.eye(shape[-2]), u.shape), atol=1e-12)
            _close(vh @ fnp.matrix_transpose(vh), np.broadcast_to(np.eye(shape[-1]), vh.shape), atol=1e-12)
            k = s.shape[-1]
            _close((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], x, atol=1e-12)
        q, r = fl.jit(lambda a: LA.qr(a, mode="complete"))(fnp.asarray(x))
        assert (q.shape, r.shape) == (shape[:-1] + shape[-2:-1], shape)
        _close(q @ r, x, atol=1e-12)
        _close(fnp.tril(r, -1), np.zeros(shape))
    sq = fnp.asarray(_rand((3, 3)) + 10 * np.eye(3))
    for op in (lax.svd, lax.qr):
        full, reduced = (fl.grad(lambda a: sum(o.sum() ** 2 for o in op(a, full_matrices=f)))(sq)
                         for f in (True, False))
        _close(full, reduced, atol=0)
        assert np.abs(np.asarray(full)).max() > 0


def test_decomposition_failures_name_the_operation():
    with pytest.raises(np.linalg.LinAlgError, match=r"solve: Singular matrix \(input f32\[2,2\]"):
        fnp.linalg.solve(fnp.zeros((2, 2)), fnp.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match=r"cholesky: .*positive definite \(input f32\[2,2\]\)"):
        fnp.linalg.cholesky(-fnp.eye(2))


def test_im2col_columns_reuse_a_buffer_per_thread_and_results_stay_independent(monkeypatch):
    import threading
    import flfun.backends.xp.linalg as impl
    fnp.zeros(1)
    monkeypatch.setattr(impl, "_scatter_is_cheaper", lambda *a: False)
    monkeypatch.setattr(impl, "_SCRATCH", threading.local())        # no buffer left by an earlier test
    conv = primitives.get("conv_general_dilated").impls["numpy"]
    params = {"window_strides": (1, 1), "padding": ((1, 1), (1, 1)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1),
              "dimension_numbers": lax.conv_dimension_numbers((1,) * 4, (1,) * 4, ("NHWC", "HWIO", "NHWC")),
              "feature_group_count": 1, "batch_group_count": 1}
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 24, 24, 16), dtype=np.float32) for _ in range(4)]
    w = rng.standard_normal((3, 3, 16, 16), dtype=np.float32)
    first = conv(xs[0], w, **params)
    kept = first.copy()
    conv(xs[1], w, **params)
    buf = impl._SCRATCH.buf                                          # this call's columns went there
    assert buf.nbytes == xs[1].size * 9 * 4 and not np.shares_memory(first, buf)
    np.testing.assert_array_equal(first, kept)              # the next call's columns left the first result alone
    monkeypatch.setattr(impl, "SCRATCH_LIMIT", 0)           # fresh column arrays: the same numbers
    np.testing.assert_array_equal(conv(xs[0], w, **params), kept)
    monkeypatch.setattr(impl, "SCRATCH_LIMIT", 1 << 26)
    want, wrong, start = [conv(x, w, **params) for x in xs], [0] * len(xs), threading.Barrier(len(xs))

    def work(i):        # with one buffer shared by all threads, 4-7 of the 30 results per thread came out wrong
        start.wait()
        for _ in range(30):
            wrong[i] += not np.array_equal(conv(xs[i], w, **params), want[i])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    [t.start() for t in threads], [t.join() for t in threads]
    assert wrong == [0] * len(xs)
