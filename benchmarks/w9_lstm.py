"""W9: LSTM language-model training step through ``scan`` (vocab 64, hidden 256, batch 32, T 64; SGD lr 1.0).

flfun ``jit`` + ``lax.scan`` against a hand-written numpy forward + BPTT with preallocated buffers (the floor), JAX
``jit`` + ``lax.scan``, PyTorch eager running the same loop, and ``torch.nn.LSTM``. Every implementation hoists the
input and output projections out of the loop as one GEMM each (WORKLOADS.md allows it). The compile-time check
measures the first call (trace + compile + run) minus a steady-state call at T = 64 and T = 1024 (flfun, JAX).

Run: ``python -m benchmarks.w9_lstm`` (``W9_THREADS=1`` runs every peer on one thread: on a machine whose other
processes keep both cores busy, multi-threaded BLAS spin-waits and its timings say little).
"""
from __future__ import annotations

import os
import time

THREADS = os.environ.get("W9_THREADS")
if THREADS:      # before numpy, torch or jax start their thread pools
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = THREADS
    os.environ["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={THREADS}"

import numpy as np  # noqa: E402

from benchmarks.harness import assert_check, markdown_table, peer_main, run_peer, run_rows, time_fn, timing_dict

os.environ.setdefault("JAX_PLATFORMS", "cpu")

TARGET = 0.5
CHECK = [4.17544, 4.16154, 4.14786]
V, H, B, LR = 64, 256, 32, 1.0
GFLOP = 3 * 2.21      # matmuls: forward 2.21 GFLOP at T = 64, about 3x with the backward pass


def data(T=64):
    """W9's draws: params (wemb, wx, wh, wout, b, bout), inputs (B, T) and targets (B, T)."""
    rng = np.random.default_rng(9)
    s = np.float32(1 / 16)
    wemb = rng.standard_normal((V, H), dtype=np.float32)
    wx, wh = (rng.standard_normal((H, 4 * H), dtype=np.float32) * s for _ in range(2))
    wout = rng.standard_normal((H, V), dtype=np.float32) * s
    tokens = rng.integers(0, V, (B, T + 1)).astype(np.int32)
    return [wemb, wx, wh, wout, np.zeros(4 * H, np.float32), np.zeros(V, np.float32)], tokens[:, :T], tokens[:, 1:]


def _losses(step, params, inp, tgt, n=3):
    out = []
    for _ in range(n):
        params, loss = step(params, inp, tgt)
        out.append(float(loss))
    return out


# ------------------------------------------------------------------------------------------------- numpy
def _sigmoid(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


class NumpyLSTM:
    """W9's step by hand: forward and BPTT over preallocated buffers, the weight gradients as one GEMM each."""

    def __init__(self, T):
        f = lambda *shape: np.empty(shape, np.float32)
        self.T = T
        self.x, self.xw, self.act = f(T, B, H), f(T, B, 4 * H), f(T, B, 4 * H)
        self.c, self.tc, self.h = f(T + 1, B, H), f(T, B, H), f(T + 1, B, H)
        self.dg, self.dhs = f(T, B, 4 * H), f(T, B, H)
        self.dh, self.dc, self.tmp, self.tmp2 = f(B, H), f(B, H), f(B, H), f(B, H)
        self.eye = np.eye(V, dtype=np.float32)

    def __call__(self, params, inp, tgt):
        wemb, wx, wh, wout, b, bout = params
        T, x, xw, act, c, tc, h = self.T, self.x, self.xw, self.act, self.c, self.tc, self.h
        np.take(wemb, inp.T, axis=0, out=x)
        np.matmul(x, wx, out=xw)
        xw += b
        c[0] = 0
        h[0] = 0
        with np.errstate(over="ignore"):
            for t in range(T):
                a = act[t]
                np.matmul(h[t], wh, out=a)
                a += xw[t]
                _sigmoid(a[:, :2 * H], a[:, :2 * H])
                np.tanh(a[:, 2 * H:3 * H], out=a[:, 2 * H:3 * H])
                _sigmoid(a[:, 3 * H:], a[:, 3 * H:])
                np.multiply(a[:, H:2 * H], c[t], out=c[t + 1])
                np.multiply(a[:, :H], a[:, 2 * H:3 * H], out=self.tmp)
                c[t + 1] += self.tmp
                np.tanh(c[t + 1], out=tc[t])
                np.multiply(a[:, 3 * H:], tc[t], out=h[t + 1])
        hs = h[1:].reshape(T * B, H)
        z = hs @ wout + bout
        m = z.max(axis=1, keepdims=True)
        e = np.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        rows, y = np.arange(T * B), tgt.T.reshape(-1)
        loss = np.mean(np.log(s[:, 0]) + m[:, 0] - z[rows, y])
        dz = e / s
        dz[rows, y] -= 1
        dz /= np.float32(T * B)
        gwout, gbout = hs.T @ dz, dz.sum(0)
        np.matmul(dz, wout.T, out=self.dhs.reshape(T * B, H))
        self._bptt(wh)
        dg = self.dg.reshape(T * B, 4 * H)
        gwh = h[:-1].reshape(T * B, H).T @ dg
        gwx = x.reshape(T * B, H).T @ dg
        gb = dg.sum(0)
        gwemb = self.eye[inp.T.reshape(-1)].T @ (dg @ wx.T)
        grads = [gwemb, gwx, gwh, gwout, gb, gbout]
        return [p - np.float32(LR) * g for p, g in zip(params, grads)], loss

    def _bptt(self, wh):
        act, c, tc, dg, dh, dc, tmp, tmp2 = self.act, self.c, self.tc, self.dg, self.dh, self.dc, self.tmp, self.tmp2
        dh[...] = 0
        dc[...] = 0
        for t in range(self.T - 1, -1, -1):
            a, d = act[t], dg[t]
            i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            dh += self.dhs[t]
            np.multiply(dh, tc[t], out=tmp)                    # do = dh tanh(c) o (1 - o)
            np.subtract(1, o, out=tmp2)
            tmp2 *= o
            np.multiply(tmp, tmp2, out=d[:, 3 * H:])
            np.multiply(tc[t], tc[t], out=tmp)                 # dc += dh o (1 - tanh(c)^2)
            np.subtract(1, tmp, out=tmp)
            tmp *= o
            tmp *= dh
            dc += tmp
            np.multiply(dc, g, out=d[:, :H])                   # di = dc g i (1 - i)
            np.subtract(1, i, out=tmp2)
            tmp2 *= i
            d[:, :H] *= tmp2
            np.multiply(dc, c[t], out=d[:, H:2 * H])           # df = dc c_prev f (1 - f)
            np.subtract(1, f, out=tmp2)
            tmp2 *= f
            d[:, H:2 * H] *= tmp2
            np.multiply(g, g, out=tmp2)                        # dg = dc i (1 - g^2)
            np.subtract(1, tmp2, out=tmp2)
            tmp2 *= i
            np.multiply(dc, tmp2, out=d[:, 2 * H:3 * H])
            np.matmul(d, wh.T, out=dh)
            dc *= f


def run_numpy():
    params, inp, tgt = data()
    step = NumpyLSTM(inp.shape[1])
    check = _losses(step, params, inp, tgt)
    assert_check("W9 numpy", check, CHECK)
    return {"variants": {"forward + BPTT (hand-written, floor)": timing_dict(
        time_fn(lambda: step(params, inp, tgt), TARGET))}, "check": check}


# ------------------------------------------------------------------------------------------------- flfun
def flfun_loss(params, inp, tgt):
    """W9's loss in flfun: the LSTM cell inline, the time loop one ``lax.scan``."""
    import flfun.numpy as fnp
    from flfun import lax, nn
    from flfun.nn.losses import softmax_cross_entropy
    wemb, wx, wh, wout, b, bout = params
    T = inp.shape[1]
    xw = fnp.take(wemb, inp.T, axis=0) @ wx + b

    def cell(carry, g_x):
        h, c = carry
        g = g_x + h @ wh
        i, f, gg, o = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * fnp.tanh(gg)
        h = nn.sigmoid(o) * fnp.tanh(c)
        return (h, c), h
    zero = fnp.zeros((B, H), fnp.float32)
    _, hs = lax.scan(cell, (zero, zero), xw)
    logits = hs @ wout + bout
    return softmax_cross_entropy(logits.reshape(T * B, V), tgt.T.reshape(T * B))


def flfun_step(params, inp, tgt):
    import flfun as fl
    loss, grads = fl.value_and_grad(flfun_loss)(params, inp, tgt)
    return [p - LR * g for p, g in zip(params, grads)], loss


def _compile_time(make_step, to_arrays, sync, T) -> dict:
    """First call (trace + compile + run) and a steady call (median of 3) of a fresh jitted step at ``T``, in wall
    seconds and in this process's CPU seconds (steadier on a busy machine when the peers run on one thread)."""
    params, inp, tgt = (to_arrays(a) for a in data(T))
    step = make_step()
    times = []
    for _ in range(4):
        t0, c0 = time.perf_counter(), time.process_time()
        sync(step(params, inp, tgt))
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    (first, first_cpu), rest = times[0], np.median(np.asarray(times[1:]), axis=0)
    return {"first_s": first, "steady_s": float(rest[0]), "compile_s": first - float(rest[0]),
            "first_cpu_s": first_cpu, "steady_cpu_s": float(rest[1]), "compile_cpu_s": first_cpu - float(rest[1])}


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    params, inp, tgt = data()
    to = lambda a: [fnp.asarray(x) for x in a] if isinstance(a, list) else fnp.asarray(a)
    fp, fi, ft = to(params), to(inp), to(tgt)
    step = fl.jit(flfun_step)
    check = _losses(step, fp, fi, ft)
    assert_check("W9 flfun jit", check, CHECK)
    out = {"jit step (lax.scan)": time_fn(lambda: step(fp, fi, ft), TARGET)}
    floor = NumpyLSTM(inp.shape[1])
    out["numpy floor (same process)"] = time_fn(lambda: floor(params, inp, tgt), TARGET)
    sync = lambda r: r
    compile_s = {T: _compile_time(lambda: fl.jit(flfun_step), to, sync, T) for T in (64, 1024)}
    t0 = time.perf_counter()
    lowered = fl.jit(flfun_step).lower(*(to(a) for a in data(1024)))
    lowered.compile()
    lower_1024 = time.perf_counter() - t0
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": check, "compile": compile_s,
            "lower_compile_1024_s": lower_1024, "plan_1024": lowered.plan.totals()}


def first_call_parts(T: int) -> dict:
    """W9's first jitted call at ``T`` in pieces, wall seconds (run it in a fresh process): trace, passes, plan, code
    generation (with the arena's allocation, untouched), the first run, a steady run (median of 3), and ``touch``:
    a fresh host segment of the arena's size mapped and written once by itself (after the step's own arena exists,
    so it gets fresh pages from the OS as the arena did); ``*_cpu``: the same in this process's CPU seconds."""
    import flfun as fl
    import flfun.numpy as fnp
    from flfun.memory import make_memory
    args = [[fnp.asarray(x) for x in a] if isinstance(a, list) else fnp.asarray(a) for a in data(T)]
    step = fl.jit(flfun_step)
    t = [(time.perf_counter(), time.process_time())]
    mark = lambda _=None: t.append((time.perf_counter(), time.process_time()))
    mark(step._trace(args, {}))
    lowered = step.lower(*args)
    mark()
    nbytes = lowered.plan.arena_bytes
    mark()
    compiled = lowered.compile()
    mark()
    for _ in range(4):
        mark(compiled(*args))
    mark(make_memory("host").alloc(nbytes)[1].fill(1))
    d = np.diff(np.asarray(t), axis=0)
    names = ("trace", "passes", "plan", "codegen", "first_run")
    return {**dict(zip(names, d[:5, 0])), "steady": float(np.median(d[5:8, 0])), "touch": d[8, 0],
            "first_run_cpu": d[4, 1], "steady_cpu": float(np.median(d[5:8, 1])), "touch_cpu": d[8, 1],
            "arena_MiB": nbytes / 2 ** 20}


# ------------------------------------------------------------------------------------------------- peers
def jax_step_fn():
    import jax
    import jax.numpy as jnp

    def loss_fn(params, inp, tgt):
        wemb, wx, wh, wout, b, bout = params
        T = inp.shape[1]
        xw = wemb[inp.T] @ wx + b

        def cell(carry, g_x):
            h, c = carry
            g = g_x + h @ wh
            i, f, gg, o = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        zero = jnp.zeros((B, H), jnp.float32)
        _, hs = jax.lax.scan(cell, (zero, zero), xw)
        z = (hs @ wout + bout).reshape(T * B, V)
        y = tgt.T.reshape(T * B)
        return jnp.mean(jax.nn.logsumexp(z, axis=1) - jnp.take_along_axis(z, y[:, None], axis=1)[:, 0])

    def step(params, inp, tgt):
        loss, grads = jax.value_and_grad(loss_fn)(params, inp, tgt)
        return [p - LR * g for p, g in zip(params, grads)], loss
    return step


def run_jax():
    import jax
    import jax.numpy as jnp
    params, inp, tgt = data()
    to = lambda a: [jnp.asarray(x) for x in a] if isinstance(a, list) else jnp.asarray(a)
    jp, ji, jt = to(params), to(inp), to(tgt)
    step = jax.jit(jax_step_fn())
    check = _losses(step, jp, ji, jt)
    assert_check("W9 jax", check, CHECK)
    t = time_fn(lambda: jax.block_until_ready(step(jp, ji, jt)), TARGET)
    compile_s = {T: _compile_time(lambda: jax.jit(jax_step_fn()), to, jax.block_until_ready, T) for T in (64, 1024)}
    return {"variants": {"jit step (lax.scan)": timing_dict(t)}, "check": check, "compile": compile_s}


def torch_loop_step(params, inp, tgt):
    """W9's step in PyTorch eager: the same hand-written cell in a Python loop, SGD in place."""
    import torch
    import torch.nn.functional as TF
    wemb, wx, wh, wout, b, bout = params
    T = inp.shape[1]
    xw = wemb[inp.T] @ wx + b
    h = c = torch.zeros(B, H)
    hs = []
    for t in range(T):
        g = xw[t] + h @ wh
        i, f, gg, o = g.split(H, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        h = torch.sigmoid(o) * torch.tanh(c)
        hs.append(h)
    logits = torch.stack(hs) @ wout + bout
    loss = TF.cross_entropy(logits.reshape(T * B, V), tgt.T.reshape(T * B))
    _sgd(params, loss)
    return params, loss.detach()


def _sgd(params, loss):
    import torch
    loss.backward()
    with torch.no_grad():
        for p in params:
            p -= LR * p.grad
            p.grad = None


class TorchLSTM:
    """W9 with ``torch.nn.LSTM`` (weights ``wx.T``, ``wh.T``, ``b_ih = b``, ``b_hh`` frozen at 0)."""

    def __init__(self, params):
        import torch
        wemb, wx, wh, wout, b, bout = params
        self.lstm = torch.nn.LSTM(H, H)
        with torch.no_grad():
            self.lstm.weight_ih_l0.copy_(torch.from_numpy(wx.T.copy()))
            self.lstm.weight_hh_l0.copy_(torch.from_numpy(wh.T.copy()))
            self.lstm.bias_ih_l0.copy_(torch.from_numpy(b))
            self.lstm.bias_hh_l0.zero_()
        self.lstm.bias_hh_l0.requires_grad_(False)
        self.wemb, self.wout, self.bout = (torch.from_numpy(a.copy()).requires_grad_() for a in (wemb, wout, bout))
        self.params = [self.wemb, self.lstm.weight_ih_l0, self.lstm.weight_hh_l0, self.lstm.bias_ih_l0, self.wout,
                       self.bout]

    def __call__(self, _, inp, tgt):
        import torch.nn.functional as TF
        T = inp.shape[1]
        hs, _ = self.lstm(self.wemb[inp.T])
        logits = hs @ self.wout + self.bout
        loss = TF.cross_entropy(logits.reshape(T * B, V), tgt.T.reshape(T * B))
        _sgd(self.params, loss)
        return None, loss.detach()


def run_torch():
    import torch
    if THREADS:
        torch.set_num_threads(int(THREADS))
    params, inp, tgt = data()
    ti, tt = torch.from_numpy(inp).long(), torch.from_numpy(tgt).long()
    leaves = lambda: [torch.from_numpy(p.copy()).requires_grad_() for p in params]
    check = _losses(torch_loop_step, leaves(), ti, tt)
    assert_check("W9 torch loop", check, CHECK)
    check_nn = _losses(TorchLSTM(params), None, ti, tt)
    assert_check("W9 torch nn.LSTM", check_nn, CHECK)
    loop_params, lstm = leaves(), TorchLSTM(params)
    out = {"eager step (same loop)": time_fn(lambda: torch_loop_step(loop_params, ti, tt), TARGET, loops=5),
           "eager step (nn.LSTM)": time_fn(lambda: lstm(None, ti, tt), TARGET, loops=5)}
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": check}


PEERS = {"numpy": run_numpy, "flfun": run_flfun, "jax": run_jax, "torch": run_torch,
         "parts64": lambda: first_call_parts(64), "parts1024": lambda: first_call_parts(1024)}
BASE = "numpy/forward + BPTT (hand-written, floor)"


def main() -> str:
    rows, extras = run_rows("benchmarks.w9_lstm", [("numpy", None), ("flfun", None), ("jax", "jax"),
                                                   ("torch", "torch")], BASE)
    table = markdown_table(f"W9: LSTM LM training step through scan (T 64, about {GFLOP:.1f} GFLOP of GEMMs)",
                           rows, BASE)
    notes = [f"- {r['peer']} {r['variant']}: {GFLOP / r['median']:.1f} GFLOP/s" for r in rows if "median" in r]
    fl_rows = {r.get("variant"): r for r in rows if r.get("peer") == "flfun" and "median" in r}
    if "jit step (lax.scan)" in fl_rows and "numpy floor (same process)" in fl_rows:
        own = fl_rows["jit step (lax.scan)"]["median"] / fl_rows["numpy floor (same process)"]["median"]
        notes.append(f"- flfun jit step / numpy floor timed in the flfun process: {own:.2f}x")
    notes += ["", f"Compile time = first call - steady call (median of 3), wall s / CPU s of the peer's process"
              f"{' (one thread)' if THREADS else ''}:", "",
              "| peer | T=64 first | T=64 steady | T=64 compile | T=1024 first | T=1024 steady | T=1024 compile | "
              "ratio 1024/64 (wall, CPU) |", "|---|---|---|---|---|---|---|---|"]
    for peer in ("flfun", "jax"):
        c = extras.get(peer, {}).get("compile")
        if c:
            a, b = c["64"], c["1024"]
            cell = lambda d, k: f"{d[k + '_s']:.3f} / {d[k + '_cpu_s']:.3f}"
            notes.append(f"| {peer} | {cell(a, 'first')} | {cell(a, 'steady')} | {cell(a, 'compile')} | "
                         f"{cell(b, 'first')} | {cell(b, 'steady')} | {cell(b, 'compile')} | "
                         f"{b['compile_s'] / a['compile_s']:.2f}x, {b['compile_cpu_s'] / a['compile_cpu_s']:.2f}x |")
    if "flfun" in extras:
        notes.append(f"\n- flfun trace + passes + plan + code generation at T=1024 (no run): "
                     f"{extras['flfun']['lower_compile_1024_s']:.3f} s; plan at T=1024: {extras['flfun']['plan_1024']}")
    return table + "\n" + "\n".join(notes + _parts_table()) + "\n"


def _parts_table() -> list[str]:
    """The first call's pieces at T=64 and T=1024 (``first_call_parts``, each in a fresh process)."""
    parts = {T: run_peer("benchmarks.w9_lstm", f"parts{T}") for T in (64, 1024)}
    if None in parts.values():
        return []
    keys = ("trace", "passes", "plan", "codegen")
    lines = ["", "flfun's first call in pieces (a fresh process per T; wall s, and wall / CPU s where both; touch: a "
             "fresh segment of the arena's size mapped and written once by itself; compile work = first - steady - "
             "touch):", "", "| T | " + " | ".join(keys) + " | first run | steady | first - steady | arena | touch | "
             "compile work |", "|---" * (len(keys) + 7) + "|"]
    work = {}
    for T, p in parts.items():
        before = sum(p[k] for k in keys)
        first = (before + p["first_run"] - p["steady"], before + p["first_run_cpu"] - p["steady_cpu"])
        work[T] = first + (first[0] - p["touch"], first[1] - p["touch_cpu"])
        pair = lambda a, b: f"{a:.3f} / {b:.3f}"
        lines.append(f"| {T} | " + " | ".join(f"{p[k]:.3f}" for k in keys) + " | " + " | ".join(
            [pair(p["first_run"], p["first_run_cpu"]), pair(p["steady"], p["steady_cpu"]), pair(*first[:2]),
             f"{p['arena_MiB']:.1f} MiB", pair(p["touch"], p["touch_cpu"]), pair(*work[T][2:])]) + " |")
    a, b = work[64], work[1024]
    lines.append(f"\n- ratio T=1024 / T=64 (wall, CPU): first - steady {b[0] / a[0]:.2f}x, {b[1] / a[1]:.2f}x; "
                 f"compile work alone {b[2] / a[2]:.2f}x, {b[3] / a[3]:.2f}x")
    return lines

if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
