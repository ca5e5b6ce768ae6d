"""Rule builders that call no primitive: the symbolic zeros autodiff passes around, shape-rule checks, and
batching / jvp wrappers. (The builders that do call primitives are in ``base``; both are public through
``flfun.primitives.rules``.)"""
from __future__ import annotations

from typing import Callable

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


def from_end(dimension, operands) -> int:
    """``dimension`` as an int, a negative one counted from the end of the first operand's rank."""
    d = int(dimension)
    return d + len(operands[0].shape) if operands and d < 0 else d


def tangent_aval(x) -> ShapedArray:
    """The aval of a tangent of ``x`` (an aval or a value): its shape and dtype, never weak."""
    return ShapedArray(x.shape, x.dtype)


# -------------------------------------------------------------------------------------------------- shape rules
_KINDS = {"float": ("f", "real floating"), "int": ("iu", "integer"), "bool": ("b", "boolean"),
          "num": ("iuf", "real numeric"), "intbool": ("iub", "integer or boolean"), "any": ("iufb", "real or boolean"),
          "inexact": ("fc", "floating or complex"), "complex": ("c", "complex"), "number": ("iufc", "numeric"),
          "all": ("iufbc", "any")}


def check_kinds(op: str, kinds: str, *avals) -> None:
    allowed, what = _KINDS[kinds]
    for a in avals:
        if dtypes.kind(a.dtype) not in allowed:
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
def batch_axes(axes, bdim: int):
    """``axes`` renumbered after a mapped axis was inserted at ``bdim``, and where the mapped axis ends up once
    ``axes`` are removed (reductions, squeeze)."""
    return tuple(a + (a >= bdim) for a in axes), bdim - sum(a < bdim for a in axes)


def vectorized_batch(prim: Primitive) -> Callable:
    """Batch rule for unary elementwise ops (the mapped axis stays where it is)."""
    def rule(axis, args, dims, **params):
        return prim.bind(*args, **params), dims[0]
    return rule


# ---------------------------------------------------------------------------------------------------- autodiff
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
        if all(is_zero(t) for t in tangents[which]) or (float_only and not dtypes.is_inexact(out.dtype)):
            return out, Zero(tangent_aval(out))
        return out, fn(out, primals, tangents, **params)
    return rule


def zero_jvp(prim: Primitive) -> Callable:
    """jvp of a single-result primitive whose output is piecewise constant (comparisons, floor, argmax, ...)."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, Zero(tangent_aval(out))
    return rule


__all__ = ["UndefinedPrimal", "Zero", "batch_axes", "broadcast_shapes", "check_kinds", "check_same", "from_end", "guarded_jvp",
           "is_undefined", "is_zero", "jvp_rule", "naryop_abstract_eval", "not_mapped", "tangent_aval",
           "vectorized_batch", "zero_jvp"]
