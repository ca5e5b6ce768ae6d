"""Elementwise fusion (flfun/compiler/fusion.py, flfun/backends/cuda/lowering.py) on the CPU: the grouping pass on
random programs (fused == unfused through the numpy reference evaluation of each group), its ordering invariants,
and the generated kernel C code, compiled with the host C++ compiler and run on the same inputs (skipped when
there is no compiler)."""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from random_programs import programs

import flfun.numpy as fnp
from flfun import lax
from flfun.core import ShapedArray
from flfun.backends.cuda.lowering import C_TYPES, c_literal, kernel_source
from flfun.compiler.executor import Executable
from flfun.compiler.fusion import FusedPrimitive, find_groups, fuse_elementwise, fusible
from flfun.compiler.passes import optimize
from flfun.ir import Literal, typecheck
from flfun.primitives import reduce as R
from flfun.primitives import shape as S
from flfun.transforms.jit import close_program
from flfun.transforms.staging import trace_to_program

F32 = np.float32
SHAPE = (3, 4)


def _trace(f, avals):
    fnp.zeros(1)   # install the numpy backend
    program, consts = trace_to_program(f, avals, dynamic=True)
    closed, _ = close_program(program, consts)
    return optimize(closed.program, closed.consts)


def _run(program, consts, args, fused: bool):
    fnp.zeros(1)
    p = fuse_elementwise(program) if fused else program
    return Executable(p, consts, None, None)(*args)


def _same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --------------------------------------------------------------------------------- random elementwise programs
UNARY = ("sin", "cos", "tanh", "exp_t", "log_p", "sqrt_a", "rsqrt_p", "logistic", "erf", "abs", "neg", "expm1_t",
         "log1p_a", "atan", "asin_t", "acos_t", "sinh_t", "cosh_t", "pow2", "pow3", "powm2", "square_sum")
BINARY = ("add", "sub", "mul", "div_p", "max", "min", "pow_p", "atan2", "rem_p")
ON_INPUTS = ("floor", "ceil", "round", "sign", "select_gt", "to_int_back", "is_finite", "clamp", "int_ops",
             "bool_ops", "bcast_row", "bcast_col", "select3")


def _one(c, like):
    return S.full((), c, like.dtype)


def _unary(op, a):
    p = lambda x: lax.add(lax.abs(x), _one(1.0, x))
    table = {"exp_t": lambda: lax.exp(lax.tanh(a)), "log_p": lambda: lax.log(p(a)), "sqrt_a": lambda: lax.sqrt(lax.abs(a)),
             "rsqrt_p": lambda: lax.rsqrt(p(a)), "expm1_t": lambda: lax.expm1(lax.tanh(a)),
             "log1p_a": lambda: lax.log1p(lax.abs(a)), "asin_t": lambda: lax.asin(lax.tanh(a)),
             "acos_t": lambda: lax.acos(lax.tanh(a)), "sinh_t": lambda: lax.sinh(lax.tanh(a)),
             "cosh_t": lambda: lax.cosh(lax.tanh(a)), "pow2": lambda: lax.integer_pow(a, 2),
             "pow3": lambda: lax.integer_pow(lax.tanh(a), 3), "powm2": lambda: lax.integer_pow(p(a), -2),
             "square_sum": lambda: lax.add(lax.mul(a, a), _one(0.5, a))}
    return table[op]() if op in table else getattr(lax, op)(a)


def _binary(op, a, b):
    p = lambda x: lax.add(lax.abs(x), _one(0.5, x))
    if op == "div_p":
        return lax.div(a, p(b))
    if op == "pow_p":
        return lax.pow(p(a), lax.tanh(b))
    if op == "rem_p":
        return lax.rem(a, p(b))
    return getattr(lax, op)(a, b)


