"""Tests for primitive code the rest of the suite never ran: user-input errors of the lax wrappers, jvp rules
reached only with a zero tangent, and transpose rules reached only through linearize (jit) rather than the tape."""
import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.testing import check_grads

x23 = fnp.ones((2, 3))
img, kernel = fnp.ones((1, 2, 5, 5)), fnp.ones((4, 2, 3, 3))
bad_dn = lax.ConvDimensionNumbers((0, 1, 2, 9), (0, 1, 2, 3), (0, 1, 2, 3))


@pytest.mark.parametrize("call, error, message", [
    (lambda: lax.integer_pow(x23, 2.5), TypeError,
     r"^integer_pow: exponent must be a Python int \(non-negative for integers\), got 2.5 for f32\[2,3\]$"),
    (lambda: lax.integer_pow(fnp.asarray([1, 2]), -1), TypeError, r"^integer_pow: .* got -1 for i64\[2\]$"),
    (lambda: lax.select_n(fnp.asarray(True)), TypeError, r"^select_n: needs at least one case$"),
    (lambda: lax.select_n(fnp.asarray(1.0), x23, x23), TypeError,
     r"^select_n: the selector must be bool or integer, got f32\[\]$"),
    (lambda: lax.select_n(fnp.asarray(True), x23, x23, x23), TypeError,
     r"^select_n: a boolean selector picks between at most 2 cases, got 3$"),
    (lambda: lax.broadcast_in_dim(fnp.asarray(1.0), (2, -1), ()), TypeError,
     r"^broadcast_in_dim: negative size in target shape \(2, -1\)$"),
    (lambda: lax.concatenate([], 0), TypeError, r"^concatenate: needs at least one operand$"),
    (lambda: lax.sort([]), TypeError, r"^sort: needs at least one operand$"),
    (lambda: lax.gather(x23, fnp.asarray([[0]]), axes=(0,), batch_dims=3), TypeError,
     r"^gather: batch_dims=3 needs operand and indices of rank > 3 \(indices carry a last position dim\), got "
     r"f32\[2,3\] and i64\[1,1\]$"),
    (lambda: lax.conv_general_dilated(img, kernel, (1, 1), "VALID", feature_group_count=0), TypeError,
     r"^conv_general_dilated: feature_group_count \(0\) and batch_group_count \(1\) must be positive and at most "
     r"one of them above 1, got f32\[1,2,5,5\] and f32\[4,2,3,3\]$"),
    (lambda: lax.conv_general_dilated(img, kernel, (1, 1), "VALID", feature_group_count=2, batch_group_count=2),
     TypeError, r"^conv_general_dilated: feature_group_count \(2\) and batch_group_count \(2\) must be"),
    # a ConvDimensionNumbers is not checked by the layout parser; "SAME" used to index the shapes with it
    (lambda: lax.conv_general_dilated(img, kernel, (1, 1), "VALID", dimension_numbers=bad_dn), ValueError,
     r"^conv_general_dilated: dimension_numbers lhs_spec \(0, 1, 2, 9\) is not a permutation of the 4 axes$"),
    (lambda: lax.conv_general_dilated(img, kernel, (1, 1), "SAME", dimension_numbers=bad_dn), ValueError,
     r"^conv_general_dilated: dimension_numbers lhs_spec \(0, 1, 2, 9\) is not a permutation of the 4 axes$"),
    # "SAME" padding is computed before the checks: a zero stride divided by zero, a short rhs_dilation was
    # reported as a short padding
    (lambda: lax.conv_general_dilated(img, kernel, (0, 1), "SAME"), TypeError,
     r"^conv_general_dilated: window_strides \(0, 1\) must be positive, got f32\[1,2,5,5\] and f32\[4,2,3,3\]$"),
    (lambda: lax.conv_general_dilated(img, kernel, (1, 1), "SAME", rhs_dilation=(1,)), TypeError,
     r"^conv_general_dilated: rhs_dilation \(1,\) needs one entry per spatial dimension \(2\) of f32\[1,2,5,5\] and "
     r"f32\[4,2,3,3\]$"),
    (lambda: lax.gather(fnp.zeros((2, 0)), fnp.asarray([[0]]), axes=(1,)), ValueError,
     r"^gather: mode='clip' has no position to clamp to in the empty axis 1 of f32\[2,0\]$"),
    (lambda: fl.jit(lambda x: lax.gather(x, fnp.asarray([[0]]), axes=(1,))).lower(fnp.zeros((2, 0))), ValueError,
     r"^gather: mode='clip' has no position to clamp to"),      # at trace time, not when the program runs
])
def test_user_input_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _spd(n=3, k=2):
    rng = np.random.RandomState(0)
    a = rng.randn(n, n)
    return a @ a.T + n * np.eye(n), rng.randn(n, k)


