"""The numpy functions flfun.numpy gained to cover jax.numpy (tests/test_api_coverage.py), in the op-table style:
one record per function (or way of calling it) drives values vs numpy in float64 (hypothesis over shapes, axes and
parameters), jit vs eager, jvp vs finite differences and the vjp/jvp identity for the differentiable ones, and
vmap vs a Python loop; then dtype rules, the ``size=`` forms under jit, and the errors."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun.testing import arrays, broadcastable_shapes, check_jvp, check_vjp, check_vmap, shapes


@dataclass
class Case:
    """``fn(*args, **kw)`` against ``ref(*args, **kw)`` (numpy), ``draw`` a strategy of ``(args, kw)``."""
    name: str
    fn: Callable
    ref: Callable
    draw: st.SearchStrategy
    diff: bool = True
    vmap: bool = True
    tol: float = 1e-9

    def __repr__(self):
        return self.name


def F(shape=shapes(), low=-3.0, high=3.0, unique=False):
    return arrays("float64", shape, low=low, high=high, unique=unique)


def I(shape=shapes(), low=-20, high=20):
    return arrays("int64", shape, low=low, high=high)


def R(shape=shapes(min_dims=1)):
    """Standard-normal arrays (generic values: no ties, no exact correlations) of a drawn shape."""
    return st.tuples(st.integers(0, 2 ** 32 - 1), shape).map(lambda s: np.random.default_rng(s[0]).normal(size=s[1]))


def args(*strats, **kw):
    return st.tuples(st.tuples(*strats), st.fixed_dictionaries(kw))


def with_axis(min_dims=1, low=-3.0, high=3.0, nans=False, unique=False, **kw):
    """One array (generic normal values with ``unique``), an ``axis`` and the params ``kw`` draws."""
    @st.composite
    def draw(draw):
        shape = shapes(min_dims=min_dims, min_side=2 if nans else 1)
        x = draw(R(shape) if unique else F(shape, low, high))
        x = _with_nans(x) if nans else x
        extra = {k: draw(v) for k, v in kw.items()}
        return (x,), {"axis": draw(st.integers(-x.ndim, x.ndim - 1)), **extra}
    return draw()


def binary(low=-3.0, high=3.0, ints=False):
    @st.composite
    def draw(draw):
        s1, s2, _ = draw(broadcastable_shapes(2))
        mk = (lambda s: I(s, int(low), int(high))) if ints else (lambda s: F(s, low, high))
        return (draw(mk(s1)), draw(mk(s2))), {}
    return draw()


def _with_nans(x):
    x = np.array(x)
    x.flat[::3] = np.nan
    return x


def away_from(x, points, gap=0.02):
    return np.all(np.abs(np.subtract.outer(np.asarray(x), np.asarray(points))) > gap)


VEC = F(st.integers(1, 6).map(lambda n: (n,)))
VEC2 = F(st.integers(2, 6).map(lambda n: (n,))).filter(lambda p: abs(p[0]) > 0.1)   # numpy trims leading 0s
LEAD = VEC.filter(lambda p: abs(p[0]) > 0.1)
QS = st.lists(st.floats(0, 1), min_size=1, max_size=3)
METHODS = st.sampled_from(["linear", "lower", "higher", "nearest", "midpoint"])
SORTED = F((6,), unique=True).map(np.sort).filter(lambda x: np.all(np.diff(x) > 0.1))
NANS = F(shapes(min_dims=1, min_side=2)).map(lambda x: _with_nans(x))
PAD_MODES = st.sampled_from(["constant", "edge", "wrap", "reflect", "symmetric", "linear_ramp", "maximum",
                             "minimum", "mean", "median"])


CASES = [
    # ------------------------------------------------------------------------------------------- elementwise
    Case("cbrt", fnp.cbrt, np.cbrt, args(F(low=0.2, high=3.0))),
    Case("deg2rad", fnp.deg2rad, np.deg2rad, args(F())),
    Case("rad2deg", fnp.rad2deg, np.rad2deg, args(F())),
    Case("fabs", fnp.fabs, np.fabs, args(F(low=0.1))),
    Case("i0", fnp.i0, np.i0, args(F(low=-40, high=40)), tol=1e-12),
    Case("sinc", fnp.sinc, np.sinc, args(F())),
    Case("logaddexp2", fnp.logaddexp2, np.logaddexp2, binary()),
    Case("fmax", fnp.fmax, np.fmax, binary(), diff=False),
    Case("fmin", fnp.fmin, np.fmin, binary(), diff=False),
    Case("heaviside", fnp.heaviside, np.heaviside, binary(), diff=False),
    Case("ldexp", fnp.ldexp, np.ldexp, args(F(st.just((4,))), I(st.just((4,)), -60, 60))),
    Case("frexp", fnp.frexp, np.frexp, args(F(low=-1e5, high=1e5)), diff=False),
    Case("modf", fnp.modf, np.modf, args(F(low=-9, high=9)), diff=False),
    Case("rint", fnp.rint, np.rint, args(F()), diff=False),
    Case("spacing", fnp.spacing, np.spacing, args(F()), diff=False),
    Case("gcd", fnp.gcd, np.gcd, binary(-40, 40, ints=True), diff=False),
    Case("lcm", fnp.lcm, np.lcm, binary(-12, 12, ints=True), diff=False),
    Case("bitwise_count", fnp.bitwise_count, np.bitwise_count, args(I(low=-300, high=300)), diff=False),
    Case("isclose", lambda a, b: fnp.isclose(a, a + b * 1e-6, rtol=1e-6), lambda a, b: np.isclose(a, a + b * 1e-6,
         rtol=1e-6), binary(), diff=False),
    # ------------------------------------------------------------------------------------------- statistics
    Case("quantile", fnp.quantile, np.quantile, args(F(shapes(min_dims=1)), q=QS, method=METHODS,
                                                     keepdims=st.booleans()), diff=False),
    Case("quantile-axis", fnp.quantile, np.quantile, with_axis(unique=True, q=st.floats(0.01, 0.99))),
    Case("percentile", fnp.percentile, np.percentile, args(R(), q=st.floats(1, 99))),
    Case("median", fnp.median, np.median, with_axis(unique=True)),
    Case("nanquantile", fnp.nanquantile, np.nanquantile, args(NANS, q=QS, axis=st.just(0)), diff=False),
    Case("nanmedian", lambda x: fnp.nanmedian(x, axis=-1), lambda x: np.nanmedian(x, axis=-1), args(NANS),
         diff=False),
    Case("nanvar", lambda x, axis: fnp.nanvar(x, axis, ddof=1), lambda x, axis: np.nanvar(x, axis, ddof=1),
         with_axis(nans=True), diff=False),
    Case("nanstd", fnp.nanstd, np.nanstd, with_axis(nans=True), diff=False),
    Case("nanargmax", fnp.nanargmax, np.nanargmax, with_axis(nans=True).filter(
        lambda a: np.all(np.any(~np.isnan(a[0][0]), axis=a[1]["axis"]))), diff=False),
    Case("nancumsum", fnp.nancumsum, np.nancumsum, with_axis(nans=True), diff=False),
    Case("cov", fnp.cov, np.cov, st.tuples(st.tuples(F((3, 5))), st.fixed_dictionaries(
        {"rowvar": st.booleans(), "bias": st.booleans()}))),
    Case("cov-weights", lambda m, f, a: fnp.cov(m, fweights=f, aweights=a),
         lambda m, f, a: np.cov(m, fweights=f, aweights=a), args(F((2, 5)), I((5,), 1, 4), F((5,), 0.5, 2))),
    Case("corrcoef", fnp.corrcoef, np.corrcoef, args(R(st.just((3, 6)))), tol=1e-8),
    Case("digitize", fnp.digitize, np.digitize, st.tuples(st.tuples(F(), SORTED), st.fixed_dictionaries(
        {"right": st.booleans()})), diff=False),
    Case("bincount", lambda x, w: fnp.bincount(x, w, length=10), lambda x, w: np.bincount(x, w, minlength=10),
         args(I((7,), 0, 9), F((7,)))),
    Case("histogram", fnp.histogram, lambda x, bins: _float_counts(np.histogram(x, bins)), st.tuples(st.tuples(F((20,))), st.fixed_dictionaries(
        {"bins": st.integers(1, 6)})), diff=False),
    Case("histogram2d", lambda x, y: fnp.histogram2d(x, y, bins=(2, 3), density=True),
         lambda x, y: np.histogram2d(x, y, bins=(2, 3), density=True), args(F((15,)), F((15,))), diff=False),
    # -------------------------------------------------------------------------------------------- set operations
    Case("unique", lambda x: fnp.unique(x, True, True, True), lambda x: np.unique(x, True, True, True),
         args(I(low=0, high=5)), diff=False, vmap=False),
    Case("isin", fnp.isin, np.isin, args(I(low=0, high=6), I(low=0, high=6)), diff=False),
    Case("intersect1d", lambda a, b: fnp.intersect1d(a, b, return_indices=True),
         lambda a, b: np.intersect1d(a, b, return_indices=True), args(I((8,), 0, 6), I((5,), 0, 6)), diff=False,
         vmap=False),
    Case("union1d", fnp.union1d, np.union1d, args(I(low=0, high=6), I(low=0, high=6)), diff=False, vmap=False),
    Case("setdiff1d", fnp.setdiff1d, np.setdiff1d, args(I(low=0, high=6), I(low=0, high=6)), diff=False,
         vmap=False),
    Case("setxor1d", fnp.setxor1d, np.setxor1d, args(I(low=0, high=6), I(low=0, high=6)), diff=False, vmap=False),
    # -------------------------------------------------------------------------------------------- polynomials
    Case("polyval", fnp.polyval, np.polyval, args(VEC, F())),
    Case("polyadd", fnp.polyadd, np.polyadd, args(VEC, VEC)),
    Case("polymul", fnp.polymul, np.polymul, args(LEAD, LEAD)),
    Case("polydiv", lambda u, v: fnp.polydiv(u, v)[0], lambda u, v: np.polydiv(u, v)[0],
         args(F((5,)), F((2,), 1.0, 3.0))),
    Case("polyder", fnp.polyder, np.polyder, args(VEC2, m=st.integers(0, 3))),
    Case("polyint", lambda p, m: fnp.polyint(p, m, k=0.5), lambda p, m: np.polyint(p, m, k=[0.5] * m),
         args(VEC, m=st.integers(0, 2))),
    Case("poly", fnp.poly, np.poly, args(VEC)),
    Case("vander", lambda x, inc: fnp.vander(x, 4, inc), lambda x, inc: np.vander(x, 4, inc),
         args(VEC, inc=st.booleans())),
    Case("polyfit", lambda y: fnp.polyfit(np.linspace(-1, 1, 7), y, 2),
         lambda y: np.polyfit(np.linspace(-1, 1, 7), y, 2), args(F((7,))), tol=1e-8),
    # ---------------------------------------------------------------------------------------- signals, sequences
    Case("convolve", fnp.convolve, np.convolve, st.tuples(st.tuples(VEC, VEC), st.fixed_dictionaries(
        {"mode": st.sampled_from(["full", "same", "valid"])}))),
    Case("correlate", fnp.correlate, np.correlate, st.tuples(st.tuples(VEC, VEC), st.fixed_dictionaries(
        {"mode": st.sampled_from(["full", "same", "valid"])}))),
    Case("interp", fnp.interp, np.interp, args(F(low=-4, high=4), SORTED, F((6,))).filter(
        lambda a: away_from(a[0][0], a[0][1]))),
    Case("trapezoid", fnp.trapezoid, np.trapezoid, with_axis(dx=st.floats(0.1, 2))),
    Case("trapezoid-x", lambda y, x: fnp.trapezoid(y, x), lambda y, x: np.trapezoid(y, x), args(F((3, 6)), SORTED)),
    Case("gradient", lambda f: fnp.gradient(f, 0.5, axis=-1), lambda f: np.gradient(f, 0.5, axis=-1),
         args(F(shapes(min_dims=1, min_side=3)))),
    Case("gradient-x", lambda f, x: fnp.gradient(f, x), lambda f, x: np.gradient(f, x), args(F((6,)), SORTED)),
    Case("unwrap", fnp.unwrap, np.unwrap, args(F(shapes(min_dims=1), -9, 9)).filter(
        lambda a: np.all(np.abs(np.abs(np.diff(a[0][0])) - np.pi) > 0.02))),
    Case("ediff1d", lambda x: fnp.ediff1d(x, to_end=1.0, to_begin=[2.0, 3.0]),
         lambda x: np.ediff1d(x, to_end=1.0, to_begin=[2.0, 3.0]), args(F())),
    Case("cross", fnp.cross, np.cross, args(F((4, 3)), F((3,)))),
    Case("kaiser", lambda b: fnp.kaiser(7, b), lambda b: np.kaiser(7, b), args(F((), 0.5, 9)), vmap=False, tol=1e-6),
    # -------------------------------------------------------------------------------------- indices, selection
    Case("unravel_index", lambda i: fnp.unravel_index(i, (3, 4, 2)), lambda i: np.unravel_index(i, (3, 4, 2)),
         args(I(low=0, high=23)), diff=False),
    Case("ravel_multi_index", lambda i, j: fnp.ravel_multi_index((i, j), (7, 5), mode="wrap"),
         lambda i, j: np.ravel_multi_index((i, j), (7, 5), mode="wrap"), binary(-20, 20, ints=True), diff=False),
    Case("choose", lambda a, b, c: fnp.choose(np.arange(a.size).reshape(a.shape) % 3, [a, b, c]),
         lambda a, b, c: np.choose(np.arange(a.size).reshape(a.shape) % 3, [a, b, c]), args(F((2, 3)), F((3,)),
                                                                                            F((2, 3)))),
    Case("select", lambda x: fnp.select([x < -1, x < 1], [x * x, 2 * x], x), lambda x: np.select(
        [x < -1, x < 1], [x * x, 2 * x], x), args(F()).filter(lambda a: away_from(a[0][0], [-1, 1]))),
    Case("put", lambda a, v: fnp.put(a, [0, 5, 2], v, inplace=False), lambda a, v: _numpy_put(a, [0, 5, 2], v),
         args(F((2, 3)), F((2,)))),
    Case("fill_diagonal", lambda a, v: fnp.fill_diagonal(a, v, inplace=False), lambda a, v: _numpy_fill_diag(a, v),
         args(F((4, 3)), F((2,)))),
    # ----------------------------------------------------------------------------------------- manipulation
    Case("pad", lambda x, w, mode: fnp.pad(x, w, mode), lambda x, w, mode: np.pad(x, w, mode), st.tuples(st.tuples(
        F(shapes(min_dims=1))), st.fixed_dictionaries({"w": st.integers(0, 5), "mode": PAD_MODES})), diff=False),
    Case("pad-grad", lambda x: fnp.pad(x, ((1, 4), (2, 0)), "reflect") * 1.5,
         lambda x: np.pad(x, ((1, 4), (2, 0)), "reflect") * 1.5, args(F((3, 2)))),
    Case("insert", lambda x: fnp.insert(x, [0, 2, 2], 7.0, axis=-1), lambda x: np.insert(x, [0, 2, 2], 7.0, axis=-1),
         args(F(shapes(min_dims=1, min_side=2)))),
    Case("delete", lambda x: fnp.delete(x, [0, -1], axis=0), lambda x: np.delete(x, [0, -1], axis=0),
         args(F(shapes(min_dims=1, min_side=2)))),
    Case("append", lambda x, y: fnp.append(x, y), np.append, args(F(), F())),
    Case("resize", lambda x: fnp.resize(x, (3, 5)), lambda x: np.resize(x, (3, 5)), args(F())),
    Case("rot90", lambda x, k: fnp.rot90(x, k, (0, -1)), lambda x, k: np.rot90(x, k, (0, -1)),
         args(F(shapes(min_dims=2)), k=st.integers(-2, 5))),
    Case("rollaxis", fnp.rollaxis, np.rollaxis, args(F((2, 3, 4)), axis=st.integers(-3, 2), start=st.integers(0, 3))),
    Case("block", lambda a, b: fnp.block([[a, b], [b, a]]), lambda a, b: np.block([[a, b], [b, a]]),
         args(F((2, 2)), F((2, 2)))),
    Case("hsplit", lambda x: fnp.hsplit(x, 2), lambda x: np.hsplit(x, 2), args(F((3, 4)))),
    Case("packbits", lambda x, axis: fnp.packbits(x > 0, axis=axis), lambda x, axis: np.packbits(x > 0, axis=axis),
         with_axis(), diff=False),
    Case("geomspace", lambda a, b: fnp.geomspace(a, b, 5), lambda a, b: np.geomspace(a, b, 5),
         args(F((2,), 0.5, 4), F((2,), 0.5, 4)), tol=1e-8),
    # ------------------------------------------------------------------------------------ functions over arrays
    Case("vectorize", lambda a, b: fnp.vectorize(lambda u, v: fnp.sum(u * v) ** 2, signature="(n),(n)->()")(a, b),
         lambda a, b: np.vectorize(lambda u, v: np.sum(u * v) ** 2, signature="(n),(n)->()")(a, b),
         args(F((4, 3)), F((3,)))),
    Case("apply_along_axis", lambda x: fnp.apply_along_axis(lambda v: fnp.cumsum(v * v), 1, x),
         lambda x: np.apply_along_axis(lambda v: np.cumsum(v * v), 1, x), args(F((2, 3, 2)))),
    Case("piecewise", lambda x: fnp.piecewise(x, [x < 0, x > 1], [lambda v: v * v, lambda v: -v, 2.0]),
         lambda x: np.piecewise(x, [x < 0, x > 1], [lambda v: v * v, lambda v: -v, 2.0]),
         args(F()).filter(lambda a: away_from(a[0][0], [0, 1]))),
]


def _float_counts(hist):
    """numpy's histogram with float counts, as flfun (and JAX) give them."""
    return (hist[0].astype(np.float64), *hist[1:])


