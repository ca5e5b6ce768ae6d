"""Elementwise functions of ``flfun.numpy``: promotion to a common dtype, then one primitive.

The arithmetic binary functions (and so Array's operators) have an eager fast path (two same-dtype arrays, or an
array and a Python scalar, with no transform active): it calls the registered impl directly and leaves shape
checking to the abstract-eval rule only if the impl fails, which keeps ``x + y`` within a small factor of numpy
(benchmark W1). Where the optional C module flfun/_dispatch.c was built, it runs the array-array case without a
Python frame and calls this module's Python function for everything else.
"""
from __future__ import annotations

import builtins

import numpy as np

from flfun import dtypes
from flfun import primitives as _prims
from flfun.array import Array
from flfun.core import _state, wrap
from flfun.numpy._promote import asarray_like, promote, to_float
from flfun.primitives import elementwise as lax



_NO_PARAMS: dict = {}
_FLOATS = frozenset(d for d in dtypes.SUPPORTED if d.kind == "f")


def _binary(prim, lax_fn, name: str, kinds: str = "iuf", doc: str = ""):
    impls = prim.impls
    new = object.__new__
    ok = frozenset(d for d in dtypes.SUPPORTED if d.kind in kinds)   # a set test is cheaper than dt.kind in kinds

    def op(x1, x2, /):
        t1, t2 = type(x1), type(x2)
        if t1 is Array and t2 is Array:
            st = _state
            if st.evaluate:
                v1 = x1._value
                dt = v1.dtype
                dev = x1._device
                if x2._value.dtype is dt and x2._device is dev and dt in ok:
                    try:
                        out = impls[dev.backend](v1, x2._value)
                    except Exception:
                        pass   # the general path below gives the clear error
                    else:
                        a = new(Array)
                        a._value = out
                        a._device = dev
                        if st.tape is not None:   # an eager grad is recording
                            st.tape.record(prim, _NO_PARAMS, (x1, x2), (a,))
                        return a
        elif (t1 is Array or t2 is Array) and _state.evaluate:
            x, scalar = (x1, x2) if t1 is Array else (x2, x1)
            ts = type(scalar)
            v, dev = x._value, x._device
            dt = v.dtype
            if dt.kind in kinds and (ts is float and dt.kind == "f" or ts is int and dt.kind != "b"):
                s = dt.type(scalar)
                try:
                    out = impls[dev.backend](v, s) if t1 is Array else impls[dev.backend](s, v)
                except Exception:
                    pass
                else:
                    a = new(Array)
                    a._value = out
                    a._device = dev
                    if _state.tape is not None:
                        c = wrap(s, dev)
                        _state.tape.record(prim, _NO_PARAMS, (x, c) if t1 is Array else (c, x), (a,))
                    return a
        return lax_fn(*promote(name, x1, x2))
    op.__name__ = name
    op.__doc__ = doc or f"Elementwise ``{name}`` with broadcasting and type promotion: ``fnp.{name}(x1, x2)``."
    return _accelerated(op, prim, ok)


def _accelerated(op, prim, ok):
    """``op`` behind the C fast path of flfun/_dispatch.c when it was built (``op`` stays its fallback)."""
    try:
        from flfun import _dispatch
    except ImportError:
        return op
    _dispatch.setup(Array, _state, _FLOATS)
    fast = _dispatch.BinaryOp(prim.impls, ok, op)
    fast.__name__, fast.__qualname__, fast.__doc__, fast.__wrapped__ = op.__name__, op.__name__, op.__doc__, op
    return fast


add = _binary(lax.add_p, lax.add, "add", doc="""Elementwise ``x1 + x2``.

    Example::

        >>> fnp.add(fnp.ones(2), 1.0).tolist()
        [2.0, 2.0]
    """)
subtract = _binary(lax.sub_p, lax.sub, "subtract")
multiply = _binary(lax.mul_p, lax.mul, "multiply")
maximum = _binary(lax.max_p, lax.max, "maximum")
minimum = _binary(lax.min_p, lax.min, "minimum")
_divide = _binary(lax.div_p, lax.div, "divide", kinds="f")


def _divide_any(x1, x2, /):
    """True division; integer inputs are promoted to the default float dtype: ``fnp.divide(1, 2) == 0.5``."""
    if type(x1) is Array and x1._value.dtype.kind == "f" or type(x2) is Array and x2._value.dtype.kind == "f":
        return getattr(_divide, "__wrapped__", _divide)(x1, x2)
    a, b = promote("divide", x1, x2, to_float=True)
    return lax.div(a, b)


_divide_any.__name__ = "divide"
divide = _accelerated(_divide_any, lax.div_p, _FLOATS)


true_divide = divide


