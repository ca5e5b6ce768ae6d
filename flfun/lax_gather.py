"""jax.lax's ``gather`` and ``scatter*`` with XLA's dimension numbers. Each is one flat-index primitive
(``flfun.primitives.indexing``) on the flattened operand: the flat position of every output (gather) or update
(scatter) element is computed from the indices with ordinary ops, so grad, vmap and jit need no rules of their
own. Called with ``axes=`` instead of dimension numbers they are flfun's primitive wrappers, unchanged."""
from __future__ import annotations

import enum
from typing import Callable, NamedTuple

import numpy as np

from flfun import dtypes
from flfun import numpy as fnp
from flfun.core import short
from flfun.primitives import indexing as pi
from flfun.primitives.base import broadcast_in_dim, iota


class GatherScatterMode(enum.Enum):
    """Out-of-bounds indices: ``CLIP`` clamps each start so the whole slice fits; ``FILL_OR_DROP`` gives
    ``fill_value`` for a gathered slice that does not fit and drops a scatter update that does not;
    ``PROMISE_IN_BOUNDS`` (gather's default) is clamping for gathers and dropping for scatters."""
    CLIP = 1
    FILL_OR_DROP = 2
    PROMISE_IN_BOUNDS = 3
    ONE_HOT = 4

    @staticmethod
    def from_any(s) -> GatherScatterMode:
        """The mode for an enum member, ``None`` (FILL_OR_DROP), or a name: ``"clip"``, ``"fill"``/``"drop"``,
        ``"promise_in_bounds"``: ``GatherScatterMode.from_any("clip") is GatherScatterMode.CLIP``."""
        if isinstance(s, GatherScatterMode):
            return s
        names = {None: "FILL_OR_DROP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP", "clip": "CLIP",
                 "promise_in_bounds": "PROMISE_IN_BOUNDS", "one_hot": "ONE_HOT"}
        if s not in names:
            raise ValueError(f'Unknown gather mode "{s}"')
        return GatherScatterMode[names[s]]


class GatherDimensionNumbers(NamedTuple):
    """XLA's gather layout (the index vector is the last dim of ``start_indices``): see ``gather``."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """XLA's scatter layout (the index vector is the last dim of ``scatter_indices``): see ``scatter``."""
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _dims(op: str, field: str, dims, bound: int, ordered: bool = True) -> tuple[int, ...]:
    dims = tuple(int(d) for d in dims)
    if len(set(dims)) < len(dims) or any(not 0 <= d < bound for d in dims) or (ordered and list(dims) != sorted(dims)):
        raise TypeError(f"{op}: dimension_numbers.{field} must be {'sorted, ' if ordered else ''}distinct dims in "
                        f"[0, {bound}), got {dims}")
    return dims


def _window(op: str, operand, indices, dropped: tuple, index_map: tuple, batching: tuple, names: tuple) -> list:
    """The operand dims a slice keeps (neither ``dropped`` nor batching), checking the shared fields."""
    r, nb = operand.ndim, indices.ndim - 1
    if nb < 0 or not dtypes.is_int(indices.dtype):
        raise TypeError(f"{op}: indices must be integers with the index vector as their last dim, got {short(indices)}")
    dropped, index_map = _dims(op, names[0], dropped, r), _dims(op, names[1], index_map, r, ordered=False)
    obd, ibd = _dims(op, "operand_batching_dims", batching[0], r), _dims(op, names[2], batching[1], nb, False)
    if len(index_map) != indices.shape[-1]:
        raise TypeError(f"{op}: len(dimension_numbers.{names[1]})={len(index_map)} must equal the last dim of "
                        f"indices {short(indices)}")
    for field, other in ((names[0], dropped), (names[1], index_map)):
        if set(other) & set(obd):
            raise TypeError(f"{op}: dimension_numbers.{field} {other} and operand_batching_dims {obd} must be disjoint")
    if [operand.shape[d] for d in obd] != [indices.shape[d] for d in ibd]:
        raise TypeError(f"{op}: operand_batching_dims {obd} of {short(operand)} and {names[2]} {ibd} of "
                        f"{short(indices)} must have equal sizes")
    return [d for d in range(r) if d not in dropped and d not in obd]