@pytest.mark.parametrize("wrap", [lambda f: f, fl.jit])
def test_solve_derivatives_wrt_b_only(wrap):
    # the matrix tangent is a symbolic zero: jvp with a constant matrix, and grad through linearize (jit)
    a, b = _spd()
    A = fnp.asarray(a)
    loss = wrap(fl.grad(lambda b: fnp.sum(lax.solve(A, b) ** 2)))
    np.testing.assert_allclose(np.asarray(loss(fnp.asarray(b))), 2 * np.linalg.solve(a.T, np.linalg.solve(a, b)),
                               rtol=1e-10)
    t = np.ones_like(b)
    out, tangent = fl.jvp(wrap(lambda b: lax.solve(A, b)), (fnp.asarray(b),), (fnp.asarray(t),))
    np.testing.assert_allclose(np.asarray(tangent), np.linalg.solve(a, t), rtol=1e-10)
    check_grads(wrap(lambda b: lax.solve(A, b)), (b,))


def test_dot_general_grad_with_preferred_element_type():
    # the cotangent arrives as float64 and is cast back to the operands' float32
    x, y = np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones((3, 4), np.float32)
    dims = (((1,), (0,)), ((), ()))
    f = lambda a, b: lax.dot_general(a, b, dims, preferred_element_type="float64")  # noqa: E731
    for wrap in (lambda f: f, fl.jit):
        out, f_vjp = fl.vjp(wrap(f), fnp.asarray(x), fnp.asarray(y))
        ct = np.arange(8.0).reshape(2, 4)
        gx, gy = f_vjp(fnp.asarray(ct))
        assert out.dtype == np.float64 and gx.dtype == gy.dtype == np.float32
        np.testing.assert_allclose(np.asarray(gx), ct @ y.T)
        np.testing.assert_allclose(np.asarray(gy), x.T @ ct)


idx = fnp.asarray(1)
pos = fnp.asarray([[2], [0], [2]])
unique_pos = fnp.asarray([[2], [0], [1]])      # derivatives of scatter "mul" assume unique indices (documented)


# functions of two float arrays (x: (3, 4), y: (3, 4)) that use a primitive whose transpose needs a known operand
@pytest.mark.parametrize("f", [
    lambda x, y: x * y,
    lambda x, y: x / (y * y + 1.0),
    lambda x, y: lax.select_n(x > y, x * 2.0, y),
    lambda x, y: x @ y.T,
    lambda x, y: lax.conv_general_dilated(x[None, None], y[None, None, :2, :2], (1, 1), "SAME"),
    lambda x, y: lax.dynamic_slice(x * y, (idx, idx), (2, 2)),
    lambda x, y: lax.dynamic_update_slice(x, y[:2, :2] * y[:2, :2], (idx, idx)),
    lambda x, y: lax.gather(x * y, pos, axes=(0,)),
    lambda x, y: lax.scatter(x, unique_pos, y, axes=(0,), op="mul"),
    lambda x, y: lax.scatter(x, pos, y, axes=(0,), op="max"),
    lambda x, y: lax.sort((x, y * y, x * y), dimension=0, num_keys=1)[1:],
], ids=["mul", "div", "select_n", "dot_general", "conv", "dynamic_slice", "dynamic_update_slice", "gather",
        "scatter_mul", "scatter_max", "sort"])
def test_grad_wrt_both_operands_through_linearize(f):
    rng = np.random.RandomState(1)
    x, y = rng.randn(3, 4), rng.randn(3, 4) + 0.5
    check_grads(fl.jit(f), (x, y), order=2)
    g = fl.jit(fl.grad(lambda x, y: sum(fnp.sum(o) for o in fl.tree_leaves(f(x, y))), argnums=(0, 1)))
    g_tape = fl.grad(lambda x, y: sum(fnp.sum(o) for o in fl.tree_leaves(f(x, y))), argnums=(0, 1))
    for a, b in zip(g(fnp.asarray(x), fnp.asarray(y)), g_tape(fnp.asarray(x), fnp.asarray(y))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


def test_gather_from_an_empty_axis():
    """Every position along an empty axis is out of bounds: mode='fill' reads the fill value (numpy's indexing
    raised IndexError), eagerly, under jit and vmap, with batch dims; with no indices even 'clip' is fine."""
    empty = fnp.zeros((0, 2))

    def fill(i):
        return lax.gather(empty, i, axes=(0,), mode="fill", fill_value=1.0)
    for f in (fill, fl.jit(fill)):
        out = f(fnp.asarray([[0], [5]]))
        assert out.dtype == fnp.float32 and out.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert fl.vmap(fill)(fnp.zeros((3, 1, 1), dtype="int32")).tolist() == [[[1.0, 1.0]]] * 3
    batched = lax.gather(fnp.zeros((2, 0, 3)), fnp.zeros((2, 1, 1), dtype="int32"), axes=(1,), batch_dims=1,
                         mode="fill")
    assert batched.shape == (2, 1, 3) and np.isnan(np.asarray(batched)).all()
    assert lax.gather(empty, fnp.zeros((0, 1), dtype="int32"), axes=(0,)).shape == (0, 2)
    grad = fl.grad(lambda x: lax.gather(x, fnp.asarray([[0]]), axes=(0,), mode="fill").sum())(empty)
    assert grad.shape == (0, 2)
