"""nn.LSTM and nn.GRU: forward and gradients against torch.nn.LSTM/GRU with copied weights (float64), jit vs
eager, vmap vs the batched call, grad of vmap, and the errors for bad shapes."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flfun
import flfun.numpy as fnp
from flfun import nn, random
from tests.peers import require

torch = require("torch")
RNG = np.random.default_rng(0)


def t(a):
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.array(a, dtype=np.float64))


def make(kind, n_in, hidden, use_bias=True, seed=0):
    """An flfun layer in float64 and a torch layer (batch_first) with the same weights."""
    layer = getattr(nn, kind)(n_in, hidden, key=random.key(seed), use_bias=use_bias, dtype=np.float64)
    ref = getattr(torch.nn, kind)(n_in, hidden, bias=use_bias, batch_first=True).double()
    with torch.no_grad():
        ref.weight_ih_l0.copy_(t(np.asarray(layer.weight_ih).T))
        ref.weight_hh_l0.copy_(t(np.asarray(layer.weight_hh).T))
        if use_bias:
            ref.bias_ih_l0.copy_(t(layer.bias_ih))
            ref.bias_hh_l0.copy_(t(layer.bias_hh))
    return layer, ref


def run_torch(kind, ref, x, state):
    """torch's outputs and final state(s) as numpy, for ``x`` (B, T, I) and flfun-shaped states (B, H)."""
    if state is not None:
        state = tuple(t(s)[None] for s in state) if kind == "LSTM" else t(state)[None]
    ys, last = ref(t(x), state)
    last = [s[0] for s in last] if kind == "LSTM" else [last[0]]
    return ys, last


