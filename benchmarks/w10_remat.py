"""W10: rematerialisation on an 8-layer transformer step (the W6 block without biases or LayerNorm gains, plain
SGD), without and with ``checkpoint`` around each block (policy: save nothing inside the block).

flfun reports each variant's planned arena and step time; JAX its ``memory_analysis()`` temp size and times
(``jax.checkpoint``); PyTorch eager times (``torch.utils.checkpoint``). Run: ``python -m benchmarks.w10_remat``.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks import harness
from benchmarks.harness import assert_check, markdown_table, peer_main, run_rows, time_fn, timing_dict

T = 0.5
CHECK = [4.5876, 4.58157, 4.57572]
V, D, H, L, F, S, B = 96, 128, 4, 8, 512, 128, 16
LR = 0.01
VARIANTS = ("no remat", "remat")


def data():
    """W10's draws in order: wte, wpe, per layer (w_qkv, w_o, w_fc, w_proj), w_head, then the tokens."""
    rng = np.random.default_rng(10)
    n = lambda *shape: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    wte, wpe = n(V, D), n(S, D)
    layers = [{"w_qkv": n(D, 3 * D), "w_o": n(D, D), "w_fc": n(D, F), "w_proj": n(F, D)} for _ in range(L)]
    w_head = n(D, V)
    tokens = rng.integers(0, V, (B, S + 1)).astype(np.int32)
    return {"wte": wte, "wpe": wpe, "layers": layers, "w_head": w_head}, tokens[:, :S], tokens[:, 1:]


def _run_steps(step, params, n=3) -> list[float]:
    out = []
    for _ in range(n):
        params, loss = step(params)
        out.append(float(loss))
    return out


def _time_steps(step, params, sync=None):
    state = [params]

    def one():
        state[0], loss = step(state[0])
        return loss
    return time_fn(one, T, loops=5, sync=sync)


