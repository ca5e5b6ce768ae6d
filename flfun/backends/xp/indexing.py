"""gather / scatter impls against an array module ``xp`` with advanced indexing: the operand is viewed with its
batch dims, then the indexed axes, first, so one tuple of broadcast index arrays addresses it. Scatter works on a
copy (inputs are immutable) and accumulates with ``ufunc.at``, or with plain indexing where the positions are
distinct by construction (one index tuple per batch entry, as in the gradient of ``z[y]`` under vmap)."""
from __future__ import annotations

import contextlib
import functools
import operator

import numpy as np

from flfun import dtypes


def default_fill(dtype):
    """gather's default ``fill_value``: NaN, the signed minimum, the unsigned maximum, or True."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max
    return np.nan if dtypes.is_float(dtype) else True


_WIDER = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32", "uint16": "uint32",
          "float16": "float32", "bfloat16": "float32"}


@functools.lru_cache(maxsize=1024)
def _layout(shape: tuple, axes: tuple, batch_dims: int) -> tuple:
    """(view permutation: batch, indexed, carried dims; indexed sizes; carried sizes) of an operand."""
    rest = tuple(d for d in range(batch_dims, len(shape)) if d not in axes)
    return tuple(range(batch_dims)) + axes + rest, tuple(shape[a] for a in axes), tuple(shape[d] for d in rest)


def plan(xp, operand, indices, axes, batch_dims, mode):
    """(view permutation, index tuple, in-bounds mask or None, index shape, carried sizes)."""
    shape = operand.shape
    perm, sizes, rest = _layout(shape, tuple(axes), batch_dims)
    ishape = indices.shape[:-1]
    if mode != "fill" and 0 in sizes:
        mode = "fill"              # nothing to clamp to: every position is out of bounds
    cols = [indices[..., k] for k in range(len(axes))]
    valid = None
    if mode != "fill":   # "promise_in_bounds" is clamped too: an impl must never read outside the buffer
        cols = [xp.minimum(xp.maximum(c if c.dtype.itemsize >= 4 else c.astype(xp.int32), 0), n - 1)
                for c, n in zip(cols, sizes)]     # (np.clip's Python wrapper costs 3 us)
    elif cols:
        valid = functools.reduce(operator.and_, [(c >= 0) & (c < n) for c, n in zip(cols, sizes)])
        cols = [xp.where(valid, c, 0) for c in cols]
    nb = len(ishape)
    batch = [xp.arange(shape[b]).reshape((1,) * b + (shape[b],) + (1,) * (nb - b - 1))
             for b in range(batch_dims)]
    # the columns have the index shape: indexing broadcasts the batch aranges against them
    idx = tuple(batch + cols) if cols else tuple(xp.broadcast_to(a, ishape) for a in batch)
    return perm, idx, valid, ishape, rest

def gather(xp, operand, indices, *, axes, batch_dims, mode, fill_value):
    operand, indices = xp.asarray(operand), xp.asarray(indices)
    empty = any(operand.shape[a] == 0 for a in axes)      # (clip is an error there: see the abstract eval)
    perm, idx, valid, ishape, rest = plan(xp, operand, indices, axes, batch_dims, mode)
    if not idx:
        out = xp.broadcast_to(operand, tuple(ishape) + operand.shape)
    elif empty:                    # every read is out of bounds: plan's mask is all False
        out = xp.zeros(tuple(ishape) + rest, operand.dtype)
    else:
        out = operand.transpose(perm)[idx]
    if valid is not None:
        fill = default_fill(operand.dtype) if fill_value is None else fill_value
        mask = valid.reshape(tuple(ishape) + (1,) * len(rest))
        out = xp.where(mask, out, xp.asarray(fill, dtype=operand.dtype))
    return xp.asarray(out, dtype=operand.dtype)

_UFUNCS = {"add": "add", "mul": "multiply", "min": "minimum", "max": "maximum"}
_REDUCERS = {"add": "sum", "mul": "prod", "min": "min", "max": "max"}

def scatter(xp, operand, indices, updates, *, axes, batch_dims, mode, op):
    out = xp.array(operand, copy=True, order="C")   # a fresh C-ordered buffer: the input stays untouched
    updates = xp.asarray(updates)
    perm, idx, valid, ishape, rest = plan(xp, out, xp.asarray(indices), axes, batch_dims, mode)
    if not idx:                    # no indexed dims: every update lands on the whole operand
        flat = updates.reshape((-1,) + out.shape)
        if valid is not None or flat.shape[0] == 0:
            return out
        if op == "set":
            return xp.array(flat[-1], copy=True)
        return xp.asarray(getattr(xp, _UFUNCS[op])(out, getattr(xp, _REDUCERS[op])(flat, axis=0)), dtype=out.dtype)
    if op == "set" or len(ishape) == batch_dims:   # one index per batch entry: the positions are distinct
        if valid is not None:      # drop out-of-bound updates
            idx, updates = tuple(xp.broadcast_to(a, ishape)[valid] for a in idx), updates[valid]
        view = out.transpose(perm)
        view[idx] = updates if op == "set" else getattr(xp, _UFUNCS[op])(view[idx], updates)
        return out
    # accumulate through the flat buffer: 1-d ufunc.at is several times faster than n-d
    strides = [s // out.itemsize for s in out.strides]     # out is C-contiguous
    lin = sum(xp.asarray(a, dtype=xp.int64) * strides[p] for a, p in zip(idx, perm))
    for n, p in zip(rest, perm[len(idx):]):    # carried dims: one more trailing dim each
        lin = lin[..., None] + xp.arange(n, dtype=xp.int64) * strides[p]
    if valid is not None:
        lin, updates = lin[valid], updates[valid]
    accumulate(xp, out.reshape(-1), lin.reshape(-1), updates.reshape(-1), op)
    return out

def accumulate(xp, flat, lin, upd, op):
    """``ufunc.at(flat, lin, upd)``, with fallbacks for cupy: no ``multiply.at``, and ``at`` only for
    32/64-bit dtypes."""
    uf = getattr(xp, _UFUNCS[op])
    with contextlib.suppress(AttributeError, NotImplementedError, TypeError):
        return uf.at(flat, lin, upd)
    wide = _WIDER.get(flat.dtype.name)
    if op != "mul" and wide is not None:
        w = flat.astype(wide)
        uf.at(w, lin, upd.astype(wide))
        flat[...] = w.astype(flat.dtype)
        return
    # rounds of read-modify-write; positions are distinct within a round (the k-th duplicate of each)
    if lin.size == 0:
        return
    order = xp.argsort(lin)
    lin, upd = lin[order], upd[order]
    first = xp.concatenate([xp.ones(1, dtype=bool), lin[1:] != lin[:-1]])
    rank = xp.arange(lin.size) - xp.flatnonzero(first)[xp.cumsum(first) - 1]
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        pos = lin[sel]
        flat[pos] = uf(flat[pos], upd[sel])


def impls(xp) -> dict:
    """name -> impl for ``xp``."""
    return {"gather": functools.partial(gather, xp), "scatter": functools.partial(scatter, xp)}