def _on_inputs(op, x, y, row, col, k):
    """Discontinuous ops, applied to program inputs only (bit-identical inputs give identical results)."""
    if op in ("floor", "ceil", "round", "sign"):
        return getattr(lax, op)(lax.mul(x, _one(2.5, x)))
    if op == "select_gt":
        return lax.select(lax.gt(x, y), x, lax.neg(y))
    if op == "to_int_back":
        return lax.convert_element_type(lax.convert_element_type(lax.mul(x, _one(3.0, x)), np.int32), F32)
    if op == "is_finite":
        return lax.select(lax.is_finite(lax.div(x, y)), y, x)
    if op == "clamp":
        return lax.clamp(_one(-0.5, x), x, _one(0.7, x))
    if op == "int_ops":
        i = lax.max(lax.mul(k, k), lax.xor(k, lax.add(k, _one(3, k))))
        return lax.convert_element_type(lax.min(lax.and_(i, _one(7, k)), lax.or_(k, _one(1, k))), F32)
    if op == "bool_ops":
        m = lax.xor(lax.gt(x, y), lax.not_(lax.lt(y, _one(0.1, y))))
        return lax.convert_element_type(lax.or_(m, lax.eq(k, _one(2, k))), F32)
    if op == "bcast_row":
        return lax.mul(x, S.broadcast_in_dim(row, SHAPE, (1,)))
    if op == "bcast_col":
        return lax.sub(S.broadcast_in_dim(col, SHAPE, (0,)), y)
    if op == "select3":
        which = lax.clamp(_one(0, k), k, _one(2, k))
        return lax.select_n(which, x, y, lax.neg(x))
    raise ValueError(op)


@st.composite
def elementwise_programs(draw, max_ops: int = 10):
    """``(program, consts, args)``: float32 (3,4) x, y, a (4,) row, a (3,) column and an int32 (3,4) k, with
    chains of elementwise ops, broadcasts and maybe a final reduction."""
    instrs = draw(st.lists(st.tuples(st.sampled_from(("u", "b", "i")), st.integers(0, 99), st.integers(0, 99),
                                     st.integers(0, 99)), min_size=1, max_size=max_ops))
    n_out = draw(st.integers(1, 3))
    red = draw(st.sampled_from((None, "reduce_sum", "reduce_max", "reduce_min")))
    axes = draw(st.sampled_from(((0,), (1,), (0, 1))))
    seed = draw(st.integers(0, 2 ** 31 - 1))

    def f(x, y, row, col, k):
        pool = [x, y]
        for kind, i, j, o in instrs:
            if kind == "u":
                pool.append(_unary(UNARY[o % len(UNARY)], pool[i % len(pool)]))
            elif kind == "b":
                pool.append(_binary(BINARY[o % len(BINARY)], pool[i % len(pool)], pool[j % len(pool)]))
            else:
                pool.append(_on_inputs(ON_INPUTS[o % len(ON_INPUTS)], x, y, row, col, k))
        outs = pool[-n_out:]
        if red is not None:
            outs[-1] = getattr(R, red)(lax.sin(outs[-1]), axes)
        return outs
    avals = [ShapedArray(SHAPE, F32), ShapedArray(SHAPE, F32), ShapedArray((4,), F32), ShapedArray((3,), F32),
             ShapedArray(SHAPE, np.int32)]
    program, consts = _trace(f, avals)
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-2, 2, a.shape).astype(a.dtype) if a.dtype == F32 else rng.integers(-4, 5, a.shape,
                                                                                              dtype=np.int32)
            for a in avals]
    return program, consts, args


# ------------------------------------------------------------------------------------------- the grouping pass
@given(programs())
def test_fused_equals_unfused_on_random_programs(drawn):
    program, consts, inputs = drawn
    program, consts = optimize(program, consts)
    for a, b in zip(_run(program, consts, inputs, False), _run(program, consts, inputs, True)):
        _same(a, b)


@given(elementwise_programs())
def test_fused_equals_unfused_on_elementwise_programs(drawn):
    program, consts, args = drawn
    fused = fuse_elementwise(program)
    typecheck(fused)
    for a, b in zip(_run(program, consts, args, False), _run(program, consts, args, True)):
        _same(a, b)


def _check_order(program, fused):
    """Every value is defined before it is read, and each fused equation replaced a set of original ones."""
    defined = {v.id for v in fused.constvars + fused.invars}
    for e in fused.eqns:
        for v in e.inputs:
            assert type(v) is Literal or v.id in defined, f"{e.prim.name} reads {v} before it is defined"
        defined.update(v.id for v in e.outputs)
    assert all(type(v) is Literal or v.id in defined for v in fused.outvars)
    members = [m for e in fused.eqns if isinstance(e.prim, FusedPrimitive)
               for m in e.prim.group.eqns + ([e.prim.group.reduction] if e.prim.group.reduction else [])]
    kept = [e for e in fused.eqns if not isinstance(e.prim, FusedPrimitive)]
    assert sorted(id(e) for e in members + kept) == sorted(id(e) for e in program.eqns)


