"""W5: CNN training step (conv 1->32 -> conv 32->64 -> 2x2 avg pool -> dense 9216->10, batch 64, SGD).

flfun runs the reference model ``models.cnn.CNN`` (W5's configuration, channels-last with Wd's rows permuted, as
WORKLOADS.md allows) jitted; peers are the hand-written numpy im2col step (the baseline, also NHWC), PyTorch eager
and JAX jit. Run: ``python -m benchmarks.w5_cnn``.
"""
from __future__ import annotations

import numpy as np

from benchmarks import harness
from benchmarks.harness import (assert_check, markdown_table, medians, peer_main, run_rows, time_fn,
                                time_model_steps, timing_dict)

T = 0.5
CHECK = [2.93198, 4.46043, 7.47831]
LR = 0.01
GFLOP = 4.16


def data():
    rng = np.random.default_rng(5)
    n = lambda shape, s: rng.standard_normal(shape, dtype=np.float32) * np.float32(s)
    k1, c1 = n((32, 1, 3, 3), np.sqrt(2 / 9)), np.zeros(32, np.float32)
    k2, c2 = n((64, 32, 3, 3), np.sqrt(2 / 288)), np.zeros(64, np.float32)
    wd, bd = n((9216, 10), np.sqrt(1 / 9216)), np.zeros(10, np.float32)
    x = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    return [k1, c1, k2, c2, wd, bd], x, y


def _losses(step, state, n=3):
    out = []
    for _ in range(n):
        state, loss = step(state)
        out.append(float(loss))
    return out, state


# ------------------------------------------------------------------------------------------ numpy (im2col)
def _windows(h, k=3):
    """NHWC ``(N, H, W, C)`` -> im2col columns ``(N, H-k+1, W-k+1, k*k*C)`` ordered (kh, kw, c)."""
    v = np.lib.stride_tricks.sliding_window_view(h, (k, k), axis=(1, 2))     # (N, Ho, Wo, C, kh, kw)
    n, ho, wo, c = v.shape[:4]
    return v.transpose(0, 1, 2, 4, 5, 3).reshape(n, ho, wo, k * k * c)


