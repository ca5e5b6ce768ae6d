"""Bad input gets a clear error naming the operation and the offending shapes, dtypes or arguments."""
from __future__ import annotations

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import lax


def test_mismatched_shapes():
    with pytest.raises(TypeError, match=r"add: shapes do not broadcast: f32\[3\] and f32\[4\]"):
        fnp.ones(3) + fnp.ones(4)
    with pytest.raises(TypeError, match=r"add: shapes do not broadcast"):
        fl.grad(lambda x: fnp.sum(x + fnp.ones(4)))(fnp.ones(3))
    with pytest.raises(TypeError, match=r"reshape: cannot reshape f32\[2,3\]"):
        lax.reshape(fnp.ones((2, 3)), (4,))


def test_bad_axes():
    with pytest.raises(ValueError, match="sum: axis 2 is out of bounds for an array of rank 2"):
        fnp.sum(fnp.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        fnp.sum(fnp.ones((2, 3)), axis=(0, 0))
    with pytest.raises(TypeError, match=r"reduce_sum: axes \(3,\)"):
        lax.reduce_sum(fnp.ones((2, 3)), (3,))


def test_bad_dtypes():
    with pytest.raises(TypeError, match=r"add: operands must have the same dtype, got f32\[2\] and i64\[2\]"):
        lax.add(fnp.ones(2), fnp.asarray([1, 2]))
    with pytest.raises(TypeError, match=r"exp: requires floating or complex operands, got i64\[2\]"):
        lax.exp(fnp.asarray([1, 2]))
    with pytest.raises(TypeError, match="bitwise_and: requires integer or boolean inputs"):
        fnp.bitwise_and(fnp.ones(2), fnp.ones(2))
    with pytest.raises(TypeError, match="unsupported dtype"):
        fnp.zeros(2, dtype="datetime64[s]")
    with pytest.raises(TypeError, match=r"lt: requires real numeric operands, got c64\[2\]"):
        fnp.less(fnp.ones(2, "complex64"), 1.0)


def test_grad_of_non_scalar_and_integer_input():
    with pytest.raises(TypeError, match=r"grad: the function must return a real float scalar, got f32\[3\]"):
        fl.grad(lambda x: x * 2)(fnp.ones(3))
    with pytest.raises(TypeError, match=r"grad requires real- or complex-valued inputs .* but got int64 \(argument 0\)"):
        fl.grad(lambda x: fnp.sum(x))(fnp.asarray([1, 2]))
    with pytest.raises(ValueError, match="grad: argnums 3 out of range"):
        fl.grad(lambda x: x, argnums=3)(1.0)


def test_tracer_used_outside_its_transform():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2
    fl.jvp(f, (fnp.asarray(1.0),), (fnp.asarray(1.0),))
    with pytest.raises(fl.UnexpectedTracerError, match="leaked"):
        leaked[0] + 1.0
    fl.vmap(f)(fnp.ones(2))
    with pytest.raises(fl.UnexpectedTracerError, match="used after the transform that created it"):
        fnp.sin(leaked[1])
    fl.grad(lambda x: fnp.sum(fl.vmap(f)(x)))(fnp.ones(2))
    with pytest.raises(fl.UnexpectedTracerError, match="leaked"):
        leaked[2] * 2.0


def test_python_control_flow_on_traced_value():
    def f(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(fl.ConcretizationError, match=r"Python control flow .*flfun.numpy.where"):
        fl.vmap(f)(fnp.ones(3))
    with pytest.raises(fl.ConcretizationError, match="static_argnums"):
        fl.jit(lambda x: float(x))(1.0)
    # eager grad evaluates (like PyTorch and JAX's grad): control flow on values picks the taken branch
    assert float(fl.grad(f)(fnp.asarray(-2.0))) == -1.0


def test_immutability_and_conversion_errors():
    x = fnp.ones(3)
    with pytest.raises(TypeError, match=r"immutable; use x = x.at\[idx\].set\(value\)"):
        x[0] = 2.0
    with pytest.raises(TypeError, match="only arrays with one element"):
        float(x)
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)
    a = np.ones(3, np.float32)
    y = fnp.asarray(a)
    a[0] = 5.0
    assert float(y[0]) == 1.0                       # the Array copied the numpy buffer
    view = np.asarray(y)
    with pytest.raises(ValueError):
        view[0] = 3.0                               # and hands out read-only views


def test_jvp_argument_errors():
    with pytest.raises(ValueError, match=r"jvp: tangent 0 has aval f32\[2\] but its primal has f32\[3\]"):
        fl.jvp(fnp.sin, (fnp.ones(3),), (fnp.ones(2),))
    with pytest.raises(TypeError, match="primals and tangents must be tuples"):
        fl.jvp(fnp.sin, fnp.ones(3), fnp.ones(3))


@pytest.mark.parametrize("call, message", [
    (lambda: fl.grad(lambda x: x.sum(), argnums=True)(fnp.ones(2)),
     "grad: argnums must be an int or a tuple of ints, got True"),
    (lambda: fl.jacfwd(lambda x: x, argnums=(True,))(fnp.ones(2)),
     r"jacfwd: argnums must be an int or a tuple of ints, got \(True,\)"),
    (lambda: fl.vmap(lambda x: x.sum(), in_axes=True)(fnp.ones((2, 3))),
     "vmap: in_axes entries must be int or None, got True"),
    (lambda: fl.jit(lambda x: (x, "abc"))(fnp.ones(2)), r"str is not a valid flfun array type \(dtype <U3\): 'abc'"),
])
def test_bools_are_not_axes_and_strings_are_not_arrays(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_integer_inputs_have_zero_tangents_whatever_tangent_is_given():
    """Integer inputs have no tangent space (jax asks for float0 tangents): every path gives 0."""
    i = fnp.asarray([3, 4])
    for f in (lambda i: i * 2, lambda i: i @ i, lambda i: fnp.cumsum(i)):
        out, t = fl.jvp(f, (i,), (fnp.asarray([1, 1]),))
        assert t.dtype == out.dtype and not np.asarray(t).any()
    _, t = fl.jvp(lambda i, x: i * x, (fnp.asarray(3), fnp.asarray(2.0)), (fnp.asarray(5), fnp.asarray(1.0)))
    assert float(t) == 3.0


def test_structure_errors_show_dict_keys():
    with pytest.raises(ValueError, match=r"tuple\(dict\('w': \*\)\) and tuple\(dict\('v': \*\)\)"):
        fl.jvp(lambda d: d["w"], ({"w": fnp.ones(2)},), ({"v": fnp.ones(2)},))


def test_comparing_with_none_is_identity_as_in_jax():
    x = fnp.ones(2)
    assert (x == None) is False and (x != None) is True and (None == x) is False  # noqa: E711
    assert not bool(fl.jit(lambda v: (v == None, v + 1))(x)[0])  # noqa: E711
    assert (x == fnp.ones(2)).tolist() == [True, True]
