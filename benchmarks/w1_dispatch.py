"""W1: eager dispatch overhead (``x + y``, ``sum(x*y + 1)``) and W1g (eager grad of the chain), side by side.

Run: ``python -m benchmarks.w1_dispatch`` (each peer in its own process; prints a markdown table).
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import markdown_table, peer_main, run_workload, time_fn, timing_dict

T = 0.1  # target seconds per timed loop (WORKLOADS.md)


def data():
    rng = np.random.default_rng(1)
    return rng.standard_normal((100,), dtype=np.float32), rng.standard_normal((100,), dtype=np.float32)


def run_numpy():
    x, y = data()
    return {"variants": {"add": timing_dict(time_fn(lambda: x + y, T)),
                         "chain": timing_dict(time_fn(lambda: np.sum(x * y + 1.0), T)),
                         "grad (hand-written: y)": timing_dict(time_fn(lambda: y.copy(), T))}}


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    xn, yn = data()
    x, y = fnp.asarray(xn), fnp.asarray(yn)

    def chain(x, y):
        return fnp.sum(x * y + 1.0)
    g = fl.grad(chain)
    np.testing.assert_allclose(np.asarray(g(x, y)), yn, rtol=1e-6)
    out = {"add": time_fn(lambda: x + y, T), "chain": time_fn(lambda: chain(x, y), T),
           "grad": time_fn(lambda: g(x, y), T)}
    if hasattr(fl, "jit"):
        jc, jg = fl.jit(chain), fl.jit(g)
        out["jit chain"] = time_fn(lambda: jc(x, y), T)
        out["jit grad"] = time_fn(lambda: jg(x, y), T)
    return {"variants": {k: timing_dict(v) for k, v in out.items()}}


def run_torch():
    import torch
    xn, yn = data()
    x, y = torch.from_numpy(xn), torch.from_numpy(yn)

    def grad():
        xg = x.detach().requires_grad_()
        torch.sum(xg * y + 1).backward()
        return xg.grad
    return {"variants": {"add": timing_dict(time_fn(lambda: x + y, T)),
                         "chain": timing_dict(time_fn(lambda: torch.sum(x * y + 1.0), T)),
                         "grad": timing_dict(time_fn(grad, T))}}


def run_jax():
    import jax
    import jax.numpy as jnp
    xn, yn = data()
    x, y = jnp.asarray(xn), jnp.asarray(yn)

    def chain(x, y):
        return jnp.sum(x * y + 1.0)
    g, jc, jg = jax.grad(chain), jax.jit(chain), jax.jit(jax.grad(chain))
    ready = jax.block_until_ready
    return {"variants": {k: timing_dict(time_fn(f, T, loops=5 if "jit" not in k else 7, sync=ready)) for k, f in {
        "add": lambda: x + y, "chain": lambda: chain(x, y), "grad": lambda: g(x, y),
        "jit chain": lambda: jc(x, y), "jit grad": lambda: jg(x, y)}.items()}}


def run_autograd():
    import autograd
    import autograd.numpy as anp
    x, y = data()

    def chain(x, y):
        return anp.sum(anp.add(anp.multiply(x, y), 1.0))
    g = autograd.grad(chain)
    return {"variants": {"add": timing_dict(time_fn(lambda: anp.add(x, y), T)),
                         "chain": timing_dict(time_fn(lambda: chain(x, y), T)),
                         "grad": timing_dict(time_fn(lambda: g(x, y), T, loops=5))}}


PEERS = {"numpy": run_numpy, "flfun": run_flfun, "torch": run_torch, "jax": run_jax, "autograd": run_autograd}


def main() -> str:
    rows = run_workload("benchmarks.w1_dispatch", [("numpy", None), ("flfun", None), ("torch", "torch"),
                                                   ("jax", "jax"), ("autograd", "autograd")], "numpy/add")
    table = markdown_table("W1: eager dispatch (100 float32 elements)", rows, "numpy/add")
    by = {(r["peer"], r.get("variant")): r["median"] for r in rows if "median" in r}
    notes = []
    for peer in ("flfun", "torch", "jax", "autograd"):
        if (peer, "chain") in by:
            notes.append(f"- {peer} chain / numpy chain: {by[(peer, 'chain')] / by[('numpy', 'chain')]:.2f}x")
    if ("flfun", "grad") in by and ("torch", "grad") in by:
        notes.append(f"- flfun eager grad / torch backward(): {by[('flfun', 'grad')] / by[('torch', 'grad')]:.2f}x")
    if ("flfun", "jit chain") in by:
        notes.append(f"- flfun jit chain / numpy chain: {by[('flfun', 'jit chain')] / by[('numpy', 'chain')]:.2f}x")
    return table + "\n" + "\n".join(notes) + "\n"


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
