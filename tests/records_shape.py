"""Op-table records for the shape primitives (iota has no operands: tests/test_shape.py checks it)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from flfun import lax
from flfun.testing import arrays, shapes
from op_table import ALL, FLOATS, INTS, OpRecord

ANY = ALL                           # shape ops move data and never look at it


def _with(draw_params, min_dims=0, max_dims=3, min_side=1, unique=False):
    """A strategy builder: one array of the record's dtype, then params drawn by ``draw_params(draw, x)``."""
    def strat(dtype):
        @st.composite
        def draw(draw):
            x = draw(arrays(dtype, shapes(min_dims, max_dims, min_side=min_side), unique=unique))
            args, params = draw_params(draw, x)
            return (x,) + tuple(args), params
        return draw()
    return strat


# ------------------------------------------------------------------------------------------ static reshaping
def _broadcast_params(draw, x):
    rank = len(x.shape) + draw(st.integers(0, 2))
    bd = tuple(sorted(draw(st.permutations(range(rank)))[:len(x.shape)]))
    shape = [draw(st.integers(0, 3)) for _ in range(rank)]
    for d, b in zip(x.shape, bd):
        shape[b] = d if d != 1 else draw(st.integers(0, 3))
    return (), {"shape": tuple(shape), "broadcast_dimensions": bd}


