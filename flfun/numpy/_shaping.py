"""Reshaping, axis permutation and broadcasting for ``flfun.numpy``: reshape, ravel, transpose, moveaxis, squeeze,
expand_dims, broadcast_to, atleast_1d, ... Each is a few shape primitives, so all work under every transform.
Arrays are immutable: ``copy`` arguments are accepted but never observable.
"""
import builtins
import operator
from typing import Sequence

import numpy as np

from flfun.array import Array
from flfun.core import short
from flfun.numpy._asarray import as_array, ints, matrix_stack
from flfun.primitives import shape as lax_shape
from flfun.primitives.base import check_size
from flfun.primitives.rules import broadcast_to_shape
from flfun.util import canonical_axis, prod

__all__ = ["reshape", "ravel", "flatten", "transpose", "permute_dims", "matrix_transpose", "moveaxis", "swapaxes",
           "squeeze", "expand_dims", "broadcast_to", "broadcast_arrays", "broadcast_shapes", "atleast_1d", "atleast_2d",
           "atleast_3d"]


# ------------------------------------------------------------------------------------------------------ reshape
def reshape(x, /, shape, *, copy: bool | None = None) -> Array:
    """Row-major reshape; one dimension may be -1 (inferred). ``copy`` is accepted (Arrays are immutable).

    Example::

        >>> fnp.reshape(fnp.arange(6), (2, -1)).shape
        (2, 3)
    """
    x = as_array(x)
    shape = ints(shape, "reshape", "shape must be a sequence of ints")
    n, known = prod(x.shape), prod(d for d in shape if d != -1)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise ValueError(f"reshape: shape {shape} may hold at most one -1 and no other negative size")
    if -1 in shape and known and n % known == 0:
        shape = tuple(n // known if d == -1 else d for d in shape)
    if -1 in shape or prod(shape) != n:
        raise ValueError(f"reshape: cannot reshape {short(x)} ({n} elements) into shape {shape}")
    return lax_shape.reshape(x, shape)


def ravel(x, /) -> Array:
    """The elements of ``x`` as a 1-D array (row-major): ``fnp.ravel(fnp.ones((2, 3))).shape == (6,)``."""
    x = as_array(x)
    return lax_shape.reshape(x, (prod(x.shape),))


flatten = ravel


def _check_perm(axes, x, op):
    try:
        axes = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise TypeError(f"{op}: axes must be a sequence of ints, got {axes!r}") from None
    nd = x.ndim
    if any(not -nd <= a < nd for a in axes) or sorted(a % nd for a in axes) != list(range(nd)):
        raise ValueError(f"{op}: axes {axes} are not a permutation of the axes of {short(x)}")
    return tuple(a % nd for a in axes)


def permute_dims(x, /, axes: Sequence[int]) -> Array:
    """Permute the axes: output axis ``i`` is input axis ``axes[i]``.

    Example::

        >>> fnp.permute_dims(fnp.ones((2, 3, 4)), (2, 0, 1)).shape
        (4, 2, 3)
    """
    x = as_array(x)
    return lax_shape.transpose(x, _check_perm(axes, x, "permute_dims"))


def transpose(x, /, axes: Sequence[int] | None = None) -> Array:
    """numpy's ``transpose``: reverse the axes, or permute them by ``axes``.

    Example::

        >>> fnp.transpose(fnp.ones((2, 3))).shape
        (3, 2)
    """
    x = as_array(x)
    return lax_shape.transpose(x, tuple(reversed(range(x.ndim))) if axes is None else _check_perm(axes, x, "transpose"))


def matrix_transpose(x, /) -> Array:
    """Swap the last two axes of a stack of matrices.

    Example::

        >>> fnp.matrix_transpose(fnp.ones((5, 2, 3))).shape
        (5, 3, 2)
    """
    return swapaxes(matrix_stack(as_array(x), "matrix_transpose"), -1, -2)


def _axis_list(axis, ndim, op):
    seq = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(canonical_axis(a, ndim, op) for a in seq)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {tuple(seq)}")
    return out


def moveaxis(x, source, destination, /) -> Array:
    """Move axes ``source`` (int or tuple) to positions ``destination``, keeping the others in order.

    Example::

        >>> fnp.moveaxis(fnp.ones((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    x = as_array(x)
    src, dst = (_axis_list(a, x.ndim, "moveaxis") for a in (source, destination))
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have the same length")
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax_shape.transpose(x, tuple(order))


def swapaxes(x, axis1: int, axis2: int, /) -> Array:
    """Swap two axes: ``fnp.swapaxes(fnp.ones((2, 3)), 0, 1).shape == (3, 2)``."""
    x = as_array(x)
    a, b = canonical_axis(axis1, x.ndim, "swapaxes"), canonical_axis(axis2, x.ndim, "swapaxes")
    return lax_shape.transpose(x, tuple(b if i == a else a if i == b else i for i in range(x.ndim)))


def squeeze(x, /, axis=None) -> Array:
    """Remove axes of length one (all of them when ``axis`` is None).

    Example::

        >>> fnp.squeeze(fnp.ones((1, 3, 1)), axis=0).shape
        (3, 1)
    """
    x = as_array(x)
    axes = tuple(i for i, d in enumerate(x.shape) if d == 1) if axis is None else _axis_list(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: cannot remove axis {a} of {short(x)}: its size is {x.shape[a]}, not 1")
    return lax_shape.squeeze(x, tuple(sorted(axes))) if axes else x


def expand_dims(x, /, axis=0) -> Array:
    """Insert axes of length one at positions ``axis`` (int or tuple) of the result.

    Example::

        >>> fnp.expand_dims(fnp.ones(3), axis=(0, 2)).shape
        (1, 3, 1)
    """
    x = as_array(x)
    seq = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = _axis_list(seq, x.ndim + len(seq), "expand_dims")
    return lax_shape.expand_dims(x, tuple(sorted(axes)))


# ------------------------------------------------------------------------------------------------- broadcasting
def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """The shape that arrays of ``shapes`` broadcast to: ``fnp.broadcast_shapes((3, 1), (4,)) == (3, 4)``."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {', '.join(map(str, shapes))} do not broadcast") from None


