"""Generic checks for every primitive in the op table: forward vs numpy (float64 reference), jit vs eager, jvp vs
finite differences, the vjp/jvp dot-product identity (every transpose rule), and vmap vs a Python loop."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import primitives
from flfun.testing import check_jvp, check_vjp, check_vmap
from op_table import RECORDS

FWD = [(r, d) for r in RECORDS for d in r.dtypes]
DIFF = [r for r in RECORDS if r.diff and "float64" in r.dtypes]


def _upcast(a):
    return a.astype(np.float64) if a.dtype.kind == "f" else a


@pytest.mark.parametrize("rec,dtype", FWD, ids=[f"{r.name}-{d}" for r, d in FWD])
@given(data=st.data())
def test_forward_matches_numpy(rec, dtype, data):
    args, params = data.draw(rec.args(dtype))
    out = rec.fn(*[fnp.asarray(a) for a in args], **params)
    expected = rec.ref(*[_upcast(a) for a in args], **params)
    out_leaves = fl.tree_leaves(out)
    exp_leaves = [np.asarray(e) for e in fl.tree_leaves(expected)]
    for o, e in zip(out_leaves, exp_leaves):
        o = np.asarray(o)
        assert o.shape == e.shape, f"{rec.name}: shape {o.shape} != numpy's {e.shape}"
        if e.dtype.kind == "b":
            assert o.dtype.kind == "b", f"{rec.name}: expected a bool result, got {o.dtype}"
        if rec.keeps_dtype and dtype == "float32" and o.dtype.kind == "f":
            assert o.dtype == np.float32, f"{rec.name}: float32 inputs gave {o.dtype}"
        tol = (rec.atol, rec.rtol) if dtype in ("float32",) else (1e-9, 1e-9)
        np.testing.assert_allclose(o.astype(np.float64) if o.dtype.kind != "b" else o, e, atol=tol[0],
                                   rtol=tol[1], err_msg=rec.name)


@pytest.mark.parametrize("rec,dtype", FWD, ids=[f"{r.name}-{d}" for r, d in FWD])
@settings(max_examples=max(3, settings().max_examples // 4))      # each example compiles a program
@given(data=st.data())
def test_jit_matches_eager(rec, dtype, data):
    """The planned, optimized and fused program computes what the eager impls compute."""
    args, params = data.draw(rec.args(dtype))
    args = [fnp.asarray(a) for a in args]
    eager = fl.tree_leaves(rec.fn(*args, **params))
    jitted = fl.tree_leaves(fl.jit(lambda *a: rec.fn(*a, **params))(*args))
    assert len(eager) == len(jitted)
    for e, j in zip(eager, jitted):
        e, j = np.asarray(e), np.asarray(j)
        assert j.shape == e.shape and j.dtype == e.dtype, f"{rec.name}: jit gave {j.dtype}{j.shape}, eager " \
                                                          f"{e.dtype}{e.shape}"
        tol = 1e-5 if e.dtype == np.float16 or dtype == "float32" else 1e-12
        np.testing.assert_allclose(j, e, rtol=tol, atol=tol, err_msg=rec.name)


@pytest.mark.parametrize("rec", DIFF, ids=[r.name for r in DIFF])
@given(data=st.data())
def test_jvp_matches_finite_differences(rec, data):
    args, params = data.draw(rec.diff_args("float64"))
    check_jvp(lambda *a: rec.fn(*a, **params), args, atol=rec.grad_atol * 100, rtol=1e-4)


@pytest.mark.parametrize("rec", DIFF, ids=[r.name for r in DIFF])
@given(data=st.data())
def test_vjp_dot_product_identity(rec, data):
    args, params = data.draw(rec.args("float64"))
    check_vjp(lambda *a: rec.fn(*a, **params), args, atol=1e-9, rtol=1e-9)


VMAP = [(r, r.dtypes[0]) for r in RECORDS if r.vmap]


@pytest.mark.parametrize("rec,dtype", VMAP, ids=[r.name for r, _ in VMAP])
@given(data=st.data())
def test_vmap_matches_loop(rec, dtype, data):
    args, params = data.draw(rec.args(dtype))
    rng = np.random.default_rng(0)
    axes, batched = [], []
    for a in args:
        ax = data.draw(st.one_of(st.none(), st.integers(0, a.ndim)), label="in_axis")
        if ax is None and len(axes) == len(args) - 1 and all(x is None for x in axes):
            ax = 0                          # map at least one argument
        axes.append(ax)
        if ax is None:
            batched.append(a)
            continue
        other = rng.permutation(a.ravel()).reshape(a.shape) if a.size else a
        batched.append(np.stack([a, other, a], axis=ax))
    check_vmap(lambda *xs: rec.fn(*xs, **params), batched, tuple(axes), atol=1e-5, rtol=1e-5)


def test_every_primitive_has_its_rules_and_a_record():
    from flfun.backends import get_backend
    get_backend("numpy")                    # impls are installed when the backend is first used
    covered = {r.prim for r in RECORDS}
    # checked by dedicated tests: iota (no operands) in test_shape.py, collectives in test_collectives_vmap.py and
    # test_pmap.py, jit's call primitive in test_jit.py, pmap's in test_pmap.py, the control-flow primitives in
    # test_control_flow.py, the custom-derivative ones in test_custom_derivatives.py (custom_lin only exists
    # inside a linearized program, which is transposed, never differentiated or batched again, as in JAX);
    # primitives named test_* are defined by tests themselves
    elsewhere = {"iota", "jit", "pmap", "scan", "while", "cond", "custom_jvp_call", "custom_vjp_call",
                 "custom_lin",
                 "remat", "name", "optimization_barrier"} | {p.name for p in primitives.all_primitives()   # test_remat
                                   if p.collective or p.name.startswith("test_")}
    missing = []
    for p in primitives.all_primitives():
        if p.abstract_eval is None:
            missing.append(f"{p.name}: abstract_eval")
        if p.batch is None and p.name not in elsewhere:
            missing.append(f"{p.name}: batching rule")
        if p.jvp is None and p.name not in elsewhere:
            missing.append(f"{p.name}: jvp rule")
        if "numpy" not in p.impls and not p.collective and not p.name.startswith("test_"):   # collectives: communicator
            missing.append(f"{p.name}: numpy impl")
        if p.name not in covered | elsewhere:
            missing.append(f"{p.name}: op-table record")
    assert not missing, "primitives lacking rules or tests:\n" + "\n".join(missing)


LINEAR = ["neg", "add", "sub", "convert_element_type", "select_n", "broadcast_in_dim", "reshape", "transpose",
          "reduce_sum", "slice", "pad", "squeeze", "expand_dims", "rev", "concatenate", "dynamic_slice",
          "dynamic_update_slice", "cumsum", "gather", "scatter"]


@pytest.mark.parametrize("name", LINEAR)
def test_linear_primitives_have_transpose_rules(name):
    fnp.zeros(1)  # install the numpy backend
    assert primitives.get(name).transpose is not None