@given(elementwise_programs())
def test_groups_keep_program_order_and_cover_every_equation(drawn):
    program, _, _ = drawn
    _check_order(program, fuse_elementwise(program))


@given(programs())
def test_groups_keep_order_on_programs_with_reductions_and_reshapes(drawn):
    program, consts, _ = drawn
    program, _ = optimize(program, consts)
    _check_order(program, fuse_elementwise(program))


def test_a_group_is_sealed_once_an_outside_equation_reads_it():
    """``a = sin x; b = a @ w; c = a + b``: c must not join a's group (the group would need b, which needs a)."""
    def f(x, w):
        a = lax.sin(lax.cos(x))
        b = lax.dot_general(a, w, (((1,), (0,)), ((), ())))
        return lax.exp(lax.add(a, b))
    program, consts = _trace(f, [ShapedArray((3, 3), F32)] * 2)
    fused = fuse_elementwise(program)
    _check_order(program, fused)
    names = [e.prim.name for e in fused.eqns]
    assert names[1] == "dot_general" and names[0].startswith("flfun_fused") and names[2].startswith("flfun_fused")
    x, w = np.eye(3, dtype=F32), np.ones((3, 3), F32)
    for a, b in zip(_run(program, consts, [x, w], False), _run(program, consts, [x, w], True)):
        _same(a, b)


def test_chain_with_several_escaping_values_is_one_kernel():
    def f(x, b):
        a = lax.add(x, b)
        m = lax.gt(a, S.full((), 0.0, F32))
        return lax.select(m, a, S.full(a.shape, 0.0, F32)), m
    program, _ = _trace(f, [ShapedArray((4, 5), F32), ShapedArray((5,), F32)])
    fused = fuse_elementwise(program)
    assert len(fused.eqns) == 1
    group = fused.eqns[0].prim.group
    assert [v.aval.dtype.name for v in group.outputs] == ["bool", "float32"]
    assert fused.eqns[0].prim.inplace == ()      # two outputs: the planner gives each its own buffer


def test_reduction_epilogue_and_inplace_hint():
    def f(x, y):
        return R.reduce_sum(lax.mul(lax.exp(x), y), (1,)), lax.sub(x, lax.mul(S.full((), 0.1, F32), y))
    program, consts = _trace(f, [ShapedArray((4, 5), F32)] * 2)
    fused = fuse_elementwise(program)
    groups = [e.prim.group for e in fused.eqns if isinstance(e.prim, FusedPrimitive)]
    assert [g.reduction is not None for g in groups] == [True, False]
    assert groups[1].inplace_operands() == (0, 1)
    assert [e.prim.name for e in fused.eqns if not isinstance(e.prim, FusedPrimitive)] == []
    x = np.linspace(-1, 1, 20, dtype=F32).reshape(4, 5)
    for a, b in zip(_run(program, consts, [x, x + 1], False), _run(program, consts, [x, x + 1], True)):
        _same(a, b)


def test_no_groups_leaves_the_program_alone():
    program, _ = _trace(lambda x: lax.sin(x), [ShapedArray((3,), F32)])
    assert fuse_elementwise(program) is program
    assert find_groups(program) == []


def test_unsupported_equations_are_not_fusible():
    program, _ = _trace(lambda x, y: (lax.shift_left(x, y), lax.div(x, y), lax.rem(x, y)),
                        [ShapedArray((3,), np.int32)] * 2)
    assert not any(fusible(e) for e in program.eqns)


def test_fused_primitives_stay_out_of_the_registry():
    from flfun import primitives
    program, _ = _trace(lambda x: lax.exp(lax.sin(x)), [ShapedArray((3,), F32)])
    fused = fuse_elementwise(program)
    assert fused.eqns[0].prim.name.startswith("flfun_fused_")
    assert fused.eqns[0].prim.name not in primitives.names()
    assert fused.eqns[0].prim.name.isidentifier()


@pytest.mark.parametrize("val,dtype,text", [
    (np.nan, "float32", "__int_as_float(2143289344)"), (-0.0, "float32", "__int_as_float(-2147483648)"),
    (np.inf, "float64", "__longlong_as_double(9218868437227405312LL)"), (True, "bool", "true"),
    (-2 ** 63, "int64", "((long long)(-9223372036854775807LL - 1))"), (7, "uint32", "((unsigned int)7U)")])
