"""Shape impls against an array module ``xp`` (views where numpy gives them: arrays are immutable)."""
from __future__ import annotations


def impls(xp) -> dict:
    def broadcast_in_dim(x, *, shape, broadcast_dimensions):
        expanded = [1] * len(shape)
        for d, b in zip(xp.shape(x), broadcast_dimensions):
            expanded[b] = d
        return xp.broadcast_to(xp.reshape(x, expanded), shape)

    return {
        **_more(xp),
        "broadcast_in_dim": broadcast_in_dim,
        "reshape": lambda x, *, new_sizes: xp.reshape(x, new_sizes),
        "transpose": lambda x, *, permutation: xp.transpose(x, permutation),
    }


def _more(xp):
    def iota(*, dtype, shape, dimension, device=None):
        r = xp.arange(shape[dimension], dtype=dtype)
        expanded = [1] * len(shape)
        expanded[dimension] = shape[dimension]
        return xp.broadcast_to(r.reshape(expanded), shape)

    def slice_(x, *, start_indices, limit_indices, strides):
        return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]

    def pad(x, pv, *, padding_config):
        x = xp.asarray(x)
        lo = [max(l, 0) for l, _, _ in padding_config]
        shape = []
        for d, (l, h, i) in zip(x.shape, padding_config):
            shape.append(max(l, 0) + max(h, 0) + d + max(d - 1, 0) * i)
        out = xp.full(shape, pv, dtype=x.dtype)
        idx = tuple(slice(l, l + (d - 1) * (i + 1) + 1 if d else l, i + 1)
                    for l, d, (_, _, i) in zip(lo, x.shape, padding_config))
        out[idx] = x
        crop = tuple(slice(max(-l, 0), n - max(-h, 0)) for n, (l, h, _) in zip(shape, padding_config))
        return out[crop]

    return {"iota": iota, "slice": slice_, "pad": pad}
