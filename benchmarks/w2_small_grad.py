"""W2: gradient of ``sum(tanh(x @ w) ** 2)`` w.r.t. w (32x64 @ 64x64), eager and jitted, side by side.

Run: ``python -m benchmarks.w2_small_grad``.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import assert_check, markdown_table, peer_main, run_workload, time_fn, timing_dict

T = 0.2
CHECK = [810.298, -45.3588]


def data():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 64), dtype=np.float32)
    w = rng.standard_normal((64, 64), dtype=np.float32) * np.float32(1 / 8)
    return x, w


def run_numpy():
    x, w = data()

    def grad(w):
        t = np.tanh(x @ w)
        return x.T @ (2 * t * (1 - t * t))
    loss = float(np.sum(np.tanh(x @ w) ** 2))
    check = [loss, float(grad(w).sum())]
    assert_check("W2 numpy", check, CHECK)
    return {"variants": {"floor (hand-written)": timing_dict(time_fn(lambda: grad(w), T))}, "check": check}


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    xn, wn = data()
    x, w = fnp.asarray(xn), fnp.asarray(wn)

    def loss(w):
        return fnp.sum(fnp.tanh(x @ w) ** 2)
    vg = fl.value_and_grad(loss)
    val, g = vg(w)
    check = [float(val), float(fnp.sum(g))]
    assert_check("W2 flfun", check, CHECK)
    out = {"grad (eager)": time_fn(lambda: fl.grad(loss)(w), T, loops=5)}
    if hasattr(fl, "jit"):
        jg = fl.jit(fl.grad(loss))
        out["jit(grad)"] = time_fn(lambda: jg(w), T)
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": check}


def run_torch():
    import torch
    xn, wn = data()
    x = torch.from_numpy(xn)

    def grad():
        w = torch.from_numpy(wn).requires_grad_()
        loss = torch.sum(torch.tanh(x @ w) ** 2)
        loss.backward()
        return loss, w.grad
    loss, g = grad()
    check = [float(loss), float(g.sum())]
    assert_check("W2 torch", check, CHECK)
    return {"variants": {"grad (eager)": timing_dict(time_fn(grad, T))}, "check": check}


def run_jax():
    import jax
    import jax.numpy as jnp
    xn, wn = data()
    x, w = jnp.asarray(xn), jnp.asarray(wn)

    def loss(w):
        return jnp.sum(jnp.tanh(x @ w) ** 2)
    val, g = jax.value_and_grad(loss)(w)
    check = [float(val), float(g.sum())]
    assert_check("W2 jax", check, CHECK)
    jg = jax.jit(jax.grad(loss))
    ready = jax.block_until_ready
    return {"variants": {"grad (eager)": timing_dict(time_fn(lambda: jax.grad(loss)(w), T, loops=5, sync=ready)),
                         "jit(grad)": timing_dict(time_fn(lambda: jg(w), T, sync=ready))}, "check": check}


def run_autograd():
    import autograd
    import autograd.numpy as anp
    x, w = data()

    def loss(w):
        return anp.sum(anp.tanh(anp.dot(x, w)) ** 2)
    g = autograd.grad(loss)
    return {"variants": {"grad (eager)": timing_dict(time_fn(lambda: g(w), T, loops=5))}}


PEERS = {"numpy": run_numpy, "flfun": run_flfun, "torch": run_torch, "jax": run_jax, "autograd": run_autograd}


def main() -> str:
    base = "numpy/floor (hand-written)"
    rows = run_workload("benchmarks.w2_small_grad", [("numpy", None), ("flfun", None), ("torch", "torch"),
                                                     ("jax", "jax"), ("autograd", "autograd")], base)
    return markdown_table("W2: small gradient (32x64 @ 64x64, tanh, sum of squares)", rows, base)


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
