"""Shared argument handling of ``flfun.scipy.stats``: promotion of ``x`` and the parameters to one float
dtype, and ``loc``/``scale`` standardisation."""
from __future__ import annotations

import numpy as np

from flfun import numpy as fnp
from flfun.numpy.promotion import to_float


def floats(*xs):
    """``xs`` as float arrays of one dtype: the promoted dtype of the array arguments (Python scalars are weak
    and take it, as in JAX); float32 when all are Python scalars."""
    arrays = [to_float(fnp.asarray(x)) for x in xs if not isinstance(x, (int, float))]
    dt = np.result_type(*[x.dtype for x in arrays]) if arrays else np.dtype(np.float32)
    return [fnp.asarray(x, dtype=dt) if isinstance(x, (int, float)) else to_float(fnp.asarray(x)).astype(dt)
            for x in xs]


def standard(x, loc, scale):
    """``((x - loc) / scale, log(scale))`` (NaN where ``scale <= 0``)."""
    x, loc, scale = floats(x, loc, scale)
    bad = scale <= 0
    return fnp.where(bad, np.nan, (x - loc) / scale), fnp.log(fnp.where(bad, np.nan, scale))
