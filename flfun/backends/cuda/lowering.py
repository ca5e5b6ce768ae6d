"""CUDA C lowering for fused kernels: every fusible primitive's C expression, registered as its ``"cuda"``
lowering (``flfun.core.register_lowering``), the reductions' ``"cuda_reduce"`` epilogue rules, and
``kernel_source(group)``, the C code of one ``flfun.compiler.fusion.FusionGroup`` that ``kernels.py`` compiles.

A ``"cuda"`` rule is ``rule(eqn, args) -> C expression | None``: ``args`` are the C expressions of the inputs and
``None`` means "not these dtypes or parameters". A ``"cuda_reduce"`` rule is ``rule(eqn) -> (combine, identity) |
None``: the C expression combining partial results ``a`` and ``b``, and the identity as a C literal.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flfun import primitives
from flfun.backends.xp.reduce import reduction_identity
from flfun.compiler.fusion import FusionGroup
from flfun.core import register_lowering
from flfun.ir import Eqn, Literal

TARGET, REDUCE_TARGET = "cuda", "cuda_reduce"
C_TYPES = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
           "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
           "uint64": "unsigned long long", "float32": "float", "float64": "double"}


# --------------------------------------------------------------------------------------------- C expressions
def c_literal(val, dtype) -> str:
    """``val`` as an exact C constant of ``dtype`` (floats by their bit pattern, so nan, inf and -0.0 survive)."""
    dtype = np.dtype(dtype)
    v = np.asarray(val, dtype)[()]
    if dtype.kind == "f":
        if dtype == np.float32:
            return f"__int_as_float({struct.unpack('<i', struct.pack('<f', float(v)))[0]})"
        return f"__longlong_as_double({struct.unpack('<q', struct.pack('<d', float(v)))[0]}LL)"
    if dtype.kind == "b":
        return "true" if v else "false"
    suffix = {1: "", 2: "", 4: "", 8: "LL"}[dtype.itemsize] + ("U" if dtype.kind == "u" else "")
    if dtype.kind == "i" and int(v) == np.iinfo(dtype).min:      # -2**63 has no literal form
        return f"(({C_TYPES[dtype.name]})({int(v) + 1}{suffix} - 1))"
    return f"(({C_TYPES[dtype.name]}){int(v)}{suffix})"


_UNARY_FLOAT = ("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "asin", "acos", "atan", "sinh",
                "cosh", "asinh", "acosh", "atanh", "erf", "floor", "ceil")
# C templates of the simple equations, keyed by the input dtype kinds each accepts: ``{x}`` and ``{y}`` are the
# operands, ``{ct}`` the output's C type and ``{f}`` the float32 suffix of C math functions ("" for double)
_TEMPLATES: dict[str, dict[str, str]] = {
    **{name: {"f": name + "{f}({x})"} for name in _UNARY_FLOAT},
    "round": {"f": "rint{f}({x})"},
    "stop_gradient": {"biuf": "{x}"}, "broadcast_in_dim": {"biuf": "{x}"},
    "neg": {"fi": "(({ct})(-({x})))"},
    "abs": {"f": "fabs{f}({x})", "i": "(({x}) < 0 ? ({ct})(-({x})) : ({x}))"},
    "sign": {"f": "(isnan({x}) ? ({x}) : ({ct})((({x}) > 0) - (({x}) < 0)))",
             "i": "(({ct})((({x}) > 0) - (({x}) < 0)))"},
    "rsqrt": {"f": "(({ct})1 / sqrt{f}({x}))"},
    "logistic": {"f": "(({x}) >= 0 ? ({ct})1 / (({ct})1 + exp{f}(-({x}))) : exp{f}({x}) / (({ct})1 + exp{f}({x})))"},
    "is_finite": {"f": "isfinite({x})"}, "signbit": {"f": "signbit({x})"},
    "not": {"b": "(!({x}))", "iu": "(({ct})(~({x})))"},
    "add": {"fiu": "(({ct})(({x}) + ({y})))"}, "sub": {"fiu": "(({ct})(({x}) - ({y})))"},
    "mul": {"fiu": "(({ct})(({x}) * ({y})))"}, "div": {"f": "(({x}) / ({y}))"},
    "pow": {"f": "pow{f}({x}, {y})"}, "atan2": {"f": "atan2{f}({x}, {y})"}, "rem": {"f": "fmod{f}({x}, {y})"},
    "eq": {"biuf": "(({x}) == ({y}))"}, "ne": {"biuf": "(({x}) != ({y}))"}, "lt": {"biuf": "(({x}) < ({y}))"},
    "le": {"biuf": "(({x}) <= ({y}))"}, "gt": {"biuf": "(({x}) > ({y}))"}, "ge": {"biuf": "(({x}) >= ({y}))"},
    "and": {"b": "(({x}) && ({y}))", "iu": "(({ct})(({x}) & ({y})))"},
    "or": {"b": "(({x}) || ({y}))", "iu": "(({ct})(({x}) | ({y})))"},
    "xor": {"b": "(({x}) != ({y}))", "iu": "(({ct})(({x}) ^ ({y})))"},
}


def _extremum(a: str, b: str, dt, biggest: bool) -> str:
    """numpy's maximum/minimum: NaN if either operand is NaN, the second operand if they compare equal (so
    ``max(0.0, -0.0)`` is ``-0.0``)."""
    op = ">" if biggest else "<"
    if dt.kind == "f":
        return f"((({a}) {op} ({b}) || isnan({a})) ? ({a}) : ({b}))"
    return f"((({a}) {op} ({b})) ? ({a}) : ({b}))"


def _template(table: dict[str, str]) -> Callable:
    """A rule filling the first template of ``table`` (input dtype kinds -> template) that fits the inputs."""
    def rule(e: Eqn, args: list[str]) -> str | None:
        out = e.outputs[0].aval.dtype
        kind = e.inputs[0].aval.dtype.kind if e.inputs else out.kind
        template = next((t for kinds, t in table.items() if kind in kinds), None)
        if template is None:
            return None
        return template.format(x=args[0] if args else None, y=args[1] if len(args) > 1 else None,
                               ct=C_TYPES[out.name], f="f" if out == np.float32 else "")
    return rule


def _integer_pow(e: Eqn, args: list[str]) -> str | None:
    y, x, ct = e.params["y"], args[0], C_TYPES[e.outputs[0].aval.dtype.name]
    if abs(y) > 16:
        return None
    prod = " * ".join([f"({x})"] * abs(y)) if y else f"({ct})1"
    return f"(({ct})({prod}))" if y >= 0 else f"(({ct})1 / ({prod}))"


def _convert(e: Eqn, args: list[str]) -> str:
    out = e.outputs[0].aval.dtype
    return f"(({args[0]}) != 0)" if out.kind == "b" else f"(({C_TYPES[out.name]})({args[0]}))"


def _select_n(e: Eqn, args: list[str]) -> str:
    x, cases = args[0], args[1:]
    if e.inputs[0].aval.dtype.kind == "b":
        return f"(({x}) ? ({cases[1]}) : ({cases[0]}))" if len(cases) == 2 else cases[0]
    expr = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        expr = f"(({x}) == {k} ? ({cases[k]}) : {expr})"
    return expr


def _clamp(e: Eqn, args: list[str]) -> str:
    out = e.outputs[0].aval.dtype
    return _extremum(_extremum(args[1], args[0], out, True), args[2], out, False)


def _checked(rule: Callable) -> Callable:
    """``rule`` for single-output equations whose dtypes all have a C type (else ``None``)."""
    def lowering(e: Eqn, args: list[str]) -> str | None:
        if e.prim.multiple_results or len(e.outputs) != 1 or any(
                v.aval.dtype.name not in C_TYPES for v in (*e.inputs, e.outputs[0])):
            return None
        return rule(e, args)
    return lowering


def _reduce_rule(name: str) -> Callable:
    def rule(e: Eqn) -> tuple[str, str] | None:
        dt = e.outputs[0].aval.dtype
        if dt.name not in C_TYPES:
            return None
        if name == "reduce_sum":
            return "a + b", c_literal(0, dt)
        big = name == "reduce_max"
        return _extremum("a", "b", dt, big), c_literal(reduction_identity(dt, not big), dt)
    return rule


RULES: dict[str, Callable] = {
    **{name: _template(table) for name, table in _TEMPLATES.items()}, "integer_pow": _integer_pow,
    "convert_element_type": _convert, "select_n": _select_n, "clamp": _clamp,
    "max": lambda e, args: _extremum(args[0], args[1], e.inputs[0].aval.dtype, True),
    "min": lambda e, args: _extremum(args[0], args[1], e.inputs[0].aval.dtype, False),
}
for _name, _rule in RULES.items():
    register_lowering(primitives.get(_name), TARGET, _checked(_rule))
for _name in ("reduce_sum", "reduce_max", "reduce_min"):
    register_lowering(primitives.get(_name), REDUCE_TARGET, _reduce_rule(_name))


def c_expression(e: Eqn, args: list[str]) -> str | None:
    """The C expression computing ``e``'s single output from the C expressions ``args`` of its inputs (its
    primitive's ``"cuda"`` lowering), or ``None`` if fused kernels do not support this equation."""
    rule = e.prim.lowerings.get(TARGET)
    return None if rule is None else rule(e, args)


