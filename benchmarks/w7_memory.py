"""W7: memory of the W3 and W6 training steps: flfun's planned arena vs naive vs the lower bound, beside JAX's
compiled memory analysis and the liveness figures of its jaxpr (WORKLOADS.md, W7).

Run: ``python -m benchmarks.w7_memory``.
"""
from __future__ import annotations

import os

import numpy as np

from benchmarks.harness import available, peer_main, run_peer

os.environ.setdefault("JAX_PLATFORMS", "cpu")   # the CPU workloads: JAX on the CPU even where a GPU exists

STRATEGIES = ("naive", "greedy_by_size", "best_fit", "auto")


def _mib(n) -> str:
    return f"{n / (1 << 20):.2f} MiB"


# ------------------------------------------------------------------------------------------------- flfun
def flfun_steps():
    """``{workload: (step, args, donate_argnums)}`` for W3 and W6."""
    import flfun as fl
    import flfun.numpy as fnp
    from benchmarks import w3_mlp
    out = {}
    pn, xn, yn = w3_mlp.data()
    params = [(fnp.asarray(w), fnp.asarray(b)) for w, b in pn]
    out["W3"] = (w3_mlp.flfun_step, (params, fnp.asarray(xn), fnp.asarray(yn)), 0)
    try:
        from benchmarks import w6_transformer as w6
        from flfun import optim
        from models.transformer import loss_fn
    except ImportError:
        return out
    wte, wpe, layers, w_head, xn, yn = w6.data()
    x, y = fnp.asarray(xn), fnp.asarray(yn)
    opt = optim.adamw(w6.LR, w6.B1, w6.B2, w6.EPS, weight_decay=w6.WD)

    def step(model, opt_state):
        loss, grads = fl.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    model = w6.flfun_model(wte, wpe, layers, w_head)
    out["W6"] = (step, (model, opt.init(model)), (0, 1))
    return out


def run_flfun():
    import flfun as fl
    res = {}
    for name, (step, args, donate) in flfun_steps().items():
        lowered = fl.jit(step).lower(*args)
        plans = {s: lowered.plan_with(s) for s in STRATEGIES}
        traced = lowered.traced.closed.program
        donated = fl.jit(step, donate_argnums=donate).lower(*args).plan
        auto = plans["auto"]
        res[name] = {
            "param_bytes": int(sum(np.asarray(v).nbytes for v in fl.tree_leaves(args[0]))),
            "eqns_traced": len(traced.eqns), "eqns": auto.num_eqns,
            "naive_traced": int(sum(v.aval.nbytes for e in traced.eqns for v in e.outputs)),
            "naive": auto.naive_bytes, "peak_live": auto.peak_live_bytes, "lower_bound": auto.lower_bound,
            "arena": {s: p.arena_bytes for s, p in plans.items()}, "inplace": auto.inplace_hits,
            "buffers": len(auto.buffers), "arena_donated": donated.arena_bytes,
            "inplace_donated": donated.inplace_hits, "lower_bound_donated": donated.lower_bound}
    return res


# --------------------------------------------------------------------------------------------------- jax
def _jaxpr_figures(closed) -> dict:
    """W7's jaxpr figures after inlining call-like sub-jaxprs (jit, custom_jvp_call, ...)."""
    from jax import core as jcore
    try:
        from jax.extend.core import ClosedJaxpr, Jaxpr, Literal
    except ImportError:  # older jax
        ClosedJaxpr, Jaxpr, Literal = jcore.ClosedJaxpr, jcore.Jaxpr, jcore.Literal
    eqns: list[tuple[list, list]] = []          # (input value ids, [(output value id, bytes)])
    ids = iter(range(1 << 62))

    def nbytes(aval):
        return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize

    def sub_jaxpr(eqn):
        subs = [v for v in eqn.params.values() if isinstance(v, (ClosedJaxpr, Jaxpr))]
        if len(subs) != 1:
            return None
        j = subs[0].jaxpr if isinstance(subs[0], ClosedJaxpr) else subs[0]
        return j if len(j.invars) == len(eqn.invars) else None

    def walk(jaxpr, env):
        for eqn in jaxpr.eqns:
            ins = [env.get(v) for v in eqn.invars if not isinstance(v, Literal)]
            inner = sub_jaxpr(eqn)
            if inner is not None:
                sub_env = {v: env.get(x) if not isinstance(x, Literal) else None
                           for v, x in zip(inner.invars, eqn.invars)}
                walk(inner, sub_env)
                for v, iv in zip(eqn.outvars, inner.outvars):
                    env[v] = sub_env.get(iv) if not isinstance(iv, Literal) else None
                continue
            outs = []
            for v in eqn.outvars:
                env[v] = next(ids)
                outs.append((env[v], nbytes(v.aval)))
            eqns.append((ins, outs))
    jaxpr = closed.jaxpr
    env = {v: None for v in list(jaxpr.invars) + list(jaxpr.constvars)}   # arguments are not counted
    walk(jaxpr, env)
    final = {env.get(v) for v in jaxpr.outvars if not isinstance(v, Literal)}
    last = {}
    for i, (ins, _) in enumerate(eqns):
        for v in ins:
            if v is not None:
                last[v] = i

    def peak(count_outputs: bool) -> int:
        live, cur, best = {}, 0, 0
        for i, (ins, outs) in enumerate(eqns):
            for v, n in outs:
                if v in final and not count_outputs:
                    continue
                live[v] = n
                cur += n
            best = max(best, cur)
            for v in set(ins):
                if v in live and last.get(v) == i and v not in final:
                    cur -= live.pop(v)
            for v, n in outs:                    # produced but never read
                if v in live and v not in last and v not in final:
                    cur -= live.pop(v)
        return best
    return {"eqns": len(eqns), "sum_all_eqn_outvars_bytes": sum(n for _, outs in eqns for _, n in outs),
            "peak_live_intermediates_bytes_free_after_last_use": peak(True),
            "peak_live_temps_excl_outputs_bytes": peak(False)}


