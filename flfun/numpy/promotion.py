"""Type promotion for ``flfun.numpy``: Python scalars are weak, arrays promote by the array-API table."""
from flfun import dtypes
from flfun.array import Array
from flfun.core import is_weak, to_array
from flfun.numpy._asarray import PYTHON_SCALARS, asarray, dtype_and_weak
from flfun.primitives.elementwise import convert_element_type


def asarray_like(x):
    """An Array or Tracer for ``x`` (numpy arrays and Python scalars are converted, not promoted; nested lists
    infer their dtype as ``fnp.asarray`` does)."""
    if isinstance(x, Array):
        return x
    if isinstance(x, (list, tuple)):
        return asarray(x)
    return to_array(x)


def promote(op: str, *args, to_float: bool = False):
    """Convert ``args`` to arrays of their common dtype (a float one with ``to_float``)."""
    if len(args) == 2:
        a, b = args
        if isinstance(a, Array):
            if isinstance(b, Array):
                d0 = a.dtype
                if d0 == b.dtype and (not to_float or d0.kind in "fc") and is_weak(a) == is_weak(b):
                    return args
            elif type(b) is float and a.dtype.kind == "f" or type(b) is int and a.dtype.kind in "iuf" \
                    and not to_float:
                return a, to_array(b, a.dtype)        # a weak scalar takes the array's dtype
        elif isinstance(b, Array) and (type(a) is float and b.dtype.kind == "f" or
                                       type(a) is int and b.dtype.kind in "iuf" and not to_float):
            return to_array(a, b.dtype), b
    try:
        dt, weak = dtypes.result_type(*[dtype_and_weak(a) for a in args])
    except TypeError as e:      # an operand that is no array, number or nested sequence of numbers
        raise TypeError(f"{op}: {e}") from None
    if to_float and not dtypes.is_inexact(dt):
        dt = dtypes.DEFAULT_FLOAT
    out = []
    for a in args:
        if type(a) in PYTHON_SCALARS:
            out.append(to_array(a, dt))
            continue
        a = asarray_like(a)
        out.append(a if a.dtype == dt else convert_element_type(a, dt, weak_type=weak and is_weak(a)))
    return out


def to_float(x):
    """``x`` as an array, cast to the default float dtype if it is not floating point (or complex) already."""
    x = asarray_like(x)
    return x if dtypes.is_inexact(x.dtype) else convert_element_type(x, dtypes.DEFAULT_FLOAT)
