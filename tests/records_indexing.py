"""Op-table records for gather and scatter: several axes / batch_dims layouts, every mode and scatter op. The
references are plain loops over index positions, independent of the impls' advanced indexing."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from flfun import lax
from flfun.backends.xp.indexing import default_fill
from flfun.testing import arrays
from op_table import FLOATS, INTS, OpRecord


# --------------------------------------------------------------------------------------------------- references
def _positions(operand_shape, indices, axes, batch_dims, mode):
    """Yield (index position, operand key with slices for carried dims, in bounds?) like gather reads them."""
    for pos in np.ndindex(*indices.shape[:-1]):
        key = [slice(None)] * len(operand_shape)
        key[:batch_dims] = pos[:batch_dims]
        ok = True
        for k, a in enumerate(axes):
            i, n = int(indices[pos + (k,)]), operand_shape[a]
            ok &= 0 <= i < n
            key[a] = min(max(i, 0), n - 1)
        yield pos, tuple(key), ok or mode != "fill"


def gather_ref(operand, indices, *, axes, batch_dims=0, mode="clip", fill_value=None):
    rest = [d for i, d in enumerate(operand.shape) if i >= batch_dims and i not in axes]
    out = np.empty(indices.shape[:-1] + tuple(rest), operand.dtype)
    fill = default_fill(operand.dtype) if fill_value is None else fill_value
    for pos, key, ok in _positions(operand.shape, indices, axes, batch_dims, mode):
        out[pos] = operand[key] if ok else fill
    return out


def scatter_ref(operand, indices, updates, *, axes, batch_dims=0, mode="clip", op="set"):
    out = operand.copy()
    combine = {"set": lambda a, b: b, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[op]
    for pos, key, ok in _positions(operand.shape, indices, axes, batch_dims, mode):
        if ok:
            out[key] = combine(out[key], updates[pos])
    return out


# --------------------------------------------------------------------------------------------------- strategies
def _case(rank, axes, batch_dims=0, oob=0, unique=False, with_updates=False, distinct=False):
    """Strategy builder drawing ``(operand, indices[, updates])``: indices may step ``oob`` past either end;
    ``unique`` makes index tuples distinct within each batch; ``distinct`` makes all float values distinct
    (min/max are smooth away from ties)."""
    def strat(dtype):
        @st.composite
        def draw(draw):
            shape = tuple(draw(st.integers(1, 3)) for _ in range(rank))
            sizes = [shape[a] for a in axes]
            bshape = shape[:batch_dims]
            if unique:
                total = int(np.prod(sizes))
                ishape = (draw(st.integers(0, total)),)
                flat = np.array([draw(st.permutations(range(total)))[:ishape[0]]
                                 for _ in np.ndindex(*bshape)], dtype=np.int64)
                cols = np.unravel_index(flat, sizes) if sizes else []
                indices = np.stack(list(cols), axis=-1).reshape(bshape + ishape + (len(axes),)) \
                    if sizes else np.zeros(bshape + ishape + (0,), np.int64)
            else:
                ishape = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.integers(0, 2))))
                cols = [draw(arrays("int64", bshape + ishape, low=-oob, high=n - 1 + oob)) for n in sizes]
                indices = np.stack(cols, axis=-1) if cols else np.zeros(bshape + ishape + (0,), np.int64)
            indices = indices.astype(draw(st.sampled_from(["int32", "int64"])))
            operand = draw(arrays(dtype, shape))
            if not with_updates:
                return (operand, indices), {}
            rest = tuple(d for i, d in enumerate(shape) if i >= batch_dims and i not in axes)
            updates = draw(arrays(dtype, indices.shape[:-1] + rest))
            if distinct:    # every value distinct and 0.25 apart
                vals = np.array(draw(st.permutations(range(operand.size + updates.size))), np.float64)
                vals = ((vals - vals.size / 2) * 0.25).astype(dtype)
                operand, updates = vals[:operand.size].reshape(shape), vals[operand.size:].reshape(updates.shape)
            return (operand, indices, updates), {}
        return draw()
    return strat


# ------------------------------------------------------------------------------------------------------ records
GATHERS = [  # (name, rank, axes, batch_dims, mode, fill_value)
    ("gather_rows", 2, (0,), 0, "clip", None),
    ("gather_middle", 3, (1,), 0, "clip", None),
    ("gather_two_axes", 3, (2, 0), 0, "promise_in_bounds", None),
    ("gather_batched", 3, (2,), 1, "clip", None),
    ("gather_batched_two", 3, (1, 2), 1, "clip", None),
    ("gather_no_axes", 2, (), 1, "clip", None),
    ("gather_fill_zero", 2, (1,), 0, "fill", 0.0),
]


def _gather_record(name, rank, axes, bd, mode, fill):
    kw = dict(axes=axes, batch_dims=bd, mode=mode, fill_value=fill)
    oob = 0 if mode == "promise_in_bounds" else 2
    return OpRecord("gather", lambda x, i: lax.gather(x, i, **kw), lambda x, i: gather_ref(x, i, **kw),
                    _case(rank, axes, bd, oob=oob), dtypes=FLOATS + INTS, name=name)


def _scatter_record(name, rank, axes, bd, mode, op, oob=0, unique=False, smooth=None, dtypes=FLOATS + INTS):
    kw = dict(axes=axes, batch_dims=bd, mode=mode, op=op)
    return OpRecord("scatter", lambda x, i, u: lax.scatter(x, i, u, **kw),
                    lambda x, i, u: scatter_ref(x, i, u, **kw),
                    _case(rank, axes, bd, oob=oob, unique=unique, with_updates=True), dtypes=dtypes, name=name,
                    smooth_args=smooth)


RECORDS = [_gather_record(*g) for g in GATHERS] + [
    OpRecord("gather", lambda x, i: lax.gather(x, i, axes=(0,), mode="fill"),
             lambda x, i: gather_ref(x, i, axes=(0,), mode="fill"), _case(2, (0,), oob=2), dtypes=FLOATS + INTS,
             diff=False, name="gather_fill_default"),
    _scatter_record("scatter_add_rows", 2, (0,), 0, "clip", "add", oob=2),
    _scatter_record("scatter_add_batched_drop", 3, (2,), 1, "fill", "add", oob=2),
    _scatter_record("scatter_add_two_axes", 3, (0, 2), 0, "clip", "add"),
    _scatter_record("scatter_set_rows", 2, (0,), 0, "clip", "set", unique=True),
    _scatter_record("scatter_set_two_axes", 3, (2, 1), 0, "promise_in_bounds", "set", unique=True),
    _scatter_record("scatter_set_batched", 3, (1,), 1, "clip", "set", unique=True),
    _scatter_record("scatter_mul", 2, (1,), 0, "clip", "mul", smooth=_case(2, (1,), unique=True,
                                                                              with_updates=True)),
    _scatter_record("scatter_mul_batched", 3, (2,), 1, "fill", "mul", oob=1,
                    smooth=_case(3, (2,), 1, unique=True, with_updates=True)),
    _scatter_record("scatter_min", 2, (0,), 0, "clip", "min",
                    smooth=_case(2, (0,), with_updates=True, distinct=True)),
    _scatter_record("scatter_max", 3, (0, 2), 0, "clip", "max",
                    smooth=_case(3, (0, 2), with_updates=True, distinct=True)),
    _scatter_record("scatter_max_batched_drop", 3, (1,), 1, "fill", "max", oob=1,
                    smooth=_case(3, (1,), 1, oob=1, with_updates=True, distinct=True)),
]
