"""W6: char-level Transformer LM training step (vocab 96, d 128, 4 heads, 2 pre-LN layers, seq 128, batch 16,
AdamW as in torch).

flfun runs the reference model ``models.transformer.GPT`` jitted; peers are PyTorch eager and JAX jit (the
baseline). Run: ``python -m benchmarks.w6_transformer``.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks import harness
from benchmarks.harness import assert_check, markdown_table, peer_main, run_rows, time_fn, time_model_steps, timing_dict

T = 0.5
CHECK = [4.59682, 4.5259, 4.4662]
CFG = {"V": 96, "D": 128, "H": 4, "L": 2, "F": 512, "S": 128, "B": 16}   # gpu_bench's big variant changes these
V, D, H, L, F, S, B = CFG.values()
LR, B1, B2, EPS, WD = 3e-4, 0.9, 0.999, 1e-8, 0.01
GFLOP = 5.79


def data(V=V, D=D, L=L, F=F, S=S, B=B, **_):
    """W6's draws in order: wte, wpe, per layer (w_qkv, w_o, w_fc, w_proj), w_head, then the tokens."""
    rng = np.random.default_rng(6)
    n = lambda *shape: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    wte, wpe = n(V, D), n(S, D)
    layers = [{"w_qkv": n(D, 3 * D), "w_o": n(D, D), "w_fc": n(D, F), "w_proj": n(F, D)} for _ in range(L)]
    w_head = n(D, V)
    tokens = rng.integers(0, V, (B, S + 1)).astype(np.int32)
    return wte, wpe, layers, w_head, tokens[:, :S], tokens[:, 1:]