def numpy_step(params, x, y):
    """Forward, backward and SGD by hand in NHWC: convolutions as im2col GEMMs, conv2's input gradient by col2im."""
    k1, c1, k2, c2, wd, bd = params
    n = x.shape[0]
    k1m = k1.reshape(32, 9).T                                      # (kh kw c) x out
    k2m = k2.transpose(2, 3, 1, 0).reshape(288, 64)
    cols1 = _windows(x.transpose(0, 2, 3, 1))                      # (N, 26, 26, 9)
    a1 = cols1 @ k1m + c1
    h1 = np.maximum(a1, 0)                                         # (N, 26, 26, 32)
    cols2 = _windows(h1)                                           # (N, 24, 24, 288)
    a2 = cols2 @ k2m + c2
    h2 = np.maximum(a2, 0)                                         # (N, 24, 24, 64)
    pooled = h2.reshape(n, 12, 2, 12, 2, 64).mean((2, 4))
    flat = pooled.transpose(0, 3, 1, 2).reshape(n, 9216)           # NCHW flatten order
    z = flat @ wd + bd
    m = z.max(1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(1, keepdims=True)
    rows = np.arange(n)
    loss = np.mean(np.log(s[:, 0]) + m[:, 0] - z[rows, y])
    dz = e / s
    dz[rows, y] -= 1
    dz /= np.float32(n)
    gwd, gbd = flat.T @ dz, dz.sum(0)
    dpool = (dz @ wd.T).reshape(n, 64, 12, 12).transpose(0, 2, 3, 1) * np.float32(0.25)
    d2 = np.repeat(np.repeat(dpool, 2, axis=1), 2, axis=2) * (a2 > 0)
    gk2m = cols2.reshape(-1, 288).T @ d2.reshape(-1, 64)
    gc2 = d2.sum((0, 1, 2))
    dcols2 = (d2.reshape(-1, 64) @ k2m.T).reshape(n, 24, 24, 3, 3, 32)
    dh1 = np.zeros_like(h1)
    for i in range(3):
        for j in range(3):
            dh1[:, i:i + 24, j:j + 24, :] += dcols2[:, :, :, i, j, :]
    d1 = dh1 * (a1 > 0)
    gk1m = cols1.reshape(-1, 9).T @ d1.reshape(-1, 32)
    gc1 = d1.sum((0, 1, 2))
    grads = [gk1m.T.reshape(32, 1, 3, 3), gc1, gk2m.reshape(3, 3, 32, 64).transpose(3, 2, 0, 1), gc2, gwd, gbd]
    lr = np.float32(LR)
    return [p - lr * g for p, g in zip(params, grads)], loss


def run_numpy():
    params, x, y = data()
    step = lambda p: numpy_step(p, x, y)
    check, _ = _losses(step, params)
    assert_check("W5 numpy", check, CHECK)
    state = [params]

    def one():
        state[0], _ = numpy_step(state[0], x, y)
    return {"variants": {"im2col step (floor)": timing_dict(time_fn(one, T, loops=7))}, "check": check}


# --------------------------------------------------------------------------------------------------- flfun
def flfun_model(params, channels_last: bool = True):
    """``models.cnn.CNN`` in W5's configuration, holding W5's initial weights. Channels-last (as the floor) by
    default: the kernels become HWIO and Wd's rows are permuted from NCHW to NHWC flattening order."""
    import flfun.numpy as fnp
    import flfun.random as fr
    from models.cnn import CNN
    k1, c1, k2, c2, wd, bd = params
    if channels_last:
        k1, k2 = k1.transpose(2, 3, 1, 0), k2.transpose(2, 3, 1, 0)
        wd = wd.reshape(64, 12, 12, 10).transpose(1, 2, 0, 3).reshape(9216, 10)
    k1, c1, k2, c2, wd, bd = (fnp.asarray(np.ascontiguousarray(p)) for p in (k1, c1, k2, c2, wd, bd))
    net = CNN(key=fr.key(0), image_size=28, channels=(32, 64), padding="VALID", pool="avg",
              channels_last=channels_last)
    return net.replace(conv1=net.conv1.replace(weight=k1, bias=c1), conv2=net.conv2.replace(weight=k2, bias=c2),
                       dense=net.dense.replace(weight=wd, bias=bd))


def flfun_step_fn(x, y):
    import flfun as fl
    from flfun import optim
    from models.cnn import loss_fn
    opt = optim.sgd(LR)

    def step(model, opt_state):
        loss, grads = fl.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return step, opt


def _model_losses(step, model, opt_state, n=3):
    out = []
    for _ in range(n):
        model, opt_state, loss = step(model, opt_state)
        out.append(float(loss))
    return out


def run_flfun():
    import flfun as fl
    import flfun.numpy as fnp
    params, xn, yn = data()
    x, y = fnp.asarray(xn), fnp.asarray(yn)
    step, opt = flfun_step_fn(x, y)
    jstep = fl.jit(step)
    model = flfun_model(params)
    check = _model_losses(jstep, model, opt.init(model))
    assert_check("W5 flfun jit", check, CHECK)
    assert_check("W5 flfun eager", _model_losses(step, model, opt.init(model)), CHECK)
    out = time_model_steps(jstep, step, model, opt.init, T)
    floor_state = [params]

    def floor():
        floor_state[0], _ = numpy_step(floor_state[0], xn, yn)
    out["numpy im2col floor (same process)"] = time_fn(floor, T)
    return {"variants": {k: timing_dict(v) for k, v in out.items()}, "check": check}


# --------------------------------------------------------------------------------------------------- peers
def run_torch():
    import torch
    import torch.nn.functional as F
    params, xn, yn = data()
    ps = [torch.from_numpy(p.copy()).requires_grad_() for p in params]
    x, y = torch.from_numpy(xn), torch.from_numpy(yn).long()

    def step(ps):
        k1, c1, k2, c2, wd, bd = ps
        h = F.relu(F.conv2d(x, k1, c1))
        h = F.relu(F.conv2d(h, k2, c2))
        h = F.avg_pool2d(h, 2)
        loss = F.cross_entropy(h.flatten(1) @ wd + bd, y)
        loss.backward()
        with torch.no_grad():
            for p in ps:
                p -= LR * p.grad
                p.grad = None
        return ps, loss.detach()
    check, _ = _losses(step, ps)
    assert_check("W5 torch", check, CHECK)
    return {"variants": {"eager step": timing_dict(time_fn(lambda: step(ps), T))}, "check": check,
            "threads": torch.get_num_threads()}


def run_jax():
    import jax
    import jax.numpy as jnp
    params, xn, yn = data()
    x, y = jnp.asarray(xn), jnp.asarray(yn)

    def loss(ps):
        k1, c1, k2, c2, wd, bd = ps
        conv = lambda h, k: jax.lax.conv_general_dilated(h, k, (1, 1), "VALID")
        h = jax.nn.relu(conv(x, k1) + c1[:, None, None])
        h = jax.nn.relu(conv(h, k2) + c2[:, None, None])
        h = h.reshape(64, 64, 12, 2, 12, 2).mean((3, 5))
        z = h.reshape(64, 9216) @ wd + bd
        return jnp.mean(jax.nn.logsumexp(z, axis=1) - jnp.take_along_axis(z, y[:, None], axis=1)[:, 0])

    @jax.jit
    def step(ps):
        value, grads = jax.value_and_grad(loss)(ps)
        return [p - LR * g for p, g in zip(ps, grads)], value
    ps = [jnp.asarray(p) for p in params]
    check, _ = _losses(step, ps)
    assert_check("W5 jax", check, CHECK)
    state = [ps]

    def one():
        state[0], value = step(state[0])
        return state[0], value
    return {"variants": {"jit step": timing_dict(time_fn(one, T, sync=jax.block_until_ready))}, "check": check}


PEERS = {"numpy": run_numpy, "flfun": run_flfun, "torch": run_torch, "jax": run_jax}


def main() -> str:
    base = "numpy/im2col step (floor)"
    rows, _ = run_rows("benchmarks.w5_cnn", [("numpy", None), ("flfun", None), ("torch", "torch"), ("jax", "jax")],
                       base)
    table = markdown_table(f"W5: CNN training step ({GFLOP} GFLOP, batch 64, 28x28)", rows, base)
    return table + "\n" + target_lines(rows) + "\n"


def target_lines(rows: list[dict]) -> str:
    """The issue's W5 target (flfun jit <= the numpy im2col floor) and the peers' ratios, from one run's rows."""
    lines = harness.target_lines(rows, "W5 ratio to the numpy im2col floor", ("numpy", "im2col step (floor)"),
                                 [(("flfun", "jit step"), "<= 1.0"), (("torch", "eager step"), ""),
                                  (("jax", "jit step"), "")])
    med = medians(rows)
    same = med.get(("flfun", "numpy im2col floor (same process)"))
    if same and med.get(("flfun", "jit step")):
        lines.append(f"| flfun jit step / floor timed in flfun's process | {med[('flfun', 'jit step')] / same:.2f}x "
                     f"| <= 1.0 |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not peer_main(PEERS):
        print(main())
