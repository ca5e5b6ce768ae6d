"""dot_general and conv_general_dilated impls against an array module ``xp``.

dot_general becomes one (batched) ``xp.matmul`` on transposed views, reshaped without copies where the strides
allow, so 2-D and batched matmuls go straight to BLAS. conv_general_dilated is im2col (one strided window view
of the (dilated, padded) input, one copy into a column matrix ordered for the data's layout, one batched matmul)
or, where a cost model says so, one GEMM per kernel offset added shifted into the result. Both accept ``out=``
(any C-contiguous array of the result's shape and dtype); it is written directly by the matmul when the layout
allows (always for dot_general; for convolutions whose GEMM result is the output's layout, e.g. NCHW or NHWC
outputs from data of that layout, or the HWIO kernel gradient of NHWC data), otherwise the result is copied.
"""
from __future__ import annotations

import functools
import itertools
import string
import threading
from math import prod

import numpy as np

from flfun.backends.xp.common import WritesOut, finish, in_float32
from flfun.primitives.linalg import conv_output_shape


def _merge_is_view(x, groups) -> bool:
    """Whether reshaping ``x`` by merging consecutive axis ``groups`` (lists of axes) needs no copy."""
    for g in groups:
        dims = [a for a in g if x.shape[a] != 1]
        for a, b in itertools.pairwise(dims):
            if x.strides[a] != x.strides[b] * x.shape[b]:
                return False
    return True


def dot_operands(xp, lhs, rhs, dimension_numbers):
    """dot_general as a (batched) matmul: ``(a, b, out_shape)`` with ``a @ b`` laid out as the result."""
    (lc, rc), (lb, rb) = dimension_numbers
    lfree = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in lfree)
             + tuple(rhs.shape[d] for d in rfree))
    return _as_matrices(xp, lhs, lb, lfree, lc), _as_matrices(xp, rhs, rb, rc, rfree), shape


def _as_matrices(xp, x, batch, rows, cols):
    """``x`` as ``(*batch_shape, R, C)``: a view when the strides allow (possibly a transposed one)."""
    bshape, nb = tuple(x.shape[d] for d in batch), len(batch)
    for swap, (first, second) in enumerate([(rows, cols), (cols, rows)]):
        t = xp.transpose(x, tuple(batch) + tuple(first) + tuple(second))
        if _merge_is_view(t, [range(nb, nb + len(first)), range(nb + len(first), t.ndim)]):
            m = xp.reshape(t, bshape + (prod(x.shape[d] for d in first), prod(x.shape[d] for d in second)))
            return xp.swapaxes(m, -1, -2) if swap else m
    rows_cols = xp.transpose(x, tuple(batch) + tuple(rows) + tuple(cols))    # neither is a view: a copy
    return xp.reshape(rows_cols, bshape + (prod(x.shape[d] for d in rows), prod(x.shape[d] for d in cols)))


@functools.lru_cache(maxsize=256)
def _outer_subscripts(nl: int, nr: int, dimension_numbers) -> str:
    """einsum subscripts of a dot_general without contracting dims, e.g. ``ab,ac->abc`` (batch dim 0)."""
    (_, _), (lb, rb) = dimension_numbers
    letters = string.ascii_letters[:nl + nr]
    rs = [letters[lb[rb.index(d)]] if d in rb else letters[nl + d] for d in range(nr)]
    out = [letters[d] for d in lb] + [letters[d] for d in range(nl) if d not in lb] + \
        [rs[d] for d in range(nr) if d not in rb]
    return f"{''.join(letters[:nl])},{''.join(rs)}->{''.join(out)}"