# --------------------------------------------------------------------------------------------------- flfun
def flfun_model(wte, wpe, layers, w_head, cfg=CFG, device=None):
    """``models.transformer.GPT`` (W6's config, or ``cfg``'s sizes) holding W6's initial weights (biases 0, LN
    gains 1), on ``device`` (default: the default device)."""
    import flfun.numpy as fnp
    import flfun.random as fr
    from models.transformer import GPT, GPTConfig
    a = fnp.asarray if device is None else (lambda v: fnp.asarray(v, device=device))
    D = cfg["D"]
    model = GPT(GPTConfig(cfg["V"], D, cfg["H"], cfg["L"], cfg["F"] // D, cfg["S"]), key=fr.key(0))
    blocks = []
    for blk, w in zip(model.blocks, layers):
        attn = blk.attn.replace(qkv=blk.attn.qkv.replace(weight=a(w["w_qkv"])),
                                out=blk.attn.out.replace(weight=a(w["w_o"])))
        blocks.append(blk.replace(attn=attn, fc=blk.fc.replace(weight=a(w["w_fc"])),
                                  proj=blk.proj.replace(weight=a(w["w_proj"]))))
    return model.replace(wte=model.wte.replace(weight=a(wte)), wpe=a(wpe), blocks=tuple(blocks),
                         head=model.head.replace(weight=a(w_head)))


def flfun_step_fn(x, y):
    """``(opt, step)``: W6's AdamW and its training step ``step(model, opt_state) -> (model, opt_state, loss)``
    on the batch ``x, y``."""
    import flfun as fl
    from flfun import optim
    from models.transformer import loss_fn
    opt = optim.adamw(LR, B1, B2, EPS, weight_decay=WD)

    def step(model, opt_state):
        loss, grads = fl.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return opt, step


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    wte, wpe, layers, w_head, xn, yn = data()
    opt, step = flfun_step_fn(fnp.asarray(xn), fnp.asarray(yn))
    jstep = fl.jit(step)
    model = flfun_model(wte, wpe, layers, w_head)
    checks = {}
    for name, fn in (("jit", jstep), ("eager", step)):
        m, s, out = model, opt.init(model), []
        for _ in range(3):
            m, s, loss = fn(m, s)
            out.append(float(loss))
        assert_check(f"W6 flfun {name}", out, CHECK)
        checks[name] = out
    out = time_model_steps(jstep, step, model, opt.init, T)
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": checks["jit"]}


# --------------------------------------------------------------------------------------------------- peers
def torch_step_fn(cfg=CFG, device=None):
    """W6's PyTorch eager step (params and AdamW state inside): ``step() -> loss``."""
    import torch
    import torch.nn.functional as Fn
    V, D, H, L, S, B, F = (cfg[k] for k in "VDHLSBF")
    wte, wpe, layers, w_head, xn, yn = data(**cfg)
    t = lambda a: torch.from_numpy(np.array(a)).to(device).requires_grad_()
    z = lambda *s: torch.zeros(s, device=device, requires_grad=True)
    o = lambda *s: torch.ones(s, device=device, requires_grad=True)
    params = {"wte": t(wte), "wpe": t(wpe), "w_head": t(w_head), "lnf_g": o(D), "lnf_b": z(D)}
    for i, w in enumerate(layers):
        params.update({f"{i}.w_qkv": t(w["w_qkv"]), f"{i}.b_qkv": z(3 * D), f"{i}.w_o": t(w["w_o"]),
                       f"{i}.b_o": z(D), f"{i}.w_fc": t(w["w_fc"]), f"{i}.b_fc": z(F),
                       f"{i}.w_proj": t(w["w_proj"]), f"{i}.b_proj": z(D), f"{i}.ln1_g": o(D), f"{i}.ln1_b": z(D),
                       f"{i}.ln2_g": o(D), f"{i}.ln2_b": z(D)})
    x, y = torch.from_numpy(xn).to(device).long(), torch.from_numpy(yn).to(device).long()
    opt = torch.optim.AdamW(params.values(), lr=LR, betas=(B1, B2), eps=EPS, weight_decay=WD)
    p = params

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


def run_torch():
    import torch
    step = torch_step_fn()
    check = [float(step()) for _ in range(3)]
    assert_check("W6 torch", check, CHECK)
    return {"variants": {"eager step": timing_dict(time_fn(step, T))}, "check": check,
            "threads": torch.get_num_threads()}


def jax_loss_fn(cfg=CFG):
    """W6's loss ``loss(p, x, y)`` in JAX (``p`` as ``jax_params`` lays it out)."""
    import jax
    import jax.numpy as jnp
    D, H, S, B = (cfg[k] for k in "DHSB")

    def ln(h, g, b):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / jnp.sqrt(var + 1e-5) * g + b

    def loss(p, x, y):
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
    return loss


def jax_params(wte, wpe, layers, w_head, cfg=CFG):
    """W6's initial weights as JAX arrays (biases 0, LN gains 1)."""
    import jax.numpy as jnp
    D, F = cfg["D"], cfg["F"]
    zeros, ones = (lambda n: jnp.zeros(n, jnp.float32)), (lambda n: jnp.ones(n, jnp.float32))
    return {"wte": jnp.asarray(wte), "wpe": jnp.asarray(wpe), "w_head": jnp.asarray(w_head), "lnf_g": ones(D),
            "lnf_b": zeros(D),
            "layers": [{**{k: jnp.asarray(v) for k, v in w.items()}, "b_qkv": zeros(3 * D), "b_o": zeros(D),
                        "b_fc": zeros(F), "b_proj": zeros(D), "ln1_g": ones(D), "ln1_b": zeros(D), "ln2_g": ones(D),
                        "ln2_b": zeros(D)} for w in layers]}


def jax_step_fn(cfg=CFG):
    """``(step, state)``: W6's jitted AdamW step ``step(p, m, v, t) -> (p, m, v, t, loss)`` and its first state."""
    import jax
    import jax.numpy as jnp
    wte, wpe, layers, w_head, xn, yn = data(**cfg)
    p = jax_params(wte, wpe, layers, w_head, cfg)
    loss = jax_loss_fn(cfg)
    x, y = jnp.asarray(xn), jnp.asarray(yn)

    @jax.jit
    def step(p, m, v, t):
        value, g = jax.value_and_grad(loss)(p, x, y)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, v, g)
        step_size = LR / (1 - B1 ** t)
        bc2 = jnp.sqrt(1 - B2 ** t)
        p = jax.tree_util.tree_map(lambda p, m, v: p * (1 - LR * WD) - step_size * m / (jnp.sqrt(v) / bc2 + EPS),
                                   p, m, v)
        return p, m, v, t, value
    zl = jax.tree_util.tree_map(jnp.zeros_like, p)
    return step, (p, zl, zl, jnp.zeros((), jnp.float32))


def run_jax():
    import jax
    step, first = jax_step_fn()
    state = [first]
    check = []
    for _ in range(3):
        *s, value = step(*state[0])
        state[0] = tuple(s)
        check.append(float(value))
    assert_check("W6 jax", check, CHECK)

    def one():
        *s, value = step(*state[0])
        state[0] = tuple(s)
        return value
    return {"variants": {"jit step": timing_dict(time_fn(one, T, sync=jax.block_until_ready))}, "check": check}


PEERS = {"flfun": run_flfun, "torch": run_torch, "jax": run_jax}


def main() -> str:
    base = "jax/jit step"
    rows, _ = run_rows("benchmarks.w6_transformer", [("flfun", None), ("torch", "torch"), ("jax", "jax")], base)
    table = markdown_table(f"W6: char-level Transformer LM training step ({GFLOP} GFLOP, AdamW)", rows, base)
    return table + "\n" + target_lines(rows) + "\n"


def target_lines(rows: list[dict]) -> str:
    """The issue's W6 target (flfun jit <= JAX jit) and PyTorch eager's ratio, from one run's rows."""
    return "\n".join(harness.target_lines(rows, "W6 ratio to JAX jit", ("jax", "jit step"),
                                          [(("flfun", "jit step"), "<= 1.0"), (("flfun", "eager step"), ""),
                                           (("torch", "eager step"), "")]))


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
