"""Elementwise fusion: chains of elementwise equations of one loop shape become one kernel.

``fuse_elementwise(program)`` groups elementwise (and ``broadcast_in_dim``) equations whose outputs share a shape,
plus an optional reduction that is the group's only consumer (an epilogue), and replaces each group by one
equation of a ``FusedPrimitive``. Its numpy impl evaluates the members in order (the reference semantics); on
cupy, ``flfun/backends/cuda/kernels.py`` turns ``kernel_source(group)`` (C code) into one generated kernel.
"""
from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from flfun.backends.xp import finish
from flfun.backends.xp.reduce import reduction_identity
from flfun.core import _PRIMITIVES, Primitive
from flfun.ir import Eqn, Literal, Program, Var

C_TYPES = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
           "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
           "uint64": "unsigned long long", "float32": "float", "float64": "double"}
REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min")
_ids = itertools.count()


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
                "cosh", "erf", "floor", "ceil")
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
    "is_finite": {"f": "isfinite({x})"},
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
    """numpy's maximum/minimum: NaN if either operand is NaN."""
    op = ">=" if biggest else "<="
    if dt.kind == "f":
        return f"((({a}) {op} ({b}) || isnan({a})) ? ({a}) : ({b}))"
    return f"((({a}) {op} ({b})) ? ({a}) : ({b}))"


def c_expression(e: Eqn, args: list[str]) -> str | None:
    """The C expression computing ``e``'s single output from the C expressions ``args`` of its inputs, or ``None``
    if fused kernels do not support this equation (its primitive, dtypes or parameters)."""
    name, p = e.prim.name, e.params
    if e.prim.multiple_results or len(e.outputs) != 1:
        return None
    out = e.outputs[0].aval.dtype
    dts = [v.aval.dtype for v in e.inputs]
    if out.name not in C_TYPES or any(d.name not in C_TYPES for d in dts):
        return None
    ct = C_TYPES[out.name]
    kind = dts[0].kind if dts else out.kind
    x = args[0] if args else None
    if name in _TEMPLATES:
        template = next((t for kinds, t in _TEMPLATES[name].items() if kind in kinds), None)
        if template is None:
            return None
        return template.format(x=x, y=args[1] if len(args) > 1 else None, ct=ct, f="f" if out == np.float32 else "")
    if name == "integer_pow":
        y = p["y"]
        if abs(y) > 16:
            return None
        prod = " * ".join([f"({x})"] * abs(y)) if y else f"({ct})1"
        return f"(({ct})({prod}))" if y >= 0 else f"(({ct})1 / ({prod}))"
    if name == "convert_element_type":
        return f"(({x}) != 0)" if out.kind == "b" else f"(({ct})({x}))"
    if name in ("max", "min"):
        return _extremum(x, args[1], dts[0], name == "max")
    if name == "select_n":
        cases = args[1:]
        if dts[0].kind == "b":
            return f"(({x}) ? ({cases[1]}) : ({cases[0]}))" if len(cases) == 2 else cases[0]
        expr = cases[-1]
        for k in range(len(cases) - 2, -1, -1):
            expr = f"(({x}) == {k} ? ({cases[k]}) : {expr})"
        return expr
    if name == "clamp":
        lo, hi = args[0], args[2]
        return _extremum(_extremum(args[1], lo, out, True), hi, out, False)
    return None


