"""More elementwise math of ``flfun.numpy`` (numpy's names beyond the array API), each a composition of the
primitives behind ``_elementwise.py``, and the closeness / equality tests built on them."""
import numpy as np

from flfun import dtypes
from flfun.lax_control import while_loop
from flfun.primitives.base import full
from flfun.primitives.reduce import reduce_or
from flfun.numpy._elementwise import (abs, add, bitwise_and, divide, equal, exp, floor, floor_divide, isfinite,
                                      isinf, isnan, log, logaddexp, logical_and, logical_or, maximum, minimum,
                                      multiply, nextafter, power, remainder, right_shift, round, sign, sin, subtract,
                                      trunc, where)
from flfun.numpy._asarray import no_out
from flfun.numpy._reductions import all as _all
from flfun.numpy.promotion import asarray_like, promote, to_float

_LN2 = 0.6931471805599453

__all__ = ["cbrt", "deg2rad", "rad2deg", "degrees", "radians", "fabs", "fmax", "fmin", "frexp", "ldexp", "gcd",
           "lcm", "heaviside", "i0", "isneginf", "isposinf", "logaddexp2", "modf", "rint", "sinc", "spacing",
           "bitwise_count", "isclose", "allclose", "array_equal", "array_equiv"]


def cbrt(x, /):
    """Real cube root, negative for negative ``x``: ``fnp.cbrt(-8.0) == -2.0``."""
    x = to_float(x)
    return multiply(sign(x), power(abs(x), 1.0 / 3.0))


def deg2rad(x, /):
    """Degrees to radians: ``fnp.deg2rad(180.0) == pi``."""
    return multiply(to_float(x), np.pi / 180)


def rad2deg(x, /):
    """Radians to degrees: ``fnp.rad2deg(fnp.pi) == 180.0``."""
    return multiply(to_float(x), 180 / np.pi)


radians, degrees = deg2rad, rad2deg


def fabs(x, /):
    """Absolute value as a float: ``fnp.fabs(-2) == 2.0``."""
    return abs(to_float(x))


def fmax(x1, x2, /):
    """Elementwise maximum that ignores a NaN (NaN only where both are): ``fnp.fmax(nan, 1.0) == 1.0``."""
    a, b = promote("fmax", x1, x2)
    return where(isnan(a), b, where(isnan(b), a, maximum(a, b)))


def fmin(x1, x2, /):
    """Elementwise minimum that ignores a NaN: ``fnp.fmin(nan, 1.0) == 1.0``."""
    a, b = promote("fmin", x1, x2)
    return where(isnan(a), b, where(isnan(b), a, minimum(a, b)))


def _exp2_int(n, dtype):
    """``2.0 ** n`` for integer arrays ``n``, exact (``n`` split in two halves so neither overflows)."""
    half = right_shift(n, 1)
    return multiply(power(full((), 2.0, dtype), half.astype(dtype)),
                    power(full((), 2.0, dtype), subtract(n, half).astype(dtype)))


def ldexp(x1, x2, /):
    """``x1 * 2 ** x2`` for integer ``x2``, exact over the whole float range: ``fnp.ldexp(3.0, 2) == 12.0``."""
    x, n = to_float(x1), asarray_like(x2)
    if not dtypes.is_int(n.dtype):
        raise TypeError(f"ldexp: x2 must be an integer array, got {n.dtype}")
    half = right_shift(n, 1)   # two steps keep 2**n finite where x * 2**n is
    return multiply(multiply(x, _exp2_int(half, x.dtype)), _exp2_int(subtract(n, half), x.dtype))


def frexp(x, /):
    """``(mantissa, exponent)`` with ``x == mantissa * 2**exponent`` and ``0.5 <= |mantissa| < 1`` (0, inf and
    NaN keep exponent 0); the exponent is int32.

    Example::

        >>> [a.tolist() for a in fnp.frexp(fnp.asarray([8.0, -3.0]))]
        [[0.5, -0.75], [4, 2]]
    """
    x = to_float(x)
    ok = logical_and(isfinite(x), x != 0)
    safe = where(ok, abs(x), 1.0)
    e = add(floor(divide(log(safe), _LN2)), 1.0).astype(dtypes.int32)
    m = ldexp(safe, -e)
    e = where(m >= 1, e + 1, where(m < 0.5, e - 1, e))    # log rounding at exact powers of two
    m = ldexp(x, -e)
    return where(ok, m, x), where(ok, e, 0)


def gcd(x1, x2, /):
    """Greatest common divisor of integers (``gcd(0, 0) == 0``), by Euclid's algorithm in a while loop.

    Example::

        >>> fnp.gcd(fnp.asarray([12, 7]), 18).tolist()
        [6, 1]
    """
    a, b = promote("gcd", x1, x2)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"gcd: requires integer inputs, got {a.dtype}")
    a, b = (abs(a), abs(b)) if a.shape == b.shape else (abs(a) + 0 * b, abs(b) + 0 * a)

    def step(ab):
        a, b = ab
        zero = b == 0
        return where(zero, a, b), where(zero, 0, remainder(a, where(zero, 1, b)))
    return while_loop(lambda ab: reduce_or(ab[1] != 0, tuple(range(ab[1].ndim))), step, (a, b))[0]


