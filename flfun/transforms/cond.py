"""The branch primitive ``cond``: ``branches[index](*operands)`` for an int32 scalar ``index`` (clamped).

Its jvp applies the jvp of every branch, split by partial evaluation into a primal ``cond`` that also returns
each branch's residuals (in slots of their own, zeros for the branches not taken) and a linear tangent ``cond``;
the tangent cond transposes branch by branch. A batched index becomes a select over every branch's result.
"""
from __future__ import annotations

import functools

from flfun.core import Primitive, register_lowering, short
from flfun.ir import eval_program
from flfun.compiler.bodies import lower_cond
from flfun.compiler.executor import PLANNED
from flfun.compiler.passes import partial_eval
from flfun.primitives.base import instantiate, moveaxis_to_front
from flfun.primitives.common import Zero, is_undefined, is_zero, not_mapped, tangent_aval
from flfun.primitives.elementwise import select_n
from flfun.primitives.shape import broadcast_in_dim
from flfun.transforms.loops import float_nz
from flfun.transforms.subprogram import (batch_program, check_types, fresh, host_impls, jvp_program, kept, run_closed,
                                         strong, trace_closed, transpose_program, with_zeros)
from flfun import dtypes

cond_p = Primitive("cond", multiple_results=True)


@cond_p.def_abstract_eval
def _cond_abstract_eval(index, *avals, branches):
    if index.shape != () or index.dtype != dtypes.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got {short(index)}")
    for i, b in enumerate(branches):
        check_types("cond", "operand", avals, f"branch {i} input", b.in_avals)
        check_types("cond", f"branch {i} output", b.out_avals, "branch 0 output", branches[0].out_avals)
    return [strong(a) for a in branches[0].out_avals]


def _cond_impl(backend, index, *vals, branches):
    i = min(max(int(index), 0), len(branches) - 1)
    return fresh(run_closed(branches[i], backend, list(vals)), vals)


host_impls(cond_p, _cond_impl)
register_lowering(cond_p, PLANNED, lower_cond)      # under jit: each branch compiled once, into the planned buffers


def _cond_jvp(primals, tangents, *, branches):
    index, ops, t_ops = primals[0], list(primals[1:]), list(tangents[1:])
    nz = float_nz(t_ops, branches[0].in_avals)
    out_nz = [any(z) for z in zip(*[jvp_program(b, nz)[1] for b in branches])]
    jbs = [jvp_program(b, nz, out_nz)[0] for b in branches]
    n, nt, n_out = len(ops), sum(nz), len(branches[0].out_avals)
    splits = [partial_eval(jb.program, [True] * n + [False] * nt, n_out) for jb in jbs]
    # residual slots: branch i's known inputs it needs, then what it computes
    res_avals = [[jb.program.invars[p].aval for p in pos] + [v.aval for v in known.outvars[n_out:]]
                 for jb, (known, _, pos) in zip(jbs, splits)]
    slots = [strong(a) for r in res_avals for a in r]
    starts = [sum(map(len, res_avals[:i])) for i in range(len(jbs))]

    def known_fn(i, *xs):
        jb, (known, _, pos) = jbs[i], splits[i]
        outs = eval_program(known, jb.consts, xs)
        mine = [xs[p] for p in pos] + outs[n_out:]
        res = [instantiate(Zero(a)) for a in slots]
        res[starts[i]:starts[i] + len(mine)] = mine
        return outs[:n_out] + res

    def tangent_fn(i, *xs):
        jb, (_, unknown, _) = jbs[i], splits[i]
        mine = xs[starts[i]:starts[i] + len(res_avals[i])]
        return eval_program(unknown, jb.consts, list(mine) + list(xs[len(slots):]))
    in_avals = branches[0].in_avals
    kbs = tuple(trace_closed(functools.partial(known_fn, i), in_avals) for i in range(len(jbs)))
    outs = cond_p.bind(index, *ops, branches=kbs)
    t_avals = slots + [tangent_aval(a) for a in kept(in_avals, nz)]
    tbs = tuple(trace_closed(functools.partial(tangent_fn, i), t_avals) for i in range(len(jbs)))
    touts = cond_p.bind(index, *outs[n_out:], *kept(t_ops, nz), branches=tbs) if any(out_nz) else []
    return outs[:n_out], with_zeros(out_nz, touts, outs)


cond_p.def_jvp(_cond_jvp)


@cond_p.def_transpose
def _cond_transpose(cts, index, *ops, branches):
    lin = [is_undefined(a) for a in ops]
    ct_nz = [not is_zero(c) for c in cts]
    tbs = tuple(transpose_program(b, lin, ct_nz) for b in branches)
    outs = iter(cond_p.bind(index, *kept(ops, [not k for k in lin]), *kept(cts, ct_nz), branches=tbs))
    return [None] + [next(outs) if k else None for k in lin]


def _cond_batch(axis, args, dims, *, branches):
    index, ops, d_i, d_ops = args[0], list(args[1:]), dims[0], list(dims[1:])
    if d_i is not_mapped:
        mapped = [any(m) for m in zip(*[batch_program(b, axis, d_ops)[1] for b in branches])]
        bbs = tuple(batch_program(b, axis, d_ops, mapped)[0] for b in branches)
        return cond_p.bind(index, *ops, branches=bbs), [0 if m else not_mapped for m in mapped]
    from flfun.transforms.vmap import vmap_flat
    index = moveaxis_to_front(index, d_i, axis.size)
    results = []
    for b in branches:
        vals, bdims = vmap_flat(lambda *a, b=b: eval_program(b.program, b.consts, a), axis, ops, d_ops)
        results.append([moveaxis_to_front(v, d, axis.size) for v, d in zip(vals, bdims)])
    outs = [select_n(broadcast_in_dim(index, cases[0].shape, (0,)), *cases) for cases in zip(*results)]
    return outs, [0] * len(outs)


cond_p.def_batch(_cond_batch)

__all__ = ["cond_p"]
