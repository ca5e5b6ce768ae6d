"""Elementwise primitives: unary math, broadcasting binary ops, comparisons, select, clamp, casts.

Binary primitives broadcast like numpy but require one dtype (``flfun.numpy`` promotes first). Each block holds
a primitive's shape rule, jvp, transpose (for linear ones) and batching rule; impls are in
``flfun/backends/xp/elementwise.py``.
"""
from __future__ import annotations

import math
from typing import Callable

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, is_weak, short
from flfun.primitives.base import convert_element_type, full, linear  # noqa: F401  (elementwise.convert_element_type)
from flfun.primitives.rules import (broadcast_shapes, broadcast_to_shape, broadcasting_batch, check_kinds, check_same,
                                    guarded_jvp, instantiate, is_undefined, is_zero, jvp_rule, naryop_abstract_eval,
                                    unbroadcast, vectorized_batch, zero_jvp)


def _const(like, value):
    """A 0-d constant with ``like``'s dtype (it broadcasts against ``like``)."""
    return full((), value, like.dtype)


def _unary(name: str, kinds: str = "inexact", tangent=None, out_dtype=None, **facts) -> tuple[Primitive, Callable]:
    """A unary elementwise primitive and its wrapper; ``tangent(t, x, out)`` gives its jvp (None: piecewise
    constant)."""
    p = Primitive(name, **facts)
    p.def_abstract_eval(naryop_abstract_eval(name, kinds, out_dtype))
    p.def_batch(vectorized_batch(p))
    if tangent is None:
        p.def_jvp(zero_jvp(p))
    else:
        p.def_jvp(guarded_jvp(p, lambda out, primals, tangents: tangent(tangents[0], primals[0], out), False))
        p.elementwise_tangent = tangent   # J is diagonal: J^T ct = tangent(ct, x, out) (the eager tape uses it)
    return p, _wrapper(p, False)


def _binary(name: str, kinds: str = "number", out_dtype=None, jvp=None, ints: bool = False, **facts
            ) -> tuple[Primitive, Callable]:
    """A broadcasting binary primitive and its wrapper; ``jvp(out, primals, tangents)`` gives its output tangent
    (None: piecewise constant), which integer outputs get as a symbolic zero unless ``ints``."""
    p = Primitive(name, elementwise=True, **facts)
    p.def_abstract_eval(naryop_abstract_eval(name, kinds, out_dtype))
    p.def_batch(broadcasting_batch(p))
    if jvp is not None:
        p.def_jvp(guarded_jvp(p, jvp, float_only=not ints))
    elif out_dtype is not None or kinds in ("int", "intbool", "bool"):
        p.def_jvp(zero_jvp(p))
    return p, _wrapper(p, True)


def _wrapper(prim, binary: bool):
    fn = (lambda x, y: bind(prim, x, y)) if binary else (lambda x: bind(prim, x))
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = (f"Elementwise ``{prim.name}`` primitive with numpy broadcasting: ``lax.{prim.name}(x, y)``."
                  if binary else f"Elementwise ``{prim.name}`` primitive: ``lax.{prim.name}(x)``.")
    return fn


# ----------------------------------------------------------------------------------------------- unary math
neg_p, neg = _unary("neg", "number", lambda t, x, out: neg(t), linear_in="all", involution=True)
neg_p.def_transpose(lambda ct, x: [neg(ct)])


def _unit(z, size):
    """``z / |z|`` part by part (0 at 0), exact also for subnormal ``z``."""
    size = select(eq(size, _const(size, 0)), _const(size, 1), size)
    return complex(div(real(z), size), div(imag(z), size))


abs_p, abs = _unary("abs", "number", lambda t, x, out: mul(t, sign(x)) if x.dtype.kind != "c" else
                   real(mul(t, conj(_unit(x, out)))))     # d|z| = Re(conj(z / |z|) dz)
abs_p.elementwise_tangent = None      # not C-linear for complex z: the tape transposes its jvp instead
abs_p.def_abstract_eval(lambda x: ShapedArray(x.shape, dtypes.real_dtype(check_kinds("abs", "number", x) or x.dtype),
                                              is_weak(x)))
