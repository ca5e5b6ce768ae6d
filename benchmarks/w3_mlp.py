"""W3: MLP training step (784-1024-1024-10, batch 256, SGD), flfun jit vs the 8-GEMM floor and the peers.

The limit for a numpy-backed step is its 8 GEMMs with preallocated outputs (timed in the same run); everything
else is temporaries and extra passes over memory. Also reports flfun's first-call (trace + passes + plan + code)
time and saves the memory plan as ``benchmarks/w3_plan.png``.

Run: ``python -m benchmarks.w3_mlp``.
"""
from __future__ import annotations

import os
import time

import numpy as np

from benchmarks.harness import assert_check, markdown_table, peer_main, run_rows, time_fn, timing_dict

os.environ.setdefault("JAX_PLATFORMS", "cpu")   # the CPU workloads: JAX on the CPU even where a GPU exists

T = 0.5
CHECK = [3.10194, 2.78428, 2.63709]
SIZES = (784, 1024, 1024, 10)
B = 256
LR = 0.01
GFLOP = 2.448


def data(sizes=SIZES, batch=B):
    """W3's draws (``sizes`` and ``batch`` change for the GPU's big variant): params, x, y."""
    rng = np.random.default_rng(3)
    params = []
    for fi, fo in zip(sizes, sizes[1:]):
        w = rng.standard_normal((fi, fo), dtype=np.float32) * np.float32(np.sqrt(2 / fi))
        params.append((w, np.zeros((fo,), np.float32)))
    x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    return params, x, y


def _losses(step, params, x, y, n=3):
    out = []
    for _ in range(n):
        params, loss = step(params, x, y)
        out.append(float(loss))
    return out, params


# ------------------------------------------------------------------------------------------------- numpy
def hand_step(xp):
    """W3's step written by hand against the array module ``xp`` (numpy here, cupy in gpu_bench)."""
    lr = xp.float32(LR)

    def step(params, x, y):
        (w1, b1), (w2, b2), (w3, b3) = params
        a1 = x @ w1 + b1
        h1 = xp.maximum(a1, 0)
        a2 = h1 @ w2 + b2
        h2 = xp.maximum(a2, 0)
        z = h2 @ w3 + b3
        m = z.max(axis=1, keepdims=True)
        e = xp.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        rows = xp.arange(len(y))
        loss = xp.mean(xp.log(s[:, 0]) + m[:, 0] - z[rows, y])
        dz = e / s
        dz[rows, y] -= 1
        dz /= xp.float32(len(y))
        gw3, gb3 = h2.T @ dz, dz.sum(0)
        d2 = (dz @ w3.T) * (a2 > 0)
        gw2, gb2 = h1.T @ d2, d2.sum(0)
        d1 = (d2 @ w2.T) * (a1 > 0)
        gw1, gb1 = x.T @ d1, d1.sum(0)
        grads = [(gw1, gb1), (gw2, gb2), (gw3, gb3)]
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)], loss
    return step


numpy_step = hand_step(np)


def gemm_floor(params, x):
    """The step's 8 GEMMs alone, into preallocated outputs."""
    (w1, _), (w2, _), (w3, _) = params
    h1, h2 = np.empty((B, 1024), np.float32), np.empty((B, 1024), np.float32)
    z, dz = np.empty((B, 10), np.float32), np.full((B, 10), 0.01, np.float32)
    d2, d1 = np.empty((B, 1024), np.float32), np.empty((B, 1024), np.float32)
    g3, g2, g1 = np.empty((1024, 10), np.float32), np.empty((1024, 1024), np.float32), np.empty((784, 1024),
                                                                                                  np.float32)

    def run():
        np.matmul(x, w1, out=h1)
        np.matmul(h1, w2, out=h2)
        np.matmul(h2, w3, out=z)
        np.matmul(h2.T, dz, out=g3)
        np.matmul(dz, w3.T, out=d2)
        np.matmul(h1.T, d2, out=g2)
        np.matmul(d2, w2.T, out=d1)
        np.matmul(x.T, d1, out=g1)
    return run


def run_numpy():
    params, x, y = data()
    check, _ = _losses(numpy_step, params, x, y)
    assert_check("W3 numpy", check, CHECK)
    state = [params]

    def one():
        state[0], _ = numpy_step(state[0], x, y)
    floor = gemm_floor(params, x)
    out = {"8 GEMMs (floor)": time_fn(floor, T), "step (hand-written)": time_fn(one, T),
           "8 GEMMs (floor, again)": time_fn(floor, T)}
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": check}


# ------------------------------------------------------------------------------------------------- flfun
def matmul(a, b):
    """``a @ b`` (through lax.dot_general until flfun.numpy.matmul exists)."""
    import flfun.numpy as fnp
    if hasattr(fnp, "matmul"):
        return a @ b
    from flfun.lax import dot_general
    return dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())))


def mlp_loss(params, x, y):
    """W3's loss: the MLP (ReLU between layers) and softmax cross-entropy, written with flfun."""
    from flfun.nn import functional as F
    from flfun.nn.losses import softmax_cross_entropy
    h = x
    for i, (w, b) in enumerate(params):
        h = matmul(h, w) + b
        if i < len(params) - 1:
            h = F.relu(h)
    return softmax_cross_entropy(h, y)


