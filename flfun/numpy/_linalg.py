"""Products of ``flfun.numpy``: matmul, dot, vdot, inner, outer, tensordot, einsum, vecdot, kron, diagonal, trace.

Every contraction lowers to one ``dot_general`` per operand pair (plus transposes, reshapes and ``reduce_sum``),
so it runs as BLAS matmuls and differentiates and batches through dot_general's rules. Broadcast batch
dimensions become free dimensions of the contraction instead of being materialised.
"""
import collections
import itertools
import string
from collections.abc import Sequence

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import _state, short, wrap
from flfun.numpy._promote import asarray_like, promote
from flfun.primitives import elementwise as lax, reduce as lax_reduce, shape as lax_shape
from flfun.primitives.linalg import dot_general, dot_general_p
from flfun.util import canonical_axis

__all__ = ["diagonal", "dot", "einsum", "inner", "kron", "matmul", "outer", "tensordot", "trace", "vdot", "vecdot"]


def _check_contract(op: str, a, b, ca: Sequence[int], cb: Sequence[int]) -> None:
    if any(a.shape[i] != b.shape[j] for i, j in zip(ca, cb)):
        raise TypeError(f"{op}: contracting dimensions must match, got {short(a)} and {short(b)}")


# ------------------------------------------------------------------------------------------------------ matmul
_MATMUL_DN = (((1,), (0,)), ((), ()))
_MATMUL_DTYPES = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                                                 "uint8", "uint16", "uint32", "uint64", "bool"))
_dot_impls = dot_general_p.impls


def matmul(x1, x2, /) -> Array:
    """Matrix product with array-API semantics: 1-d operands are promoted to a row / column and that axis is
    removed again; the leading (batch) dimensions broadcast. Integer products are exact.

    Example::

        >>> fnp.matmul(fnp.ones((5, 2, 3)), fnp.ones((3, 4))).shape
        (5, 2, 4)
    """
    if _state.eager and type(x1) is Array and type(x2) is Array:   # eager 2-d fast path (checks done here)
        v1, v2 = x1._value, x2._value
        if v1.ndim == 2 and v2.ndim == 2 and v1.shape[1] == v2.shape[0] and v1.dtype == v2.dtype \
                and x1._device is x2._device and v1.dtype in _MATMUL_DTYPES:
            impl = _dot_impls.get(x1._device.backend)
            if impl is not None:
                return wrap(impl(v1, v2, dimension_numbers=_MATMUL_DN), x1._device)
    a, b = promote("matmul", x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least one dimension, got {short(a)} and {short(b)} "
                         f"(use multiply for scalars)")
    ca, cb = a.ndim - 1, (0 if b.ndim == 1 else b.ndim - 2)
    _check_contract("matmul", a, b, (ca,), (cb,))
    nb = max(a.ndim, b.ndim, 2) - 2
    la = [*range(nb - max(a.ndim - 2, 0), nb)] + (["m"] if a.ndim > 1 else []) + ["k"]
    lb = [*range(nb - max(b.ndim - 2, 0), nb)] + ["k"] + (["n"] if b.ndim > 1 else [])
    return _broadcast_dot("matmul", a, la, b, lb, [*range(nb), "m", "n"])


def _broadcast_dot(op: str, a, la: list, b, lb: list, order: list):
    """One dot_general contracting label "k" of ``a`` and ``b``; the other labels are batch dims (shared) or free
    dims, and shared ones broadcast: a size-1 dim facing a larger one is dropped. Result dims follow ``order``."""
    sa, sb = dict(zip(la, a.shape)), dict(zip(lb, b.shape))
    if any(sa[c] != sb[c] and 1 not in (sa[c], sb[c]) for c in sa if c in sb):
        raise TypeError(f"{op}: batch dimensions do not broadcast: {short(a)} and {short(b)}")
    sizes = {c: max(sa.get(c, 1), sb.get(c, 1)) for c in {**sa, **sb}}
    return _contract([(a, la), (b, lb)], sizes, [c for c in order if c in sizes])


def dot(a, b, /) -> Array:
    """numpy's ``dot``: scalars multiply, 1-d·1-d is the inner product, otherwise the last axis of ``a`` meets
    the second-to-last of ``b`` (its only axis when ``b`` is 1-d).

    Example::

        >>> fnp.dot(fnp.ones((2, 3)), fnp.ones(3)).tolist()
        [3.0, 3.0]
    """
    return _dot("dot", a, b, lambda b: 0 if b.ndim == 1 else b.ndim - 2)


