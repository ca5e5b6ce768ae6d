"""jit on the CPU with fused C kernels (flfun/backends/cfuse/): fused vs unfused on random programs (the fusion
property tests of test_fusion.py, executed by the kernels), every elementwise op-table record through a kernel,
NaN/inf/signed zeros as numpy's impls give them, thread-count independent results, the reductions' loop nests,
replaced impls, the switch and the compile cache. Each test builds its kernels as one library, cached on disk
by its source, so a second run compiles nothing."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from random_programs import programs
from op_table import RECORDS
from test_fusion import elementwise_programs

import flfun as fl
import flfun.numpy as fnp
from flfun import lax, primitives
from flfun.backends import cfuse
from flfun.backends.cfuse import build, codegen
from flfun.compiler.executor import Executable
from flfun.compiler.fusion import FusedPrimitive, fuse_elementwise
from flfun.compiler.passes import optimize
from flfun.config import config
from flfun.core import ShapedArray, register_impl
from flfun.ir import Literal
from flfun.primitives import reduce as R
from flfun.primitives import shape as S
from flfun.transforms.jit import close_program
from flfun.transforms.staging import trace_to_program

pytestmark = pytest.mark.skipif(cfuse.toolchain() is None, reason="no C compiler for fused CPU kernels")
F32 = np.float32
fnp.zeros(1)        # install the numpy backend (its impls, and the fused path as its jit compiler)


@pytest.fixture(autouse=True)
def _fused_path(monkeypatch):
    """These tests run the fused path also in a run with ``FLFUN_CPU_FUSION=0``."""
    monkeypatch.setattr(config, "cpu_fusion", True)
    monkeypatch.setattr(cfuse, "MIN_WORK", 0)
    monkeypatch.setattr(cfuse, "MIN_ELEMENTS", 0)


def _trace(f, avals):
    fnp.zeros(1)
    closed, _ = close_program(*trace_to_program(f, avals, dynamic=True))
    return optimize(closed.program, closed.consts)


def _fuse(program, min_size=2):
    """``program`` fused with every primitive that has a C lowering (jit leaves ``cfuse.NUMPY_FASTER`` out)."""
    return fuse_elementwise(program, lambda e: cfuse.can_fuse(e, frozenset()), min_size=min_size, target="cuda")


def _kernels(fused_programs):
    """Attach C kernels to the fused equations of all ``fused_programs`` (one library); returns their count."""
    prims = [e.prim for p in fused_programs for e in p.eqns if isinstance(e.prim, FusedPrimitive)]
    lib = build.library(codegen.library_source([p.group for p in prims]))
    for i, p in enumerate(prims):
        p.impls["numpy"] = build.kernel_impl(getattr(lib, f"k{i}"), p.group)
    return len(prims)


def _close(got, want, exact=False, err=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, err
    if want.dtype.kind == "f" and not exact:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=err)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err)
        if want.dtype.kind == "f":      # (a NaN's sign is libm's business: glibc keeps it, numpy's SIMD loops not)
            num = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got)[num], np.signbit(want)[num], err_msg=f"signed zeros: {err}")


# ------------------------------------------------------------------------------- fused == unfused, executed in C
@settings(max_examples=8)
@given(programs())
def test_kernels_equal_unfused_on_random_programs(drawn):
    program, consts, inputs = drawn
    program, consts = optimize(program, consts)
    fused = _fuse(program, min_size=1)
    _kernels([fused])
    for a, b in zip(Executable(fused, consts, None, None)(*inputs), Executable(program, consts, None, None)(*inputs)):
        _close(a, b)


@settings(max_examples=8)
@given(elementwise_programs())
def test_kernels_equal_unfused_on_elementwise_programs(drawn):
    program, consts, args = drawn
    fused = _fuse(program)
    _kernels([fused])
    for a, b in zip(Executable(fused, consts, None, None)(*args), Executable(program, consts, None, None)(*args)):
        _close(a, b)


@pytest.mark.parametrize("fusion", [True, False], ids=["cpu_fusion", "numpy"])
@settings(max_examples=6)
@given(drawn=elementwise_programs())
def test_jit_equals_eager_with_the_path_on_and_off(fusion, drawn):
    """jit's planned executable (arena outputs, in-place kernels) with the fused path on and off."""
    program, consts, args = drawn
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "cpu_fusion", fusion)
        mp.setattr(cfuse, "MIN_WORK", 0)
        mp.setattr(cfuse, "MIN_ELEMENTS", 0)
        f = fl.jit(lambda *a: _eval(program, consts, a))
        got = f(*[fnp.asarray(a) for a in args])
        exe = f.lower(*[fnp.asarray(a) for a in args]).compile().executable
        assert fusion or not isinstance(exe, cfuse.CpuExecutable)
    for a, b in zip(got, Executable(program, consts, None, None)(*args)):
        _close(a, b)