def _broadcast_ref(x, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for d, b in zip(x.shape, broadcast_dimensions):
        expanded[b] = d
    return np.broadcast_to(x.reshape(expanded), shape)


def _reshape_params(draw, x):
    n = x.size
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    a = draw(st.sampled_from(divisors))
    b = draw(st.sampled_from([d for d in divisors if (n // a) % d == 0]))
    return (), {"new_sizes": draw(st.sampled_from([(n,), (a, n // a), (a, b, n // a // b), (1, n, 1)]))}


def _squeeze_params(draw, x):
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    dims = draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    return (), {"dimensions": tuple(d - len(x.shape) if draw(st.booleans()) else d for d in dims)}


def _ones_shapes(draw):
    return tuple(draw(st.lists(st.sampled_from([1, 1, 2, 3]), max_size=4)))


def _squeeze_strategy(dtype):
    @st.composite
    def draw(draw):
        x = draw(arrays(dtype, _ones_shapes(draw)))
        return (x,), _squeeze_params(draw, x)[1]
    return draw()


def _expand_params(draw, x):
    k = draw(st.integers(1, 2))
    dims = draw(st.lists(st.integers(0, len(x.shape) + k - 1), min_size=k, max_size=k, unique=True))
    return (), {"dimensions": tuple(dims)}


def _subset_of_dims(draw, x):
    return (), {"dimensions": tuple(draw(st.lists(st.integers(0, len(x.shape) - 1), unique=True)))
                if x.shape else ()}


# ---------------------------------------------------------------------------------------------------- slicing
def _slice_params(draw, x):
    starts, limits, strides = [], [], []
    for d in x.shape:
        s = draw(st.integers(0, d))
        starts.append(s)
        limits.append(draw(st.integers(s, d)))
        strides.append(draw(st.integers(1, 3)))
    return (), {"start_indices": tuple(starts), "limit_indices": tuple(limits), "strides": tuple(strides)}


def _slice_ref(x, start_indices, limit_indices, strides):
    return x[tuple(slice(*t) for t in zip(start_indices, limit_indices, strides))]


def _pad_params(draw, x):
    cfg = []
    for d in x.shape:
        interior = draw(st.integers(0, 2))
        core = d + max(d - 1, 0) * interior
        lo = draw(st.integers(-min(core, 2), 2))
        hi = draw(st.integers(max(-2, -(core + lo)), 2))
        cfg.append((lo, hi, interior))
    pv = np.asarray(draw(arrays(x.dtype, ())))
    return (pv,), {"padding_config": tuple(cfg)}


def _pad_ref(x, pv, padding_config):
    """lax.pad one axis at a time: interior padding, then low and high (negative values crop)."""
    for axis, (lo, hi, interior) in enumerate(padding_config):
        x = np.moveaxis(x, axis, 0)
        n = x.shape[0]
        spread = np.full((n + max(n - 1, 0) * interior,) + x.shape[1:], pv, dtype=x.dtype)
        spread[::interior + 1] = x
        spread = np.concatenate([np.full((max(lo, 0),) + x.shape[1:], pv, x.dtype), spread,
                                 np.full((max(hi, 0),) + x.shape[1:], pv, x.dtype)])
        x = np.moveaxis(spread[max(-lo, 0):len(spread) - max(-hi, 0)], 0, axis)
    return x


def _index(draw, d):
    return np.asarray(draw(st.integers(-2, d + 2)), dtype=draw(st.sampled_from(INTS)))


def _dynamic_slice_params(draw, x):
    sizes = tuple(draw(st.integers(0, d)) for d in x.shape)
    return tuple(_index(draw, d) for d in x.shape), {"slice_sizes": sizes}


def _clamped(idx, shape, sizes):
    return tuple(slice(s, s + n) for s, n in
                 ((int(np.clip(i, 0, d - n)), n) for i, d, n in zip(idx, shape, sizes)))


def _dynamic_update_strategy(dtype):
    @st.composite
    def draw(draw):
        x = draw(arrays(dtype, shapes(0, 3)))
        u = draw(arrays(dtype, tuple(draw(st.integers(0, d)) for d in x.shape)))
        return (x, u) + tuple(_index(draw, d) for d in x.shape), {}
    return draw()


def _dynamic_update_ref(x, u, *idx):
    out = x.copy()
    out[_clamped(idx, x.shape, u.shape)] = u
    return out


def _concatenate_strategy(dtype):
    @st.composite
    def draw(draw):
        base = list(draw(shapes(1, 3)))
        dim = draw(st.integers(-len(base), len(base) - 1))
        xs = []
        for _ in range(draw(st.integers(2, 3))):
            base[dim] = draw(st.integers(0, 3))
            xs.append(draw(arrays(dtype, tuple(base))))
        return tuple(xs), {"dimension": dim}
    return draw()


# ------------------------------------------------------------------------------------------------------- sort
def _distinct(draw, dtype, shape):
    """Keys at least 0.4 apart, so finite differences never reorder them."""
    n = int(np.prod(shape))
    order = np.asarray(draw(st.permutations(range(n))), np.float64).reshape(shape)
    return (order * 0.5 - n / 4 + draw(arrays("float64", shape, low=0, high=0.1))).astype(dtype)


def _sort_strategy(n_ops, num_keys, int_first_key=False, smooth=False):
    def strat(dtype):
        @st.composite
        def draw(draw):
            shape = draw(shapes(1, 3))
            ops = [draw(arrays("int32", shape, low=0, high=2)) if int_first_key and i == 0 else
                   _distinct(draw, dtype, shape) if smooth and i == int(int_first_key) else
                   draw(arrays(dtype, shape)) for i in range(n_ops)]
            return tuple(ops), {"dimension": draw(st.integers(-len(shape), len(shape) - 1)), "num_keys": num_keys}
        return draw()
    return strat


def _sort_ref(*ops, dimension, num_keys):
    keys = [np.asarray(k) for k in ops[:num_keys]]
    perm = np.lexsort(keys[::-1], axis=dimension)
    return [np.take_along_axis(o, perm, axis=dimension) for o in ops]


def _sort_fn(*ops, dimension, num_keys):
    return lax.sort(ops, dimension, num_keys=num_keys)


RECORDS = [
    OpRecord("broadcast_in_dim", lax.broadcast_in_dim, _broadcast_ref, _with(_broadcast_params), dtypes=ANY),
    OpRecord("reshape", lambda x, new_sizes: lax.reshape(x, new_sizes), lambda x, new_sizes: x.reshape(new_sizes),
             _with(_reshape_params), dtypes=ANY),
    OpRecord("transpose", lax.transpose, lambda x, permutation: np.transpose(x, permutation),
             _with(lambda draw, x: ((), {"permutation": tuple(draw(st.permutations(range(len(x.shape)))))})),
             dtypes=ANY),
    OpRecord("squeeze", lax.squeeze, lambda x, dimensions: np.squeeze(x, tuple(dimensions)), _squeeze_strategy,
             dtypes=ANY),
    OpRecord("expand_dims", lax.expand_dims, lambda x, dimensions: np.expand_dims(x, dimensions),
             _with(_expand_params), dtypes=ANY),
    OpRecord("rev", lax.rev, lambda x, dimensions: np.flip(x, dimensions), _with(_subset_of_dims), dtypes=ANY),
    OpRecord("slice", lax.slice, _slice_ref, _with(_slice_params, min_side=0), dtypes=ANY),
    OpRecord("pad", lax.pad, _pad_ref, _with(_pad_params, min_side=0), dtypes=ANY),
    OpRecord("dynamic_slice", lambda x, *idx, slice_sizes: lax.dynamic_slice(x, idx, slice_sizes),
             lambda x, *idx, slice_sizes: x[_clamped(idx, x.shape, slice_sizes)], _with(_dynamic_slice_params),
             dtypes=FLOATS + INTS),
    OpRecord("dynamic_update_slice", lambda x, u, *idx: lax.dynamic_update_slice(x, u, idx), _dynamic_update_ref,
             _dynamic_update_strategy, dtypes=FLOATS + INTS),
    OpRecord("concatenate", lambda *xs, dimension: lax.concatenate(xs, dimension),
             lambda *xs, dimension: np.concatenate(xs, dimension), _concatenate_strategy, dtypes=ANY),
    OpRecord("sort", _sort_fn, _sort_ref, _sort_strategy(1, 1), dtypes=FLOATS + INTS + ("bool",),
             smooth_args=_sort_strategy(1, 1, smooth=True)),
    OpRecord("sort", _sort_fn, _sort_ref, _sort_strategy(2, 1), dtypes=FLOATS + INTS, name="sort_carry",
             smooth_args=_sort_strategy(2, 1, smooth=True)),
    OpRecord("sort", _sort_fn, _sort_ref, _sort_strategy(3, 2, int_first_key=True), dtypes=FLOATS + INTS,
             name="sort_two_keys", smooth_args=_sort_strategy(3, 2, int_first_key=True, smooth=True)),
    OpRecord("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, "uint8"),    # bytes: a new last dim
             lambda x: np.ascontiguousarray(x).reshape(x.shape + (1,)).view(np.uint8), _with(lambda draw, x: ((), {})),
             dtypes=INTS, diff=False, keeps_dtype=False),
]
