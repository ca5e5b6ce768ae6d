"""``flfun.numpy``: the array-API / numpy namespace, built from flfun's primitives.

Every function here works on concrete arrays and under every transform; it follows the array API standard 2024.12
(tests/test_array_api.py). Arrays are immutable: no ``out=``, ``x[i] = v`` raises (use ``x.at[i].set(v)``) and
``x += y`` rebinds ``x`` to a new array; where this makes a function differ, its docstring says so.
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


def _bind_operators():
    """Point Array's arithmetic dunders straight at this namespace's functions (one call less on the eager
    path that benchmark W1 measures)."""
    import flfun.numpy as ns
    from flfun.array import Array as A
    binary = {"add": ns.add, "sub": ns.subtract, "mul": ns.multiply, "truediv": ns.divide,
              "floordiv": ns.floor_divide, "mod": ns.remainder, "pow": ns.power,
              "and": ns.bitwise_and, "or": ns.bitwise_or, "xor": ns.bitwise_xor,
              "lshift": ns.left_shift, "rshift": ns.right_shift}
    for op, fn in binary.items():
        setattr(A, f"__r{op}__", (lambda f: lambda self, other: f(other, self))(fn))
    for op, fn in {**binary, "lt": ns.less, "le": ns.less_equal, "gt": ns.greater, "ge": ns.greater_equal,
                   "eq": ns.equal, "ne": ns.not_equal, "neg": ns.negative, "pos": ns.positive, "abs": ns.abs,
                   "invert": ns.invert}.items():
        setattr(A, f"__{op}__", fn)

_bind_operators()