def _dot(op, a, b, b_axis, flat: bool = False):
    """Contract the last axis of ``a`` with axis ``b_axis(b)`` of ``b`` (scalars multiply); with ``flat`` both
    are flattened first, and ``b_axis=None`` contracts nothing (an outer product)."""
    a, b = promote(op, a, b)
    if flat:
        a, b = lax_shape.reshape(a, (a.size,)), lax_shape.reshape(b, (b.size,))
    elif a.ndim == 0 or b.ndim == 0:
        return lax.mul(a, b)
    ca, cb = ((), ()) if b_axis is None else ((a.ndim - 1,), (b_axis(b),))
    _check_contract(op, a, b, ca, cb)
    return dot_general(a, b, ((ca, cb), ((), ())))


def vdot(a, b, /) -> Array:
    """Dot product of the flattened operands: ``fnp.vdot(fnp.ones((2, 2)), fnp.ones(4)) == 4``."""
    return _dot("vdot", a, b, lambda b: 0, flat=True)


def inner(a, b, /) -> Array:
    """Contract the last axes of ``a`` and ``b`` (scalars multiply): result shape ``a.shape[:-1] + b.shape[:-1]``.

    Example::

        >>> fnp.inner(fnp.ones((2, 3)), fnp.ones((4, 3))).shape
        (2, 4)
    """
    return _dot("inner", a, b, lambda b: b.ndim - 1)


def outer(a, b, /) -> Array:
    """Outer product of the flattened operands: ``fnp.outer(fnp.ones(2), fnp.ones(3)).shape == (2, 3)``."""
    return _dot("outer", a, b, None, flat=True)


def tensordot(a, b, /, axes=2) -> Array:
    """Contract ``axes`` of ``a`` with ``axes`` of ``b``; the result holds a's free axes then b's.

    Args:
        axes: an int ``n`` (the last ``n`` axes of ``a`` with the first ``n`` of ``b``) or a pair of axis
            sequences (or ints) of equal length.

    Example::

        >>> fnp.tensordot(fnp.ones((2, 3, 4)), fnp.ones((3, 4, 5)), axes=2).shape
        (2, 5)
    """
    a, b = promote("tensordot", a, b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if not 0 <= n <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={n} must be between 0 and the smaller rank of {short(a)} and "
                             f"{short(b)}")
        ca, cb = tuple(range(a.ndim - n, a.ndim)), tuple(range(n))
    else:
        try:
            xa, xb = axes
        except (TypeError, ValueError):
            raise ValueError(f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}") from None
        xa, xb = ((v,) if isinstance(v, (int, np.integer)) else tuple(v) for v in (xa, xb))
        if len(xa) != len(xb):
            raise ValueError(f"tensordot: axes must name as many axes of each operand, got {axes!r}")
        ca, cb = (tuple(canonical_axis(i, x.ndim, "tensordot") for i in xs) for x, xs in ((a, xa), (b, xb)))
        if len(set(ca)) != len(ca) or len(set(cb)) != len(cb):
            raise ValueError(f"tensordot: repeated axis in axes={axes!r}")
    _check_contract("tensordot", a, b, ca, cb)
    return dot_general(a, b, ((ca, cb), ((), ())))


def vecdot(x1, x2, /, *, axis: int = -1) -> Array:
    """Dot products of vectors along ``axis``, broadcasting the other dimensions (array API).

    Example::

        >>> fnp.vecdot(fnp.ones((4, 3)), fnp.ones(3)).shape
        (4,)
    """
    a, b = promote("vecdot", x1, x2)
    n = max(a.ndim, b.ndim)
    if n == 0:
        raise ValueError("vecdot: operands must have at least one dimension, got scalars")
    ax = canonical_axis(axis, n, "vecdot") - n
    if -ax > min(a.ndim, b.ndim):
        raise ValueError(f"vecdot: axis {axis} is not an axis of both {short(a)} and {short(b)}")
    _check_contract("vecdot", a, b, (a.ndim + ax,), (b.ndim + ax,))
    la, lb = ([n - x.ndim + j if j != x.ndim + ax else "k" for j in range(x.ndim)] for x in (a, b))
    return _broadcast_dot("vecdot", a, la, b, lb, [*range(n)])


def kron(a, b, /) -> Array:
    """Kronecker product (the rank of the smaller operand is padded with leading 1s, as in numpy).

    Example::

        >>> fnp.kron(fnp.eye(2), fnp.ones((2, 2))).shape
        (4, 4)
    """
    a, b = promote("kron", a, b)
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + tuple(a.shape), (1,) * (n - b.ndim) + tuple(b.shape)
    a = lax_shape.reshape(a, tuple(itertools.chain.from_iterable((d, 1) for d in sa)))
    b = lax_shape.reshape(b, tuple(itertools.chain.from_iterable((1, d) for d in sb)))
    return lax_shape.reshape(lax.mul(a, b), tuple(x * y for x, y in zip(sa, sb)))


