"""flfun's IR: a ``Program`` of equations over variables, printed like a jaxpr.

``invars`` are the inputs, ``constvars`` the captured constants (their values travel beside the program),
each ``Eqn`` applies one primitive, and ``outvars`` are the results (a ``Literal`` may stand for a constant).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

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
    """A Python scalar constant inlined in an equation."""
    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val, self.aval = val, aval

    def __repr__(self):
        return f"Literal({self.val})"


@dataclass(frozen=True)
class Eqn:
    prim: Primitive
    inputs: tuple
    outputs: tuple
    params: dict = field(hash=False)


@dataclass
class Program:
    constvars: list[Var]
    invars: list[Var]
    eqns: list[Eqn]
    outvars: list[Any]

    def __str__(self) -> str:
        return pretty(self)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]


def _names():
    for n in itertools.count():
        s, n2 = "", n
        while True:
            s = chr(ord("a") + n2 % 26) + s
            n2 = n2 // 26 - 1
            if n2 < 0:
                break
        yield s


def _fmt_param(v) -> str:
    if isinstance(v, Program):
        return "{ " + pretty(v).replace("\n", "\n    ") + " }"
    if hasattr(v, "name") and not isinstance(v, str) and not isinstance(v, type):
        return str(getattr(v, "name"))
    return repr(v) if not hasattr(v, "str") else str(v)


def pretty(p: Program) -> str:
    """Stable text for a program: variables are renamed a, b, c, ... in order of appearance."""
    gen = _names()
    names: dict[int, str] = {}

    def name(v):
        if isinstance(v, Literal):
            return repr(v.val)
        if v.id not in names:
            names[v.id] = next(gen)
        return names[v.id]

    def decl(v):
        return f"{name(v)}:{v.aval.str_short()}"

    consts = " ".join(decl(v) for v in p.constvars)
    ins = " ".join(decl(v) for v in p.invars)
    lines = [f"{{ lambda {consts}; {ins}. let"]
    for e in p.eqns:
        outs = " ".join(decl(v) for v in e.outputs)
        params = ", ".join(f"{k}={_fmt_param(v)}" for k, v in sorted(e.params.items()))
        params = f"[{params}]" if params else ""
        lines.append(f"    {outs} = {e.prim.name}{params} {' '.join(name(v) for v in e.inputs)}")
    lines.append(f"  in ({', '.join(name(v) for v in p.outvars)}{',' if len(p.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


def eval_program(program: Program, consts, args) -> list:
    """Evaluate a program by binding each equation (so it runs under whatever transforms are active)."""
    env: dict[int, Any] = {}
    for v, x in zip(program.constvars, consts):
        env[v.id] = x
    for v, x in zip(program.invars, args):
        env[v.id] = x

    def read(v):
        return v.val if isinstance(v, Literal) else env[v.id]

    for e in program.eqns:
        outs = bind(e.prim, *[read(v) for v in e.inputs], **e.params)
        if not e.prim.multiple_results:
            outs = [outs]
        for v, x in zip(e.outputs, outs):
            env[v.id] = x
    return [read(v) for v in program.outvars]
