"""flfun.checkpoint (remat): values and gradients bit-identical to no remat under every transform, the policies
(what each recomputes), jit's smaller planned arena and its report, and errors for bad arguments."""
import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.config import config
from tests.peers import require

P = fl.checkpoint_policies
POLICIES = [None, P.nothing_saveable, P.everything_saveable, P.dots_saveable, P.dots_with_no_batch_dims_saveable,
            P.save_only_these_names("hidden"), P.save_anything_except_these_names("hidden")]


def block(h, w):
    z = fl.checkpoint_name(fnp.tanh(h @ w), "hidden")
    return h + fnp.sin(z) * z


def net(blk, depth=3):
    def loss(w, h):
        for _ in range(depth):
            h = blk(h, w)
        return fnp.sum(h * h)
    return loss


def args(dtype=np.float32, n=4, d=6, seed=0):
    rng = np.random.default_rng(seed)
    return (fnp.asarray((rng.normal(size=(d, d)) * 0.5).astype(dtype)),
            fnp.asarray(rng.normal(size=(n, d)).astype(dtype)))


def same(a, b):
    for x, y in zip(fl.tree_leaves(a), fl.tree_leaves(b)):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: getattr(p, "__name__", "names"))
def test_gradients_are_bit_identical_to_no_remat_eager_linearized_and_jit(policy):
    w, h = args()
    plain, remat = net(block), net(fl.checkpoint(block, policy=policy))
    want = fl.grad(plain, argnums=(0, 1))(w, h)
    same(fl.value_and_grad(remat, argnums=(0, 1))(w, h), (plain(w, h), want))     # the eager tape
    same(fl.jit(fl.grad(remat, argnums=(0, 1)))(w, h), fl.jit(fl.grad(plain, argnums=(0, 1)))(w, h))
    old = config.eager_tape
    config.eager_tape = False
    try:
        same(fl.grad(remat, argnums=(0, 1))(w, h), fl.grad(plain, argnums=(0, 1))(w, h))   # linearize + transpose
    finally:
        config.eager_tape = old


def test_matches_jax_checkpoint_in_float64():
    jax = require("jax")
    jnp = jax.numpy
    w, h = args(np.float64)

    def jblock(h, w):
        z = jnp.tanh(h @ w)
        return h + jnp.sin(z) * z

    def jloss(w, h):
        for _ in range(3):
            h = jax.checkpoint(jblock)(h, w)
        return jnp.sum(h * h)
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        want = jax.grad(jloss, argnums=(0, 1))(np.asarray(w), np.asarray(h))
    finally:
        jax.config.update("jax_enable_x64", before)
    got = fl.grad(net(fl.checkpoint(block)), argnums=(0, 1))(w, h)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-12, atol=1e-12)


def test_under_vmap_jvp_nested_grad_and_hessian():
    w, h = args(np.float64)
    plain, remat = net(block, 2), net(fl.checkpoint(block), 2)
    per_example = lambda f: fl.vmap(fl.grad(lambda w, r: f(w, r[None])), in_axes=(None, 0))
    same(per_example(remat)(w, h), per_example(plain)(w, h))
    same(fl.jit(per_example(remat))(w, h), per_example(plain)(w, h))
    same(fl.vmap(fl.checkpoint(block), in_axes=(0, None))(h, w), fl.vmap(block, in_axes=(0, None))(h, w))
    t = fnp.ones_like(w)
    same(fl.jvp(lambda w: remat(w, h), (w,), (t,)), fl.jvp(lambda w: plain(w, h), (w,), (t,)))
    g2 = lambda f: fl.grad(lambda w: fnp.sum(fl.grad(f)(w, h) ** 2))
    np.testing.assert_allclose(np.asarray(g2(remat)(w)), np.asarray(g2(plain)(w)), rtol=1e-13)
    hess = lambda f: fl.hessian(lambda v: f(v.reshape(w.shape), h))(w.reshape(-1))
    np.testing.assert_allclose(np.asarray(hess(remat)), np.asarray(hess(plain)), rtol=1e-12, atol=1e-12)


def test_control_flow_inside_and_around_a_checkpoint():
    w, h = args(np.float64)

    def scanned(blk):
        def loss(w, h):
            h, _ = lax.scan(lambda c, _: (blk(c, w), None), h, None, length=3)
            return fnp.sum(h * h)
        return loss

    def branchy(h, w):
        return lax.cond(fnp.sum(h) > 0, lambda a: block(a, w), lambda a: a * 2.0, h)
    for make in (scanned, net):
        for inner in (block, branchy):
            want = fl.grad(make(inner), argnums=(0, 1))(w, h)
            same(fl.grad(make(fl.checkpoint(inner)), argnums=(0, 1))(w, h), want)
            same(fl.jit(fl.grad(make(fl.checkpoint(inner)), argnums=(0, 1)))(w, h),
                 fl.jit(fl.grad(make(inner), argnums=(0, 1)))(w, h))