sign_p, sign = _unary("sign", "number")
exp_p, exp = _unary("exp", tangent=lambda t, x, out: mul(t, out))
log_p, log = _unary("log", tangent=lambda t, x, out: div(t, x))
log1p_p, log1p = _unary("log1p", tangent=lambda t, x, out: div(t, add(x, _const(x, 1))))
expm1_p, expm1 = _unary("expm1", tangent=lambda t, x, out: mul(t, add(out, _const(out, 1))))
sqrt_p, sqrt = _unary("sqrt", tangent=lambda t, x, out: div(t, mul(out, _const(out, 2))))
rsqrt_p, rsqrt = _unary("rsqrt", tangent=lambda t, x, out: mul(t, mul(div(out, x), _const(out, -0.5))))
sin_p, sin = _unary("sin", tangent=lambda t, x, out: mul(t, cos(x)))
cos_p, cos = _unary("cos", tangent=lambda t, x, out: neg(mul(t, sin(x))))
tan_p, tan = _unary("tan", tangent=lambda t, x, out: mul(t, add(_const(out, 1), mul(out, out))))
tanh_p, tanh = _unary("tanh", tangent=lambda t, x, out: mul(t, sub(_const(out, 1), mul(out, out))))
asin_p, asin = _unary("asin", tangent=lambda t, x, out: mul(t, rsqrt(sub(_const(x, 1), mul(x, x)))))
acos_p, acos = _unary("acos", tangent=lambda t, x, out: neg(mul(t, rsqrt(sub(_const(x, 1), mul(x, x))))))
atan_p, atan = _unary("atan", tangent=lambda t, x, out: div(t, add(_const(x, 1), mul(x, x))))
sinh_p, sinh = _unary("sinh", tangent=lambda t, x, out: mul(t, cosh(x)))
cosh_p, cosh = _unary("cosh", tangent=lambda t, x, out: mul(t, sinh(x)))
asinh_p, asinh = _unary("asinh", tangent=lambda t, x, out: mul(t, rsqrt(add(mul(x, x), _const(x, 1)))))
acosh_p, acosh = _unary("acosh", tangent=lambda t, x, out: mul(t, rsqrt(mul(sub(x, _const(x, 1)),
                                                                             add(x, _const(x, 1))))))
atanh_p, atanh = _unary("atanh", tangent=lambda t, x, out: div(t, sub(_const(x, 1), mul(x, x))))
logistic_p, logistic = _unary("logistic", "float", tangent=lambda t, x, out: mul(t, mul(out, sub(_const(out, 1), out))))
erf_p, erf = _unary("erf", "float", tangent=lambda t, x, out: mul(t, mul(_const(x, 2 / math.sqrt(math.pi)),
                                                                 exp(neg(mul(x, x))))))
floor_p, floor = _unary("floor", "float")
ceil_p, ceil = _unary("ceil", "float")
round_p, round = _unary("round", "float")
round.__doc__ += " Halves round to even, as in numpy (``jax.lax.round`` rounds them away from zero by default)."
is_finite_p, is_finite = _unary("is_finite", "float", out_dtype=dtypes.bool_)
signbit_p, signbit = _unary("signbit", "float", out_dtype=dtypes.bool_)   # the sign bit itself: -0.0 and -nan too
not_p, not_ = _unary("not", "intbool")

# integer_pow: x ** y for a static Python int y (the common x**2 stays one cheap primitive)
integer_pow_p = Primitive("integer_pow")


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    check_kinds("integer_pow", "number", x)
    if not isinstance(y, int) or (y < 0 and not dtypes.is_float(x.dtype)):
        raise TypeError(f"integer_pow: exponent must be a Python int (non-negative for integers), got {y!r} "
                        f"for {short(x)}")
    return ShapedArray(x.shape, x.dtype, is_weak(x))


@jvp_rule(integer_pow_p, float_only=False)
def _integer_pow_jvp(out, primals, tangents, *, y):
    (x,), (t,) = primals, tangents
    return mul(t, _const(x, 0) if y == 0 else mul(_const(x, y), integer_pow(x, y - 1)))


integer_pow_p.def_batch(vectorized_batch(integer_pow_p))


def integer_pow(x, y: int):
    """``x ** y`` for a static integer ``y``: ``lax.integer_pow(x, 2)``."""
    return bind(integer_pow_p, x, y=y)


# --------------------------------------------------------------------------------------------- binary arithmetic
def _sum_rule(dx, dy, both=None):
    """jvp from ``dx(tx, x, y, out)`` / ``dy(ty, x, y, out)``, the tangent parts of the nonzero tangents (added,
    or ``both(tx, ty, x, y, out)`` when both are), broadcast to the output."""
    def rule(out, primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        if is_zero(tx) or is_zero(ty):
            t = dy(ty, x, y, out) if is_zero(tx) else dx(tx, x, y, out)
        else:
            t = both(tx, ty, x, y, out) if both else add(dx(tx, x, y, out), dy(ty, x, y, out))
        return broadcast_to_shape(t, out.shape)
    return rule


def _ident(t, *_):
    return t


add_p, add = _binary("add", jvp=_sum_rule(_ident, _ident), ints=True, inplace=(0, 1), linear_in="all",
                     identities=((1, 0), (0, 0)))


@add_p.def_transpose
def _add_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None, unbroadcast(ct, y.aval) if is_undefined(y) else None]


