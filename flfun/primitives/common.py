"""Shared rule builders: elementwise (broadcasting) shape rules, batching by moving the mapped axis, and the
symbolic zeros that autodiff passes around. Families build their primitives from these."""
from __future__ import annotations

from typing import Callable, Sequence

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, is_weak, short

not_mapped = None


class _AvalMarker:
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"{type(self).__name__}({self.aval.str_short()})"


class Zero(_AvalMarker):
    """A symbolic zero tangent or cotangent of a given aval: rules skip work on it and allocate nothing."""
    __slots__ = ()


def is_zero(x) -> bool:
    return type(x) is Zero


class UndefinedPrimal(_AvalMarker):
    """Marks a linear input of an equation during transposition (its value is what we solve for)."""
    __slots__ = ()


def is_undefined(x) -> bool:
    """Whether a transpose-rule operand is the linear input being solved for."""
    return type(x) is UndefinedPrimal


def instantiate(t):
    """A real zeros array for a symbolic Zero (other values pass through)."""
    if type(t) is Zero:
        return _S.full(t.aval.shape, 0, t.aval.dtype)
    return t


def tangent_aval(x) -> ShapedArray:
    """The aval of a tangent of ``x`` (an aval or a value): its shape and dtype, never weak."""
    return ShapedArray(x.shape, x.dtype)


# -------------------------------------------------------------------------------------------------- shape rules
_KINDS = {"float": ("f", "floating"), "int": ("iu", "integer"), "bool": ("b", "boolean"), "num": ("iuf", "numeric"),
          "intbool": ("iub", "integer or boolean"), "any": ("iufb", "any")}


def check_kinds(op: str, kinds: str, *avals) -> None:
    allowed, what = _KINDS[kinds]
    for a in avals:
        if a.dtype.kind not in allowed:
            raise TypeError(f"{op}: requires {what} operands, got {short(a)}")


def check_same(op: str, what: str, avals, attr: str = "dtype") -> None:
    """``TypeError('<op>: <what> must have one <attr>, got f32[2], i32[2]')`` unless ``avals`` agree on ``attr``."""
    if len({tuple(a.shape) if attr == "shape" else getattr(a, attr) for a in avals}) > 1:
        raise TypeError(f"{op}: {what} must have one {attr}, got {', '.join(short(a) for a in avals)}")


def broadcast_shapes(op: str, *avals) -> tuple[int, ...]:
    """numpy broadcasting of the avals' shapes, or ``TypeError('add: shapes f32[3] and f32[4] ...')``."""
    ndim = max(len(a.shape) for a in avals)
    out = []
    for sizes in zip(*((1,) * (ndim - len(a.shape)) + tuple(a.shape) for a in avals)):
        sizes = set(sizes) - {1}
        if len(sizes) > 1:
            raise TypeError(f"{op}: shapes do not broadcast: {' and '.join(short(a) for a in avals)}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def naryop_abstract_eval(op: str, kinds: str, out_dtype=None) -> Callable:
    """Shape rule for a broadcasting elementwise op whose operands share one dtype."""
    allowed = _KINDS[kinds][0]

    def rule(*avals, **params):
        a0 = avals[0]
        d0, shape = a0.dtype, a0.shape
        weak = is_weak(a0)
        for a in avals[1:]:
            if a.dtype != d0:
                raise TypeError(f"{op}: operands must have the same dtype, got "
                                f"{' and '.join(short(a) for a in avals)} (flfun.numpy promotes; lax does not)")
            if a.shape != shape:
                shape = None
            weak = weak and is_weak(a)
        if d0.kind not in allowed:
            check_kinds(op, kinds, a0)
        if shape is None:
            shape = broadcast_shapes(op, *avals)
        return ShapedArray(shape, d0 if out_dtype is None else out_dtype, weak and out_dtype is None)
    return rule


# ----------------------------------------------------------------------------------------------------- batching
def moveaxis_to_front(x, bdim, size: int):
    """``x`` with its mapped axis first; an unmapped ``x`` is broadcast to have one of length ``size``."""
    if bdim is not_mapped:
        return _S.broadcast_in_dim(x, (size,) + tuple(x.shape), tuple(range(1, len(x.shape) + 1)))
    return moveaxis(x, bdim, 0)


def moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    perm = [i for i in range(len(x.shape)) if i != src]
    perm.insert(dst, src)
    return _S.transpose(x, tuple(perm))


def broadcasting_batch(prim: Primitive) -> Callable:
    """Batch rule for broadcasting elementwise ops: align ranks with the mapped axis in front."""
    def rule(axis, args, dims, **params):
        rank = max(len(a.shape) - (d is not not_mapped) for a, d in zip(args, dims))
        new_args = []
        # numpy broadcasting aligns unmapped operands from the right; mapped ones get their mapped axis first and
        # then size-1 axes so that the rest lines up the same way
        for a, d in zip(args, dims):
            if d is not not_mapped:
                a = moveaxis(a, d, 0)
                if len(a.shape) <= rank:
                    a = _S.reshape(a, (a.shape[0],) + (1,) * (rank + 1 - len(a.shape)) + tuple(a.shape[1:]))
            new_args.append(a)
        return prim.bind(*new_args, **params), 0
    return rule


def batch_axes(axes, bdim: int):
    """``axes`` renumbered after a mapped axis was inserted at ``bdim``, and where the mapped axis ends up once
    ``axes`` are removed (reductions, squeeze)."""
    return tuple(a + (a >= bdim) for a in axes), bdim - sum(a < bdim for a in axes)


def front_batch(fn: Callable) -> Callable:
    """Batch rule ``fn(size, *args, **params)`` on operands whose mapped axis was moved to the front (unmapped ones
    broadcast); the result (or each of a list of results) is mapped along axis 0."""
    def rule(axis, args, dims, **params):
        out = fn(axis.size, *[moveaxis_to_front(a, d, axis.size) for a, d in zip(args, dims)], **params)
        return out, ([0] * len(out) if isinstance(out, list) else 0)
    return rule


def vectorized_batch(prim: Primitive) -> Callable:
    """Batch rule for unary elementwise ops (the mapped axis stays where it is)."""
    def rule(axis, args, dims, **params):
        return prim.bind(*args, **params), dims[0]
    return rule


# ---------------------------------------------------------------------------------------------------- autodiff
def unbroadcast(ct, aval):
    """Sum ``ct`` down to ``aval``'s shape: the transpose of numpy broadcasting."""
    shape = tuple(aval.shape)
    if tuple(ct.shape) == shape:
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1 and ct.shape[i + lead] != 1)
    if axes:
        ct = _R.reduce_sum(ct, axes)
    return _S.reshape(ct, shape) if tuple(ct.shape) != shape else ct