def dot_general(xp, lhs, rhs, *, dimension_numbers, preferred_element_type=None, out=None):
    (lc, rc), (lb, _) = dimension_numbers
    if preferred_element_type is not None and lhs.dtype != preferred_element_type:
        lhs, rhs = lhs.astype(preferred_element_type), rhs.astype(preferred_element_type)
    if not lb and lhs.ndim == 2 and rhs.ndim == 2 and len(lc) == 1:   # plain matmul, maybe transposed
        return xp.matmul(lhs if lc[0] == 1 else lhs.T, rhs if rc[0] == 0 else rhs.T, out=out)
    if not lc and lhs.ndim + rhs.ndim <= len(string.ascii_letters):
        # outer products (per-example ones): einsum's loops beat K=1 matmuls and broadcasting
        spec = _outer_subscripts(lhs.ndim, rhs.ndim, dimension_numbers)
        if xp.__name__ == "numpy":      # cupy's einsum takes no out=
            return xp.einsum(spec, lhs, rhs, out=out)
        return finish(xp.einsum(spec, lhs, rhs), out)
    a, b, shape = dot_operands(xp, xp.asarray(lhs), xp.asarray(rhs), dimension_numbers)
    if out is not None and out.flags.c_contiguous:
        xp.matmul(a, b, out=xp.reshape(out, a.shape[:-1] + b.shape[-1:]))
        return out
    return finish(xp.reshape(xp.matmul(a, b), shape), out)


def _scatter_is_cheaper(C, O, K, T, S, N) -> bool:
    """Cost model (ns per example, measured on one core): im2col copies C*K*S column entries; the scatter form
    writes O*K*T products and adds O*K*S of them, but multiplies no padding zeros."""
    flop = 0.07
    im2col = 2.8 * C * K * S + 2 * flop * O * C * K * S
    scatter = 1.1 * O * K * (T + S) + C * T + 2 * flop * O * C * K * T + 5000 * K / max(N, 1)
    return scatter < im2col


def dilate_pad(xp, x, padding, lhs_dilation):
    """Zero-dilate and pad the spatial dims of ``(N, C, *S)``; negative padding crops."""
    if all(d == 1 for d in lhs_dilation) and all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    sp = x.shape[2:]
    dil = [(n - 1) * d + 1 if n else 0 for n, d in zip(sp, lhs_dilation)]
    full = [max(lo, 0) + n + max(hi, 0) for n, (lo, hi) in zip(dil, padding)]
    order = sorted(range(x.ndim), key=lambda i: -x.strides[i])      # keep x's memory order (e.g. NHWC)
    shape = x.shape[:2] + tuple(full)
    buf = xp.transpose(xp.zeros(tuple(shape[i] for i in order), x.dtype),
                       tuple(order.index(i) for i in range(x.ndim)))
    inner = tuple(slice(max(lo, 0), max(lo, 0) + n, d) for n, (lo, _), d in zip(dil, padding, lhs_dilation))
    buf[(slice(None), slice(None)) + inner] = x
    crop = tuple(slice(max(-lo, 0), max(max(-lo, 0), f - max(-hi, 0))) for f, (lo, hi) in zip(full, padding))
    return buf[(slice(None), slice(None)) + crop]


def scatter_conv(xp, x, w, padding, rhs_dilation, osz):
    """Stride-1 conv as one GEMM per kernel offset over every input position, each added shifted into the
    result (col2im): ``out[n, o, s] = sum_k y_k[n, o, s + k * r - lo]``. Channels-last data gives
    ``y_k = x (N*T, C) @ w_k (C, O)`` and an ``(N, *S, O)`` result, else ``w_k (O, C) @ x (C, N*T)`` and
    ``(O, N, *S)``. Returns the canonical ``(N, O, *S)`` view."""
    (N, C), T, (O, K) = x.shape[:2], tuple(x.shape[2:]), (w.shape[0], tuple(w.shape[2:]))
    sp, ns = tuple(range(2, 2 + len(T))), len(T)
    last = C > 1 and x.strides[1] == x.itemsize
    if last:
        x2, wk = xp.reshape(xp.transpose(x, (0,) + sp + (1,)), (N * prod(T), C)), xp.transpose(w, sp + (1, 0))
        res, y = xp.zeros((N,) + osz + (O,), x.dtype), xp.empty((N,) + T + (O,), x.dtype)
    else:
        x2, wk = xp.reshape(xp.transpose(x, (1, 0) + sp), (C, N * prod(T))), xp.transpose(w, sp + (0, 1))
        res, y = xp.zeros((O, N) + osz, x.dtype), xp.empty((O, N) + T, x.dtype)
    y2, lead = xp.reshape(y, (N * prod(T), O) if last else (O, N * prod(T))), (slice(None),) * (2 - last)
    for kk in itertools.product(*map(range, K)):
        dst, src = [], []
        for k, r, (lo, _), t, s in zip(kk, rhs_dilation, padding, T, osz):
            shift = k * r - lo
            a, b = max(0, -shift), min(s, t - shift)
            dst.append(slice(a, max(a, b)))
            src.append(slice(a + shift, max(a, b) + shift))
        if all(d.stop > d.start for d in dst):
            xp.matmul(x2, wk[kk], out=y2) if last else xp.matmul(wk[kk], x2, out=y2)
            res[lead + tuple(dst)] += y[lead + tuple(src)]
    return xp.transpose(res, (0, ns + 1) + tuple(range(1, ns + 1)) if last else (1, 0) + sp)


