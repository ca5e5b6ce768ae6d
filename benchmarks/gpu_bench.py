"""GPU benchmarks: W1, W3 (small and big) and W6 (small and big) from ../shared/WORKLOADS.md for flfun on cupy
(eager, jit, jit + CUDA graph; fp32 and TF32 GEMMs), hand-written cupy, PyTorch eager and JAX jit.

Each (framework, workload) runs in its own process and appends JSON lines (one per variant) to a results file;
``table`` turns the file into the markdown table of benchmarks/RESULTS.md. GPU timing: warm-up calls, ``n`` calls
calibrated to about ``T`` seconds, one device synchronisation per loop, median and min of 7 loops.

Run everything with ``bash benchmarks/gpu.sh``; one part with
``python -m benchmarks.gpu_bench run FRAMEWORK WORKLOADS RESULTS.jsonl`` (FRAMEWORK: flfun, cupy, torch, jax;
WORKLOADS: a comma-separated subset of w1, w3s, w3b, w6s, w6b) and ``python -m benchmarks.gpu_bench table RESULTS.jsonl``.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
import traceback

import numpy as np

W3 = {"w3s": dict(sizes=(784, 1024, 1024, 10), B=256, check=[3.10194, 2.78428, 2.63709], T=0.2),
      "w3b": dict(sizes=(4096, 4096, 4096, 10), B=8192, check=None, T=0.3)}
W6 = {"w6s": dict(V=96, D=128, H=4, L=2, F=512, S=128, B=16, check=[4.59682, 4.5259, 4.4662], T=0.2),
      "w6b": dict(V=96, D=1024, H=16, L=8, F=4096, S=1024, B=8, check=None, T=0.4)}
LR3, LR6, B1, B2, EPS, WD = 0.01, 3e-4, 0.9, 0.999, 1e-8, 0.01
GFLOP = {"w3s": 2.448}
TITLES = {"w1": "W1: eager dispatch (x + y and sum(x*y + 1) on 100 floats)",
          "w3s": "W3 small: MLP training step 784-1024-1024-10, batch 256",
          "w3b": "W3 big: MLP training step 4096-4096-4096-10, batch 8192",
          "w6s": "W6 small: Transformer LM step (d 128, 4 heads, 2 layers, T 128, B 16)",
          "w6b": "W6 big: Transformer LM step (d 1024, 16 heads, 8 layers, T 1024, B 8)"}
_OUT = [None]
DRY = os.environ.get("GPU_BENCH_DRY") == "1"     # CPU dry run of the script's logic: tiny sizes, CPU devices
if DRY:
    os.environ["FLFUN_BACKEND"] = "numpy"
    W3["w3b"].update(sizes=(64, 32, 32, 10), B=16)
    W6["w6b"].update(D=32, H=2, L=2, F=64, S=16, B=2)
    for cfg in (*W3.values(), *W6.values()):
        cfg["T"] = 0.01


def emit(workload, framework, variant, precision, timing=None, check=None, note=""):
    row = {"workload": workload, "framework": framework, "variant": variant, "precision": precision,
           "check": [float(c) for c in check] if check is not None else None, "note": note}
    if timing is not None:
        row.update(median_s=timing[0], min_s=timing[1], n=timing[2])
    line = json.dumps(row)
    print(line, flush=True)
    with open(_OUT[0], "a") as f:
        f.write(line + "\n")


def gpu_time(fn, sync, target, loops=7, warmup=2):
    """(median, min, n): seconds per call over ``loops`` loops of ``n`` calls, one sync per loop."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = time.perf_counter() - t0
    n = max(1, min(20000, int(target / max(one, 1e-7))))
    times = []
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times), min(times), n


def check_note(got, want, precision):
    if want is None:
        return ""
    ok = np.allclose(got, want, rtol=2e-5 if precision == "fp32" else 3e-3, atol=1e-6)
    return "check ok" if ok else f"CHECK MISMATCH (want {want})"


