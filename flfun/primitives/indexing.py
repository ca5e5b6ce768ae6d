"""Indexing primitives: ``gather`` reads operand elements at integer positions, ``scatter`` combines updates into
a copy of the operand at such positions. Both share one layout: leading batch dims, ``indices[..., k]`` naming
positions along ``axes[k]``, the remaining operand dims carried whole. Negative indices are not wrapped here
(``flfun.numpy`` wraps them); ``mode`` says what out-of-bound indices do. Impls: ``backends/xp/indexing.py``."""
from __future__ import annotations

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind, get_aval, is_weak, short
from flfun.primitives import elementwise as E
from flfun.primitives.base import full
from flfun.primitives.rules import (instantiate, is_undefined, is_zero, jvp_rule, moveaxis, moveaxis_to_front,
                                     not_mapped)

MODES = ("clip", "fill", "promise_in_bounds")
SCATTER_OPS = ("set", "add", "mul", "min", "max")


def _full_like(x, value):
    """A filled array with the aval of a rule operand (an ``UndefinedPrimal``, an array, or a Python scalar)."""
    aval = x.aval if is_undefined(x) else get_aval(x)
    return full(aval.shape, value, aval.dtype)


def _check_choice(prim: str, err: type, /, **chosen) -> None:
    """``err('<op>: mode must be one of (...), got ...')`` for a ``mode`` / ``op`` not among its choices."""
    for name, value in chosen.items():
        if value not in (options := MODES if name == "mode" else SCATTER_OPS):
            raise err(f"{prim}: {name} must be one of {options}, got {value!r}")


def _gather_shape(op: str, operand, indices, axes, batch_dims, mode) -> tuple[int, ...]:
    """The shape gather returns (and scatter's updates must have), raising the clear errors."""
    _check_choice(op, TypeError, mode=mode)
    if not dtypes.is_int(indices.dtype):
        raise TypeError(f"{op}: indices must be integers, got {short(indices)}")
    nd, bd = len(operand.shape), batch_dims
    if not 0 <= bd <= nd or len(indices.shape) < bd + 1:
        raise TypeError(f"{op}: batch_dims={bd} needs operand and indices of rank > {bd} "
                        f"(indices carry a last position dim), got {short(operand)} and {short(indices)}")
    if tuple(indices.shape[:bd]) != tuple(operand.shape[:bd]):
        raise TypeError(f"{op}: the {bd} leading batch dims of operand and indices must match, got "
                        f"{short(operand)} and {short(indices)}")
    if indices.shape[-1] != len(axes):
        raise TypeError(f"{op}: the last dim of indices must equal len(axes)={len(axes)}, got {short(indices)}")
    if len(set(axes)) != len(axes) or any(not bd <= a < nd for a in axes):
        raise TypeError(f"{op}: axes {axes} must be distinct operand dims in [{bd}, {nd}) (not batch dims) "
                        f"for {short(operand)}")
    return tuple(indices.shape[:-1]) + tuple(d for i, d in enumerate(operand.shape) if i >= bd and i not in axes)


# ------------------------------------------------------------------------------------------------------- gather
gather_p = Primitive("gather", linear_in=(0,))


@gather_p.def_abstract_eval
def _gather_abstract_eval(operand, indices, *, axes, batch_dims, mode, fill_value):
    shape = _gather_shape("gather", operand, indices, axes, batch_dims, mode)
    empty = [a for a in axes if operand.shape[a] == 0]
    if empty and mode == "clip" and 0 not in indices.shape:
        raise ValueError(f"gather: mode='clip' has no position to clamp to in the empty axis {empty[0]} of "
                         f"{short(operand)}")
    return ShapedArray(shape, operand.dtype, is_weak(operand))


@jvp_rule(gather_p, which=slice(1))
def _gather_jvp(out, primals, tangents, *, axes, batch_dims, mode, fill_value):
    # out-of-bound reads are constants (fill_value), so their tangent is zero
    return gather(tangents[0], primals[1], axes=axes, batch_dims=batch_dims, mode=mode,
                       fill_value=0 if mode == "fill" else fill_value)


@gather_p.def_transpose
def _gather_transpose(ct, operand, indices, *, axes, batch_dims, mode, fill_value):
    return [scatter(_full_like(operand, 0), indices, ct, axes=axes, batch_dims=batch_dims, mode=mode, op="add"),
            None]


