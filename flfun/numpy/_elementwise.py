"""Elementwise functions of ``flfun.numpy``: promotion to a common dtype, then one primitive.

The arithmetic binary functions (and so Array's operators) have an eager fast path (two same-dtype arrays, or an
array and a Python scalar, with no transform active): it calls the registered impl directly and leaves shape
checking to the abstract-eval rule only if the impl fails, which keeps ``x + y`` within a small factor of numpy
(benchmark W1). Where the optional C module flfun/backends/fastpath.c was built, it runs the array-array case without a
Python frame and calls this module's Python function for everything else.
"""
import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import trace_state, wrap
from flfun.numpy._asarray import no_out
from flfun.numpy.promotion import asarray_like, promote, to_float
from flfun.primitives import elementwise as lax

_NO_PARAMS: dict = {}
_FLOATS = frozenset(d for d in dtypes.SUPPORTED if d.kind == "f")


def _binary(prim, lax_fn, name: str, kinds: str = "iuf", doc: str = "", to_float: bool = False):
    impls = prim.impls
    new = object.__new__
    ok = frozenset(d for d in dtypes.SUPPORTED if d.kind in kinds)   # a set test is cheaper than dt.kind in kinds

    def op(x1, x2, /):
        st = trace_state
        t1, t2 = type(x1), type(x2)
        if st.evaluate and (t1 is Array or t2 is Array):
            x, other, t = (x1, x2, t2) if t1 is Array else (x2, x1, t1)
            v, dev = x._value, x._device
            dt = v.dtype
            if t is Array:
                s = other._value
                fast = s.dtype is dt and other._device is dev and dt in ok
            else:   # a weak Python scalar takes the array's dtype
                fast = dt in ok and (t is float and dt.kind == "f" or t is int and dt.kind != "b")
                s = dt.type(other) if fast else None
            if fast:
                try:
                    out = impls[dev.backend](v, s) if x is x1 else impls[dev.backend](s, v)
                except Exception:
                    pass   # the general path below gives the clear error
                else:
                    a = new(Array)
                    a._value = out
                    a._device = dev
                    if st.tape is not None:   # an eager grad is recording
                        c = other if t is Array else wrap(s, dev)
                        st.tape.record(prim, _NO_PARAMS, (x, c) if x is x1 else (c, x), (a,))
                    return a
        return lax_fn(*promote(name, x1, x2, to_float=to_float))
    return _accelerated(_named(op, name, doc or f"Elementwise ``{name}`` with broadcasting and type promotion: "
                                             f"``fnp.{name}(x1, x2)``."), prim, ok,
                        lambda x1, x2: lax_fn(*promote(name, x1, x2, to_float=to_float)))


def _named(op, name: str, doc: str):
    op.__name__, op.__doc__ = name, doc
    return op


def _accelerated(op, prim, ok, general):
    """``op`` behind the C fast path of flfun/backends/fastpath.c when it was built: ``op`` stays its fallback, and
    ``general`` (``op`` without its own fast path) gives the clear error when the impl raised."""
    try:
        from flfun.backends import fastpath
    except ImportError:
        return op
    fastpath.setup(Array, trace_state, _FLOATS)
    fast = fastpath.BinaryOp(prim.impls, ok, op, general)
    fast.__name__, fast.__qualname__, fast.__doc__, fast.__wrapped__ = op.__name__, op.__name__, op.__doc__, op
    return fast


add = _binary(lax.add_p, lax.add, "add", "iufc", doc="""Elementwise ``x1 + x2``.

    Example::

        >>> fnp.add(fnp.ones(2), 1.0).tolist()
        [2.0, 2.0]
    """)
subtract = _binary(lax.sub_p, lax.sub, "subtract", "iufc")
multiply = _binary(lax.mul_p, lax.mul, "multiply", "iufc")
maximum = _binary(lax.max_p, lax.max, "maximum")
minimum = _binary(lax.min_p, lax.min, "minimum")
divide = true_divide = _binary(lax.div_p, lax.div, "divide", kinds="fc", to_float=True, doc="True division; integer "
                               "inputs are promoted to the default float dtype: ``fnp.divide(1, 2) == 0.5``.")