# --------------------------------------------------------------------------------------------------- data
def w1_data():
    rng = np.random.default_rng(1)
    return rng.standard_normal(100, dtype=np.float32), rng.standard_normal(100, dtype=np.float32)


def w3_data(sizes, B):
    rng = np.random.default_rng(3)
    params = []
    for fi, fo in zip(sizes, sizes[1:]):
        params.append((rng.standard_normal((fi, fo), dtype=np.float32) * np.float32(np.sqrt(2 / fi)),
                       np.zeros((fo,), np.float32)))
    x = rng.standard_normal((B, sizes[0]), dtype=np.float32)
    return params, x, rng.integers(0, sizes[-1], B).astype(np.int32)


def w6_data(V, D, H, L, F, S, B, **_):
    rng = np.random.default_rng(6)
    n = lambda *shape: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    wte, wpe = n(V, D), n(S, D)
    layers = [dict(w_qkv=n(D, 3 * D), w_o=n(D, D), w_fc=n(D, F), w_proj=n(F, D)) for _ in range(L)]
    w_head = n(D, V)
    tokens = rng.integers(0, V, (B, S + 1)).astype(np.int32)
    return wte, wpe, layers, w_head, tokens[:, :S], tokens[:, 1:]


# --------------------------------------------------------------------------------------------------- flfun
def run_flfun(workload):
    import flfun as fl
    import flfun.numpy as fnp
    from flfun.config import config
    dev = fl.devices("numpy" if DRY else "cupy")[0]
    sync = dev.synchronize
    if workload == "w1":
        x, y = (fnp.asarray(a, device=dev) for a in w1_data())
        chain = lambda x, y: fnp.sum(x * y + 1.0)
        jchain = fl.jit(chain)
        emit("w1", "flfun", "eager add", "fp32", gpu_time(lambda: x + y, sync, 0.1))
        emit("w1", "flfun", "eager chain", "fp32", gpu_time(lambda: chain(x, y), sync, 0.1))
        for graphs in (False, True):
            config.cuda_graphs = graphs
            emit("w1", "flfun", "jit chain" + (" + graph" if graphs else ""), "fp32",
                 gpu_time(lambda: jchain(x, y), sync, 0.1))
        return
    if workload in W3:
        from benchmarks.w3_mlp import flfun_step as step
        cfg = W3[workload]
        pn, xn, yn = w3_data(cfg["sizes"], cfg["B"])
        x, y = fnp.asarray(xn, device=dev), fnp.asarray(yn, device=dev)
        fresh = lambda: [(fnp.asarray(w, device=dev), fnp.asarray(b, device=dev)) for w, b in pn]
        call = lambda f, s: f(s, x, y)
        jstep = fl.jit(step, donate_argnums=0)
    else:
        from flfun import optim
        from models.transformer import loss_fn
        cfg = W6[workload]
        wte, wpe, layers, w_head, xn, yn = w6_data(**cfg)
        x, y = fnp.asarray(xn, device=dev), fnp.asarray(yn, device=dev)
        opt = optim.adamw(LR6, B1, B2, EPS, weight_decay=WD)

        def step(state):
            model, opt_state = state
            loss, grads = fl.value_and_grad(loss_fn)(model, x, y)
            updates, opt_state = opt.update(grads, opt_state, model)
            return (optim.apply_updates(model, updates), opt_state), loss

        def fresh():
            model = flfun_gpt(cfg, wte, wpe, layers, w_head, dev)
            return model, opt.init(model)
        call = lambda f, s: f(s)
        jstep = fl.jit(step, donate_argnums=0)
    variants = [("eager", "fp32", False, False), ("jit", "fp32", True, False), ("jit + graph", "fp32", True, True),
                ("jit + graph", "tf32", True, True)]
    if workload in ("w3b", "w6b"):
        variants = variants[1:]
    for name, prec, jit, graphs in variants:
        config.tf32, config.cuda_graphs = prec == "tf32", graphs
        fn = jstep if jit else step
        try:
            t0 = time.perf_counter()
            state, losses = fresh(), []
            for _ in range(3):
                state, loss = call(fn, state)
                losses.append(float(loss))
            first = time.perf_counter() - t0
            box = [state]

            def one():
                box[0], _ = call(fn, box[0])
            timing = gpu_time(one, sync, cfg["T"], loops=5 if not jit else 7)
            note = check_note(losses, cfg["check"], prec)
            if jit:
                exe = (jstep.lower(box[0], x, y) if workload in W3 else jstep.lower(box[0])).compile().executable
                note += f"; first 3 steps {first:.2f} s; graph: {getattr(exe, 'graph_status', '?')}"
            emit(workload, "flfun", name, prec, timing, losses, note)
        except Exception as e:  # noqa: BLE001 - report and go on with the next variant
            traceback.print_exc()
            emit(workload, "flfun", name, prec, note=f"FAILED: {type(e).__name__}: {str(e)[:200]}")
    config.tf32, config.cuda_graphs = False, True