def _cmp(lax_fn, name):
    def op(x1, x2, /):
        return lax_fn(*promote(name, x1, x2))
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` comparison, returning bool: ``fnp.{name}(x1, x2)``."
    return op


equal, not_equal, less, less_equal, greater, greater_equal = (
    _cmp(f, n) for f, n in ((lax.eq, "equal"), (lax.ne, "not_equal"), (lax.lt, "less"), (lax.le, "less_equal"),
                            (lax.gt, "greater"), (lax.ge, "greater_equal")))


def _bitwise(lax_fn, name):
    def op(x1, x2, /):
        a, b = promote(name, x1, x2)
        if a.dtype.kind not in "iub":
            raise TypeError(f"{name}: requires integer or boolean inputs, got {a.dtype}")
        return lax_fn(a, b)
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` of integer or boolean arrays: ``fnp.{name}(x1, x2)``."
    return op


bitwise_and, bitwise_or, bitwise_xor = (_bitwise(f, n) for f, n in (
    (lax.and_, "bitwise_and"), (lax.or_, "bitwise_or"), (lax.xor, "bitwise_xor")))


def _logical(lax_fn, name):
    def op(x1, x2, /):
        return lax_fn(_to_bool(x1), _to_bool(x2))
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` (inputs are cast to bool): ``fnp.{name}(x1, x2)``."
    return op


def _to_bool(x):
    x = asarray_like(x)
    return x if x.dtype == dtypes.bool_ else lax.ne(x, lax.convert_element_type(asarray_like(0), x.dtype))


logical_and, logical_or, logical_xor = (_logical(f, n) for f, n in (
    (lax.and_, "logical_and"), (lax.or_, "logical_or"), (lax.xor, "logical_xor")))


def logical_not(x, /):
    """Elementwise ``not x`` as bool."""
    return lax.not_(_to_bool(x))


def invert(x, /):
    """Bitwise NOT (logical NOT for bool)."""
    x = asarray_like(x)
    if x.dtype.kind not in "iub":
        raise TypeError(f"invert: requires integer or boolean input, got {x.dtype}")
    return lax.not_(x)


bitwise_not = bitwise_invert = invert


def left_shift(x1, x2, /):
    """Elementwise ``x1 << x2`` for integers."""
    a, b = promote("left_shift", x1, x2)
    return lax.shift_left(a, b)


def right_shift(x1, x2, /):
    """Elementwise arithmetic ``x1 >> x2`` for integers (logical for unsigned)."""
    a, b = promote("right_shift", x1, x2)
    return (lax.shift_right_logical if dtypes.is_unsigned(a.dtype) else lax.shift_right_arithmetic)(a, b)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


# ----------------------------------------------------------------------------------------------------- unary
def _float_unary(lax_fn, name):
    def op(x, /):
        return lax_fn(to_float(x))
    op.__name__ = name
    op.__doc__ = (f"Elementwise ``{name}`` (integers are promoted to the default float dtype): "
                  f"``fnp.{name}(x)``.")
    return op


exp, log, log1p, expm1, sqrt, sin, cos, tan, tanh, arcsin, arccos, arctan, sinh, cosh = (
    _float_unary(f, n) for f, n in (
        (lax.exp, "exp"), (lax.log, "log"), (lax.log1p, "log1p"), (lax.expm1, "expm1"), (lax.sqrt, "sqrt"),
        (lax.sin, "sin"), (lax.cos, "cos"), (lax.tan, "tan"), (lax.tanh, "tanh"), (lax.asin, "arcsin"),
        (lax.acos, "arccos"), (lax.atan, "arctan"), (lax.sinh, "sinh"), (lax.cosh, "cosh")))
asin, acos, atan = arcsin, arccos, arctan


def _num_unary(lax_fn, name):
    def op(x, /):
        x = asarray_like(x)
        if x.dtype == dtypes.bool_:
            raise TypeError(f"{name}: not defined for boolean input")
        return lax_fn(x)
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}``: ``fnp.{name}(x)``."
    return op


negative, absolute, sign = (_num_unary(f, n) for f, n in (
    (lax.neg, "negative"), (lax.abs, "absolute"), (lax.sign, "sign")))
abs = absolute


def positive(x, /):
    """Elementwise ``+x`` (a copy-free identity)."""
    return asarray_like(x)


def _rounding(lax_fn, name):
    def op(x, /):
        x = asarray_like(x)
        return lax_fn(x) if dtypes.is_float(x.dtype) else x
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}``; integers are returned unchanged: ``fnp.{name}(x)``."
    return op


floor, ceil = _rounding(lax.floor, "floor"), _rounding(lax.ceil, "ceil")


def trunc(x, /):
    """Round toward zero."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return x
    return lax.select(lax.lt(x, _zero(x)), lax.ceil(x), lax.floor(x))


def round(x, /, decimals: int = 0):
    """Round half to even (``decimals`` digits): ``fnp.round(fnp.asarray([0.5, 1.5])) -> [0., 2.]``."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return x
    if decimals == 0:
        return lax.round(x)
    scale = 10.0 ** decimals
    return divide(lax.round(multiply(x, scale)), scale)


around = round


def _zero(x):
    return lax.convert_element_type(asarray_like(0), x.dtype)


def isfinite(x, /):
    """Elementwise finiteness test (always True for integers)."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return _full_bool(x, True)
    return lax.is_finite(x)


def isnan(x, /):
    """Elementwise NaN test."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return _full_bool(x, False)
    return lax.ne(x, x)


def isinf(x, /):
    """Elementwise test for +inf or -inf."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return _full_bool(x, False)
    return lax.and_(lax.not_(lax.is_finite(x)), lax.eq(x, x))


def _full_bool(x, value: bool):
    from flfun.primitives.shape import full
    return full(x.shape, value, dtypes.bool_)


def square(x, /):
    """Elementwise ``x * x``."""
    return lax.integer_pow(asarray_like(x), 2)


def reciprocal(x, /):
    """Elementwise ``1 / x``."""
    x = to_float(x)
    return lax.div(_one(x), x)


def _one(x):
    return lax.convert_element_type(asarray_like(1), x.dtype)


def power(x1, x2, /):
    """Elementwise ``x1 ** x2``; a Python-int exponent uses repeated multiplication (``integer_pow``)."""
    if type(x2) is int and isinstance(x1, Array) and (x2 >= 0 or dtypes.is_float(x1.dtype)):
        return lax.integer_pow(x1, x2)
    a, b = promote("power", x1, x2)
    return lax.pow(a, b)


pow = power


def float_power(x1, x2, /):
    """``x1 ** x2`` computed in float64."""
    return power(asarray_like(x1).astype(np.float64), asarray_like(x2).astype(np.float64))


def remainder(x1, x2, /):
    """Python-style modulus: the result has the sign of the divisor."""
    a, b = promote("remainder", x1, x2)
    r = lax.rem(a, b)
    if dtypes.is_unsigned(a.dtype):
        return r
    z = _zero(r)
    fix = lax.and_(lax.ne(r, z), lax.ne(lax.lt(r, z), lax.lt(b, z)))
    return lax.select(fix, lax.add(r, b), r)


mod = remainder


def fmod(x1, x2, /):
    """C-style remainder: the result has the sign of the dividend."""
    return lax.rem(*promote("fmod", x1, x2))


def floor_divide(x1, x2, /):
    """Elementwise ``floor(x1 / x2)``."""
    a, b = promote("floor_divide", x1, x2)
    if dtypes.is_float(a.dtype):
        return lax.floor(lax.div(a, b))
    q = lax.div(a, b)
    if dtypes.is_unsigned(a.dtype):
        return q
    z = _zero(a)
    fix = lax.and_(lax.ne(lax.rem(a, b), z), lax.ne(lax.lt(a, z), lax.lt(b, z)))
    return lax.select(fix, lax.sub(q, _one(q)), q)


def divmod(x1, x2, /):
    """``(floor_divide(x1, x2), remainder(x1, x2))``."""
    return floor_divide(x1, x2), remainder(x1, x2)


def arctan2(x1, x2, /):
    """Elementwise angle of the point ``(x2, x1)``."""
    a, b = promote("arctan2", x1, x2, to_float=True)
    return lax.atan2(a, b)


atan2 = arctan2


def nextafter(x1, x2, /):
    """The next representable float after ``x1`` in the direction of ``x2``: ``fnp.nextafter(1.0, 2.0) > 1.0``."""
    return lax.nextafter(*promote("nextafter", x1, x2, to_float=True))


def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` elementwise."""
    a, b = promote("hypot", x1, x2, to_float=True)
    return lax.sqrt(lax.add(lax.mul(a, a), lax.mul(b, b)))


def log2(x, /):
    """Base-2 logarithm."""
    x = to_float(x)
    return lax.div(lax.log(x), lax.convert_element_type(asarray_like(np.log(2.0)), x.dtype))


def log10(x, /):
    """Base-10 logarithm."""
    x = to_float(x)
    return lax.div(lax.log(x), lax.convert_element_type(asarray_like(np.log(10.0)), x.dtype))


def exp2(x, /):
    """``2 ** x``."""
    x = to_float(x)
    return lax.exp(lax.mul(x, lax.convert_element_type(asarray_like(np.log(2.0)), x.dtype)))


def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without overflow."""
    a, b = promote("logaddexp", x1, x2, to_float=True)
    m = lax.max(a, b)
    m_safe = lax.select(lax.is_finite(m), lax.stop_gradient(m), _zero(m))
    return lax.add(m_safe, lax.log(lax.add(lax.exp(lax.sub(a, m_safe)), lax.exp(lax.sub(b, m_safe)))))