# ---------------------------------------------------------------------------------------------------- groups
@dataclass(eq=False)
class FusionGroup:
    """One fused kernel: ``eqns`` (members in program order) computed per element of ``shape``, reading ``inputs``
    (external variables, viewed with ``in_shapes``, which broadcast numpy-style to ``shape``; literals are inlined)
    and writing ``outputs``. A member ``broadcast_in_dim`` of an external value reads its own input slot
    (``slot_of[member index]``), viewed with size-1 dims inserted. ``reduction`` (optional) reduces the group's
    single value over some axes; its result is then the only output."""
    eqns: list[Eqn]
    inputs: list[Var]
    in_shapes: list[tuple]
    outputs: list[Var]
    shape: tuple
    reduction: Eqn | None = None
    slot_of: dict = field(default_factory=dict)
    id: int = field(default_factory=lambda: next(_ids))
    name: str = ""

    def __post_init__(self):
        ops = "_".join(dict.fromkeys(e.prim.name for e in self.eqns + ([self.reduction] if self.reduction else [])))
        self.name = f"flfun_fused_{self.id}_{ops}"[:60]

    def inplace_operands(self) -> tuple[int, ...]:
        """Operands the (single) output may overwrite: elementwise kernels read element i before writing it."""
        if self.reduction is not None or len(self.outputs) != 1:
            return ()
        o = self.outputs[-1].aval
        return tuple(k for k, (v, s) in enumerate(zip(self.inputs, self.in_shapes))
                     if v.aval.shape == o.shape == s and v.aval.dtype == o.dtype and self.inputs.count(v) == 1)

    def evaluate(self, *args, out=None) -> list:
        """The reference semantics: the members' numpy impls, in order (results copied into ``out``'s buffers
        where given, after every input has been read)."""
        env = {v.id: a for v, a in zip(self.inputs, args)}
        read = lambda v: v.val if type(v) is Literal else env[v.id]
        for e in self.eqns + ([self.reduction] if self.reduction is not None else []):
            env[e.outputs[0].id] = e.prim.impls["numpy"](*[read(v) for v in e.inputs], **e.params)
        return [finish(env[v.id], o) for v, o in itertools.zip_longest(self.outputs, out or ())]

    def __repr__(self):
        return f"FusionGroup({self.name}, {len(self.inputs)} in, {len(self.outputs)} out, shape {self.shape})"


class FusedPrimitive(Primitive):
    """The primitive of one fused group. Internal to compiled programs, so it stays out of the public registry;
    ``impls['numpy']`` is the reference evaluation, a backend adds its kernel (see ``register_kernel_builder``)."""

    def __init__(self, group: FusionGroup):
        super().__init__(group.name, multiple_results=True)
        if _PRIMITIVES.get(group.name) is self:
            del _PRIMITIVES[group.name]
        self.group = group
        self.inplace = group.inplace_operands()
        self.impls["numpy"] = group.evaluate
        self.abstract_eval = lambda *avals: [v.aval for v in group.outputs]
        for backend, build in KERNEL_BUILDERS.items():
            self.impls[backend] = build(group)


KERNEL_BUILDERS: dict[str, Callable[[FusionGroup], Callable]] = {}


def register_kernel_builder(backend: str, build: Callable[[FusionGroup], Callable]) -> None:
    """Make ``build(group) -> impl`` give fused equations their impl on ``backend``.

    Example::

        register_kernel_builder("cupy", lambda group: make_elementwise_kernel(group))
    """
    KERNEL_BUILDERS[backend] = build


def fusible(e: Eqn) -> bool:
    """Whether ``e`` may join a fused group: a single-output elementwise primitive (or a broadcast) that the C
    code generator supports for these dtypes and parameters."""
    return len(e.outputs) == 1 and c_expression(e, [f"a{k}" for k in range(len(e.inputs))]) is not None


def _reduction_ok(e: Eqn) -> bool:
    return e.prim.name in REDUCTIONS and e.outputs[0].aval.dtype.name in C_TYPES and e.outputs[0].aval.size > 0 \
        and e.inputs[0].aval.size > 0 and type(e.inputs[0]) is Var