@gather_p.def_batch
def _gather_batch(axis, args, dims, *, axes, batch_dims, mode, fill_value):
    (operand, indices), (d_op, d_idx) = args, dims
    bd, shifted, kw = batch_dims, tuple(a + 1 for a in axes), dict(mode=mode, fill_value=fill_value)
    if d_idx is not_mapped:     # the mapped operand axis becomes the first carried dim, after the batch dims
        return gather(moveaxis(operand, d_op, bd), indices, axes=shifted, batch_dims=bd, **kw), len(indices.shape) - 1
    if d_op is not_mapped:      # the mapped index axis becomes the first index dim, after the batch dims
        return gather(operand, moveaxis(indices, d_idx, bd), axes=axes, batch_dims=bd, **kw), bd
    return gather(moveaxis(operand, d_op, 0), moveaxis(indices, d_idx, 0), axes=shifted, batch_dims=bd + 1, **kw), 0


def gather(operand, indices, *, axes, batch_dims: int = 0, mode: str = "clip", fill_value=None):
    """Read ``operand`` at integer positions.

    ``operand`` has shape ``(*B, ...)`` and ``indices`` shape ``(*B, *I, len(axes))`` with ``B`` the
    ``batch_dims`` leading dims shared by both; ``indices[b, i, k]`` is a position along operand dim
    ``axes[k]``. The result has shape ``(*B, *I, *rest)`` where ``rest`` are the operand dims that are neither
    batch dims nor in ``axes``, in order: ``out[b, i, r] = operand[b, axes <- indices[b, i, :], rest <- r]``.

    Args:
        axes: distinct operand dims (each ``>= batch_dims``) that ``indices`` address.
        batch_dims: number of leading dims operand and indices share elementwise.
        mode: ``"clip"`` clamps indices into range (default); ``"fill"`` returns ``fill_value`` for reads with
            any out-of-bound index (default NaN for floats, the minimum for signed and the maximum for unsigned
            integers, True for bools); ``"promise_in_bounds"`` lets the backend assume all are in range.
            Negative indices are out of bounds (``flfun.numpy`` wraps them before calling this).
        fill_value: the value for ``mode="fill"``.

    Example::

        >>> x = fnp.arange(12.0).reshape(3, 4)
        >>> lax.gather(x, fnp.asarray([[2], [0]]), axes=(0,)).tolist()      # rows 2 and 0
        [[8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0]]
        >>> lax.gather(x, fnp.asarray([[1], [3], [0]]), axes=(1,), batch_dims=1).tolist()  # x[b, idx[b]]
        [1.0, 7.0, 8.0]
    """
    _check_choice("gather", ValueError, mode=mode)
    return bind(gather_p, operand, indices, axes=tuple(int(a) for a in axes), batch_dims=int(batch_dims),
                mode=mode, fill_value=fill_value)


# ------------------------------------------------------------------------------------------------------ scatter
scatter_p = Primitive("scatter", inplace=(0,))


@scatter_p.def_abstract_eval
def _scatter_abstract_eval(operand, indices, updates, *, axes, batch_dims, mode, op):
    _check_choice("scatter", TypeError, op=op)
    shape = _gather_shape("scatter", operand, indices, axes, batch_dims, mode)
    if tuple(updates.shape) != shape or updates.dtype != operand.dtype:
        want = ShapedArray(shape, operand.dtype).str_short()
        raise TypeError(f"scatter: updates must be {want} for operand {short(operand)} and indices "
                        f"{short(indices)} with axes={axes}, batch_dims={batch_dims}; got {short(updates)}")
    return ShapedArray(operand.shape, operand.dtype, is_weak(operand))


