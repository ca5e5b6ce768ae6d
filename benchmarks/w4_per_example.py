"""W4: per-example gradients of a 64-128-10 tanh MLP (batch 64): jit(vmap(grad)) vs the hand-written floor.

Run: ``python -m benchmarks.w4_per_example``.
"""
from __future__ import annotations

import os

import numpy as np

from benchmarks.harness import assert_check, markdown_table, peer_main, run_rows, time_fn, timing_dict

os.environ.setdefault("JAX_PLATFORMS", "cpu")   # the CPU workloads: JAX on the CPU even where a GPU exists

T = 0.3
CHECK = [50.2329, -6.20372, 0.0, 0.0]


def data():
    rng = np.random.default_rng(4)
    w1 = rng.standard_normal((64, 128), dtype=np.float32) * np.float32(1 / 8)
    b1 = np.zeros((128,), np.float32)
    w2 = rng.standard_normal((128, 10), dtype=np.float32) * np.float32(1 / np.sqrt(128))
    b2 = np.zeros((10,), np.float32)
    x = rng.standard_normal((64, 64), dtype=np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    return (w1, b1, w2, b2), x, y


def _check(name, grads):
    sums = [float(np.sum(np.asarray(g, dtype=np.float64))) for g in grads]
    assert_check(name, sums, CHECK, rtol=2e-5, atol=2e-4)     # the last two are rounding noise around 0
    return sums


def run_numpy():
    (w1, b1, w2, b2), x, y = data()
    rows = np.arange(len(y))

    def grads():
        h = np.tanh(x @ w1 + b1)
        z = h @ w2 + b2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        dz = e / e.sum(axis=1, keepdims=True)
        dz[rows, y] -= 1
        da = (dz @ w2.T) * (1 - h * h)
        return np.einsum("bi,bj->bij", x, da), da, np.einsum("bi,bj->bij", h, dz), dz
    check = _check("W4 numpy", grads())
    return {"variants": {"floor (hand-written, batched)": timing_dict(time_fn(grads, T))}, "check": check}


def flfun_loss(params, x, y):
    import flfun.numpy as fnp
    from benchmarks.w3_mlp import matmul
    from flfun.nn.functional import logsumexp
    w1, b1, w2, b2 = params
    z = matmul(fnp.tanh(matmul(x, w1) + b1), w2) + b2
    return logsumexp(z) - z[y]


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    pn, xn, yn = data()
    params, x, y = tuple(fnp.asarray(p) for p in pn), fnp.asarray(xn), fnp.asarray(yn)
    f = fl.jit(fl.vmap(fl.grad(flfun_loss), in_axes=(None, 0, 0)))
    check = _check("W4 flfun", f(params, x, y))
    plan = f.lower(params, x, y).plan
    return {"variants": {"jit(vmap(grad))": timing_dict(time_fn(lambda: f(params, x, y), T))}, "check": check,
            "plan": plan.totals()}


def run_jax():
    import jax
    import jax.numpy as jnp
    pn, xn, yn = data()
    params, x, y = tuple(jnp.asarray(p) for p in pn), jnp.asarray(xn), jnp.asarray(yn)

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        z = jnp.tanh(x @ w1 + b1) @ w2 + b2
        return jax.nn.logsumexp(z) - z[y]
    f = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    check = _check("W4 jax", f(params, x, y))
    t = time_fn(lambda: f(params, x, y), T, sync=jax.block_until_ready)
    return {"variants": {"jit(vmap(grad))": timing_dict(t)}, "check": check}


def run_torch():
    import torch
    from torch.func import grad, vmap
    pn, xn, yn = data()
    params = tuple(torch.from_numpy(p) for p in pn)
    x, y = torch.from_numpy(xn), torch.from_numpy(yn).long()

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        z = torch.tanh(x @ w1 + b1) @ w2 + b2
        return torch.logsumexp(z, 0) - z.gather(0, y.unsqueeze(0))[0]
    f = vmap(grad(loss), in_dims=(None, 0, 0))
    check = _check("W4 torch", [g.numpy() for g in f(params, x, y)])
    return {"variants": {"vmap(grad) (torch.func, eager)": timing_dict(time_fn(lambda: f(params, x, y), T))},
            "check": check}


PEERS = {"numpy": run_numpy, "flfun": run_flfun, "jax": run_jax, "torch": run_torch}
BASE = "numpy/floor (hand-written, batched)"


def main() -> str:
    rows, extras = run_rows("benchmarks.w4_per_example", [("numpy", None), ("flfun", None), ("jax", "jax"),
                                                           ("torch", "torch")], BASE)
    table = markdown_table("W4: per-example gradients (batch 64, 64-128-10 tanh MLP)", rows, BASE)
    notes = [f"- flfun plan: {extras['flfun']['plan']}"] if "flfun" in extras else []
    return table + "\n" + "\n".join(notes) + "\n"


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
