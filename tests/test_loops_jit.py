"""Loops and branches under jit (flfun/compiler/bodies.py): jit vs eager on scan/while/cond/fori programs (grad of a
scan, nested loops, vmap of jit of scan), the loop rewrites (hoisted invariants and accumulations, merged stacked
outputs) checked against eager and float64 numpy, no allocation per iteration in the steady state (memory
telemetry), impl swaps inside jitted bodies, and the printer."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flfun as fl
import flfun.memory
from flfun import lax
from flfun import numpy as fnp
from flfun.compiler.pipeline import optimized
from flfun.ir import typecheck
from flfun.primitives import impl_override

RNG = np.random.default_rng(13)
W = RNG.normal(size=(3, 3)) * 0.5
XS = RNG.normal(size=(6, 2, 3))


def close(a, b, tol=1e-10):
    for x, y in zip(fl.tree_leaves(a), fl.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def rnn(w, xs, reverse=False):
    def cell(c, x):
        h, s = c
        h = fnp.tanh(h @ w + x)
        return (h, s + fnp.sum(h)), (h, h * 2.0)
    return lax.scan(cell, (xs[0] * 0, fnp.sum(xs[0]) * 0), xs, reverse=reverse)


def rnn_numpy(w, xs, reverse=False):
    h, s, hs = np.zeros_like(xs[0]), 0.0, [None] * len(xs)
    for t in (reversed(range(len(xs))) if reverse else range(len(xs))):
        h = np.tanh(h @ w + xs[t])
        s += h.sum()
        hs[t] = h
    return (h, s), (np.stack(hs), 2 * np.stack(hs))


def rnn_loss(w, xs):
    (h, s), (hs, _) = rnn(w, xs)
    return fnp.sum(hs * hs) + s


def args(*arrays):
    return [fnp.asarray(a) for a in arrays]


def scan_runs_natively(f, *a) -> str:
    """The generated code of ``jit(f)``: its scans are runners with planned bodies, not the scan impl."""
    jf = fl.jit(f)
    jf(*a)
    exe = next(iter(jf._fast.values()))[0]
    assert "ScanRunner" in repr(list(exe._run.__closure__[i].cell_contents for i in range(
        len(exe._run.__closure__)))), exe.source
    return exe.source


# ------------------------------------------------------------------------------------------- jit vs eager
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_under_jit_matches_eager_and_numpy(reverse):
    w, xs = args(W, XS)
    got = fl.jit(lambda w, xs: rnn(w, xs, reverse))(w, xs)
    close(got, rnn(w, xs, reverse))
    close(got, rnn_numpy(W, XS, reverse))
    scan_runs_natively(lambda w, xs: rnn(w, xs, reverse), w, xs)


def test_grad_of_scan_under_jit_matches_eager_grad_and_differences():
    w, xs = args(W, XS)
    g_jit = fl.jit(fl.grad(rnn_loss, argnums=(0, 1)))(w, xs)
    close(g_jit, fl.grad(rnn_loss, argnums=(0, 1))(w, xs), 1e-9)
    eps, dw = 1e-6, RNG.normal(size=W.shape)
    f = lambda w: float(rnn_loss(fnp.asarray(w), xs))
    fd = (f(W + eps * dw) - f(W - eps * dw)) / (2 * eps)
    np.testing.assert_allclose(np.sum(np.asarray(g_jit[0]) * dw), fd, rtol=1e-6)


def test_while_cond_switch_fori_under_jit_match_eager():
    def f(x, n):
        y = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, fnp.sin(c[1]) + c[1]), (0, x))[1]
        z = lax.cond(fnp.sum(y) > 0, lambda a: a * 2.0, lambda a: a, y)      # a branch returning its operand
        z = lax.switch(n % 3, [lambda a: a + 1.0, lambda a: fnp.cos(a), lambda a: a * a], z)
        return lax.fori_loop(0, 4, lambda i, c: c * 0.5 + i, z), z
    x = fnp.asarray(XS[0, 0])
    jf = fl.jit(f)
    for n in (0, 1, 2, 5):
        out = jf(x, fnp.asarray(n, dtype="int32"))
        close(out, f(x, fnp.asarray(n, dtype="int32")))
        assert not np.shares_memory(np.asarray(out[1]), np.asarray(x))


def test_nested_loops_and_vmap_of_jit_of_scan_match_eager():
    def nested(w, xs):
        def outer(c, x):
            inner = lax.scan(lambda d, v: (fnp.tanh(d @ w + v), d), c, fnp.stack([x, x * 0.5]))
            k = lax.while_loop(lambda k: fnp.sum(k * k) > 1.0, lambda k: k * 0.5, inner[0] * 3.0)
            return lax.cond(fnp.sum(k) > 0, lambda a: a, lambda a: -a, k), inner[1]
        return lax.scan(outer, xs[0] * 0, xs)
    w, xs = args(W, XS)
    close(fl.jit(nested)(w, xs), nested(w, xs))
    def no_while(w, xs):
        def outer(c, x):
            inner = lax.scan(lambda d, v: (fnp.tanh(d @ w + v), d), c, fnp.stack([x, x * 0.5]))
            return lax.cond(fnp.sum(inner[0]) > 0, lambda a: a, lambda a: -a, inner[0]), inner[1]
        return lax.scan(outer, xs[0] * 0, xs)
    loss = lambda w, xs: fnp.sum(no_while(w, xs)[1] ** 2)
    close(fl.jit(fl.grad(loss))(w, xs), fl.grad(loss)(w, xs), 1e-9)
    batch = fnp.asarray(RNG.normal(size=(4,) + XS.shape))
    got = fl.vmap(fl.jit(lambda xs: rnn(w, xs)))(batch)
    close(got, [np.stack(r) for r in zip(*[fl.tree_leaves(rnn(w, b)) for b in batch])])


@given(st.integers(0, 5), st.booleans(), st.integers(1, 3))
def test_scan_length_direction_and_carry_parity(length, reverse, width):
    xs = RNG.normal(size=(length, width))

    def f(xs):
        return lax.scan(lambda c, x: ((c[1], c[0] + x), c[0] * x), (xs.sum(0) * 0 + 1.0, xs.sum(0) * 0),
                        xs, reverse=reverse)
    close(fl.jit(f)(fnp.asarray(xs)), f(fnp.asarray(xs)))


# ------------------------------------------------------------------------------------------------ rewrites
def scans(program):
    return [e for e in program.eqns if e.prim.name == "scan"]


def test_weight_gradient_accumulation_becomes_one_gemm_after_the_backward_scan():
    w, xs = args(W, XS)
    lowered = fl.jit(fl.grad(rnn_loss)).lower(w, xs)
    program = lowered.program
    typecheck(program)
    backward = scans(program)[-1]
    assert backward.params["reverse"] and backward.params["num_carry"] == 1        # only dh is carried
    body_dots = [e for e in backward.params["body"].program.eqns if e.prim.name == "dot_general"]
    assert len(body_dots) == 1                                                    # dh @ w.T stays inside
    stacked = [e for e in program.eqns if e.prim.name == "dot_general"
               and e.params["dimension_numbers"][0][0][:1] == (0,) and e.inputs[0].aval.ndim == 3]
    assert stacked, lowered.ir
    close(fl.jit(fl.grad(rnn_loss))(w, xs), fl.grad(rnn_loss)(w, xs), 1e-9)


def test_loop_invariants_move_out_and_repeated_stacked_outputs_merge():
    def f(w, xs):
        def cell(c, x):
            m = fnp.sin(w) @ fnp.cos(w)                     # reads only the constant w
            h = fnp.tanh(c @ m + x)
            return h, (h, h, x)                             # a repeat and a stacked input
        return lax.scan(cell, xs[0] * 0, xs)
    w, xs = args(W, XS)
    program = fl.make_ir(f, optimized=True)(w, xs).program
    typecheck(program)
    (scan,) = scans(program)
    assert {"sin", "cos"} <= {e.prim.name for e in program.eqns}
    assert not {"sin", "cos"} & {e.prim.name for e in scan.params["body"].program.eqns}
    assert len(scan.outputs) == 2                           # the carry and one stacked h
    close(fl.jit(f)(w, xs), f(w, xs))


def lstm_loss(wh, xs):
    def cell(carry, x):
        h, c = carry
        g = x + h @ wh
        i, f, gg, o = (g[:, k * 3:(k + 1) * 3] for k in range(4))
        c = fl.nn.sigmoid(f) * c + fl.nn.sigmoid(i) * fnp.tanh(gg)
        h = fl.nn.sigmoid(o) * fnp.tanh(c)
        return (h, c), h
    _, hs = lax.scan(cell, (xs[0, :, :3] * 0, xs[0, :, :3] * 0), xs)
    return fnp.sum(hs * fnp.sin(hs))


def stacked_rows(f, *a, budget=None, monkeypatch=None) -> list[int]:
    """The number of stacked outputs of each scan of ``jit(f)``'s optimised program (``budget``: the rewrite's
    ``RECOMPUTE_EQNS``; 0 turns it off)."""
    import flfun.compiler.bodies as bodies
    if budget is not None:
        monkeypatch.setattr(bodies, "RECOMPUTE_EQNS", budget)
    program = fl.jit(f).lower(*a).program
    typecheck(program)
    return [len(e.outputs) - e.params["num_carry"] for e in scans(program)]


def test_backward_scan_recomputes_derivative_residuals_instead_of_reading_them(monkeypatch):
    wh, xs = args(RNG.normal(size=(3, 12)) * 0.5, RNG.normal(size=(7, 2, 12)))
    g = fl.grad(lstm_loss)
    on = fl.jit(g).lower(wh, xs)
    # the forward scan keeps h, sigma(i), sigma(f), tanh(g~), sigma(o), h_prev, c_prev; without the rewrite it also
    # stores sigma'(i), sigma'(f), tanh'(g~), sigma'(o), tanh(c) and tanh'(c)
    assert stacked_rows(g, wh, xs) == [7, 1]
    assert stacked_rows(g, wh, xs, budget=0, monkeypatch=monkeypatch) == [13, 1]
    assert on.plan.arena_bytes < fl.jit(g).lower(wh, xs).plan.arena_bytes
    close(fl.jit(g)(wh, xs), g(wh, xs), 1e-12)
    monkeypatch.undo()
    close(fl.jit(g)(wh, xs), g(wh, xs), 1e-12)
    eps, d = 1e-6, np.zeros((3, 12))
    d[1, 5] = 1.0
    fd = (lstm_loss(wh + eps * d, xs) - lstm_loss(wh - eps * d, xs)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(fl.jit(g)(wh, xs))[1, 5], float(fd), rtol=1e-6)


def two_scans(xs, reverse=False, expensive=False, also_return=False):
    def first(c, x):
        t = fnp.tanh(x)
        u = fnp.sin(fnp.cos(fnp.sin(fnp.cos(fnp.exp(t))))) if expensive else 1.0 - t * t
        return c, (t, u)
    _, (ts, us) = lax.scan(first, 0.0, xs)
    total, out = lax.scan(lambda c, r: (c + fnp.sum(r[0] * r[1]), r[1] * 2.0 + r[0]), 0.0, (ts, us),
                          reverse=reverse)
    return (total, out, us) if also_return else (total, out)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_row_is_recomputed_only_when_one_later_scan_alone_reads_it_and_it_is_cheap(reverse):
    xs = fnp.asarray(RNG.normal(size=(5, 4)))
    cases = {(): [1, 1], ("expensive",): [2, 1], ("also_return",): [2, 1]}
    for flags, rows in cases.items():
        kw = dict(reverse=reverse, **{k: True for k in flags})
        f = lambda xs, kw=kw: two_scans(xs, **kw)
        assert stacked_rows(f, xs) == rows, flags
        close(fl.jit(f)(xs), f(xs), 1e-12)
        t = np.tanh(np.asarray(xs))
        u = np.sin(np.cos(np.sin(np.cos(np.exp(t))))) if "expensive" in flags else 1 - t * t
        close(fl.jit(f)(xs)[:2], (np.sum(t * u), u * 2 + t), 1e-12)


# ------------------------------------------------------------------------------------- memory, impls, text
def allocations(f, *a) -> int:
    f(*a)
    with flfun.memory.record(shadow=False) as trace:
        f(*a)
    return trace.num_allocs


def test_steady_state_allocates_nothing_per_iteration():
    def f(w, xs):
        return lax.scan(lambda c, x: (fnp.tanh(c @ w + x) * 0.5 + c, c * x), xs[0] * 0, xs)
    w = fnp.asarray(W)
    counts = [allocations(fl.jit(f), w, fnp.asarray(RNG.normal(size=(T, 2, 3)))) for T in (2, 8, 32)]
    assert counts[0] == counts[1] == counts[2], counts
    assert counts[0] <= 1, counts


def test_swapped_impl_reaches_a_body_jitted_before_the_swap_and_the_backward_scan():
    calls = []
    real = fl.primitives.get("tanh").impls["numpy"]

    def spy(x, out=None):
        calls.append(1)
        return real(x, out=out)
    w, xs = args(W, XS)
    jf, jg = fl.jit(rnn), fl.jit(fl.grad(rnn_loss))
    before, g_before = jf(w, xs), jg(w, xs)
    with impl_override("tanh", "numpy", spy):
        close(jf(w, xs), before)
        assert len(calls) == len(XS)                        # once per iteration, in the compiled body
        calls.clear()
        close(jg(w, xs), g_before, 1e-12)
        assert len(calls) == len(XS)
    calls.clear()
    jf(w, xs)
    assert not calls


def test_printer_nests_bodies_like_a_jaxpr():
    text = str(fl.make_ir(lambda w, xs: rnn(w, xs)[1][0])(*args(W, XS)))
    assert "= scan[\n      body={ lambda ; " in text, text
    assert "\n          " in text and "length=6" in text and "reverse=False" in text, text


def test_rows_recomputed_along_a_chain_of_three_scans():
    def f(xs):
        _, (t, u) = lax.scan(lambda c, x: (c, (fnp.tanh(x), 1.0 - fnp.tanh(x) * fnp.tanh(x))), 0.0, xs)
        _, (v, w) = lax.scan(lambda c, r: (c, (r[0] * r[1], r[0] * r[1] + 1.0)), 0.0, (t, u))
        return lax.scan(lambda c, r: (c + fnp.sum(r[0] - r[1]), r[1] * 3.0), 0.0, (v, w), reverse=True)
    xs = fnp.asarray(RNG.normal(size=(4, 3)))
    assert stacked_rows(f, xs) == [1, 1, 1]          # u from t in the second scan, w from v in the third
    close(fl.jit(f)(xs), f(xs), 1e-12)
