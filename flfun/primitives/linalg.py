"""Linear-algebra primitives: ``dot_general`` (every matmul, einsum and tensordot) and ``conv_general_dilated``
(N-d cross-correlation with strides, padding, dilations and groups). Both are bilinear: the jvp applies the
primitive to one tangent at a time, and each transpose rule is the same primitive with rearranged operands.
Impls are in ``flfun/backends/xp/linalg.py``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, is_weak, short
from flfun.primitives import elementwise as E, shape as S
from flfun.primitives.rules import batch_axes, check_kinds, guarded_jvp, is_undefined, is_zero, moveaxis


def _argsort(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(range(len(xs)), key=list(xs).__getitem__))


def _remaining(n: int, *removed: Sequence[int]) -> list[int]:
    gone = {d for r in removed for d in r}
    return [i for i in range(n) if i not in gone]


def _bilinear(prim: Primitive, transpose_lhs, transpose_rhs) -> None:
    """The jvp (one term per nonzero tangent) and transpose rules of a primitive bilinear in its two operands."""
    def jvp(out, primals, tangents, **params):
        (lhs, rhs), (tl, tr) = primals, tangents
        terms = [prim.bind(a, b, **params) for a, b, t in ((tl, rhs, tl), (lhs, tr, tr)) if not is_zero(t)]
        return terms[0] if len(terms) == 1 else E.add(*terms)

    def transpose(ct, lhs, rhs, **params):
        if is_undefined(lhs):
            return [transpose_lhs(ct, lhs.aval, rhs, **params), None]
        return [None, transpose_rhs(ct, lhs, rhs.aval, **params)]
    prim.def_jvp(guarded_jvp(prim, jvp))
    prim.def_transpose(transpose)


# ------------------------------------------------------------------------------------------------- dot_general
dot_general_p = Primitive("dot_general")
dot_general_p.linear_in = "all"


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = lhs.shape, rhs.shape
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"dot_general: operands must have the same dtype, got {short(lhs)} and {short(rhs)} "
                        f"(flfun.numpy promotes; lax does not)")
    for side, x, c, b in (("lhs", lhs, lc, lb), ("rhs", rhs, rc, rb)):
        if len(set(c + b)) != len(c + b) or any(not 0 <= d < len(x.shape) for d in c + b):
            raise TypeError(f"dot_general: {side} contracting dimensions {c} and batch dimensions {b} must be "
                            f"distinct and within the rank of {short(x)}, got {short(lhs)} and {short(rhs)}")
    for what, a, b in (("contracting", lc, rc), ("batch", lb, rb)):
        if len(a) != len(b):
            raise TypeError(f"dot_general: lhs and rhs need as many {what} dimensions, got {a} and {b} for "
                            f"{short(lhs)} and {short(rhs)}")
        if any(ls[i] != rs[j] for i, j in zip(a, b)):
            raise TypeError(f"dot_general: {what} dimensions must match, got {short(lhs)} and {short(rhs)} "
                            f"(lhs dimensions {a}, rhs dimensions {b})")
    shape = (tuple(ls[d] for d in lb) + tuple(n for d, n in enumerate(ls) if d not in lc and d not in lb)
             + tuple(n for d, n in enumerate(rs) if d not in rc and d not in rb))
    if preferred_element_type is None:
        return ShapedArray(shape, lhs.dtype, is_weak(lhs) and is_weak(rhs))
    return ShapedArray(shape, preferred_element_type)


def _dot_transpose_lhs(ct, x_aval, y, *, dimension_numbers, preferred_element_type=None, swap_ans=False):
    """Cotangent of the lhs ``x``: ``ct`` contracted with ``y`` over their free dims, permuted to x's layout."""
    (xc, yc), (xb, yb) = dimension_numbers
    x_kept = _remaining(len(x_aval.shape), xc, xb)
    y_kept = _remaining(len(y.shape), yc, yb)
    nb = len(xb)
    start = nb if swap_ans else nb + len(x_kept)
    dims = ((tuple(range(start, start + len(y_kept))), tuple(y_kept)), (tuple(range(nb)), tuple(yb)))
    xc_by_y = [xc[i] for i in _argsort(yc)]
    if ct.dtype != y.dtype:
        ct = E.convert_element_type(ct, y.dtype)
    return S.transpose(dot_general(ct, y, dims), _argsort(list(xb) + x_kept + xc_by_y))


