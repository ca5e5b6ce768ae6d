"""The ``jit`` call primitive: a closed program applied to operands, with jvp, transpose and batching rules.

A jitted function called under another transform (or inside another ``jit``) binds ``jit_p``. Its rules
transform the program itself (jvp split into a primal and a linear tangent program by partial evaluation,
transposition by ``backward_pass``, batching by ``vmap``) and bind ``jit_p`` again, so jit composes with every
transform in any order; derived programs and executables are cached on the ``ClosedProgram``.
"""
from __future__ import annotations

from typing import Callable

from flfun import core
from flfun.compiler.passes import partial_eval
from flfun.compiler.pipeline import compile_program
from flfun.core import Primitive, get_aval
from flfun.ir import ClosedProgram
from flfun.primitives.rules import UndefinedPrimal, Zero, is_zero, moveaxis, not_mapped
from flfun.transforms.subprogram import (batch_program, close_program, host_impls, jvp_program, kept,  # noqa: F401
                                         transpose_program, with_zeros)
from flfun.util import once


# ------------------------------------------------------------------------------------------ call primitive
jit_p = Primitive("jit", multiple_results=True)


@jit_p.def_abstract_eval
def _jit_abstract_eval(*avals, closed, name, donated):
    return list(closed.out_avals)


def _jvp_split(closed: ClosedProgram, nz: tuple):
    """jvp of the program, split into a primal program (outputs + residuals) and a linear tangent program."""
    jclosed, out_nz = jvp_program(closed, nz)
    n, num_out = len(closed.in_avals), len(closed.out_avals)
    known, unknown, res_invars = partial_eval(jclosed.program, [True] * n + [False] * sum(nz), num_out)
    return (ClosedProgram(known, jclosed.consts), ClosedProgram(unknown, jclosed.consts), res_invars, num_out,
            tuple(out_nz))


class CallSite:
    """One bound call of ``jit_p`` as the call rules below see it: they derive programs from ``closed`` (cached on
    it) and bind the primitive on them. pmap's subclass gives operands and results a leading device axis where
    their ``in_axes``/``out_axes`` entry is not None (for jit every entry is None)."""
    residual_axis = None        # of the residuals a jvp's primal call passes to its tangent call

    def __init__(self, closed: ClosedProgram, name: str, donated: tuple):     # derived calls donate nothing
        self.closed, self.name = closed, name
        self.in_axes, self.out_axes = (None,) * len(closed.in_avals), (None,) * len(closed.out_avals)

    def derive(self, key: tuple, make: Callable, *args):
        """``make(closed, *args)``, cached on ``closed`` under ``key``."""
        return once(self.closed.cache, key, lambda: make(self.closed, *args))

    def bind(self, args: list, closed: ClosedProgram, name: str, in_axes: tuple, out_axes: tuple) -> list:
        return jit_p.bind(*args, closed=closed, name=name, donated=())

    def adjust_ct(self, i: int, ct):
        """Output ``i``'s cotangent as the transposed program uses it."""
        return ct

    def adjust_cts_in(self, cts: list, undef: tuple) -> list:
        """The cotangents of the linear inputs (``undef``) as the transposed program returns them."""
        return cts


def call_jvp(site: CallSite, primals, tangents):
    """Bind the primal program (outputs + residuals), then the linear tangent program on the nonzero tangents."""
    nz = tuple(not is_zero(t) for t in tangents)
    known, lin, res_invars, num_out, out_nz = site.derive(("jvp", nz), _jvp_split, nz)
    res_axes = (site.residual_axis,) * (len(known.out_avals) - num_out)
    outs = site.bind(primals, known, site.name, site.in_axes, site.out_axes + res_axes)
    residuals = [primals[i] for i in res_invars] + list(outs[num_out:])
    lin_in_axes = tuple(site.in_axes[i] for i in res_invars) + res_axes + tuple(kept(site.in_axes, nz))
    touts = site.bind(residuals + kept(tangents, nz), lin, f"jvp({site.name})", lin_in_axes,
                      tuple(kept(site.out_axes, out_nz))) if any(out_nz) else []
    return outs[:num_out], with_zeros(out_nz, touts, outs)


def call_transpose(site: CallSite, cts, args):
    """Bind the transposed program on the known operands and the nonzero cotangents."""
    undef = tuple(type(a) is UndefinedPrimal for a in args)
    known = [not u for u in undef]
    ct_nz = tuple(not is_zero(c) for c in cts)
    tclosed, in_nz = site.derive(("transpose", undef, ct_nz), transpose_program, undef, ct_nz, site)
    t_in_axes = tuple(kept(site.in_axes, known) + kept(site.out_axes, ct_nz))
    t_out_axes = tuple(kept(kept(site.in_axes, undef), in_nz))
    outs = iter(site.bind(kept(args, known) + kept(cts, ct_nz), tclosed, f"transpose({site.name})", t_in_axes,
                          t_out_axes) if any(in_nz) else [])
    nzs = iter(in_nz)
    return [None if not u else (next(outs) if next(nzs) else Zero(a.aval)) for a, u in zip(args, undef)]


def call_batch(site: CallSite, axis, args, dims):
    """Operands and results with a device axis are batched along axis 1 (axis 0 within a device)."""
    moved = [d is not not_mapped and ax is not None for d, ax in zip(dims, site.in_axes)]
    args = [moveaxis(a, d, 1) if m else a for a, d, m in zip(args, dims, moved)]
    dims = tuple(0 if m else d for d, m in zip(dims, moved))
    avals = [get_aval(a) if ax is None else get_aval(a).update(shape=get_aval(a).shape[1:])
             for a, ax in zip(args, site.in_axes)]
    bclosed, mapped = site.derive(("batch", axis.size, axis.name, dims), batch_program, axis, dims, None, avals)
    outs = site.bind(args, bclosed, f"vmap({site.name})", site.in_axes, site.out_axes)
    return outs, [not_mapped if not m else (0 if ax is None else 1) for m, ax in zip(mapped, site.out_axes)]


def def_call_rules(prim: Primitive, site: type[CallSite]):
    """Give the call primitive ``prim`` the rules above; ``site(**params)`` describes one of its bound calls."""
    prim.def_jvp(lambda primals, tangents, **params: call_jvp(site(**params), primals, tangents))
    prim.def_transpose(lambda cts, *args, **params: call_transpose(site(**params), cts, args))
    prim.def_batch(lambda axis, args, dims, **params: call_batch(site(**params), axis, args, dims))


def_call_rules(jit_p, CallSite)


def _jit_impl(backend: str, *vals, closed, name, donated):
    from flfun.backends import get_backend
    dev = core.default_device()
    return compile_program(closed, dev if dev.backend == backend else get_backend(backend).devices[0])(*vals)


host_impls(jit_p, _jit_impl)


__all__ = ["jit_p", "close_program"]
