"""Activation functions, softmax/logsumexp and one-hot encoding (``flfun.nn.functional``), built from
``flfun.numpy`` and the primitives, so they work under every transform. Integer inputs become float32."""
from __future__ import annotations

import functools
import math
import operator

from flfun import dtypes, lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.numpy.promotion import to_float
from flfun.scipy import special as _special
from flfun.transforms.custom import custom_jvp
from flfun.util import canonical_axes

__all__ = ["relu", "relu6", "gelu", "silu", "swish", "sigmoid", "softplus", "log_sigmoid", "elu", "leaky_relu",
           "celu", "selu", "glu", "mish", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "soft_sign",
           "squareplus", "sparse_plus", "sparse_sigmoid", "log1mexp", "identity", "tanh",
           "softmax", "log_softmax", "logsumexp", "logmeanexp", "one_hot", "standardize"]


def _c(x, value):
    """A 0-d constant of ``x``'s dtype."""
    return lax.full((), value, x.dtype)


# ------------------------------------------------------------------------------------------------ activations
def relu(x) -> Array:
    """``max(x, 0)``; its derivative at 0 is 0.

    Example::

        >>> relu(fnp.asarray([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    x = to_float(x)
    return lax.select(lax.le(x, _c(x, 0)), _c(x, 0), x)   # NaN fails the test and passes through


def relu6(x) -> Array:
    """``min(max(x, 0), 6)``; its derivative is 0 at and outside both kinks.

    Example::

        >>> relu6(fnp.asarray([-1.0, 3.0, 9.0])).tolist()
        [0.0, 3.0, 6.0]
    """
    x = to_float(x)
    return lax.select(lax.le(x, _c(x, 0)), _c(x, 0), lax.select(lax.ge(x, _c(x, 6)), _c(x, 6), x))


def sigmoid(x) -> Array:
    """The logistic function ``1 / (1 + exp(-x))``.

    Example::

        >>> sigmoid(fnp.asarray([0.0])).tolist()
        [0.5]
    """
    return lax.logistic(to_float(x))


def silu(x) -> Array:
    """``x * sigmoid(x)`` (also called swish).

    Example::

        >>> round(silu(fnp.asarray(1.0)).item(), 4)
        0.7311
    """
    x = to_float(x)
    return lax.mul(x, lax.logistic(x))


swish = silu


def gelu(x, approximate: bool = True) -> Array:
    """Gaussian error linear unit: ``x * Phi(x)``; ``approximate=True`` uses the tanh formula (as JAX does).

    Example::

        >>> round(gelu(fnp.asarray(1.0), approximate=False).item(), 4)
        0.8413
    """
    x = to_float(x)
    half_x = lax.mul(_c(x, 0.5), x)
    if approximate:
        cube = lax.mul(_c(x, 0.044715), lax.integer_pow(x, 3))
        inner = lax.mul(_c(x, math.sqrt(2.0 / math.pi)), lax.add(x, cube))
        return lax.mul(half_x, lax.add(_c(x, 1.0), lax.tanh(inner)))
    return lax.mul(half_x, lax.add(_c(x, 1.0), lax.erf(lax.mul(x, _c(x, 1.0 / math.sqrt(2.0))))))


def softplus(x) -> Array:
    """``log(1 + exp(x))``, accurate over the whole range: ``x + log1p(exp(-x))`` for ``x > 0``, else
    ``log1p(exp(x))`` (so ``softplus(-100) = 3.7e-44``, not 0).

    Example::

        >>> round(softplus(fnp.asarray(0.0)).item(), 4)
        0.6931
    """
    return _softplus(to_float(x))


@custom_jvp
def _softplus(x):
    pos = lax.gt(x, _c(x, 0))
    return lax.add(lax.select(pos, x, _c(x, 0)), lax.log1p(lax.exp(lax.select(pos, lax.neg(x), x))))


_softplus.defjvp(lambda primals, tangents: (_softplus.fun(*primals), lax.mul(tangents[0], lax.logistic(primals[0]))))


def log_sigmoid(x) -> Array:
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``.

    Example::

        >>> log_sigmoid(fnp.asarray([-100.0])).tolist()
        [-100.0]
    """
    return lax.neg(softplus(lax.neg(to_float(x))))


