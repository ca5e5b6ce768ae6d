"""``flfun.numpy``: the array-API / numpy namespace, built from flfun's primitives.

Every function here works on concrete arrays and under every transform; it follows the array API standard 2024.12
(tests/test_array_api.py). Arrays are immutable: no ``out=``, ``x[i] = v`` raises (use ``x.at[i].set(v)``) and
``x += y`` rebinds ``x`` to a new array; where this makes a function differ, its docstring says so.
"""
from flfun.array import Array
from flfun.dtypes import (bool_ as bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
                          float32, float64)
from flfun.dtypes import bfloat16  # noqa: F401
from flfun.dtypes import complex64, complex128  # noqa: F401
from flfun.numpy._asarray import *  # noqa: F401,F403
from flfun.numpy._creation import *  # noqa: F401,F403
from flfun.numpy._elementwise import *  # noqa: F401,F403
from flfun.numpy._reductions import *  # noqa: F401,F403
from flfun.numpy._cumulative import *  # noqa: F401,F403
from flfun.numpy._shaping import *  # noqa: F401,F403
from flfun.numpy._joining import *  # noqa: F401,F403
from flfun.numpy._dtype_functions import *  # noqa: F401,F403
from flfun.numpy._linalg import *  # noqa: F401,F403
from flfun.numpy._einsum import *  # noqa: F401,F403
from flfun.numpy._indexing import *  # noqa: F401,F403
from flfun.numpy._updates import *  # noqa: F401,F403
from flfun.numpy._take import *  # noqa: F401,F403
from flfun.numpy._sorting import *  # noqa: F401,F403
from flfun.numpy._info import *  # noqa: F401,F403
from flfun.numpy._math import *  # noqa: F401,F403
from flfun.numpy._statistics import *  # noqa: F401,F403
from flfun.numpy._setops import *  # noqa: F401,F403
from flfun.numpy._polynomial import *  # noqa: F401,F403
from flfun.numpy._signal import *  # noqa: F401,F403
from flfun.numpy._index_tricks import *  # noqa: F401,F403
from flfun.numpy._manipulation import *  # noqa: F401,F403
from flfun.numpy._functional import *  # noqa: F401,F403
from flfun.numpy._interop import *  # noqa: F401,F403
from flfun.numpy import linalg  # noqa: F401
from flfun.numpy import fft  # noqa: F401

import numpy as _np

e, pi, inf, nan, newaxis = _np.e, _np.pi, _np.inf, _np.nan, None
__array_api_version__ = "2024.12"
del _np


from flfun.numpy._array_methods import install as _install_array_methods  # noqa: E402
import sys as _sys  # noqa: E402

_install_array_methods(_sys.modules[__name__])
del _sys, _install_array_methods
