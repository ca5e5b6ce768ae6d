"""Op-table records for dot_general (hypothesis-drawn batch / contracting / free dims in any order, including
none of each) and conv_general_dilated (1-d and 2-d; strides, SAME / VALID / explicit padding, lhs and rhs
dilation, feature and batch groups, channels-first and channels-last layouts). References are plain numpy:
``np.einsum`` for dot_general and a loop over kernel offsets for convolutions."""
from __future__ import annotations

import itertools
import string

import numpy as np
from hypothesis import strategies as st
from op_table import COMPLEX, FLOATS, INTS, OpRecord

from flfun import lax
from flfun.testing import arrays


# ------------------------------------------------------------------------------------------------ dot_general
@st.composite
def _dot_general_draw(draw, dtype):
    nb, nc = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nl, nr = draw(st.integers(0, 3 - nb)), draw(st.integers(0, 3 - nb))
    size = st.integers(1, 3)
    bs, cs = [draw(size) for _ in range(nb)], [draw(size) for _ in range(nc)]
    ls, rs = [draw(size) for _ in range(nl)], [draw(size) for _ in range(nr)]
    lkinds = draw(st.permutations([("b", i) for i in range(nb)] + [("c", i) for i in range(nc)]
                                  + [("f", i) for i in range(nl)]))
    rkinds = draw(st.permutations([("b", i) for i in range(nb)] + [("c", i) for i in range(nc)]
                                  + [("f", i) for i in range(nr)]))
    sizes_l, sizes_r = {"b": bs, "c": cs, "f": ls}, {"b": bs, "c": cs, "f": rs}
    lshape = tuple(sizes_l[k][i] for k, i in lkinds)
    rshape = tuple(sizes_r[k][i] for k, i in rkinds)
    dn = ((tuple(lkinds.index(("c", i)) for i in range(nc)), tuple(rkinds.index(("c", i)) for i in range(nc))),
          (tuple(lkinds.index(("b", i)) for i in range(nb)), tuple(rkinds.index(("b", i)) for i in range(nb))))
    x, y = draw(arrays(dtype, lshape)), draw(arrays(dtype, rshape))
    return (x, y), {"dimension_numbers": dn}


def dot_general_ref(x, y, dimension_numbers, preferred_element_type=None):
    """``lax.dot_general`` through ``np.einsum``: shared letters for contracting and batch dims."""
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter(string.ascii_letters)
    ls = [next(letters) for _ in range(x.ndim)]
    rs = [next(letters) for _ in range(y.ndim)]
    for i, j in zip(lc + lb, rc + rb):
        rs[j] = ls[i]
    out = ([ls[i] for i in lb] + [c for i, c in enumerate(ls) if i not in lc + lb]
           + [c for j, c in enumerate(rs) if j not in rc + rb])
    if preferred_element_type is not None:
        x, y = x.astype(preferred_element_type), y.astype(preferred_element_type)
    return np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", x, y)


def _wider(dt):
    return np.promote_types(dt, np.int64)


# ------------------------------------------------------------------------------------------------------- conv
_LAYOUTS = {1: [None, ("NWC", "WIO", "NWC")], 2: [None, ("NHWC", "HWIO", "NHWC"), ("NCHW", "HWIO", "NHWC")]}


def _to_layout(a, canonical: str, layout: str):
    return np.transpose(a, [canonical.index(c) for c in layout])


@st.composite
def _conv_draw(draw, dtype):
    nsp = draw(st.sampled_from([1, 2]))
    groups = draw(st.sampled_from([(1, 1), (1, 1), (2, 1), (1, 2)]))    # (feature groups, batch groups)
    G, B = groups
    n, cg, o = B * draw(st.integers(1, 2)), draw(st.integers(1, 2)), G * B * draw(st.integers(1, 2))
    ins = [draw(st.integers(1, 5)) for _ in range(nsp)]
    ks = [draw(st.integers(1, 3)) for _ in range(nsp)]
    pad = draw(st.one_of(st.sampled_from(["SAME", "VALID"]),
                         st.lists(st.tuples(st.integers(-1, 2), st.integers(-1, 2)), min_size=nsp, max_size=nsp)))
    params = {"window_strides": tuple(draw(st.integers(1, 2)) for _ in range(nsp)), "padding": pad,
              "lhs_dilation": tuple(draw(st.integers(1, 2)) for _ in range(nsp)),
              "rhs_dilation": tuple(draw(st.integers(1, 2)) for _ in range(nsp)),
              "dimension_numbers": draw(st.sampled_from(_LAYOUTS[nsp])), "feature_group_count": G,
              "batch_group_count": B}
    sp = "HW"[-nsp:] if nsp == 2 else "W"
    layout = params["dimension_numbers"] or ("NC" + sp, "OI" + sp, "NC" + sp)
    x = draw(arrays(dtype, _permuted((n, G * cg, *ins), "NC" + sp, layout[0])))
    w = draw(arrays(dtype, _permuted((o, cg, *ks), "OI" + sp, layout[1])))
    return (x, w), params