def _eval(program, consts, args):
    """``program`` re-evaluated on tracers (so jit traces the same equations)."""
    env = {v.id: c for v, c in zip(program.constvars, consts)} | {v.id: a for v, a in zip(program.invars, args)}
    read = lambda v: v.val if type(v) is Literal else env[v.id]
    for e in program.eqns:
        outs = e.prim.bind(*[read(v) for v in e.inputs], **e.params)
        for v, o in zip(e.outputs, outs if e.prim.multiple_results else [outs]):
            env[v.id] = o
    return [read(v) for v in program.outvars]


# ------------------------------------------------------------------------------------ the op table, in kernels
ELEMENTWISE = [(r, d) for r in RECORDS for d in r.dtypes if primitives.get(r.prim).lowerings.get("cuda")]


@settings(max_examples=1)
@given(data=st.data())
def test_every_elementwise_record_through_a_kernel(data):
    """Each record (each dtype) as a one-equation kernel, all in one library, against the eager impls."""
    cases = []
    for rec, dtype in ELEMENTWISE:
        args, params = data.draw(rec.args(dtype), label=rec.name)
        program, consts = _trace(lambda *a: [rec.fn(*a, **params)], [ShapedArray(a.shape, a.dtype) for a in args])
        cases.append((rec, program, consts, args, _fuse(program, min_size=1)))
    assert _kernels([c[-1] for c in cases]) >= len({r.prim for r, _ in ELEMENTWISE}) - 2
    for rec, program, consts, args, fused in cases:
        want = Executable(program, consts, None, None)(*args)
        _close(Executable(fused, consts, None, None)(*args)[0], want[0], err=rec.name)


def test_special_values_are_numpys():
    """NaN, inf and signed zeros through every kernel: bit-for-bit the numpy impls' results."""
    def f(x, y):
        m = lax.max(x, y)
        return [m, lax.min(x, y), lax.clamp(S.full((), -1.0, F32), x, S.full((), 1.0, F32)), lax.sign(x),
                lax.select(lax.is_finite(x), x, y), lax.mul(m, S.full((), np.inf, F32)), lax.neg(x), lax.abs(y),
                lax.div(x, y), lax.sub(x, y), lax.mul(x, S.full((), -0.0, F32)), lax.sqrt(y), lax.floor(x),
                R.reduce_max(x, (0,)), R.reduce_min(y, (0,)), R.reduce_sum(lax.mul(x, y), (0,))]
    x = np.array([np.nan, 1.0, -np.inf, 0.0, -0.0, 3.0, -0.0, np.inf], F32)
    y = np.array([1.0, np.nan, 2.0, -0.0, 0.0, np.inf, -0.0, -np.inf], F32)
    program, consts = _trace(f, [ShapedArray(x.shape, F32)] * 2)
    fused = _fuse(program, min_size=1)
    _kernels([fused])
    assert sum(not isinstance(e.prim, FusedPrimitive) for e in fused.eqns) <= 2     # the bare reductions
    for a, b in zip(Executable(fused, consts, None, None)(x, y), Executable(program, consts, None, None)(x, y)):
        _close(a, b, exact=True)


def _ulps(got, exact):
    """|got - exact| in float32 ulps of the correctly rounded result (inf where exactly one is infinite)."""
    want = exact.astype(F32)
    spacing = np.spacing(np.abs(want)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - exact) / spacing
    same_inf = np.isinf(got) & np.isinf(want) & (np.signbit(got) == np.signbit(want))
    return np.where(same_inf | (np.isnan(got) & np.isnan(exact)), 0.0, err)


@pytest.mark.parametrize("name,exact,bound", [("exp", np.exp, 1.05), ("tanh", np.tanh, 1.5),
                                              ("logistic", lambda x: 1 / (1 + np.exp(-x)), 3.0)])
def test_own_float32_transcendentals_are_within_their_ulp_bounds(name, exact, bound):
    """float32 exp, tanh and logistic are the prelude's code, not libm's: every 4099th float32 (all exponents,
    subnormal and overflowing results included) and the overflow and underflow edges are within ``bound`` ulps
    of the float64 result, and NaN, +-inf and +-0 come out bit for bit as numpy's."""
    every = np.arange(0, 2 ** 32, 4099, dtype=np.uint64).astype(np.uint32).view(F32)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], F32)
    edges = np.array([88.72283, 88.72284, -87.33655, -103.97208, -103.9721, -104.0, 1e-45, -1e-45, 0.625, -0.625,
                      9.0, -9.0, 20.0, -20.0], F32)
    x = np.concatenate([every, edges, special])
    fn = getattr(lax, name)
    program, consts = _trace(lambda a: [fn(a)], [ShapedArray(x.shape, F32)])
    fused = _fuse(program, min_size=1)
    assert _kernels([fused]) == 1
    got, = Executable(fused, consts, None, None)(x)
    with np.errstate(all="ignore"):
        err = _ulps(got, exact(x.astype(np.float64)))
    assert err.max() <= bound, (name, x[np.argmax(err)], got[np.argmax(err)])
    want, = Executable(program, consts, None, None)(special)
    _close(got[-len(special):], want, exact=True)


