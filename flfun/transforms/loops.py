"""Loop primitives: ``scan`` (a fixed trip count, reverse-differentiable) and ``while`` (a dynamic one).

``scan_p`` takes ``consts + carry + xs`` and a body ``(consts, carry, x) -> (carry, y)``; it returns the final carry
and the ``ys`` stacked along a new leading axis. Its jvp is split by partial evaluation into a primal scan (which
also returns the residuals, stacked: O(T) memory) and a linear tangent scan; the tangent scan transposes into a
scan running the other way. ``while_p`` takes ``cond_consts + body_consts + carry``; forward mode carries tangents
beside the primal carry, reverse mode is an error (the trip count is not known when tracing), as in JAX.
"""
from __future__ import annotations

from flfun import dtypes
from flfun.core import Primitive, ShapedArray, register_lowering, short
from flfun.ir import ClosedProgram, Program, Var, eval_program
from flfun.compiler.bodies import lower_scan, lower_while
from flfun.compiler.executor import PLANNED
from flfun.compiler.passes import partial_eval
from flfun.primitives.base import instantiate, moveaxis, moveaxis_to_front
from flfun.primitives.common import Zero, is_undefined, is_zero, not_mapped, tangent_aval
from flfun.primitives.elementwise import add, select_n
from flfun.primitives.reduce import reduce_or
from flfun.primitives.shape import broadcast_in_dim
from flfun.transforms.subprogram import (batch_program, check_types, fresh, host_impls, jvp_program, kept, run_closed,
                                         split, strong, trace_closed, transpose_program, with_zeros)


def _xp(backend: str):
    from flfun.backends import get_backend
    return get_backend(backend).xp


def float_nz(tangents, avals) -> list:
    return [not is_zero(t) and dtypes.is_inexact(a.dtype) for t, a in zip(tangents, avals)]


def _fixpoint(derive, flags: list):
    """``derive(flags) -> (program, out_flags)`` for carry ``flags`` (which carries have a tangent, or are batched)
    grown until every carry whose leading out flag is set has its flag set going in; returns both and the flags."""
    while True:
        prog, out = derive(flags)
        grown = [a or b for a, b in zip(flags, out)]
        if grown == flags:
            return prog, out, flags
        flags = grown


# --------------------------------------------------------------------------------------------------- scan
scan_p = Primitive("scan", multiple_results=True)


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals, body, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = split(avals, num_consts, num_carry)
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise TypeError(f"scan: every xs leaf needs a leading axis of length {length}, got {short(x)}")
    ins = consts + carry + [ShapedArray(x.shape[1:], x.dtype) for x in xs]
    check_types("scan", "operand", ins, "body input", body.in_avals)
    check_types("scan", "body carry output", body.out_avals[:num_carry], "carry input", carry)
    return [strong(c) for c in carry] + [ShapedArray((length,) + y.shape, y.dtype)
                                         for y in body.out_avals[num_carry:]]


