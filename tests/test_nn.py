"""flfun.nn layers: forward against numpy references, gradients with check_grads, Module behaviour, errors."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flfun
import flfun.numpy as fnp
from flfun import nn, random
from flfun.testing import check_grads
from flfun.tree import tree_flatten, tree_leaves, tree_unflatten

K = random.key(0)
RNG = np.random.default_rng(0)


def f64(module):
    """The module with float64 leaves (finite differences need the precision)."""
    leaves, td = tree_flatten(module)
    return tree_unflatten(td, [fnp.asarray(np.asarray(l, np.float64)) for l in leaves])


def grads_ok(module, fn, x, **kw):
    """check_grads of ``fn(module, x)`` with respect to the module's leaves and ``x``."""
    leaves, td = tree_flatten(f64(module))
    n = len(leaves)

    def f(*args):
        return fn(tree_unflatten(td, list(args[:n])), args[n])
    check_grads(f, [np.asarray(l) for l in leaves] + [np.asarray(x, np.float64)], order=1,
                atol=kw.get("atol", 1e-5), rtol=kw.get("rtol", 1e-4))


def conv_ref(x, w, b, stride, pad, dil, groups):
    """Direct N-d cross-correlation in float64 (NC..., OI...)."""
    nsp = x.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(pad))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    assert c == cg * groups
    k = w.shape[2:]
    out_sp = [(x.shape[2 + i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    out = np.zeros((n, o, *out_sp))
    og = o // groups
    for idx in np.ndindex(*out_sp):
        for ki in np.ndindex(*k):
            pos = tuple(idx[i] * stride[i] + ki[i] * dil[i] for i in range(nsp))
            patch = x[(slice(None), slice(None)) + pos]            # (n, c)
            for g in range(groups):
                wk = w[(slice(g * og, (g + 1) * og), slice(None)) + ki]  # (og, cg)
                out[(slice(None), slice(g * og, (g + 1) * og)) + idx] += patch[:, g * cg:(g + 1) * cg] @ wk.T
    return out + (0 if b is None else b.reshape((1, -1) + (1,) * nsp))


def test_linear_forward_and_grads():
    lin = nn.Linear(5, 3, key=K)
    assert lin.weight.shape == (5, 3) and lin.bias.shape == (3,)
    bound = 1 / math.sqrt(5)
    assert np.all(np.abs(np.asarray(lin.weight)) <= bound) and np.all(np.abs(np.asarray(lin.bias)) <= bound)
    x = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    ref = x @ np.asarray(lin.weight) + np.asarray(lin.bias)
    np.testing.assert_allclose(np.asarray(lin(fnp.asarray(x))), ref, rtol=1e-5, atol=1e-6)
    grads_ok(lin, lambda m, x: m(x), x[0])
    nb = nn.Linear(5, 3, key=K, use_bias=False)
    assert nb.bias is None and len(tree_leaves(nb)) == 1
    g = flfun.grad(lambda m: fnp.sum(m(fnp.asarray(x))))(lin)
    assert isinstance(g, nn.Linear)
    np.testing.assert_allclose(np.asarray(g.bias), np.full(3, 8.0), rtol=1e-6)


@pytest.mark.parametrize("cfg", [{"stride": 1, "padding": "VALID", "dilation": 1, "groups": 1},
                                 {"stride": 2, "padding": "SAME", "dilation": 1, "groups": 1},
                                 {"stride": 1, "padding": 1, "dilation": 2, "groups": 2},
                                 {"stride": (2, 1), "padding": ((1, 0), (0, 2)), "dilation": 1, "groups": 1}])
def test_conv2d_matches_reference(cfg):
    conv = nn.Conv2d(4, 6, (3, 2), key=K, **cfg)
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    y = np.asarray(conv(fnp.asarray(x)))
    pad = conv.padding
    if pad == "SAME":   # lax SAME: total = max((ceil(n/s) - 1) s + k - n, 0), low half rounded down
        pad = []
        for n, k, s in zip(x.shape[2:], conv.weight.shape[2:], conv.stride):
            tot = max((-(-n // s) - 1) * s + k - n, 0)
            pad.append((tot // 2, tot - tot // 2))
    elif pad == "VALID":
        pad = ((0, 0), (0, 0))
    ref = conv_ref(x, np.asarray(conv.weight), np.asarray(conv.bias), conv.stride, pad, conv.dilation, conv.groups)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert np.asarray(conv(fnp.asarray(x[0]))).shape == ref.shape[1:]


def test_conv_grads_and_conv1d():
    conv = nn.Conv2d(2, 3, 3, padding="SAME", key=K)
    grads_ok(conv, lambda m, x: m(x), RNG.standard_normal((1, 2, 4, 4)))
    c1 = nn.Conv1d(3, 4, 3, stride=2, padding=1, key=K)
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    ref = conv_ref(x, np.asarray(c1.weight), np.asarray(c1.bias), (2,), [(1, 1)], (1,), 1)
    np.testing.assert_allclose(np.asarray(c1(fnp.asarray(x))), ref, rtol=1e-4, atol=1e-5)
    grads_ok(c1, lambda m, x: m(x), x[:1])


@pytest.mark.parametrize("cfg", [{"padding": "VALID"}, {"stride": 2, "padding": "SAME"},
                                 {"padding": 1, "dilation": 2, "groups": 2}])
def test_channels_last_conv2d_matches_nchw_and_reference(cfg):
    cl = nn.Conv2d(4, 6, (3, 2), key=K, channels_last=True, **cfg)
    assert cl.weight.shape == (3, 2, 4 // cl.groups, 6)
    cf = cl.replace(weight=fnp.asarray(np.asarray(cl.weight).transpose(3, 2, 0, 1)), channels_last=False)
    x = RNG.standard_normal((2, 7, 6, 4)).astype(np.float32)                      # NHWC
    y = np.asarray(cl(fnp.asarray(x)))
    nchw = np.asarray(cf(fnp.asarray(x.transpose(0, 3, 1, 2))))
    np.testing.assert_allclose(y, nchw.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    if cfg["padding"] != "SAME":
        pad = ((0, 0),) * 2 if cfg["padding"] == "VALID" else ((1, 1),) * 2
        ref = conv_ref(x.transpose(0, 3, 1, 2), np.asarray(cf.weight), np.asarray(cl.bias), cl.stride, pad,
                       cl.dilation, cl.groups)
        np.testing.assert_allclose(y, ref.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    assert np.asarray(cl(fnp.asarray(x[0]))).shape == y.shape[1:]
    grads_ok(cl, lambda m, v: m(v), x[:1, :5, :4])
    with pytest.raises(ValueError, match=r"Conv2d: expected input \(N, spatial, spatial, 4\)"):
        cl(fnp.ones((1, 4, 5, 5)))


def test_channels_last_conv1d_and_pooling():
    c1 = nn.Conv1d(3, 4, 3, stride=2, padding=1, key=K, channels_last=True)
    x = RNG.standard_normal((2, 9, 3)).astype(np.float32)
    ref = conv_ref(x.transpose(0, 2, 1), np.asarray(c1.weight).transpose(2, 1, 0), np.asarray(c1.bias), (2,),
                   [(1, 1)], (1,), 1)
    np.testing.assert_allclose(np.asarray(c1(fnp.asarray(x))), ref.transpose(0, 2, 1), rtol=1e-4, atol=1e-5)
    v = RNG.standard_normal((2, 5, 4, 3)).astype(np.float32)                      # NHWC
    crop = v[:, :4, :4].reshape(2, 2, 2, 2, 2, 3)
    np.testing.assert_allclose(np.asarray(nn.avg_pool(fnp.asarray(v), (2, 2), channels_last=True)),
                               crop.mean((2, 4)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.max_pool(fnp.asarray(v), (2, 2), channels_last=True)),
                               crop.max((2, 4)), rtol=1e-6)
    check_grads(lambda a: nn.avg_pool(a, (2, 2), channels_last=True), [v.astype(np.float64)], order=1)
    with pytest.raises(ValueError, match="max_pool: input of shape \\(3, 3\\) has fewer than 3 dims"):
        nn.max_pool(fnp.ones((3, 3)), (2, 2), channels_last=True)


def test_pooling():
    x = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    crop = x[:, :, :4, :4].reshape(2, 3, 2, 2, 2, 2)
    np.testing.assert_allclose(np.asarray(nn.avg_pool(fnp.asarray(x), (2, 2))), crop.mean((3, 5)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.MaxPool2d(2)(fnp.asarray(x))), crop.max((3, 5)), rtol=1e-6)
    check_grads(lambda v: nn.avg_pool(v, (2, 2)), [x.astype(np.float64)], order=1)
    assert nn.Flatten()(fnp.asarray(x)).shape == (2, 60)
    with pytest.raises(ValueError, match="avg_pool: window"):
        nn.avg_pool(fnp.asarray(x), (6, 2))


@given(st.integers(1, 3), st.integers(2, 6))
def test_layernorm_rmsnorm(rows, dim):
    x = np.random.default_rng(rows * 10 + dim).standard_normal((rows, dim)).astype(np.float32) * 3 + 1
    ln = nn.LayerNorm(dim)
    ln = ln.replace(weight=fnp.asarray(np.linspace(0.5, 2, dim, dtype=np.float32)),
                    bias=fnp.asarray(np.linspace(-1, 1, dim, dtype=np.float32)))
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * np.asarray(ln.weight) + np.asarray(ln.bias)
    np.testing.assert_allclose(np.asarray(ln(fnp.asarray(x))), ref, rtol=1e-4, atol=1e-4)
    rms = nn.RMSNorm(dim)
    ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(np.asarray(rms(fnp.asarray(x))), ref, rtol=1e-4, atol=1e-5)
    assert nn.LayerNorm(dim, elementwise_affine=False).weight is None


def test_norm_grads():
    x = RNG.standard_normal((2, 5))
    grads_ok(nn.LayerNorm(5), lambda m, x: m(x), x)
    grads_ok(nn.RMSNorm(5), lambda m, x: m(x), x)


def test_embedding():
    emb = nn.Embedding(10, 4, key=K)
    ids = np.array([[1, 9], [0, 1]], dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(emb(fnp.asarray(ids))), np.asarray(emb.weight)[ids])
    g = flfun.grad(lambda m: fnp.sum(m(fnp.asarray(ids))))(emb)
    expected = np.zeros((10, 4))
    np.add.at(expected, ids.ravel(), 1.0)
    np.testing.assert_allclose(np.asarray(g.weight), expected)
    with pytest.raises(ValueError, match="Embedding: ids must be integers"):
        emb(fnp.zeros(3))


def test_dropout():
    x = fnp.ones((100, 100))
    d = nn.Dropout(0.25)
    assert d(x, inference=True) is x
    y = np.asarray(d(x, key=K))
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02 and np.allclose(y[kept], 1 / 0.75)
    np.testing.assert_array_equal(y, np.asarray(d(x, key=K)))
    assert not np.array_equal(y, np.asarray(d(x, key=random.key(1))))
    with pytest.raises(ValueError, match=r"Dropout: pass key=\.\.\."):
        d(x)
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0, 1\)"):
        nn.Dropout(1.0)


def mha_ref(x, mha, causal):
    wqkv, bqkv = np.asarray(mha.qkv.weight, np.float64), np.asarray(mha.qkv.bias, np.float64)
    wo, bo = np.asarray(mha.out.weight, np.float64), np.asarray(mha.out.bias, np.float64)
    b, t, d = x.shape
    h = mha.num_heads
    qkv = x @ wqkv + bqkv
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for i in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // h)
    if causal:
        s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    return o @ wo + bo


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention(causal):
    mha = nn.MultiHeadAttention(8, 2, key=K)
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    y = np.asarray(mha(fnp.asarray(x), causal=causal))
    np.testing.assert_allclose(y, mha_ref(x.astype(np.float64), mha, causal), rtol=1e-4, atol=1e-5)
    if causal:   # position t ignores later positions
        x2 = x.copy()
        x2[:, 3:] += 1.0
        y2 = np.asarray(mha(fnp.asarray(x2), causal=True))
        np.testing.assert_allclose(y2[:, :3], y[:, :3], rtol=1e-5, atol=1e-6)
    grads_ok(mha, lambda m, x: m(x, causal=causal), x[:1, :3])


def test_mlp_sequential_and_module_behaviour():
    k1, k2 = nn.split_key(K)
    mlp = nn.MLP([4, 8, 3], key=k1, activation=nn.gelu)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    l0, l1 = mlp.layers
    ref = nn.gelu(l0(fnp.asarray(x)))
    np.testing.assert_allclose(np.asarray(mlp(fnp.asarray(x))), np.asarray(l1(ref)), rtol=1e-6)
    grads_ok(mlp.replace(activation=nn.silu), lambda m, x: m(x), x[:2])
    seq = nn.Sequential(nn.Linear(4, 8, key=k1), nn.relu, nn.Dropout(0.5), nn.Linear(8, 3, key=k2))
    assert len(seq) == 4 and isinstance(seq[1], nn.Lambda)
    out_eval = seq(fnp.asarray(x), inference=True)
    ref = seq[3](nn.relu(seq[0](fnp.asarray(x))))
    np.testing.assert_allclose(np.asarray(out_eval), np.asarray(ref), rtol=1e-6)
    assert not np.allclose(np.asarray(seq(fnp.asarray(x), key=K)), np.asarray(out_eval))
    assert nn.count_params(seq) == 4 * 8 + 8 + 8 * 3 + 3
    # immutable pytrees: static config lives in the tree structure, arrays are the leaves
    with pytest.raises(dataclasses.FrozenInstanceError, match="Linear is immutable"):
        seq[0].weight = None
    with pytest.raises(ValueError, match="Linear.replace: no field"):
        seq[0].replace(kernel=None)
    assert repr(seq[0]) == "Linear(weight=f32[4,8], bias=f32[8])"
    conv = nn.Conv2d(1, 2, 3, stride=2, key=K)
    leaves, td = tree_flatten(conv)
    assert len(leaves) == 2 and tree_unflatten(td, leaves).stride == (2, 2)
    scaled = flfun.tree_map(lambda a: a * 0, mlp)
    assert isinstance(scaled, nn.MLP) and scaled.activation is nn.gelu


def test_vmap_and_jit_over_modules():
    lin = nn.Linear(3, 2, key=K)
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(flfun.vmap(lin)(fnp.asarray(x))), np.asarray(lin(fnp.asarray(x))),
                               rtol=1e-6)
    if hasattr(flfun, "jit"):
        f = flfun.jit(lambda m, x: m(x))
        np.testing.assert_allclose(np.asarray(f(lin, fnp.asarray(x))), np.asarray(lin(fnp.asarray(x))), rtol=1e-6)


def test_losses():
    z = RNG.standard_normal((6, 5)).astype(np.float32)
    y = np.array([0, 4, 2, 2, 1, 3], dtype=np.int32)
    lse = np.log(np.exp(z.astype(np.float64)).sum(-1))
    per = lse - z[np.arange(6), y]
    np.testing.assert_allclose(float(nn.softmax_cross_entropy(fnp.asarray(z), fnp.asarray(y))), per.mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.softmax_cross_entropy(fnp.asarray(z), fnp.asarray(y),
                                                                   reduction="none")), per, rtol=1e-5)
    g = np.asarray(flfun.grad(lambda v: nn.softmax_cross_entropy(v, fnp.asarray(y)))(fnp.asarray(z)))
    sm = np.exp(z - lse[:, None])
    np.testing.assert_allclose(g, (sm - np.eye(5)[y]) / 6, rtol=1e-4, atol=1e-6)
    check_grads(lambda v: nn.softmax_cross_entropy(v, fnp.asarray(y)), [z.astype(np.float64)], order=2)
    p, t = RNG.standard_normal(7), RNG.standard_normal(7)
    assert float(nn.mse(fnp.asarray(p), fnp.asarray(t))) == pytest.approx(((p - t) ** 2).mean(), rel=1e-6)
    assert float(nn.mse(fnp.asarray(p), fnp.asarray(t), reduction="sum")) == pytest.approx(((p - t) ** 2).sum())
    with pytest.raises(ValueError, match="softmax_cross_entropy: labels must be integer class ids"):
        nn.softmax_cross_entropy(fnp.asarray(z), fnp.asarray(z))
    with pytest.raises(ValueError, match=r"softmax_cross_entropy: logits \(6, 5\) need labels of shape \(6,\)"):
        nn.softmax_cross_entropy(fnp.asarray(z), fnp.asarray(y[:3]))
    with pytest.raises(ValueError, match="mse: reduction must be one of"):
        nn.mse(fnp.asarray(p), fnp.asarray(t), reduction="avg")


def test_initializers():
    init = nn.initializers
    assert init.compute_fans((32, 16, 3, 3), in_axis=1, out_axis=0) == (144, 288)
    assert init.compute_fans((64, 10)) == (64, 10)
    w = np.asarray(init.he_normal()(K, (400, 300)))
    assert abs(w.std() - math.sqrt(2 / 400)) < 0.005 and np.abs(w).max() <= 2 * math.sqrt(2 / 400) / 0.8796 + 1e-6
    u = np.asarray(init.glorot_uniform()(K, (200, 100)))
    lim = math.sqrt(6 / 300)
    assert np.abs(u).max() <= lim and abs(u.std() - lim / math.sqrt(3)) < 0.003
    assert np.asarray(init.zeros(K, (2,))).tolist() == [0, 0] and np.asarray(init.constant(3.0)(K, (1,)))[0] == 3
    assert np.asarray(init.normal(0.02)(K, (3,), np.float64)).dtype == np.float64
    with pytest.raises(ValueError, match="variance_scaling: mode must be"):
        init.variance_scaling(1.0, "fan", "normal")


def test_layer_input_errors():
    with pytest.raises(ValueError, match=r"Linear: expected input with last dim 5, got shape \(2, 4\)"):
        nn.Linear(5, 3, key=K)(fnp.ones((2, 4)))
    with pytest.raises(ValueError, match=r"Conv2d: expected input \(N, 4, "):
        nn.Conv2d(4, 2, 3, key=K)(fnp.ones((1, 3, 5, 5)))
    with pytest.raises(ValueError, match="Conv2d: groups=3 must divide in_channels=4"):
        nn.Conv2d(4, 6, 3, groups=3, key=K)
    with pytest.raises(ValueError, match="Conv2d: padding must be 'SAME', 'VALID'"):
        nn.Conv2d(4, 6, 3, padding="FULL", key=K)
    with pytest.raises(ValueError, match="MultiHeadAttention: num_heads=3 must divide d_model=8"):
        nn.MultiHeadAttention(8, 3, key=K)
    with pytest.raises(ValueError, match="MLP: sizes must list at least two"):
        nn.MLP([4], key=K)
    with pytest.raises(ValueError, match="Sequential: layer 0 is not callable"):
        nn.Sequential(3)


@pytest.mark.parametrize("layer", [nn.AvgPool2d, nn.MaxPool2d])
def test_pool_layers_channels_last(layer):
    x = fnp.asarray(np.random.default_rng(0).standard_normal((2, 3, 8, 6)).astype(np.float32))
    nhwc = layer(2, channels_last=True)(fnp.transpose(x, (0, 2, 3, 1)))
    np.testing.assert_allclose(np.asarray(nhwc), np.asarray(fnp.transpose(layer(2)(x), (0, 2, 3, 1))), rtol=1e-6)
