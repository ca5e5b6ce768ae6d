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
        from benchmarks.w3_mlp import data
        from benchmarks.w3_mlp import flfun_step as step
        cfg = W3[workload]
        pn, xn, yn = data(cfg["sizes"], cfg["B"])
        x, y = fnp.asarray(xn, device=dev), fnp.asarray(yn, device=dev)
        fresh = lambda: [(fnp.asarray(w, device=dev), fnp.asarray(b, device=dev)) for w, b in pn]
        call = lambda f, s: f(s, x, y)
        jstep = fl.jit(step, donate_argnums=0)
    else:
        from benchmarks.w6_transformer import data, flfun_model, flfun_step_fn
        cfg = W6[workload]
        wte, wpe, layers, w_head, xn, yn = data(**cfg)
        x, y = fnp.asarray(xn, device=dev), fnp.asarray(yn, device=dev)
        opt, w6_step = flfun_step_fn(x, y)

        def step(state):
            model, opt_state, loss = w6_step(*state)
            return (model, opt_state), loss

        def fresh():
            model = flfun_model(wte, wpe, layers, w_head, cfg, dev)
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
    from benchmarks.w3_mlp import data, hand_step
    cfg = W3[workload]
    pn, xn, yn = data(cfg["sizes"], cfg["B"])
    params = [(cp.asarray(w), cp.asarray(b)) for w, b in pn]
    x, y = cp.asarray(xn), cp.asarray(yn)
    step = hand_step(cp)
    losses, state = [], params
    for _ in range(3):
        state, loss = step(state, x, y)
        losses.append(float(loss))
    box = [state]

    def one():
        box[0], _ = step(box[0], x, y)
    emit(workload, "cupy", "hand-written step", "fp32", gpu_time(one, sync, cfg["T"]), losses,
         check_note(losses, cfg["check"], "fp32"))


# --------------------------------------------------------------------------------------------------- torch
def run_torch(workload):
    import torch
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
            from benchmarks.w3_mlp import data, torch_params, torch_step
            cfg = W3[workload]
            pn, xn, yn = data(cfg["sizes"], cfg["B"])
            params = torch_params(pn, cuda)
            x, y = torch.from_numpy(xn).to(cuda), torch.from_numpy(yn).to(cuda).long()
            step = lambda: torch_step(params, x, y)[1]
        else:
            from benchmarks.w6_transformer import torch_step_fn
            cfg = W6[workload]
            step = torch_step_fn(cfg, cuda)
        losses = [float(step()) for _ in range(3)]
        emit(workload, "torch", "eager step", prec, gpu_time(step, sync, cfg["T"]), losses,
             check_note(losses, cfg["check"], prec))


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
                from benchmarks.w3_mlp import data, jax_step_fn
                pn, xn, yn = data(cfg["sizes"], cfg["B"])
                state = [[(jnp.asarray(w), jnp.asarray(b)) for w, b in pn]]
                args = (jnp.asarray(xn), jnp.asarray(yn))
                jstep = jax.jit(jax_step_fn(), donate_argnums=0)
                call = lambda s: jstep(s, *args)
            else:
                from benchmarks.w6_transformer import jax_step_fn as jax_w6_step_fn
                cfg = W6[workload]
                w6_step, first = jax_w6_step_fn(cfg)
                state = [first]

                def call(s, w6_step=w6_step):
                    *s, value = w6_step(*s)
                    return tuple(s), value
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