def test_literals_are_exact(val, dtype, text):
    assert c_literal(val, dtype) == text


# ------------------------------------------------------------------------------------ generated C, on the host
CXX = shutil.which("g++") or shutil.which("c++")
_PRELUDE = """#include <cmath>
#include <cstring>
using std::isnan; using std::isfinite;
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
#define __device__
"""


def _ctype(v):
    return C_TYPES[v.aval.dtype.name]


def _harness(group) -> str:
    """The kernel's C code in a host loop over contiguous inputs (pre-broadcast; reduced axes moved last)."""
    ks = kernel_source(group)
    loads = "".join(f"    const {_ctype(v)} in{k} = ((const {_ctype(v)}*)in[{k}])[i];\n"
                    for k, v in enumerate(group.inputs))
    if group.reduction is None:
        decl = "".join(f"    {_ctype(v)} out{j};\n" for j, v in enumerate(group.outputs))
        store = "".join(f"    (({_ctype(v)}*)out[{j}])[i] = out{j};\n" for j, v in enumerate(group.outputs))
        return (_PRELUDE + f'extern "C" void run(void** in, void** out, long n, long r) {{\n'
                f"  for (long i = 0; i < n; ++i) {{\n{loads}{decl}    {{\n{ks.body}\n    }}\n{store}  }}\n}}\n")
    ct = ks.reduce_type
    return (_PRELUDE + ks.preamble + f'extern "C" void run(void** in, void** out, long n, long r) {{\n'
            f"  for (long o = 0; o < n; ++o) {{\n    {ct} a = {ks.identity};\n"
            f"    for (long i = o * r; i < (o + 1) * r; ++i) {{\n{loads}"
            f"      const {ct} b = {ks.map_expr};\n      a = {ks.reduce_expr};\n    }}\n"
            f"    (({ct}*)out[0])[o] = a;\n  }}\n}}\n")


_CACHE = os.path.join(tempfile.gettempdir(), "flfun_fusion_cxx")


def _compile(src: str):
    os.makedirs(_CACHE, exist_ok=True)
    path = os.path.join(_CACHE, hashlib.sha1(src.encode()).hexdigest() + ".so")
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
            f.write(src)
        subprocess.run([CXX, "-O1", "-shared", "-fPIC", "-std=c++17", "-o", path + ".tmp", f.name], check=True,
                       capture_output=True, text=True)
        os.replace(path + ".tmp", path)
        os.unlink(f.name)
    return ctypes.CDLL(path).run


def _run_c(group, args):
    shape = group.shape
    bins = [np.ascontiguousarray(np.broadcast_to(np.reshape(a, s), shape)) for a, s in zip(args, group.in_shapes)]
    if group.reduction is None:
        outs = [np.empty(shape, v.aval.dtype) for v in group.outputs]
        n, r = int(np.prod(shape)), 1
    else:
        axes = group.reduction.params["axes"]
        keep = [d for d in range(len(shape)) if d not in axes]
        bins = [np.ascontiguousarray(np.transpose(b, keep + list(axes))) for b in bins]
        outs = [np.empty(group.outputs[0].aval.shape, group.outputs[0].aval.dtype)]
        n, r = outs[0].size, int(np.prod([shape[d] for d in axes]))
    run = _compile(_harness(group))
    ptrs = lambda arrs: (ctypes.c_void_p * max(len(arrs), 1))(*[a.ctypes.data for a in arrs])
    run(ptrs(bins), ptrs(outs), ctypes.c_long(n), ctypes.c_long(r))
    return outs


def _check_groups_in_c(program, consts, args):
    env = {}
    for v, c in zip(program.constvars, consts):
        env[v.id] = np.asarray(c)
    for v, a in zip(program.invars, args):
        env[v.id] = a
    fused = fuse_elementwise(program)
    for e in fused.eqns:
        ins = [x.val if type(x) is Literal else env[x.id] for x in e.inputs]
        outs = e.prim.impls["numpy"](*ins, **e.params)
        outs = outs if e.prim.multiple_results else [outs]
        for v, o in zip(e.outputs, outs):
            env[v.id] = np.asarray(o)
        if isinstance(e.prim, FusedPrimitive):
            for want, got, v in zip(outs, _run_c(e.prim.group, ins), e.outputs):
                want = np.asarray(want)
                assert got.dtype == want.dtype and got.shape == want.shape
                if want.dtype.kind == "f":
                    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=kernel_source(
                        e.prim.group).body)
                else:
                    np.testing.assert_array_equal(got, want, err_msg=kernel_source(e.prim.group).body)