def _dot_transpose_rhs(ct, x, y_aval, *, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    return _dot_transpose_lhs(ct, y_aval, x, dimension_numbers=((rc, lc), (rb, lb)), swap_ans=True)


_bilinear(dot_general_p, _dot_transpose_lhs, _dot_transpose_rhs)


@dot_general_p.def_batch
def _dot_general_batch(axis, args, dims, *, dimension_numbers, preferred_element_type=None):
    # the mapped axis becomes a batch dim (both mapped) or a free dim (one mapped): no transposes, no broadcasts
    (lhs, rhs), (ld, rd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    shift = lambda ds, bd: batch_axes(ds, bd)[0]  # noqa: E731
    if ld is not None and rd is not None:
        dn = ((shift(lc, ld), shift(rc, rd)), ((ld,) + shift(lb, ld), (rd,) + shift(rb, rd)))
        return dot_general(lhs, rhs, dn, preferred_element_type), 0
    if ld is not None:
        lc, lb = shift(lc, ld), shift(lb, ld)
        out_dim = len(lb) + len(_remaining(ld, lc, lb))
    else:   # after the batch dims and lhs's free dims
        rc, rb = shift(rc, rd), shift(rb, rd)
        out_dim = len(lhs.shape) - len(lc) + len(_remaining(rd, rc, rb))
    return dot_general(lhs, rhs, ((lc, rc), (lb, rb)), preferred_element_type), out_dim


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    """Generalised tensor contraction (``lax.dot_general``).

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``, each a sequence of
    non-negative axes. The output holds the batch dims, then lhs's free dims, then rhs's free dims, in order.
    Both operands need the same dtype; ``preferred_element_type`` sets the accumulation and output dtype
    (e.g. int8 inputs with int32 results). Integer products are exact.

    Example::

        >>> x, y = fnp.ones((5, 2, 3)), fnp.ones((5, 3, 4))
        >>> lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))).shape   # batched matmul
        (5, 2, 4)
    """
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        dn = ((tuple(map(int, lc)), tuple(map(int, rc))), (tuple(map(int, lb)), tuple(map(int, rb))))
    except (TypeError, ValueError):
        raise ValueError(f"dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                         f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    pet = None if preferred_element_type is None else dtypes.canonicalize(preferred_element_type)
    return bind(dot_general_p, lhs, rhs, dimension_numbers=dn, preferred_element_type=pet)


# ---------------------------------------------------------------------------------------- conv_general_dilated
class ConvDimensionNumbers(NamedTuple):
    """Axis positions: ``lhs_spec = (batch, feature, *spatial)``, ``rhs_spec = (out feature, in feature,
    *spatial)``, ``out_spec = (batch, feature, *spatial)``; spatial dims correspond in order."""
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


def conv_output_shape(in_sizes, window, strides, padding, lhs_dilation, rhs_dilation) -> tuple[int, ...]:
    """Spatial output sizes of a convolution (0 where the padded input is smaller than the window)."""
    out = []
    for n, k, s, (lo, hi), ld, rd in zip(in_sizes, window, strides, padding, lhs_dilation, rhs_dilation):
        padded, dk = _dilate(n, ld) + lo + hi, _dilate(k, rd)
        out.append(max(0, (padded - dk) // s + 1) if padded >= dk else 0)
    return tuple(out)


conv_general_dilated_p = Primitive("conv_general_dilated")
conv_general_dilated_p.linear_in = "all"


@conv_general_dilated_p.def_abstract_eval
def _conv_general_dilated_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                                        dimension_numbers, feature_group_count, batch_group_count):
    op, ops = "conv_general_dilated", f"{short(lhs)} and {short(rhs)}"
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"{op}: operands must have the same dtype, got {ops} (flfun.numpy promotes; lax does not)")
    check_kinds(op, "number", lhs)
    nd = len(lhs.shape)
    if nd < 2 or len(rhs.shape) != nd:
        raise TypeError(f"{op}: lhs and rhs must have the same rank (at least 2), got {ops}")
    nsp = nd - 2
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation),
                    ("padding", padding)):
        if len(v) != nsp:
            raise TypeError(f"{op}: {name} {tuple(v)} needs one entry per spatial dimension ({nsp}) of {ops}")
        if name != "padding" and any(s < 1 for s in v):
            raise TypeError(f"{op}: {name} {tuple(v)} must be positive, got {ops}")
    G, B = feature_group_count, batch_group_count
    if G < 1 or B < 1 or (G > 1 and B > 1):
        raise TypeError(f"{op}: feature_group_count ({G}) and batch_group_count ({B}) must be positive and "
                        f"at most one of them above 1, got {ops}")
    lspec, rspec, ospec = dimension_numbers
    N, C = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    O, I = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    if C != I * G:
        raise TypeError(f"{op}: lhs feature size ({C}) must equal rhs input feature size ({I}) times "
                        f"feature_group_count ({G}), got {ops}")
    if O % G or O % B or N % B:
        raise TypeError(f"{op}: rhs output feature size ({O}) must be divisible by feature_group_count ({G}) "
                        f"and batch_group_count ({B}), and lhs batch size ({N}) by batch_group_count, got {ops}")
    canonical = (N // B, O) + conv_output_shape([lhs.shape[d] for d in lspec[2:]], [rhs.shape[d] for d in rspec[2:]],
                                                window_strides, padding, lhs_dilation, rhs_dilation)
    # out_spec[i] is where canonical dim i goes
    return ShapedArray(tuple(canonical[i] for i in _argsort(ospec)), lhs.dtype, is_weak(lhs) and is_weak(rhs))


def _reshape_axis_out_of(src: int, size1: int, x):
    shape = list(x.shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return S.reshape(x, shape)


def _reshape_axis_into(src: int, dst: int, x):
    """Merge axis ``src`` into axis ``dst`` (numbered after removing ``src``) as its major part."""
    x = moveaxis(x, src, dst)
    shape = list(x.shape)
    shape[dst:dst + 2] = [shape[dst] * shape[dst + 1]]
    return S.reshape(x, shape)


def _fold_grouped(x, src: int, dst: int, groups: int):
    """Merge axis ``src`` into axis ``dst`` with ``groups`` kept outermost: (groups, src, rest)."""
    if groups == 1:
        return _reshape_axis_into(src, dst, x)
    x = _reshape_axis_out_of(dst + (src <= dst), groups, x)
    return _reshape_axis_into(dst, dst, _reshape_axis_into(src + (dst < src), dst + 1, x))


def _spec_transpose(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _spatial(shape, spec, dilation) -> list[int]:
    """The dilated spatial sizes of ``shape`` laid out as ``spec``."""
    return [_dilate(shape[d], r) for d, r in zip(spec[2:], dilation)]


def _conv_transpose_lhs(ct, lhs_aval, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count):
    # a conv of ct with the spatially flipped, in/out-swapped kernel; strides become lhs dilation
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count
    if G > 1 or B > 1:   # move the group axis from rhs's out-features into its in-features
        rhs = _reshape_axis_into(rspec[0], rspec[1], _reshape_axis_out_of(rspec[0], max(G, B), rhs))
    sizes = zip(padding, _spatial(rhs.shape, rspec, rhs_dilation), _spatial(lhs_aval.shape, lspec, lhs_dilation),
                _spatial(ct.shape, ospec, window_strides))
    out = conv_general_dilated_p.bind(
        ct, S.rev(rhs, tuple(rspec[2:])), window_strides=tuple(lhs_dilation),
        padding=tuple((k - lo - 1, n_in - n_out + lo) for (lo, _), k, n_in, n_out in sizes),
        lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=ConvDimensionNumbers(tuple(ospec), _spec_transpose(rspec), tuple(lspec)),
        feature_group_count=max(G, B), batch_group_count=1)
    if B > 1:
        out = _reshape_axis_into(lspec[1], lspec[0], _reshape_axis_out_of(lspec[1], B, out))
    return out


def _conv_transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count):
    # a conv of lhs (batch and feature swapped) with ct as the kernel; feature groups become batch groups
    lspec, rspec, ospec = dimension_numbers
    sizes = zip(padding, _spatial(rhs_aval.shape, rspec, rhs_dilation), _spatial(lhs.shape, lspec, lhs_dilation),
                _spatial(ct.shape, ospec, window_strides))
    return conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation),
        padding=tuple((lo, n_out - n_in + k - lo - 1) for (lo, _), k, n_in, n_out in sizes),
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=ConvDimensionNumbers(_spec_transpose(lspec), _spec_transpose(ospec),
                                               _spec_transpose(rspec)),
        feature_group_count=batch_group_count, batch_group_count=feature_group_count)


