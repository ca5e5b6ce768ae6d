"""The cupy backend. On any machine: the import guards and the clear error without cupy or a GPU, the device
executor (planning of fused kernels, arena outputs, donation) run on the numpy backend, the CUDA-graph runner's
bookkeeping and fallback with a fake device API, and cuBLAS layout rules. On a GPU (marked ``gpu``): every
op-table primitive forward on cupy, transforms, jit, fusion vs unfused, graph replay, precision modes, DLPack."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest
from peers import require
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from fake_cuda import (FakeGraphAPI, FakeCublas, HostArray, HostElementwiseKernel,
                       HostReductionKernel, host_array)
from random_programs import programs

import flfun as fl
import flfun.numpy as fnp
from flfun import lax
from flfun.backends import get_backend
from flfun.backends.cuda import cublas
from flfun.backends.cuda.executor import DeviceExecutable, generate, plan
from flfun.backends.cuda.graphs import MAX_KEYS, GraphRunner
from flfun.compiler.executor import Executable
from flfun.compiler.fusion import FusedPrimitive, fuse_elementwise
from flfun.compiler.passes import optimize
from flfun.config import config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "FLFUN_BACKEND": "numpy"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


# ---------------------------------------------------------------------------------------- guards and errors
def test_flfun_imports_without_cupy_and_asking_for_it_is_a_clear_error():
    r = _python("import sys; sys.modules['cupy'] = None\n"
                "import flfun, flfun.numpy as fnp, flfun.backends.cupy_backend as cb\n"
                "assert 'cupy' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
                "print(float(fnp.sum(fnp.ones(3))), cb.is_available())\n"
                "from flfun.backends import get_backend\n"
                "try:\n    get_backend('cupy')\nexcept cb.BackendUnavailableError as e:\n    print('ERR', e)\n")
    assert r.returncode == 0, r.stderr
    assert "3.0 False" in r.stdout
    assert "ERR cupy backend: cupy is not installed" in r.stdout


def test_cupy_without_a_gpu_is_a_clear_error():
    r = _python("import sys, types\n"
                "cp = types.ModuleType('cupy'); cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace("
                "getDeviceCount=lambda: (_ for _ in ()).throw(RuntimeError('cudaErrorNoDevice'))))\n"
                "sys.modules['cupy'] = cp\n"
                "import flfun\nfrom flfun.backends.cupy_backend import BackendUnavailableError\n"
                "try:\n    flfun.devices('cupy')\nexcept BackendUnavailableError as e:\n    print('ERR', e)\n")
    assert r.returncode == 0, r.stderr
    assert "ERR cupy backend: no usable CUDA GPU (RuntimeError: cudaErrorNoDevice)" in r.stdout


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match="unknown backend 'tpu'; choose 'numpy' or 'cupy'"):
        get_backend("tpu")


def test_precision_and_fusion_switches_exist():
    assert config.tf32 is False or os.environ.get("FLFUN_TF32")
    assert isinstance(config.fusion, bool) and isinstance(config.cuda_graphs, bool)


# ------------------------------------------------------------------- the device executor on the numpy backend
def _cpu():
    return get_backend("numpy").devices[0]


def _compile(program, consts, donated=(), fused=True):
    program, consts = optimize(program, consts)
    if fused:
        program = fuse_elementwise(program)
    return DeviceExecutable(program, consts, _cpu(), plan(program, "numpy", donated), donated)


def _same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@given(programs())
def test_device_executable_matches_the_reference_executor(drawn):
    program, consts, inputs = drawn
    get_backend("numpy")
    want = Executable(*optimize(program, consts), None, None)(*inputs)
    for fused in (False, True):
        exe = _compile(program, consts, fused=fused)
        exe.plan.check()
        for _ in range(2):    # the arena is reused by the second call
            outs = exe(*inputs)
            for a, b in zip(outs, want):
                _same(a, b)
            for i, o in enumerate(outs):
                assert not any(np.may_share_memory(o, x) for x in inputs + outs[:i]), "an output aliases"
                assert exe.arena is None or not np.may_share_memory(o, exe.arena)


def _mlp_step():
    def step(w1, b1, w2, x):
        def loss(w1, b1, w2):
            h = fnp.maximum(x @ w1 + b1, 0.0)
            return fnp.mean((h @ w2) ** 2)
        value, (g1, gb1, g2) = fl.value_and_grad(loss, argnums=(0, 1, 2))(w1, b1, w2)
        return w1 - 0.1 * g1, b1 - 0.1 * gb1, w2 - 0.1 * g2, value
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((6, 8), (8,), (8, 3), (5, 6))]
    return step, args


def test_fused_kernels_write_their_outputs_into_the_arena_and_donated_inputs_in_place():
    step, args = _mlp_step()
    closed = fl.make_ir(step)(*[fnp.asarray(a) for a in args])
    exe = _compile(closed.program, closed.consts, donated=(0, 1, 2))
    fused = [e for e in exe.program.eqns if isinstance(e.prim, FusedPrimitive)]
    assert any(len(e.outputs) > 1 for e in fused), exe.program
    multi = next(e for e in fused if len(e.outputs) > 1)
    assert all(exe.plan.offset_of(v) is not None for v in multi.outputs if v not in exe.program.outvars)
    assert "out=(b" in exe.source and "out=(a0" in exe.source    # arena views, and w1 updated in place
    ref = Executable(*optimize(closed.program, closed.consts), None, None)
    state, want = [a.copy() for a in args], list(args)
    for _ in range(3):
        outs = exe(*state[:3], state[3])
        want = ref(*want[:3], args[3]) [:3] + [args[3]]
        assert outs[0] is state[0]                         # donated and written in place
        state = list(outs[:3]) + [args[3]]
        for a, b in zip(outs[:3], want[:3]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_unplanned_mode_and_literal_outputs():
    def f(x):
        return lax.sin(lax.exp(x)), 2.0, x
    closed = fl.make_ir(f)(fnp.ones(3))
    program, consts = optimize(closed.program, closed.consts)
    program = fuse_elementwise(program, min_size=1)
    exe = DeviceExecutable(program, consts, _cpu(), None)
    x = np.arange(3, dtype=np.float32)
    a, two, same = exe(x)
    _same(a, np.sin(np.exp(x)))
    assert float(two) == 2.0 and same is not x
    _same(same, x)


def test_plan_gives_each_output_of_a_fused_kernel_its_own_buffer():
    def f(x, y):
        a = lax.add(x, y)
        return lax.exp(lax.mul(lax.tanh(a), lax.sin(a))), lax.neg(lax.cos(a))
    closed = fl.make_ir(lambda x, y: fnp.matmul(*f(x, y)))(fnp.ones((4, 4)), fnp.ones((4, 4)))
    program = fuse_elementwise(optimize(closed.program, closed.consts)[0])
    p = plan(program, "numpy")
    p.check()
    kernel = next(e for e in program.eqns if isinstance(e.prim, FusedPrimitive))
    offs = [p.offset_of(v) for v in kernel.outputs]
    assert None not in offs and len(set(offs)) == len(offs)
    src, _ = generate(program, p, _cpu(), [], np.zeros(p.arena_bytes, np.uint8))
    assert "out=(b" in src


# --------------------------------------------------------------------------------- graphs, with a fake device
def _sgd():
    def run(w, x):
        g = 2 * x * (w * x).sum()
        w -= 0.1 * g                       # donated: updated in place, as the planned step does
        return [w, np.asarray((w * x).sum() ** 2)]
    return run


def test_graph_runner_captures_on_the_second_call_and_replays():
    api = FakeGraphAPI()
    runner = GraphRunner(_sgd(), (0,), api)
    w, x = np.ones(4), np.linspace(0, 1, 4)
    args = [w, x]
    ref_w, losses = np.ones(4), []
    for step in range(5):
        outs = runner(args)
        assert outs[0] is w                           # the donated buffer comes back as itself
        ref_w = ref_w - 0.1 * 2 * x * (ref_w * x).sum()
        np.testing.assert_allclose(outs[0], ref_w)
        np.testing.assert_allclose(outs[1], (ref_w * x).sum() ** 2)
        losses.append(outs[1])
    assert runner.captures == 1 and api.launched == 3 and runner.status == "1 captured, 3 replays"
    assert all(a is not b for a, b in zip(losses, losses[1:]))   # outputs are copied out of the graph


def test_graph_runner_falls_back_when_capture_fails():
    api = FakeGraphAPI(fail=True)
    runner = GraphRunner(_sgd(), (0,), api)
    w, x = np.ones(4), np.linspace(0, 1, 4)
    for _ in range(4):
        runner([w, x])
    assert runner.status == "fallback: fake: this step cannot be captured" and api.launched == 0
    ref = np.ones(4)
    for _ in range(4):
        ref = ref - 0.1 * 2 * x * (ref * x).sum()
    np.testing.assert_allclose(w, ref)


def test_graph_runner_stages_inputs_that_keep_moving():
    api = FakeGraphAPI()
    runner = GraphRunner(_sgd(), (0,), api)
    x = np.linspace(0, 1, 4)
    w = np.ones(4)
    ref, hold = np.ones(4), []
    for step in range(MAX_KEYS + 4):
        staging = runner.staged.get(None)
        args = [w.copy(), x.copy()]                   # fresh buffers every call (kept: no address is reused)
        hold.append(args)
        outs = runner(args)
        ref = ref - 0.1 * 2 * x * (ref * x).sum()
        np.testing.assert_allclose(outs[0], ref)
        w = outs[0]
        assert staging is None or all(o is not s for o in outs for s in staging.staging)
    assert runner.staged and api.launched >= 3


def test_graph_runner_keys_on_the_extra_key():
    mode = ["fp32"]
    runner = GraphRunner(lambda x: [x * 2], (), FakeGraphAPI(), extra_key=lambda: mode[0])
    x = np.ones(3)
    for m in ("fp32", "fp32", "tf32", "tf32", "fp32"):
        mode[0] = m
        _same(runner([x])[0], x * 2)
    assert runner.captures == 2 and len(runner.graphs) == 2


# ---------------------------------------------------------------------------------------------- cuBLAS rules
@pytest.mark.parametrize("shape,strides,want", [
    ((3, 4), (16, 4), ("row", 4)), ((3, 4), (4, 12), ("col", 3)), ((1, 4), (99, 4), ("row", 4)),
    ((3, 1), (4, 77), ("row", 1)), ((3, 4), (32, 8), None), ((1, 4), (4, 12), ("col", 3)), ((2, 2), (2, 4), None)])
def test_cublas_layout_rules(shape, strides, want):
    assert cublas.layout(shape, strides, 4) == want


# ------------------------------------------------------------------------------------------------ on the GPU
gpu = pytest.mark.gpu


@pytest.fixture(scope="module")
def dev():
    return get_backend("cupy").devices[0]


@pytest.fixture
def on_gpu(dev):
    """The GPU as the default device for the test."""
    with default_device(dev):
        yield dev


@contextlib.contextmanager
def default_device(device):
    """Make ``device`` the default (where constants made inside functions land) inside the block."""
    from flfun import core
    old = core.default_device()
    core.set_default_device(device)
    try:
        yield device
    finally:
        core.set_default_device(old)


def _on(dev, a):
    return fnp.asarray(a, device=dev)


FWD = []
try:
    from op_table import RECORDS
    FWD = [(r, d) for r in RECORDS for d in r.dtypes[:2]]
except Exception:  # noqa: BLE001
    pass


@gpu
@pytest.mark.parametrize("rec,dtype", FWD, ids=[f"{r.name}-{d}" for r, d in FWD])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_every_primitive_forward_on_cupy_matches_numpy(dev, rec, dtype, data):
    args, params = data.draw(rec.args(dtype))
    want = rec.fn(*[fnp.asarray(a, device=_cpu()) for a in args], **params)
    with default_device(dev):
        out = rec.fn(*[_on(dev, a) for a in args], **params)
    for o, w in zip(fl.tree_leaves(out), fl.tree_leaves(want)):
        assert o.device is dev
        o, w = np.asarray(o), np.asarray(w)
        assert o.shape == w.shape and o.dtype == w.dtype, rec.name
        tol = 2e-5 if dtype == "float32" else 1e-9
        np.testing.assert_allclose(o.astype(np.float64) if o.dtype.kind not in "bu" else o, w, rtol=tol,
                                   atol=tol * 10, err_msg=rec.name)


@gpu
def test_transforms_and_jit_on_cupy(dev):
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)

    def loss(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)
    g_cpu = fl.grad(loss)(fnp.asarray(w, device=_cpu()), fnp.asarray(x, device=_cpu()))
    rows = [float(loss(fnp.asarray(w), fnp.asarray(x[i:i + 1]))) for i in range(4)]
    with default_device(dev):
        gw, gx = _on(dev, w), _on(dev, x)
        for fn in (fl.grad(loss), fl.jit(fl.grad(loss)), fl.grad(fl.jit(loss))):
            g = fn(gw, gx)
            assert g.device is dev
            np.testing.assert_allclose(np.asarray(g), np.asarray(g_cpu), rtol=1e-5, atol=1e-5)
        per_row = fl.vmap(lambda r: loss(gw, r[None]))(gx)
        np.testing.assert_allclose(np.asarray(per_row), rows, rtol=1e-5)
        jv = fl.jvp(lambda w: loss(w, gx), (gw,), (fnp.ones_like(gw),))[1]
        assert np.isfinite(float(jv))


@gpu
@given(programs())
@settings(max_examples=6, deadline=None)
def test_fused_equals_unfused_on_cupy(dev, drawn):
    program, consts, inputs = drawn
    args = [_on(dev, a)._value for a in inputs]
    want = Executable(*optimize(program, consts), None, None)(*inputs)
    from flfun.backends.cuda.executor import compile_program
    from flfun.ir import ClosedProgram
    for fusion in (False, True):
        config.fusion = fusion
        try:
            exe = compile_program(ClosedProgram(program, consts), dev)
            outs = exe(*args)
        finally:
            config.fusion = True
        for o, w in zip(outs, want):
            np.testing.assert_allclose(dev.to_host(o), w, rtol=2e-5, atol=2e-5)


@gpu
def test_graph_replay_of_a_donated_training_step_matches_plain_runs(on_gpu, dev):
    step, args = _mlp_step()
    results = {}
    for graphs in (False, True):
        config.cuda_graphs = graphs
        try:
            jstep = fl.jit(step, donate_argnums=(0, 1, 2))
            state = [_on(dev, a) for a in args]
            losses = []
            for _ in range(6):
                *params, loss = jstep(*state)
                state = list(params) + [state[3]]
                losses.append(float(loss))
            exe = jstep.lower(*state).compile().executable
            results[graphs] = (losses, [np.asarray(p) for p in params], exe.graph_status)
        finally:
            config.cuda_graphs = True
    assert "replays" in results[True][2] and results[True][2] != "0 captured, 0 replays", results[True][2]
    np.testing.assert_allclose(results[True][0], results[False][0], rtol=1e-6)
    for a, b in zip(results[True][1], results[False][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@gpu
def test_steady_state_allocates_only_the_outputs(on_gpu, dev):
    import cupy as cp
    step, args = _mlp_step()
    config.cuda_graphs = False
    try:
        jstep = fl.jit(step)
        state = [_on(dev, a) for a in args]
        jstep(*state)
        base, count = cp.cuda.get_allocator(), [0]

        def counting(n):
            count[0] += 1
            return base(n)
        with cp.cuda.using_allocator(counting):
            jstep(*state)
        p = jstep.lower(*state).compile().plan
    finally:
        config.cuda_graphs = True
    fresh = sum(1 for r in p.roots.values() if r.kind in ("heap", "output"))
    assert 0 < p.arena_bytes and count[0] <= fresh + 4, f"{count[0]} allocations, {fresh} values outside the arena"


@gpu
@pytest.mark.parametrize("tf32", [False, True])
def test_gemm_precision_modes(on_gpu, dev, tf32):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((256, 64)).astype(np.float32)
    want = a.astype(np.float64) @ b
    config.tf32 = tf32
    try:
        got = np.asarray(fl.jit(lambda a, b: a @ b)(_on(dev, a), _on(dev, b)))
        got_t = np.asarray(_on(dev, a.T.copy()).T @ _on(dev, b))
    finally:
        config.tf32 = False
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel < (5e-3 if tf32 else 2e-6) and (tf32 or rel < 2e-6)
    np.testing.assert_allclose(got_t, got, rtol=1e-5 if not tf32 else 1e-2, atol=1e-4 if not tf32 else 5e-2)
    if tf32:
        assert rel > 1e-6    # TF32 really was used (10-bit mantissa inputs)


@gpu
def test_dlpack_exchange(on_gpu, dev):
    x = _on(dev, np.arange(6, dtype=np.float32).reshape(2, 3))
    torch = require("torch")
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.sum().item() == 15
    back = fnp.from_dlpack(t * 2, device=dev)
    _same(back, np.arange(6).reshape(2, 3) * 2)
    host = fl.device_put(x, _cpu())
    assert host.device.platform == "cpu"
    _same(host, np.arange(6).reshape(2, 3))


@gpu
def test_dlpack_exchange_with_jax(on_gpu, dev):
    jax = require("jax")
    x = _on(dev, np.arange(6, dtype=np.float32))
    assert float(jax.dlpack.from_dlpack(x).sum()) == 15
    _same(fnp.from_dlpack(jax.numpy.arange(3.0), device=dev), [0, 1, 2])


def test_scalars_follow_the_device_of_the_other_operands():
    from flfun.backends.base import Device
    from flfun.core import wrap
    other = Device("cpu", 7, "numpy", np)
    x = wrap(np.arange(3.0, dtype=np.float32), other)
    for y in (x * fnp.asarray(2.0), fnp.asarray(2.0) * x, fnp.where(x > 1.0, x, 0.0), fnp.mean(x) * x):
        assert y.device is other
    with pytest.raises(ValueError, match="operands live on different devices"):
        x + fnp.ones(3)


# ------------------------------------------------------------------- cuBLAS argument mapping, on host memory
@pytest.fixture
def fake_cublas(monkeypatch):
    import types
    host = lambda f: lambda *a, **k: np.asarray(f(*a, **k)).view(HostArray)  # noqa: E731
    fake_cp = types.SimpleNamespace(
        ascontiguousarray=host(np.ascontiguousarray), empty=host(np.empty), ones=host(np.ones), ndarray=HostArray,
        transpose=np.transpose, reshape=np.reshape, swapaxes=np.swapaxes, asarray=host(np.asarray),
        copyto=np.copyto, cuda=types.SimpleNamespace(Device=lambda i: contextlib.nullcontext()))
    libs = {}

    def handle(cp, device_id):
        h = types.SimpleNamespace(ptr=None, prepare=lambda tf32: None, lib=libs.setdefault("lib", FakeCublas(
            np.float32)), one={np.dtype(d): 1 for d in (np.float32, np.float64)},
            zero={np.dtype(d): 0 for d in (np.float32, np.float64)})
        return h
    monkeypatch.setattr(cublas, "handle", handle)
    monkeypatch.setattr(cublas.ctypes, "byref", lambda x: x)
    return fake_cp, libs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lt,rt", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)])
def test_cublas_gemm_maps_row_major_products_onto_column_major_calls(fake_cublas, dtype, lt, rt, m, k, n):
    fake_cp, libs = fake_cublas
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.standard_normal((k, m) if lt else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if rt else (k, n)).astype(dtype)
    libs["lib"] = FakeCublas(dtype)
    av, bv = (host_array(a).T if lt else host_array(a)), (host_array(b).T if rt else host_array(b))
    c = np.full((m, n), np.nan, dtype).view(HostArray)
    cublas.gemm(fake_cp, av, bv, c, False)
    np.testing.assert_allclose(np.asarray(c), np.asarray(av) @ np.asarray(bv), rtol=1e-5)


@pytest.mark.parametrize("case", ["contiguous", "transposed", "heads", "broadcast"])
def test_cublas_batched_gemm(fake_cublas, case):
    fake_cp, libs = fake_cublas
    rng = np.random.default_rng(3)
    B, H, M, K, N = 2, 3, 4, 5, 6
    a = rng.standard_normal((B, H, M, K)).astype(np.float32)
    b = rng.standard_normal((B, H, K, N)).astype(np.float32)
    if case == "transposed":      # column-major matrices inside each batch
        av = host_array(np.ascontiguousarray(a.swapaxes(-1, -2))).swapaxes(-1, -2)
        bv = host_array(np.ascontiguousarray(b.swapaxes(-1, -2))).swapaxes(-1, -2)
    elif case == "heads":         # (B, M, H, K) stored, viewed as (B, H, M, K): batch dims do not merge
        av = host_array(np.ascontiguousarray(a.transpose(0, 2, 1, 3))).transpose(0, 2, 1, 3)
        bv = host_array(b)
    elif case == "broadcast":
        av = np.broadcast_to(host_array(a[:1, :1]), a.shape).view(HostArray)
        bv = host_array(b)
    else:
        av, bv = host_array(a), host_array(b)
    c = np.full((B, H, M, N), np.nan, np.float32).view(HostArray)
    cublas.gemm(fake_cp, av, bv, c, False)
    np.testing.assert_allclose(np.asarray(c), np.asarray(av) @ np.asarray(bv), rtol=1e-5)
    assert libs["lib"].calls[-1][-1] == B * H


@given(st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_cublas_dot_general_and_sums_match_numpy(fake_cublas, data):
    """The cupy impls of dot_general and reduce_sum (GEMMs on flfun's cuBLAS handle) on random dimension
    numbers and axes, against the numpy impls."""
    from flfun.backends.xp import linalg, reduce
    fake_cp, libs = fake_cublas
    libs["lib"] = FakeCublas(np.float32)
    ref = {**linalg.impls(np), **reduce.impls(np)}
    impls = cublas.impls(fake_cp, ref)
    nb, nc, nl, nr = (data.draw(st.integers(0, 2)) for _ in range(4))
    sizes = [data.draw(st.integers(1, 4)) for _ in range(nb + nc + nl + nr)]
    bs, cs, ls, rs = sizes[:nb], sizes[nb:nb + nc], sizes[nb + nc:nb + nc + nl], sizes[nb + nc + nl:]
    lorder = data.draw(st.permutations([("b", i) for i in range(nb)] + [("c", i) for i in range(nc)]
                                       + [("f", i) for i in range(nl)]))
    rorder = data.draw(st.permutations([("b", i) for i in range(nb)] + [("c", i) for i in range(nc)]
                                       + [("f", i) for i in range(nr)]))
    size = {"b": bs, "c": cs}
    lshape = [size[k][i] if k in size else ls[i] for k, i in lorder]
    rshape = [size[k][i] if k in size else rs[i] for k, i in rorder]
    dn = ((tuple(lorder.index(("c", i)) for i in range(nc)), tuple(rorder.index(("c", i)) for i in range(nc))),
          (tuple(lorder.index(("b", i)) for i in range(nb)), tuple(rorder.index(("b", i)) for i in range(nb))))
    rng = np.random.default_rng(len(sizes))
    lhs = rng.standard_normal(lshape).astype(np.float32)
    rhs = rng.standard_normal(rshape).astype(np.float32)
    got = impls["dot_general"](host_array(lhs), host_array(rhs), dimension_numbers=dn)
    want = ref["dot_general"](lhs, rhs, dimension_numbers=dn)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    out = np.empty(want.shape, np.float32).view(HostArray)
    assert impls["dot_general"](host_array(lhs), host_array(rhs), dimension_numbers=dn, out=out) is out
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
    nd = lhs.ndim
    if nd >= 2:
        k = data.draw(st.integers(1, nd - 1))
        for axes in (tuple(range(k)), tuple(range(nd - k, nd))):
            got = impls["reduce_sum"](host_array(lhs), axes=axes)
            np.testing.assert_allclose(np.asarray(got), lhs.sum(axes), rtol=1e-5, atol=1e-5)


def test_graph_replay_of_a_planned_donated_step_with_a_fake_device():
    """The device executable's generated step under the graph runner: donated parameters come back in place,
    the loss is copied out of the graph's buffers, and every step equals the plain run."""
    step, args = _mlp_step()
    closed = fl.make_ir(step)(*[fnp.asarray(a) for a in args])
    exe = _compile(closed.program, closed.consts, donated=(0, 1, 2))
    plain = _compile(closed.program, closed.consts, donated=(0, 1, 2))
    api = FakeGraphAPI()
    runner = GraphRunner(exe._run, (0, 1, 2), api)
    state, ref = [a.copy() for a in args[:3]], [a.copy() for a in args[:3]]
    losses = []
    for _ in range(6):
        outs = runner(state + [args[3]])
        want = plain(*ref, args[3])
        assert all(o is s for o, s in zip(outs[:3], state))
        for o, w in zip(outs, want):
            np.testing.assert_allclose(o, w, rtol=1e-6, atol=1e-7)
        ref = list(want[:3])
        losses.append(outs[3])
    assert runner.captures == 1 and api.launched == 4
    assert len({id(x) for x in losses}) == len(losses)


# ------------------------------------------------------------ fused-kernel impls, with cupy's kernels on the host
@pytest.fixture
def host_cupy(monkeypatch):
    import types
    from test_fusion import CXX
    if CXX is None:
        pytest.skip("no host C++ compiler")
    fake = types.SimpleNamespace(ElementwiseKernel=HostElementwiseKernel, ReductionKernel=HostReductionKernel,
                                 empty=np.empty, broadcast_to=np.broadcast_to)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


@given(st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fused_kernel_impls_match_the_reference(host_cupy, data):
    """``kernels.build``: the kernel's argument order, reshaped broadcast inputs, allocated or given outputs and
    reduction axes, with cupy's kernels replaced by host-compiled ones of the same contract."""
    from flfun.backends.cuda import kernels
    from test_fusion import elementwise_programs
    program, consts, args = data.draw(elementwise_programs())
    env = {v.id: a for v, a in zip(program.invars, args)}
    env.update({v.id: np.asarray(c) for v, c in zip(program.constvars, consts)})
    for e in fuse_elementwise(program).eqns:
        ins = [x.val if type(x).__name__ == "Literal" else env[x.id] for x in e.inputs]
        outs = e.prim.impls["numpy"](*ins, **e.params)
        outs = outs if e.prim.multiple_results else [outs]
        if isinstance(e.prim, FusedPrimitive):
            impl = kernels.build(e.prim.group)
            given_out = tuple(np.empty(v.aval.shape, v.aval.dtype) if data.draw(st.booleans()) else None
                              for v in e.outputs)
            got = impl(*ins, out=given_out)
            for g, w, o in zip(got, outs, given_out):
                assert o is None or g is o
                np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-5,
                                           atol=2e-5)
        env.update({v.id: np.asarray(o) for v, o in zip(e.outputs, outs)})
