"""Tests for backend impl and fusion code the rest of the suite never ran: impl edge cases (empty arrays, many
cases, selectors out of range, empty bool reductions) under eager and jit, the fusion pass's refusals, and the
generated C of templates no random program reached (compiled with the host C++ compiler)."""
import numpy as np
import pytest
from test_fusion import _check_groups_in_c, _trace, needs_cxx

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.backends.xp import linalg as xp_linalg
from flfun.backends.xp import reduce as xp_reduce
from flfun.core import ShapedArray
from flfun.backends.cuda.lowering import kernel_source
from flfun.compiler.executor import Executable
from flfun.compiler.fusion import KERNEL_BUILDERS, FusedPrimitive, fuse_elementwise, fusible, register_kernel_builder
from flfun.primitives import reduce as R
from flfun.primitives import shape as S
from flfun.distributed.pmap import pmap

F32 = np.float32


def _eager_and_jit(f, *args):
    return [np.asarray(f(*args)), np.asarray(fl.jit(f)(*args))]


def test_erf_of_an_empty_array():
    """np.vectorize needs an output type for empty inputs ("cannot call vectorize on size 0 inputs")."""
    for got in _eager_and_jit(lax.erf, np.zeros((0, 3), F32)):
        assert got.shape == (0, 3) and got.dtype == F32


def test_integer_div_truncates_toward_zero():
    rng = np.random.default_rng(0)
    for dt in (np.int8, np.int32, np.uint8):
        info = np.iinfo(dt)
        x = rng.integers(max(info.min, -100), 100, 50).astype(dt)
        y = rng.choice([v for v in range(max(info.min, -7), 8) if v], 50).astype(dt)
        for got in _eager_and_jit(lax.div, x, y):
            assert got.dtype == dt
            np.testing.assert_array_equal(got, np.trunc(x.astype(np.float64) / y).astype(dt))


def test_select_n_with_one_case_broadcasts_against_the_selector():
    for got in _eager_and_jit(lax.select_n, np.array([[True], [False]]), np.array([1.0, 2.0], F32)):
        np.testing.assert_array_equal(got, [[1.0, 2.0], [1.0, 2.0]])
        assert got.dtype == F32


def test_select_n_takes_more_cases_than_numpy_choose():
    """np.choose takes at most 64 choices ("Need at least 0 and at most 64 array objects")."""
    rng = np.random.default_rng(1)
    cases = [rng.standard_normal(5).astype(F32) for _ in range(70)]
    which = np.array([0, 69, 64, 3, 65], np.int32)
    want = np.stack(cases)[which, np.arange(5)]
    for got in _eager_and_jit(lambda w, *c: lax.select_n(w, *c), which, *cases):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == F32


def test_select_n_with_a_uint64_selector():
    """np.choose cannot cast uint64 to its index type ("Cannot cast scalar from dtype('uint64')")."""
    cases = [np.full(3, k, F32) for k in range(3)]
    for which in (np.uint64(2), np.array([2, 0, 1], np.uint64)):
        for got in _eager_and_jit(lambda w, *c: lax.select_n(w, *c), which, *cases):
            np.testing.assert_array_equal(got, np.choose(which.astype(np.int64), cases))


@pytest.mark.parametrize("which, seen", [([0, 3], r"\[0, 3\]"), ([-1, 2], r"\[-1, 2\]")])
def test_select_n_selector_out_of_range_is_a_clear_error(which, seen):
    """jax leaves an out-of-range selector undefined; flfun's impls say so instead of numpy's "invalid entry"."""
    cases = [np.full(2, k, F32) for k in range(3)]
    f = lambda w, *c: lax.select_n(w, *c)
    message = rf"^select_n: the selector must lie in \[0, 3\) to pick one of 3 cases, got values in {seen}$"
    for g in (f, fl.jit(f)):
        with pytest.raises(ValueError, match=message):
            g(np.array(which, np.int32), *cases)