def _positions(operand, indices, index_map, window, sizes, batching, clip: bool):
    """The flat operand position of every element of every slice, shape ``(*indices.shape[:-1], *window sizes)``;
    -1 (out of bounds for the flat primitive) for a slice that does not fit, unless ``clip`` clamps it to fit."""
    shape, batch = operand.shape, tuple(indices.shape[:-1])
    strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1].astype(np.int64)
    hi = np.array([shape[d] - sizes[d] for d in index_map], np.int64)    # the last start that fits the slice
    idx = fnp.astype(indices, np.int64)
    idx = fnp.clip(idx, 0, hi) if clip else idx
    start = fnp.sum(idx * strides[list(index_map)], axis=-1)
    for d, b in zip(*batching):
        start = start + iota(np.int64, batch, b) * strides[d]
    offsets = sum((np.arange(sizes[d]) * strides[d]).reshape([-1 if j == k else 1 for k in range(len(window))])
                  for j, d in enumerate(window)) if window else np.int64(0)
    flat = broadcast_in_dim(start, batch + tuple(sizes[d] for d in window), tuple(range(len(batch)))) + offsets
    if clip:
        return flat
    fits = fnp.all((idx >= 0) & (idx <= hi), axis=-1)
    return fnp.where(fnp.expand_dims(fits, tuple(range(len(batch), flat.ndim))), flat, -1)


def _clips(op: str, mode, default: str) -> bool:
    mode = GatherScatterMode.from_any(mode) if mode is not None else GatherScatterMode[default]
    if mode is GatherScatterMode.ONE_HOT:
        raise NotImplementedError(f"{op}: mode=ONE_HOT is not supported")
    return mode is GatherScatterMode.CLIP or (op == "gather" and mode is GatherScatterMode.PROMISE_IN_BOUNDS)


def _legacy_mode(mode) -> str:
    """The primitives' ``mode=`` string for a ``GatherScatterMode`` (a string passes through; clip when unset)."""
    if not isinstance(mode, GatherScatterMode):
        return "clip" if mode is None else mode
    return {"CLIP": "clip", "FILL_OR_DROP": "fill"}.get(mode.name, mode.name.lower())


