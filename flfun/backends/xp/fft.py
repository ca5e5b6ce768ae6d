"""fft impls against an array module ``xp`` (numpy.fft or cupy.fft): the primitive's trailing-axes transforms."""
from __future__ import annotations


def fft(xp, x, *, fft_type, fft_lengths):
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == "fft":
        out, dtype = xp.fft.fftn(x, axes=axes), x.dtype
    elif fft_type == "ifft":
        out, dtype = xp.fft.ifftn(x, axes=axes), x.dtype
    elif fft_type == "rfft":
        out, dtype = xp.fft.rfftn(x, axes=axes), xp.result_type(x.dtype, xp.complex64)
    else:
        out, dtype = xp.fft.irfftn(x, s=fft_lengths, axes=axes), x.real.dtype
    return out.astype(dtype, copy=False)


def impls(xp) -> dict:
    return {"fft": lambda x, **params: fft(xp, x, **params)}