def elu(x, alpha: float = 1.0) -> Array:
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise.

    Example::

        >>> elu(fnp.asarray([1.0, 0.0])).tolist()
        [1.0, 0.0]
    """
    x = to_float(x)
    positive = lax.gt(x, _c(x, 0))
    # the exp branch sees only non-positive values, so neither it nor its gradient overflows
    safe = lax.select(positive, _c(x, 0), x)
    return lax.select(positive, x, lax.mul(_c(x, alpha), lax.expm1(safe)))


def leaky_relu(x, negative_slope: float = 0.01) -> Array:
    """``x`` for ``x >= 0``, ``negative_slope * x`` otherwise.

    Example::

        >>> leaky_relu(fnp.asarray([-2.0, 3.0]), 0.5).tolist()
        [-1.0, 3.0]
    """
    x = to_float(x)
    return lax.select(lax.ge(x, _c(x, 0)), x, lax.mul(_c(x, negative_slope), x))


def celu(x, alpha: float = 1.0) -> Array:
    """Continuously differentiable ELU: ``x`` for ``x > 0``, ``alpha * (exp(x / alpha) - 1)`` otherwise.

    Example::

        >>> celu(fnp.asarray([1.0, 0.0])).tolist()
        [1.0, 0.0]
    """
    x = to_float(x)
    if alpha == 0:
        raise ValueError("celu: alpha must be non-zero, got 0")
    positive = lax.gt(x, _c(x, 0))
    safe = lax.select(positive, _c(x, 0), x)
    return lax.select(positive, x, lax.mul(_c(x, alpha), lax.expm1(lax.div(safe, _c(x, alpha)))))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x) -> Array:
    """Scaled ELU (Klambauer et al.): ``scale * elu(x, alpha)`` with the self-normalising constants.

    Example::

        >>> round(selu(fnp.asarray(1.0)).item(), 4)
        1.0507
    """
    x = to_float(x)
    return lax.mul(_c(x, _SELU_SCALE), elu(x, _SELU_ALPHA))


def glu(x, axis: int = -1) -> Array:
    """Gated linear unit: ``x`` split in halves ``a, b`` along ``axis`` gives ``a * sigmoid(b)``.

    Example::

        >>> glu(fnp.asarray([2.0, 0.0])).tolist()
        [1.0]
    """
    x = to_float(x)
    ax = canonical_axes(axis, x.ndim, "glu")[0]
    if x.shape[ax] % 2:
        raise ValueError(f"glu: axis {axis} of x (shape {tuple(x.shape)}) must have even length")
    a, b = fnp.split(x, 2, axis=ax)
    return lax.mul(a, lax.logistic(b))


def mish(x) -> Array:
    """``x * tanh(softplus(x))`` (Misra, 2019).

    Example::

        >>> round(mish(fnp.asarray(1.0)).item(), 4)
        0.8651
    """
    x = to_float(x)
    return lax.mul(x, lax.tanh(softplus(x)))


def hard_sigmoid(x) -> Array:
    """``relu6(x + 3) / 6``: a piecewise-linear sigmoid.

    Example::

        >>> hard_sigmoid(fnp.asarray([-4.0, 0.0, 4.0])).tolist()
        [0.0, 0.5, 1.0]
    """
    x = to_float(x)
    return lax.div(relu6(lax.add(x, _c(x, 3))), _c(x, 6))


def hard_silu(x) -> Array:
    """``x * hard_sigmoid(x)`` (also called hard_swish).

    Example::

        >>> hard_silu(fnp.asarray([-4.0, 3.0])).tolist()
        [-0.0, 3.0]
    """
    x = to_float(x)
    return lax.mul(x, hard_sigmoid(x))


hard_swish = hard_silu


def hard_tanh(x) -> Array:
    """``x`` clipped to ``[-1, 1]`` (NaN stays NaN).

    Example::

        >>> hard_tanh(fnp.asarray([-2.0, 0.5, 2.0])).tolist()
        [-1.0, 0.5, 1.0]
    """
    x = to_float(x)
    return lax.select(lax.gt(x, _c(x, 1)), _c(x, 1), lax.select(lax.lt(x, _c(x, -1)), _c(x, -1), x))


def soft_sign(x) -> Array:
    """``x / (|x| + 1)``.

    Example::

        >>> soft_sign(fnp.asarray([1.0, -3.0])).tolist()
        [0.5, -0.75]
    """
    x = to_float(x)
    return lax.div(x, lax.add(lax.abs(x), _c(x, 1)))


def squareplus(x, b: float = 4) -> Array:
    """``(x + sqrt(x**2 + b)) / 2`` (Barron, 2021), a smooth relu.

    Example::

        >>> squareplus(fnp.asarray(0.0)).item()
        1.0
    """
    x = to_float(x)
    return lax.mul(_c(x, 0.5), lax.add(x, lax.sqrt(lax.add(lax.mul(x, x), _c(x, b)))))


def sparse_plus(x) -> Array:
    """0 for ``x <= -1``, ``x`` for ``x >= 1``, ``(x + 1)**2 / 4`` between (a smooth, sparse relu).

    Example::

        >>> sparse_plus(fnp.asarray([-2.0, 0.0, 2.0])).tolist()
        [0.0, 0.25, 2.0]
    """
    x = to_float(x)
    mid = lax.mul(_c(x, 0.25), lax.integer_pow(lax.add(x, _c(x, 1)), 2))
    return lax.select(lax.le(x, _c(x, -1)), _c(x, 0), lax.select(lax.ge(x, _c(x, 1)), x, mid))


def sparse_sigmoid(x) -> Array:
    """The derivative of ``sparse_plus``: ``clip((x + 1) / 2, 0, 1)``.

    Example::

        >>> sparse_sigmoid(fnp.asarray([-2.0, 0.0, 2.0])).tolist()
        [0.0, 0.5, 1.0]
    """
    x = to_float(x)
    mid = lax.mul(_c(x, 0.5), lax.add(x, _c(x, 1)))
    return lax.select(lax.le(x, _c(x, -1)), _c(x, 0), lax.select(lax.ge(x, _c(x, 1)), _c(x, 1), mid))


def log1mexp(x) -> Array:
    """``log(1 - exp(-x))`` for ``x > 0``, accurate near 0 and for large ``x`` (Maechler's switch at log 2).

    Example::

        >>> round(log1mexp(fnp.asarray(1.0)).item(), 4)
        -0.4587
    """
    x = to_float(x)
    big = lax.gt(x, _c(x, math.log(2)))
    safe_small, safe_big = lax.select(big, _c(x, 1), x), lax.select(big, x, _c(x, 1))
    return lax.select(big, lax.log1p(lax.neg(lax.exp(lax.neg(safe_big)))),
                      lax.log(lax.neg(lax.expm1(lax.neg(safe_small)))))


def identity(x) -> Array:
    """``x`` itself (as a float array).

    Example::

        >>> identity(fnp.asarray([1.0])).tolist()
        [1.0]
    """
    return to_float(x)


def tanh(x) -> Array:
    """The hyperbolic tangent.

    Example::

        >>> tanh(fnp.asarray(0.0)).item()
        0.0
    """
    return lax.tanh(to_float(x))


# ------------------------------------------------------------------------------------- softmax and logsumexp
def _keep(x, out, axes):
    """Reinsert the reduced ``axes`` of ``x`` as length-one axes of ``out``."""
    return lax.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def _shifted(x, axis, op: str):
    """``(x, axes, x - max(x), max(x))`` for ``x`` as a float array, the max over ``axis`` taken as a constant
    (softmax is shift invariant, so gradients are exact) and set to 0 where it is not finite (rows of -inf stay
    -inf instead of becoming NaN)."""
    x = to_float(x)
    axes = canonical_axes(axis, x.ndim, op)
    m = lax.reduce_max(lax.stop_gradient(x), axes)
    m = _keep(x, lax.select(lax.is_finite(m), m, _c(m, 0)), axes)
    return x, axes, lax.sub(x, m), m


def softmax(x, axis=-1) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (an int or tuple), computed stably.

    Example::

        >>> softmax(fnp.asarray([0.0, 0.0])).tolist()
        [0.5, 0.5]
    """
    x, axes, s, _ = _shifted(x, axis, "softmax")
    e = lax.exp(s)
    return lax.div(e, _keep(x, lax.reduce_sum(e, axes), axes))


def log_softmax(x, axis=-1) -> Array:
    """``x - logsumexp(x)`` over ``axis``, computed stably.

    Example::

        >>> log_softmax(fnp.asarray([0.0, 0.0])).tolist()   # [log 0.5, log 0.5]
        [-0.6931471824645996, -0.6931471824645996]
    """
    x = to_float(x)
    return _log_softmax(x, canonical_axes(axis, x.ndim, "log_softmax"))


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _log_softmax(x, axes):
    x, axes, s, _ = _shifted(x, axes, "log_softmax")
    return lax.sub(s, _keep(x, lax.log(lax.reduce_sum(lax.exp(s), axes)), axes))


@_log_softmax.defjvp
def _log_softmax_jvp(axes, primals, tangents):
    """``t - sum(softmax(x) t)``: exact where ``x`` is huge or ``-inf`` (softmax there is 1 or 0, never NaN)."""
    (x,), (t,) = primals, tangents
    out = _log_softmax.fun(x, axes)
    return out, lax.sub(t, _keep(x, lax.reduce_sum(lax.mul(lax.exp(out), t), axes), axes))


def logsumexp(x, axis=None, keepdims: bool = False, b=None, *, return_sign: bool = False, where=None):
    """``log(sum(b * exp(x)))`` over ``axis`` without overflow (``b`` defaults to 1); its gradient is softmax.

    ``where`` (a boolean mask) leaves entries out of the sum. With ``return_sign=True`` (for ``b`` with negative
    entries) returns ``(log|sum|, sign(sum))``; otherwise a negative sum gives NaN. This is
    ``flfun.scipy.special.logsumexp`` with ``keepdims`` before ``b``.

    Example::

        >>> logsumexp(fnp.asarray([1e4, 1e4])).item()   # 1e4 + log 2, no overflow
        10000.693359375
    """
    return _special.logsumexp(x, axis, b, keepdims, return_sign, where)


def logmeanexp(x, axis=None, where=None, keepdims: bool = False) -> Array:
    """``log(mean(exp(x)))`` over ``axis`` (entries where ``where`` is False left out), computed stably.

    Example::

        >>> logmeanexp(fnp.asarray([0.0, 0.0])).item()
        0.0
    """
    x = to_float(x)
    axes = canonical_axes(axis, x.ndim, "logmeanexp")
    count = (fnp.sum(fnp.broadcast_to(fnp.asarray(where), x.shape), axis=axes, keepdims=keepdims) if where is not None
             else math.prod(x.shape[i] for i in axes))
    return fnp.subtract(logsumexp(x, axes, keepdims, where=where), fnp.log(fnp.asarray(count, dtype=x.dtype)))


def standardize(x, axis=-1, mean=None, variance=None, epsilon: float = 1e-5) -> Array:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis`` (mean and variance computed if not given).

    Example::

        >>> standardize(fnp.asarray([1.0, 3.0])).tolist()   # about [-1.0, 1.0]
        [-0.9999950528144836, 0.9999950528144836]
    """
    x = to_float(x)
    centered = fnp.subtract(x, fnp.mean(x, axis=axis, keepdims=True) if mean is None else mean)
    if variance is None:
        variance = fnp.mean(fnp.square(centered), axis=axis, keepdims=True)
    return fnp.divide(centered, fnp.sqrt(fnp.add(variance, epsilon)))


# ------------------------------------------------------------------------------------------------------ one_hot
def one_hot(x, num_classes: int, *, dtype=None, axis: int = -1) -> Array:
    """One-hot encoding of integer labels along a new ``axis``; labels outside ``[0, num_classes)`` give zeros.

    Example::

        >>> one_hot(fnp.asarray([0, 2]), 3).tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise ValueError(f"one_hot: num_classes must be a concrete int, got {num_classes!r}") from None
    if num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be non-negative, got {num_classes}")
    x = fnp.asarray(x)
    if x.dtype == dtypes.bool_:
        x = lax.convert_element_type(x, dtypes.DEFAULT_INT)
    nd = x.ndim + 1
    ax = canonical_axes(axis, nd, "one_hot")[0]
    out_shape = x.shape[:ax] + (num_classes,) + x.shape[ax:]
    classes = lax.iota(x.dtype, out_shape, ax)
    labels = lax.broadcast_in_dim(x, out_shape, tuple(i for i in range(nd) if i != ax))
    dt = dtypes.DEFAULT_FLOAT if dtype is None else dtypes.canonicalize(dtype)
    return lax.convert_element_type(lax.eq(labels, classes), dt)