_SCRATCH = threading.local()
SCRATCH_LIMIT = 1 << 26   # bytes: numpy column matrices up to this size are copied into one buffer per thread


def _columns(win, perm, shape):
    """The im2col column matrix ``reshape(transpose(win, perm), shape)``. Where that needs a copy of a numpy
    array, the copy goes into a buffer that each thread keeps (it is only read by the GEMM that follows): a
    fresh 40 MB array costs ~0.2 ms per MB of page faults on every call, as much as the copy itself."""
    view = win.transpose(perm)
    if not isinstance(win, np.ndarray) or view.nbytes > SCRATCH_LIMIT:
        return view.reshape(shape)
    try:
        return np.reshape(view, shape, copy=False)      # a view: nothing to copy
    except TypeError:                                    # numpy < 2.1 has no copy=
        return view.reshape(shape)
    except ValueError:
        pass
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.nbytes < view.nbytes:
        buf = _SCRATCH.buf = np.empty(view.nbytes, np.uint8)
    cols = buf[:view.nbytes].view(view.dtype).reshape(view.shape)
    np.copyto(cols, view)
    return cols.reshape(shape)


def _columns_layout(x, N, C, BG, ksz, osz, ospec, rhs_dilation, window_strides) -> str:
    """How to copy the im2col columns so that the copy's innermost run is a long contiguous one (one GEMM per
    group): rows and columns of the column matrix, e.g. ``"skc"``: rows (n, *O), columns (*K, c)."""
    ns = len(osz)
    if BG == 1 and N > 1 and x.strides[0] == x.itemsize and osz:   # e.g. the kernel gradient of NHWC data
        return "ckn"                                     # rows (c, *K), columns (*O, n)
    if osz and (C > 1 and x.strides[1] == x.itemsize or C == 1 and ospec[1] == ns + 1):
        return "skc"                                     # channels-last data: rows (n, *O), columns (*K, c)
    if osz and ksz[-1] * (rhs_dilation[-1] == 1) > osz[-1] * (window_strides[-1] == 1):
        return "sck"                                     # rows (n, *O), columns (c, *K)
    return "cks"                                         # rows (c, *K), columns (n, *O)