def flfun_gpt(cfg, wte, wpe, layers, w_head, dev):
    """``models.transformer.GPT`` holding W6's initial weights (biases 0, LN gains 1) on ``dev``."""
    import flfun.numpy as fnp
    import flfun.random as fr
    from models.transformer import GPT, GPTConfig
    a = lambda v: fnp.asarray(v, device=dev)
    model = GPT(GPTConfig(cfg["V"], cfg["D"], cfg["H"], cfg["L"], cfg["F"] // cfg["D"], cfg["S"]), key=fr.key(0))
    blocks = []
    for blk, w in zip(model.blocks, layers):
        attn = blk.attn.replace(qkv=blk.attn.qkv.replace(weight=a(w["w_qkv"])),
                                out=blk.attn.out.replace(weight=a(w["w_o"])))
        blocks.append(blk.replace(attn=attn, fc=blk.fc.replace(weight=a(w["w_fc"])),
                                  proj=blk.proj.replace(weight=a(w["w_proj"]))))
    return model.replace(wte=model.wte.replace(weight=a(wte)), wpe=a(wpe), blocks=tuple(blocks),
                         head=model.head.replace(weight=a(w_head)))


# ---------------------------------------------------------------------------------------------------- cupy
def run_cupy(workload):
    import cupy as cp
    sync = cp.cuda.Device().synchronize
    if workload == "w1":
        x, y = (cp.asarray(a) for a in w1_data())
        emit("w1", "cupy", "add", "fp32", gpu_time(lambda: x + y, sync, 0.1))
        emit("w1", "cupy", "chain", "fp32", gpu_time(lambda: cp.sum(x * y + 1.0), sync, 0.1))
        return
    if workload not in W3:
        return
    cfg = W3[workload]
    pn, xn, yn = w3_data(cfg["sizes"], cfg["B"])
    params = [(cp.asarray(w), cp.asarray(b)) for w, b in pn]
    x, y = cp.asarray(xn), cp.asarray(yn)
    step = cupy_step(cp)
    losses, state = [], params
    for _ in range(3):
        state, loss = step(state, x, y)
        losses.append(float(loss))
    box = [state]

    def one():
        box[0], _ = step(box[0], x, y)
    emit(workload, "cupy", "hand-written step", "fp32", gpu_time(one, sync, cfg["T"]), losses,
         check_note(losses, cfg["check"], "fp32"))


def cupy_step(cp):
    """W3's step written by hand in cupy (the numpy floor's code on the GPU)."""
    def step(params, x, y):
        (w1, b1), (w2, b2), (w3, b3) = params
        a1 = x @ w1 + b1
        h1 = cp.maximum(a1, 0)
        a2 = h1 @ w2 + b2
        h2 = cp.maximum(a2, 0)
        z = h2 @ w3 + b3
        m = z.max(axis=1, keepdims=True)
        e = cp.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        rows = cp.arange(len(y))
        loss = cp.mean(cp.log(s[:, 0]) + m[:, 0] - z[rows, y])
        dz = e / s
        dz[rows, y] -= 1
        dz /= cp.float32(len(y))
        gw3, gb3 = h2.T @ dz, dz.sum(0)
        d2 = (dz @ w3.T) * (a2 > 0)
        gw2, gb2 = h1.T @ d2, d2.sum(0)
        d1 = (d2 @ w2.T) * (a1 > 0)
        gw1, gb1 = x.T @ d1, d1.sum(0)
        grads = [(gw1, gb1), (gw2, gb2), (gw3, gb3)]
        lr = cp.float32(LR3)
        return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)], loss
    return step


