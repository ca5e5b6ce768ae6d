"""Tests for core code that the rest of the suite never ran: Array conversions and pickling, leaked tracers,
IR typecheck errors, pass corner cases, executor fallbacks and the small dtype/axis helpers."""
import copy
import pickle
import threading

import numpy as np
import pytest

from cpu_devices import cpu_devices
import flfun
import flfun.numpy as fnp
from flfun import dtypes, lax, primitives
from flfun.compiler.passes import partial_eval
from flfun.core import Primitive, ShapedArray, UnexpectedTracerError, register_impl
from flfun.ir import Eqn, Literal, Program, Var, typecheck

f32 = np.dtype("float32")


# ------------------------------------------------------------------------------------------------ Array
@pytest.mark.parametrize("value", [np.arange(6, dtype=np.float16).reshape(2, 3), np.array(7, dtype=np.int32),
                                   np.array([True, False]), np.float64(2.5)])
def test_pickle_and_deepcopy_keep_values_dtype_shape(value):
    x = fnp.asarray(value)
    for y in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x), copy.copy(x)):
        assert type(y) is flfun.Array and y.dtype == x.dtype and y.shape == x.shape and y.device is x.device
        np.testing.assert_array_equal(np.asarray(y), value)


def test_an_array_pickled_on_a_gpu_loads_on_the_default_device_without_one():
    """The pickle of a cupy Array names backend "cupy"; a process with no usable cupy loads it on the default
    device (the pickled value is always a host array)."""
    from flfun.backends import cupy_backend
    if cupy_backend.is_available():
        pytest.skip("this process has a GPU")
    y = flfun.numpy._array_methods.unpickle(np.arange(3, dtype=np.float32), "cupy", 0)
    assert y.device is flfun.devices()[0] and y.tolist() == [0.0, 1.0, 2.0]


def test_pickle_and_jit_constants_on_a_second_device():
    with cpu_devices(2) as devs:
        cpu1 = devs[1]
        tree = {"w": flfun.device_put(fnp.ones((2, 2)), cpu1), "b": [fnp.arange(3)]}
        for out in (pickle.loads(pickle.dumps(tree)), copy.deepcopy(tree)):
            assert out["w"].device is cpu1 and out["b"][0].device is tree["b"][0].device
            assert (out["w"] + out["w"]).tolist() == [[2.0, 2.0]] * 2       # usable together on its device
            assert out["b"][0].tolist() == [0, 1, 2]
        const = flfun.device_put(fnp.arange(3.0), cpu1)       # jit moves a closed-over constant to the call's device
        out = flfun.jit(lambda x: x + const)(fnp.ones(3))
        assert out.tolist() == [1.0, 2.0, 3.0] and out.device is flfun.devices()[0]


def test_numpy_views_cannot_mutate_an_array():
    f = flfun.jit(lambda x: x * 2.0)
    x = fnp.asarray(np.ones(3, np.float32))
    for a in (x, f(x)):
        view = np.asarray(a)
        before = view.copy()
        assert not view.flags.writeable and not np.from_dlpack(a).flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 5.0
        np.array(a)[0] = 5.0                    # a copy: the Array is untouched
        np.testing.assert_array_equal(np.asarray(a), before)
    out = f(x)
    held = np.asarray(out)
    f(fnp.zeros(3))                             # a later call must not overwrite an earlier result
    np.testing.assert_array_equal(held, [2.0, 2.0, 2.0])


def test_array_conversions():
    x = fnp.arange(6.0).reshape(2, 3)
    for dtype in (np.float64, np.int32):        # (float64 slipped through: np.dtype("float64") == None)
        with pytest.raises(ValueError, match="dtype conversion cannot be done without a copy"):
            np.asarray(x, dtype=dtype, copy=False)
    assert np.asarray(x, dtype=np.float32, copy=False).dtype == np.float32
    assert complex(fnp.asarray(2.0)) == 2 + 0j
    assert x.block_until_ready() is x
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(fnp.asarray(1.0))
    for t in (x.transpose(), x.transpose(1, 0), x.transpose((1, 0)), x.transpose([1, 0])):
        assert t.tolist() == np.arange(6.0).reshape(2, 3).T.tolist()


# ------------------------------------------------------------------------------------------------- core
def test_reprs_and_register_impl_checks_its_argument():
    assert repr(ShapedArray((2, 3), f32)) == "ShapedArray(f32[2,3])"
    assert repr(ShapedArray((), f32, weak_type=True)) == "ShapedArray(f32[], weak)"
    assert repr(primitives.get("sin")) == "sin"
    assert repr(Literal(2.0, ShapedArray((), f32))) == "Literal(2.0:f32)"
    with pytest.raises(TypeError, match="register_impl: expected a Primitive, got 'sin'"):
        register_impl("sin", "numpy", np.sin)


def test_leaked_tracer_is_reported():
    box = []

    def leak(x):
        flfun.jvp(lambda y: box.append(y) or y, (x,), (x,))
        return box[-1]

    with pytest.raises(UnexpectedTracerError, match="traced by JVPTrace .* after the transform"):
        flfun.vmap(leak)(fnp.ones(3))
    with pytest.raises(UnexpectedTracerError, match="^sin: an array traced by JVPTrace"):
        flfun.jit(lambda x: fnp.sin(box[-1]) + x)(fnp.ones(3))


# ---------------------------------------------------------------------------------------------- dtypes, util
@pytest.mark.parametrize("py, want", [(float, "float32"), (int, "int64"), (bool, "bool")])
def test_python_types_as_dtypes(py, want):
    assert fnp.zeros(2, dtype=py).dtype == np.dtype(want)