def broadcast_to_shape(x, shape: Sequence[int]):
    """numpy-style broadcast of ``x`` to ``shape`` via broadcast_in_dim (a no-op when shapes match)."""
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    lead = len(shape) - len(x.shape)
    return _S.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def linear_jvp(prim: Primitive, nlinear: int | None = None) -> Callable:
    """jvp of a primitive linear in its first ``nlinear`` operands (default: all), the rest (start indices)
    being held fixed: apply it to those tangents (zeros instantiated) and the other primals."""
    def rule(out, primals, tangents, **params):
        lin = tangents[:nlinear]
        return prim.bind(*[instantiate(t) for t in lin], *primals[len(lin):], **params)
    return guarded_jvp(prim, rule, False, slice(nlinear))


def linear(prim: Primitive, nlinear: int | None = None) -> Callable:
    """Register ``linear_jvp(prim, nlinear)`` and return ``prim.def_transpose`` (to decorate the transpose)."""
    prim.def_jvp(linear_jvp(prim, nlinear))
    return prim.def_transpose


def jvp_rule(prim: Primitive, float_only: bool = True, which: slice = slice(None)) -> Callable:
    """Decorator registering ``fn(out, primals, tangents, **params) -> tangent`` as ``prim``'s jvp. It runs only
    when a tangent in ``tangents[which]`` is nonzero and (with ``float_only``) the output is floating; otherwise
    the output tangent is a symbolic Zero."""
    def register(fn):
        prim.def_jvp(guarded_jvp(prim, fn, float_only, which))
        return fn
    return register


def guarded_jvp(prim: Primitive, fn: Callable, float_only: bool = True, which: slice = slice(None)) -> Callable:
    """The jvp rule that ``jvp_rule`` registers."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if all(is_zero(t) for t in tangents[which]) or (float_only and not dtypes.is_float(out.dtype)):
            return out, Zero(tangent_aval(out))
        return out, fn(out, primals, tangents, **params)
    return rule


def zero_jvp(prim: Primitive) -> Callable:
    """jvp of a single-result primitive whose output is piecewise constant (comparisons, floor, argmax, ...)."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, Zero(tangent_aval(out))
    return rule


# The shape and reduce families import this module; their modules are bound here by flfun/primitives/__init__.py
# once every family is loaded (a function-level import on these hot paths costs more than the rule itself).
_S = _R = None
