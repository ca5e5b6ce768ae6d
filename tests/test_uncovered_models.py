"""Paths of flfun.nn, flfun.random, flfun.optim, flfun.testing and flfun.serialization that the rest of the suite
never ran: initializer statistics, permutation/choice semantics, Module construction and repr, user-input errors."""
import dataclasses
import math
import re

import numpy as np
import pytest
from peers import require

import flfun
import flfun.numpy as fnp
from flfun import nn, optim, serialization as checkpoint, testing
from flfun import random as fr
from flfun.nn import initializers as init

stats = require("scipy.stats")

K = fr.key(0)


# ------------------------------------------------------------------------------------------------ initializers
def _truncnorm_kurtosis():
    return stats.truncnorm(-2.0, 2.0).stats(moments="k") + 3.0


@pytest.mark.parametrize("factory, shape, std, kind, bound", [
    # (factory, shape, expected std, distribution, the largest |w| allowed)
    (lambda: init.truncated_normal(0.3), (256, 256), 0.3 * 0.87962566, "truncated", 0.6),
    (lambda: init.variance_scaling(2.0, "fan_out", "normal"), (64, 1024), math.sqrt(2 / 1024), "normal", None),
    (lambda: init.glorot_normal(), (256, 128), math.sqrt(2 / 384), "truncated", 2 * math.sqrt(2 / 384) / 0.8796),
    (lambda: init.lecun_normal(in_axis=1, out_axis=0), (32, 64, 3, 3), math.sqrt(1 / 576), "truncated",
     2 * math.sqrt(1 / 576) / 0.8796),
    (lambda: init.he_uniform(), (512, 128), math.sqrt(2 / 512), "uniform", math.sqrt(6 / 512)),
])
def test_initializer_statistics(factory, shape, std, kind, bound):
    w = np.asarray(factory()(K, shape), dtype=np.float64).ravel()
    assert w.shape == (math.prod(shape),) and abs(w.mean()) < 0.03 * std
    np.testing.assert_allclose(w.std(), std, rtol=0.03)
    kurtosis = {"uniform": 1.8, "truncated": _truncnorm_kurtosis(), "normal": 3.0}[kind]
    np.testing.assert_allclose(stats.kurtosis(w, fisher=False), kurtosis, atol=0.08)
    if bound is not None:
        assert np.abs(w).max() <= bound * (1 + 1e-6)
    else:   # a normal tail: about 4.55% beyond 2 standard deviations
        assert abs(np.mean(np.abs(w) > 2 * std) - 0.0455) < 0.005


def test_uniform_initializer_draws_from_zero_to_scale_like_jax():
    w = np.asarray(init.uniform(0.5)(K, (256, 256)), dtype=np.float64)
    assert w.min() >= 0.0 and w.max() < 0.5
    np.testing.assert_allclose([w.mean(), w.std()], [0.25, 0.5 / math.sqrt(12)], rtol=0.02)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_ones_initializer(dtype):
    w = init.ones(K, [2, 3], dtype)
    assert w.shape == (2, 3) and w.dtype == dtype and np.asarray(w).tolist() == [[1, 1, 1]] * 2


@pytest.mark.parametrize("shape, fans", [((7,), (7, 7)), ((), (1, 1))])
def test_compute_fans_of_vectors_and_scalars(shape, fans):
    assert init.compute_fans(shape) == fans


def test_variance_scaling_rejects_unknown_distribution():
    with pytest.raises(ValueError, match="variance_scaling: distribution must be 'normal', 'truncated_normal' or "
                                         "'uniform', got 'gamma'"):
        init.variance_scaling(1.0, "fan_in", "gamma")


# ------------------------------------------------------------------------------------------------------ random
@pytest.mark.parametrize("shape", ["ab", 3.0, [2.0], None])
def test_random_shape_must_be_ints(shape):
    msg = f"uniform: shape must be a tuple of non-negative ints, got {shape!r}"
    with pytest.raises(ValueError, match=re.escape(msg)):
        fr.uniform(K, shape)


def test_random_too_many_values_per_call():
    with pytest.raises(ValueError, match=r"random: at most 2\*\*32 - 1 values per call, got shape \(65536, 65536\)"):
        fr.bits(K, (2 ** 16, 2 ** 16))


@pytest.mark.parametrize("x, msg", [
    (-1, "permutation: x must be a non-negative int or an array, got -1"),
    (fnp.asarray(3.0), "permutation: x must be a non-negative int or an array with at least one dimension"),
])
def test_permutation_errors(x, msg):
    with pytest.raises(ValueError, match=msg):
        fr.permutation(K, x)


