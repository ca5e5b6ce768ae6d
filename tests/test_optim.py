"""flfun.optim: hand-computed steps, PyTorch's SGD/Adam/AdamW formulas, clipping, chaining, schedules."""
import math

import numpy as np
import pytest
from peers import require

import flfun
import flfun.numpy as fnp
from flfun import optim


def run(opt, p0, grads, tree=lambda a: {"w": a}):
    params = tree(fnp.asarray(p0))
    state = opt.init(params)
    for g in grads:
        updates, state = opt.update(tree(fnp.asarray(g)), state, params)
        params = optim.apply_updates(params, updates)
    return np.asarray(params["w"]), state


def torch_adamw_reference(p, grads, lr, b1, b2, eps, wd):
    """PyTorch's AdamW update, written out in float64 (torch/optim/adamw.py, single-tensor path)."""
    p = p.astype(np.float64)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        step_size = lr / (1 - b1 ** t)
        denom = np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps
        p = p - step_size * m / denom
    return p


def test_sgd_hand_computed():
    p, _ = run(optim.sgd(0.1), np.array([1.0, 2.0], np.float32), [np.array([0.5, -1.0], np.float32)])
    np.testing.assert_allclose(p, [0.95, 2.1], rtol=1e-6)
    # momentum 0.9: b1 = g1; b2 = 0.9 b1 + g2; p -= lr * b
    g1, g2 = np.array([1.0], np.float32), np.array([2.0], np.float32)
    p, state = run(optim.sgd(0.1, momentum=0.9), np.array([0.0], np.float32), [g1, g2])
    np.testing.assert_allclose(p, [-(0.1 * 1.0) - 0.1 * (0.9 * 1.0 + 2.0)], rtol=1e-6)
    assert int(state.count) == 2
    # nesterov: p -= lr * (g + m b)
    p, _ = run(optim.sgd(0.1, momentum=0.9, nesterov=True), np.array([0.0], np.float32), [g1, g2])
    b1, b2 = 1.0, 0.9 * 1.0 + 2.0
    np.testing.assert_allclose(p, [-0.1 * (1.0 + 0.9 * b1) - 0.1 * (2.0 + 0.9 * b2)], rtol=1e-6)
    # weight decay is added to the gradient (torch's SGD)
    p, _ = run(optim.sgd(0.1, weight_decay=0.5), np.array([2.0], np.float32), [g1])
    np.testing.assert_allclose(p, [2.0 - 0.1 * (1.0 + 0.5 * 2.0)], rtol=1e-6)


def test_adamw_first_step_hand_computed():
    # t=1: m_hat = g and sqrt(v_hat) = |g|, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps)
    p, _ = run(optim.adamw(0.1, weight_decay=0.1), np.array([1.0, -3.0], np.float32),
               [np.array([0.5, -2.0], np.float32)])
    np.testing.assert_allclose(p, [1.0 * 0.99 - 0.1, -3.0 * 0.99 + 0.1], rtol=1e-6)


@pytest.mark.parametrize("wd", [0.0, 0.01, 0.3])
def test_adamw_matches_torch_formula(wd):
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(6)]
    p, _ = run(optim.adamw(3e-2, b1=0.8, b2=0.99, eps=1e-6, weight_decay=wd), p0, grads)
    np.testing.assert_allclose(p, torch_adamw_reference(p0, grads, 3e-2, 0.8, 0.99, 1e-6, wd), rtol=2e-6, atol=2e-6)
    pa, _ = run(optim.adam(3e-2, b1=0.8, b2=0.99, eps=1e-6), p0, grads)
    np.testing.assert_allclose(pa, torch_adamw_reference(p0, grads, 3e-2, 0.8, 0.99, 1e-6, 0.0), rtol=2e-6, atol=2e-6)


def test_adamw_in_float64_keeps_float64_precision():
    rng = np.random.default_rng(1)
    p0, grads = rng.standard_normal(5), [rng.standard_normal(5) for _ in range(8)]
    p, _ = run(optim.adamw(3e-2, b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1), p0, grads)
    assert p.dtype == np.float64
    np.testing.assert_allclose(p, torch_adamw_reference(p0, grads, 3e-2, 0.8, 0.99, 1e-6, 0.1), rtol=1e-13, atol=1e-13)


