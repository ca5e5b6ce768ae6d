"""grad / value_and_grad / vjp / jacfwd / jacrev conventions against JAX (float64): ``holomorphic`` and integer
dtype errors carry JAX's messages, ``reduce_axes`` raises as JAX does, and ``allow_int`` gives integer inputs
zero gradients of their own dtype (JAX: float0 arrays)."""
from __future__ import annotations

import numpy as np
import pytest
from peers import require

import flfun as fl
import flfun.numpy as fnp

jax = require("jax")
jnp = require("jax.numpy")
pytestmark = pytest.mark.usefixtures("jax_x64")


def _messages(ours, theirs) -> tuple[str, str]:
    """The messages flfun's and JAX's calls raise (float64 inputs on both sides)."""
    msgs = []
    for call in (ours, theirs):
        with pytest.raises((TypeError, NotImplementedError)) as e:
            call()
        msgs.append(str(e.value))
    return msgs[0], msgs[1]


F64, C128, I64 = np.ones(2), np.ones(2) + 1j, np.arange(2)
AS_JAX = [   # (flfun call, jax call): flfun's message carries JAX's, up to the dtype (flfun adds the argument)
    (lambda fx, m: fx.grad(lambda x: m.sum(x) * 2, holomorphic=True)(F64)),
    (lambda fx, m: fx.grad(lambda x: m.real(m.sum(x)), holomorphic=True)(C128)),
    (lambda fx, m: fx.grad(lambda x: m.sum(x) * 2.0)(I64)),
    (lambda fx, m: fx.grad(lambda x: m.sum(x) * 1j)(F64)),
    (lambda fx, m: fx.grad(lambda x: m.sum(x).astype(int))(F64)),
    (lambda fx, m: fx.value_and_grad(lambda x: m.sum(x), holomorphic=True)(I64)),
    (lambda fx, m: fx.jacrev(lambda x: x, holomorphic=True)(F64)),
    (lambda fx, m: fx.jacrev(lambda x: m.real(x), holomorphic=True)(C128)),
    (lambda fx, m: fx.jacfwd(lambda x: x, holomorphic=True)(F64)),
    (lambda fx, m: fx.jacfwd(lambda x: m.real(x), holomorphic=True)(C128)),
    (lambda fx, m: fx.grad(lambda x: x, reduce_axes=("i",))),
    (lambda fx, m: fx.value_and_grad(lambda x: x, reduce_axes=("i",))),
    (lambda fx, m: fx.vjp(lambda x: x, 1.0, reduce_axes=("i",))),
]


@pytest.mark.parametrize("case", AS_JAX)
def test_differentiation_errors_match_jax(case):
    ours, theirs = _messages(lambda: case(fl, fnp), lambda: case(jax, jnp))
    head = theirs.split(" If you want")[0].rstrip(".")
    assert ours.startswith(head.split(". For")[0].replace("jax.", "")), (ours, theirs)


def test_differentiation_errors_where_flfun_accepts_more():
    """flfun's jacfwd/jacrev take complex inputs and outputs without holomorphic=True (JAX refuses them), so
    their integer messages say so; jacfwd points to jvp as JAX's does."""
    with pytest.raises(TypeError, match=r"^jacfwd requires real- or complex-valued inputs \(input dtype that is a "
                                        r"sub-dtype of np.inexact\), but got int64 \(argument 0\)\. .*use jvp"):
        fl.jacfwd(lambda x: x * 2.0)(I64)
    with pytest.raises(TypeError, match=r"^jacrev requires real- or complex-valued outputs .* but got int64\. For "
                                        r"differentiation of functions with integer outputs, use vjp directly\.$"):
        fl.jacrev(lambda x: x.astype(int))(F64)
    np.testing.assert_allclose(np.asarray(fl.jacfwd(fnp.sin)(fnp.asarray(C128))),
                               jax.jacfwd(jnp.sin, holomorphic=True)(C128))


def test_allow_int_gives_zeros_of_the_input_dtype():
    """JAX gives float0 arrays for integer inputs; flfun gives zeros of the input's shape and dtype, which jit,
    vmap and tree_map updates take."""
    f = lambda x, y, b: fnp.sum(x * y) * fnp.where(b, 1.0, 2.0)
    g = fl.grad(f, argnums=(0, 1, 2), allow_int=True)
    for gx, gy, gb in [g(I64, F64, True), fl.jit(g)(I64, F64, True)]:
        assert gx.dtype == np.int64 and gx.tolist() == [0, 0] and gb.dtype == np.bool_ and not bool(gb)
        np.testing.assert_allclose(np.asarray(gy), jax.grad(lambda y: jnp.sum(I64 * y))(F64))
    theirs = jax.grad(lambda x, y: jnp.sum(x * y), argnums=(0, 1), allow_int=True)(I64, F64)
    assert theirs[0].dtype == jax.dtypes.float0 and theirs[0].shape == g(I64, F64, True)[0].shape
    per = fl.vmap(fl.grad(lambda x, y: fnp.sum(x * y), argnums=(0, 1), allow_int=True))(I64[None], F64[None])
    assert per[0].shape == (1, 2) and np.asarray(per[1]).tolist() == [[0.0, 1.0]]
    jac = fl.jacrev(lambda x, y: x * y, argnums=(0, 1), allow_int=True)(I64, F64)
    np.testing.assert_array_equal(np.asarray(jac[0]), jax.jacrev(lambda x: x * F64, allow_int=True)(I64))
    np.testing.assert_array_equal(np.asarray(jac[1]), np.diag(I64))