# ------------------------------------------------------------------------------------------- diagonal, trace
def diagonal_last(x, offset: int = 0):
    """The (offset) diagonal of the last two axes of ``x`` as its last axis: crop to a square block, flatten it
    and take every ``L + 1``-th element (exact and NaN-safe, unlike multiplying by an identity mask)."""
    n1, n2 = x.shape[-2], x.shape[-1]
    r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(n1 - r0, n2 - c0))
    r0, c0 = (r0, c0) if length else (0, 0)
    x = lax_shape.slice(x, (0,) * (x.ndim - 2) + (r0, c0), tuple(x.shape[:-2]) + (r0 + length, c0 + length))
    return _take_diagonals(x, [*range(x.ndim - 2), "d", "d"])[0]


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """numpy's ``diagonal``: the diagonal of the ``axis1``/``axis2`` planes, as a new last axis.

    Example::

        >>> fnp.diagonal(fnp.arange(9).reshape(3, 3)).tolist()
        [0, 4, 8]
    """
    a = asarray_like(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: the array must have at least 2 dimensions, got {short(a)}")
    ax1, ax2 = canonical_axis(axis1, a.ndim, "diagonal"), canonical_axis(axis2, a.ndim, "diagonal")
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    rest = tuple(i for i in range(a.ndim) if i not in (ax1, ax2))
    return diagonal_last(lax_shape.transpose(a, rest + (ax1, ax2)), int(offset))


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None) -> Array:
    """Sum along a diagonal (numpy's ``trace``); integers accumulate like ``sum``.

    Example::

        >>> int(fnp.trace(fnp.eye(3)))
        3
    """
    from flfun.numpy._reductions import sum as _sum
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ------------------------------------------------------------------------------------------------------ einsum
def _parse_einsum(subscripts: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    ins, arrow, out = subscripts.replace(" ", "").partition("->")
    specs = ins.split(",")
    if len(specs) != len(ranks):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(specs)} operands but {len(ranks)} were given")
    if "->" in out or any(c not in ".," + string.ascii_letters for c in ins + out):
        raise ValueError(f"einsum: invalid subscripts {subscripts!r} (use letters, ',', '->' and '...')")
    ell_pool = [chr(0x3B1 + i) for i in range(64)]    # stand-ins for the ellipsis dims (never letters a-zA-Z)
    labels = []
    for spec, r in zip(specs, ranks):
        named = spec.replace("...", "")
        if spec.count("...") > 1 or "." in named or ("..." not in spec and len(spec) != r) or len(named) > r:
            raise ValueError(f"einsum: subscripts {spec!r} do not fit an operand of rank {r}")
        head, _, tail = spec.partition("...")       # ellipsis dims take the last stand-ins: they align right
        labels.append(list(head) + ell_pool[len(ell_pool) - r + len(named):] + list(tail))
    ell_pool = [c for c in ell_pool if any(c in lab for lab in labels)]
    if arrow:
        if out.count("...") > 1 or out.replace("...", "").count("."):
            raise ValueError(f"einsum: invalid output subscripts {out!r}")
        head, _, tail = out.partition("...")
        out_labels = list(head) + (ell_pool if "..." in out else []) + list(tail)
        seen = [c for spec in labels for c in spec]
        for c in out_labels:
            if out_labels.count(c) > 1 or c not in seen:
                raise ValueError(f"einsum: output label {c!r} in {subscripts!r} is repeated or not an input label")
    else:
        counts = collections.Counter(c for spec in labels for c in spec)
        out_labels = ell_pool + sorted(c for c, n in counts.items() if n == 1 and c not in ell_pool)
    return labels, out_labels


def _take_diagonals(x, labels: list[str]):
    """Replace repeated labels of one operand by the diagonal over those axes."""
    for c in list(dict.fromkeys(labels)):
        axes = [i for i, lab in enumerate(labels) if lab == c]
        if len(axes) < 2:
            continue
        n = x.shape[axes[0]]
        if any(x.shape[i] != n for i in axes):
            raise ValueError(f"einsum: repeated label {c!r} has different sizes in an operand of shape {x.shape}")
        rest = [i for i in range(x.ndim) if i not in axes]
        x = lax_shape.transpose(x, tuple(rest + axes))
        lead = tuple(x.shape[:len(rest)])
        x = lax_shape.reshape(x, lead + (n ** len(axes),))
        step = sum(n ** j for j in range(len(axes)))
        x = lax_shape.slice(x, (0,) * (len(lead) + 1), lead + ((n - 1) * step + 1 if n else 0,),
                            (1,) * len(lead) + (max(step, 1),))
        labels = [labels[i] for i in rest] + [c]
    return x, labels


def _sum_labels(x, labels: list[str], gone: Sequence[str]):
    axes = tuple(i for i, c in enumerate(labels) if c in gone)
    return (lax_reduce.reduce_sum(x, axes) if axes else x), [c for c in labels if c not in gone]


