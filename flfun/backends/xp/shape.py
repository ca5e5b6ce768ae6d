"""Shape impls against an array module ``xp`` (views where numpy gives them: arrays are immutable)."""
from __future__ import annotations

import math
from functools import partial

from flfun.backends.xp.common import WritesOut


def broadcast_in_dim(xp, x, *, shape, broadcast_dimensions):
    sizes = dict(zip(broadcast_dimensions, x.shape))
    x = x.reshape([sizes.get(d, 1) for d in range(len(shape))])
    if math.prod(shape) <= 4096:        # small: a filled copy is cheaper than numpy's Python-level broadcast_to
        out = xp.empty(shape, x.dtype)
        out[...] = x
        return out
    return xp.broadcast_to(x, shape)    # large: a stride-0 view (arrays are immutable, so sharing is safe)


def iota(xp, *, dtype, shape, dimension, device=None):
    r = xp.arange(shape[dimension], dtype=dtype)
    return xp.broadcast_to(r.reshape([n if d == dimension else 1 for d, n in enumerate(shape)]), shape)


def slice_(x, *, start_indices, limit_indices, strides):
    return x[tuple(map(slice, start_indices, limit_indices, strides))]


def window(x_shape, idx, sizes):
    """Slices of the window at ``idx``, each start clamped into ``[0, dim - size]`` like lax."""
    return tuple(slice(s, s + n) for s, n in
                 ((min(max(int(i), 0), d - n), n) for i, d, n in zip(idx, x_shape, sizes)))


def dynamic_slice(x, *idx, slice_sizes):
    return x[window(x.shape, idx, slice_sizes)]


def dynamic_update_slice(xp, x, update, *idx):
    out = xp.array(x, copy=True)
    out[window(out.shape, idx, update.shape)] = update
    return out


def pad(xp, x, pv, *, padding_config):
    x = xp.asarray(x)
    lo = [max(l, 0) for l, _, _ in padding_config]
    shape = [max(l, 0) + max(h, 0) + d + max(d - 1, 0) * i for d, (l, h, i) in zip(x.shape, padding_config)]
    out = xp.full(shape, pv, dtype=x.dtype)
    out[tuple(slice(l, l + (d - 1) * (i + 1) + 1 if d else l, i + 1)
              for l, d, (_, _, i) in zip(lo, x.shape, padding_config))] = x
    return out[tuple(slice(max(-l, 0), n - max(-h, 0)) for n, (l, h, _) in zip(shape, padding_config))]


def sort(xp, *operands, dimension, is_stable, num_keys):
    stable = {"kind": "stable"} if xp.__name__ == "numpy" else {}   # cupy's sorts are always stable
    if len(operands) == 1:
        return [xp.sort(operands[0], axis=dimension, **stable)]
    # least significant key first; each later stable sort keeps the order among its ties
    perm = xp.argsort(operands[num_keys - 1], axis=dimension, **stable)
    for key in reversed(operands[:num_keys - 1]):
        order = xp.argsort(xp.take_along_axis(key, perm, axis=dimension), axis=dimension, **stable)
        perm = xp.take_along_axis(perm, order, axis=dimension)
    return [xp.take_along_axis(o, perm, axis=dimension) for o in operands]


def impls(xp) -> dict:
    """name -> impl for ``xp``."""
    bound = {name: partial(fn, xp) for name, fn in (
        ("broadcast_in_dim", broadcast_in_dim), ("iota", iota), ("pad", pad), ("sort", sort),
        ("dynamic_update_slice", dynamic_update_slice))}
    return {**bound, "slice": slice_, "dynamic_slice": dynamic_slice,
            "reshape": lambda x, *, new_sizes: x.reshape(new_sizes),      # the method: xp.reshape is Python-level
            "transpose": lambda x, *, permutation: xp.transpose(x, permutation),
            "squeeze": lambda x, *, dimensions: xp.squeeze(x, axis=dimensions),
            "expand_dims": lambda x, *, dimensions: xp.expand_dims(x, dimensions),
            "rev": lambda x, *, dimensions: xp.flip(x, axis=dimensions),
            "concatenate": WritesOut(lambda *operands, dimension, out=None: xp.concatenate(operands, axis=dimension,
                                                                                          out=out))}