_bilinear(conv_general_dilated_p, _conv_transpose_lhs, _conv_transpose_rhs)


@conv_general_dilated_p.def_batch
def _conv_general_dilated_batch(axis, args, dims, **params):
    # fold the mapped axis into the batch dim (lhs only), the out features (rhs only) or the feature groups
    (lhs, rhs), (ld, rd) = args, dims
    lspec, rspec, ospec = params["dimension_numbers"]
    G, B = params["feature_group_count"], params["batch_group_count"]
    n = axis.size
    if ld is not None and rd is not None:
        key, dst = ("batch_group_count", lspec[0]) if B > 1 else ("feature_group_count", lspec[1])
        lhs, params = _reshape_axis_into(ld, dst, lhs), {**params, key: params[key] * n}
        out = conv_general_dilated_p.bind(lhs, _reshape_axis_into(rd, rspec[0], rhs), **params)
        return _reshape_axis_out_of(ospec[1], n, out), ospec[1]
    if ld is not None:
        out = conv_general_dilated_p.bind(_fold_grouped(lhs, ld, lspec[0], B), rhs, **params)
        return _reshape_axis_out_of(ospec[0], n, out), ospec[0]
    groups = max(G, B)
    out = conv_general_dilated_p.bind(lhs, _fold_grouped(rhs, rd, rspec[0], groups), **params)
    if groups == 1:
        return _reshape_axis_out_of(ospec[1], n, out), ospec[1]
    out = _reshape_axis_out_of(ospec[1] + 1, n, _reshape_axis_out_of(ospec[1], groups, out))
    return _reshape_axis_into(ospec[1], ospec[1] + 1, out), ospec[1]


