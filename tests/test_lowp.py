"""bfloat16 and float16: the op table through both dtypes against numpy in float64 (tolerances per dtype), the
promotion lattice against JAX, gradients against float64 ones, jit vs eager, vmap vs a loop, float32
accumulation, the memory plan, fusion, checkpoints, and mixed-precision training (``models/precision.py``)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from op_table import RECORDS
from peers import require
from records_decomp import RECORDS as DECOMP

import flfun as fl
import flfun.numpy as fnp
from flfun import dtypes, lax, serialization as checkpoint
from flfun.testing import arrays, check_vmap, float_dtypes

LOW = ("bfloat16", "float16")
TOL = {"bfloat16": 2.0 ** -6, "float16": 2.0 ** -9}     # two units of rounding (eps is 2^-7 and 2^-10)
# lax.fft takes float32/float64 operands, as in JAX (flfun.numpy.fft upcasts bf16/f16 itself)
FWD = [(r, d) for r in RECORDS if "float32" in r.dtypes and r not in DECOMP and r.prim != "fft" for d in LOW]
IDS = [f"{r.name}-{d}" for r, d in FWD]


def _f64(a):
    return np.asarray(a).astype(np.float64) if dtypes.is_float(np.asarray(a).dtype) else np.asarray(a)


@pytest.mark.parametrize("rec,dtype", FWD, ids=IDS)
@settings(max_examples=3)
@given(data=st.data())
def test_forward_matches_numpy_float64(rec, dtype, data):
    args, params = data.draw(rec.args(dtype))
    out = fl.tree_leaves(rec.fn(*[fnp.asarray(a) for a in args], **params))
    expected = fl.tree_leaves(rec.ref(*[_f64(a) for a in args], **params))
    for o, e in zip(out, expected):
        o, e = np.asarray(o), np.asarray(e)
        assert o.shape == e.shape, f"{rec.name}: shape {o.shape} != numpy's {e.shape}"
        if rec.keeps_dtype and dtypes.is_float(o.dtype):
            assert o.dtype == dtypes.canonicalize(dtype), f"{rec.name}: {dtype} inputs gave {o.dtype}"
        tol = max(TOL[dtype], rec.atol)
        np.testing.assert_allclose(_f64(o), e, atol=tol, rtol=tol, err_msg=rec.name)


@pytest.mark.parametrize("rec,dtype", FWD[::2], ids=IDS[::2])
@settings(max_examples=1)
@given(data=st.data())
def test_jit_and_vmap_match_eager(rec, dtype, data):
    args, params = data.draw(rec.args(dtype))
    xs = [fnp.asarray(a) for a in args]
    eager = fl.tree_leaves(rec.fn(*xs, **params))
    jitted = fl.tree_leaves(fl.jit(lambda *a: rec.fn(*a, **params))(*xs))
    for e, j in zip(eager, jitted):
        assert j.dtype == e.dtype and j.shape == e.shape, rec.name
        np.testing.assert_allclose(_f64(j), _f64(e), atol=TOL[dtype], rtol=TOL[dtype], err_msg=rec.name)
    if rec.vmap:
        check_vmap(lambda *a: rec.fn(*a, **params), [np.stack([a, a[::-1] if a.ndim else a]) for a in args],
                   atol=TOL[dtype], rtol=TOL[dtype])


def test_decompositions_refuse_low_precision_clearly():
    for dt in LOW:
        with pytest.raises(TypeError, match=rf"cholesky: expected a stack of square float32\b.* "
                                            rf"matrices, got {dtypes.short_name(dt)}\[2,2\]"):
            fnp.linalg.cholesky(fnp.eye(2, dtype=dt))


# ------------------------------------------------------------------------------------------------- promotion
PROMOTION_DTYPES = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "bfloat16", "float32")


def test_promotion_table_matches_jax():
    jnp = require("jax.numpy")
    rows = []
    for a in PROMOTION_DTYPES:
        for b in PROMOTION_DTYPES:
            if a not in LOW and b not in LOW:
                continue
            da, db = dtypes.canonicalize(a), dtypes.canonicalize(b)
            ours = dtypes.result_type((da, False), (db, False))[0]
            via_add = (fnp.ones(2, dtype=da) + fnp.ones(2, dtype=db)).dtype
            theirs = np.dtype(jnp.promote_types(*(getattr(jnp, "bool_" if n == "bool" else n) for n in (a, b))))
            if not ours == via_add == theirs:
                rows.append(f"{a} + {b}: flfun {ours} (add: {via_add}), jax {theirs}")
    for d in LOW:                     # weak Python scalars keep the low-precision type, as in JAX
        for s in (2.0, 2, True):
            got, want = (fnp.ones(2, dtype=d) * s).dtype, np.dtype((jnp.ones(2, getattr(jnp, d)) * s).dtype)
            if got != want:
                rows.append(f"{d} * {s!r}: flfun {got}, jax {want}")
    assert not rows, "\n".join(rows)


def test_names_creation_and_casts():
    assert fnp.bfloat16 == dtypes.bfloat16 and fnp.float16 == np.float16
    assert dtypes.canonicalize("bfloat16") == fnp.bfloat16 and dtypes.short_name(fnp.bfloat16) == "bf16"
    assert fnp.isdtype(fnp.bfloat16, "real floating") and fnp.finfo(fnp.bfloat16).bits == 16
    for make in (lambda d: fnp.zeros(3, dtype=d), lambda d: fnp.arange(3, dtype=d),
                 lambda d: fnp.asarray([0.5, 1.0, 2.0], dtype=d), lambda d: fnp.asarray(np.arange(3.0).astype(d)),
                 lambda d: fnp.linspace(0, 2, 3, dtype=d), lambda d: fnp.full(3, 1.5, dtype=d)):
        for d in LOW:
            x = make(dtypes.canonicalize(d))
            assert x.dtype == dtypes.canonicalize(d) and x.aval_str() == f"{dtypes.short_name(d)}[3]"
    x = fnp.asarray([1.1, -2.7, 3e5], dtype=fnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(x.astype(fnp.float32)),
                                  np.asarray([1.1, -2.7, 3e5], np.float32).astype(dtypes.bfloat16).astype(np.float32))
    assert x.astype("int32").tolist() == [1, -2, 299008]
    assert "bfloat16" not in fnp.__array_namespace_info__().dtypes()     # not an array-API dtype


@settings(max_examples=8)
@given(data=st.data())
def test_strategies_generate_low_precision(data):
    dt = data.draw(float_dtypes())
    a = data.draw(arrays(dt, (3,), low=-2, high=2))
    assert a.dtype == dt and np.all(np.abs(a.astype(np.float64)) <= 2)


# -------------------------------------------------------------------------------------- accumulation in float32
def test_sums_and_matmuls_accumulate_in_float32():
    x = fnp.full(4096, 0.01, dtype=fnp.bfloat16)
    exact = 4096 * float(np.float64(dtypes.bfloat16.type(0.01)))
    assert abs(float(fnp.sum(x)) - exact) <= 2.0 ** -7 * exact          # accumulating in bf16 stops at 4
    assert abs(float(fnp.mean(x)) - exact / 4096) <= 2.0 ** -7 * exact / 4096
    assert fnp.sum(x).dtype == fnp.bfloat16 and fnp.sum(x, dtype=fnp.float32).dtype == fnp.float32
    a, b = fnp.ones((2, 4096), dtype=fnp.bfloat16) * 0.01, fnp.ones((4096, 3), dtype=fnp.bfloat16)
    assert (a @ b).dtype == fnp.bfloat16 and abs(float((a @ b)[0, 0]) - exact) <= 2.0 ** -7 * exact
    wide = lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=fnp.float32)
    assert wide.dtype == fnp.float32 and abs(float(wide[0, 0]) - exact) < 1e-3
    assert fnp.matmul(a, b).dtype == fnp.bfloat16 and fnp.einsum("ij,jk->ik", a, b).dtype == fnp.bfloat16
    wide = fnp.matmul(a, b, preferred_element_type=fnp.float32)
    assert wide.dtype == fnp.float32 and abs(float(wide[0, 0]) - exact) < 1e-3


# ---------------------------------------------------------------------------------------------- derivatives
def _mlp(w1, w2, x):
    return fnp.sum(fnp.tanh(x @ w1) @ w2)


def _softmax_xent(logits, labels):
    return fl.nn.softmax_cross_entropy(logits, labels)


def _layer_norm(x, g):
    mu = fnp.mean(x, axis=-1, keepdims=True)
    return fnp.sum(g * (x - mu) / fnp.sqrt(fnp.var(x, axis=-1, keepdims=True) + 1e-5) * fnp.cos(x))


CASES = [(_mlp, [(6, 5), (5, 3), (4, 6)], ()), (_softmax_xent, [(8, 10)], (np.arange(8) % 10,)),
         (_layer_norm, [(3, 16), (16,)], ())]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("fn,shapes,extra", CASES, ids=[c[0].__name__ for c in CASES])
def test_gradients_and_jvps_match_float64(fn, shapes, extra, dtype):
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]
    argnums = tuple(range(len(xs)))
    low = fl.grad(fn, argnums)(*[fnp.asarray(x) for x in xs], *extra)
    ref = fl.grad(fn, argnums)(*[fnp.asarray(_f64(x)) for x in xs], *extra)
    for g, r in zip(low, ref):
        assert g.dtype == dtypes.canonicalize(dtype)
        assert np.linalg.norm(_f64(g) - _f64(r)) <= 8 * TOL[dtype] * np.linalg.norm(_f64(r))
    ts = [rng.standard_normal(s) for s in shapes]
    f = lambda *a: fn(*a, *extra)   # noqa: E731
    _, t_low = fl.jvp(f, tuple(fnp.asarray(x) for x in xs), tuple(fnp.asarray(t.astype(dtype)) for t in ts))
    _, t_ref = fl.jvp(f, tuple(fnp.asarray(_f64(x)) for x in xs), tuple(fnp.asarray(_f64(t.astype(dtype))) for t in ts))
    assert t_low.dtype == dtypes.canonicalize(dtype)
    assert abs(float(t_low) - float(t_ref)) <= 8 * TOL[dtype] * (abs(float(t_ref)) + 1)
    jitted = fl.jit(fl.grad(fn, argnums))(*[fnp.asarray(x) for x in xs], *extra)
    for j, g in zip(jitted, low):
        np.testing.assert_allclose(_f64(j), _f64(g), atol=2 * TOL[dtype], rtol=2 * TOL[dtype])


# --------------------------------------------------------------------------------- memory plan, fusion, files
def test_the_planner_sizes_buffers_by_itemsize():
    step = lambda w, x: fnp.sum(fnp.tanh(x @ w) ** 2)   # noqa: E731
    arenas = {}
    for dt in ("float32", "bfloat16", "float16"):
        w, x = fnp.ones((64, 64), dtype=dt), fnp.ones((32, 64), dtype=dt)
        arenas[dt] = fl.jit(fl.grad(step)).lower(w, x).plan.arena_bytes
    assert arenas["bfloat16"] == arenas["float16"] and 0.4 < arenas["bfloat16"] / arenas["float32"] <= 0.55


def test_fusion_leaves_low_precision_unfused():
    from flfun.backends.cuda import lowering  # noqa: F401  (registers the cuda lowerings)
    from flfun.compiler.fusion import FusedPrimitive, fuse_elementwise
    from flfun.transforms.staging import trace_to_program
    fnp.zeros(1)
    chain = lambda x: fnp.exp(x * 2.0 + 1.0) - x   # noqa: E731
    for dt, fused in (("float32", True), ("bfloat16", False), ("float16", False)):
        program, _ = trace_to_program(chain, [fl.ShapedArray((3, 4), dtypes.canonicalize(dt))], dynamic=True)
        got = any(isinstance(e.prim, FusedPrimitive) for e in fuse_elementwise(program).eqns)
        assert got == fused, dt


def test_checkpoints_round_trip_and_torch_reads_them(tmp_path):
    torch = require("torch")
    tree = {"w": fnp.asarray(np.linspace(-3, 3, 12).reshape(3, 4), dtype=fnp.bfloat16),
            "h": fnp.asarray([1e-4, 65504.0, -0.0], dtype=fnp.float16), "n": fnp.arange(2)}
    path = str(tmp_path / "low.safetensors")
    checkpoint.save(path, tree)
    back = checkpoint.load(path, like=tree)
    for k in tree:
        assert back[k].dtype == tree[k].dtype
        np.testing.assert_array_equal(np.asarray(back[k]).view(np.uint8), np.asarray(tree[k]).view(np.uint8))
    from safetensors.torch import load_file
    theirs = load_file(path)
    assert theirs["w"].dtype == torch.bfloat16 and theirs["h"].dtype == torch.float16
    np.testing.assert_array_equal(theirs["w"].float().numpy(), np.asarray(tree["w"]).astype(np.float32))


# ------------------------------------------------------------------------------------------ mixed precision
def test_dynamic_loss_scale_skips_and_shrinks_then_grows():
    from models.precision import DynamicLossScale
    ls = DynamicLossScale.create(8.0, period=2)
    ls = ls.adjust(fnp.asarray(False))
    assert float(ls.scale) == 4.0 and int(ls.skipped) == 1 and int(ls.good_steps) == 0
    ls = ls.adjust(fnp.asarray(True))
    assert float(ls.scale) == 4.0 and int(ls.good_steps) == 1
    ls = ls.adjust(fnp.asarray(True))
    assert float(ls.scale) == 8.0 and int(ls.good_steps) == 0 and int(ls.skipped) == 1
    tiny = DynamicLossScale.create(1.0).adjust(fnp.asarray(False))
    assert float(tiny.scale) == 1.0                                      # never below 1
    with pytest.raises(ValueError, match="DynamicLossScale: need initial >= 1"):
        DynamicLossScale.create(0.5)


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_float16_step_skips_overflowing_gradients_and_keeps_the_master_weights():
    from flfun import optim
    from models import precision
    opt = optim.sgd(0.1)
    model = {"w": fnp.asarray([1.0, 2.0])}
    loss = lambda m, x, y: fnp.sum(m["w"] * x)   # noqa: E731
    step = fl.jit(precision.loss_scaled_step(precision.in_compute_dtype(loss, fnp.float16), opt))
    state = precision.init_state(opt, model, "f16")
    big = fnp.asarray([3.0, 1.0])       # gradient 3 * 2^15 overflows float16 (max 65504)
    new, (opt_state, ls), value = step(model, state, big, None)
    assert new["w"].tolist() == [1.0, 2.0] and float(ls.scale) == 2.0 ** 14 and int(ls.skipped) == 1
    assert float(value) == 5.0 and new["w"].dtype == fnp.float32
    new, (opt_state, ls), value = step(new, (opt_state, ls), fnp.asarray([1.0, 1.0]), None)
    np.testing.assert_allclose(np.asarray(new["w"]), [0.9, 1.9], rtol=1e-6)
    assert int(ls.skipped) == 1


def test_bf16_training_run_keeps_float32_master_weights(tmp_path):
    from models import train
    from models.precision import init_state
    args = train.parse_args(["mlp", "--steps", "3", "--precision", "bf16", "--no-progress", "--batch-size", "16",
                             "--out", str(tmp_path)])
    result = train.train(args)
    assert result["precision"] == "bf16" and result["compute_dtype"] == "bfloat16"
    assert np.isfinite(result["final_train_loss"]) and 0 <= result["test_accuracy"] <= 1
    assert json.loads((tmp_path / "metrics.json").read_text())["precision"] == "bf16"
    from flfun import optim
    from models.tasks import make_task
    task = make_task("mlp", 0)
    model, opt = task.init(fl.random.key(0)), optim.sgd(0.1)
    step = train.make_step(task.loss_fn, opt, True, precision="bf16")
    x, y = task.batch(0, 8)
    ir = step.lower(model, init_state(opt, model, "bf16"), fnp.asarray(x), fnp.asarray(y)).ir
    assert ir.count("bf16[") and "f32[8,256] = dot_general" not in ir and "bf16[8,256] = dot_general" in ir
    new, _, _ = step(model, init_state(opt, model, "bf16"), fnp.asarray(x), fnp.asarray(y))
    assert all(leaf.dtype == fnp.float32 for leaf in fl.tree_leaves(new))


@pytest.mark.parametrize("layer", ["LayerNorm", "RMSNorm"])
def test_norm_layers_compute_low_precision_in_float32(layer):
    from models.precision import cast_floats
    norm = cast_floats(getattr(fl.nn, layer)(32), fnp.float16)
    x = fnp.asarray(np.random.default_rng(0).normal(0, 0.01, (4, 32)).astype(np.float16))   # variance 1e-4
    assert norm(x).dtype == fnp.float16
    g = fl.grad(lambda x: fnp.sum(norm(x) * fnp.arange(32.0)))(x)        # d rsqrt(1e-4) = 5e5 > f16's max
    assert g.dtype == fnp.float16 and np.all(np.isfinite(np.asarray(g).astype(np.float64)))