@jvp_rule(scatter_p, which=slice(None, None, 2))     # the operand and updates tangents
def _scatter_jvp(out, primals, tangents, *, axes, batch_dims, mode, op):
    (operand, indices, updates), (t_op, _, t_upd) = primals, tangents
    kw = dict(axes=axes, batch_dims=batch_dims, mode=mode)
    if op == "add":
        return t_op if is_zero(t_upd) else scatter(instantiate(t_op), indices, t_upd, op="add", **kw)
    if op == "set":
        return scatter(instantiate(t_op), indices, instantiate(t_upd), op="set", **kw)
    if op == "mul":
        # exact for unique indices: d(op[p] * upd[i]) = t_op[p] * upd[i] + op[p] * t_upd[i]
        t = None if is_zero(t_op) else scatter(t_op, indices, updates, op="mul", **kw)
        if not is_zero(t_upd):
            term = E.mul(operand, scatter(_full_like(operand, 0), indices, t_upd, op="add", **kw))
            t = term if t is None else E.add(t, term)
        return t
    # min / max: the tangent is the mean of the tangents of every contributor that attains the extremum
    # (operand and duplicate updates alike), so ties and duplicate indices are handled
    zero_op, zero_upd = _full_like(operand, 0), _full_like(updates, 0)
    fill = float("nan") if mode == "fill" else None
    upd_wins = E.eq(updates, gather(out, indices, fill_value=fill, **kw))
    op_wins = E.eq(operand, out)
    count = scatter(E.convert_element_type(op_wins, out.dtype), indices, E.convert_element_type(upd_wins, out.dtype),
                    op="add", **kw)
    t_keep = zero_op if is_zero(t_op) else E.select_n(op_wins, zero_op, t_op)
    t_new = zero_upd if is_zero(t_upd) else E.select_n(upd_wins, zero_upd, t_upd)
    return E.div(scatter(t_keep, indices, t_new, op="add", **kw), count)


@scatter_p.def_transpose
def _scatter_transpose(ct, operand, indices, updates, *, axes, batch_dims, mode, op):
    kw = dict(axes=axes, batch_dims=batch_dims, mode=mode)
    ct_upd = gather(ct, indices, fill_value=0 if mode == "fill" else None, **kw) if is_undefined(updates) else None
    if not is_undefined(operand):
        return [None, None, ct_upd]
    if op == "add":
        return [ct, None, ct_upd]
    # set: overwritten positions do not reach the output; mul with known updates scales each one (a diagonal map)
    kept = _full_like(updates, 0) if op == "set" else updates
    return [scatter(ct, indices, kept, op=op, **kw), None, ct_upd]


@scatter_p.def_batch
def _scatter_batch(axis, args, dims, *, axes, batch_dims, mode, op):
    (operand, indices, updates), (d_op, d_idx, d_upd) = args, dims
    bd, kw = batch_dims, dict(axes=tuple(a + 1 for a in axes), mode=mode, op=op)
    operand, updates = moveaxis_to_front(operand, d_op, axis.size), moveaxis_to_front(updates, d_upd, axis.size)
    if d_idx is not_mapped:
        # the mapped axis becomes the first carried dim of operand (and so of updates)
        updates = moveaxis(updates, 0, len(indices.shape) - 1)
        return scatter(moveaxis(operand, 0, bd), indices, updates, batch_dims=bd, **kw), bd
    return scatter(operand, moveaxis(indices, d_idx, 0), updates, batch_dims=bd + 1, **kw), 0


def scatter(operand, indices, updates, *, axes, batch_dims: int = 0, mode: str = "clip", op: str = "set"):
    """A copy of ``operand`` with ``updates`` combined in at the positions ``gather`` would read.

    ``updates`` has the shape ``gather(operand, indices, ...)`` returns. ``op`` is ``"set"`` (overwrite),
    ``"add"``, ``"mul"``, ``"min"`` or ``"max"``; duplicate positions accumulate for add/mul/min/max, while
    for ``"set"`` which duplicate wins is unspecified (as in numpy and JAX), and so are its derivatives.
    Derivatives of ``"mul"`` with respect to ``updates`` assume unique indices. ``mode`` as in ``gather``,
    except that with ``"fill"`` out-of-bound updates are dropped. The operand is never modified.

    Example::

        >>> x = fnp.zeros(4)
        >>> lax.scatter(x, fnp.asarray([[1], [1], [3]]), fnp.ones(3), axes=(0,), op="add").tolist()
        [0.0, 2.0, 0.0, 1.0]
    """
    _check_choice("scatter", ValueError, mode=mode, op=op)
    return bind(scatter_p, operand, indices, updates, axes=tuple(int(a) for a in axes),
                batch_dims=int(batch_dims), mode=mode, op=op)


__all__ = ["gather", "scatter"]
