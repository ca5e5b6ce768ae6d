"""The fft primitive: discrete Fourier transforms over the trailing axes, as ``jax.lax.fft``.

One primitive with a static ``fft_type`` (``"fft"``, ``"ifft"``, ``"rfft"``, ``"irfft"``) and ``fft_lengths``
(the sizes of the transformed trailing axes). The inverse transforms carry the ``1/n`` factor (numpy's "backward"
norm); ``flfun.numpy.fft`` adds the other norms, ``n``/``s`` and axes. All four are linear: the jvp applies the
same transform to the tangent, the transposes follow JAX's (complex gradients in JAX's convention). Impls:
``flfun/backends/xp/fft.py``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, short, to_array
from flfun.primitives import elementwise as E, slicing
from flfun.primitives.base import front_batch, full, linear
from flfun.util import prod

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")
fft_p = Primitive("fft", linear_in="all")


@fft_p.def_abstract_eval
def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k, shape = len(fft_lengths), tuple(x.shape)
    if fft_type not in FFT_TYPES or not 1 <= k <= len(shape) or any(n < 1 for n in fft_lengths):
        raise TypeError(f"fft: fft_type must be one of {FFT_TYPES} and fft_lengths 1 to {len(shape)} positive "
                        f"sizes, got {fft_type!r} and {fft_lengths} for {short(x)}")
    want = "real floating" if fft_type == "rfft" else "complex"
    if x.dtype.kind != ("f" if fft_type == "rfft" else "c"):
        raise TypeError(f"fft: {fft_type} requires a {want} operand, got {short(x)}")
    last = fft_lengths[-1] // 2 + 1 if fft_type == "irfft" else fft_lengths[-1]
    if shape[-k:] != tuple(fft_lengths[:-1]) + (last,):
        raise TypeError(f"fft: {fft_type} of lengths {fft_lengths} needs trailing dimensions "
                        f"{tuple(fft_lengths[:-1]) + (last,)}, got {short(x)}")
    if fft_type == "rfft":
        return ShapedArray(shape[:-1] + (fft_lengths[-1] // 2 + 1,), dtypes.complex_dtype(x.dtype))
    if fft_type == "irfft":
        return ShapedArray(shape[:-1] + (fft_lengths[-1],), dtypes.real_dtype(x.dtype))
    return ShapedArray(shape, x.dtype)


@linear(fft_p)
def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type in ("fft", "ifft"):        # the DFT matrix is symmetric
        return [fft(ct, fft_type, fft_lengths)]
    if fft_type == "rfft":                 # rfft = slice(fft(complex(x))): transpose those three
        n = fft_lengths[-1]
        cfg = [(0, 0, 0)] * (len(ct.shape) - 1) + [(0, n - ct.shape[-1], 0)]
        full_ct = slicing.pad(ct, full((), 0, ct.dtype), cfg)
        return [E.real(fft(full_ct, "fft", fft_lengths))]
    # irfft: JAX's rule, rfft of the cotangent with the Hermitian-pair weights, scaled and conjugated
    out = fft(ct, "rfft", fft_lengths)
    m, odd = out.shape[-1], fft_lengths[-1] % 2
    weights = np.array([1.0] + [2.0] * (m - 2 + odd) + [1.0] * (1 - odd)) / prod(fft_lengths)
    return [E.conj(E.mul(out, to_array(weights.astype(out.dtype))))]


fft_p.def_batch(front_batch(lambda size, x, **params: bind(fft_p, x, **params)))


def fft(x, fft_type: str, fft_lengths: Sequence[int]):
    """The ``fft_type`` transform of ``x`` over its last ``len(fft_lengths)`` axes (inverses scaled by ``1/n``).

    Example::

        >>> lax.fft(fnp.asarray([1, 0, 0, 0], "complex64"), "fft", (4,)).tolist()
        [(1+0j), (1+0j), (1+0j), (1+0j)]
    """
    return bind(fft_p, x, fft_type=str(fft_type), fft_lengths=tuple(int(n) for n in fft_lengths))


__all__ = ["fft", "fft_p"]