def _promoted(lax_fn, name: str, doc: str, to_float: bool = False, kinds: str = ""):
    """``fnp.<name>(x1, x2)``: promote to a common dtype (a float one with ``to_float``), then ``lax_fn``."""
    def op(x1, x2, /):
        a, b = promote(name, x1, x2, to_float=to_float)
        if kinds and a.dtype.kind not in kinds:
            raise TypeError(f"{name}: requires integer or boolean inputs, got {a.dtype}")
        return lax_fn(a, b)
    return _named(op, name, doc)


equal, not_equal, less, less_equal, greater, greater_equal = (
    _promoted(f, n, f"Elementwise ``{n}`` comparison, returning bool: ``fnp.{n}(x1, x2)``.") for f, n in (
        (lax.eq, "equal"), (lax.ne, "not_equal"), (lax.lt, "less"), (lax.le, "less_equal"), (lax.gt, "greater"),
        (lax.ge, "greater_equal")))
bitwise_and, bitwise_or, bitwise_xor = (
    _promoted(f, n, f"Elementwise ``{n}`` of integer or boolean arrays: ``fnp.{n}(x1, x2)``.", kinds="iub")
    for f, n in ((lax.and_, "bitwise_and"), (lax.or_, "bitwise_or"), (lax.xor, "bitwise_xor")))
left_shift = bitwise_left_shift = _promoted(lax.shift_left, "left_shift", "Elementwise ``x1 << x2`` for integers.")
fmod = _promoted(lax.rem, "fmod", "C-style remainder: the result has the sign of the dividend.")
arctan2 = atan2 = _promoted(lax.atan2, "arctan2", "Elementwise angle of the point ``(x2, x1)``.", to_float=True)
nextafter = _promoted(lax.nextafter, "nextafter", "The next representable float after ``x1`` in the direction of "
                      "``x2``: ``fnp.nextafter(1.0, 2.0) > 1.0``.", to_float=True)


def to_bool(x):
    """``x`` as a bool array (``x != 0`` unless it is bool already)."""
    x = asarray_like(x)
    return x if x.dtype == dtypes.bool_ else lax.ne(x, _const(x, 0))


def _logical(f, n):
    return _named(lambda x1, x2, /: f(to_bool(x1), to_bool(x2)), n,
                  f"Elementwise ``{n}`` (inputs are cast to bool): ``fnp.{n}(x1, x2)``.")


logical_and, logical_or, logical_xor = (_logical(f, n) for f, n in (
    (lax.and_, "logical_and"), (lax.or_, "logical_or"), (lax.xor, "logical_xor")))


def logical_not(x, /):
    """Elementwise ``not x`` as bool."""
    return lax.not_(to_bool(x))


def invert(x, /):
    """Bitwise NOT (logical NOT for bool)."""
    x = asarray_like(x)
    if x.dtype.kind not in "iub":
        raise TypeError(f"invert: requires integer or boolean input, got {x.dtype}")
    return lax.not_(x)


bitwise_not = bitwise_invert = invert


def right_shift(x1, x2, /):
    """Elementwise arithmetic ``x1 >> x2`` for integers (logical for unsigned)."""
    a, b = promote("right_shift", x1, x2)
    return (lax.shift_right_logical if dtypes.is_unsigned(a.dtype) else lax.shift_right_arithmetic)(a, b)


bitwise_right_shift = right_shift


# ----------------------------------------------------------------------------------------------------- unary
def _const(x, value):
    """``value`` as a 0-d array of ``x``'s dtype."""
    return lax.full((), value, x.dtype)


def _float_unary(lax_fn, name, doc=None):
    return _named(lambda x, /: lax_fn(to_float(x)), name, doc or (
        f"Elementwise ``{name}`` (integers are promoted to the default float dtype): ``fnp.{name}(x)``."))


exp, log, log1p, expm1, sqrt, sin, cos, tan, tanh, arcsin, arccos, arctan, sinh, cosh = (
    _float_unary(f, n) for f, n in (
        (lax.exp, "exp"), (lax.log, "log"), (lax.log1p, "log1p"), (lax.expm1, "expm1"), (lax.sqrt, "sqrt"),
        (lax.sin, "sin"), (lax.cos, "cos"), (lax.tan, "tan"), (lax.tanh, "tanh"), (lax.asin, "arcsin"),
        (lax.acos, "arccos"), (lax.atan, "arctan"), (lax.sinh, "sinh"), (lax.cosh, "cosh")))