def _scan_impl(backend, *vals, body, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = split(vals, num_consts, num_carry)
    xp = _xp(backend)
    ys = [xp.empty((length,) + a.shape, a.dtype) for a in body.out_avals[num_carry:]]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = run_closed(body, backend, consts + carry + [x[i] for x in xs])
        carry = outs[:num_carry]
        for buf, y in zip(ys, outs[num_carry:]):
            buf[i] = y
    return fresh(carry, vals) + ys


host_impls(scan_p, _scan_impl)
register_lowering(scan_p, PLANNED, lower_scan)     # under jit: the body compiled once, carries double-buffered


def _scan_jvp(primals, tangents, *, body, num_consts, num_carry, length, reverse, unroll):
    nc, nk, n = num_consts, num_carry, len(primals)
    avals = body.in_avals
    c_nz, k_nz, x_nz = split(float_nz(tangents, avals), nc, nk)
    ny = len(body.out_avals) - nk
    jbody, out_nz, k_nz = _fixpoint(lambda k: jvp_program(body, c_nz + k + x_nz, k + [False] * ny), k_nz)
    nt = sum(c_nz) + sum(k_nz) + sum(x_nz)
    known, unknown, res_pos = partial_eval(jbody.program, [True] * n + [False] * nt, nk + ny)
    n_comp = len(known.outvars) - nk - ny
    res_in = unknown.invars[:len(res_pos)]
    comp_vars = unknown.invars[len(res_pos):len(res_pos) + n_comp]
    t_vars = unknown.invars[len(res_pos) + n_comp:]
    kind = ["c" if p < nc else "k" if p < nc + nk else "x" for p in res_pos]
    # residuals that are carries are stacked by the primal scan; consts and xs are passed as they are
    k_res = [known.invars[p] for p, w in zip(res_pos, kind) if w == "k"]
    kscan = ClosedProgram(Program(known.constvars, known.invars, known.eqns, known.outvars + k_res), jbody.consts)
    outs = scan_p.bind(*primals, body=kscan, num_consts=nc, num_carry=nk, length=length, reverse=reverse,
                       unroll=unroll)
    stacked = outs[nk + ny:]
    tc, tk, tx = split(t_vars, sum(c_nz), sum(k_nz))
    pick = lambda w: [v for v, kw in zip(res_in, kind) if kw == w]
    tbody = ClosedProgram(Program(unknown.constvars, pick("c") + tc + tk + pick("x") + comp_vars + pick("k") + tx,
                                  unknown.eqns, unknown.outvars), jbody.consts)
    res_vals = lambda w: [primals[p] for p, kw in zip(res_pos, kind) if kw == w]
    t_c, t_k, t_x = split(tangents, nc, nk)
    t_k = [instantiate(t) for t in kept(t_k, k_nz)]
    args = res_vals("c") + kept(t_c, c_nz) + t_k + res_vals("x") + stacked + kept(t_x, x_nz)
    touts = scan_p.bind(*args, body=tbody, num_consts=len(pick("c")) + sum(c_nz), num_carry=sum(k_nz),
                        length=length, reverse=reverse, unroll=unroll) if any(out_nz) else []
    return outs[:nk + ny], with_zeros(out_nz, touts, outs)


scan_p.def_jvp(_scan_jvp)


def _scan_transpose(cts, *args, body, num_consts, num_carry, length, reverse, unroll):
    """The body is linear in the undefined consts, every carry and the undefined xs (a tangent scan)."""
    nc, nk = num_consts, num_carry
    consts, carry, xs = split(args, nc, nk)
    c_lin, x_lin = [is_undefined(a) for a in consts], [is_undefined(a) for a in xs]
    ct_k, ct_y = cts[:nk], cts[nk:]
    y_nz = [not is_zero(c) for c in ct_y]
    tp = transpose_program(body, c_lin + [True] * nk + x_lin, [True] * nk + y_nz)
    res_c, res_x = kept(consts, [not lin for lin in c_lin]), kept(xs, [not lin for lin in x_lin])
    lin_c = [a.aval for a in kept(consts, c_lin)]
    avals = tp.in_avals
    nrc, nrx, nlc = len(res_c), len(res_x), len(lin_c)

    def f(*vals):
        rc, acc, k, rx, y = split(vals, nrc, nlc, nk, nrx)
        outs = eval_program(tp.program, tp.consts, rc + rx + k + y)
        g_c, g_k, g_x = split(outs, nlc, nk)
        return [add(a, g) for a, g in zip(acc, g_c)] + g_k + g_x
    k_avals = [tangent_aval(a) for a in body.out_avals[:nk]]
    tbody = trace_closed(f, avals[:nrc] + lin_c + k_avals + avals[nrc:nrc + nrx] + avals[nrc + nrx + nk:])
    outs = scan_p.bind(*res_c, *[instantiate(Zero(a)) for a in lin_c],
                       *[instantiate(c) for c in ct_k], *res_x, *[c for c in ct_y if not is_zero(c)],
                       body=tbody, num_consts=nrc, num_carry=nlc + nk, length=length, reverse=not reverse,
                       unroll=unroll)
    g_c, g_k, g_x = iter(outs[:nlc]), outs[nlc:nlc + nk], iter(outs[nlc + nk:])
    return ([next(g_c) if lin else None for lin in c_lin] + [g if is_undefined(a) else None for g, a in zip(g_k, carry)]
            + [next(g_x) if lin else None for lin in x_lin])


scan_p.def_transpose(_scan_transpose)


def _scan_batch(axis, args, dims, *, body, num_consts, num_carry, length, reverse, unroll):
    nc, nk = num_consts, num_carry
    consts, carry, xs = split(args, nc, nk)
    d_c, d_k, d_x = split(dims, nc, nk)
    consts = [a if d is not_mapped else moveaxis(a, d, 0) for a, d in zip(consts, d_c)]
    xs = [a if d is not_mapped else moveaxis(a, d, 1) for a, d in zip(xs, d_x)]
    c_dims = [None if d is not_mapped else 0 for d in d_c]
    x_dims = [None if d is not_mapped else 0 for d in d_x]
    ny = len(body.out_avals) - nk
    bbody, mapped, k_b = _fixpoint(lambda k: batch_program(body, axis, c_dims + [0 if b else None for b in k] + x_dims,
                                                           k + [False] * ny), [d is not not_mapped for d in d_k])
    carry = [moveaxis_to_front(a, d, axis.size) if b else a for a, d, b in zip(carry, d_k, k_b)]
    outs = scan_p.bind(*consts, *carry, *xs, body=bbody, num_consts=nc, num_carry=nk, length=length,
                       reverse=reverse, unroll=unroll)
    return outs, [0 if b else not_mapped for b in k_b] + [1 if m else not_mapped for m in mapped[nk:]]


scan_p.def_batch(_scan_batch)


# -------------------------------------------------------------------------------------------------- while
while_p = Primitive("while", multiple_results=True)


def check_predicate(op: str, aval) -> None:
    if aval.shape != () or aval.dtype != dtypes.bool_:
        raise TypeError(f"{op}: cond_fun must return a boolean scalar, got {short(aval)}")


@while_p.def_abstract_eval
def _while_abstract_eval(*avals, cond, body, cond_nconsts, body_nconsts):
    cc, bc, carry = split(avals, cond_nconsts, body_nconsts)
    check_types("while_loop", "operand", cc + carry, "cond_fun input", cond.in_avals)
    check_types("while_loop", "operand", bc + carry, "body_fun input", body.in_avals)
    if len(cond.out_avals) != 1:
        raise TypeError(f"while_loop: cond_fun must return one boolean scalar, got {len(cond.out_avals)} values")
    check_predicate("while_loop", cond.out_avals[0])
    check_types("while_loop", "body_fun carry output", body.out_avals, "carry input", carry)
    return [strong(a) for a in carry]


def _while_impl(backend, *vals, cond, body, cond_nconsts, body_nconsts):
    cc, bc, carry = split(vals, cond_nconsts, body_nconsts)
    while bool(run_closed(cond, backend, cc + carry)[0]):
        carry = run_closed(body, backend, bc + carry)
    return fresh(carry, vals)


host_impls(while_p, _while_impl)
register_lowering(while_p, PLANNED, lower_while)


def _with_invars(closed: ClosedProgram, invars: list) -> ClosedProgram:
    p = closed.program
    return ClosedProgram(Program(p.constvars, invars, p.eqns, p.outvars), closed.consts)


def _while_jvp(primals, tangents, *, cond, body, cond_nconsts, body_nconsts):
    ncc, nbc = cond_nconsts, body_nconsts
    cc, bc, carry = split(primals, ncc, nbc)
    _, t_bc, t_k = split(tangents, ncc, nbc)
    b_nz, k_nz = split(float_nz(tangents[ncc:], body.in_avals), nbc)
    jbody, _, k_nz = _fixpoint(lambda k: jvp_program(body, b_nz + k, k), k_nz)
    if not any(k_nz):
        return while_p.bind(*primals, cond=cond, body=body, cond_nconsts=ncc, body_nconsts=nbc), \
            [Zero(tangent_aval(a)) for a in carry]
    nk, nt_b = len(carry), sum(b_nz)
    jv = jbody.program.invars
    jb = _with_invars(jbody, jv[:nbc] + jv[nbc + nk:nbc + nk + nt_b] + jv[nbc:nbc + nk] + jv[nbc + nk + nt_b:])
    jcond = _with_invars(cond, cond.program.invars + [Var(a) for a, z in zip(body.in_avals[nbc:], k_nz) if z])
    t_bc, t_k = kept(t_bc, b_nz), [instantiate(t) for t in kept(t_k, k_nz)]
    outs = while_p.bind(*cc, *bc, *t_bc, *carry, *t_k, cond=jcond, body=jb, cond_nconsts=ncc,
                        body_nconsts=nbc + len(t_bc))
    # the primal loop also runs on its own, so that partial evaluation (linearize, jit's jvp) keeps it known
    outs[:nk] = while_p.bind(*primals, cond=cond, body=body, cond_nconsts=ncc, body_nconsts=nbc)
    return outs[:nk], with_zeros(k_nz, outs[nk:], carry)


while_p.def_jvp(_while_jvp)


@while_p.def_transpose
def _while_transpose(cts, *args, **params):
    raise TypeError("while_loop: reverse-mode differentiation (grad, vjp, jacrev) does not work through a "
                    "while_loop with a dynamic trip count; use lax.scan, or lax.fori_loop with static (Python int) "
                    "bounds")


def _while_batch(axis, args, dims, *, cond, body, cond_nconsts, body_nconsts):
    ncc, nbc = cond_nconsts, body_nconsts
    args = [a if d is not_mapped else moveaxis(a, d, 0) for a, d in zip(args, dims)]
    d_cc, d_bc, d_k = split([None if d is not_mapped else 0 for d in dims], ncc, nbc)
    cc, bc, carry = split(args, ncc, nbc)

    def derive(k_b):      # with a batched predicate, lanes that are done keep their carry: every carry is batched
        k_dims = [0 if b else None for b in k_b]
        bbody, mapped = batch_program(body, axis, d_bc + k_dims, k_b)
        pred_b = batch_program(cond, axis, d_cc + k_dims)[1][0]
        return bbody, [m or pred_b for m in mapped]
    bbody, _, k_b = _fixpoint(derive, [d is not None for d in d_k])
    bcond, pred_b = batch_program(cond, axis, d_cc + [0 if b else None for b in k_b])
    carry = [moveaxis_to_front(a, d, axis.size) if b else a for a, d, b in zip(carry, d_k, k_b)]
    if pred_b[0]:
        bcond, bbody = _until_all_done(bcond, bbody, ncc, nbc)
        bc = cc + bc
    outs = while_p.bind(*cc, *bc, *carry, cond=bcond, body=bbody, cond_nconsts=ncc, body_nconsts=len(bc))
    return outs, [0 if b else not_mapped for b in k_b]


def _until_all_done(bcond, bbody, ncc, nbc):
    """A batched predicate: loop while any lane runs; the body leaves finished lanes' carries unchanged."""
    c_avals, k_avals = bcond.in_avals[:ncc], bcond.in_avals[ncc:]

    def cond_fn(*xs):
        return [reduce_or(eval_program(bcond.program, bcond.consts, xs)[0], (0,))]

    def body_fn(*xs):
        cc, bc, carry = split(xs, ncc, nbc)
        pred = eval_program(bcond.program, bcond.consts, cc + carry)[0]
        new = eval_program(bbody.program, bbody.consts, bc + carry)
        return [select_n(broadcast_in_dim(pred, n.shape, (0,)), old, n) for old, n in zip(carry, new)]
    return trace_closed(cond_fn, c_avals + k_avals), trace_closed(body_fn, c_avals + bbody.in_avals)


while_p.def_batch(_while_batch)

__all__ = ["scan_p", "while_p", "check_predicate"]