def gather(operand, start_indices, dimension_numbers=None, slice_sizes=None, *, indices_are_sorted=False,
           unique_indices=False, mode=None, fill_value=None, axes=None, batch_dims: int = 0):
    """XLA's gather: for each index vector ``start_indices[b, :]`` (the last dim), a ``slice_sizes`` window of
    ``operand`` that starts at ``start_index_map <- start_indices[b, :]`` (0 elsewhere, and ``b``'s own position
    along each ``operand_batching_dims``); ``collapsed_slice_dims`` and batching dims (size-1 slices) are
    dropped, the remaining window dims land at ``offset_dims`` of the output and the batch dims fill the rest.

    ``mode``: None / ``"promise_in_bounds"`` / ``"clip"`` clamp starts so the window fits; ``"fill"`` returns
    ``fill_value`` (NaN for inexact dtypes, the extreme integer, True) for a window that does not fit.
    ``indices_are_sorted`` and ``unique_indices`` are accepted and ignored. With ``axes=`` (and
    ``batch_dims``) instead of dimension numbers this is flfun's indexing primitive (``primitives/indexing.py``).

    Example::

        >>> dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
        >>> lax.gather(fnp.arange(6.0).reshape(3, 2), fnp.asarray([[2], [0]]), dn, (1, 2)).tolist()   # x[[2, 0]]
        [[4.0, 5.0], [0.0, 1.0]]
    """
    if axes is not None:
        return pi.gather(operand, start_indices, axes=axes, batch_dims=batch_dims, mode=_legacy_mode(mode),
                         fill_value=fill_value)
    if dimension_numbers is None or slice_sizes is None:
        raise TypeError("gather: pass dimension_numbers and slice_sizes (jax.lax's form) or axes= (flfun's)")
    operand, indices, dn = fnp.asarray(operand), fnp.asarray(start_indices), dimension_numbers
    sizes = tuple(int(s) for s in slice_sizes)
    window = _window("gather", operand, indices, dn.collapsed_slice_dims, dn.start_index_map,
                     (dn.operand_batching_dims, dn.start_indices_batching_dims),
                     ("collapsed_slice_dims", "start_index_map", "start_indices_batching_dims"))
    if len(sizes) != operand.ndim or any(not 0 <= s <= n for s, n in zip(sizes, operand.shape)):
        raise TypeError(f"gather: slice_sizes {sizes} must give each dim of {short(operand)} a size in [0, dim]")
    if any(sizes[d] > 1 for d in range(operand.ndim) if d not in window):
        raise TypeError(f"gather: slice_sizes {sizes} must be 0 or 1 at collapsed_slice_dims and "
                        f"operand_batching_dims")
    nb = indices.ndim - 1
    offset = _dims("gather", "offset_dims", dn.offset_dims, nb + len(window))
    if len(offset) != len(window):
        raise TypeError(f"gather: len(dimension_numbers.offset_dims)={len(offset)} must equal the {len(window)} "
                        f"operand dims that are neither collapsed_slice_dims nor operand_batching_dims")
    clip = _clips("gather", mode, "PROMISE_IN_BOUNDS")
    flat = _positions(operand, indices, dn.start_index_map, window, sizes,
                      (dn.operand_batching_dims, dn.start_indices_batching_dims), clip)
    out = pi.gather(fnp.reshape(operand, (-1,)), fnp.expand_dims(flat, -1), axes=(0,),
                    mode="clip" if clip else "fill", fill_value=fill_value)
    return fnp.moveaxis(out, tuple(range(nb, out.ndim)), offset)


def _scatter(op: str, kind: str, operand, indices, updates, dn, mode, axes, batch_dims):
    if axes is not None:
        return pi.scatter(operand, indices, updates, axes=axes, batch_dims=batch_dims, mode=_legacy_mode(mode),
                          op=kind)
    if dn is None:
        raise TypeError(f"{op}: pass dimension_numbers (jax.lax's form) or axes= (flfun's)")
    operand, indices, updates = fnp.asarray(operand), fnp.asarray(indices), fnp.asarray(updates)
    batching = (dn.operand_batching_dims, dn.scatter_indices_batching_dims)
    window = _window(op, operand, indices, dn.inserted_window_dims, dn.scatter_dims_to_operand_dims, batching,
                     ("inserted_window_dims", "scatter_dims_to_operand_dims", "scatter_indices_batching_dims"))
    nb = indices.ndim - 1
    uwd = _dims(op, "update_window_dims", dn.update_window_dims, updates.ndim)
    scatter_dims = [d for d in range(updates.ndim) if d not in uwd]
    wsizes = [updates.shape[d] for d in uwd]
    if (len(uwd) != len(window) or [updates.shape[d] for d in scatter_dims] != list(indices.shape[:-1])
            or any(s > operand.shape[d] for s, d in zip(wsizes, window))):
        raise TypeError(f"{op}: updates {short(updates)} must have indices' batch dims {tuple(indices.shape[:-1])} "
                        f"and, at update_window_dims {uwd}, window sizes at most the operand's {len(window)} "
                        f"window dims {tuple(operand.shape[d] for d in window)}")
    sizes = [1] * operand.ndim
    for s, d in zip(wsizes, window):
        sizes[d] = s
    clip = _clips(op, mode, "FILL_OR_DROP")
    flat = _positions(operand, indices, dn.scatter_dims_to_operand_dims, window, sizes, batching, clip)
    updates = fnp.moveaxis(updates, uwd, tuple(range(nb, updates.ndim)))
    out = pi.scatter(fnp.reshape(operand, (-1,)), fnp.expand_dims(flat, -1), updates, axes=(0,),
                     mode="clip" if clip else "fill", op=kind)
    return fnp.reshape(out, operand.shape)