# --------------------------------------------------------------------------------------------------- flfun
def flfun_loss(remat: bool):
    """W10's loss ``loss(params, x, y)`` in flfun, each block wrapped in ``fl.checkpoint`` if ``remat``."""
    import flfun as fl
    import flfun.numpy as fnp
    from flfun import nn

    def ln(h):
        c = h - fnp.mean(h, axis=-1, keepdims=True)
        return c / fnp.sqrt(fnp.mean(c * c, axis=-1, keepdims=True) + 1e-5)

    def block(h, lp):
        qkv = ln(h) @ lp["w_qkv"]
        q, k, v = (qkv[..., i * D:(i + 1) * D].reshape(B, S, H, D // H) for i in range(3))
        h = h + nn.dot_product_attention(q, k, v, is_causal=True).reshape(B, S, D) @ lp["w_o"]
        return h + nn.gelu(ln(h) @ lp["w_fc"], approximate=True) @ lp["w_proj"]
    blk = fl.checkpoint(block, policy=fl.checkpoint_policies.nothing_saveable) if remat else block

    def loss(p, x, y):
        h = p["wte"][x] + p["wpe"][:S]
        for lp in p["layers"]:
            h = blk(h, lp)
        return nn.softmax_cross_entropy(ln(h) @ p["w_head"], y)
    return loss


def flfun_step(remat: bool, x, y):
    """The jitted SGD step ``step(params) -> (params, loss)``."""
    import flfun as fl
    loss = flfun_loss(remat)

    def step(p):
        value, g = fl.value_and_grad(loss)(p, x, y)
        return fl.tree_map(lambda w, d: w - LR * d, p, g), value
    return fl.jit(step)


def run_flfun():
    import flfun.numpy as fnp
    import flfun as fl
    p0, xn, yn = data()
    params = fl.tree_map(fnp.asarray, p0)
    x, y = fnp.asarray(xn), fnp.asarray(yn)
    variants, arena, checks, recomputed = {}, {}, {}, {}
    for name in VARIANTS:
        step = flfun_step(name == "remat", x, y)
        checks[name] = _run_steps(step, params)
        assert_check(f"W10 flfun {name}", checks[name], CHECK)
        plan = step.lower(params).plan
        arena[name], recomputed[name] = plan.arena_bytes, (plan.recomputed_eqns, plan.recomputed_bytes)
        variants[f"jit step, {name}"] = timing_dict(_time_steps(step, params))
    return {"variants": variants, "check": checks["remat"], "bytes": arena, "recomputed": recomputed}


# --------------------------------------------------------------------------------------------------- peers
def jax_step(remat: bool, x, y):
    import jax
    import jax.numpy as jnp

    def ln(h):
        mu = h.mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5)

    def block(h, lp):
        qkv = ln(h) @ lp["w_qkv"]
        q, k, v = (qkv[..., i * D:(i + 1) * D].reshape(B, S, H, D // H).transpose(0, 2, 1, 3) for i in range(3))
        s = jnp.where(jnp.tril(jnp.ones((S, S), bool)), q @ k.transpose(0, 1, 3, 2) / math.sqrt(D // H), -jnp.inf)
        att = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
        h = h + att @ lp["w_o"]
        return h + jax.nn.gelu(ln(h) @ lp["w_fc"], approximate=True) @ lp["w_proj"]
    blk = jax.checkpoint(block, policy=jax.checkpoint_policies.nothing_saveable) if remat else block

    def loss(p):
        h = p["wte"][x] + p["wpe"][:S]
        for lp in p["layers"]:
            h = blk(h, lp)
        z = ln(h) @ p["w_head"]
        return jnp.mean(jax.nn.logsumexp(z, -1) - jnp.take_along_axis(z, y[..., None], -1)[..., 0])

    def step(p):
        value, g = jax.value_and_grad(loss)(p)
        return jax.tree_util.tree_map(lambda w, d: w - LR * d, p, g), value
    return jax.jit(step)


def run_jax():
    import jax
    import jax.numpy as jnp
    p0, xn, yn = data()
    params = jax.tree_util.tree_map(jnp.asarray, p0)
    x, y = jnp.asarray(xn), jnp.asarray(yn)
    variants, temp, checks = {}, {}, {}
    for name in VARIANTS:
        step = jax_step(name == "remat", x, y)
        checks[name] = _run_steps(step, params)
        assert_check(f"W10 jax {name}", checks[name], CHECK)
        temp[name] = step.lower(params).compile().memory_analysis().temp_size_in_bytes
        variants[f"jit step, {name}"] = timing_dict(_time_steps(step, params, jax.block_until_ready))
    return {"variants": variants, "check": checks["remat"], "bytes": temp}


def torch_step(remat: bool):
    """W10's PyTorch eager SGD step ``step(params) -> (params, loss)`` (``torch.utils.checkpoint`` if ``remat``)."""
    import torch
    import torch.nn.functional as Fn
    from torch.utils.checkpoint import checkpoint
    p0, xn, yn = data()
    x, y = torch.from_numpy(xn).long(), torch.from_numpy(yn).long()
    ln = lambda h: Fn.layer_norm(h, (D,), eps=1e-5)

    def block(h, w_qkv, w_o, w_fc, w_proj):
        q, k, v = (ln(h) @ w_qkv).split(D, dim=-1)
        q, k, v = (m.view(B, S, H, D // H).transpose(1, 2) for m in (q, k, v))
        att = Fn.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + att.transpose(1, 2).reshape(B, S, D) @ w_o
        return h + Fn.gelu(ln(h) @ w_fc, approximate="tanh") @ w_proj

    def step(p):
        h = p["wte"][x] + p["wpe"][:S]
        for lp in p["layers"]:
            ws = [lp[k] for k in ("w_qkv", "w_o", "w_fc", "w_proj")]
            h = checkpoint(block, h, *ws, use_reentrant=False) if remat else block(h, *ws)
        loss = Fn.cross_entropy((ln(h) @ p["w_head"]).reshape(-1, V), y.reshape(-1))
        leaves = [p["wte"], p["wpe"], p["w_head"]] + [lp[k] for lp in p["layers"] for k in lp]
        loss.backward()
        with torch.no_grad():
            for w in leaves:
                w -= LR * w.grad
                w.grad = None
        return p, loss.detach()
    t = lambda a: torch.from_numpy(np.array(a)).requires_grad_()
    params = {"wte": t(p0["wte"]), "wpe": t(p0["wpe"]), "w_head": t(p0["w_head"]),
              "layers": [{k: t(v) for k, v in lp.items()} for lp in p0["layers"]]}
    return step, params


def run_torch():
    import torch
    variants, checks = {}, {}
    for name in VARIANTS:
        step, params = torch_step(name == "remat")
        checks[name] = _run_steps(step, params)
        assert_check(f"W10 torch {name}", checks[name], CHECK)
        variants[f"eager step, {name}"] = timing_dict(_time_steps(step, params))
    return {"variants": variants, "check": checks["remat"], "threads": torch.get_num_threads()}


PEERS = {"flfun": run_flfun, "jax": run_jax, "torch": run_torch}


def main() -> str:
    base = "jax/jit step, no remat"
    rows, extras = run_rows("benchmarks.w10_remat", [("flfun", None), ("jax", "jax"), ("torch", "torch")], base)
    table = markdown_table("W10: 8-layer transformer SGD step, without and with remat per block", rows, base)
    return table + "\n" + memory_lines(extras) + "\n\n" + target_lines(rows, extras) + "\n"


def memory_lines(extras: dict) -> str:
    """Each peer's memory figure per variant: flfun's planned arena, JAX's ``memory_analysis()`` temp size."""
    lines = ["| memory | no remat | remat | remat / no remat |", "|---|---|---|---|"]
    for peer, what in (("flfun", "planned arena"), ("jax", "XLA temp size")):
        b = extras.get(peer, {}).get("bytes")
        if b:
            lines.append(f"| {peer} {what} | {b['no remat'] / 2**20:.1f} MiB | {b['remat'] / 2**20:.1f} MiB | "
                         f"{b['remat'] / b['no remat']:.2f}x |")
    rec = extras.get("flfun", {}).get("recomputed", {}).get("remat")
    if rec:
        lines.append(f"\nflfun's plan: remat recomputes {rec[0]} equations ({rec[1] / 2**20:.1f} MiB of values)")
    return "\n".join(lines)


def target_lines(rows: list[dict], extras: dict) -> str:
    """The issue's W10 targets: with remat, flfun's arena <= 0.5x and its step time <= 1.35x without."""
    med = harness.medians(rows)
    b = extras.get("flfun", {}).get("bytes") or {}
    t0, t1 = med.get(("flfun", "jit step, no remat")), med.get(("flfun", "jit step, remat"))
    lines = ["| W10 target (flfun, remat / no remat) | measured | target |", "|---|---|---|"]
    lines.append(f"| planned arena | {b['remat'] / b['no remat']:.2f}x | <= 0.5x |" if b else "| planned arena | n/a |"
                 " <= 0.5x |")
    lines.append(f"| step time | {t1 / t0:.2f}x | <= 1.35x |" if t0 and t1 else "| step time | n/a | <= 1.35x |")
    for peer, variant in (("jax", "jit step"), ("torch", "eager step")):
        a, r = med.get((peer, f"{variant}, no remat")), med.get((peer, f"{variant}, remat"))
        if a and r:
            lines.append(f"| ({peer} step time) | {r / a:.2f}x | |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