@pytest.mark.parametrize("independent", [False, True])
def test_permutation_of_a_vector_permutes_its_values(independent):
    x = np.arange(10) * 10 + 3
    out = np.asarray(fr.permutation(K, fnp.asarray(x), independent=independent))
    assert sorted(out.tolist()) == x.tolist() and out.tolist() != x.tolist()
    # the same shuffle as the index permutation (and as jax.random.permutation, recorded from jax 0.10)
    np.testing.assert_array_equal(out, x[np.asarray(fr.permutation(K, 10))])
    np.testing.assert_array_equal(out, [3, 13, 83, 53, 63, 43, 33, 23, 73, 93])


def test_choice_with_replacement_is_uniform_over_range():
    draws = np.asarray(fr.choice(K, 5, (50, 100)))
    assert draws.shape == (50, 100) and draws.dtype == np.int64
    counts = np.bincount(draws.ravel(), minlength=5)
    assert len(counts) == 5 and stats.chisquare(counts).pvalue > 1e-3
    assert len(set(np.asarray(fr.choice(K, 3, (10,))).tolist())) > 1   # a repeat is allowed, not a permutation


@pytest.mark.parametrize("n, shape, replace, msg", [
    (0, (3,), True, "choice: cannot draw 3 values from 0$"),
    (-2, (1,), True, "choice: cannot draw 1 values from -2$"),
    (2, (3,), False, "choice: cannot draw 3 values from 2 without replacement"),
])
def test_choice_from_too_few(n, shape, replace, msg):
    with pytest.raises(ValueError, match=msg):
        fr.choice(K, n, shape, replace=replace)


def test_truncated_normal_shape_defaults_to_the_bounds_broadcast():
    lower, upper = fnp.asarray([[-1.0], [0.5]]), fnp.asarray([1.0, 1.5, 2.0])
    z = np.asarray(fr.truncated_normal(K, lower, upper))
    assert z.shape == (2, 3)
    assert np.all(z > np.asarray(lower)) and np.all(z < np.asarray(upper))


def test_categorical_shape_must_end_with_batch_shape():
    with pytest.raises(ValueError, match=r"categorical: shape \(4, 3\) must end with the logits' batch shape \(2,\)"):
        fr.categorical(K, fnp.zeros((2, 3)), shape=(4, 3))


@pytest.mark.parametrize("lo, hi, dtype", [(0, 300, np.uint8), (-5, 5, np.uint32), (0, 2 ** 40, np.int32)])
def test_randint_bounds_must_fit_the_dtype(lo, hi, dtype):
    with pytest.raises(ValueError, match=f"randint: minval {lo} and maxval {hi} must fit in {np.dtype(dtype)}"):
        fr.randint(K, (3,), lo, hi, dtype=dtype)


# ------------------------------------------------------------------------------------------------------ Module
class _Base(nn.Module):
    w: object

    def __init__(self, n):
        self.w = fnp.ones(n)


class _Child(_Base):
    b: object
    act: object = nn.static_field()

    def __init__(self, n):
        super().__init__(n)
        self.b = fnp.zeros(n)
        self.act = nn.relu


class _Plain(nn.Module):
    w: object


class _PlainChild(_Plain):
    b: object

    def __init__(self, n):
        super().__init__(fnp.ones(n))
        self.b = fnp.full(n, 2.0)


class _Forgetful(nn.Module):
    a: object
    b: object

    def __init__(self):
        self.a = fnp.ones(1)


class _Holder(nn.Module):
    mods: object
    fn: object = nn.static_field()


@pytest.mark.parametrize("cls", [_Child, _PlainChild])
def test_subclass_init_calls_the_parent_init(cls):
    m = cls(3)
    assert flfun.tree.tree_leaves(m)[0].shape == (3,) and nn.count_params(m) == 6
    g = flfun.grad(lambda m, x: fnp.sum(m.w * x + m.b))(m, fnp.arange(3.0))
    assert type(g) is cls and np.asarray(g.w).tolist() == [0, 1, 2] and np.asarray(g.b).tolist() == [1, 1, 1]
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"{cls.__name__} is immutable: cannot set 'w'"):
        m.w = None


def test_init_that_forgets_a_field():
    with pytest.raises(ValueError, match=r"_Forgetful.__init__ did not set field\(s\) b"):
        _Forgetful()


def test_module_fields_cannot_be_deleted():
    m = _Child(2)
    with pytest.raises(dataclasses.FrozenInstanceError, match="_Child is immutable: cannot delete 'w'"):
        del m.w
    assert m.w.shape == (2,)


