"""The Flashlight allocator experiment: does refusing to split large cached blocks cut fragmentation?

Records allocation traces of real eager training steps (W3 MLP, W6 transformer, and variable-shape versions of
both, where batch size / sequence length change from step to step), replays each through the caching allocator
with unrestricted splitting and with several ``max_split_size`` limits, and prints internal fragmentation, peak
reserved memory and OOMs under a fixed capacity. Also reproduces the classic 10 -> 5 -> 6 failure.

Run: ``python -m benchmarks.fragmentation [--quick] [--save-traces DIR]``; writes benchmarks/fragmentation.png.
"""
from __future__ import annotations

import argparse
import gc
import itertools
import os
import time

import numpy as np

import flfun
import flfun.numpy as fnp
from flfun import lax
from flfun.memory import CachingAllocator, Trace, record, replay
from flfun.memory.telemetry import format_table, plot_results

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
W3_CHECK = [3.10194, 2.78428, 2.63709]
W6_CHECK = [4.59682, 4.5259, 4.4662]


# -------------------------------------------------------------------------------------------------- model pieces
def mm(a, b):
    """``a @ b`` for a (..., k) and b (k, n), or batched (B.., m, k) @ (B.., k, n)."""
    if hasattr(fnp, "matmul"):
        return fnp.matmul(a, b)
    if b.ndim == 2:
        return lax.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())))
    batch = tuple(range(a.ndim - 2))
    return lax.dot_general(a, b, (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch)))


def log_softmax(z):
    m = lax.stop_gradient(fnp.max(z, axis=-1, keepdims=True))
    s = z - m
    return s - fnp.log(fnp.sum(fnp.exp(s), axis=-1, keepdims=True))


def cross_entropy(z, onehot):
    """Mean over rows of ``logsumexp(z) - z[label]``; labels arrive one-hot (a constant)."""
    n = int(np.prod(z.shape[:-1]))
    return -fnp.sum(onehot * log_softmax(z)) / n


def one_hot(labels: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k, dtype=np.float32)[labels]


# ---------------------------------------------------------------------------------------------------------- W3
def w3_init(widths=(784, 1024, 1024, 10)):
    rng = np.random.default_rng(3)
    params = []
    for fan_in, fan_out in itertools.pairwise(widths):
        w = rng.standard_normal((fan_in, fan_out), dtype=np.float32) * np.float32(np.sqrt(2 / fan_in))
        params += [fnp.asarray(w), fnp.zeros((fan_out,), dtype=np.float32)]
    return params, rng


def w3_loss(params, x, onehot):
    w1, b1, w2, b2, w3, b3 = params
    h1 = fnp.maximum(mm(x, w1) + b1, 0.0)
    h2 = fnp.maximum(mm(h1, w2) + b2, 0.0)
    return cross_entropy(mm(h2, w3) + b3, onehot)


def w3_step(params, x, onehot, lr=0.01):
    loss, grads = flfun.value_and_grad(w3_loss)(params, x, onehot)
    return [p - lr * g for p, g in zip(params, grads)], float(loss)


def w3_trace(steps: int, batches=None, seed=30) -> tuple[Trace, list]:
    """Record ``steps`` eager W3 steps; ``batches`` = a batch size per step (default 256 each, as in W3)."""
    params, rng = w3_init()
    if batches is None:
        xs = [rng.standard_normal((256, 784), dtype=np.float32)]
        ys = [rng.integers(0, 10, 256).astype(np.int32)]
        data = [(xs[0], ys[0])] * steps
    else:
        r = np.random.default_rng(seed)
        data = [(r.standard_normal((b, 784), dtype=np.float32), r.integers(0, 10, b).astype(np.int32))
                for b in batches]
    losses = []
    with record(workload="W3" if batches is None else "W3-variable") as trace:
        for x, y in data:
            params, loss = w3_step(params, fnp.asarray(x), fnp.asarray(one_hot(y, 10)))
            losses.append(loss)
            gc.collect()   # buffers held by reference cycles die at a fixed point: the trace is reproducible
    return trace, losses


# ---------------------------------------------------------------------------------------------------------- W6
V, D, H, L, F = 96, 128, 4, 2, 512


