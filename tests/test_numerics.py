"""Numerics the array API standard's special cases pin down: the inverse hyperbolics over their whole range with
signed zeros, signbit of NaN, the sign of a zero remainder, DLPack export of read-only arrays, the inspection API."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from peers import require


def _same(got, want):
    """Equal values with equal signs of zero and NaN positions (the special cases compare bit patterns)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,ref", [("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh)])
@given(x=st.floats(allow_nan=True, allow_infinity=True, width=32))
def test_inverse_hyperbolics_over_the_whole_range(dtype, name, ref, x):
    xs = np.array([x, -x, 0.0, -0.0, 1e-9, -3000.0, -1e4, 1e10, -1e10, 1e20, -np.inf, np.inf, 0.5, 1.0, -1.0],
                  dtype)
    want = ref(xs.astype(np.float64)).astype(dtype)     # float64 numpy as the reference
    with np.errstate(all="ignore"):
        got = np.asarray(getattr(fnp, name)(fnp.asarray(xs)))
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-14)
    _same(got, want)


def test_inverse_hyperbolics_known_values():
    assert float(fnp.asinh(fnp.asarray(-1e10, "float64"))) == pytest.approx(-23.718998110500402, rel=1e-15)
    assert float(fnp.asinh(fnp.asarray(-1e10, "float32"))) == pytest.approx(-23.718998, rel=1e-6)
    assert float(fnp.asinh(fnp.asarray(-np.inf))) == -np.inf
    assert np.isfinite(float(fnp.acosh(fnp.asarray(1e20, "float32"))))
    assert np.isnan(float(fnp.acosh(fnp.asarray(0.5))))
    assert np.signbit(float(fnp.atanh(fnp.asarray(-0.0)))) and np.signbit(float(fnp.asinh(fnp.asarray(-0.0))))


def test_inverse_hyperbolic_derivatives_match_numpy_formulas():
    x = np.array([-3.0, -0.5, 0.2, 2.0])
    np.testing.assert_allclose(fl.vmap(fl.grad(fnp.asinh))(fnp.asarray(x)), 1 / np.sqrt(x * x + 1), rtol=1e-12)
    y = np.array([1.5, 3.0, 1e3])
    np.testing.assert_allclose(fl.vmap(fl.grad(fnp.acosh))(fnp.asarray(y)), 1 / np.sqrt(y * y - 1), rtol=1e-12)
    z = np.array([-0.9, 0.0, 0.5])
    np.testing.assert_allclose(fl.jit(fl.vmap(fl.grad(fnp.atanh)))(fnp.asarray(z)), 1 / (1 - z * z), rtol=1e-12)


def test_signbit_sees_the_sign_of_nan_and_zero():
    x = np.array([-np.nan, np.nan, -0.0, 0.0, -1.0, np.inf, -np.inf])
    np.testing.assert_array_equal(fnp.signbit(fnp.asarray(x)), np.signbit(x))
    np.testing.assert_array_equal(fl.jit(fnp.signbit)(fnp.asarray(x)), np.signbit(x))
    assert fnp.copysign(1.0, fnp.asarray(-np.nan)).item() == -1.0


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_remainder_matches_numpy_signs_included(dtype):
    vals = np.array([-3.0, -2.5, -1.0, -0.0, 0.0, 1.0, 2.5, 3.0])
    if dtype == "int32":
        vals = np.array([-7, -3, -1, 1, 3, 7])
    a, b = (v.astype(dtype) for v in np.meshgrid(vals, vals[vals != 0]))
    want = np.remainder(a, b)
    for got in (fnp.remainder(fnp.asarray(a), fnp.asarray(b)), fnp.asarray(a) % fnp.asarray(b),
                fl.jit(fnp.remainder)(fnp.asarray(a), fnp.asarray(b))):
        np.testing.assert_array_equal(got, want)
        _same(got, want)


@pytest.mark.parametrize("consumer", ["numpy", "torch", "jax"])
def test_dlpack_exports_read_only_arrays_to_dlpack_1_consumers(consumer):
    x = fnp.arange(6.0).reshape(2, 3)
    mod = require(consumer)
    got = {"numpy": np.from_dlpack, "torch": lambda a: mod.from_dlpack(a),
           "jax": lambda a: require("jax.numpy").from_dlpack(a)}[consumer](x)
    np.testing.assert_array_equal(np.asarray(got), np.arange(6.0).reshape(2, 3))
    if consumer == "numpy":
        assert not got.flags.writeable        # numpy 2 is told the buffer is read-only, so nobody writes into x
    capsule = x.__dlpack__(max_version=(1, 0), copy=False, dl_device=x.__dlpack_device__())
    assert "versioned" in repr(capsule)
    if consumer == "torch":                    # a pre-1.0 consumer cannot be told: it gets a copy to write into
        old = mod.utils.dlpack.from_dlpack(x.__dlpack__())
        old[0, 0] = 99.0
        assert float(x[0, 0]) == 0.0


def test_finfo_gives_python_floats_and_the_real_dtype():
    for dt, real in [("float32", np.float32), ("float64", np.float64), ("complex64", np.float32),
                     ("complex128", np.float64)]:
        fi = fnp.finfo(dt)
        assert fi.dtype == real and fi.bits == np.finfo(real).bits and fnp.finfo(fnp.ones(1, dt)) == fi
        assert all(type(v) is float for v in (fi.eps, fi.max, fi.min, fi.smallest_normal))
        assert fi.eps == np.finfo(real).eps and fi.smallest_normal == np.finfo(real).smallest_normal


def test_outer_keeps_signed_zeros_and_complex_special_cases():
    np.testing.assert_array_equal(np.signbit(fnp.outer(fnp.asarray([0.0]), fnp.asarray([-0.0, 1.0]))),
                                  [[True, False]])
    inf, nan = np.inf, np.nan
    z = np.array([complex(inf, 0), complex(-inf, inf), complex(inf, inf), complex(-inf, nan), complex(nan, 0),
                  complex(-0.0, 0.0)])
    want = [complex(inf, 0), complex(-1, 0), complex(inf, nan), complex(-1, 0), complex(nan, 0), 0j]  # the standard's
    _same(np.asarray(fnp.expm1(fnp.asarray(z))).view(np.float64), np.array(want).view(np.float64))
    t = np.asarray(fnp.tanh(fnp.asarray([complex(inf, 0.5), complex(-inf, -2.0), complex(0.5, 0.5)], "complex128")))
    _same(t.view(np.float64), np.array([1 + 0j, complex(-1, -0.0), np.tanh(0.5 + 0.5j)]).view(np.float64))
    np.testing.assert_allclose(t[2], np.tanh(0.5 + 0.5j), rtol=1e-6)


def test_inspection_lists_only_dtypes_the_namespace_accepts():
    info = fnp.__array_namespace_info__()
    for name, dt in info.dtypes().items():
        assert getattr(fnp, name) == dt
        assert fnp.asarray([1], dtype=dt).dtype == dt and fnp.zeros(2, dtype=dt).dtype == dt
    assert set(info.dtypes(kind="real floating")) == {"float32", "float64"}   # the standard's only
    assert set(info.dtypes(kind="integral")) == {f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}
