"""flfun.random: threefry known answers, JAX-compatible streams, independence, distributions, transforms."""
import numpy as np
import pytest
from peers import require
from hypothesis import given
from hypothesis import strategies as st

from cpu_devices import cpu_devices
import flfun
import flfun.numpy as fnp
from flfun import random as fr

M32 = 0xFFFFFFFF


def ref_threefry(k0, k1, x0, x1):
    """Threefry-2x32 (20 rounds) in plain Python, straight from the Random123 definition."""
    rotl = lambda v, r: ((v << r) | (v >> (32 - r))) & M32
    ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
    rot = [(13, 15, 26, 6), (17, 29, 16, 24)]
    x0, x1 = (x0 + ks[0]) & M32, (x1 + ks[1]) & M32
    for i in range(5):
        for r in rot[i % 2]:
            x0 = (x0 + x1) & M32
            x1 = rotl(x1, r) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & M32
        x1 = (x1 + ks[(i + 2) % 3] + i + 1) & M32
    return x0, x1


def u32(*vals):
    return fnp.asarray(np.array(vals, dtype=np.uint32))


# Random123's published known-answer vectors for threefry2x32_20: (key, counter) -> output
KAT = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
       ((M32, M32), (M32, M32), (0x1CB996FC, 0xBB002BE7)),
       ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]


@pytest.mark.parametrize("key,ctr,expected", KAT)
def test_threefry_known_answers(key, ctr, expected):
    y0, y1 = fr.threefry_2x32(u32(key[0]), u32(key[1]), u32(ctr[0]), u32(ctr[1]))
    assert (int(np.asarray(y0)[0]), int(np.asarray(y1)[0])) == expected
    assert ref_threefry(*key, *ctr) == expected


@given(st.lists(st.integers(0, M32), min_size=4, max_size=4), st.lists(st.integers(0, M32), min_size=3, max_size=3))
def test_threefry_matches_reference(k, xs):
    y0, y1 = fr.threefry_2x32(u32(k[0]), u32(k[1]), u32(*xs), u32(k[2], k[3], 7))
    for i, (a, b) in enumerate(zip(xs, (k[2], k[3], 7))):
        assert (int(np.asarray(y0)[i]), int(np.asarray(y1)[i])) == ref_threefry(k[0], k[1], a, b)


def test_threefry_rejects_non_uint32():
    with pytest.raises(ValueError, match="threefry_2x32: k0 must be uint32"):
        fr.threefry_2x32(fnp.asarray([1]), u32(0), u32(0), u32(0))


# JAX's (partitionable threefry) streams, recorded from jax 0.10: flfun reproduces them bit for bit
def test_key_split_fold_in_known_values():
    k = fr.key(0)
    assert k.dtype == np.uint32 and np.asarray(k).tolist() == [0, 0]
    assert np.asarray(fr.key(2 ** 32 + 5)).tolist() == [1, 5]
    assert np.asarray(fr.key(-1)).tolist() == [M32, M32]
    assert np.asarray(fr.split(k)).tolist() == [[1797259609, 2579123966], [928981903, 3453687069]]
    assert np.asarray(fr.fold_in(k, 3)).tolist() == [2467461003, 3840466878]


def test_uniform_normal_randint_known_values():
    k = fr.key(0)
    np.testing.assert_array_equal(np.asarray(fr.uniform(k, (5,))), np.array(
        [0.947667, 0.9785799, 0.33229148, 0.46866846, 0.5698887], np.float32))
    np.testing.assert_allclose(np.asarray(fr.normal(k, (5,))),
                               [1.6226422, 2.0252647, -0.43359444, -0.07861735, 0.1760909], rtol=1e-5)
    assert np.asarray(fr.randint(k, (5,), 0, 10, dtype=np.int32)).tolist() == [9, 0, 2, 3, 1]