def w6_init():
    rng = np.random.default_rng(6)
    n = lambda *s: fnp.asarray(rng.standard_normal(s, dtype=np.float32) * np.float32(0.02))
    z = lambda *s: fnp.zeros(s, dtype=np.float32)
    o = lambda *s: fnp.ones(s, dtype=np.float32)
    wte, wpe = n(V, D), n(128, D)
    layers = []
    for _ in range(L):
        w_qkv, w_o, w_fc, w_proj = n(D, 3 * D), n(D, D), n(D, F), n(F, D)
        layers.append({"ln1_g": o(D), "ln1_b": z(D), "w_qkv": w_qkv, "b_qkv": z(3 * D), "w_o": w_o,
                       "b_o": z(D), "ln2_g": o(D), "ln2_b": z(D), "w_fc": w_fc, "b_fc": z(F),
                       "w_proj": w_proj, "b_proj": z(D)})
    w_head = n(D, V)
    params = {"wte": wte, "wpe": wpe, "layers": layers, "lnf_g": o(D), "lnf_b": z(D), "w_head": w_head}
    return params, rng


def layer_norm(x, g, b, eps=1e-5):
    mu = fnp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = fnp.mean(xc * xc, axis=-1, keepdims=True)
    return xc / fnp.sqrt(var + eps) * g + b