def _recomputed(policy, prevent_cse=True):
    w, h = args(n=32, d=32)
    plan = fl.jit(fl.grad(net(fl.checkpoint(block, policy=policy, prevent_cse=prevent_cse), 4))).lower(w, h).plan
    return plan.recomputed_eqns, plan.arena_bytes


def test_policies_decide_what_is_recomputed():
    counts = {name: _recomputed(p)[0] for name, p in [
        ("nothing", P.nothing_saveable), ("dots", P.dots_saveable), ("everything", P.everything_saveable),
        ("names", P.save_only_these_names("hidden")), ("all but names", P.save_anything_except_these_names("hidden"))]}
    assert counts["everything"] == 0
    assert counts["nothing"] > counts["names"] > 0, counts      # saving tanh(h @ w) spares the matmul and tanh
    assert counts["nothing"] > counts["dots"] > 0, counts
    assert 0 < counts["all but names"] < counts["names"], counts
    assert _recomputed(None)[0] == counts["nothing"]           # the default saves nothing


def test_jit_plans_a_smaller_arena_and_reports_the_recomputation():
    w, h = args(n=64, d=64)
    plain = fl.jit(fl.grad(net(block, 6))).lower(w, h).plan
    remat = fl.jit(fl.grad(net(fl.checkpoint(block), 6))).lower(w, h).plan
    assert remat.arena_bytes < 0.6 * plain.arena_bytes, (remat, plain)
    assert plain.recomputed_eqns == 0 and "remat" not in str(plain)
    assert remat.recomputed_eqns > 0 and remat.recomputed_bytes > 0
    assert f"remat recomputes {remat.recomputed_eqns} equations" in str(remat)
    _, merged = _recomputed(None, prevent_cse=False)          # CSE folds the recomputation back: no saving
    assert merged > _recomputed(None)[1]


def test_static_argnums_kwargs_pytrees_and_eager_calls():
    w, h = args(np.float64)

    def f(h, n, *, params):
        for _ in range(n):
            h = block(h, params["w"])
        return {"out": h}
    g = fl.checkpoint(f, static_argnums=(1,))
    loss = lambda w, fn: fnp.sum(fn(h, 2, params={"w": w})["out"])
    same(fl.grad(lambda w: loss(w, g))(w), fl.grad(lambda w: loss(w, f))(w))
    same(g(h, 2, params={"w": w}), f(h, 2, params={"w": w}))                  # no transform: just runs f
    assert fl.remat is fl.checkpoint and fl.ad_checkpoint.checkpoint_name is fl.checkpoint_name


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="checkpoint: fun must be callable"):
        fl.checkpoint(3)
    with pytest.raises(TypeError, match="checkpoint: policy must be callable"):
        fl.checkpoint(block, policy="dots")
    with pytest.raises(TypeError, match="checkpoint: prevent_cse must be a bool"):
        fl.checkpoint(block, prevent_cse=None)
    with pytest.raises(TypeError, match="checkpoint: static_argnums must be an int or a tuple of ints"):
        fl.checkpoint(block, static_argnums="1")
    w, h = args()
    with pytest.raises(ValueError, match=r"checkpoint: static_argnums \(5,\) out of range for 2"):
        fl.grad(net(fl.checkpoint(block, static_argnums=5)))(w, h)
    with pytest.raises(TypeError, match="checkpoint: argument leaf 'tanh' is not an array; pass it with "
                                        "static_argnums"):
        fl.grad(lambda w: fnp.sum(fl.checkpoint(lambda h, w, s: h @ w)(h, w, "tanh")))(w)
    with pytest.raises(TypeError, match="checkpoint_name: name must be a str"):
        fl.checkpoint_name(h, 3)


def test_the_optimization_barrier_is_the_identity_under_every_transform():
    from flfun.primitives.elementwise import optimization_barrier_p as barrier
    x = fnp.asarray([1.0, -2.0])
    f = lambda x: fnp.sum(barrier.bind(x, x * 2.0)[1] ** 2)
    same(fl.grad(f)(x), 8.0 * x)
    same(fl.jit(fl.grad(f))(x), 8.0 * x)
    same(fl.vmap(lambda r: barrier.bind(r)[0] * 2.0)(x), x * 2.0)
    same(fl.jvp(lambda x: barrier.bind(x)[0], (x,), (x,)), (x, x))
