"""``eval_shape``: what a function would return, as ``ShapeDtypeStruct``s, found by tracing it on abstract values
without computing anything (JAX's names)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from flfun import dtypes
from flfun.core import ShapedArray, get_aval
from flfun.transforms.jvp import flatten_fun
from flfun.transforms.staging import trace_to_program
from flfun.tree import tree_flatten, tree_unflatten

__all__ = ["ShapeDtypeStruct", "eval_shape"]


class ShapeDtypeStruct:
    """A shape and a dtype standing for an array (an ``eval_shape`` input or output); a pytree leaf."""
    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, *, sharding=None, weak_type: bool = False):
        self.shape, self.dtype = tuple(int(d) for d in shape), dtypes.canonicalize(dtype)
        self.sharding, self.weak_type = sharding, weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"


def _aval(x) -> ShapedArray:
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "_value"):   # numpy arrays and the like
        return ShapedArray(tuple(x.shape), dtypes.canonicalize(x.dtype))
    return get_aval(x)


def eval_shape(fun: Callable, *args, **kwargs):
    """``fun(*args, **kwargs)``'s output structure with a ``ShapeDtypeStruct`` per array, from a trace on the
    arguments' shapes and dtypes (Arrays, numpy arrays, Python scalars or ``ShapeDtypeStruct``s) alone.

    Example::

        >>> fl.eval_shape(lambda x: {"y": x @ x.T}, fl.ShapeDtypeStruct((3, 5), "float32"))
        {'y': ShapeDtypeStruct(shape=(3, 3), dtype=float32)}
    """
    leaves, tree = tree_flatten((args, kwargs))
    flat, out_tree = flatten_fun(lambda a, k: fun(*a, **k), tree)
    program, _ = trace_to_program(flat, [_aval(x) for x in leaves])
    return tree_unflatten(out_tree[0], [ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in program.outvars])
