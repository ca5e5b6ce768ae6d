"""flfun's IR: a ``Program`` of equations over variables, printed like a jaxpr.

``invars`` are the inputs, ``constvars`` the captured constants (their values travel beside the program, or inside
a ``ClosedProgram``), each ``Eqn`` applies one primitive, and ``outvars`` are the results (a ``Literal`` may
stand for a scalar constant). ``typecheck`` re-runs every shape rule; passes live in ``flfun.compiler.passes``.
"""
from __future__ import annotations

import itertools
import string
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, bind

_ids = itertools.count()


class Var:
    """A value in a program, known only by its abstract value."""
    __slots__ = ("aval", "id")

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.id = next(_ids)

    def __repr__(self):
        return f"Var({self.id}:{self.aval.str_short()})"


class Literal:
    """A scalar constant inlined in an equation; ``val`` is a numpy scalar of ``aval.dtype``."""
    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = np.asarray(val, dtype=aval.dtype)[()]
        self.aval = aval

    @property
    def key(self) -> tuple:
        """A hashable identity for CSE: dtype and bit pattern (so ``-0.0`` and ``nan`` are handled exactly)."""
        return (self.aval.dtype.str, self.val.tobytes())

    def __repr__(self):
        return f"Literal({self.val.item()!r}:{dtypes.short_name(self.aval.dtype)})"


@dataclass(frozen=True)
class Eqn:
    """One primitive application: ``outputs = prim(*inputs, **params)``; inputs are ``Var``s or ``Literal``s,
    outputs ``Var``s (one per result; a ``multiple_results`` primitive has several).

    Example::

        Eqn(add_p, (x, Literal(1.0, f32)), (y,), {})      # prints as  y:f32[3] = add x 1.0:f32
    """
    prim: Primitive
    inputs: tuple
    outputs: tuple
    params: dict = field(hash=False)


@dataclass(eq=False, repr=False)
class Program:
    """A straight-line program (like a jaxpr): ``constvars`` and ``invars`` in, ``eqns`` in order, ``outvars``
    out (each a ``Var`` of some equation or input, or a ``Literal``). Compared and hashed by identity;
    ``str()`` gives the text.

    Example::

        >>> print(fl.make_ir(lambda x: fnp.sin(x) * 2.0)(1.0).program)
        { lambda ; a:f32[]. let
            b:f32[] = sin a
            c:f32[] = mul b 2.0:f32
          in (c,) }
    """
    constvars: list[Var]
    invars: list[Var]
    eqns: list[Eqn]
    outvars: list[Any]

    def __str__(self) -> str:
        return pretty(self)

    __repr__ = __str__

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])


class ClosedProgram:
    """A program with the values of its constants: what call primitives (``jit``) carry as a parameter.

    Hashed by identity; ``cache`` holds what transforms and the compiler derive from it (jvp, transpose,
    batched programs, compiled executables), so re-deriving them is free.
    """
    __slots__ = ("program", "consts", "cache", "__weakref__")

    def __init__(self, program: Program, consts: list):
        if len(consts) != len(program.constvars):
            raise ValueError(f"ClosedProgram: {len(program.constvars)} constvars but {len(consts)} consts")
        self.program, self.consts, self.cache = program, list(consts), {}

    in_avals = property(lambda self: self.program.in_avals)
    out_avals = property(lambda self: self.program.out_avals)

    def __str__(self):
        return pretty(self.program)

    __repr__ = __str__


def _names():
    """a, b, ..., z, aa, ab, ..."""
    for length in itertools.count(1):
        yield from map("".join, itertools.product(string.ascii_lowercase, repeat=length))


def _is_program(v) -> bool:
    return isinstance(v, (Program, ClosedProgram))


def sub_programs(params: dict) -> list:
    """The (closed) programs among an equation's params: a call's program, a loop's body, a cond's branches."""
    return [p for v in params.values() for p in (v if isinstance(v, tuple) else (v,)) if _is_program(p)]


