"""Op-table records for the fft primitive (each transform type over one and two trailing axes)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from flfun import lax
from flfun.testing import arrays
from op_table import COMPLEX, FLOATS, OpRecord


def _args(fft_type, k):
    def strat(dtype):
        @st.composite
        def draw(draw):
            lead = draw(st.lists(st.integers(1, 3), max_size=1))
            lengths = tuple(draw(st.lists(st.integers(1, 5), min_size=k, max_size=k)))
            shape = (*lead, *lengths[:-1], lengths[-1] // 2 + 1 if fft_type == "irfft" else lengths[-1])
            return (draw(arrays(dtype, shape)),), {"fft_type": fft_type, "fft_lengths": lengths}
        return draw()
    return strat


def _ref(x, *, fft_type, fft_lengths):
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    fn = {"fft": np.fft.fftn, "ifft": np.fft.ifftn, "rfft": np.fft.rfftn, "irfft": np.fft.irfftn}[fft_type]
    return fn(x, s=fft_lengths, axes=axes) if fft_type == "irfft" else fn(x, axes=axes)


RECORDS = [OpRecord("fft", lax.fft, _ref, _args(t, k), dtypes=FLOATS if t == "rfft" else COMPLEX,
                    name=f"fft-{t}-{k}d", keeps_dtype=False)
           for t in ("fft", "ifft", "rfft", "irfft") for k in (1, 2)]
