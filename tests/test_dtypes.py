"""dtype promotion (array API table + weak Python scalars) and float64 preservation through transforms."""
from __future__ import annotations

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import dtypes


@pytest.mark.parametrize("a,b,expected", [
    ("float32", "float64", "float64"), ("int8", "uint8", "int16"), ("int32", "int64", "int64"),
    ("uint8", "uint16", "uint16"), ("bool", "int8", "int8"), ("int32", "float32", "float32"),
    ("float16", "float32", "float32"), ("int64", "uint64", "float32"), ("uint32", "int64", "int64"),
])
def test_array_promotion(a, b, expected):
    got, weak = dtypes.result_type((np.dtype(a), False), (np.dtype(b), False))
    assert got == np.dtype(expected) and not weak
    x = fnp.asarray(np.ones(2, a)) + fnp.asarray(np.ones(2, b))
    assert x.dtype == np.dtype(expected)


@pytest.mark.parametrize("dtype,scalar,expected", [
    ("float32", 2.0, "float32"), ("float16", 2.0, "float16"), ("int32", 1, "int32"), ("uint8", 1, "uint8"),
    ("int32", 1.0, "float32"), ("bool", 1, "int64"), ("float64", 1, "float64"),
])
def test_weak_scalars(dtype, scalar, expected):
    x = fnp.asarray(np.ones(2, dtype))
    assert (x * scalar).dtype == np.dtype(expected)
    assert (scalar * x).dtype == np.dtype(expected)


def test_defaults_and_float64_is_kept():
    assert fnp.asarray(1.0).dtype == np.float32 and fnp.asarray(1).dtype == np.int64
    assert fnp.zeros(2).dtype == np.float32 and fnp.arange(3).dtype == np.int64
    x = fnp.asarray(np.array([1.0, 2.0]))          # numpy float64 stays float64
    assert x.dtype == np.float64
    g = fl.grad(lambda x: fnp.sum(fnp.sin(x) ** 2))(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, np.sin(2 * np.array([1.0, 2.0])), rtol=1e-15)
    assert fl.vmap(lambda v: v * 2.0)(x).dtype == np.float64


def test_short_names():
    assert dtypes.short_name("float32") == "f32" and dtypes.short_name("uint8") == "u8"
    assert fnp.ones((3, 4)).aval_str() == "f32[3,4]"


def test_lists_infer_their_dtype_as_asarray_does_in_every_function():
    for f in (lambda v: fnp.sum(v), lambda v: fnp.add(v, v), lambda v: fnp.reshape(v, (2, 1)),
              lambda v: fnp.maximum(v, 0.5), lambda v: fnp.asarray(v)):
        assert f([1.0, 2.0]).dtype == fnp.float32 and f([1, 2]).dtype in (fnp.int64, fnp.float32)
    assert fnp.add(fnp.ones(2, dtype="float64"), [1.0]).dtype == fnp.float64


@pytest.mark.parametrize("a,b,expected", [
    ("complex64", "float32", "complex64"), ("complex64", "float64", "complex128"), ("complex128", "float32",
    "complex128"), ("complex64", "complex128", "complex128"), ("complex64", "int64", "complex64"),
    ("float16", "complex64", "complex64"), ("bool", "complex128", "complex128")])
def test_complex_promotion_follows_the_standard(a, b, expected):
    assert fnp.result_type(fnp.ones(1, a), fnp.ones(1, b)) == np.dtype(expected)
    assert (fnp.ones(2, a) + fnp.ones(2, b)).dtype == np.dtype(expected)


@pytest.mark.parametrize("dtype,expected", [("float32", "complex64"), ("float64", "complex128"),
                                            ("int32", "complex64"), ("complex128", "complex128")])
def test_python_complex_scalars_are_weak(dtype, expected):
    x = fnp.ones(2, dtype)
    assert (x * 1j).dtype == (1j + x).dtype == np.dtype(expected)
    assert (fnp.ones(2, "complex64") * 2.0).dtype == fnp.complex64
    assert fnp.asarray(1 + 2j).dtype == fnp.complex64 and fnp.asarray([1, 2.5j]).dtype == fnp.complex64
    assert fnp.asarray(np.complex128(1j)).dtype == fnp.complex128
    assert complex(fnp.asarray(1 - 2j)) == 1 - 2j
