"""Testing helpers for flfun users: hypothesis strategies for shapes and arrays, ``check_grads`` against
central finite differences (plus the jvp/vjp dot-product identity), and ``check_vmap`` against a Python loop.

Example::

    from hypothesis import given
    from flfun.testing import arrays, check_grads

    @given(arrays("float64", (3,)))
    def test_sin(x):
        check_grads(fnp.sin, (x,), order=2)
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from flfun import dtypes
from flfun import numpy as fnp
from flfun.transforms.jvp import jvp
from flfun.transforms.vjp import vjp
from flfun.transforms.vmap import vmap
from flfun.tree import tree_flatten, tree_map, tree_unflatten

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError:  # hypothesis is a test extra; check_grads/check_vmap work without it
    st = hnp = None


# ------------------------------------------------------------------------------------------------- strategies
def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4):
    """Strategy for array shapes: ``shapes(max_dims=2)`` draws (), (3,), (2, 4), ..."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def arrays(dtype, shape, *, low: float = -3.0, high: float = 3.0, unique: bool = False):
    """Strategy for numpy arrays of ``dtype`` and ``shape`` (a shape or a shape strategy) with finite values in
    ``[low, high]`` (integers: the same range clipped to the dtype; bools: anything; complex: both parts).

    Example::

        >>> arrays("complex64", (2, 3)).example().dtype
        dtype('complex64')
    """
    dt = dtypes.canonicalize(dtype)
    if dtypes.is_inexact(dt):   # draw in float64 / complex128 and round, so any bounds work for every width
        part = st.floats(low, high, allow_nan=False, allow_infinity=False)
        wide, elements = (np.complex128, st.builds(complex, part, part)) if dt.kind == "c" else (np.float64, part)
        return hnp.arrays(wide, shape, elements=elements, unique=unique).map(lambda a: a.astype(dt))
    elements = (st.integers(max(int(low), int(np.iinfo(dt).min)), min(int(high), int(np.iinfo(dt).max)))
                if dt.kind in "iu" else st.booleans())
    return hnp.arrays(dt, shape, elements=elements, unique=unique)


def float_dtypes(low_precision: bool = True):
    """Strategy for floating-point dtypes: float32, float64 and, with ``low_precision``, bfloat16 and float16;
    ``arrays(draw(float_dtypes()), (3,))`` then draws arrays of that dtype."""
    return st.sampled_from([dtypes.float32, dtypes.float64, *(dtypes.LOW_PRECISION if low_precision else ())])