def lcm(x1, x2, /):
    """Least common multiple of integers (0 if either is 0): ``fnp.lcm(4, 6) == 12``."""
    a, b = promote("lcm", x1, x2)
    g = gcd(a, b)
    return abs(multiply(floor_divide(a, where(g == 0, 1, g)), b))


def heaviside(x1, x2, /):
    """Step function: 0 for ``x1 < 0``, ``x2`` at 0, 1 for ``x1 > 0``: ``fnp.heaviside(0.0, 0.5) == 0.5``."""
    x, h0 = promote("heaviside", x1, x2, to_float=True)
    return where(x > 0, 1.0, where(x < 0, 0.0, h0)).astype(x.dtype)


def i0(x, /):
    """Modified Bessel function of the first kind, order 0 (its power series up to |x| = 30, the asymptotic
    expansion beyond): ``fnp.i0(0.0) == 1.0``."""
    x = to_float(x)
    ax = abs(x)
    small = where(ax <= 30, ax, 0.0)
    q = multiply(small, small) / 4
    term = total = 1.0
    for k in range(1, 75):
        term = term * q / (k * k)
        total = total + term
    big = where(ax <= 30, 31.0, ax)
    term = series = 1.0
    for k in range(1, 12):
        term = term * (2 * k - 1) ** 2 / (8 * k * big)
        series = series + term
    return where(ax <= 30, total, exp(big) / (2 * np.pi * big) ** 0.5 * series)


def isposinf(x, /, out=None):
    """True at +inf."""
    no_out("isposinf", out)
    x = asarray_like(x)
    return logical_and(isinf(x), x > 0)


def isneginf(x, /, out=None):
    """True at -inf."""
    no_out("isneginf", out)
    x = asarray_like(x)
    return logical_and(isinf(x), x < 0)


def logaddexp2(x1, x2, /):
    """``log2(2**x1 + 2**x2)`` without overflow: ``fnp.logaddexp2(1.0, 1.0) == 2.0``."""
    a, b = promote("logaddexp2", x1, x2, to_float=True)
    return logaddexp(a * _LN2, b * _LN2) / _LN2


def modf(x, /, out=None):
    """``(fractional part, integral part)``, both with the sign of ``x``: ``fnp.modf(-2.5) -> (-0.5, -2.0)``."""
    no_out("modf", out)
    x = to_float(x)
    t = trunc(x)
    return where(isinf(x), 0.0 * sign(x), subtract(x, t)), t


def rint(x, /):
    """Round to the nearest integer, half to even (floats stay floats): ``fnp.rint(2.5) == 2.0``."""
    return round(to_float(x))


def sinc(x, /):
    """Normalised sinc, ``sin(pi x) / (pi x)`` and 1 at 0 (its derivatives at 0 are those of the limit)."""
    x = to_float(x)
    zero = x == 0
    px = where(zero, 1.0, x) * np.pi
    # near 0 the Taylor series 1 - (pi x)^2 / 6 carries the right first and second derivative
    return where(zero, 1 - multiply(x * np.pi, x * np.pi) / 6, sin(px) / px)


def spacing(x, /):
    """Distance from ``x`` to the next float away from zero (negative for negative ``x``)."""
    x = to_float(x)
    return subtract(nextafter(x, where(x < 0, -np.inf, np.inf).astype(x.dtype)), x)


def bitwise_count(x, /):
    """Number of 1 bits in ``|x|`` (uint8): ``fnp.bitwise_count(7) == 3``."""
    x = asarray_like(x)
    if x.dtype.kind not in "iub":
        raise TypeError(f"bitwise_count: requires integer or boolean input, got {x.dtype}")
    v = abs(x) if dtypes.is_int(x.dtype) and not dtypes.is_unsigned(x.dtype) else x
    v = v.astype(np.dtype(f"uint{8 * x.dtype.itemsize}")) if x.dtype.kind != "b" else v.astype(dtypes.uint8)
    count = v * 0
    for _ in range(8 * v.dtype.itemsize):
        count = add(count, bitwise_and(v, 1))
        v = right_shift(v, 1)
    return count.astype(dtypes.uint8)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """``|a - b| <= atol + rtol * |b|`` elementwise (infinities equal only to themselves).

    Example::

        >>> fnp.isclose(fnp.asarray([1.0, 1.1]), 1.0).tolist()
        [True, False]
    """
    a, b = promote("isclose", a, b)
    if not dtypes.is_float(a.dtype):
        return equal(a, b)
    close = abs(subtract(a, b)) <= add(atol, multiply(rtol, abs(b)))
    close = where(logical_or(isinf(a), isinf(b)), equal(a, b), close)
    return logical_or(close, logical_and(isnan(a), isnan(b))) if equal_nan else close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """True when every element is ``isclose``: ``fnp.allclose(x, x + 1e-9)``."""
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan: bool = False) -> bool:
    """True when both have the same shape and elements (a 0-d bool Array; a Python False for differing shapes)."""
    a, b = asarray_like(a1), asarray_like(a2)
    if a.shape != b.shape:
        return False
    eq = equal(a, b)
    if equal_nan and dtypes.is_float(a.dtype) and dtypes.is_float(b.dtype):
        eq = logical_or(eq, logical_and(isnan(a), isnan(b)))
    return _all(eq)


def array_equiv(a1, a2) -> bool:
    """True when the two broadcast together and are equal elementwise."""
    a, b = asarray_like(a1), asarray_like(a2)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return False
    return _all(equal(a, b))