def arcsinh(x, /):
    """Inverse hyperbolic sine."""
    x = to_float(x)
    return lax.log(lax.add(x, lax.sqrt(lax.add(lax.mul(x, x), _one(x)))))


def arccosh(x, /):
    """Inverse hyperbolic cosine."""
    x = to_float(x)
    return lax.log(lax.add(x, lax.sqrt(lax.sub(lax.mul(x, x), _one(x)))))


def arctanh(x, /):
    """Inverse hyperbolic tangent."""
    x = to_float(x)
    half = lax.convert_element_type(asarray_like(0.5), x.dtype)
    return lax.mul(half, lax.log(lax.div(lax.add(_one(x), x), lax.sub(_one(x), x))))


asinh, acosh, atanh = arcsinh, arccosh, arctanh


def copysign(x1, x2, /):
    """``|x1|`` with the sign of ``x2`` (including a zero's sign): ``fnp.copysign(1.0, -0.0) == -1.0``."""
    a, b = promote("copysign", x1, x2, to_float=True)
    return lax.select(signbit(b), lax.neg(lax.abs(a)), lax.abs(a))


def signbit(x, /):
    """True where the sign bit is set: negative values and ``-0.0`` (a NaN's sign is not seen: False).

    Example::

        >>> fnp.signbit(fnp.asarray([-1.0, -0.0, 0.0])).tolist()
        [True, True, False]
    """
    x = asarray_like(x)
    if dtypes.is_float(x.dtype):   # atan2(-0.0, -1) = -pi keeps a zero's sign, with no division by zero
        return lax.lt(lax.atan2(x, lax.neg(_one(x))), _zero(x))
    return lax.lt(x, _zero(x))