@pytest.mark.parametrize("mods, fn, expected", [
    ([nn.Linear(2, 3, key=K), _Plain(fnp.ones(1))], fnp.tanh,
     "_Holder(mods=[Linear(weight=f32[2,3], bias=f32[3]), _Plain(w=f32[1])], fn=tanh)"),
    ((_Plain(fnp.ones((2, 2))),), nn.relu, "_Holder(mods=(_Plain(w=f32[2,2]),), fn=relu)"),
    ((_Plain(fnp.ones(1)), _Plain(fnp.ones(2))), None, "_Holder(mods=(_Plain(w=f32[1]), _Plain(w=f32[2])), fn=None)"),
    ([1, 2], lambda x: x, "_Holder(mods=[1, 2], fn=<lambda>)"),
])
def test_module_repr(mods, fn, expected):
    assert repr(_Holder(mods, fn)) == expected
    assert repr(_Child(3)) == "_Child(w=f32[3], b=f32[3], act=relu)"


# ------------------------------------------------------------------------------------------------------ layers
def test_sequential_takes_a_list():
    k1, k2 = nn.split_key(K)
    layers = [nn.Linear(2, 3, key=k1), nn.relu, nn.Linear(3, 1, key=k2)]
    x = fnp.asarray(np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32))
    from_list, from_args = nn.Sequential(layers), nn.Sequential(*layers)
    assert len(from_list.layers) == 3 and isinstance(from_list.layers[1], nn.Lambda)
    np.testing.assert_array_equal(np.asarray(from_list(x)), np.asarray(from_args(x)))
    assert np.asarray(nn.Sequential([])(x)).tolist() == np.asarray(x).tolist()


@pytest.mark.parametrize("kwargs, msg", [
    ({"stride": 0}, r"Conv2d: stride must be a positive int or 2 positive ints, got \(0, 0\)"),
    ({"dilation": (1, 2, 3)}, r"Conv2d: dilation must be a positive int or 2 positive ints, got \(1, 2, 3\)"),
    ({"padding": (1, 1, 1)}, r"Conv2d: padding needs 2 entries, got \(1, 1, 1\)"),
])
def test_conv_argument_errors(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        nn.Conv2d(1, 1, 3, key=K, **kwargs)


def test_attention_needs_a_sequence_axis():
    with pytest.raises(ValueError, match=r"MultiHeadAttention: expected input \(\.\.\., T, 4\), got shape \(4,\)"):
        nn.MultiHeadAttention(4, 2, key=K)(fnp.ones(4))


# -------------------------------------------------------------------------------------------------- functional
def test_logsumexp_weights():
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    b = np.asarray([1.0, 2.0, 0.5], np.float32)
    np.testing.assert_allclose(np.asarray(nn.logsumexp(fnp.asarray(x), axis=1, b=fnp.asarray(b))),
                               np.log(np.sum(b * np.exp(x), axis=1)), rtol=1e-6)
    with pytest.raises(ValueError, match=r"logsumexp: b of shape \(4, 2, 3\) must broadcast to x's \(2, 3\)"):
        nn.logsumexp(fnp.asarray(x), b=fnp.ones((4, 2, 3)))


def test_one_hot_of_booleans():
    out = nn.one_hot(fnp.asarray([True, False]), 2)
    assert out.dtype == np.float32 and np.asarray(out).tolist() == [[0, 1], [1, 0]]


# ------------------------------------------------------------------------------------------------------- optim
@pytest.mark.parametrize("make", [
    lambda f, i: optim.sgd(f(0.1), momentum=f(0.9), weight_decay=f(0.01)),
    lambda f, i: optim.adamw(f(0.01), weight_decay=f(0.1), eps=f(1e-8)),
    lambda f, i: optim.sgd(optim.step_schedule(0.1, i(2), gamma=0.5)),
])
def test_optimisers_take_numpy_scalars(make):
    params = {"w": fnp.asarray([1.0, -2.0])}
    grads = {"w": fnp.asarray([0.5, 0.25])}
    results = []
    for f, i in ((float, int), (np.float32, np.int64)):
        opt = make(f, i)
        p, state = params, opt.init(params)
        for _ in range(3):
            updates, state = opt.update(grads, state, p)
            p = optim.apply_updates(p, updates)
        results.append(np.asarray(p["w"]))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


# ----------------------------------------------------------------------------------------------------- testing
def test_check_vjp_catches_an_inconsistent_transpose():
    calls = []

    def f(x):   # linear, but a different map on each call: the jvp and the vjp disagree
        calls.append(1)
        return x * float(len(calls))

    with pytest.raises(AssertionError, match=r"vjp/jvp dot-product identity fails: <ct, J t> = "):
        testing.check_vjp(f, (np.ones(3),))


@pytest.mark.parametrize("args, in_axes, got", [
    ((np.ones((2, 3)), np.ones((3, 3))), 0, r"\{2, 3\}"),
    ((np.ones(2),), None, r"set\(\)"),
])
def test_check_vmap_needs_one_mapped_size(args, in_axes, got):
    with pytest.raises(ValueError, match=f"check_vmap: mapped axes must share one size, got {got}"):
        testing.check_vmap(lambda *a: a[0], args, in_axes)


# -------------------------------------------------------------------------------------------------- checkpoint
@pytest.mark.parametrize("tree, msg", [
    ({"a.b": fnp.ones(1), "a": {"b": fnp.ones(1)}}, r"save: leaf names are not unique: \['a.b', 'a.b'\]"),
    ({"z": np.ones(2, np.complex64)}, "save: leaf 'z' has unsupported dtype complex64"),
    ({"s": "text"}, "save: leaf 's' is a str, not an array"),
])
def test_save_rejects_unsavable_trees(tmp_path, tree, msg):
    with pytest.raises(checkpoint.CheckpointError, match=msg):
        checkpoint.save(tmp_path / "c.safetensors", tree)
    assert not list(tmp_path.iterdir())


def test_numpy_float64_scalars_keep_their_dtype(tmp_path):
    path = checkpoint.save(tmp_path / "c.safetensors", {"x": np.float64(1 / 3), "y": 0.5})
    loaded = checkpoint.load(path, like={"x": np.float64(0), "y": 0.0})
    assert loaded["x"].dtype == np.float64 and float(loaded["x"]) == 1 / 3 and loaded["y"].dtype == np.float32


# ------------------------------------------------------------------------------------- options the suite skipped
@pytest.mark.parametrize("axis, mean, variance", [(-1, 0.3, 2.0), (0, None, 2.0), ((0, 1), 0.3, None)])
def test_standardize_with_given_statistics(axis, mean, variance):
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    m = x.mean(axis=axis, keepdims=True) if mean is None else np.float32(mean)
    v = ((x - m) ** 2).mean(axis=axis, keepdims=True) if variance is None else np.float32(variance)
    out = nn.standardize(fnp.asarray(x), axis=axis, mean=mean, variance=variance)
    np.testing.assert_allclose(np.asarray(out), (x - m) / np.sqrt(v + 1e-5), rtol=1e-5, atol=1e-6)


def test_layers_without_affine_or_bias_match_torch():
    torch = require("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(nn.LayerNorm(5, elementwise_affine=False)(fnp.asarray(x))),
                               torch.nn.functional.layer_norm(torch.tensor(x), (5,)).numpy(), atol=1e-6)
    conv = nn.Conv2d(2, 3, 3, padding=1, use_bias=False, key=K)
    img = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.tensor(img), torch.tensor(np.asarray(conv.weight)), padding=1)
    assert conv.bias is None
    np.testing.assert_allclose(np.asarray(conv(fnp.asarray(img))), ref.numpy(), atol=1e-5)