def test_against_torch_when_installed():
    torch = require("torch")
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal((5,)).astype(np.float32)
    grads = [rng.standard_normal((5,)).astype(np.float32) for _ in range(5)]
    cases = [(optim.adamw(1e-2, weight_decay=0.1), lambda t: torch.optim.AdamW([t], lr=1e-2, weight_decay=0.1)),
             (optim.sgd(0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
              lambda t: torch.optim.SGD([t], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))]
    for opt, make in cases:
        t = torch.tensor(p0.copy(), requires_grad=True)
        topt = make(t)
        for g in grads:
            t.grad = torch.tensor(g)
            topt.step()
        np.testing.assert_allclose(run(opt, p0, grads)[0], t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_adamw_mask_and_pytrees():
    params = {"w": fnp.ones(2), "b": fnp.ones(2)}
    grads = {"w": fnp.zeros(2), "b": fnp.zeros(2)}
    opt = optim.adamw(0.1, weight_decay=0.5, mask=lambda p: {"w": True, "b": False})
    updates, _ = opt.update(grads, opt.init(params), params)
    np.testing.assert_allclose(np.asarray(updates["w"]), [-0.05, -0.05], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(updates["b"]), [0.0, 0.0])
    with pytest.raises(ValueError, match="adamw: mask must have the structure of params"):
        optim.adamw(0.1, mask={"w": True}).update(grads, opt.init(params), params)
    with pytest.raises(ValueError, match="adamw: update needs params"):
        optim.adamw(0.1).update(grads, opt.init(params))


def test_clip_by_global_norm_and_chain():
    g = {"a": fnp.asarray([3.0]), "b": fnp.asarray([4.0])}
    assert float(optim.global_norm(g)) == pytest.approx(5.0)
    clip = optim.clip_by_global_norm(1.0)
    out, _ = clip.update(g, clip.init(g))
    np.testing.assert_allclose(np.asarray(out["a"]), [3.0 / (5.0 + 1e-6)], rtol=1e-6)
    small, _ = clip.update({"a": fnp.asarray([0.3])}, clip.init(None))
    np.testing.assert_allclose(np.asarray(small["a"]), [0.3], rtol=1e-6)
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(1.0))
    p, state = run(opt, np.array([0.0, 0.0], np.float32), [np.array([3.0, 4.0], np.float32)])
    np.testing.assert_allclose(p, [-0.6, -0.8], rtol=1e-5)
    assert isinstance(state, optim.ChainState) and len(state.states) == 2
    with pytest.raises(ValueError, match="chain: argument 1 is not a GradientTransformation"):
        optim.chain(clip, lambda g: g)


def test_schedules():
    s = optim.warmup_cosine_schedule(1.0, warmup_steps=10, decay_steps=110, init_value=0.0, end_value=0.1)
    assert [round(float(s(i)), 6) for i in (0, 5, 10, 60, 110, 500)] == [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]
    s = optim.step_schedule(0.1, step_size=3, gamma=0.5)
    assert [round(float(s(i)), 6) for i in (0, 2, 3, 7)] == [0.1, 0.1, 0.05, 0.025]
    assert float(optim.constant_schedule(0.3)(17)) == pytest.approx(0.3)
    # a schedule drives the learning rate through the optimiser's step count
    p, _ = run(optim.sgd(optim.step_schedule(1.0, 1, 0.5)), np.array([0.0], np.float32),
               [np.array([1.0], np.float32)] * 3)
    np.testing.assert_allclose(p, [-(1.0 + 0.5 + 0.25)], rtol=1e-6)
    with pytest.raises(ValueError, match="warmup_cosine_schedule: need 0 <= warmup_steps < decay_steps"):
        optim.warmup_cosine_schedule(1.0, 10, 5)
    with pytest.raises(ValueError, match="step_schedule: step_size must be a positive int"):
        optim.step_schedule(1.0, 0)


def test_update_is_differentiable_and_grad_compatible():
    # a whole train step built from grad + update + apply_updates
    opt = optim.adamw(0.1)
    params = {"w": fnp.asarray([1.0, -1.0])}
    state = opt.init(params)
    loss = lambda p: fnp.sum(p["w"] ** 2)
    for _ in range(3):
        g = flfun.grad(loss)(params)
        updates, state = opt.update(g, state, params)
        params = optim.apply_updates(params, updates)
    assert float(loss(params)) < 2.0


def test_argument_errors():
    with pytest.raises(ValueError, match="sgd: learning_rate must be a non-negative number"):
        optim.sgd(-1.0)
    with pytest.raises(ValueError, match="sgd: nesterov=True needs a positive momentum"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"adamw: b1 must be in \[0, 1\)"):
        optim.adamw(0.1, b1=1.0)
    with pytest.raises(ValueError, match="clip_by_global_norm: max_norm must be a positive number"):
        optim.clip_by_global_norm(0.0)