def test_jit_fuses_float32_exp_and_tanh_but_leaves_float64_to_numpy():
    f = lambda x: lax.tanh(lax.mul(x, x)) + lax.exp(x)
    for dt, fused in ((F32, True), (np.float64, False)):
        program, _ = _trace(f, [ShapedArray((4, 4), dt)])
        names = {e.prim.name for e in program.eqns}
        assert {"tanh", "exp"} <= names
        taken = [e.prim.name for e in program.eqns if cfuse.can_fuse(e)]
        assert ({"tanh", "exp"} <= set(taken)) is fused, (dt, taken)


def test_an_unusable_cache_folder_warns_and_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("FLFUN_CACHE_DIR", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setattr(build, "_loaded", {})
    step, w, x = _step()
    with pytest.warns(RuntimeWarning, match="numpy's impls instead"):
        exe = fl.jit(step).lower(w, x).compile().executable
    assert not isinstance(exe, cfuse.CpuExecutable)
    np.testing.assert_allclose(np.asarray(fl.jit(step)(w, x)), np.asarray(step(w, x)), rtol=1e-5, atol=1e-6)


def test_the_fused_path_is_the_default_where_gcc_is():
    """A fresh process compiles a large jitted program into kernels unless ``FLFUN_CPU_FUSION=0``."""
    import os
    import subprocess
    import sys
    code = ("import numpy as np, flfun as fl, flfun.numpy as fnp; from flfun.backends import cfuse; "
            "x = fnp.asarray(np.ones((1024, 1024), np.float32)); "
            "exe = fl.jit(lambda a: fnp.tanh(a * a + 1.0)).lower(x).compile().executable; "
            "print(isinstance(exe, cfuse.CpuExecutable))")
    for value, fused in ((None, True), ("0", False), ("1", True)):
        env = {k: v for k, v in os.environ.items() if k != "FLFUN_CPU_FUSION"}
        if value is not None:
            env["FLFUN_CPU_FUSION"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split()[-1] == str(fused), (value, out.stdout, out.stderr[-500:])


# ---------------------------------------------------------------------------------------------- loop nests
@pytest.mark.parametrize("shape,axes", [((64, 300), (1,)), ((300, 64), (0,)), ((5, 7, 600), (0, 2)),
                                        ((3, 700, 4), (1,)), ((40, 50), (0, 1)), ((1, 1), (0,))])
@pytest.mark.parametrize("red", ["reduce_sum", "reduce_max", "reduce_min"])
def test_reductions_rows_columns_and_interleaved_axes(shape, axes, red):
    def f(x, b):
        return [getattr(R, red)(lax.exp(lax.mul(x, S.broadcast_in_dim(b, shape, (len(shape) - 1,)))), axes)]
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, shape).astype(F32), rng.uniform(-1, 1, shape[-1:]).astype(F32)]
    program, consts = _trace(f, [ShapedArray(a.shape, F32) for a in args])
    fused = _fuse(program)
    assert fused.eqns[-1].prim.group.reduction is not None
    _kernels([fused])
    _close(Executable(fused, consts, None, None)(*args)[0], np.asarray(getattr(np, red[7:])(
        np.exp(args[0].astype(np.float64) * args[1]), axis=axes), F32))


def test_integer_kernels_wrap_like_numpy():
    big = np.array([2 ** 31 - 1, -2 ** 31, 7, -3] * 64, np.int32).reshape(16, 16)
    program, consts = _trace(lambda x: [lax.mul(lax.add(x, x), x), R.reduce_sum(lax.add(x, x), (1,))],
                             [ShapedArray(big.shape, np.int32)])
    fused = _fuse(program)
    _kernels([fused])
    for a, b in zip(Executable(fused, consts, None, None)(big), Executable(program, consts, None, None)(big)):
        _close(a, b)


