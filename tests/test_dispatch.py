"""The optional C fast path for Array operators (flfun/backends/fastpath.c) agrees with the Python operator it wraps."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import testing as ft
from flfun.primitives import elementwise as lax

dispatch = pytest.importorskip("flfun.backends.fastpath", reason="the C accelerator was not built (no compiler)")

OPS = [fnp.add, fnp.subtract, fnp.multiply, fnp.divide, fnp.maximum, fnp.minimum]
DTYPES = ["bool", "int8", "int32", "uint16", "int64", "float16", "float32", "float64"]


def _outcome(fn, a, b):
    try:
        out = fn(a, b)
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return type(e), str(e)
    return np.asarray(out), out.dtype


def test_operators_are_accelerated():
    for op in OPS:
        assert isinstance(op, dispatch.BinaryOp) and op.__wrapped__ is op.fallback
    assert fl.Array.__add__ is fnp.add and fl.Array.__mul__ is fnp.multiply


@given(st.sampled_from(OPS), st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.data())
def test_fast_path_matches_python_operator(op, dt1, dt2, data):
    shape1, shape2 = data.draw(ft.broadcastable_shapes(2).map(lambda r: r[:2]) if data.draw(st.booleans()) else
                               st.tuples(ft.shapes(), ft.shapes()))
    a = fnp.asarray(data.draw(ft.arrays(np.dtype(dt1), shape1)))
    b = data.draw(st.one_of(ft.arrays(np.dtype(dt2), shape2).map(fnp.asarray), st.booleans(),
                            st.integers(-300, 300), st.floats(-3, 3)))
    a, b = data.draw(st.sampled_from([(a, b), (b, a)]))
    with np.errstate(all="ignore"):
        fast, slow = _outcome(op, a, b), _outcome(op.__wrapped__, a, b)
    if isinstance(fast[0], type):
        assert fast == slow
    else:
        np.testing.assert_array_equal(fast[0], slow[0])
        assert fast[1] == slow[1]


def test_clear_error_not_numpy_traceback():
    with pytest.raises(TypeError, match=r"add: .*f32\[3\].*f32\[4\]|add: .*\(3,\).*\(4,\)"):
        fnp.ones(3) + fnp.ones(4)


@pytest.fixture
def add_calls():
    """Counts the numpy impl calls of add while the test runs."""
    calls = []

    def counting_add(x, y, **kw):
        calls.append(1)
        return np.add(x, y)
    prev = fl.register_impl(lax.add_p, "numpy", counting_add)
    yield calls
    fl.register_impl(lax.add_p, "numpy", prev)


def test_register_impl_reaches_the_operator(add_calls):
    out = fnp.ones(3) + fnp.ones(3)
    assert add_calls == [1] and out.tolist() == [2.0, 2.0, 2.0]
    fl.register_impl(lax.add_p, "numpy", np.add)   # the backend's own impl again: the next call skips the counter
    fnp.ones(3) + fnp.ones(3)
    assert add_calls == [1]


def test_result_is_fresh_and_transforms_take_the_python_path():
    x, y = fnp.arange(3.0), fnp.ones(3)
    z = x + y
    assert not np.shares_memory(np.asarray(z), np.asarray(x)) and x.tolist() == [0.0, 1.0, 2.0]
    assert fl.grad(lambda a: fnp.sum(a * y + a))(x).tolist() == [2.0, 2.0, 2.0]
    assert fl.jit(lambda a, b: a - b)(x, y).tolist() == [-1.0, 0.0, 1.0]
    assert fl.vmap(lambda a: a * y)(fnp.ones((2, 3))).shape == (2, 3)


def test_flfun_runs_without_the_accelerator():
    code = ("import sys; sys.modules['flfun.backends.fastpath'] = None\n"
            "import flfun.numpy as fnp\n"
            "assert type(fnp.add).__name__ == 'function'\n"
            "assert (fnp.arange(3.0) + fnp.ones(3)).tolist() == [1.0, 2.0, 3.0]\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_failures_take_the_general_path_once_and_never_crash(add_calls):
    with pytest.raises(TypeError, match="add: shapes do not broadcast"):
        fnp.ones(2) + fnp.ones(3)
    assert add_calls == [1]
    half_built = object.__new__(fl.Array)   # an Array whose construction failed part-way
    for args in ((fnp.ones(2), half_built), (half_built, fnp.ones(2))):
        with pytest.raises(AttributeError):
            fnp.add(*args)
    with pytest.raises(TypeError, match=r"add\(\) takes exactly 2 positional arguments"):
        fnp.add(fnp.ones(2))