def flat_out(kind, out):
    ys, last = out
    return ys, list(last) if kind == "LSTM" else [last]


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_forward_matches_torch(kind, use_bias, with_state):
    b, n_t, n_in, hidden = 3, 5, 4, 6
    layer, ref = make(kind, n_in, hidden, use_bias)
    x = RNG.normal(size=(b, n_t, n_in))
    state = None
    if with_state:
        hs = [RNG.normal(size=(b, hidden)) for _ in range(2 if kind == "LSTM" else 1)]
        state = tuple(hs) if kind == "LSTM" else hs[0]
    ys, last = flat_out(kind, layer(fnp.asarray(x), None if state is None else
                                    (tuple(map(fnp.asarray, state)) if kind == "LSTM" else fnp.asarray(state))))
    ys_ref, last_ref = run_torch(kind, ref, x, state)
    np.testing.assert_allclose(np.asarray(ys), ys_ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    for s, s_ref in zip(last, last_ref):
        np.testing.assert_allclose(np.asarray(s), s_ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(last[0]), np.asarray(ys)[:, -1])   # h_T is the last output


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_unbatched_and_many_batch_dims(kind):
    layer, ref = make(kind, 3, 4)
    x = RNG.normal(size=(2, 3, 5, 3))
    ys, last = flat_out(kind, layer(fnp.asarray(x)))
    ys_ref, last_ref = run_torch(kind, ref, x.reshape(6, 5, 3), None)
    np.testing.assert_allclose(np.asarray(ys), ys_ref.detach().numpy().reshape(2, 3, 5, 4), atol=1e-12)
    assert all(s.shape == (2, 3, 4) for s in last)
    one, _ = layer(fnp.asarray(x[1, 2]))          # (T, I): one sequence, states (H,)
    np.testing.assert_allclose(np.asarray(one), np.asarray(ys)[1, 2], atol=1e-12)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_grads_match_torch(kind):
    b, n_t, n_in, hidden = 2, 4, 3, 5
    layer, ref = make(kind, n_in, hidden)
    x = RNG.normal(size=(b, n_t, n_in))
    w_ys, w_h = RNG.normal(size=(b, n_t, hidden)), RNG.normal(size=(b, hidden))

    def loss(layer, x):
        ys, last = flat_out(kind, layer(x))
        return fnp.sum(ys * fnp.asarray(w_ys)) + sum(fnp.sum(s * fnp.asarray(w_h)) for s in last)
    g_layer, g_x = flfun.grad(loss, argnums=(0, 1))(layer, fnp.asarray(x))
    xt = t(x).requires_grad_()
    ys, last = run_torch(kind, ref, xt, None)
    ((ys * t(w_ys)).sum() + sum((s * t(w_h)).sum() for s in last)).backward()
    np.testing.assert_allclose(np.asarray(g_x), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    for name, transpose in (("weight_ih", True), ("weight_hh", True), ("bias_ih", False), ("bias_hh", False)):
        want = getattr(ref, f"{name}_l0").grad.numpy()
        np.testing.assert_allclose(np.asarray(getattr(g_layer, name)), want.T if transpose else want,
                                   rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_jit_matches_eager(kind):
    layer = getattr(nn, kind)(3, 4, key=random.key(1))
    x = fnp.asarray(RNG.normal(size=(2, 6, 3)).astype(np.float32))

    def loss(layer, x):
        ys, _ = layer(x)
        return fnp.sum(ys ** 2)
    eager = flfun.value_and_grad(loss)(layer, x)
    jitted = flfun.jit(flfun.value_and_grad(loss))(layer, x)
    for a, b in zip(flfun.tree.tree_leaves(eager), flfun.tree.tree_leaves(jitted)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    ys, _ = flfun.jit(lambda m, x: m(x))(layer, x)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(layer(x)[0]), rtol=1e-6, atol=1e-7)


@settings(max_examples=6, deadline=None)
@given(kind=st.sampled_from(["LSTM", "GRU"]), b=st.integers(1, 3), n_t=st.integers(1, 4))
def test_vmap_and_grad_of_vmap(kind, b, n_t):
    layer = getattr(nn, kind)(2, 3, key=random.key(2), dtype=np.float64)
    x = fnp.asarray(RNG.normal(size=(b, n_t, 2)))
    batched = layer(x)[0]
    mapped = flfun.vmap(lambda xi: layer(xi)[0])(x)          # vmap over unbatched (T, I) calls
    np.testing.assert_allclose(np.asarray(mapped), np.asarray(batched), atol=1e-12)
    g_map = flfun.grad(lambda m: fnp.sum(flfun.vmap(lambda xi: m(xi)[0])(x) ** 2))(layer)
    g_bat = flfun.grad(lambda m: fnp.sum(m(x)[0] ** 2))(layer)
    for a, c in zip(flfun.tree.tree_leaves(g_map), flfun.tree.tree_leaves(g_bat)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-10, atol=1e-12)
    per_example = flfun.vmap(flfun.grad(lambda m, xi: fnp.sum(m(xi)[0] ** 2)), in_axes=(None, 0))(layer, x)
    np.testing.assert_allclose(np.asarray(per_example.weight_hh).sum(0), np.asarray(g_bat.weight_hh), atol=1e-10)


def test_bad_shapes_are_clear_errors():
    lstm, gru = nn.LSTM(3, 4, key=random.key(0)), nn.GRU(3, 4, key=random.key(0))
    with pytest.raises(ValueError, match=r"LSTM: expected input of shape \(\.\.\., T, 3\) \(batch first\), got "
                                         r"shape \(2, 5, 7\)"):
        lstm(fnp.ones((2, 5, 7)))
    with pytest.raises(ValueError, match=r"GRU: expected input of shape \(\.\.\., T, 3\).*got shape \(3,\)"):
        gru(fnp.ones((3,)))
    with pytest.raises(ValueError, match=r"LSTM: c0 must have shape \(2, 4\) for input of shape \(2, 5, 3\), "
                                         r"got \(2, 5\)"):
        lstm(fnp.ones((2, 5, 3)), (fnp.zeros((2, 4)), fnp.zeros((2, 5))))
    with pytest.raises(ValueError, match=r"GRU: h0 must have shape \(4,\) for input of shape \(5, 3\), got "
                                         r"\(1, 4\)"):
        gru(fnp.ones((5, 3)), fnp.zeros((1, 4)))


def test_init_like_torch_and_is_a_pytree():
    lstm = nn.LSTM(5, 8, key=random.key(0))
    assert lstm.weight_ih.shape == (5, 32) and lstm.weight_hh.shape == (8, 32) and lstm.bias_hh.shape == (32,)
    assert nn.count_params(nn.GRU(5, 8, key=random.key(0))) == 3 * 8 * (5 + 8 + 2)
    bound = 1 / np.sqrt(8)
    w = np.asarray(lstm.weight_hh)
    assert w.dtype == np.float32 and np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert nn.count_params(nn.LSTM(5, 8, key=random.key(0), use_bias=False)) == 4 * 8 * 13