def test_matches_jax_when_installed():
    jax = require("jax")
    if not jax.config.jax_threefry_partitionable:
        pytest.skip("this jax uses the non-partitionable threefry layout")
    for seed in (0, 1, 12345):
        jk, k = jax.random.PRNGKey(seed), fr.key(seed)
        np.testing.assert_array_equal(np.asarray(fr.split(k, 3)), np.asarray(jax.random.split(jk, 3)))
        np.testing.assert_array_equal(np.asarray(fr.fold_in(k, 77)), np.asarray(jax.random.fold_in(jk, 77)))
        np.testing.assert_array_equal(np.asarray(fr.uniform(k, (4, 3))), np.asarray(jax.random.uniform(jk, (4, 3))))
        np.testing.assert_allclose(np.asarray(fr.normal(k, (50,))), np.asarray(jax.random.normal(jk, (50,))),
                                   rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(np.asarray(fr.permutation(k, 20)), np.asarray(jax.random.permutation(jk, 20)))
        np.testing.assert_array_equal(np.asarray(fr.bits(k, (6,))), np.asarray(jax.random.bits(jk, (6,))))


# ---------------------------------------------------------------------------------------------- independence
def test_split_and_fold_in_give_independent_streams():
    k = fr.key(7)
    keys = np.asarray(fr.split(k, 64))
    assert len({tuple(r) for r in keys.tolist()}) == 64
    folded = {tuple(np.asarray(fr.fold_in(k, i)).tolist()) for i in range(32)}
    assert len(folded) == 32
    a = np.asarray(fr.uniform(fnp.asarray(keys[0]), (4000,)))
    b = np.asarray(fr.uniform(fnp.asarray(keys[1]), (4000,)))
    p = np.asarray(fr.uniform(k, (4000,)))
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.05 and abs(np.corrcoef(a, p)[0, 1]) < 0.05
    assert not np.array_equal(np.asarray(fr.split(fnp.asarray(keys[0]))), np.asarray(fr.split(fnp.asarray(keys[1]))))


def test_same_key_same_numbers_different_shapes_prefix_free():
    k = fr.key(3)
    np.testing.assert_array_equal(np.asarray(fr.normal(k, (10,))), np.asarray(fr.normal(k, (10,))))
    assert np.asarray(fr.bits(k, (0,))).shape == (0,)
    assert np.asarray(fr.uniform(k, ())).shape == ()


# ------------------------------------------------------------------------------------------------ distributions
def test_distribution_moments():
    k1, k2, k3, k4 = (fnp.asarray(r) for r in np.asarray(fr.split(fr.key(11), 4)))
    u = np.asarray(fr.uniform(k1, (20000,), minval=-2.0, maxval=3.0))
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.05
    z = np.asarray(fr.normal(k2, (20000,)))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    t = np.asarray(fr.truncated_normal(k3, -1.0, 0.5, (5000,)))
    assert t.min() > -1.0 and t.max() < 0.5
    b = np.asarray(fr.bernoulli(k4, 0.3, (20000,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 0.02
    z64 = fr.normal(k2, (1000,), dtype=np.float64)
    assert z64.dtype == np.float64 and abs(float(fnp.mean(z64))) < 0.1


def test_randint_categorical_permutation():
    k = fr.key(5)
    r = np.asarray(fr.randint(k, (5000,), 3, 9))
    assert r.dtype == np.int64 and r.min() == 3 and r.max() == 8
    assert np.all(np.abs(np.bincount(r - 3) / 5000 - 1 / 6) < 0.03)
    assert np.all(np.asarray(fr.randint(k, (10,), 4, 4)) == 4)
    logits = fnp.log(fnp.asarray([[0.2, 0.8], [0.9, 0.1]]))
    c = np.asarray(fr.categorical(k, logits, shape=(4000, 2)))
    assert abs(c[:, 0].mean() - 0.8) < 0.03 and abs(c[:, 1].mean() - 0.1) < 0.03
    ct = np.asarray(fr.categorical(k, fnp.transpose(logits), axis=0))
    assert ct.shape == (2,)
    p = np.asarray(fr.permutation(k, 50))
    assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))
    x = np.arange(24).reshape(6, 4)
    rows = np.asarray(fr.shuffle(k, fnp.asarray(x)))
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, x.tolist()))
    ch = np.asarray(fr.choice(k, 10, (5,), replace=False))
    assert len(set(ch.tolist())) == 5


# --------------------------------------------------------------------------------------------------- transforms
def test_same_numbers_under_vmap_and_grad():
    keys = fr.split(fr.key(1), 4)
    batched = np.asarray(flfun.vmap(lambda kk: fr.normal(kk, (3,)))(keys))
    looped = np.stack([np.asarray(fr.normal(fnp.asarray(r), (3,))) for r in np.asarray(keys)])
    np.testing.assert_array_equal(batched, looped)
    folded = np.asarray(flfun.vmap(lambda i: fr.fold_in(fr.key(1), i))(fnp.arange(3)))
    np.testing.assert_array_equal(folded, np.stack([np.asarray(fr.fold_in(fr.key(1), i)) for i in range(3)]))
    seeds = np.asarray(flfun.vmap(fr.key)(fnp.asarray([0, 5, 2 ** 33])))
    assert seeds.tolist() == [[0, 0], [0, 5], [2, 0]]
    z = fr.normal(fr.key(2), (3,))
    g = flfun.grad(lambda s: fnp.sum(fr.normal(fr.key(2), (3,)) * s))(2.0)
    assert float(g) == pytest.approx(float(fnp.sum(z)), rel=1e-6)


@pytest.mark.skipif(not hasattr(flfun, "pmap"), reason="flfun.pmap not available")
def test_same_numbers_under_pmap():
    keys = fr.split(fr.key(4), 2)
    with cpu_devices(max(flfun.local_device_count(), 2)):
        out = np.asarray(flfun.pmap(lambda k: fr.normal(fr.fold_in(k, 3), (3,)), "i")(keys))
    expected = [np.asarray(fr.normal(fr.fold_in(fnp.asarray(r), 3), (3,))) for r in np.asarray(keys)]
    np.testing.assert_array_equal(out, np.stack(expected))


@pytest.mark.skipif(not hasattr(flfun, "jit"), reason="flfun.jit not available")
def test_same_numbers_under_jit():
    k = fr.key(9)
    f = flfun.jit(lambda kk: (fr.uniform(kk, (5,)), fr.split(kk), fr.permutation(kk, 7)))
    for a, b in zip(f(k), (fr.uniform(k, (5,)), fr.split(k), fr.permutation(k, 7))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_errors():
    with pytest.raises(ValueError, match=r"split: key must be a uint32\[2\] array"):
        fr.split(fnp.zeros(2))
    with pytest.raises(ValueError, match=r"uniform: key must be a uint32\[2\] array"):
        fr.uniform(fr.split(fr.key(0), 3), (2,))
    with pytest.raises(ValueError, match="normal: shape must be a tuple of non-negative ints"):
        fr.normal(fr.key(0), (2, -1))
    with pytest.raises(ValueError, match="uniform: dtype must be a floating-point type"):
        fr.uniform(fr.key(0), (2,), dtype=np.int32)
    with pytest.raises(ValueError, match="key: seed must be an integer"):
        fr.key(1.5)
    with pytest.raises(ValueError, match="bits: dtype must be an unsigned integer type"):
        fr.bits(fr.key(0), (2,), np.int32)
    with pytest.raises(ValueError, match="choice: cannot draw 5 values from 3 without replacement"):
        fr.choice(fr.key(0), 3, (5,), replace=False)
