"""Elementwise impls against an array module ``xp``: module-level functions taking ``xp`` first, bound by
``impls(xp)``; ufuncs are used bare so that the eager path stays lean and the jit executor can pass ``out=``."""
from __future__ import annotations

import functools
import math

import numpy as np

from flfun.backends.xp.common import WritesOut, finish, in_float32


def rsqrt(xp, x, out=None):
    r = xp.sqrt(x, out=out)
    return xp.divide(1, r, out=r) if out is not None else 1 / r


def logistic(xp, x, out=None):
    e = xp.abs(x, out=xp.empty(x.shape, x.dtype))
    e = xp.exp(xp.negative(e, out=e), out=e)        # e^-|x| (never overflows)
    if xp.__name__ != "numpy":
        return finish(xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False), out)
    num = xp.minimum(x, 0, out=xp.empty(x.shape, x.dtype))
    num = xp.exp(num, out=num)                      # e^x for x < 0, else 1 (a masked multiply is 3x slower)
    out = xp.add(e, 1, out=e if out is None else out)
    return xp.divide(num, out, out=out)


_erf_scalar = np.vectorize(math.erf, otypes=[float])


def erf(xp, x):
    if xp.__name__ == "numpy":
        return _erf_scalar(x).astype(x.dtype, copy=False)
    from cupyx.scipy import special
    return special.erf(x)


def shift_right_logical(xp, x, y):
    unsigned = xp.dtype(f"uint{x.dtype.itemsize * 8}")
    out = xp.right_shift(xp.asarray(x).view(unsigned), y.astype(unsigned))
    return xp.where(y >= x.dtype.itemsize * 8, 0, out).astype(x.dtype)


def shift_left(xp, x, y):
    return xp.where(y >= x.dtype.itemsize * 8, 0, xp.left_shift(x, y)).astype(x.dtype)


def select_n(xp, which, *cases, out=None):
    if out is not None and out.size >= 4096 and len(cases) == 2 and which.dtype == bool and xp.__name__ == "numpy":
        return _bitselect(xp, which, cases[0], cases[1], out)
    if len(cases) == 1:
        res = xp.broadcast_to(cases[0], xp.broadcast_shapes(xp.shape(which), xp.shape(cases[0]))).copy()
    elif which.dtype == bool:
        res = xp.where(which, cases[1], cases[0])
    else:
        try:
            res = xp.choose(which, cases)
        except (ValueError, TypeError):    # out of range, more than 64 cases or a uint64 selector
            res = choose_many(xp, which, cases)
    return finish(res, out)


def choose_many(xp, which, cases):
    """``xp.choose`` by one ``where`` per case, for what it refuses; an out-of-range selector is an error."""
    lo, hi = (which.min(), which.max()) if which.size else (0, 0)
    if lo < 0 or hi >= len(cases):
        raise ValueError(f"select_n: the selector must lie in [0, {len(cases)}) to pick one of "
                         f"{len(cases)} cases, got values in [{lo}, {hi}]")
    res = cases[-1]
    for k in range(len(cases) - 1):
        res = xp.where(which == k, cases[k], res)
    return res


def integer_pow(xp, x, *, y, out=None):
    if y == 2:
        return xp.square(x, out=out)
    if y == 1:
        return finish(x, out)
    if 3 <= y <= 8:      # repeated multiplication: xp.power on floats is ~50x slower than a multiply
        if out is None or xp.may_share_memory(out, x):
            acc = x * x
            for _ in range(y - 2):
                acc = acc * x
            return finish(acc, out)
        xp.multiply(x, x, out=out)
        for _ in range(y - 2):
            xp.multiply(out, x, out=out)
        return out
    return finish(xp.power(x, y).astype(x.dtype, copy=False), out)


def div(xp, x, y, out=None):
    if x.dtype.kind in "iu":   # integer division truncates toward zero (C semantics, like lax.div)
        q = xp.floor_divide(x, y)
        fix = (xp.remainder(x, y) != 0) & ((x < 0) != (y < 0))
        return (q + fix).astype(x.dtype, copy=False)
    return xp.true_divide(x, y, out=out)


def clamp(xp, lo, x, hi):
    return xp.minimum(xp.maximum(x, lo), hi)


