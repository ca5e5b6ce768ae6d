"""Hypothesis strategy for random programs with the patterns the passes target: autodiff zeros and ones,
broadcast / reshape / transpose chains, repeated subexpressions, dead code and work on constants."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from flfun import lax
from flfun.core import ShapedArray
from flfun.primitives import reduce as R
from flfun.primitives import shape as S
from flfun.transforms.jit import close_program
from flfun.transforms.staging import trace_to_program

SHAPE = (2, 3)
OPS = ("sin", "tanh", "neg", "exp_small", "add", "sub", "mul", "max", "add_zero", "mul_one", "zero_plus",
       "rowsum_bcast", "reshape_chain", "transpose_chain", "const_op", "repeat", "dead", "select_zero", "neg_neg",
       "colsum", "scalar_bcast")
CONST = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(SHAPE)


def _apply(op, a, b, pool, dead):
    f32 = np.float32
    if op == "sin":
        return lax.sin(a)
    if op == "tanh":
        return lax.tanh(a)
    if op == "neg":
        return lax.neg(a)
    if op == "exp_small":
        return lax.exp(lax.tanh(a))
    if op in ("add", "sub", "mul", "max"):
        return getattr(lax, op)(a, b)
    if op == "add_zero":
        return lax.add(a, S.full(SHAPE, 0.0, f32))
    if op == "zero_plus":
        return lax.add(S.full((), 0.0, f32), a)
    if op == "mul_one":
        return lax.mul(S.broadcast_in_dim(S.full((), 1.0, f32), SHAPE, ()), a)
    if op == "rowsum_bcast":
        return lax.mul(a, S.broadcast_in_dim(R.reduce_sum(b, (1,)), SHAPE, (0,)))
    if op == "colsum":
        return lax.add(a, S.broadcast_in_dim(R.reduce_sum(a, (0,)), SHAPE, (1,)))
    if op == "reshape_chain":
        return S.reshape(S.reshape(a, (3, 2)), SHAPE)
    if op == "transpose_chain":
        return lax.sin(S.transpose(S.transpose(a, (1, 0)), (1, 0)))
    if op == "const_op":
        from flfun.numpy import asarray
        return lax.mul(a, lax.cos(lax.add(asarray(CONST), S.full(SHAPE, 1.0, f32))))
    if op == "repeat":
        return lax.add(lax.sin(a), lax.sin(a))
    if op == "dead":
        dead.append(lax.exp(lax.tanh(b)))
        return a
    if op == "select_zero":
        return lax.select(lax.gt(a, b), a, S.full(SHAPE, 0.0, f32))
    if op == "neg_neg":
        return lax.neg(lax.neg(a))
    if op == "scalar_bcast":
        return lax.sub(a, S.broadcast_in_dim(S.full((), 0.5, f32), SHAPE, ()))
    raise ValueError(op)


@st.composite
def programs(draw, max_ops: int = 12):
    """``(program, consts, inputs)`` for a random function of 2 float32 inputs of shape (2, 3)."""
    instrs = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99), st.integers(0, 99)),
                           min_size=1, max_size=max_ops))
    n_out = draw(st.integers(1, 3))
    inputs = [draw(st.lists(st.floats(-2, 2, width=32), min_size=6, max_size=6)) for _ in range(2)]
    inputs = [np.asarray(x, dtype=np.float32).reshape(SHAPE) for x in inputs]

    def f(x, y):
        pool, dead = [x, y], []
        for op, i, j in instrs:
            pool.append(_apply(op, pool[i % len(pool)], pool[j % len(pool)], pool, dead))
        return pool[-n_out:]
    program, consts = trace_to_program(f, [ShapedArray(SHAPE, np.float32)] * 2, dynamic=True)
    closed, _ = close_program(program, consts)
    return closed.program, closed.consts, inputs