def _numpy_put(a, ind, v):
    out = a.copy()
    np.put(out, ind, v)
    return out


def _numpy_fill_diag(a, v):
    out = a.copy()
    np.fill_diagonal(out, v)
    return out


def _compare(out, expected, tol, name):
    outs, exps = fl.tree_leaves(out), [np.asarray(e) for e in fl.tree_leaves(
        list(expected) if isinstance(expected, tuple) else expected)]
    assert len(outs) == len(exps), f"{name}: {len(outs)} results, numpy gives {len(exps)}"
    for o, e in zip(outs, exps):
        o = np.asarray(o)
        assert o.shape == e.shape, f"{name}: shape {o.shape}, numpy's {e.shape}"
        assert o.dtype.kind == e.dtype.kind or {o.dtype.kind, e.dtype.kind} <= {"i", "u"}, \
            f"{name}: dtype {o.dtype}, numpy's {e.dtype}"
        np.testing.assert_allclose(o.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=repr)
@given(data=st.data())
def test_values_match_numpy(case, data):
    a, kw = data.draw(case.draw)
    _compare(case.fn(*[fnp.asarray(np.asarray(x)) for x in a], **kw), case.ref(*a, **kw), case.tol, case.name)


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in ("unique", "intersect1d", "union1d",
                                                                      "setdiff1d", "setxor1d")], ids=repr)