def convert_element_type(xp, x, *, new_dtype, weak_type=False):
    if x.dtype.kind == "c" and xp.dtype(new_dtype).kind != "c":
        x = xp.real(x)                 # the real part, as JAX (and numpy, with a warning) take it
    return x.astype(new_dtype)


def complex_(xp, x, y):
    out = xp.empty(xp.broadcast_shapes(xp.shape(x), xp.shape(y)), xp.result_type(x, xp.complex64))
    out.real, out.imag = x, y          # (not x + 1j * y: 1j * inf is nan + inf j)
    return out


def rem(xp, x, y):
    return xp.fmod(x, y)     # (not the bare ufunc: jit gives it no out=, as before)


def expm1(xp, x, out=None):
    if x.dtype.kind != "c":
        return xp.expm1(x, out=out)
    # numpy's complex expm1 gives nan + nan j at infinities: exp(x) - 1 is right there; expm1(-0 + 0j) = +0 + 0j
    res = xp.where(xp.isfinite(x), xp.expm1(x), xp.exp(x) - 1)
    return finish(xp.where(x == 0, complex_(xp, xp.zeros_like(x.real), x.imag), res), out)


def tanh(xp, x, out=None):
    if x.dtype.kind != "c":
        return xp.tanh(x, out=out)
    # tanh(+-inf + i y) = +-1 + 0 j with the sign of y (the standard's special case)
    fix = xp.isinf(x.real) & xp.isfinite(x.imag)
    return finish(xp.where(fix, complex_(xp, xp.sign(x.real), xp.copysign(0.0, x.imag)), xp.tanh(x)).astype(
        x.dtype), out)


def real(xp, x):
    return xp.real(x).copy()       # a fresh buffer, not a view into x's


def imag(xp, x):
    return xp.imag(x).copy()


def _identity(xp, x):
    return x


def _barrier(xp, *xs, remat=(0, 0)):
    return list(xs)


# primitive name -> the ufunc's name in xp (the same name for the first ones)
UFUNCS = {**{n: n for n in "sign exp log log1p sqrt sin cos tan sinh cosh floor ceil signbit add nextafter".split()},
          "neg": "negative", "abs": "absolute", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
          "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "is_finite": "isfinite", "not": "invert",
          "sub": "subtract", "mul": "multiply", "pow": "power", "max": "maximum", "min": "minimum",
          "atan2": "arctan2", "conj": "conjugate", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
          "shift_right_arithmetic": "right_shift", "eq": "equal", "ne": "not_equal", "lt": "less",
          "le": "less_equal", "gt": "greater", "ge": "greater_equal"}


def impls(xp) -> dict:
    """name -> impl for ``xp``: its ufuncs bare (so the eager path stays lean and jit can pass ``out=``), the
    functions above with ``xp`` bound."""
    bound = {name: functools.partial(fn, xp) for name, fn in (
        ("erf", erf), ("rem", rem), ("shift_left", shift_left),
        ("shift_right_logical", shift_right_logical), ("clamp", clamp),
        ("convert_element_type", convert_element_type), ("complex", complex_),
        ("real", real), ("imag", imag), ("stop_gradient", _identity),
        ("optimization_barrier", _barrier))}
    writes = {name: WritesOut(functools.partial(fn, xp)) for name, fn in (
        ("rsqrt", rsqrt), ("div", div), ("select_n", select_n), ("logistic", logistic), ("expm1", expm1),
        ("tanh", tanh), ("integer_pow", integer_pow))}
    return {**{name: getattr(xp, u) for name, u in UFUNCS.items()}, **bound, **writes,
            "round": WritesOut(in_float32(xp, xp.round))}      # numpy has no bfloat16 round


def _bitselect(xp, which, on_false, on_true, out):
    """``where(which, on_true, on_false)`` into ``out`` with bit operations: numpy's where branches per element
    and a random mask (ReLU's) makes it ~8x slower. Bit-identical to where, NaN payloads and -0.0 included."""
    u = xp.dtype(f"u{out.dtype.itemsize}")
    o, f, t = out.view(u), xp.asarray(on_false).view(u), xp.asarray(on_true).view(u)
    if f.ndim == 0 and f == 0:
        xp.multiply(t, which, out=o)                 # the bits of on_true times 0 or 1
    else:                                            # f ^ ((f ^ t) * which)
        xp.bitwise_xor(f, t, out=o)
        xp.multiply(o, which, out=o)
        xp.bitwise_xor(o, f, out=o)
    return out