def broadcast_to(x, /, shape) -> Array:
    """``x`` broadcast to ``shape`` (numpy rules; no data is copied on the numpy backend).

    Example::

        >>> fnp.broadcast_to(fnp.arange(3), (2, 3)).shape
        (2, 3)
    """
    x = as_array(x)
    shape = ints(shape, "broadcast_to")
    if len(x.shape) > len(shape) or any(s not in (1, d) for s, d in zip(x.shape, shape[len(shape) - x.ndim:])):
        raise ValueError(f"broadcast_to: cannot broadcast {short(x)} to shape {shape}")
    check_size("broadcast_to", shape)
    return broadcast_to_shape(x, shape)


def broadcast_arrays(*arrays) -> list[Array]:
    """Broadcast arrays against each other: ``fnp.broadcast_arrays(fnp.ones(3), fnp.ones((2, 1)))``."""
    xs = [as_array(a) for a in arrays]
    shape = broadcast_shapes(*[x.shape for x in xs])
    return [broadcast_to_shape(x, shape) for x in xs]


# ------------------------------------------------------------------------------------------------- at least n-d
def atleast(arrays, nd: int, single=None):
    """``arrays`` with at least ``nd`` dims (numpy's placement); one array in gives one out unless ``single``."""
    out = []
    for x in map(as_array, arrays):
        shape = (1,) * (builtins.min(nd, 2) - x.ndim) + tuple(x.shape)
        out.append(x if x.ndim >= nd else lax_shape.reshape(x, shape + (1,) * (nd - len(shape))))
    return out[0] if len(out) == 1 and single is None else out


def atleast_1d(*arrays):
    """Arrays with at least one dimension (one array in, one out; several in, a list out)."""
    return atleast(arrays, 1)


def atleast_2d(*arrays):
    """Arrays with at least two dimensions: 1-D ``(n,)`` becomes ``(1, n)``."""
    return atleast(arrays, 2)


def atleast_3d(*arrays):
    """Arrays with at least three dimensions: ``(n,)`` -> ``(1, n, 1)``, ``(m, n)`` -> ``(m, n, 1)``."""
    return atleast(arrays, 3)
