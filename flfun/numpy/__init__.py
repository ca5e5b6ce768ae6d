"""``flfun.numpy``: the array-API / numpy namespace, built from flfun's primitives.

Every function here works on concrete arrays and under every transform. Where immutability forces a difference
from numpy (no ``out=``, no in-place updates) the function's docstring says so.
"""
from flfun.array import Array
from flfun.dtypes import (bool_ as bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
                          float32, float64)
from flfun.numpy._creation import *  # noqa: F401,F403
from flfun.numpy._elementwise import *  # noqa: F401,F403
from flfun.numpy._reductions import *  # noqa: F401,F403
from flfun.numpy._manipulation import *  # noqa: F401,F403
from flfun.numpy._linalg import *  # noqa: F401,F403
from flfun.numpy._indexing import *  # noqa: F401,F403
from flfun.numpy._sorting import *  # noqa: F401,F403
from flfun.numpy._info import *  # noqa: F401,F403
from flfun.numpy import linalg  # noqa: F401

import numpy as _np

e, pi, inf, nan, newaxis = _np.e, _np.pi, _np.inf, _np.nan, None
__array_api_version__ = "2024.12"
del _np