# ---------------------------------------------------------------------------------------------- kernel source
@dataclass
class KernelSource:
    """C code of one fused group: ``in_params`` / ``out_params`` in cupy's ``"float32 in0, bool in1"`` form, the
    per-element ``body`` (reads ``in<k>``, writes ``out<j>``), and for a reduction group ``map_expr`` (a call of the
    ``preamble``'s device function), ``reduce_expr``, ``identity`` and ``reduce_type`` (a C type)."""
    name: str
    in_params: str
    out_params: str
    body: str
    preamble: str = ""
    map_expr: str = ""
    reduce_expr: str = ""
    identity: str = ""
    reduce_type: str = ""


def kernel_source(group: FusionGroup) -> KernelSource:
    """C code for ``group``: an elementwise body, or for a reduction group a preamble function mapping one
    element and the reduction's expressions."""
    bslots = set(group.slot_of.values())
    names: dict[int, str] = {v.id: f"in{k}" for k, v in enumerate(group.inputs) if k not in bslots}
    lines = []

    def arg(v) -> str:
        return c_literal(v.val, v.aval.dtype) if type(v) is Literal else names[v.id]

    for t, e in enumerate(group.eqns):
        if t in group.slot_of:
            names[e.outputs[0].id] = f"in{group.slot_of[t]}"
            continue
        expr = c_expression(e, [arg(v) for v in e.inputs])
        if expr is None:
            raise ValueError(f"kernel_source: {e.prim.name} cannot be fused")
        v = e.outputs[0]
        names[v.id] = f"t{t}"
        lines.append(f"const {C_TYPES[v.aval.dtype.name]} t{t} = {expr};")
    in_params = ", ".join(f"{v.aval.dtype.name} in{k}" for k, v in enumerate(group.inputs))
    out_params = ", ".join(f"{v.aval.dtype.name} out{j}" for j, v in enumerate(group.outputs))
    if group.reduction is None:
        body = "\n".join(lines + [f"out{j} = {names[v.id]};" for j, v in enumerate(group.outputs)])
        return KernelSource(group.name, in_params, out_params, body)
    r, dt = group.reduction, group.reduction.outputs[0].aval.dtype
    ct = C_TYPES[dt.name]
    fargs = ", ".join(f"{C_TYPES[v.aval.dtype.name]} in{k}" for k, v in enumerate(group.inputs))
    preamble = (f"__device__ inline {ct} {group.name}_map({fargs}) {{\n  " + "\n  ".join(lines)
                + f"\n  return {names[r.inputs[0].id]};\n}}\n")
    call = f"{group.name}_map({', '.join(f'in{k}' for k in range(len(group.inputs)))})"
    red, ident = r.prim.lowerings[REDUCE_TARGET](r)
    return KernelSource(group.name, in_params, out_params, "out0 = a", preamble, call, red, ident, ct)


__all__ = ["C_TYPES", "KernelSource", "REDUCE_TARGET", "RULES", "TARGET", "c_expression", "c_literal",
           "kernel_source"]
