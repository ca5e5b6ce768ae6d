"""dot_general and conv_general_dilated impls against an array module ``xp``.

dot_general becomes one (batched) ``xp.matmul`` on transposed views, reshaped without copies where the strides
allow, so 2-D and batched matmuls go straight to BLAS. conv_general_dilated is im2col: one strided window view
of the (dilated, padded) input, one copy into a column matrix, one batched matmul. Both accept ``out=`` (any
C-contiguous array of the result's shape and dtype); it is written directly by the matmul when the layout
allows (always for dot_general; for convolutions whose output spec is ``NC...`` with batch_group_count 1),
otherwise the result is copied into it.
"""
from __future__ import annotations

from math import prod


def _merge_is_view(x, groups) -> bool:
    """Whether reshaping ``x`` by merging consecutive axis ``groups`` (lists of axes) needs no copy."""
    for g in groups:
        dims = [a for a in g if x.shape[a] != 1]
        for a, b in zip(dims, dims[1:]):
            if x.strides[a] != x.strides[b] * x.shape[b]:
                return False
    return True


def _as_matrices(xp, x, batch, rows, cols):
    """``x`` as ``(*batch_shape, R, C)``: a view when the strides allow (possibly a transposed one)."""
    bshape = tuple(x.shape[d] for d in batch)
    r, c = prod(x.shape[d] for d in rows), prod(x.shape[d] for d in cols)
    nb = len(batch)
    direct = xp.transpose(x, tuple(batch) + tuple(rows) + tuple(cols))
    ngroups = [list(range(nb, nb + len(rows))), list(range(nb + len(rows), direct.ndim))]
    if _merge_is_view(direct, ngroups):
        return xp.reshape(direct, bshape + (r, c))
    swapped = xp.transpose(x, tuple(batch) + tuple(cols) + tuple(rows))
    sgroups = [list(range(nb, nb + len(cols))), list(range(nb + len(cols), swapped.ndim))]
    if _merge_is_view(swapped, sgroups):
        return xp.swapaxes(xp.reshape(swapped, bshape + (c, r)), -1, -2)
    return xp.reshape(direct, bshape + (r, c))


def _dot_general(xp):
    matmul = xp.matmul

    def dot_general(lhs, rhs, *, dimension_numbers, preferred_element_type=None, out=None):
        (lc, rc), (lb, rb) = dimension_numbers
        if preferred_element_type is not None and lhs.dtype != preferred_element_type:
            lhs, rhs = lhs.astype(preferred_element_type), rhs.astype(preferred_element_type)
        if not lb and lhs.ndim == 2 and rhs.ndim == 2 and len(lc) == 1:   # plain matmul, maybe transposed
            a = lhs if lc[0] == 1 else lhs.T
            return matmul(a, rhs if rc[0] == 0 else rhs.T, out=out)
        lhs, rhs = xp.asarray(lhs), xp.asarray(rhs)
        lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
        rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
        shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in lfree)
                 + tuple(rhs.shape[d] for d in rfree))
        a = _as_matrices(xp, lhs, lb, lfree, lc)
        b = _as_matrices(xp, rhs, rb, rc, rfree)
        if out is not None and out.flags.c_contiguous:
            matmul(a, b, out=xp.reshape(out, a.shape[:-1] + b.shape[-1:]))
            return out
        res = xp.reshape(matmul(a, b), shape)
        if out is not None:
            xp.copyto(out, res)
            return out
        return res
    return dot_general


def _conv(xp):
    as_strided = xp.lib.stride_tricks.as_strided

    def dilate_pad(x, padding, lhs_dilation):
        """Zero-dilate and pad the spatial dims of ``(N, C, *S)``; negative padding crops."""
        if all(d == 1 for d in lhs_dilation) and all(lo == 0 and hi == 0 for lo, hi in padding):
            return x
        sp = x.shape[2:]
        dil = [(n - 1) * d + 1 if n else 0 for n, d in zip(sp, lhs_dilation)]
        full = [max(lo, 0) + n + max(hi, 0) for n, (lo, hi) in zip(dil, padding)]
        buf = xp.zeros(x.shape[:2] + tuple(full), x.dtype)
        inner = tuple(slice(max(lo, 0), max(lo, 0) + n, d) for n, (lo, _), d in zip(dil, padding, lhs_dilation))
        buf[(slice(None), slice(None)) + inner] = x
        crop = tuple(slice(max(-lo, 0), max(max(-lo, 0), f - max(-hi, 0))) for f, (lo, hi) in zip(full, padding))
        return buf[(slice(None), slice(None)) + crop]

    def conv(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
             feature_group_count, batch_group_count, out=None):
        lspec, rspec, ospec = dimension_numbers
        x = dilate_pad(xp.transpose(lhs, lspec), padding, lhs_dilation)    # (N, C, *S)
        w = xp.transpose(rhs, rspec)                                       # (O, I, *K)
        G, B = feature_group_count, batch_group_count
        (N, C), (O, Cg), ksz = x.shape[:2], w.shape[:2], w.shape[2:]
        osz = tuple(max(0, (n - ((k - 1) * r + 1)) // s + 1) if n >= (k - 1) * r + 1 else 0
                    for n, k, s, r in zip(x.shape[2:], ksz, window_strides, rhs_dilation))
        st = x.strides[2:]
        kst = tuple(s * r for s, r in zip(st, rhs_dilation))
        ost = tuple(s * w_ for s, w_ in zip(st, window_strides))
        K, S, Oq, Nb = prod(ksz), prod(osz), O // (G * B), N // B
        wm = xp.reshape(w, (B, 1, G, Oq, Cg * K))
        # lay the column matrix out so that the copy's innermost run is the longer contiguous one
        if osz and ksz[-1] * (rhs_dilation[-1] == 1) > osz[-1] * (window_strides[-1] == 1):
            win = as_strided(x, x.shape[:2] + osz + ksz, x.strides[:2] + ost + kst)       # (N, C, *O, *K)
            perm = (0,) + tuple(range(2, 2 + len(osz))) + (1,) + tuple(range(2 + len(osz), win.ndim))
            cols = xp.reshape(xp.transpose(win, perm), (B, Nb, S, G, Cg * K))
            res = matmul_t(cols, wm)                                                       # (B, Nb, G, Oq, S)
        else:
            win = as_strided(x, x.shape[:2] + ksz + osz, x.strides[:2] + kst + ost)       # (N, C, *K, *O)
            cols = xp.reshape(win, (B, Nb, G, Cg * K, S))
            if out is not None and B == 1 and tuple(ospec) == tuple(range(len(ospec))) and out.flags.c_contiguous:
                xp.matmul(wm, cols, out=xp.reshape(out, (1, Nb, G, Oq, S)))
                return out
            res = xp.matmul(wm, cols)
        if B > 1:
            res = xp.swapaxes(res, 0, 1)
        res = xp.transpose(xp.reshape(res, (Nb, O) + osz), tuple(sorted(range(len(ospec)), key=ospec.__getitem__)))
        if out is not None:
            xp.copyto(out, res)
            return out
        return res

    def matmul_t(cols, wm):
        """``(B, Nb, S, G, CK) x (B, 1, G, Oq, CK) -> (B, Nb, G, Oq, S)``."""
        return xp.swapaxes(xp.matmul(xp.swapaxes(cols, 2, 3), xp.swapaxes(wm, -1, -2)), -1, -2)
    return conv


def impls(xp) -> dict:
    return {"dot_general": _dot_general(xp), "conv_general_dilated": _conv(xp)}