def gelu(x):
    return 0.5 * x * (1.0 + fnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def w6_loss(params, tok_onehot, tgt_onehot, mask):
    n, t = tok_onehot.shape[:2]
    x = mm(tok_onehot, params["wte"]) + lax.slice(params["wpe"], (0, 0), (t, D))
    for p in params["layers"]:
        h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        qkv = mm(h, p["w_qkv"]) + p["b_qkv"]
        q, k, v = (fnp.transpose(fnp.reshape(lax.slice(qkv, (0, 0, i * D), (n, t, (i + 1) * D)), (n, t, H, D // H)),
                                 (0, 2, 1, 3)) for i in range(3))
        s = mm(q, fnp.transpose(k, (0, 1, 3, 2))) * float(1.0 / np.sqrt(D // H)) + mask
        s = s - lax.stop_gradient(fnp.max(s, axis=-1, keepdims=True))
        e = fnp.exp(s)
        a = mm(e / fnp.sum(e, axis=-1, keepdims=True), v)
        a = fnp.reshape(fnp.transpose(a, (0, 2, 1, 3)), (n, t, D))
        x = x + mm(a, p["w_o"]) + p["b_o"]
        h = layer_norm(x, p["ln2_g"], p["ln2_b"])
        x = x + mm(gelu(mm(h, p["w_fc"]) + p["b_fc"]), p["w_proj"]) + p["b_proj"]
    x = layer_norm(x, params["lnf_g"], params["lnf_b"])
    return cross_entropy(mm(x, params["w_head"]), tgt_onehot)


def adamw(params, grads, state, lr=3e-4, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    m, v, t = state
    t += 1
    c1, c2 = 1 - b1 ** t, float(np.sqrt(1 - b2 ** t))
    lp, tree = flfun.tree_flatten(params)
    lg, lm, lv = flfun.tree_leaves(grads), flfun.tree_leaves(m), flfun.tree_leaves(v)
    new_p, new_m, new_v = [], [], []
    for p, g, mi, vi in zip(lp, lg, lm, lv):
        p = p * (1 - lr * wd)
        mi = b1 * mi + (1 - b1) * g
        vi = b2 * vi + (1 - b2) * (g * g)
        p = p - (lr / c1) * mi / (fnp.sqrt(vi) / c2 + eps)
        new_p.append(p), new_m.append(mi), new_v.append(vi)
    un = lambda xs: flfun.tree_unflatten(tree, xs)
    return un(new_p), (un(new_m), un(new_v), t)


def w6_trace(steps: int, shapes=None, seed=60) -> tuple[Trace, list]:
    """Record eager W6 steps; ``shapes`` = (batch, seq) per step (default (16, 128) each, as in W6)."""
    params, rng = w6_init()
    zeros = lambda p: flfun.tree_map(lambda a: fnp.zeros(a.shape, dtype=np.float32), p)
    state = (zeros(params), zeros(params), 0)
    if shapes is None:
        tokens = rng.integers(0, V, (16, 129)).astype(np.int32)
        data = [tokens] * steps
    else:
        r = np.random.default_rng(seed)
        data = [r.integers(0, V, (b, t + 1)).astype(np.int32) for b, t in shapes]
    grad_fn = flfun.value_and_grad(w6_loss)
    losses = []
    with record(workload="W6" if shapes is None else "W6-variable") as trace:
        for tokens in data:
            t = tokens.shape[1] - 1
            mask = fnp.asarray(np.triu(np.full((t, t), -np.inf, dtype=np.float32), k=1))
            loss, grads = grad_fn(params, fnp.asarray(one_hot(tokens[:, :t], V)),
                                  fnp.asarray(one_hot(tokens[:, 1:], V)), mask)
            params, state = adamw(params, grads, state)
            losses.append(float(loss))
            gc.collect()
    return trace, losses


# ------------------------------------------------------------------------------------------------- experiment
def scaled(trace: Trace, factor: float) -> Trace:
    """The same trace with every size multiplied by ``factor`` (a model ``factor`` times larger)."""
    return Trace([e._replace(requested=int(e.requested * factor), allocated=int(e.allocated * factor))
                  for e in trace.events], {**trace.meta, "scale": trace.meta.get("scale", 1) * factor})


def min_capacity(trace: Trace, make_allocator, *, granularity: int = 2 << 20, hi: int | None = None) -> int:
    """The smallest capacity (to ``granularity``) under which ``trace`` replays without an OOM, by bisection.

    ``make_allocator(capacity)`` builds a fresh allocator. Fragmentation is the gap between this and the trace's
    peak live bytes (OOM-freedom is not strictly monotone in capacity; bisection finds one boundary).
    """
    lo = int(trace.live_bytes().max(initial=0)) // granularity   # never enough below the live peak
    if hi is None:
        hi = replay(trace, make_allocator(None)).summary()["peak_reserved"]
    hi = -(-int(hi) // granularity)

    def fits(units: int) -> bool:
        return not replay(trace, make_allocator(units * granularity)).ooms
    while not fits(hi):
        hi *= 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi * granularity


def make(limit_mib):
    """A factory ``capacity -> CachingAllocator`` with the given split limit (``None``: unrestricted)."""
    lim = None if limit_mib is None else int(limit_mib * MiB)
    return lambda cap=None: CachingAllocator(memory="virtual", capacity=cap, max_split_size=lim)


def label(limit_mib) -> str:
    return "unrestricted" if limit_mib is None else f"max_split={limit_mib:g}MiB"


def study(trace: Trace, limits, title: str, fixed: float = 1.10):
    """One table row per policy: fragmentation without a capacity, the least capacity that runs the trace
    without an OOM, and the OOMs at ``fixed`` x the trace's peak live bytes."""
    peak = int(trace.live_bytes().max())
    cap = -(-int(peak * fixed) // (2 * MiB)) * 2 * MiB
    rows, results = [], {}
    for lim in (None, *limits):
        r = results[label(lim)] = replay(trace, make(lim)(), name=label(lim))
        need = min_capacity(trace, make(lim))
        ooms = len(replay(trace, make(lim)(cap)).ooms)
        rows.append((label(lim), r.summary(), need, ooms))
    head = (f"{'policy':<20}{'peak reserved':>15}{'int.frag':>10}{'frag@peak':>11}{'min capacity':>15}"
            f"{'overhead':>10}{f'OOMs@{fixed:.2f}x':>12}")
    lines = [f"{title}: peak live {peak / MiB:.1f} MiB, {trace.num_allocs} allocations", head, "-" * len(head)]
    for name, s, need, ooms in rows:
        lines.append(f"{name:<20}{s['peak_reserved'] / MiB:>11.1f} MiB{s['internal_fragmentation']:>10.2%}"
                     f"{s['fragmentation_at_peak']:>11.2%}{need / MiB:>11.1f} MiB{need / peak - 1:>10.1%}{ooms:>12}")
    return "\n".join(lines), results, rows, peak


def classic(unit=10 * MiB) -> str:
    """10 -> free -> 5 -> 6 units under a capacity of 12 units (the paper's 10/5/6 GiB scaled to MiB)."""
    t = Trace(meta={"workload": "classic 10-5-6"})
    t.free(t.alloc(10 * unit, op="big"))
    t.alloc(5 * unit, op="five")
    t.alloc(6 * unit, op="six")
    res = {label(m): replay(t, make(m)(12 * unit), name=label(m)) for m in (None, 8 * unit / MiB)}
    lines = [format_table(res, f"classic 10 -> 5 -> 6 x {unit // MiB} MiB, capacity {12 * unit // MiB} MiB")]
    for name, r in res.items():
        lines.append(f"  {name}: " + ("OOM at " + ", ".join(f"{n // MiB} MiB ({op})" for _, n, op in r.ooms)
                                      if r.ooms else "all three allocations succeed"))
    return "\n".join(lines)


def record_all(steps: int, rng) -> dict[str, Trace]:
    traces: dict[str, Trace] = {}
    traces["W3"], losses = w3_trace(steps)
    print(f"W3 losses {np.round(losses[:3], 5).tolist()} (check {W3_CHECK})")
    batches = rng.integers(32, 1025, 3 * steps).tolist()
    traces["W3 var-batch"], _ = w3_trace(len(batches), batches)
    traces["W6"], losses = w6_trace(steps)
    print(f"W6 losses {np.round(losses[:3], 5).tolist()} (check {W6_CHECK})")
    shapes = [(int(rng.integers(4, 33)), int(rng.integers(16, 129))) for _ in range(3 * steps)]
    traces["W6 var-batch/seq"], _ = w6_trace(len(shapes), shapes)
    return traces


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    ap.add_argument("--save-traces", default=None, help="directory to save the recorded traces in")
    ap.add_argument("--load-traces", default=None, help="replay traces saved by --save-traces instead")
    ap.add_argument("--plot", default=os.path.join(HERE, "fragmentation.png"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.load_traces:
        traces = {}
        for f in sorted(os.listdir(args.load_traces)):
            t = Trace.load(os.path.join(args.load_traces, f))
            traces[t.meta["name"]] = t
    else:
        traces = record_all(2 if args.quick else 4, np.random.default_rng(0))
    for name, t in traces.items():
        t.meta["name"] = name
        print(f"{name:<18} {t.summary()}")
        if args.save_traces:
            os.makedirs(args.save_traces, exist_ok=True)
            t.save(os.path.join(args.save_traces, name.replace(" ", "_").replace("/", "-") + ".json.gz"))
    print(f"recorded in {time.perf_counter() - t0:.1f} s\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(4.5 * len(traces), 11))
    grid = fig.add_gridspec(4, len(traces))
    # as recorded (PyTorch's geometry, so limits of a few MiB), and with every size x16 (tensors as large as in
    # the W3-big / W6-big GPU variants, where PyTorch's own limits > 20 MiB apply)
    settings = [(1, (2, 4, 8, 16)), (16, (32, 64, 128, 256))]
    summary = []
    bars = {}
    for scale, limits in settings:
        for col, (name, trace) in enumerate(traces.items()):
            tr = trace if scale == 1 else scaled(trace, scale)
            text, results, rows, peak = study(tr, limits, f"{name}, sizes x{scale}")
            print(text + "\n")
            base = rows[0]
            best = min(rows[1:], key=lambda r: r[1]["internal_fragmentation"])
            lean = min(rows[1:], key=lambda r: r[2])
            summary.append((f"{name} x{scale}", base, best, lean, peak))
            bars.setdefault(scale, {})[name] = [(r[0], r[2] / peak - 1) for r in rows]
            if scale == 1:
                axes = [fig.add_subplot(grid[i, col]) for i in range(3)]
                plot_results(results, None, f"{name} (no capacity)", axes=axes)
    for k, (scale, per_trace) in enumerate(bars.items()):
        ax = fig.add_subplot(grid[3, k * len(traces) // 2:(k + 1) * len(traces) // 2])
        names = list(per_trace)
        width = 0.8 / len(per_trace[names[0]])
        for j in range(len(per_trace[names[0]])):
            ax.bar(np.arange(len(names)) + j * width, [per_trace[n][j][1] * 100 for n in names], width,
                   label=per_trace[names[0]][j][0])
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=8)
        ax.set_ylabel("min capacity over peak live (%)")
        ax.set_title(f"least capacity without OOM, sizes x{scale}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    plt.close(fig)

    print("summary (unrestricted -> best split limit)")
    for title, base, best, lean, peak in summary:
        f0, f1 = base[1]["internal_fragmentation"], best[1]["internal_fragmentation"]
        cut = (1 - f1 / f0) if f0 else 0.0
        o0, o1 = base[2] / peak - 1, lean[2] / peak - 1
        print(f"  {title:<22} internal frag {f0:6.2%} -> {f1:6.2%} ({best[0]}, {cut:+.0%});  capacity needed "
              f"over peak live {o0:6.1%} -> {o1:6.1%} ({lean[0]}, {(1 - o1 / o0) if o0 else 0:+.0%})")
    print("\n" + classic())
    print(f"\nplot: {args.plot}   ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