def conv_dimension_numbers(ndim: int, dimension_numbers) -> ConvDimensionNumbers:
    """Canonical axis positions from ``None`` (``NC...``/``OI...``/``NC...``), a ``ConvDimensionNumbers``, or
    three layout strings such as ``('NHWC', 'HWIO', 'NHWC')`` (``'...'`` stands for the spatial dims, as in
    ``('N...C', '...IO', 'N...C')``). Spatial dims are matched by letter, in the rhs spec's order."""
    if dimension_numbers is None:
        return ConvDimensionNumbers(*[tuple(range(ndim))] * 3)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        dn = ConvDimensionNumbers(*(tuple(int(d) for d in s) for s in dimension_numbers))
        for name, spec in zip(dn._fields, dn):
            if sorted(spec) != list(range(ndim)):
                raise ValueError(f"conv_general_dilated: dimension_numbers {name} {spec} is not a permutation of the "
                                 f"{ndim} axes")
        return dn
    specs = tuple(dimension_numbers) if isinstance(dimension_numbers, (tuple, list)) else ()
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise ValueError(f"conv_general_dilated: dimension_numbers must be None, a ConvDimensionNumbers or three "
                         f"layout strings such as ('NCHW', 'OIHW', 'NCHW'), got {dimension_numbers!r}")
    digits = "".join(str(i) for i in range(ndim - 2))
    specs = tuple(s.replace("...", digits) for s in specs)
    perms, order = [], [c for c in specs[1] if c not in "OI"]   # the spatial letters, in the rhs spec's order
    for s, (a, b) in zip(specs, (("N", "C"), ("O", "I"), ("N", "C"))):
        if (len(s) != ndim or len(set(s)) != ndim or a not in s or b not in s
                or sorted(c for c in s if c not in (a, b)) != sorted(order)):
            raise ValueError(f"conv_general_dilated: dimension_numbers {dimension_numbers!r} is not a valid "
                             f"layout for rank-{ndim} operands (need {a}, {b} and the same spatial letters in "
                             f"all three specs)")
        perms.append((s.index(a), s.index(b)) + tuple(s.index(c) for c in order))
    return ConvDimensionNumbers(*perms)