needs_cxx = pytest.mark.skipif(CXX is None, reason="no host C++ compiler")


@needs_cxx
@given(elementwise_programs())
def test_generated_c_matches_the_reference(drawn):
    _check_groups_in_c(*drawn)


@needs_cxx
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_generated_c_for_dtypes_and_reductions(dtype):
    dt = np.dtype(dtype)

    def f(x, y):
        a = lax.max(lax.mul(x, y), lax.sub(x, lax.neg(y)))
        b = lax.select(lax.le(a, x), lax.add(a, a), lax.min(x, y))
        c = lax.abs(lax.sign(lax.sub(b, y)))
        return R.reduce_max(lax.add(b, c), (0,)), R.reduce_min(lax.mul(c, y), (1,)), R.reduce_sum(
            lax.sub(a, c), (0, 1))
    program, consts = _trace(f, [ShapedArray((5, 6), dt)] * 2)
    rng = np.random.default_rng(0)
    args = [rng.integers(-3, 4, (5, 6)).astype(dt) for _ in range(2)]
    _check_groups_in_c(program, consts, args)
    out = Executable(fuse_elementwise(program), consts, None, None)(*args)
    for a, b in zip(out, Executable(program, consts, None, None)(*args)):
        _same(a, b)


@needs_cxx
def test_generated_c_handles_special_values():
    def f(x, y):
        m = lax.max(x, y)
        return m, lax.min(x, y), lax.clamp(S.full((), -1.0, F32), x, S.full((), 1.0, F32)), lax.sign(x), \
            lax.select(lax.is_finite(x), x, y), lax.mul(m, S.full((), np.inf, F32))
    program, consts = _trace(f, [ShapedArray((6,), F32)] * 2)
    x = np.array([np.nan, 1.0, -np.inf, 0.0, -0.0, 3.0], F32)
    y = np.array([1.0, np.nan, 2.0, -0.0, 0.0, np.inf], F32)
    want = dict(zip((v.id for v in program.outvars), Executable(program, consts, None, None)(x, y)))
    fused = fuse_elementwise(program, min_size=1)     # every equation its own kernel
    assert all(isinstance(e.prim, FusedPrimitive) for e in fused.eqns)
    for e in fused.eqns:
        for v, got in zip(e.outputs, _run_c(e.prim.group, [x, y])):
            np.testing.assert_array_equal(got, want[v.id], err_msg=e.prim.name)


@pytest.mark.parametrize("in_c", [False, pytest.param(True, marks=needs_cxx)])
def test_broadcasts_of_outside_values_join_the_kernel(in_c):
    """``exp(x * bcast(row)) - bcast(col)``: each broadcast operand is a kernel input read with its own strides."""
    def f(x, row, col):
        a = lax.mul(x, S.broadcast_in_dim(row, (3, 4), (1,)))
        return [lax.sub(lax.exp(a), S.broadcast_in_dim(col, (3, 4), (0,)))]
    fnp.zeros(1)
    closed, _ = close_program(*trace_to_program(f, [ShapedArray(s, F32) for s in ((3, 4), (4,), (3,))], dynamic=True))
    program, consts = closed.program, closed.consts     # not optimized: the broadcasts stay broadcast_in_dim
    assert sum(e.prim.name == "broadcast_in_dim" for e in program.eqns) == 2
    fused = fuse_elementwise(program)
    assert len(fused.eqns) == 1 and isinstance(fused.eqns[0].prim, FusedPrimitive)
    assert sorted(tuple(s) for s in fused.eqns[0].prim.group.in_shapes) == [(1, 4), (3, 1), (3, 4)]
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, s).astype(F32) for s in ((3, 4), (4,), (3,))]
    for a, b in zip(_run(program, consts, args, False), _run(program, consts, args, True)):
        _same(a, b)
    if in_c:
        _check_groups_in_c(program, consts, args)