sub_p, sub = _binary("sub", jvp=_sum_rule(_ident, lambda t, *_: neg(t), lambda tx, ty, *_: sub(tx, ty)), ints=True,
                     inplace=(0, 1), linear_in="all", identities=((1, 0),))


@sub_p.def_transpose
def _sub_transpose(ct, x, y):
    return [unbroadcast(ct, x.aval) if is_undefined(x) else None,
            unbroadcast(neg(ct), y.aval) if is_undefined(y) else None]


mul_p, mul = _binary("mul", jvp=_sum_rule(lambda t, x, y, out: mul(t, y), lambda t, x, y, out: mul(x, t)),
                     ints=True, inplace=(0, 1), linear_in="all", identities=((1, 1), (0, 1)))


@mul_p.def_transpose
def _mul_transpose(ct, x, y):
    if is_undefined(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


div_p, div = _binary("div", jvp=_sum_rule(lambda t, x, y, out: div(t, y),
                                          lambda t, x, y, out: div(neg(mul(out, t)), y),
                                          lambda tx, ty, x, y, out: div(sub(tx, mul(out, ty)), y)),
                     inplace=(0, 1), linear_in=(0,), identities=((1, 1),))


@div_p.def_transpose
def _div_transpose(ct, x, y):
    return [unbroadcast(div(ct, y), x.aval), None]


# d/dy = -trunc(x / y), and (x - out) / y is that quotient exactly in floating point
rem_p, rem = _binary("rem", "num", jvp=_sum_rule(_ident, lambda t, x, y, out: neg(mul(t, div(sub(x, out), y)))))
# d/dx = y * x**(y-1) stays finite at x == 0 for y >= 1; d/dy = log(x) * out with log(0) taken as 0
pow_p, pow = _binary("pow", jvp=_sum_rule(
    lambda t, x, y, out: mul(t, mul(y, pow(x, sub(y, _const(y, 1))))),
    lambda t, x, y, out: mul(t, mul(log(select_n(eq(x, _const(x, 0)), x, full(x.shape, 1, x.dtype))), out))))


def _minmax_rule(pick_x):
    def rule(out, primals, tangents):
        (x, y), (tx, ty) = primals, (broadcast_to_shape(instantiate(t), out.shape) for t in tangents)
        # ties split the tangent evenly (JAX's convention), so max(x, x) has derivative 1
        return select_n(pick_x(x, y), select_n(eq(x, y), ty, mul(add(tx, ty), _const(out, 0.5))), tx)
    return rule


max_p, max = _binary("max", "num", jvp=_minmax_rule(lambda x, y: gt(x, y)), ints=True)
min_p, min = _binary("min", "num", jvp=_minmax_rule(lambda x, y: lt(x, y)), ints=True)
atan2_p, atan2 = _binary("atan2", "float", jvp=_sum_rule(
    lambda t, x, y, out: mul(t, div(y, add(mul(x, x), mul(y, y)))),
    lambda t, x, y, out: neg(mul(t, div(x, add(mul(x, x), mul(y, y)))))))
# the next representable float after x towards y; d/dx = 1
nextafter_p, nextafter = _binary("nextafter", "float",
                                 jvp=_sum_rule(_ident, lambda t, x, y, out: full(out.shape, 0, out.dtype)))
and_p, and_ = _binary("and", "intbool")
or_p, or_ = _binary("or", "intbool")
xor_p, xor = _binary("xor", "intbool")
shift_left_p, shift_left = _binary("shift_left", "int")
shift_right_logical_p, shift_right_logical = _binary("shift_right_logical", "int")
shift_right_arithmetic_p, shift_right_arithmetic = _binary("shift_right_arithmetic", "int")
eq_p, eq = _binary("eq", "all", dtypes.bool_)
ne_p, ne = _binary("ne", "all", dtypes.bool_)
lt_p, lt = _binary("lt", "num", dtypes.bool_)
le_p, le = _binary("le", "num", dtypes.bool_)
gt_p, gt = _binary("gt", "num", dtypes.bool_)
ge_p, ge = _binary("ge", "num", dtypes.bool_)


# ------------------------------------------------------------------------------------------------ complex parts
def _part(name: str, kinds: str, out_dtype, **facts) -> tuple[Primitive, Callable]:
    """A linear unary primitive between complex and real values (``real``, ``imag``, ``conj``)."""
    p = Primitive(name, linear_in="all", **facts)
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, out_dtype(check_kinds(name, kinds, x) or x.dtype), is_weak(x)))
    p.def_batch(vectorized_batch(p))
    return p, _wrapper(p, False)