def _permuted(shape, canonical, layout):
    return tuple(shape[canonical.index(c)] for c in layout)


def _dilate(n, d):
    return 0 if n == 0 else (n - 1) * d + 1


def conv_ref(x, w, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
             batch_group_count):
    """Cross-correlation by definition: dilate and pad the input explicitly, then add one strided slice per
    kernel offset, per group."""
    nsp = x.ndim - 2
    sp = "HW"[-nsp:] if nsp == 2 else "W"
    layout = dimension_numbers or ("NC" + sp, "OI" + sp, "NC" + sp)
    x, w = _to_layout(x, layout[0], "NC" + sp), _to_layout(w, layout[1], "OI" + sp)
    ksz = w.shape[2:]
    if isinstance(padding, str):
        pads = []
        for n, k, s, r in zip(x.shape[2:], ksz, window_strides, rhs_dilation):
            total = max((-(-n // s) - 1) * s + _dilate(k, r) - n, 0) if padding == "SAME" else 0
            pads.append((total // 2, total - total // 2))
    else:
        pads = list(padding)
    dil = np.zeros(x.shape[:2] + tuple(_dilate(n, d) for n, d in zip(x.shape[2:], lhs_dilation)), x.dtype)
    dil[(slice(None),) * 2 + tuple(slice(None, None, d) for d in lhs_dilation)] = x
    dil = np.pad(dil, [(0, 0)] * 2 + [(max(lo, 0), max(hi, 0)) for lo, hi in pads])
    dil = dil[(slice(None),) * 2 + tuple(slice(max(-lo, 0), dil.shape[2 + i] - max(-hi, 0))
                                         for i, (lo, hi) in enumerate(pads))]
    osz = tuple(max(0, (n - _dilate(k, r)) // s + 1) if n >= _dilate(k, r) else 0
                for n, k, s, r in zip(dil.shape[2:], ksz, window_strides, rhs_dilation))
    G, B = feature_group_count, batch_group_count
    N, C, O = x.shape[0], x.shape[1], w.shape[0]
    out = np.zeros((N // B, O) + osz, np.result_type(x, w))
    og = O // (G * B)
    for g in range(G * B):
        xs = dil[:, g * (C // G):(g + 1) * (C // G)] if G > 1 else dil[g * (N // B):(g + 1) * (N // B)]
        ws = w[g * og:(g + 1) * og]
        for kk in itertools.product(*map(range, ksz)):
            idx = tuple(slice(k * r, k * r + (o - 1) * s + 1, s) if o else slice(0, 0)
                        for k, r, s, o in zip(kk, rhs_dilation, window_strides, osz))
            patch = xs[(slice(None), slice(None)) + idx]
            out[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch, ws[(slice(None),) * 2 + kk])
    return _to_layout(out, "NC" + sp, layout[2])


def _conv(x, w, **params):
    return lax.conv_general_dilated(x, w, **params)


RECORDS = [
    OpRecord("dot_general", lambda x, y, **p: lax.dot_general(x, y, **p), dot_general_ref, _dot_general_draw,
             dtypes=FLOATS + INTS + COMPLEX, atol=1e-4, rtol=1e-4),
    OpRecord("dot_general", lambda x, y, **p: lax.dot_general(x, y, preferred_element_type=_wider(x.dtype), **p),
             lambda x, y, **p: dot_general_ref(x, y, preferred_element_type=_wider(x.dtype), **p),
             _dot_general_draw, dtypes=("float32",) + INTS, diff=False, keeps_dtype=False,
             name="dot_general_preferred", atol=1e-4, rtol=1e-4),
    OpRecord("conv_general_dilated", _conv, conv_ref, _conv_draw, dtypes=FLOATS + INTS + COMPLEX,
             atol=1e-4, rtol=1e-4),
]