@pytest.mark.parametrize("modes", [("fwd",), ("rev",)])
def test_check_grads_second_order_in_one_mode(modes):
    testing.check_grads(lambda x: fnp.sum(fnp.sin(x) ** 2), (np.linspace(-1, 1, 3),), order=2, modes=modes)


@pytest.mark.parametrize("pool", [nn.max_pool, nn.avg_pool])
def test_pool_window_must_be_positive(pool):
    with pytest.raises(ValueError, match=rf"{pool.__name__}: window must be a positive int or 2 positive ints, "
                                         r"got \(0, 2\)"):
        pool(fnp.ones((4, 4)), (0, 2))


@pytest.mark.parametrize("start_dim, shape, expected", [
    (-2, (2, 3, 4), (2, 12)), (0, (2, 3, 4), (24,)), (3, (2, 3, 4), None), (1, (4,), None), (0, (), (1,)),
])
def test_flatten_start_dim_like_torch(start_dim, shape, expected):
    layer = nn.Flatten(start_dim)
    if expected is None:   # torch: "Dimension out of range"
        with pytest.raises(ValueError, match=f"Flatten: axis {start_dim} is out of bounds for an array of rank "
                                             f"{max(len(shape), 1)}"):
            layer(fnp.ones(shape))
    else:
        assert layer(fnp.ones(shape)).shape == expected


@pytest.mark.parametrize("sample, msg", [
    (lambda: fr.uniform(K, (2,), minval=fnp.zeros((2, 1))), r"uniform: minval of shape \(2, 1\) does not broadcast"),
    (lambda: fr.uniform(K, (2,), maxval=fnp.ones(3)), r"uniform: maxval of shape \(3,\) does not broadcast"),
    (lambda: fr.truncated_normal(K, -fnp.ones(3), 1.0, (2,)),
     r"truncated_normal: lower of shape \(3,\) does not broadcast"),
    (lambda: fr.bernoulli(K, fnp.full(3, 0.5), (2,)), r"bernoulli: p of shape \(3,\) does not broadcast"),
    (lambda: fr.randint(K, (2,), fnp.asarray([0, 1, 2]), 5), r"randint: minval of shape \(3,\) does not broadcast"),
])
def test_random_parameters_must_broadcast_to_shape(sample, msg):
    with pytest.raises(ValueError, match=msg + r" to shape \(2,\)"):
        sample()