asin, acos, atan = arcsin, arccos, arctan
def _real_divide(x, c: float):
    """``x / c`` for a real constant ``c``, part by part for complex ``x`` (complex division would turn
    ``-inf + 0j`` into ``-inf + nan j``)."""
    if dtypes.is_complex(x.dtype):
        return lax.complex(_real_divide(lax.real(x), c), _real_divide(lax.imag(x), c))
    return lax.div(x, _const(x, c))


log2 = _float_unary(lambda x: _real_divide(lax.log(x), np.log(2.0)), "log2", "Base-2 logarithm.")
log10 = _float_unary(lambda x: _real_divide(lax.log(x), np.log(10.0)), "log10", "Base-10 logarithm.")
exp2 = _float_unary(lambda x: lax.pow(_const(x, 2), x), "exp2", "``2 ** x`` (exact at integers).")
asinh = arcsinh = _float_unary(lax.asinh, "arcsinh", "Inverse hyperbolic sine: ``fnp.asinh(-1e10) == -23.72...``.")
acosh = arccosh = _float_unary(lax.acosh, "arccosh", "Inverse hyperbolic cosine (nan below 1).")
atanh = arctanh = _float_unary(lax.atanh, "arctanh", "Inverse hyperbolic tangent (keeps a zero's sign).")
reciprocal = _float_unary(lambda x: lax.div(_const(x, 1), x), "reciprocal", "Elementwise ``1 / x``.")


def _real_only(name: str, x):
    """``x`` as an array; TypeError unless it is real (the functions the standard defines for real input only)."""
    x = asarray_like(x)
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{name}: not defined for complex input, got {x.dtype}")
    return x


def _num_unary(lax_fn, name):
    def op(x, /):
        x = asarray_like(x)
        if x.dtype == dtypes.bool_:
            raise TypeError(f"{name}: not defined for boolean input")
        return lax_fn(x)
    return _named(op, name, f"Elementwise ``{name}``: ``fnp.{name}(x)``.")


negative, absolute, sign = (_num_unary(f, n) for f, n in (
    (lax.neg, "negative"), (lax.abs, "absolute"), (lax.sign, "sign")))
abs = absolute


def positive(x, /):
    """Elementwise ``+x`` (a copy-free identity)."""
    return asarray_like(x)


def _if_float(on_float, name: str, doc: str, other=None):
    """``on_float(x)`` for floating-point ``x``; otherwise ``x`` itself, or all ``other`` (a bool) in x's shape."""
    def op(x, /):
        x = _real_only(name, x)
        if dtypes.is_float(x.dtype):
            return on_float(x)
        return x if other is None else lax.full(x.shape, other, dtypes.bool_)
    return _named(op, name, doc)


def _parts_any(test, name: str, doc: str, other: bool):
    """``test`` of a real ``x``; of a complex one, ``test(real) | test(imag)`` (``isnan``, ``isinf``)."""
    real_test = _if_float(test, name, doc, other)

    def op(x, /):
        x = asarray_like(x)
        if dtypes.is_complex(x.dtype):
            return lax.or_(real_test(lax.real(x)), real_test(lax.imag(x)))
        return real_test(x)
    return _named(op, name, doc)


floor, ceil = (_if_float(f, n, f"Elementwise ``{n}``; integers are returned unchanged: ``fnp.{n}(x)``.")
               for f, n in ((lax.floor, "floor"), (lax.ceil, "ceil")))
trunc = _if_float(lambda x: lax.select(lax.lt(x, _const(x, 0)), lax.ceil(x), lax.floor(x)), "trunc",
                  "Round toward zero.")
isnan = _parts_any(lambda x: lax.ne(x, x), "isnan", "Elementwise NaN test (complex: either part).", False)
isinf = _parts_any(lambda x: lax.and_(lax.not_(lax.is_finite(x)), lax.eq(x, x)), "isinf",
                   "Elementwise test for +inf or -inf (complex: either part).", False)


def isfinite(x, /):
    """Elementwise finiteness test (always True for integers; complex: both parts finite)."""
    x = asarray_like(x)
    if dtypes.is_complex(x.dtype):
        return lax.and_(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x) if dtypes.is_float(x.dtype) else lax.full(x.shape, True, dtypes.bool_)