real_p, real = _part("real", "complex", dtypes.real_dtype)
linear(real_p)(lambda ct, x: [complex(ct, full(ct.shape, 0, ct.dtype))])
imag_p, imag = _part("imag", "complex", dtypes.real_dtype)
linear(imag_p)(lambda ct, x: [complex(full(ct.shape, 0, ct.dtype), neg(ct))])
conj_p, conj = _part("conj", "complex", lambda dt: dt, involution=True)
linear(conj_p)(lambda ct, x: [conj(ct)])
complex_p, complex = _binary("complex", "float", out_dtype=None, linear_in="all")
complex_p.def_abstract_eval(lambda x, y: ShapedArray(naryop_abstract_eval("complex", "float")(x, y).shape,
                                                     dtypes.complex_dtype(x.dtype)))
linear(complex_p)(lambda ct, x, y: [unbroadcast(real(ct), x.aval) if is_undefined(x) else None,
                                    unbroadcast(neg(imag(ct)), y.aval) if is_undefined(y) else None])
complex.__doc__ = "``x + 1j * y`` from two real arrays of one dtype: ``lax.complex(x, y)``."


# ------------------------------------------------------------------------------------------------- select_n
select_n_p = Primitive("select_n", linear_in="all", elementwise=True)


@select_n_p.def_abstract_eval
def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select_n: needs at least one case")
    if which.dtype != dtypes.bool_ and not dtypes.is_int(which.dtype):
        raise TypeError(f"select_n: the selector must be bool or integer, got {short(which)}")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError(f"select_n: a boolean selector picks between at most 2 cases, got {len(cases)}")
    check_same("select_n", "cases", cases)
    return ShapedArray(broadcast_shapes("select_n", which, *cases), cases[0].dtype, all(is_weak(c) for c in cases))


@jvp_rule(select_n_p, which=slice(1, None))
def _select_n_jvp(out, primals, tangents):
    return broadcast_to_shape(select_n(primals[0], *map(instantiate, tangents[1:])), out.shape)


@select_n_p.def_transpose
def _select_n_transpose(ct, which, *cases):
    zeros = full(ct.shape, 0, ct.dtype)    # some case is the linear input, so it is needed
    return [None] + [unbroadcast(select_n(which, *[ct if j == i else zeros for j in range(len(cases))]), c.aval)
                     if is_undefined(c) else None for i, c in enumerate(cases)]


select_n_p.def_batch(broadcasting_batch(select_n_p))


def select_n(which, *cases):
    """``cases[which]`` elementwise (``which`` bool picks ``cases[1]`` where True): ``lax.select_n(p, f, t)``."""
    return bind(select_n_p, which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false`` (lax.select's argument order)."""
    return select_n(pred, on_false, on_true)


# --------------------------------------------------------------------------------------------------- clamp
clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract_eval(lo, x, hi):
    check_same("clamp", "operands", (lo, x, hi))
    check_kinds("clamp", "num", x)
    return ShapedArray(broadcast_shapes("clamp", lo, x, hi), x.dtype, is_weak(x))


@jvp_rule(clamp_p)
def _clamp_jvp(out, primals, tangents):
    lo, x, hi = primals
    tlo, tx, thi = (broadcast_to_shape(instantiate(t), out.shape) for t in tangents)
    xb = broadcast_to_shape(x, out.shape)
    return select_n(lt(xb, lo), select_n(gt(xb, hi), tx, thi), tlo)


clamp_p.def_batch(broadcasting_batch(clamp_p))


def clamp(lo, x, hi):
    """``x`` clipped to ``[lo, hi]`` elementwise: ``lax.clamp(0., x, 1.)``."""
    return bind(clamp_p, lo, x, hi)


# --------------------------------------------------------------------------------------------- stop_gradient
stop_gradient_p = _unary("stop_gradient", "all")[0]


def stop_gradient(x):
    """The identity whose derivative is zero: ``fl.grad(lambda x: stop_gradient(x) * x)(3.) == 3.``."""
    from flfun.tree import tree_map
    return tree_map(lambda a: bind(stop_gradient_p, a), x)


# ------------------------------------------------------------------------------------- optimization_barrier
# The identity on several values that the compiler never merges with another: jit puts one in front of each
# inlined remat body, so CSE cannot fold a recomputation back into the original. ``remat``: (equations, bytes)
# the body recomputes, for the memory plan's report.
optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_abstract_eval(lambda *xs, remat=(0, 0): [ShapedArray(x.shape, x.dtype) for x in xs])
optimization_barrier_p.def_jvp(lambda primals, tangents, **p: (bind(optimization_barrier_p, *primals, **p),
                                                               list(tangents)))
optimization_barrier_p.def_transpose(lambda cts, *args, **p: list(cts))
optimization_barrier_p.def_batch(lambda axis, args, dims, **p: (bind(optimization_barrier_p, *args, **p),
                                                                list(dims)))



__all__ = sorted(n for n, v in globals().items() if not n.startswith("_") and (
    isinstance(v, Primitive) or callable(v) and getattr(v, "__module__", None) == __name__))
