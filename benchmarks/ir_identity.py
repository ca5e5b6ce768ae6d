"""Fingerprints of what jit makes of a fixed set of programs: the traced and the optimised IR, the memory plan and
the generated executor source. A refactoring that promises "no behaviour change" dumps them in the tree before and
the tree after and compares (the layout change of issue 12 was checked this way: 127 programs, 0 differences).

Run::

    python -m benchmarks.ir_identity dump before.json     # in the old tree
    python -m benchmarks.ir_identity dump after.json      # in the new tree
    python -m benchmarks.ir_identity compare before.json after.json
"""
from __future__ import annotations

import json
import re
import sys

import numpy as np


def fingerprint(f, *args) -> dict:
    """The traced IR, the optimised IR, the plan and the executor source of ``jit(f)`` at ``args``."""
    import flfun as fl
    lowered = fl.jit(f).lower(*args)
    plan = lowered.plan
    source = lowered.compile().executable.source
    return {"traced": lowered.traced_ir, "ir": lowered.ir,
            "plan": [plan.strategy, plan.arena_bytes, plan.naive_bytes, plan.lower_bound, plan.peak_live_bytes,
                     [repr(b) for b in plan.buffers]],
            "source": re.sub(r"0x[0-9a-f]+|\b[0-9a-f]{8,}\b", "ID", source)}


def random_program(seed: int):
    """A random chain of elementwise, broadcasting and reducing flfun.numpy calls on two (8, 5) arrays."""
    import flfun.numpy as fnp
    from flfun.nn import functional as F
    unary = [fnp.sin, fnp.exp, fnp.tanh, fnp.abs, fnp.negative, lambda v: fnp.log1p(fnp.abs(v)), F.relu, F.gelu,
             F.sigmoid]
    binary = [fnp.add, fnp.multiply, fnp.subtract, fnp.maximum]
    r = np.random.default_rng(100 + seed)
    ops = [(int(r.integers(0, 3)), int(r.integers(0, 9)), int(r.integers(0, 4))) for _ in range(int(r.integers(2, 9)))]

    def f(a, b):
        vals = [a, b]
        for kind, u, k in ops:
            p, q = vals[-1], vals[len(vals) // 2]
            vals.append(unary[u](p) if kind == 0 else binary[k](p, q) if kind == 1 else
                        fnp.sum(p, axis=k % 2, keepdims=True) * q)
        return fnp.sum(vals[-1] * vals[-2])
    return f


def programs() -> dict:
    """Fingerprints of transforms of small functions, 60 random programs and their grads, and the W3/W6 steps."""
    import flfun as fl
    import flfun.numpy as fnp
    from flfun.nn import functional as F
    from benchmarks import w3_mlp, w6_transformer
    rng = np.random.default_rng(0)
    x, w, y = (fnp.asarray(rng.standard_normal(s, dtype=np.float32)) for s in ((8, 5), (5, 3), (8, 3)))
    loss = lambda w, x, y: fnp.mean((x @ w - y) ** 2)
    layer_norm = lambda a: (a - fnp.mean(a, axis=-1, keepdims=True)) / fnp.sqrt(fnp.var(a, axis=-1, keepdims=True) + 1e-5)
    out = {"grad_mse": fingerprint(fl.grad(loss), w, x, y),
           "vmap_grad": fingerprint(fl.vmap(fl.grad(loss), in_axes=(None, 0, 0)), w, x, y),
           "hessian": fingerprint(fl.hessian(lambda v: fnp.sum(fnp.tanh(v) ** 3)), x[0]),
           "jacfwd": fingerprint(fl.jacfwd(lambda v: fnp.sin(v) * v), x[0]),
           "softmax_ln": fingerprint(lambda a: F.softmax(layer_norm(a)), x)}
    for k in range(60):
        out[f"rand{k}"] = fingerprint(random_program(k), x, x * 2.0)
        out[f"rand{k}_grad"] = fingerprint(fl.grad(random_program(k), argnums=(0, 1)), x, x * 2.0)
    params, xb, yb = w3_mlp.data()
    params = [(fnp.asarray(a), fnp.asarray(b)) for a, b in params]
    out["W3"] = fingerprint(w3_mlp.flfun_step, params, fnp.asarray(xb), fnp.asarray(yb))
    wte, wpe, layers, w_head, xt, yt = w6_transformer.data()
    model = w6_transformer.flfun_model(wte, wpe, layers, w_head)
    opt, step = w6_transformer.flfun_step_fn(fnp.asarray(xt), fnp.asarray(yt))
    out["W6"] = fingerprint(step, model, opt.init(model))
    return out


def compare(before: dict, after: dict) -> list[str]:
    """``program: part`` for every fingerprint part that differs (a program missing on one side counts)."""
    diffs = [f"{k}: missing" for k in sorted(set(before) ^ set(after))]
    return diffs + [f"{k}: {part}" for k in sorted(set(before) & set(after))
                    for part in before[k] if before[k][part] != after[k][part]]


if __name__ == "__main__":
    if sys.argv[1:2] == ["dump"] and len(sys.argv) == 3:
        fps = programs()
        with open(sys.argv[2], "w") as fh:
            json.dump(fps, fh, indent=1, sort_keys=True)
        print(f"{len(fps)} programs written to {sys.argv[2]}")
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        a, b = (json.load(open(p)) for p in sys.argv[2:])
        diffs = compare(a, b)
        print(f"{len(a)} programs; {len(diffs)} differences", *diffs, sep="\n")
        sys.exit(1 if diffs else 0)
    else:
        sys.exit(__doc__)
