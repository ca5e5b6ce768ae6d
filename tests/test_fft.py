"""``flfun.numpy.fft`` against numpy.fft (values, dtypes, n/s, axis/axes, norm) and JAX (gradients), under grad,
vmap and jit."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from peers import require

jax = require("jax")
jnp = require("jax.numpy")
pytestmark = pytest.mark.usefixtures("jax_x64")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 8))
Z = X + 1j * RNG.standard_normal((3, 8))
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fftn", "ifftn", "rfftn", "irfftn"]
REAL_INPUT = {"rfft", "ihfft", "rfftn"}


@pytest.mark.parametrize("name", ONE_D)
@settings(max_examples=8)
@given(n=st.one_of(st.none(), st.integers(2, 10)), axis=st.sampled_from([0, 1, -1]),
       norm=st.sampled_from(["backward", "ortho", "forward"]), single=st.booleans())
def test_one_dimensional_transforms_match_numpy(name, n, axis, norm, single):
    a = X if name in REAL_INPUT else Z
    a = a.astype(np.float32 if name in REAL_INPUT else np.complex64) if single else a
    got = getattr(fnp.fft, name)(fnp.asarray(a), n=n, axis=axis, norm=norm)
    want = getattr(np.fft, name)(a, n=n, axis=axis, norm=norm)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4 if single else 1e-12, atol=1e-4 if single else 1e-12)


@pytest.mark.parametrize("name", N_D)
@pytest.mark.parametrize("s,axes", [(None, None), (None, (0,)), ((4, 6), (1, 0)), ((2, 9), (0, 1)), ((5,), (-1,))])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_n_dimensional_transforms_match_numpy(name, s, axes, norm):
    a = X if name in REAL_INPUT else Z
    got = getattr(fnp.fft, name)(fnp.asarray(a), s=s, axes=axes, norm=norm)
    want = getattr(np.fft, name)(a, s=s, axes=axes, norm=norm)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,kw", [("fft", {}), ("ifft", {"n": 6}), ("fftn", {"norm": "ortho"}),
                                     ("rfft", {"n": 10}), ("irfft", {}), ("irfft", {"n": 7}),
                                     ("rfftn", {"norm": "forward"}), ("irfftn", {"s": (3, 9)}), ("hfft", {}),
                                     ("ihfft", {})])
def test_gradients_match_jax_under_jit_and_vmap(name, kw):
    a = X if name in REAL_INPUT else Z

    def loss(m):
        return lambda a: m.sum(m.abs(getattr(m.fft, name)(a, **kw)) ** 2 * 0.3 + m.real(getattr(m.fft, name)(a, **kw)))
    want = np.asarray(jax.grad(loss(jnp))(jnp.asarray(a)))
    for got in (fl.grad(loss(fnp))(fnp.asarray(a)), fl.jit(fl.grad(loss(fnp)))(fnp.asarray(a))):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)
    if name in ONE_D:       # per-row transforms: vmap over the rows is the same as the batched call
        per_row = fl.vmap(lambda r: getattr(fnp.fft, name)(r, **kw))(fnp.asarray(a))
        np.testing.assert_allclose(np.asarray(per_row), getattr(np.fft, name)(a, **kw), rtol=1e-12, atol=1e-12)


def test_frequencies_and_shifts_match_numpy():
    for n, d in [(1, 1.0), (5, 1.0), (8, 0.25)]:
        np.testing.assert_allclose(fnp.fft.fftfreq(n, d=d), np.fft.fftfreq(n, d=d), rtol=1e-6)
        np.testing.assert_allclose(fnp.fft.rfftfreq(n, d=d), np.fft.rfftfreq(n, d=d), rtol=1e-6)
    assert fnp.fft.fftfreq(4).dtype == fnp.float32 and fnp.fft.rfftfreq(4, dtype="float64").dtype == fnp.float64
    for axes in (None, 0, (1,), (0, 1)):
        np.testing.assert_array_equal(fnp.fft.fftshift(fnp.asarray(X), axes=axes), np.fft.fftshift(X, axes=axes))
        np.testing.assert_array_equal(fnp.fft.ifftshift(fnp.asarray(X), axes=axes), np.fft.ifftshift(X, axes=axes))


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="fft: norm must be one of backward, ortho, forward, got 'both'"):
        fnp.fft.fft(fnp.asarray(Z), norm="both")
    with pytest.raises(TypeError, match="rfft: requires a real floating-point input, got complex128"):
        fnp.fft.rfft(fnp.asarray(Z))
    with pytest.raises(ValueError, match="fftn: axes must be distinct"):
        fnp.fft.fftn(fnp.asarray(Z), axes=(0, 0))
    with pytest.raises(ValueError, match=r"fft: s \(or n\) must give one positive size per axis"):
        fnp.fft.fft(fnp.asarray(Z), n=0)