def _fmt_param(v, names, indent: str) -> str:
    if _is_program(v):
        return _pretty(getattr(v, "program", v), names, indent)
    if isinstance(v, tuple) and v and all(map(_is_program, v)):
        inner = indent + "  "
        return "(\n" + "".join(f"{inner}{_pretty(getattr(x, 'program', x), names, inner)}\n" for x in v) + indent + ")"
    if isinstance(v, np.dtype):
        return dtypes.short_name(v)
    return repr(v) if not hasattr(v, "str") else str(v)


def pretty(p: Program) -> str:
    """Stable text for a program: variables are renamed a, b, c, ... in order of appearance; the sub-programs of
    higher-order primitives (a scan's body, a cond's branches) are printed indented inside their equation, their
    variables named on from the outer ones, as in a jaxpr."""
    return _pretty(p, defaultdict(_names().__next__), "")


def _pretty(p: Program, names: dict, indent: str) -> str:
    def name(v):
        if isinstance(v, Literal):
            return f"{v.val.item()!r}:{dtypes.short_name(v.aval.dtype)}"
        return names[v.id]

    def decl(vs):
        return " ".join(f"{name(v)}:{v.aval.str_short()}" for v in vs)

    lines = [f"{{ lambda {decl(p.constvars)}; {decl(p.invars)}. let"]
    for e in p.eqns:
        outs = decl(e.outputs)
        nested = any(_is_program(v) or isinstance(v, tuple) and v and all(map(_is_program, v))
                     for v in e.params.values())
        if nested:      # one parameter a line, sub-programs indented below the equation
            inner = indent + "      "
            params = "".join(f"\n{inner}{k}={_fmt_param(v, names, inner)}" for k, v in sorted(e.params.items()))
            params = f"[{params}\n{indent}    ]"
        else:
            params = ", ".join(f"{k}={_fmt_param(v, names, indent)}" for k, v in sorted(e.params.items()))
            params = f"[{params}]" if params else ""
        lines.append(f"{indent}    {outs} = {e.prim.name}{params} {' '.join(name(v) for v in e.inputs)}")
    lines.append(f"{indent}  in ({', '.join(name(v) for v in p.outvars)}{',' if len(p.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


def eval_program(program: Program, consts, args) -> list:
    """Evaluate a program by binding each equation (so it runs under whatever transforms are active)."""
    env: dict[int, Any] = {v.id: x for vs, xs in ((program.constvars, consts), (program.invars, args))
                           for v, x in zip(vs, xs)}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v.id]

    for e in program.eqns:
        outs = bind(e.prim, *[read(v) for v in e.inputs], **e.params)
        env.update((v.id, x) for v, x in zip(e.outputs, outs if e.prim.multiple_results else [outs]))
    return [read(v) for v in program.outvars]


def typecheck(program: Program) -> None:
    """Check that every variable is defined before use, once, and that each equation's shape rule gives the
    avals of its outputs (up to weak types). Raises ``TypeError`` naming the equation."""
    defined = {v.id for v in program.constvars} | {v.id for v in program.invars}
    if len(defined) != len(program.constvars) + len(program.invars):
        raise TypeError("typecheck: an input or constant variable is bound twice")

    def check_read(v, where):
        if not isinstance(v, Literal) and v.id not in defined:
            raise TypeError(f"typecheck: {where} reads {v!r} before it is defined")

    for i, e in enumerate(program.eqns):
        for v in e.inputs:
            check_read(v, f"equation {i} ({e.prim.name})")
        avals = e.prim.abstract_eval(*[v.aval for v in e.inputs], **e.params)
        avals = avals if e.prim.multiple_results else [avals]
        if len(avals) != len(e.outputs):
            raise TypeError(f"typecheck: equation {i} ({e.prim.name}) has {len(e.outputs)} outputs, its rule "
                            f"gives {len(avals)}")
        for a, v in zip(avals, e.outputs):
            if a.shape != v.aval.shape or a.dtype != v.aval.dtype:
                raise TypeError(f"typecheck: equation {i} ({e.prim.name}) output is {v.aval.str_short()} but its "
                                f"rule gives {a.str_short()}")
            if v.id in defined:
                raise TypeError(f"typecheck: equation {i} ({e.prim.name}) rebinds {v!r}")
            defined.add(v.id)
    for v in program.outvars:
        check_read(v, "the output list")