def clip(x, /, min=None, max=None):
    """Limit values to ``[min, max]`` (either may be None): ``fnp.clip(x, 0.0, 1.0)``."""
    x = asarray_like(x)
    if min is not None:
        x, lo = promote("clip", x, min)
        x = lax.max(x, lo)
    if max is not None:
        x, hi = promote("clip", x, max)
        x = lax.min(x, hi)
    return x


def where(condition, x1=None, x2=None, /):
    """``x1`` where ``condition`` else ``x2`` (broadcasting): ``fnp.where(x > 0, x, 0.0)``.

    The one-argument form (``nonzero``) has a data-dependent shape and is only available eagerly.
    """
    if x1 is None and x2 is None:
        from flfun.numpy import nonzero
        return nonzero(condition)
    if x1 is None or x2 is None:
        raise ValueError("where: pass both x1 and x2, or neither")
    a, b = promote("where", x1, x2)
    return lax.select_n(_to_bool(condition), b, a)


def conj(x, /):
    """Complex conjugate (the identity for the real dtypes flfun supports)."""
    return asarray_like(x)


conjugate = conj


def real(x, /):
    """Real part (the identity for real dtypes)."""
    return asarray_like(x)


def imag(x, /):
    """Imaginary part: zeros of ``x``'s dtype, as flfun has no complex dtypes (numpy's behaviour for real input)."""
    x = asarray_like(x)
    return lax.full(x.shape, 0, x.dtype)


def nan_to_num(x, /, nan=0.0, posinf=None, neginf=None):
    """Replace NaN and infinities by finite numbers."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return x
    info = np.finfo(x.dtype)
    x = where(isnan(x), nan, x)
    x = where(lax.and_(isinf(x), lax.gt(x, _zero(x))), info.max if posinf is None else posinf, x)
    return where(lax.and_(isinf(x), lax.lt(x, _zero(x))), info.min if neginf is None else neginf, x)


del builtins, _prims

__all__ = ["abs", "absolute", "acos", "acosh", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
           "arctan2", "arctanh", "around", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
           "bitwise_invert", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
           "bitwise_xor", "ceil", "clip", "conj", "conjugate", "copysign", "cos", "cosh", "divide", "divmod",
           "equal", "exp", "exp2", "expm1", "float_power", "floor", "floor_divide", "fmod", "greater",
           "greater_equal", "hypot", "imag", "nextafter", "invert", "isfinite", "isinf", "isnan", "left_shift", "less", "less_equal",
           "log", "log10", "log1p", "log2", "logaddexp", "logical_and", "logical_not", "logical_or",
           "logical_xor", "maximum", "minimum", "mod", "multiply", "nan_to_num", "negative", "not_equal",
           "positive", "pow", "power", "real", "reciprocal", "remainder", "right_shift", "round", "sign",
           "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "true_divide", "trunc", "where"]