def _grouped_result(xp, cols, wm, sck: bool, B, G, Nb, O, osz):
    """The batched GEMM of a grouped convolution as ``(Nb, O, *osz)``: with ``sck`` it gives (n, *O, o) rows,
    otherwise (o, n, *O)."""
    ns, BG = len(osz), B * G
    if sck:
        raw_shape, to_canonical = (B, G, Nb) + osz + (O // BG,), (2, 0, 1, 3 + ns) + tuple(range(3, 3 + ns))
    else:
        raw_shape, to_canonical = (B, G, O // BG, Nb) + osz, (3, 0, 1, 2) + tuple(range(4, 4 + ns))
    raw = xp.matmul(cols, xp.swapaxes(wm, -1, -2)) if sck else xp.matmul(wm, cols)
    return xp.reshape(xp.transpose(xp.reshape(raw, raw_shape), to_canonical), (Nb, O) + osz)


def conv(xp, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
         feature_group_count, batch_group_count, out=None):
    lspec, rspec, ospec = dimension_numbers
    x = xp.transpose(lhs, lspec)                                       # (N, C, *T)
    w = xp.transpose(rhs, rspec)                                       # (O, Cg, *K)
    B, G = batch_group_count, feature_group_count
    (N, C), (O, Cg), ksz, ns = x.shape[:2], w.shape[:2], tuple(w.shape[2:]), x.ndim - 2
    osz = conv_output_shape(x.shape[2:], ksz, window_strides, padding, lhs_dilation, rhs_dilation)
    final = tuple(sorted(range(ns + 2), key=ospec.__getitem__))
    BG, Nb, K, S = B * G, N // B, prod(ksz), prod(osz)
    if BG == 1 and all(s == 1 for s in window_strides) and all(d == 1 for d in lhs_dilation) \
            and _scatter_is_cheaper(C, O, K, prod(x.shape[2:]), S, N):
        return finish(xp.transpose(scatter_conv(xp, x, w, padding, rhs_dilation, osz), final), out)
    x = dilate_pad(xp, x, padding, lhs_dilation)                       # (N, C, *S)
    st = x.strides[2:]
    strides = x.strides[:2] + tuple(s * r for s, r in zip(st, rhs_dilation)) + tuple(
        s * w_ for s, w_ in zip(st, window_strides))
    win = xp.lib.stride_tricks.as_strided(x, (N, C) + ksz + osz, strides)   # (N, C, *K, *O), a view
    win = xp.reshape(win, (B, Nb, G, C // G) + ksz + osz)
    kax, oax, sp = tuple(range(4, 4 + ns)), tuple(range(4 + ns, 4 + 2 * ns)), tuple(range(2, ns + 2))
    layout = _columns_layout(x, N, C, BG, ksz, osz, ospec, rhs_dilation, window_strides)
    if layout == "cks" and BG == 1 and Cg * K <= 32:   # thin GEMMs, one per example (BLAS runs them unthreaded)
        cols, wm = xp.reshape(win, (Nb, Cg * K, S)), xp.reshape(w, (O, Cg * K))
        if out is not None and out.flags.c_contiguous and final == tuple(range(ns + 2)):
            xp.matmul(wm, cols, out=xp.reshape(out, (Nb, O, S)))
            return out
        return finish(xp.transpose(xp.reshape(xp.matmul(wm, cols), (Nb, O) + osz), final), out)
    if layout == "skc":
        wm = xp.reshape(xp.transpose(w, (0,) + sp + (1,)), (BG, O // BG, K * Cg))
        cols = _columns(win, (0, 2, 1) + oax + kax + (3,), (BG, Nb * S, K * Cg))
    elif layout == "ckn":
        wm = xp.reshape(xp.transpose(w, (1,) + sp + (0,)), (1, Cg * K, O))
        cols = _columns(win, (0, 2, 3) + kax + oax + (1,), (1, Cg * K, S * Nb))
    else:
        wm = xp.reshape(w, (BG, O // BG, Cg * K))
        perm = (0, 2, 1) + oax + (3,) + kax if layout == "sck" else (0, 2, 3) + kax + (1,) + oax
        cols = _columns(win, perm, (BG, Nb * S, Cg * K) if layout == "sck" else (BG, Cg * K, Nb * S))
    if BG == 1:   # the GEMM's result as canonical axes (n = 0, o = 1, spatial 2...)
        a, b, raw_axes = {"skc": (cols[0], wm[0].T, (0,) + sp + (1,)), "sck": (cols[0], wm[0].T, (0,) + sp + (1,)),
                          "cks": (wm[0], cols[0], (1, 0) + sp), "ckn": (cols[0].T, wm[0], sp + (0, 1))}[layout]
        comp = tuple(raw_axes.index(i) for i in final)
        if out is not None and out.flags.c_contiguous and comp == tuple(range(ns + 2)):
            xp.matmul(a, b, out=xp.reshape(out, (a.shape[0], b.shape[1])))
            return out
        sizes = (Nb, O) + osz
        raw = xp.reshape(xp.matmul(a, b), tuple(sizes[i] for i in raw_axes))
        return finish(xp.transpose(raw, comp), out)
    res = _grouped_result(xp, cols, wm, layout != "cks", B, G, Nb, O, osz)
    return finish(xp.transpose(res, final), out)


def impls(xp) -> dict:
    """name -> impl for ``xp``."""
    return {"dot_general": WritesOut(in_float32(xp, functools.partial(dot_general, xp))),
            "conv_general_dilated": WritesOut(in_float32(xp, functools.partial(conv, xp)))}