def _scatter_fn(kind: str, name: str, doc: str) -> Callable:
    def fn(operand, scatter_indices, updates, dimension_numbers=None, *, indices_are_sorted=False,
           unique_indices=False, mode=None, axes=None, batch_dims: int = 0, op: str = kind):
        if kind == "sub":
            return _scatter(name, "add", operand, scatter_indices, fnp.negative(updates), dimension_numbers, mode,
                            axes, batch_dims)
        return _scatter(name, op, operand, scatter_indices, updates, dimension_numbers, mode, axes, batch_dims)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


_SCATTER_DOC = """A copy of ``operand`` with ``updates`` {how} at XLA's scatter positions: each index vector
    ``scatter_indices[b, :]`` (the last dim) starts, along ``scatter_dims_to_operand_dims`` (and at ``b``'s own
    position along ``operand_batching_dims``), a window whose dims are the ``update_window_dims`` of ``updates``;
    ``inserted_window_dims`` are size-1 window dims absent from ``updates``. Duplicate positions {dup}.

    ``mode``: None / ``"fill"`` / ``"promise_in_bounds"`` drop an update whose window does not fit, ``"clip"``
    clamps its start. ``indices_are_sorted``/``unique_indices`` are accepted and ignored; ``axes=`` selects
    flfun's own indexing primitive (``primitives/indexing.py``{op}).

    Example::

        >>> dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
        ...                                  scatter_dims_to_operand_dims=(0,))
        >>> lax.{name}(fnp.ones(4), fnp.asarray([[1], [1], [3]]), fnp.full(3, 2.0), dn).tolist()
        {example}
"""
def _doc(name: str, how: str, dup: str, example: list, op: str = "") -> str:
    return _SCATTER_DOC.format(name=name, how=how, dup=dup, example=example, op=op)


_ACC = "accumulate"
scatter = _scatter_fn("set", "scatter", _doc("scatter", "written", "keep one of their updates (unspecified which)",
                                             [1.0, 2.0, 1.0, 2.0], ", with its ``op=``"))
scatter_add = _scatter_fn("add", "scatter_add", _doc("scatter_add", "added", _ACC, [1.0, 5.0, 1.0, 3.0]))
scatter_sub = _scatter_fn("sub", "scatter_sub", _doc("scatter_sub", "subtracted", _ACC, [1.0, -3.0, 1.0, -1.0]))
scatter_mul = _scatter_fn("mul", "scatter_mul", _doc("scatter_mul", "multiplied in", _ACC, [1.0, 4.0, 1.0, 2.0]))
scatter_min = _scatter_fn("min", "scatter_min", _doc("scatter_min", "combined by minimum", _ACC, [1.0, 1.0, 1.0, 1.0]))
scatter_max = _scatter_fn("max", "scatter_max", _doc("scatter_max", "combined by maximum", _ACC, [1.0, 2.0, 1.0, 2.0]))


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with the elementwise ``func`` applied at the positions ``scatter`` with ``update_shape``-shaped
    updates would write (once per position, even when indices repeat).

    Example::

        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> lax.scatter_apply(fnp.arange(4.0), fnp.asarray([[1], [3]]), fnp.negative, dn, update_shape=(2,)).tolist()
        [0.0, -1.0, 2.0, -3.0]
    """
    operand = fnp.asarray(operand)
    hit = scatter(fnp.zeros(operand.shape, np.bool_), scatter_indices, fnp.ones(tuple(update_shape), np.bool_),
                  dimension_numbers, mode=mode)
    return fnp.where(hit, func(operand), operand)


__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather", "scatter",
           "scatter_add", "scatter_apply", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub"]