def broadcastable_shapes(num_shapes: int = 2, min_dims: int = 0, max_dims: int = 3, max_side: int = 4):
    """Strategy for tuples of mutually broadcastable shapes (and their broadcast result as the last item)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims,
                                             max_side=max_side).map(lambda r: (*r.input_shapes, r.result_shape))


def valid_axes(ndim: int, *, allow_none: bool = True, allow_negative: bool = True, single: bool = False):
    """Strategy for an ``axis`` argument valid for rank ``ndim``: None, an int, or a tuple of distinct ints."""
    if ndim == 0:
        return st.none() if allow_none else st.just(())
    one = st.integers(-ndim if allow_negative else 0, ndim - 1)
    if single:
        return one
    many = st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).map(tuple)
    return st.one_of(one, many, *([st.none()] if allow_none else []))


# ------------------------------------------------------------------------------------------------------ checks
def _f64(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _rand_like(rng, x):
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)).astype(x.dtype)
    return rng.standard_normal(x.shape).astype(x.dtype) if dtypes.is_float(x.dtype) else np.zeros_like(x)


def _vdot(a, b) -> float:
    """``Re sum(a * b)``: the real pairing under which flfun's (and JAX's) transposes are adjoints."""
    return float(sum(np.sum(_f64(x) * _f64(y)).real for x, y in zip(a, b)))


def _assert_close(what, actual, expected, atol, rtol):
    for a, e in zip(actual, expected):   # strict: the shapes must match too
        np.testing.assert_allclose(_f64(a), _f64(e), rtol=rtol, atol=atol, equal_nan=True, err_msg=what, strict=True)


def _jvp_at(f: Callable, args: Sequence, rng):
    """``args`` as numpy arrays, random tangents for them, and ``jvp(f)`` there: ``(args, tangents, out, t_out)``."""
    args = [np.asarray(a) for a in args]
    tangents = [_rand_like(rng, a) for a in args]
    return args, tangents, *jvp(f, tuple(fnp.asarray(a) for a in args), tuple(fnp.asarray(t) for t in tangents))


def check_jvp(f: Callable, args: Sequence, *, eps: float | None = None, atol=1e-4, rtol=1e-3, seed=0) -> None:
    """jvp of ``f`` at ``args`` equals the central finite difference along a random direction."""
    args, tangents, _, t_out = _jvp_at(f, args, np.random.default_rng(seed))
    eps = eps or (1e-6 if all(a.dtype.itemsize > 4 * (a.dtype.kind == "c") + 4 for a in args
                              if dtypes.is_inexact(a.dtype)) else 1e-3)
    plus, minus = (tree_flatten(f(*[fnp.asarray((a + s * eps * t).astype(a.dtype)) if dtypes.is_inexact(a.dtype)
                                    else fnp.asarray(a) for a, t in zip(args, tangents)]))[0] for s in (1, -1))
    fd = [(_f64(p) - _f64(m)) / (2 * eps) for p, m in zip(plus, minus)]
    _assert_close("jvp vs finite differences", tree_flatten(t_out)[0], fd, atol, rtol)


def check_vjp(f: Callable, args: Sequence, *, atol=1e-4, rtol=1e-3, seed=0) -> None:
    """The dot-product identity ``<ct, J t> == <J^T ct, t>`` (checks every transpose rule used by ``f``)."""
    rng = np.random.default_rng(seed + 1)
    args, tangents, out, t_out = _jvp_at(f, args, rng)
    out_leaves, out_tree = tree_flatten(out)
    cts = [_rand_like(rng, o) for o in out_leaves]
    _, f_vjp = vjp(f, *[fnp.asarray(a) for a in args])
    ct_in = f_vjp(tree_unflatten(out_tree, [fnp.asarray(c) for c in cts]))
    lhs = _vdot(cts, tree_flatten(t_out)[0])
    rhs = _vdot(tree_flatten(ct_in)[0], tangents)
    if not np.isclose(lhs, rhs, atol=atol * (1 + abs(lhs)), rtol=rtol):
        raise AssertionError(f"vjp/jvp dot-product identity fails: <ct, J t> = {lhs} but <J^T ct, t> = {rhs}")


def check_grads(f: Callable, args: Sequence, order: int = 1, modes: Sequence[str] = ("fwd", "rev"),
                *, atol=1e-4, rtol=1e-3, eps: float | None = None) -> None:
    """Check derivatives of ``f`` up to ``order``: forward mode against central finite differences and reverse
    mode through the dot-product identity; higher orders check the derivative functions themselves.

    Example::

        check_grads(lambda x: fnp.sum(fnp.tanh(x) ** 2), (np.ones(3),), order=2)
    """
    if "fwd" in modes:
        check_jvp(f, args, eps=eps, atol=atol, rtol=rtol)
    if "rev" in modes:
        check_vjp(f, args, atol=atol, rtol=rtol)
    if order > 1:
        rng = np.random.default_rng(order)
        if "fwd" in modes:
            tangents = [fnp.asarray(_rand_like(rng, a)) for a in args]
            check_grads(lambda *a: jvp(f, a, tuple(tangents))[1], args, order - 1, modes, atol=atol * 10,
                        rtol=rtol * 10, eps=eps)
        if "rev" in modes:
            out = f(*[fnp.asarray(a) for a in args])
            cts = tree_map(lambda o: fnp.asarray(_rand_like(rng, o)), out)
            check_grads(lambda *a: vjp(f, *a)[1](cts), args, order - 1, modes, atol=atol * 10,
                        rtol=rtol * 10, eps=eps)


def check_vmap(f: Callable, args: Sequence, in_axes=0, *, atol=1e-6, rtol=1e-6) -> None:
    """``vmap(f, in_axes)(*args)`` equals stacking ``f`` applied to each slice in a Python loop."""
    axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    sizes = {np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None}
    if len(sizes) != 1:
        raise ValueError(f"check_vmap: mapped axes must share one size, got {sizes}")
    n = sizes.pop()
    batched = vmap(f, in_axes=tuple(axes))(*[fnp.asarray(a) for a in args])
    rows = [f(*[fnp.asarray(np.take(a, i, axis=ax)) if ax is not None else fnp.asarray(a)
                for a, ax in zip(args, axes)]) for i in range(n)]
    expected = tree_map(lambda *r: np.stack([np.asarray(x) for x in r]), *rows)
    _assert_close("vmap vs loop", [np.asarray(x) for x in tree_flatten(batched)[0]],
                  tree_flatten(expected)[0], atol, rtol)


__all__ = ["shapes", "arrays", "float_dtypes", "broadcastable_shapes", "valid_axes", "check_grads", "check_jvp", "check_vjp",
           "check_vmap"]
