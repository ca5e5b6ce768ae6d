"""numpy's dtype objects and classes, dtype queries, host I/O and printing, under ``flfun.numpy``: the objects
are numpy's own (as in JAX), and the readers return Arrays. Arrays convert to numpy for ``save``/``array_str``
through ``__array__``."""
import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.numpy._asarray import asarray
from flfun.numpy._elementwise import imag, logical_not, real
from flfun.numpy._sorting import lexsort
from flfun.numpy._take import take_along_axis
from flfun.numpy.promotion import asarray_like
from flfun.numpy._dtype_functions import result_type

__all__ = ["ndarray", "dtype", "bool_", "int_", "uint", "float_", "single", "double", "generic", "number",
           "integer", "signedinteger", "unsignedinteger", "inexact", "floating", "flexible", "character",
           "issubdtype", "promote_types", "isscalar", "iterable", "frombuffer", "fromstring", "fromiter",
           "fromfile", "load", "save", "savez", "array_repr", "array_str", "printoptions", "get_printoptions",
           "set_printoptions", "einsum_path", "ComplexWarning", "complexfloating", "csingle", "cdouble", "complex_",
           "iscomplexobj", "isrealobj", "iscomplex", "isreal", "sort_complex"]

ndarray = Array
dtype = np.dtype
bool_, int_, uint, float_, single, double = (dtypes.bool_, dtypes.int64, dtypes.uint64, dtypes.float64,
                                             dtypes.float32, dtypes.float64)     # dtypes, like fnp.float32
generic, number, integer, signedinteger, unsignedinteger, inexact, floating, flexible, character = (
    np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact, np.floating, np.flexible,
    np.character)
iterable, save, savez, array_repr, array_str = np.iterable, np.save, np.savez, np.array_repr, np.array_str
printoptions, get_printoptions, set_printoptions = np.printoptions, np.get_printoptions, np.set_printoptions
ComplexWarning, complexfloating = np.exceptions.ComplexWarning, np.complexfloating
csingle, cdouble = np.dtype(np.complex64), np.dtype(np.complex128)     # flfun's complex64 / complex128
complex_ = cdouble


def iscomplexobj(x) -> bool:
    """Whether ``x`` has a complex dtype (whatever its values): ``fnp.iscomplexobj(fnp.ones(2)) is False``."""
    return asarray_like(x).dtype.kind == "c"


def isrealobj(x) -> bool:
    """Whether ``x`` has a non-complex dtype."""
    return not iscomplexobj(x)


def iscomplex(x):
    """Elementwise: a non-zero imaginary part (all False for real dtypes)."""
    return imag(x) != 0


def isreal(x):
    """Elementwise: a zero imaginary part (all True for real dtypes)."""
    return logical_not(iscomplex(x))


def sort_complex(a):
    """``a`` sorted along its last axis by real part, then imaginary part, as a complex array (numpy's rule).

    Example::

        >>> fnp.sort_complex(fnp.asarray([2 + 1j, 1 + 3j, 2 - 1j])).tolist()
        [(1+3j), (2-1j), (2+1j)]
    """
    a = asarray_like(a)
    if a.ndim == 0:
        raise ValueError("sort_complex: needs at least one dimension")
    out = take_along_axis(a, lexsort([imag(a), real(a)], axis=-1), axis=-1)
    return out.astype(np.result_type(a.dtype, np.complex64))


def issubdtype(arg1, arg2) -> bool:
    """Whether dtype ``arg1`` is below ``arg2`` in numpy's hierarchy: ``fnp.issubdtype(fnp.float32, fnp.floating)``."""
    return bool(np.issubdtype(arg1, arg2))


def promote_types(a, b) -> np.dtype:
    """The dtype both ``a`` and ``b`` promote to under flfun's rules: ``fnp.promote_types('int32', 'float32')``."""
    return result_type(dtypes.canonicalize(a), dtypes.canonicalize(b))


def isscalar(element) -> bool:
    """True for Python and numpy numbers and for 0-d Arrays (as JAX; strings are not scalars)."""
    if isinstance(element, Array):
        return element.ndim == 0
    return bool(np.isscalar(element)) and not isinstance(element, (str, bytes))


def _reader(np_fn, name):
    def read(*args, **kwargs):
        return asarray(np_fn(*args, **kwargs))
    read.__name__, read.__doc__ = name, f"``numpy.{name}`` read on the host, as an Array: ``fnp.{name}(...)``."
    return read


frombuffer, fromstring, fromiter, fromfile, load = (_reader(getattr(np, n), n) for n in (
    "frombuffer", "fromstring", "fromiter", "fromfile", "load"))


def einsum_path(subscripts, /, *operands, optimize="greedy"):
    """numpy's contraction order for ``einsum`` over operands of these shapes: ``(path, description)``."""
    return np.einsum_path(subscripts, *[np.zeros(np.shape(o)) for o in operands], optimize=optimize)
