"""fft impls against an array module ``xp`` (numpy.fft or cupy.fft): the primitive's trailing-axes transforms."""
from __future__ import annotations


def fft(xp, x, *, fft_type, fft_lengths):
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == "irfft":
        return xp.fft.irfftn(x, s=fft_lengths, axes=axes).astype(x.real.dtype, copy=False)
    dtype = xp.result_type(x.dtype, xp.complex64) if fft_type == "rfft" else x.dtype
    return getattr(xp.fft, f"{fft_type}n")(x, axes=axes).astype(dtype, copy=False)     # fftn, ifftn, rfftn


def impls(xp) -> dict:
    return {"fft": lambda x, **params: fft(xp, x, **params)}