def flfun_step(params, x, y):
    import flfun as fl
    value, grads = fl.value_and_grad(mlp_loss)(params, x, y)
    return [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)], value


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    pn, xn, yn = data()
    params = [(fnp.asarray(w), fnp.asarray(b)) for w, b in pn]
    x, y = fnp.asarray(xn), fnp.asarray(yn)
    t0 = time.perf_counter()
    step = fl.jit(flfun_step)
    lowered = step.lower(params, x, y)
    lowered.compile()
    first = time.perf_counter() - t0
    check, _ = _losses(step, params, x, y)
    assert_check("W3 flfun jit", check, CHECK)
    plan = lowered.plan
    plan.plot(os.path.join(os.path.dirname(__file__), "w3_plan.png"))
    donating = fl.jit(flfun_step, donate_argnums=0)
    check_d, _ = _losses(donating, [(fnp.asarray(w), fnp.asarray(b)) for w, b in pn], x, y)
    assert_check("W3 flfun jit (donated)", check_d, CHECK)
    state = [params]

    def one():
        state[0], _ = step(state[0], x, y)
    dstate = [[(fnp.asarray(w), fnp.asarray(b)) for w, b in pn]]

    def one_donated():
        dstate[0], _ = donating(dstate[0], x, y)
    floor = gemm_floor(pn, xn)
    out = {"8 GEMMs (floor, same process)": time_fn(floor, T), "jit step": time_fn(one, T),
           "jit step (donate params)": time_fn(one_donated, T)}
    eager_state = [params]

    def eager():
        eager_state[0], _ = flfun_step(eager_state[0], x, y)
    from flfun.config import config
    ustate = [params]

    def one_unplanned():
        ustate[0], _ = step(ustate[0], x, y)
    config.jit_planned = False          # what the planner buys: every impl allocates its own result
    try:
        out["jit step (unplanned)"] = time_fn(one_unplanned, T)
    finally:
        config.jit_planned = True
    out["eager step"] = time_fn(eager, T, loops=5)
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": check, "first_call_s": first,
            "plan": plan.totals()}


# ------------------------------------------------------------------------------------------------- peers
def jax_step_fn():
    import jax
    import jax.numpy as jnp

    def step(params, x, y):
        def loss(params):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = jax.nn.relu(h)
            return jnp.mean(jax.nn.logsumexp(h, axis=1) - jnp.take_along_axis(h, y[:, None], axis=1)[:, 0])
        value, grads = jax.value_and_grad(loss)(params)
        return [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)], value
    return step


def run_jax():
    import jax
    pn, xn, yn = data()
    params = [(jax.numpy.asarray(w), jax.numpy.asarray(b)) for w, b in pn]
    x, y = jax.numpy.asarray(xn), jax.numpy.asarray(yn)
    step = jax.jit(jax_step_fn())
    check, _ = _losses(step, params, x, y)
    assert_check("W3 jax", check, CHECK)
    state = [params]

    def one():
        state[0], loss = step(state[0], x, y)
        jax.block_until_ready((state[0], loss))
    return {"variants": {"jit step": timing_dict(time_fn(one, T))}, "check": check}


def torch_params(pn, device=None):
    """W3's numpy params as torch leaves (weights transposed for ``F.linear``) on ``device``."""
    import torch
    return [(torch.from_numpy(w.T.copy()).to(device).requires_grad_(), torch.from_numpy(b).to(device).requires_grad_())
            for w, b in pn]


def torch_step(params, x, y):
    """W3's step in PyTorch eager (SGD in place on ``params``)."""
    import torch
    import torch.nn.functional as TF
    h = x
    for i, (w, b) in enumerate(params):
        h = TF.linear(h, w, b)
        if i < len(params) - 1:
            h = torch.relu(h)
    loss = TF.cross_entropy(h, y)
    loss.backward()
    with torch.no_grad():
        for w, b in params:
            w -= LR * w.grad
            b -= LR * b.grad
            w.grad = None
            b.grad = None
    return params, loss.detach()


def run_torch():
    import torch
    pn, xn, yn = data()
    x, y = torch.from_numpy(xn), torch.from_numpy(yn).long()
    check, _ = _losses(torch_step, torch_params(pn), x, y)
    assert_check("W3 torch", check, CHECK)
    params = torch_params(pn)
    return {"variants": {"eager step": timing_dict(time_fn(lambda: torch_step(params, x, y), T))}, "check": check}


PEERS = {"numpy": run_numpy, "flfun": run_flfun, "jax": run_jax, "torch": run_torch}
BASE = "numpy/8 GEMMs (floor)"


def main() -> str:
    rows, extras = run_rows("benchmarks.w3_mlp", [("numpy", None), ("flfun", None), ("torch", "torch"),
                                                  ("jax", "jax")], BASE)
    table = markdown_table(f"W3: MLP training step ({GFLOP} GFLOP of GEMMs)", rows, BASE)
    notes = [f"- {r['peer']} {r['variant']}: {GFLOP / r['median']:.0f} GFLOP/s" for r in rows if "median" in r]
    fl_rows = {r.get("variant"): r for r in rows if r.get("peer") == "flfun" and "median" in r}
    if "jit step" in fl_rows and "8 GEMMs (floor, same process)" in fl_rows:
        own = fl_rows["jit step"]["median"] / fl_rows["8 GEMMs (floor, same process)"]["median"]
        notes.append(f"- flfun jit step / 8 GEMMs timed in the flfun process: {own:.2f}x")
    if "flfun" in extras:
        notes.append(f"- flfun first call (trace + passes + plan + code generation): "
                     f"{extras['flfun']['first_call_s']:.3f} s")
        notes.append(f"- flfun plan: {extras['flfun']['plan']} (benchmarks/w3_plan.png)")
    return table + "\n" + "\n".join(notes) + "\n"


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