def test_bool_max_and_min_over_an_empty_axis_give_the_identity():
    """As jax.lax (reduce_max of bool over nothing is False, reduce_min True); jnp and fnp raise instead."""
    x = np.zeros((0, 3), bool)
    for got in _eager_and_jit(lambda x: lax.reduce_max(x, (0,)), x):
        np.testing.assert_array_equal(got, [False] * 3)
        assert got.dtype == bool
    for got in _eager_and_jit(lambda x: lax.reduce_min(x, (0,)), x):
        np.testing.assert_array_equal(got, [True] * 3)
    for got in _eager_and_jit(lambda x: lax.not_(lax.reduce_max(x, (0,))), x):    # jit: written into out=
        np.testing.assert_array_equal(got, [True] * 3)
    y = np.zeros((0, 3), F32)   # an empty fusion epilogue is not fused: same identity through jit
    for got in _eager_and_jit(lambda x, y: lax.reduce_min(lax.gt(x, y), (0,)), y, y):
        np.testing.assert_array_equal(got, [True] * 3)
    with pytest.raises(ValueError, match=r"^max: zero-size reduction over axis 0 of bool\[0,3\]"):
        fl.jit(lambda x: fnp.max(x, axis=0))(x)


def test_unknown_backend_name():
    with pytest.raises(ValueError, match=r"^unknown backend 'tpu'; choose 'numpy' or 'cupy'$"):
        fl.devices("tpu")


def test_a_jitted_collective_reused_outside_its_pmap():
    """The trace cached inside pmap runs its psum impl, which finds no running pmap."""
    g = fl.jit(lambda x: lax.psum(x, "i"))
    np.testing.assert_array_equal(pmap(g, axis_name="i")(np.ones((1, 3), F32)), np.ones((1, 3)))
    with pytest.raises(NameError, match=r"^psum: axis 'i' is not mapped by a running pmap \(collectives run "
                                        r"inside pmap or vmap\(\.\.\., axis_name=\)\)$"):
        g(np.ones(3, F32))


class _NotNumpy:
    """numpy under another name: the xp impls take the paths they take for cupy."""
    __name__ = "cupy_like"

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.mark.parametrize("name, ufunc", [("cummax", np.maximum), ("cummin", np.minimum)])
def test_the_scans_by_doubling_steps_that_cupy_uses(name, ufunc):
    impl = xp_reduce.impls(_NotNumpy())[name]
    x = np.random.default_rng(3).standard_normal((5, 7)).astype(F32)
    for axis, reverse in [(0, False), (1, False), (0, True), (1, True)]:
        want = np.flip(ufunc.accumulate(np.flip(x, axis), axis), axis) if reverse else ufunc.accumulate(x, axis)
        np.testing.assert_array_equal(impl(x, axis=axis, reverse=reverse), want)
        out = np.empty_like(x)
        assert impl(x, axis=axis, reverse=reverse, out=out) is out
        np.testing.assert_array_equal(out, want)


def test_the_outer_product_dot_general_without_einsum_out():
    dot_general = xp_linalg.impls(_NotNumpy())["dot_general"]
    a, b, out = np.ones((2, 3), F32), np.arange(8, dtype=F32).reshape(2, 4), np.empty((2, 3, 4), F32)
    assert dot_general(a, b, dimension_numbers=(((), ()), ((0,), (0,))), out=out) is out
    np.testing.assert_array_equal(out, np.einsum("ab,ac->abc", a, b))


# --------------------------------------------------------------------------------------------------- fusion
def _fused_equals_unfused(f, args):
    program, consts = _trace(f, [ShapedArray(a.shape, a.dtype) for a in args])
    fused = fuse_elementwise(program)
    for a, b in zip(Executable(fused, consts, None, None)(*args), Executable(program, consts, None, None)(*args)):
        np.testing.assert_array_equal(a, b)
    return program, fused


def test_equations_fusion_does_not_take():
    x16 = np.linspace(-2, 2, 12, dtype=np.float16).reshape(3, 4)
    x = x16.astype(F32)
    for f, arg, left in [(lambda x: [lax.exp(lax.sin(x))], x16, "exp"),                # no C type for float16
                         (lambda x: [lax.integer_pow(lax.sin(x), 20)], x, "integer_pow"),   # exponent above 16
                         (lambda x: lax.sort([lax.neg(lax.sin(x))], 1), x, "sort")]:      # multiple results
        program, fused = _fused_equals_unfused(f, [arg])
        e, = [e for e in program.eqns if e.prim.name == left]
        assert not fusible(e) and e in fused.eqns


