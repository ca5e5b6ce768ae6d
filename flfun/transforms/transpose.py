"""Transposition: ``vjp = linearize, then transpose the linear program`` (as in JAX).

The backward pass walks the linear program from the end, calling each primitive's transpose rule with the
output cotangent and ``UndefinedPrimal`` markers for its linear inputs. Cotangents are ``Zero`` until a rule
produces one, so unused branches cost nothing.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flfun.core import bind, missing_rule
from flfun.ir import Literal, Program, Var
from flfun.primitives.rules import UndefinedPrimal, Zero, is_zero
from flfun.primitives.elementwise import add
from flfun.transforms.jvp import linearize_flat


def backward_pass(program: Program, consts: list, cts_out: Sequence) -> list:
    """Transpose a linear program: cotangents of the outputs -> cotangents of the inputs (``Zero`` if none)."""
    known = dict(zip(program.constvars, consts))
    linear = set(program.invars)           # (a Literal is never linear)
    read = lambda v: v.val if isinstance(v, Literal) else known[v]
    for e in program.eqns:       # an equation is linear if any input is; its outputs are then linear too
        if any(v in linear for v in e.inputs):
            linear.update(e.outputs)
        else:
            outs = bind(e.prim, *map(read, e.inputs), **e.params)
            known.update(zip(e.outputs, outs if e.prim.multiple_results else [outs]))
    ct_env: dict[Var, Any] = {}

    def write(v, ct):
        if v in linear and ct is not None and not is_zero(ct):
            ct_env[v] = ct if v not in ct_env else add(ct_env[v], ct)

    for v, ct in zip(program.outvars, cts_out):
        write(v, ct)
    for e in reversed(program.eqns):
        cts = [ct_env.pop(v, Zero(v.aval)) for v in e.outputs]
        if all(is_zero(c) for c in cts):    # also every non-linear equation: nothing was written to it
            continue
        if e.prim.transpose is None:
            raise missing_rule("transpose", e.prim)
        args = [UndefinedPrimal(v.aval) if v in linear else read(v) for v in e.inputs]
        cts_in = e.prim.transpose(cts if e.prim.multiple_results else cts[0], *args, **e.params)
        for v, ct in zip(e.inputs, cts_in):
            write(v, ct)
    return [ct_env.pop(v, Zero(v.aval)) for v in program.invars]


def vjp_flat_linearized(f: Callable, primals: list):
    """``(outputs, f_vjp)`` for a flat function by linearize + transpose (works under any transform)."""
    outs, program, consts, zero_avals = linearize_flat(f, primals)

    def f_vjp(cts: list) -> list:
        return backward_pass(program, consts, [ct for ct, z in zip(cts, zero_avals) if z is None])
    return outs, f_vjp


__all__ = ["backward_pass", "vjp_flat_linearized"]