def find_groups(program: Program, can_fuse: Callable[[Eqn], bool] = fusible, reductions: bool = True,
                min_size: int = 2) -> list[tuple[list[int], int | None]]:
    """Groups of equation indices ``(members, reduction index or None)``; each group runs at the position of its
    last equation. A group stops growing ("seals") once an equation outside it reads one of its values, so
    moving it there never reorders a value after its reader and never makes a cycle."""
    eqns = program.eqns
    parent: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    growing: dict[int, tuple] = {}         # group root -> its loop shape, until the group seals
    produced: dict[int, int] = {}          # var id -> group id (before find)
    readers: dict[int, set] = {}           # group root -> indices of outside equations reading it

    def find(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for i, e in enumerate(eqns):
        gid = None
        if can_fuse(e):
            s = e.outputs[0].aval.shape
            cands = dict.fromkeys(find(produced[v.id]) for v in e.inputs if type(v) is Var and v.id in produced)
            cands = [g for g in cands if growing.get(g) == s]
            if cands:
                gid = cands[0]
                for g in cands[1:]:
                    parent[g] = gid
                    members[gid] += members.pop(g)
                    readers.setdefault(gid, set()).update(readers.pop(g, set()))
            else:
                gid = parent[i] = i
                members[i], growing[i] = [], s
            members[gid].append(i)
        for v in e.inputs:
            if type(v) is Var and v.id in produced:
                g = find(produced[v.id])
                if g != gid:
                    growing.pop(g, None)
                    readers.setdefault(g, set()).add(i)
        if gid is not None:
            for v in e.outputs:
                produced[v.id] = gid
    outs = {v.id for v in program.outvars if type(v) is Var}
    result = []
    for g, ms in members.items():
        red = None
        rd = readers.get(g, ())
        if reductions and len(rd) == 1:
            r, = rd
            read = eqns[r].inputs
            escaping = {v.id for m in ms for v in eqns[m].outputs if v.id in outs or any(u is v for u in read)}
            if _reduction_ok(eqns[r]) and escaping == {eqns[r].inputs[0].id} and not escaping & outs:
                red = r
        if len(ms) >= min_size or red is not None:
            result.append((sorted(ms), red))
    return result


def _expanded(e: Eqn) -> tuple:
    """The operand of ``broadcast_in_dim`` ``e`` viewed at the output's rank (size-1 dims where it broadcasts)."""
    sizes = dict(zip(e.params["broadcast_dimensions"], e.inputs[0].aval.shape))
    return tuple(sizes.get(d, 1) for d in range(len(e.params["shape"])))


def fuse_elementwise(program: Program, can_fuse: Callable[[Eqn], bool] = fusible, reductions: bool = True,
                     min_size: int = 2) -> Program:
    """``program`` with each fusible group replaced by one ``FusedPrimitive`` equation (see ``find_groups``).

    Example::

        fused = fuse_elementwise(program)
        print(fused)          # the chains now read  ``a b = flfun_fused_3_add_gt_select_n c d``
    """
    eqns = program.eqns
    groups = find_groups(program, can_fuse, reductions, min_size)
    if not groups:
        return program
    outs = {v.id for v in program.outvars if type(v) is Var}
    at: dict[int, Eqn] = {}
    skip: set[int] = set()
    for ms, red in groups:
        mset = set(ms)
        defined = {v.id for m in ms for v in eqns[m].outputs}
        slots: dict[int, int] = {}
        inputs, in_shapes, slot_of = [], [], {}
        for t, m in enumerate(ms):
            e = eqns[m]
            if e.prim.name == "broadcast_in_dim" and type(e.inputs[0]) is Var and e.inputs[0].id not in defined:
                slot_of[t] = len(inputs)
                inputs.append(e.inputs[0])
                in_shapes.append(_expanded(e))
                continue
            for v in e.inputs:
                if type(v) is Var and v.id not in defined and v.id not in slots:
                    slots[v.id] = len(inputs)
                    inputs.append(v)
                    in_shapes.append(v.aval.shape)
        if red is not None:
            outputs = list(eqns[red].outputs)
        else:
            used_outside = {v.id for j, e in enumerate(eqns) if j not in mset for v in e.inputs if type(v) is Var}
            outputs = [v for m in ms for v in eqns[m].outputs if v.id in used_outside or v.id in outs]
        group = FusionGroup([eqns[m] for m in ms], inputs, in_shapes, outputs, eqns[ms[0]].outputs[0].aval.shape,
                            eqns[red] if red is not None else None, slot_of)
        pos = red if red is not None else ms[-1]
        at[pos] = Eqn(FusedPrimitive(group), tuple(group.inputs), tuple(outputs), {})
        skip.update(mset)
    new = [at.get(i, e) for i, e in enumerate(eqns) if i in at or i not in skip]
    return Program(list(program.constvars), list(program.invars), new, list(program.outvars))


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
    if r.prim.name == "reduce_sum":
        red, ident = "a + b", c_literal(0, dt)
    else:
        big = r.prim.name == "reduce_max"
        red, ident = _extremum("a", "b", dt, big), c_literal(reduction_identity(dt, not big), dt)
    return KernelSource(group.name, in_params, out_params, "out0 = a", preamble, call, red, ident, ct)


__all__ = ["KERNEL_BUILDERS", "FusedPrimitive", "FusionGroup", "KernelSource", "c_expression", "c_literal",
           "find_groups", "fuse_elementwise", "fusible", "kernel_source", "register_kernel_builder"]