def _contract_pair(x, xl, y, yl, keep: set):
    both = [c for c in xl if c in yl]
    batch = [c for c in both if c in keep]
    contr = [c for c in both if c not in keep]
    dn = ((tuple(xl.index(c) for c in contr), tuple(yl.index(c) for c in contr)),
          (tuple(xl.index(c) for c in batch), tuple(yl.index(c) for c in batch)))
    return dot_general(x, y, dn), batch + [c for c in xl if c not in both] + [c for c in yl if c not in both]


def _einsum_order(ops: list, optimize) -> list[tuple[int, int]]:
    """Pairwise contraction order: numpy's einsum_path (greedy/optimal) on placeholder arrays, else left to right."""
    n = len(ops)
    if n <= 2 or not optimize:
        return [(0, 1)] * (n - 1)
    letters = {c: string.ascii_letters[i % 52] for i, c in enumerate(dict.fromkeys(c for _, lab in ops for c in lab))}
    if len(letters) > 52:
        return [(0, 1)] * (n - 1)
    spec = ",".join("".join(letters[c] for c in lab) for _, lab in ops)
    dummies = [np.broadcast_to(np.zeros((), np.float32), x.shape) for x, _ in ops]
    strategy = optimize if isinstance(optimize, str) else "greedy"
    path = [tuple(sorted(p)) for p in np.einsum_path(spec, *dummies, optimize=strategy)[0][1:]]
    return path if all(len(p) == 2 for p in path) else [(0, 1)] * (n - 1)


def einsum(subscripts: str, /, *operands, optimize="greedy", dtype=None) -> Array:
    """Einstein summation: ``'ij,jk->ik'``, ``'bij,bjk->bik'``, ``'...ij,...jk'``, ``'ii->i'``, ``'ii'`` ...

    Each pairwise contraction is one ``dot_general`` (labels shared and still needed become batch dims,
    shared and unneeded ones are contracted); labels used by one operand only are summed first; a repeated
    label within an operand takes a diagonal. With three or more operands the pair order comes from numpy's
    ``einsum_path`` (``optimize='greedy'`` or ``'optimal'``; ``False`` contracts left to right). Size-1
    dimensions broadcast against other operands, as in numpy. The interleaved ``einsum(op, sublist, ...)``
    form is not supported.

    Example::

        >>> fnp.einsum("bi,bj->bij", fnp.ones((4, 2)), fnp.ones((4, 3))).shape
        (4, 2, 3)
    """
    if not isinstance(subscripts, str):
        raise ValueError("einsum: the first argument must be a subscripts string such as 'ij,jk->ik' "
                         "(the interleaved operand/sublist form is not supported)")
    if not operands:
        raise ValueError("einsum: at least one operand is required")
    arrays = promote("einsum", *operands)
    if dtype is not None:
        dt = dtypes.canonicalize(dtype)
        arrays = [lax.convert_element_type(x, dt) if x.dtype != dt else x for x in arrays]
    in_labels, out_labels = _parse_einsum(subscripts, [x.ndim for x in arrays])
    ops = [_take_diagonals(x, lab) for x, lab in zip(arrays, in_labels)]
    sizes = {}
    for x, lab in ops:
        for c, d in zip(lab, x.shape):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(f"einsum: label {c!r} has sizes {sizes[c]} and {d} in {subscripts!r}")
            sizes[c] = max(sizes.get(c, 1), d)
    return _contract(ops, sizes, out_labels, optimize)


def _contract(ops: list, sizes: dict, out_labels: list, optimize=False):
    """Contract ``(array, labels)`` operands into an array labelled ``out_labels``: size-1 dims facing a larger
    size are dropped (broadcast), labels no other operand or the output needs are summed, then pairs contract."""
    for i, (x, lab) in enumerate(ops):
        drop = [j for j, c in enumerate(lab) if x.shape[j] == 1 and sizes[c] > 1]
        if drop:
            ops[i] = (lax_shape.reshape(x, tuple(d for j, d in enumerate(x.shape) if j not in drop)),
                      [c for j, c in enumerate(lab) if j not in drop])
    for i, (x, lab) in enumerate(ops):
        elsewhere = set(out_labels).union(*[set(lb) for j, (_, lb) in enumerate(ops) if j != i])
        ops[i] = _sum_labels(x, lab, [c for c in lab if c not in elsewhere])
    for p in _einsum_order(ops, optimize):
        (x, xl), (y, yl) = ops[p[0]], ops[p[1]]
        rest = [o for k, o in enumerate(ops) if k not in p]
        keep = set(out_labels).union(*[set(lb) for _, lb in rest])
        ops = rest + [_contract_pair(x, xl, y, yl, keep)]
    x, lab = ops[0]
    x, lab = _sum_labels(x, lab, [c for c in lab if c not in out_labels])
    return lax_shape.transpose(x, tuple(lab.index(c) for c in out_labels))