def test_dtype_and_axis_errors():
    with pytest.raises(TypeError, match="unsupported dtype <object"):
        fnp.zeros(2, dtype=object())
    with pytest.raises(TypeError, match="unsupported Python scalar 'a' of type str"):
        dtypes.scalar_dtype("a")
    with pytest.raises(TypeError, match="vmap out_axes: axis must be an integer, got 1.5"):
        flfun.vmap(lambda x: x, out_axes=1.5)(fnp.ones((2, 3)))
    # a tiled gather has no axis to grow on a 0-d value (was an IndexError)
    with pytest.raises(ValueError, match="all_gather axis: axis 0 is out of bounds for an array of rank 0"):
        flfun.vmap(lambda x: lax.all_gather(x, "i", axis=0, tiled=True), axis_name="i")(fnp.ones(3))


# --------------------------------------------------------------------------------------------------- IR
def _bad_programs():
    a, b = Var(ShapedArray((3,), f32)), Var(ShapedArray((3,), f32))
    sin, add, sort = primitives.get("sin"), primitives.get("add"), primitives.get("sort")
    c = Var(ShapedArray((3,), f32))
    return [
        (Program([a], [a], [], [a]), "an input or constant variable is bound twice"),
        (Program([], [a], [Eqn(sin, (b,), (c,), {})], [c]), r"equation 0 \(sin\) reads Var\(\d+:f32\[3\]\) before"),
        (Program([], [a], [], [b]), r"the output list reads Var\(\d+:f32\[3\]\) before it is defined"),
        (Program([], [a], [Eqn(sort, (a,), (b, c), {"dimension": 0, "is_stable": True, "num_keys": 1})], [b]),
         r"equation 0 \(sort\) has 2 outputs, its rule gives 1"),
        (Program([], [a], [Eqn(sin, (a,), (Var(ShapedArray((2,), f32)),), {})], [a]),
         r"equation 0 \(sin\) output is f32\[2\] but its rule gives f32\[3\]"),
        (Program([], [a, b], [Eqn(add, (a, b), (b,), {})], [b]), r"equation 0 \(add\) rebinds Var"),
    ]


@pytest.mark.parametrize("program, message", _bad_programs())
def test_typecheck_errors(program, message):
    with pytest.raises(TypeError, match="typecheck: " + message):
        typecheck(program)


def test_select_n_with_equal_cases_is_simplified_away():
    def f(p, a):
        return lax.select_n(p, a, a) * 2.0

    p, a = fnp.asarray([True, False, True]), fnp.arange(3.0)
    assert "select_n" in str(flfun.make_ir(f)(p, a))
    assert "select_n" not in str(flfun.make_ir(f, optimized=True)(p, a))
    assert flfun.jit(f)(p, a).tolist() == [0.0, 2.0, 4.0]


def test_partial_eval_rejects_known_outputs_that_need_unknown_inputs():
    a, b = Var(ShapedArray((), f32)), Var(ShapedArray((), f32))
    prog = Program([], [a], [Eqn(primitives.get("sin"), (a,), (b,), {})], [b])
    with pytest.raises(ValueError, match="partial_eval: outputs .* depend on unknown inputs"):
        partial_eval(prog, [False], 1)


def test_cse_keeps_apart_equations_whose_unhashable_params_differ():
    scale_p = Primitive("test_scale_by")
    scale_p.def_abstract_eval(lambda x, factors: ShapedArray(x.shape, x.dtype))
    register_impl(scale_p, "numpy", lambda x, factors: (x * factors).astype(x.dtype))
    try:
        def f(x):
            return scale_p.bind(x, factors=np.array([1.0, 2.0])) + scale_p.bind(x, factors=np.array([3.0, 4.0]))
        assert flfun.jit(f)(fnp.ones(2)).tolist() == [4.0, 6.0]
    finally:
        del flfun.core.PRIMITIVES["test_scale_by"]


# --------------------------------------------------------------------------------------------- executor
class _NoSignature:
    """An impl whose signature inspect cannot read (as for some compiled extension callables)."""
    @property
    def __signature__(self):
        raise ValueError("no signature found")

    def __call__(self, x):
        return np.negative(x)


def test_impl_without_signature_and_missing_impl():
    neg = primitives.get("neg")
    impl = _NoSignature()
    old = register_impl(neg, "numpy", impl)
    assert "numpy" not in neg.writes_out     # not declared writes_out=True: jit never passes it out=
    try:
        assert flfun.jit(lambda x: -(x * 2.0))(fnp.ones(2)).tolist() == [-2.0, -2.0]
        register_impl(neg, "numpy", None)
        with pytest.raises(NotImplementedError, match="neg: no impl rule is defined on backend 'numpy'"):
            flfun.jit(lambda x: -(x * 3.0))(fnp.ones(2))
    finally:
        register_impl(neg, "numpy", old)


def test_executable_reentered_from_another_thread_uses_a_fallback():
    sin = primitives.get("sin")
    old, inner = sin.impls["numpy"], []
    f = flfun.jit(lambda x: fnp.sin(x) * 2.0)

    def sin_calling_f_from_a_thread(x, **kw):
        if not inner:                           # once: call f again while this run holds the arena
            inner.append(None)
            t = threading.Thread(target=lambda: inner.append(f(fnp.zeros(2))))
            t.start()
            t.join()
        return old(x, **kw)

    x = fnp.asarray([0.5, 1.0])
    f(x)                                        # compiled with the original impl's planning
    register_impl(sin, "numpy", sin_calling_f_from_a_thread)
    try:
        out = f(x)
    finally:
        register_impl(sin, "numpy", old)
    np.testing.assert_allclose(out, 2 * np.sin([0.5, 1.0]), rtol=1e-6)
    assert inner[1].tolist() == [0.0, 0.0]
