"""Functional indexed updates: ``x.at[idx].set(v)`` / ``.add`` / ``.multiply`` / ... (``IndexUpdateHelper``), each one
``scatter`` over the index that ``x[idx]`` would read (parsed by ``_indexing.py``)."""
from typing import NamedTuple

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.core import short
from flfun.numpy._asarray import as_array
from flfun.numpy._indexing import MODES, broadcast_values, getitem, index_array, index_layout, parse_index
from flfun.primitives import elementwise as E, shape as S
from flfun.primitives.indexing import scatter

__all__ = ["IndexUpdateHelper"]


def _update(x, idx, values, op: str, mode, name: str) -> Array:
    """``x`` with ``values`` combined into ``x[idx]`` by ``op``, as one scatter (traced out-of-range indices are
    dropped)."""
    if mode == "drop":
        mode = "fill"
    if mode not in MODES:
        raise ValueError(f"at[].{name}: mode must be one of {MODES + ('drop',)}, got {mode!r}")
    x = as_array(x)
    entries = parse_index(x.shape, idx, mode)
    adv, adv_shape, plain, block, target = index_layout(entries)
    labels = plain[:block] + [("A", k) for k in range(len(adv_shape))] + plain[block:]
    v = broadcast_values(values, target, x.dtype, name)
    # scatter takes the values as (partial slices, advanced dims, whole dims); partial slices become index ranges
    partial = [e for e in plain if e[0] == "slice" and e[2:] != (0, 1, x.shape[e[1]])]
    whole = [e for e in plain if e[0] == "slice" and e not in partial]
    kept = [lab for lab in labels if lab[0] != "new"]
    v = S.reshape(v, tuple(d for lab, d in zip(labels, target) if lab[0] != "new"))
    v = S.transpose(v, tuple(kept.index(lab) for lab in partial + labels[block:block + len(adv_shape)] + whole))
    if not partial and not any(e[0] in ("adv", "int") for e in entries):      # the whole array
        return v if op == "set" else {"add": E.add, "mul": E.mul, "min": E.min, "max": E.max}[op](x, v)
    comps = []      # (index component, the axis it indexes)
    for e in entries:
        if e[0] == "int":
            comps.append((np.asarray(e[2]), e[1]))
        elif e[0] == "adv" and e[1]:
            comps.append((e[2], e[1][0]))
        elif e in partial:     # its range, placed at its position among the partial dims
            r = e[2] + e[3] * np.arange(e[4])
            comps.append((r.reshape((-1,) + (1,) * (len(partial) - 1 - partial.index(e) + len(adv_shape))), e[1]))
    host = all(isinstance(c, np.ndarray) for c, _ in comps)
    indices = index_array([(c, x.shape[d]) for c, d in comps], tuple(e[4] for e in partial) + adv_shape)
    mode = mode or ("promise_in_bounds" if host else "fill")
    return scatter(x, indices, v, axes=tuple(d for _, d in comps), mode=mode, op=op)


class IndexUpdateHelper:
    """``x.at``: functional versions of numpy's in-place indexed updates. ``x`` itself never changes.

    ``x.at[idx].set(v)`` is ``x[idx] = v`` on a copy; likewise ``.add`` (``+=``, duplicates accumulate like
    ``np.add.at``), ``.multiply`` / ``.mul``, ``.divide``, ``.power``, ``.min``, ``.max``, and ``.get()`` is
    ``x[idx]``. ``idx`` takes every form ``x[idx]`` does; values are cast to ``x.dtype`` and broadcast to
    ``x[idx].shape``. With duplicate indices, which ``set`` value wins is unspecified. Concrete out-of-range
    indices raise ``IndexError``; traced ones are dropped unless ``mode`` says otherwise (``"clip"``,
    ``"drop"``/``"fill"``, ``"promise_in_bounds"``).

    Example::

        >>> x = fnp.zeros(4)
        >>> x.at[1:3].set(1.0).tolist(), x.at[[0, 0]].add(1.0).tolist()
        ([0.0, 1.0, 1.0, 0.0], [2.0, 0.0, 0.0, 0.0])
    """
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, idx)

    def __repr__(self):
        return f"IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef(NamedTuple):
    array: Array
    index: object

    def get(self, *, mode: str | None = None, fill_value=None) -> Array:
        return getitem(self.array, self.index, mode, fill_value)

    def _op(op: str, name: str, combine=None):
        def method(self, values, *, mode: str | None = None) -> Array:
            if combine is None:
                return _update(self.array, self.index, values, op, mode, name)
            x = as_array(self.array)      # divide / power: combine x with the values, or 1 where not indexed
            if name == "divide" and not dtypes.is_float(x.dtype):
                raise TypeError(f"at[].divide: needs a floating-point array, got {short(x)}")
            return combine(x, _update(S.full(x.shape, 1, x.dtype), self.index, values, op, mode, name))
        method.__name__ = name
        return method

    set, add, multiply, min, max = (_op("set", "set"), _op("add", "add"), _op("mul", "multiply"), _op("min", "min"),
                                    _op("max", "max"))
    divide, power, mul = _op("mul", "divide", E.div), _op("set", "power", E.pow), multiply

    del _op