def test_kernel_source_refuses_a_group_it_cannot_compile():
    program, _ = _trace(lambda x: [lax.exp(lax.sin(x))], [ShapedArray((3,), np.float16)])
    fused = fuse_elementwise(program, can_fuse=lambda e: True)
    with pytest.raises(ValueError, match=r"^kernel_source: sin cannot be fused$"):
        kernel_source(fused.eqns[0].prim.group)


def test_a_registered_kernel_builder_gives_fused_equations_their_impl():
    built = []
    register_kernel_builder("fake", lambda group: built.append(group) or "kernel")
    try:
        program, _ = _trace(lambda x, y: [lax.exp(lax.add(x, y))], [ShapedArray((3, 4), F32)] * 2)
        prim = fuse_elementwise(program).eqns[0].prim
    finally:
        del KERNEL_BUILDERS["fake"]
    assert prim.impls["fake"] == "kernel" and built == [prim.group]
    assert repr(prim.group) == f"FusionGroup({prim.group.name}, 2 in, 1 out, shape (3, 4))"


@needs_cxx
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_generated_c_for_logistic_and_conversions_to_bool(dtype):
    def f(x, k):
        xs = lax.mul(x, S.full((), 40.0, dtype))                       # far into both tails
        to_bool = lax.convert_element_type(lax.sub(x, lax.round(x)), np.bool_)    # exact zeros, -0.0 and nan
        return lax.logistic(xs), lax.logistic(lax.neg(x)), lax.select(to_bool, x, xs), \
            lax.and_(lax.convert_element_type(lax.add(k, k), np.bool_), lax.convert_element_type(x, np.bool_))
    x = np.array([[-3.0, -0.5, -0.0, 0.0], [0.25, 2.0, np.nan, 1.0], [-20.0, 20.0, 1e-3, -1e-3]], dtype)
    k = np.array([[0, 1, -1, 2]] * 3, np.int32)
    program, consts = _trace(f, [ShapedArray(x.shape, x.dtype), ShapedArray(k.shape, k.dtype)])
    _check_groups_in_c(program, consts, [x, k])


@needs_cxx
@pytest.mark.parametrize("sel_dtype", [np.int32, np.uint8, np.int64])
def test_generated_c_for_select_n_with_an_integer_selector(sel_dtype):
    def f(x, y, w):
        w = lax.rem(w, S.full((), 4, sel_dtype))
        return lax.select_n(w, lax.sin(x), lax.neg(y), lax.mul(x, y), lax.sub(x, y)), \
            R.reduce_sum(lax.select_n(w, x, lax.neg(x), y, x), (1,))
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 3, 4)).astype(F32)
    w = np.arange(12).reshape(3, 4).astype(sel_dtype)
    program, consts = _trace(f, [ShapedArray((3, 4), F32)] * 2 + [ShapedArray((3, 4), sel_dtype)])
    assert sum(isinstance(e.prim, FusedPrimitive) for e in fuse_elementwise(program).eqns) == 2
    _check_groups_in_c(program, consts, [x, y, w])


@pytest.mark.parametrize("nl, nr", [(14, 15), (27, 27)])
def test_outer_products_with_many_dims(nl, nr):
    """Past 26 dims the einsum spec needs upper-case letters; past 52 the general path takes over."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1,) * (nl - 1) + (2,)).astype(np.float32)
    b = rng.standard_normal((1,) * (nr - 1) + (3,)).astype(np.float32)
    want = np.tensordot(a, b, axes=0)
    outer = lambda x, y: fnp.tensordot(x, y, axes=0)        # noqa: E731
    for f in (outer, fl.jit(outer)):
        np.testing.assert_allclose(np.asarray(f(fnp.asarray(a), fnp.asarray(b))), want, rtol=1e-6)