# --------------------------------------------------------------------------------------------------- torch
def run_torch(workload):
    import torch
    import torch.nn.functional as Fn
    sync = (lambda: None) if DRY else torch.cuda.synchronize
    cuda = torch.device("cpu" if DRY else "cuda")
    if workload == "w1":
        x, y = (torch.from_numpy(a).to(cuda) for a in w1_data())
        emit("w1", "torch", "eager add", "fp32", gpu_time(lambda: x + y, sync, 0.1))
        emit("w1", "torch", "eager chain", "fp32", gpu_time(lambda: torch.sum(x * y + 1.0), sync, 0.1))
        return
    for prec in ("fp32", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        if workload in W3:
            cfg = W3[workload]
            pn, xn, yn = w3_data(cfg["sizes"], cfg["B"])
            params = [(torch.from_numpy(w.T.copy()).to(cuda).requires_grad_(),
                       torch.from_numpy(b).to(cuda).requires_grad_()) for w, b in pn]
            x, y = torch.from_numpy(xn).to(cuda), torch.from_numpy(yn).to(cuda).long()

            def step():
                h = x
                for i, (w, b) in enumerate(params):
                    h = Fn.linear(h, w, b)
                    if i < len(params) - 1:
                        h = torch.relu(h)
                loss = Fn.cross_entropy(h, y)
                loss.backward()
                with torch.no_grad():
                    for w, b in params:
                        w -= LR3 * w.grad
                        b -= LR3 * b.grad
                        w.grad = b.grad = None
                return loss.detach()
        else:
            cfg = W6[workload]
            step = torch_w6_step(torch, Fn, cfg, cuda)
        losses = [float(step()) for _ in range(3)]
        emit(workload, "torch", "eager step", prec, gpu_time(step, sync, cfg["T"]), losses,
             check_note(losses, cfg["check"], prec))


def torch_w6_step(torch, Fn, cfg, cuda):
    V, D, H, L, S, B = (cfg[k] for k in "VDHLSB")
    F = cfg["F"]
    wte, wpe, layers, w_head, xn, yn = w6_data(**cfg)
    t = lambda a: torch.from_numpy(np.array(a)).to(cuda).requires_grad_()
    z = lambda *s: torch.zeros(s, device=cuda, requires_grad=True)
    o = lambda *s: torch.ones(s, device=cuda, requires_grad=True)
    p = {"wte": t(wte), "wpe": t(wpe), "w_head": t(w_head), "lnf_g": o(D), "lnf_b": z(D)}
    for i, w in enumerate(layers):
        p.update({f"{i}.w_qkv": t(w["w_qkv"]), f"{i}.b_qkv": z(3 * D), f"{i}.w_o": t(w["w_o"]), f"{i}.b_o": z(D),
                  f"{i}.w_fc": t(w["w_fc"]), f"{i}.b_fc": z(F), f"{i}.w_proj": t(w["w_proj"]), f"{i}.b_proj": z(D),
                  f"{i}.ln1_g": o(D), f"{i}.ln1_b": z(D), f"{i}.ln2_g": o(D), f"{i}.ln2_b": z(D)})
    x, y = torch.from_numpy(xn).to(cuda).long(), torch.from_numpy(yn).to(cuda).long()
    opt = torch.optim.AdamW(p.values(), lr=LR6, betas=(B1, B2), eps=EPS, weight_decay=WD)

    def step():
        h = p["wte"][x] + p["wpe"][:S]
        for i in range(L):
            a = Fn.layer_norm(h, (D,), p[f"{i}.ln1_g"], p[f"{i}.ln1_b"], 1e-5)
            q, k, v = (a @ p[f"{i}.w_qkv"] + p[f"{i}.b_qkv"]).split(D, dim=-1)
            q, k, v = (m.view(B, S, H, D // H).transpose(1, 2) for m in (q, k, v))
            att = Fn.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + att.transpose(1, 2).reshape(B, S, D) @ p[f"{i}.w_o"] + p[f"{i}.b_o"]
            a = Fn.layer_norm(h, (D,), p[f"{i}.ln2_g"], p[f"{i}.ln2_b"], 1e-5)
            h = h + Fn.gelu(a @ p[f"{i}.w_fc"] + p[f"{i}.b_fc"], approximate="tanh") @ p[f"{i}.w_proj"] \
                + p[f"{i}.b_proj"]
        logits = Fn.layer_norm(h, (D,), p["lnf_g"], p["lnf_b"], 1e-5) @ p["w_head"]
        loss = Fn.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


# ----------------------------------------------------------------------------------------------------- jax
def run_jax(workload):
    import jax
    import jax.numpy as jnp
    if workload == "w1":
        x, y = (jnp.asarray(a) for a in w1_data())
        f = jax.jit(lambda x, y: jnp.sum(x * y + 1.0))
        emit("w1", "jax", "eager add", "fp32", gpu_time(lambda: (x + y).block_until_ready(), lambda: None, 0.1))
        emit("w1", "jax", "jit chain", "fp32", gpu_time(lambda: f(x, y).block_until_ready(), lambda: None, 0.1))
        return
    for prec, name in (("tf32", "default"), ("fp32", "highest")):
        with jax.default_matmul_precision("tensorfloat32" if prec == "tf32" else "float32"):
            if workload in W3:
                cfg = W3[workload]
                from benchmarks.w3_mlp import jax_step_fn
                pn, xn, yn = w3_data(cfg["sizes"], cfg["B"])
                state = [[(jnp.asarray(w), jnp.asarray(b)) for w, b in pn]]
                args = (jnp.asarray(xn), jnp.asarray(yn))
                jstep = jax.jit(jax_step_fn(), donate_argnums=0)
                call = lambda s: jstep(s, *args)
            else:
                cfg = W6[workload]
                call, state = jax_w6(jax, jnp, cfg)
            losses = []
            for _ in range(3):
                state[0], loss = call(state[0])
                losses.append(float(loss))

            def one():
                state[0], loss = call(state[0])
                jax.block_until_ready(loss)
            emit(workload, "jax", f"jit step ({name})", prec, gpu_time(one, lambda: jax.block_until_ready(state[0]),
                                                                       cfg["T"]), losses,
                 check_note(losses, cfg["check"], prec))


def jax_w6(jax, jnp, cfg):
    V, D, H, L, S, B, F = (cfg[k] for k in "VDHLSBF")
    wte, wpe, layers, w_head, xn, yn = w6_data(**cfg)
    zeros, ones = (lambda n: jnp.zeros(n, jnp.float32)), (lambda n: jnp.ones(n, jnp.float32))
    p = {"wte": jnp.asarray(wte), "wpe": jnp.asarray(wpe), "w_head": jnp.asarray(w_head), "lnf_g": ones(D),
         "lnf_b": zeros(D),
         "layers": [{**{k: jnp.asarray(v) for k, v in w.items()}, "b_qkv": zeros(3 * D), "b_o": zeros(D),
                     "b_fc": zeros(F), "b_proj": zeros(D), "ln1_g": ones(D), "ln1_b": zeros(D), "ln2_g": ones(D),
                     "ln2_b": zeros(D)} for w in layers]}
    x, y = jnp.asarray(xn), jnp.asarray(yn)

    def ln(h, g, b):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5) * g + b

    def loss(p):
        h = p["wte"][x] + p["wpe"][:S]
        mask = jnp.tril(jnp.ones((S, S), bool))
        for lp in p["layers"]:
            a = ln(h, lp["ln1_g"], lp["ln1_b"])
            qkv = a @ lp["w_qkv"] + lp["b_qkv"]
            q, k, v = (qkv[..., i * D:(i + 1) * D].reshape(B, S, H, D // H).transpose(0, 2, 1, 3) for i in range(3))
            s = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / math.sqrt(D // H), -jnp.inf)
            att = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
            h = h + att @ lp["w_o"] + lp["b_o"]
            a = ln(h, lp["ln2_g"], lp["ln2_b"])
            h = h + jax.nn.gelu(a @ lp["w_fc"] + lp["b_fc"], approximate=True) @ lp["w_proj"] + lp["b_proj"]
        z = ln(h, p["lnf_g"], p["lnf_b"]) @ p["w_head"]
        return jnp.mean(jax.nn.logsumexp(z, -1) - jnp.take_along_axis(z, y[..., None], -1)[..., 0])

    @jax.jit
    def step(state):
        p, m, v, t = state
        value, g = jax.value_and_grad(loss)(p)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, v, g)
        lr_t, bc2 = LR6 / (1 - B1 ** t), jnp.sqrt(1 - B2 ** t)
        p = jax.tree_util.tree_map(lambda p, m, v: p * (1 - LR6 * WD) - lr_t * m / (jnp.sqrt(v) / bc2 + EPS), p, m, v)
        return (p, m, v, t), value
    zl = jax.tree_util.tree_map(jnp.zeros_like, p)
    return step, [(p, zl, zl, jnp.zeros((), jnp.float32))]


# --------------------------------------------------------------------------------------------------- table
def table(path: str) -> str:
    rows = [json.loads(line) for line in open(path) if line.strip().startswith("{")]
    out = []
    for wl, title in TITLES.items():
        rs = [r for r in rows if r["workload"] == wl]
        if not rs:
            continue
        base = {r["precision"]: r["median_s"] for r in rs if r["framework"] == "jax" and "median_s" in r}
        out += [f"#### {title}", "", "| framework | variant | GEMMs | median | min | vs JAX jit (same precision) "
                "| check (first 3 losses) / note |", "|---|---|---|---|---|---|---|"]
        for r in rs:
            if "median_s" not in r:
                out.append(f"| {r['framework']} | {r['variant']} | {r['precision']} | - | - | - | {r['note']} |")
                continue
            ref = base.get(r["precision"])
            ratio = f"{r['median_s'] / ref:.2f}x" if ref else "-"
            chk = ", ".join(f"{c:.6g}" for c in r["check"]) if r["check"] else ""
            note = "; ".join(x for x in (chk, r["note"]) if x)
            out.append(f"| {r['framework']} | {r['variant']} | {r['precision']} | {_fmt(r['median_s'])} | "
                       f"{_fmt(r['min_s'])} | {ratio} | {note} |")
        out.append("")
    return "\n".join(out)


def _fmt(s: float) -> str:
    return f"{s * 1e6:.1f} us" if s < 1e-3 else (f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s")


RUNNERS = {"flfun": run_flfun, "cupy": run_cupy, "torch": run_torch, "jax": run_jax}

if __name__ == "__main__":
    if sys.argv[1] == "table":
        print(table(sys.argv[2]))
    else:
        framework, workloads, _OUT[0] = sys.argv[2], sys.argv[3], sys.argv[4]
        for workload in workloads.split(","):
            try:
                RUNNERS[framework](workload)
            except Exception as e:  # noqa: BLE001 - report, then the next workload
                traceback.print_exc()
                emit(workload, framework, "all", "-", note=f"FAILED: {type(e).__name__}: {str(e)[:200]}")
