"""Op-table records for the elementwise primitives."""
from __future__ import annotations

import math

import numpy as np

from flfun import lax
from op_table import ALL, COMPLEX, FLOATS, INTS, OpRecord, away_from_kinks, binary, nary, unary

_erf = np.vectorize(math.erf)


def _u(prim, fn, ref, low=-3.0, high=3.0, dtypes=FLOATS, diff=True, **kw):
    return OpRecord(prim, fn, ref, unary(low, high), dtypes=dtypes, diff=diff, **kw)


def _b(prim, fn, ref, low=-3.0, high=3.0, dtypes=FLOATS + INTS, diff=True, **kw):
    return OpRecord(prim, fn, ref, binary(low, high), dtypes=dtypes, diff=diff, **kw)


def _shift_right_logical(x, y):
    u = x.astype(np.dtype(f"uint{x.dtype.itemsize * 8}"))
    return np.where(y >= x.dtype.itemsize * 8, 0, u >> y.astype(u.dtype)).astype(x.dtype)


RECORDS = [
    _u("neg", lax.neg, np.negative, dtypes=FLOATS + INTS + COMPLEX),
    _u("abs", lax.abs, np.abs, dtypes=FLOATS + INTS + COMPLEX, smooth_args=away_from_kinks(unary())),
    _u("sign", lax.sign, np.sign, dtypes=FLOATS + INTS + COMPLEX, diff=False),
    _u("exp", lax.exp, np.exp, dtypes=FLOATS + COMPLEX),
    _u("log", lax.log, np.log, low=0.1, high=5.0, dtypes=FLOATS + COMPLEX),
    _u("log1p", lax.log1p, np.log1p, low=-0.5, high=5.0, dtypes=FLOATS + COMPLEX),
    _u("expm1", lax.expm1, np.expm1, dtypes=FLOATS + COMPLEX),
    _u("sqrt", lax.sqrt, np.sqrt, low=0.1, high=5.0, dtypes=FLOATS + COMPLEX),
    _u("rsqrt", lax.rsqrt, lambda x: 1 / np.sqrt(x), low=0.1, high=5.0),
    _u("sin", lax.sin, np.sin, dtypes=FLOATS + COMPLEX),
    _u("cos", lax.cos, np.cos, dtypes=FLOATS + COMPLEX),
    _u("tan", lax.tan, np.tan, low=-1.2, high=1.2, dtypes=FLOATS + COMPLEX),
    _u("tanh", lax.tanh, np.tanh),
    _u("asin", lax.asin, np.arcsin, low=-0.9, high=0.9, dtypes=FLOATS + COMPLEX),
    _u("acos", lax.acos, np.arccos, low=-0.9, high=0.9, dtypes=FLOATS + COMPLEX),
    _u("atan", lax.atan, np.arctan),
    _u("sinh", lax.sinh, np.sinh, dtypes=FLOATS + COMPLEX),
    _u("cosh", lax.cosh, np.cosh, dtypes=FLOATS + COMPLEX),
    _u("asinh", lax.asinh, np.arcsinh),
    _u("acosh", lax.acosh, np.arccosh, low=1.2, high=5.0),
    _u("atanh", lax.atanh, np.arctanh, low=-0.9, high=0.9),
    _u("logistic", lax.logistic, lambda x: 1 / (1 + np.exp(-x)), low=-20, high=20),
    _u("erf", lax.erf, _erf),
    _u("floor", lax.floor, np.floor, diff=False),
    _u("ceil", lax.ceil, np.ceil, diff=False),
    _u("round", lax.round, np.round, diff=False),
    _u("is_finite", lax.is_finite, np.isfinite, diff=False),
    _u("signbit", lax.signbit, np.signbit, diff=False),
    _u("not", lax.not_, np.invert, dtypes=INTS + ("bool", "uint8"), diff=False),
    OpRecord("integer_pow", lambda x, y: lax.integer_pow(x, y), lambda x, y: x ** y,
             lambda dt: unary()(dt).flatmap(lambda a: __import__("hypothesis").strategies.sampled_from(
                 [0, 1, 2, 3]).map(lambda y: (a[0], {"y": y}))), dtypes=FLOATS + INTS),
    _b("add", lax.add, np.add, dtypes=FLOATS + INTS + COMPLEX),
    _b("sub", lax.sub, np.subtract, dtypes=FLOATS + INTS + COMPLEX),
    _b("mul", lax.mul, np.multiply, dtypes=FLOATS + INTS + COMPLEX),
    OpRecord("div", lax.div, np.divide, binary(-3, 3, 0.5, 3), dtypes=FLOATS + COMPLEX),
    OpRecord("rem", lax.rem, np.fmod, binary(-3, 3, 0.5, 3), dtypes=FLOATS, diff=False, name="rem"),
    OpRecord("pow", lax.pow, np.power, binary(0.5, 2.0, -2, 2), dtypes=FLOATS + COMPLEX, atol=1e-4, rtol=1e-4),
    _b("max", lax.max, np.maximum, smooth_args=away_from_kinks(binary())),
    _b("min", lax.min, np.minimum, smooth_args=away_from_kinks(binary())),
    _b("atan2", lax.atan2, np.arctan2, dtypes=FLOATS, low=0.2),
    _b("nextafter", lax.nextafter, np.nextafter, dtypes=FLOATS),
    _b("and", lax.and_, np.bitwise_and, dtypes=INTS + ("bool",), diff=False),
    _b("or", lax.or_, np.bitwise_or, dtypes=INTS + ("bool",), diff=False),
    _b("xor", lax.xor, np.bitwise_xor, dtypes=INTS + ("bool",), diff=False),
    OpRecord("shift_left", lax.shift_left, lambda x, y: np.left_shift(x, y), binary(0, 8), dtypes=INTS,
             diff=False),
    OpRecord("shift_right_logical", lax.shift_right_logical, _shift_right_logical, binary(-8, 8, 0, 8),
             dtypes=INTS, diff=False),
    OpRecord("shift_right_arithmetic", lax.shift_right_arithmetic, np.right_shift, binary(-8, 8, 0, 8),
             dtypes=INTS, diff=False),
    _b("eq", lax.eq, np.equal, dtypes=ALL + COMPLEX, diff=False),
    _b("ne", lax.ne, np.not_equal, dtypes=ALL + COMPLEX, diff=False),
    _u("real", lax.real, np.real, dtypes=COMPLEX),
    _u("imag", lax.imag, np.imag, dtypes=COMPLEX),
    _u("conj", lax.conj, np.conj, dtypes=COMPLEX),
    _b("complex", lax.complex, lambda x, y: x + 1j * y, dtypes=FLOATS),
    _b("lt", lax.lt, np.less, diff=False),
    _b("le", lax.le, np.less_equal, diff=False),
    _b("gt", lax.gt, np.greater, diff=False),
    _b("ge", lax.ge, np.greater_equal, diff=False),
    OpRecord("select_n", lambda p, a, b: lax.select_n(p, a, b), lambda p, a, b: np.where(p, b, a),
             nary(3, first_dtype="bool"), dtypes=FLOATS + INTS),
    OpRecord("clamp", lambda x: lax.clamp(lax.full((), -1.0, x.dtype), x, lax.full((), 1.0, x.dtype)),
             lambda x: np.clip(x, -1, 1), unary(),
             smooth_args=lambda dt: unary()(dt).filter(lambda d: bool(np.all(np.abs(np.abs(d[0][0]) - 1) > 1e-2)))),
    OpRecord("convert_element_type", lambda x: lax.convert_element_type(x, "float64"),
             lambda x: x.astype(np.float64), unary(), dtypes=FLOATS + INTS, keeps_dtype=False),
    OpRecord("stop_gradient", lax.stop_gradient, lambda x: x, unary(), diff=False),
]