@settings(max_examples=2)
@given(data=st.data())
def test_jit_matches_eager(case, data):
    a, kw = data.draw(case.draw)
    xs = [fnp.asarray(np.asarray(x)) for x in a]
    _compare(fl.jit(lambda *v: case.fn(*v, **kw))(*xs), fl.tree_map(np.asarray, case.fn(*xs, **kw)), 1e-12,
             case.name)


DIFF = [c for c in CASES if c.diff]


def _float_args_only(case, a, kw):
    """``f`` of the float arguments alone (the others fixed), and those arguments."""
    floats = [i for i, x in enumerate(a) if np.asarray(x).dtype.kind == "f"]

    def f(*fs):
        full = list(a)
        for i, v in zip(floats, fs):
            full[i] = v
        return case.fn(*full, **kw)
    return f, [a[i] for i in floats]


@pytest.mark.parametrize("case", DIFF, ids=repr)
@settings(max_examples=4)
@given(data=st.data())
def test_grads(case, data):
    a, kw = data.draw(case.draw)
    f, xs = _float_args_only(case, a, kw)
    check_jvp(f, xs, atol=1e-5, rtol=1e-4)
    check_vjp(f, xs, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("case", [c for c in CASES if c.vmap], ids=repr)
@settings(max_examples=2)
@given(data=st.data())
def test_vmap_matches_loop(case, data):
    a, kw = data.draw(case.draw)
    batch = [np.stack([x, x * 0.5 + 0.25, -x] if np.asarray(x).dtype.kind == "f" else [x, x, x]) for x in a]
    check_vmap(lambda *v: case.fn(*v, **kw), batch, atol=1e-9, rtol=1e-9)


# ------------------------------------------------------------------------------------------------ dtype rules
X32 = np.linspace(0.1, 0.9, 6, dtype=np.float32)
KEEPS_FLOAT32 = {
    "cbrt": lambda x: fnp.cbrt(x), "sinc": lambda x: fnp.sinc(x), "i0": lambda x: fnp.i0(x),
    "logaddexp2": lambda x: fnp.logaddexp2(x, 1.0), "ldexp": lambda x: fnp.ldexp(x, 3),
    "frexp": lambda x: fnp.frexp(x)[0], "quantile": lambda x: fnp.quantile(x, 0.3),
    "median": lambda x: fnp.median(x), "cov": lambda x: fnp.cov(x), "interp": lambda x: fnp.interp(x, x, x),
    "convolve": lambda x: fnp.convolve(x, x), "polyval": lambda x: fnp.polyval(x, x),
    "polyfit": lambda x: fnp.polyfit(x, x, 1), "trapezoid": lambda x: fnp.trapezoid(x),
    "gradient": lambda x: fnp.gradient(x), "pad": lambda x: fnp.pad(x, 2, "mean"),
    "geomspace": lambda x: fnp.geomspace(x[0], x[-1], 3), "histogram": lambda x: fnp.histogram(x, 3, weights=x)[0],
}


@pytest.mark.parametrize("name", list(KEEPS_FLOAT32))
def test_float32_stays_float32(name):
    assert KEEPS_FLOAT32[name](fnp.asarray(X32)).dtype == np.float32


def test_integer_results():
    x = fnp.asarray([3, 1, 3, 7])
    assert fnp.gcd(x, 6).dtype == np.int64 and fnp.bincount(x).dtype == np.int64
    assert fnp.frexp(fnp.asarray([3.0]))[1].dtype == np.int32 and fnp.bitwise_count(x).dtype == np.uint8
    assert fnp.digitize(fnp.asarray([0.5]), fnp.asarray([0.0, 1.0])).dtype == np.int64
    assert fnp.convolve(x, x).dtype == np.int64 and fnp.median(x).dtype == np.float32
    assert fnp.hanning(4).dtype == np.float32      # JAX's default float, where numpy gives float64


# ------------------------------------------------------------------------------------- data-dependent sizes
@pytest.mark.parametrize("fn,ref", [
    (lambda a, b: fnp.unique(a, size=12, fill_value=-1), lambda a, b: np.unique(a)),
    (lambda a, b: fnp.union1d(a, b, size=12, fill_value=-1), np.union1d),
    (lambda a, b: fnp.intersect1d(a, b, size=12, fill_value=-1), np.intersect1d),
    (lambda a, b: fnp.setdiff1d(a, b, size=12, fill_value=-1), np.setdiff1d),
    (lambda a, b: fnp.setxor1d(a, b, size=12, fill_value=-1), np.setxor1d),
    (lambda a, b: fnp.extract(a > 2, a, size=12, fill_value=-1), lambda a, b: np.extract(a > 2, a)),
], ids=["unique", "union1d", "intersect1d", "setdiff1d", "setxor1d", "extract"])
@settings(max_examples=4)
@given(a=I((6,), 0, 7), b=I((5,), 0, 7))
def test_size_argument_under_jit(fn, ref, a, b):
    """With ``size=`` the result is the numpy one padded with ``fill_value``, under jit and vmap alike."""
    expected = ref(a, b)
    expected = np.concatenate([expected, np.full(12 - expected.size, -1)])
    np.testing.assert_array_equal(np.asarray(fl.jit(fn)(fnp.asarray(a), fnp.asarray(b))), expected)
    batched = fl.vmap(fn)(fnp.asarray(np.stack([a, a])), fnp.asarray(np.stack([b, b])))
    np.testing.assert_array_equal(np.asarray(batched), np.stack([expected, expected]))


def test_unique_size_extras_under_jit():
    x = np.array([4, 1, 4, 2, 1, 4])
    values, index, inverse, counts = fl.jit(lambda v: fnp.unique(v, True, True, True, size=4))(fnp.asarray(x))
    ev, ei, einv, ec = np.unique(x, True, True, True)
    np.testing.assert_array_equal(np.asarray(values)[:3], ev)
    np.testing.assert_array_equal(np.asarray(index)[:3], ei)
    np.testing.assert_array_equal(np.asarray(inverse), einv)
    np.testing.assert_array_equal(np.asarray(counts), [*ec, 0])


def test_misc_against_numpy():
    """The functions whose inputs are shapes or Python objects, once each."""
    for name, args in [("indices", ((2, 3),)), ("tril_indices", (4, -1, 3)), ("triu_indices", (3, 1)),
                       ("diag_indices", (3, 3)), ("bartlett", (6,)), ("blackman", (6,)), ("hamming", (5,)),
                       ("hanning", (1,)), ("fromfunction", (lambda i, j: i * 3 + j, (2, 3)))]:
        out, exp = getattr(fnp, name)(*args), getattr(np, name)(*args)
        _compare(out, exp, 1e-6, name)
    x = np.arange(12.0).reshape(3, 4)
    _compare(fnp.ix_([0, 2], [1, 3]), np.ix_([0, 2], [1, 3]), 0, "ix_")
    _compare(fnp.mask_indices(3, fnp.triu, 1), np.mask_indices(3, np.triu, 1), 0, "mask_indices")
    _compare(fnp.apply_over_axes(lambda a, ax: fnp.sum(a, axis=ax), x, [0, 1]), np.apply_over_axes(np.sum, x, [0, 1]),
             0, "apply_over_axes")
    _compare(fnp.unpackbits(fnp.asarray(np.array([[7, 200]], np.uint8)), axis=1, count=-3),
             np.unpackbits(np.array([[7, 200]], np.uint8), axis=1, count=-3), 0, "unpackbits")
    _compare(fnp.trim_zeros(fnp.asarray([0, 0, 3, 0, 2, 0])), np.trim_zeros(np.array([0, 0, 3, 0, 2, 0])), 0,
             "trim_zeros")
    _compare(fnp.place(fnp.zeros(5), fnp.asarray([True, False, True, True, True]), fnp.asarray([7.0, 8.0]),
                       inplace=False), np.array([7.0, 0, 8, 7, 8]), 0, "place")
    u = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    _compare(u.accumulate(fnp.asarray([1.0, 2.0, 3.0])), np.array([1.0, 3.0, 10.0]), 0, "ufunc.accumulate")
    _compare(u.outer(fnp.arange(2.0), fnp.arange(3.0)), np.multiply.outer(np.arange(2.0), np.arange(3.0)) + 1, 0,
             "ufunc.outer")
    assert fnp.issubdtype(fnp.float32, fnp.floating) and not fnp.issubdtype(fnp.int32, fnp.inexact)
    assert fnp.promote_types("int32", "float32") == np.float32 and fnp.isscalar(fnp.asarray(1.0))
    assert not fnp.isscalar("a") and bool(fnp.allclose(x, x + 1e-9)) and bool(fnp.array_equal(x, x))
    assert fnp.array_equal(x, x[:2]) is False and bool(fnp.array_equiv(x[:1], np.tile(x[:1], (2, 1))))


# ------------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("call,exc,match", [
    (lambda: fnp.quantile(fnp.ones(3), 1.5), ValueError, r"quantile: q must be in \[0, 1\]"),
    (lambda: fnp.percentile(fnp.ones(3), -5), ValueError, r"percentile: q must be in \[0, 100\]"),
    (lambda: fnp.quantile(fnp.ones(3), 0.5, method="cubic"), ValueError, "quantile: method must be one of"),
    (lambda: fnp.bincount(fnp.asarray([1.0])), TypeError, "bincount: x must be a 1-d integer array"),
    (lambda: fnp.bincount(fnp.asarray([-1, 2])), ValueError, "bincount: x must be non-negative"),
    (lambda: fl.jit(fnp.bincount)(fnp.asarray([1, 2])), fl.ConcretizationError, "bincount"),
    (lambda: fl.jit(fnp.unique)(fnp.asarray([1, 2])), fl.ConcretizationError, "unique"),
    (lambda: fnp.histogram(fnp.ones(3), bins=0), ValueError, "bins must be positive"),
    (lambda: fnp.cov(fnp.ones((2, 2, 2))), ValueError, "cov: m must be at most 2-d"),
    (lambda: fnp.digitize(fnp.ones(2), fnp.ones((2, 2))), ValueError, "digitize: bins must be 1-d"),
    (lambda: fnp.gcd(fnp.ones(2), 2), TypeError, "gcd: requires integer inputs"),
    (lambda: fnp.ldexp(1.0, 2.5), TypeError, "ldexp: x2 must be an integer array"),
    (lambda: fnp.bitwise_count(fnp.ones(2)), TypeError, "bitwise_count: requires integer"),
    (lambda: fnp.polyval(fnp.ones((2, 2)), 1.0), ValueError, "polyval: p must be 1-d"),
    (lambda: fnp.polyfit(fnp.ones(3), fnp.ones(4), 1), ValueError, "polyfit: need a 1-d x"),
    (lambda: fnp.polyfit(fnp.ones(3), fnp.ones(3), 1, full=True), NotImplementedError, "polyfit: full=True"),
    (lambda: fnp.polyder(fnp.ones(3), -1), ValueError, "polyder: order m must be non-negative"),
    (lambda: fnp.convolve(fnp.ones(3), fnp.ones(2), mode="middle"), ValueError, "convolve: mode must be"),
    (lambda: fnp.convolve(fnp.ones((2, 2)), fnp.ones(2)), ValueError, "convolve: needs two non-empty 1-d"),
    (lambda: fnp.interp(1.0, fnp.ones((2, 2)), fnp.ones(2)), ValueError, "interp: xp and fp must be 1-d"),
    (lambda: fnp.gradient(fnp.ones(1)), ValueError, "gradient: axis 0 .* needs at least 2 points"),
    (lambda: fnp.gradient(fnp.ones(3), edge_order=2), NotImplementedError, "gradient: only edge_order=1"),
    (lambda: fnp.cross(fnp.ones(4), fnp.ones(3)), ValueError, "cross: vectors must have 2 or 3 components"),
    (lambda: fnp.hanning(2.5), TypeError, "hanning: M must be an int"),
    (lambda: fnp.unravel_index(fnp.asarray([12]), (3, 4)), ValueError, "unravel_index: index out of bounds"),
    (lambda: fnp.ravel_multi_index((fnp.asarray([3]), fnp.asarray([0])), (3, 4)), ValueError,
     "ravel_multi_index: index of dimension 0 out of bounds"),
    (lambda: fnp.choose(fnp.asarray([2]), [fnp.ones(1), fnp.ones(1)]), ValueError, "choose: index out of bounds"),
    (lambda: fnp.select([fnp.ones(2)], [fnp.ones(2)]), TypeError, "select: conditions must be bool"),
    (lambda: fnp.put(fnp.ones(3), [0], 1.0), ValueError, "put: flfun arrays are immutable"),
    (lambda: fnp.fill_diagonal(fnp.ones((2, 2)), 1.0), ValueError, "fill_diagonal: flfun arrays are immutable"),
    (lambda: fnp.place(fnp.ones(2), fnp.ones(2) > 0, fnp.ones(1)), ValueError, "place: flfun arrays are immutable"),
    (lambda: fnp.pad(fnp.ones(3), 1, mode="sideways"), ValueError, "pad: mode must be one of"),
    (lambda: fnp.pad(fnp.ones(3), -1), ValueError, "pad: pad_width must be non-negative"),
    (lambda: fnp.pad(fnp.ones(3), ((1, 1), (1, 1))), ValueError, "pad: pad_width .* per dimension"),
    (lambda: fnp.pad(fnp.ones(3), 1, "reflect", reflect_type="odd"), NotImplementedError, "reflect_type='odd'"),
    (lambda: fnp.block([(fnp.ones(2), fnp.ones(2))]), TypeError, "block: nest blocks in lists"),
    (lambda: fnp.rot90(fnp.ones((2, 2)), 1, (0, 0)), ValueError, "rot90: axes must differ"),
    (lambda: fnp.vsplit(fnp.ones(4), 2), ValueError, "vsplit: needs at least 2 dimensions"),
    (lambda: fnp.unpackbits(fnp.ones(2)), TypeError, "unpackbits: needs a uint8 array"),
    (lambda: fnp.vectorize(lambda a: a, signature="(n)->()")(fnp.ones(2), fnp.ones(2)), TypeError,
     "vectorize: the signature"),
    (lambda: fnp.vectorize(lambda a: a, signature="(n->)"), ValueError, "not a valid gufunc signature"),
    (lambda: fnp.piecewise(fnp.ones(2), [fnp.ones(2) > 0], []), ValueError, "piecewise: 0 functions for 1"),
    (lambda: fnp.frompyfunc(lambda a: a, 1, 1).reduce(fnp.ones(2)), ValueError, "only binary ufuncs"),
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_complex_queries_on_real_arrays():
    x = fnp.asarray([1.0, -2.0])
    assert not fnp.iscomplexobj(x) and fnp.isrealobj(x) and fnp.isrealobj(3)
    np.testing.assert_array_equal(np.asarray(fnp.iscomplex(x)), [False, False])
    np.testing.assert_array_equal(np.asarray(fnp.isreal(x)), [True, True])
    assert fnp.complex_ == fnp.cdouble == np.complex128 and fnp.csingle == np.complex64
    assert fnp.issubdtype(fnp.cdouble, fnp.complexfloating) and issubclass(fnp.ComplexWarning, Warning)


@pytest.mark.skipif(not hasattr(fnp, "complex64"), reason="this tree has no complex dtypes yet (the complex issue)")
def test_complex_queries_on_complex_arrays():
    z = np.array([[2 + 1j, 1 + 3j, 2 - 1j], [0j, 1 + 0j, -1j]])
    assert fnp.iscomplexobj(fnp.asarray(z)) and not fnp.isrealobj(fnp.asarray(z))
    np.testing.assert_array_equal(np.asarray(fnp.iscomplex(fnp.asarray(z))), np.iscomplex(z))
    np.testing.assert_array_equal(np.asarray(fnp.isreal(fnp.asarray(z))), np.isreal(z))
    np.testing.assert_array_equal(np.asarray(fnp.sort_complex(fnp.asarray(z))), np.sort(z, axis=-1))
    out = fnp.sort_complex(fnp.asarray(np.array([3.0, 1.0, 2.0])))
    np.testing.assert_array_equal(np.asarray(out), np.sort_complex(np.array([3.0, 1.0, 2.0])))
    assert out.dtype == np.complex128