def test_results_do_not_depend_on_the_thread_count(monkeypatch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 513)).astype(F32)
    program, consts = _trace(lambda x: [R.reduce_sum(lax.tanh(lax.mul(x, x)), (1,)),
                                        R.reduce_sum(lax.exp(lax.neg(x)), (0,)), lax.logistic(lax.sin(x))],
                             [ShapedArray(x.shape, F32)])
    fused = _fuse(program)
    _kernels([fused])
    runs = []
    for n in (1, 2, 3, 2):
        monkeypatch.setattr(build, "KERNEL_THREADS", n)
        runs.append(Executable(fused, consts, None, None)(x))
    for run in runs[1:]:
        for a, b in zip(run, runs[0]):
            np.testing.assert_array_equal(a, b)


# -------------------------------------------------------------------------------- jit: switch, impls, caches
def _step():
    def loss(w, x):
        h = fl.nn.functional.gelu(x @ w)
        return fnp.mean(fl.nn.functional.log_softmax(h, axis=-1) ** 2)

    def step(w, x):
        g = fl.grad(loss)(w, x)
        return w - 0.1 * g
    rng = np.random.default_rng(2)
    return step, fnp.asarray(rng.standard_normal((64, 128)).astype(F32)), fnp.asarray(
        rng.standard_normal((128, 64)).astype(F32))


def test_jit_fuses_a_training_step_and_matches_the_numpy_path(monkeypatch):
    step, w, x = _step()
    fused = fl.jit(step)
    exe = fused.lower(w, x).compile().executable
    assert isinstance(exe, cfuse.CpuExecutable) and any(isinstance(e.prim, FusedPrimitive) for e in exe.program.eqns)
    monkeypatch.setattr(config, "cpu_fusion", False)
    plain = fl.jit(step)
    assert not isinstance(plain.lower(w, x).compile().executable, cfuse.CpuExecutable)
    np.testing.assert_allclose(np.asarray(fused(w, x)), np.asarray(plain(w, x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fused(w, x)), np.asarray(step(w, x)), rtol=1e-5, atol=1e-6)


def test_profile_times_the_fused_executables_own_run():
    """``profile`` of a fused executable times the code it runs (kernels writing into the arena), one entry per
    equation, and leaves the results of a plain call as they were."""
    step, w, x = _step()
    jitted = fl.jit(step)
    want = np.asarray(jitted(w, x))
    exe = jitted.lower(w, x).compile().executable
    rows = exe.profile(w._value, x._value, repeat=3)
    assert [r[:2] for r in rows] == [(i, e.prim.name) for i, e in enumerate(exe.program.eqns)]
    assert any(name.startswith("flfun_fused") for _, name, _ in rows) and all(t >= 0 for *_, t in rows)
    np.testing.assert_array_equal(np.asarray(jitted(w, x)), want)


def test_a_replaced_impl_is_left_out_of_fusion_and_runs():
    step, w, x = _step()
    mul = primitives.get("mul")
    members = lambda exe: [m.prim.name for e in exe.program.eqns if isinstance(e.prim, FusedPrimitive)
                           for m in e.prim.group.eqns]
    assert "mul" in members(fl.jit(step).lower(w, x).compile().executable)
    calls = []
    old = register_impl(mul, "numpy", lambda a, b: calls.append(1) or np.multiply(a, b))
    try:
        exe = fl.jit(step).lower(w, x).compile().executable
        assert "mul" not in members(exe) and any(e.prim is mul for e in exe.program.eqns)
        np.testing.assert_allclose(np.asarray(fl.jit(step)(w, x)), np.asarray(step(w, x)), rtol=1e-5, atol=1e-6)
        assert calls
    finally:
        register_impl(mul, "numpy", old)


def test_no_compiler_means_numpy_impls(monkeypatch):
    step, w, x = _step()
    monkeypatch.setattr(cfuse, "toolchain", lambda: None)
    assert not isinstance(fl.jit(step).lower(w, x).compile().executable, cfuse.CpuExecutable)


def test_kernels_are_cached_in_memory_and_on_disk(tmp_path, monkeypatch):
    src = codegen.PRELUDE + "void k0(int nt) { (void)nt; }\n"
    monkeypatch.setenv("FLFUN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    lib = build.library(src)
    assert build.library(src) is lib
    assert len(list((tmp_path / "cfuse").glob("*.so"))) == 1
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setattr(build.subprocess, "run", lambda *a, **k: pytest.fail("compiled again"))
    build.library(src).k0(1)


def test_a_failing_build_warns_and_falls_back(monkeypatch):
    step, w, x = _step()
    def broken(source):
        raise RuntimeError("cfuse: gcc failed to build fused kernels")
    monkeypatch.setattr(cfuse, "library", broken)
    with pytest.warns(RuntimeWarning, match="numpy's impls"):
        exe = fl.jit(step).lower(w, x).compile().executable
    assert not isinstance(exe, cfuse.CpuExecutable)