def jax_steps():
    import jax
    import jax.numpy as jnp

    from benchmarks import w3_mlp
    out = {}
    pn, xn, yn = w3_mlp.data()
    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in pn]
    out["W3"] = (w3_mlp.jax_step_fn(), (params, jnp.asarray(xn), jnp.asarray(yn)))
    try:
        from benchmarks import w6_transformer as w6
    except ImportError:
        return out
    wte, wpe, layers, w_head, xn, yn = w6.data()
    D, F = w6.D, w6.F
    zeros, ones = (lambda n: jnp.zeros(n, jnp.float32)), (lambda n: jnp.ones(n, jnp.float32))
    p = {"wte": jnp.asarray(wte), "wpe": jnp.asarray(wpe), "w_head": jnp.asarray(w_head), "lnf_g": ones(D),
         "lnf_b": zeros(D),
         "layers": [{**{k: jnp.asarray(v) for k, v in w.items()}, "b_qkv": zeros(3 * D), "b_o": zeros(D),
                     "b_fc": zeros(F), "b_proj": zeros(D), "ln1_g": ones(D), "ln1_b": zeros(D), "ln2_g": ones(D),
                     "ln2_b": zeros(D)} for w in layers]}
    loss = w6.jax_loss_fn()
    x, y = jnp.asarray(xn), jnp.asarray(yn)

    def step(p, m, v, t):
        value, g = jax.value_and_grad(loss)(p, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: w6.B1 * m + (1 - w6.B1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: w6.B2 * v + (1 - w6.B2) * g * g, v, g)
        step_size = w6.LR / (1 - w6.B1 ** t)
        bc2 = jnp.sqrt(1 - w6.B2 ** t)
        p = jax.tree_util.tree_map(
            lambda p, m, v: p * (1 - w6.LR * w6.WD) - step_size * m / (jnp.sqrt(v) / bc2 + w6.EPS), p, m, v)
        return p, m, v, t, value
    zl = jax.tree_util.tree_map(jnp.zeros_like, p)
    out["W6"] = (step, (p, zl, zl, jnp.zeros((), jnp.float32)))
    return out


def run_jax():
    import jax
    res = {}
    for name, (step, args) in jax_steps().items():
        entry = {"param_bytes": int(sum(np.asarray(v).nbytes for v in jax.tree_util.tree_leaves(args[0])))}
        for label, donate in (("", ()), ("_donated", (0,))):
            ma = jax.jit(step, donate_argnums=donate).lower(*args).compile().memory_analysis()
            entry["compiled" + label] = {k: int(getattr(ma, f"{k}_size_in_bytes")) for k in
                                         ("argument", "output", "alias", "temp")}
        entry["jaxpr"] = _jaxpr_figures(jax.make_jaxpr(step)(*args))
        res[name] = entry
    return res


PEERS = {"flfun": lambda: {"variants": {}, "memory": run_flfun()},
         "jax": lambda: {"variants": {}, "memory": run_jax()}}


def table(fl: dict, jx: dict | None, name: str) -> str:
    f = fl[name]
    rows = [f"### W7 {name}: memory per training step", "",
            "| figure | flfun | JAX |", "|---|---|---|",
            f"| parameters | {_mib(f['param_bytes'])} | {_mib(jx['param_bytes']) if jx else ''} |"]
    jj = jx["jaxpr"] if jx else {}
    cm, cd = (jx["compiled"], jx["compiled_donated"]) if jx else ({}, {})
    rows += [
        f"| equations (flfun: traced -> after passes) | {f['eqns_traced']} -> {f['eqns']} | {jj.get('eqns', '')} |",
        f"| sum of all equation outputs (naive executor) | {_mib(f['naive_traced'])} traced, {_mib(f['naive'])} "
        f"after passes | {_mib(jj['sum_all_eqn_outvars_bytes']) if jj else ''} |",
        f"| peak live, free after last use (incl. outputs) | {_mib(f['peak_live'])} | "
        f"{_mib(jj['peak_live_intermediates_bytes_free_after_last_use']) if jj else ''} |",
        f"| peak live temps excl. outputs | | {_mib(jj['peak_live_temps_excl_outputs_bytes']) if jj else ''} |",
        f"| flfun arena lower bound (max live arena bytes) | {_mib(f['lower_bound'])} | |"]
    for s in STRATEGIES:
        a = f["arena"][s]
        rows.append(f"| flfun arena, strategy `{s}` | {_mib(a)} ({a / max(f['lower_bound'], 1):.3f}x lower bound, "
                    f"{a / max(f['naive'], 1):.3f}x naive) | |")
    rows += [f"| in-place reuses / arena buffers | {f['inplace']} / {f['buffers']} | |",
             f"| arena with params donated (in-place hits) | {_mib(f['arena_donated'])} "
             f"({f['inplace_donated']}) | |"]
    if jx:
        for label, c in (("", cm), (" (donate params)", cd)):
            rows.append(f"| XLA compiled{label}: argument / output / alias / temp | | "
                        f"{_mib(c['argument'])} / {_mib(c['output'])} / {_mib(c['alias'])} / {_mib(c['temp'])} |")
    return "\n".join(rows) + "\n"


def main() -> str:
    fl = run_peer("benchmarks.w7_memory", "flfun")["memory"]
    jx = run_peer("benchmarks.w7_memory", "jax")["memory"] if available("jax") else None
    note = "" if jx else "\nJAX not installed: its columns are empty.\n"
    return "\n".join(table(fl, jx.get(n) if jx else None, n) for n in fl) + note


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