def round(x, /, decimals: int = 0, out=None):
    """Round half to even to ``decimals`` digits (integers change only for negative ``decimals``, as in numpy):
    ``fnp.round(fnp.asarray([0.5, 1.5])) -> [0., 2.]``."""
    no_out("round", out)
    x = asarray_like(x)
    if not isinstance(decimals, (int, np.integer)):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    if dtypes.is_complex(x.dtype):
        return lax.complex(round(lax.real(x), decimals), round(lax.imag(x), decimals))
    if decimals >= 0 and not dtypes.is_float(x.dtype) or x.dtype == dtypes.bool_:
        return x
    if decimals == 0:
        return lax.round(x)
    y = x if dtypes.is_float(x.dtype) else lax.convert_element_type(x, dtypes.float64)   # numpy's way
    # as numpy: divide by 10**-decimals rather than multiply by the inexact 10**decimals
    scale_up, scale_down = (multiply, divide) if decimals > 0 else (divide, multiply)
    y = scale_down(lax.round(scale_up(y, 10.0 ** abs(decimals))), 10.0 ** abs(decimals))
    return y if y.dtype == x.dtype else lax.convert_element_type(y, x.dtype)


around = round


def square(x, /):
    """Elementwise ``x * x``."""
    return lax.integer_pow(asarray_like(x), 2)


def power(x1, x2, /):
    """Elementwise ``x1 ** x2``; a Python-int exponent uses repeated multiplication (``integer_pow``)."""
    if type(x2) is int and isinstance(x1, Array) and (x2 >= 0 or dtypes.is_float(x1.dtype)):
        return lax.integer_pow(x1, x2)
    return lax.pow(*promote("power", x1, x2))


pow = power


def float_power(x1, x2, /):
    """``x1 ** x2`` computed in float64."""
    return power(asarray_like(x1).astype(np.float64), asarray_like(x2).astype(np.float64))


def remainder(x1, x2, /):
    """Python-style modulus: the result has the sign of the divisor (a zero result too: ``1.0 % -1.0 == -0.0``)."""
    a, b = promote("remainder", x1, x2)
    r = lax.rem(a, b)
    if dtypes.is_unsigned(a.dtype):
        return r
    z = _const(r, 0)
    r = lax.select(lax.and_(lax.ne(r, z), lax.ne(lax.lt(r, z), lax.lt(b, z))), lax.add(r, b), r)
    return lax.select(lax.eq(r, z), copysign(z, b), r) if dtypes.is_float(a.dtype) else r


mod = remainder


def floor_divide(x1, x2, /):
    """Elementwise ``floor(x1 / x2)``."""
    a, b = promote("floor_divide", x1, x2)
    q = lax.div(a, b)
    if dtypes.is_float(a.dtype):
        return lax.floor(q)
    if dtypes.is_unsigned(a.dtype):
        return q
    z = _const(a, 0)
    fix = lax.and_(lax.ne(lax.rem(a, b), z), lax.ne(lax.lt(a, z), lax.lt(b, z)))
    return lax.select(fix, lax.sub(q, _const(q, 1)), q)


def divmod(x1, x2, /):
    """``(floor_divide(x1, x2), remainder(x1, x2))``."""
    return floor_divide(x1, x2), remainder(x1, x2)


def hypot(x1, x2, /):
    """``sqrt(x1**2 + x2**2)`` elementwise, without overflow or underflow in the squares (``inf`` if either is).

    Example::

        >>> fnp.hypot(fnp.asarray(3e38, "float32"), 1.0)    # squaring 3e38 overflows float32
        Array(3.e+38, dtype=float32)
    """
    a, b = promote("hypot", x1, x2, to_float=True)
    a, b = lax.abs(a), lax.abs(b)
    big, small = lax.max(a, b), lax.min(a, b)
    ratio = lax.div(small, lax.select(lax.eq(big, _const(big, 0)), _const(big, 1), big))
    out = lax.mul(big, lax.sqrt(lax.add(_const(big, 1), lax.mul(ratio, ratio))))
    inf = _const(big, np.inf)
    return lax.select(lax.or_(lax.eq(a, inf), lax.eq(b, inf)), inf, out)


def logaddexp(x1, x2, /):
    """``log(exp(x1) + exp(x2))`` without overflow."""
    a, b = promote("logaddexp", x1, x2, to_float=True)
    m = lax.max(a, b)
    m_safe = lax.select(lax.is_finite(m), lax.stop_gradient(m), _const(m, 0))
    return lax.add(m_safe, lax.log(lax.add(lax.exp(lax.sub(a, m_safe)), lax.exp(lax.sub(b, m_safe)))))