def _same_padding(in_sizes, window, strides, lower: bool):
    pads = []
    for n, k, s in zip(in_sizes, window, strides):
        s = max(s, 1)     # (a stride below 1 is reported by the abstract eval)
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small = total // 2
        pads.append((total - small, small) if lower else (small, total - small))
    return tuple(pads)


def conv_general_dilated(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1, batch_group_count: int = 1):
    """N-d convolution (cross-correlation, as in torch and ``lax.conv_general_dilated``).

    Args:
        lhs: input, e.g. ``(N, C, H, W)`` in the default layout.
        rhs: kernel, e.g. ``(O, C // feature_group_count, kH, kW)``.
        window_strides: one stride per spatial dim.
        padding: ``"VALID"``, ``"SAME"``, ``"SAME_LOWER"`` or one ``(low, high)`` pair per spatial dim
            (negative values crop).
        lhs_dilation: input dilation per spatial dim (transposed convolution); default 1s.
        rhs_dilation: kernel dilation per spatial dim (atrous convolution); default 1s.
        dimension_numbers: ``None`` (``NC...``, ``OI...``, ``NC...``), layout strings such as
            ``('NHWC', 'HWIO', 'NHWC')``, or a ``ConvDimensionNumbers``.
        feature_group_count: split input features into this many groups (depthwise when it equals C).
        batch_group_count: split the batch into groups matched with groups of output features (used by the
            kernel gradient of grouped convolutions).

    Example::

        >>> x, k = fnp.ones((64, 1, 28, 28)), fnp.ones((32, 1, 3, 3))
        >>> lax.conv_general_dilated(x, k, (1, 1), "VALID").shape
        (64, 32, 26, 26)
    """
    nd = len(lhs.shape)
    dn = conv_dimension_numbers(nd, dimension_numbers)
    nsp = max(nd - 2, 0)
    ld, rd = ((1,) * nsp if d is None else tuple(int(v) for v in d) for d in (lhs_dilation, rhs_dilation))
    strides = tuple(int(s) for s in window_strides)
    try:
        if isinstance(padding, str):
            mode = padding.upper()
            if mode not in ("VALID", "SAME", "SAME_LOWER"):
                raise ValueError
            padding = ((0, 0),) * nsp if mode == "VALID" else _same_padding(
                [lhs.shape[d] for d in dn.lhs_spec[2:]], _spatial(rhs.shape, dn.rhs_spec, rd), strides,
                mode == "SAME_LOWER")
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ValueError(f"conv_general_dilated: padding must be 'VALID', 'SAME', 'SAME_LOWER' or a sequence of "
                         f"(low, high) pairs, got {padding!r}") from None
    return bind(conv_general_dilated_p, lhs, rhs, window_strides=strides, padding=padding, lhs_dilation=ld,
                rhs_dilation=rd, dimension_numbers=dn, feature_group_count=int(feature_group_count),
                batch_group_count=int(batch_group_count))


__all__ = ["ConvDimensionNumbers", "conv_dimension_numbers", "conv_general_dilated", "conv_output_shape", "dot_general"]
