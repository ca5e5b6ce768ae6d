"""``einsum`` and the labelled contraction under it: operands carry one label per axis; a repeated label takes a
diagonal, labels nothing else needs are summed, and each pair contracts as one ``dot_general`` (``contract``, which
``_linalg.py``'s broadcasting products use too).
"""
import collections
import string
from collections.abc import Sequence

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.numpy.promotion import promote
from flfun.primitives import elementwise as lax, reduce as lax_reduce, shape as lax_shape
from flfun.primitives.linalg import dot_general

__all__ = ["einsum"]


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


def take_diagonals(x, labels: list[str]):
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
    letters = {c: string.ascii_letters[i % 52] for i, c in enumerate(dict.fromkeys(c for _, lab in ops for c in lab))}
    if n <= 2 or not optimize or len(letters) > 52:
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
    ops = [take_diagonals(x, lab) for x, lab in zip(arrays, in_labels)]
    sizes = {}
    for x, lab in ops:
        for c, d in zip(lab, x.shape):
            if sizes.get(c, 1) not in (1, d) and d != 1:
                raise ValueError(f"einsum: label {c!r} has sizes {sizes[c]} and {d} in {subscripts!r}")
            sizes[c] = max(sizes.get(c, 1), d)
    return contract(ops, sizes, out_labels, optimize)


def contract(ops: list, sizes: dict, out_labels: list, optimize=False):
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