def copysign(x1, x2, /):
    """``|x1|`` with the sign of ``x2`` (including a zero's sign): ``fnp.copysign(1.0, -0.0) == -1.0``."""
    a, b = promote("copysign", x1, x2, to_float=True)
    return lax.select(signbit(b), lax.neg(lax.abs(a)), lax.abs(a))


def signbit(x, /):
    """True where the sign bit is set: negative values, ``-0.0`` and NaNs with the sign bit.

    Example::

        >>> fnp.signbit(fnp.asarray([-1.0, -0.0, 0.0])).tolist()
        [True, True, False]
    """
    x = asarray_like(x)
    if dtypes.is_float(x.dtype):
        return lax.signbit(x)
    if x.dtype == dtypes.bool_:
        return lax.full(x.shape, False, dtypes.bool_)
    return lax.lt(x, _const(x, 0))


def clip(x, /, min=None, max=None):
    """Limit values to ``[min, max]`` (either may be None): ``fnp.clip(x, 0.0, 1.0)``."""
    x = asarray_like(x)
    for bound, fn in ((min, lax.max), (max, lax.min)):
        if bound is not None:
            x = fn(*promote("clip", x, bound))
    return x


def where(condition, x1=None, x2=None, /):
    """``x1`` where ``condition`` else ``x2`` (broadcasting): ``fnp.where(x > 0, x, 0.0)``.

    The one-argument form (``nonzero``) has a data-dependent shape and is only available eagerly.
    """
    if x1 is None and x2 is None:
        from flfun.numpy._take import nonzero
        return nonzero(condition)
    if x1 is None or x2 is None:
        raise ValueError("where: pass both x1 and x2, or neither")
    a, b = promote("where", x1, x2)
    return lax.select_n(to_bool(condition), b, a)


def conj(x, /):
    """Complex conjugate (the identity for real input): ``fnp.conj(1 + 2j) == 1 - 2j``."""
    x = asarray_like(x)
    return lax.conj(x) if dtypes.is_complex(x.dtype) else x


conjugate = conj


def real(x, /):
    """Real part (the identity for real input): ``fnp.real(fnp.asarray(1 + 2j)) == 1.0``."""
    x = asarray_like(x)
    return lax.real(x) if dtypes.is_complex(x.dtype) else x


def imag(x, /):
    """Imaginary part (zeros of ``x``'s dtype for real input, as in numpy): ``fnp.imag(1 + 2j) == 2.0``."""
    x = asarray_like(x)
    return lax.imag(x) if dtypes.is_complex(x.dtype) else lax.full(x.shape, 0, x.dtype)


def angle(x, /, deg: bool = False):
    """The argument of complex ``x`` (``atan2(imag, real)``), in radians or with ``deg`` degrees.

    Example::

        >>> float(fnp.angle(1j))
        1.5707963...
    """
    x = to_float(x)
    out = lax.atan2(imag(x), real(x))
    return lax.mul(out, _const(out, 180 / np.pi)) if deg else out


def nan_to_num(x, /, copy: bool = True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN and infinities by finite numbers (``copy`` is accepted: Arrays are immutable)."""
    x = asarray_like(x)
    if not dtypes.is_float(x.dtype):
        return x
    info = np.finfo(x.dtype)
    big = where(lax.gt(x, _const(x, 0)), info.max if posinf is None else posinf, info.min if neginf is None else neginf)
    return where(isnan(x), nan, where(isinf(x), big, x))


__all__ = ["abs", "absolute", "acos", "acosh", "add", "angle", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
           "arctan2", "arctanh", "around", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_invert",
           "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip",
           "conj", "conjugate", "copysign", "cos", "cosh", "divide", "divmod", "equal", "exp", "exp2", "expm1",
           "float_power", "floor", "floor_divide", "fmod", "greater", "greater_equal", "hypot", "imag", "invert",
           "isfinite", "isinf", "isnan", "left_shift", "less", "less_equal", "log", "log10", "log1p", "log2",
           "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "mod",
           "multiply", "nan_to_num", "negative", "nextafter", "not_equal", "positive", "pow", "power", "real",
           "reciprocal", "remainder", "right_shift", "round", "sign", "signbit", "sin", "sinh", "sqrt", "square",
           "subtract", "tan", "tanh", "true_divide", "trunc", "where"]
