"""The Array class: operators and reflected operators against numpy, comparisons, repr, conversions
(``__array__``, ``__dlpack__``, bool/int/float/index), immutability, hashing and jaxtyping annotations."""
from __future__ import annotations

import operator

import numpy as np
import pytest
from peers import require
from hypothesis import given, strategies as st

import flfun as fl
import flfun.numpy as fnp
from flfun import Array
from flfun.testing import arrays, broadcastable_shapes

FLOATS = st.sampled_from(["float32", "float64"])
INTS = st.sampled_from(["int32", "int64", "uint8"])


def _same(out, expected, atol=1e-6):
    assert isinstance(out, Array), type(out)
    expected = np.asarray(expected)
    assert out.shape == expected.shape and out.dtype == expected.dtype, (out, expected.dtype)
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), expected.astype(np.float64), atol=atol,
                               rtol=1e-6)


@st.composite
def pair(draw, dtypes, low=-5.0, high=5.0):
    dt = draw(dtypes)
    s1, s2, _ = draw(broadcastable_shapes(2))
    return draw(arrays(dt, s1, low=low, high=high)), draw(arrays(dt, s2, low=low, high=high))


ARITH = [operator.add, operator.sub, operator.mul]
CMP = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


@pytest.mark.parametrize("op", ARITH + CMP + [operator.truediv], ids=lambda f: f.__name__)
@given(xy=pair(FLOATS, low=0.5, high=5.0))
def test_binary_operators_float(op, xy):
    x, y = xy
    _same(op(fnp.asarray(x), fnp.asarray(y)), op(x, y))
    _same(op(fnp.asarray(x), y), op(x, y))           # numpy on the right
    _same(op(x, fnp.asarray(y)), op(x, y))           # numpy on the left defers to Array (reflected)


@pytest.mark.parametrize("op", ARITH + CMP + [operator.floordiv, operator.mod, operator.and_, operator.or_,
                                              operator.xor], ids=lambda f: f.__name__)
@given(xy=pair(INTS, low=1, high=100))
def test_binary_operators_int(op, xy):
    x, y = xy
    _same(op(fnp.asarray(x), fnp.asarray(y)), op(x, y))


@given(x=arrays("float32", (3,), low=0.5, high=3.0), s=st.sampled_from([2.0, -1.5, 3, 0.5]))
def test_scalar_and_reflected_operators(x, s):
    a = fnp.asarray(x)
    s32 = np.float32(s)
    for op in ARITH + [operator.truediv, operator.pow]:
        _same(op(a, s), op(x, s32), atol=1e-5)
        _same(op(s, a), op(s32, x), atol=1e-5)        # __radd__, __rsub__, __rtruediv__, __rpow__, ...
    _same(-a, -x)
    _same(+a, x)
    _same(abs(-a), x)
    _same(a ** 2, x ** 2)
    _same(divmod(a, 2.0)[1], np.mod(x, np.float32(2.0)))


def test_int_operators():
    a = fnp.asarray([5, -3, 8], dtype="int32")
    x = np.array([5, -3, 8], np.int32)
    _same(a // 2, x // 2)
    _same(7 // a, 7 // x)
    _same(a % 3, x % 3)
    _same(a << 1, x << 1)
    _same(a >> 1, x >> 1)
    _same(~a, ~x)
    _same(1 - a, 1 - x)
    _same(a & 6, x & 6)
    _same(3 | a, 3 | x)
    b = fnp.asarray([True, False])
    _same(~b, np.array([False, True]))
    _same(b ^ True, np.array([False, True]))


def test_matmul_operator():
    x, y = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    _same(fnp.asarray(x) @ fnp.asarray(y), x @ y)
    _same(x @ fnp.asarray(y), x @ y)


def test_comparisons_give_bool():
    a = fnp.asarray([1.0, 2.0, 3.0])
    assert (a < 2).dtype == np.bool_ and (a == 2.0).tolist() == [False, True, False]
    assert (2 < a).tolist() == [False, False, True] and (a != a).tolist() == [False] * 3


def test_repr_and_str():
    assert repr(fnp.asarray([1.0, 2.0])) == "Array([1., 2.])"
    assert repr(fnp.asarray([1, 2], dtype="int32")) == "Array([1, 2], dtype=int32)"
    assert repr(fnp.asarray(True)) == "Array(True)"
    assert repr(fnp.zeros((2, 2))) == "Array([[0., 0.],\n       [0., 0.]])"
    assert str(fnp.asarray([1.5, 2.0])) == str(np.array([1.5, 2.0], np.float32))
    assert f"{fnp.asarray(2.5):.2f}" == "2.50"
    assert fnp.ones((2, 3)).aval_str() == "f32[2,3]"


@given(x=st.sampled_from(["float32", "float64", "int8", "uint16"]).flatmap(lambda d: arrays(d, (2, 3))))
def test_array_protocol_roundtrip(x):
    a = fnp.asarray(x)
    back = np.asarray(a)
    np.testing.assert_array_equal(back, x)
    assert back.dtype == x.dtype
    assert not back.flags.writeable                  # a view of an immutable buffer cannot be written
    with pytest.raises(ValueError):
        back[0, 0] = 1
    c = np.array(a, copy=True)
    c[0, 0] = 42                                     # a copy is the caller's own
    np.testing.assert_array_equal(np.asarray(a), x)
    assert np.asarray(a, dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64", "uint16", "bool"])
def test_dlpack_roundtrips(dtype):
    x = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    a = fnp.asarray(x)
    via_np = np.from_dlpack(a)
    assert via_np.dtype == x.dtype
    np.testing.assert_array_equal(via_np, x)
    back = fnp.from_dlpack(via_np)
    assert back.dtype == x.dtype and back.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(back), x)
    assert fl.numpy.from_dlpack(a) is a
    assert a.__dlpack_device__() == via_np.__dlpack_device__()


def test_dlpack_broadcast_views_and_copy_semantics():
    z = fnp.zeros((2, 3))                            # a stride-0 broadcast buffer on the numpy backend
    np.testing.assert_array_equal(np.from_dlpack(z), np.zeros((2, 3), np.float32))
    src = np.arange(4.0)
    owned = fnp.from_dlpack(src)
    shared = fnp.from_dlpack(src, copy=False)
    src[0] = 100.0
    assert owned.tolist()[0] == 0.0                  # copied by default: flfun arrays stay immutable
    assert shared.tolist()[0] == 100.0               # copy=False shares the producer's memory
    with pytest.raises(ValueError, match="from_dlpack: x must implement __dlpack__, got list"):
        fnp.from_dlpack([1, 2])


def test_dlpack_torch():
    torch = require("torch")
    a = fnp.arange(6.0).reshape(2, 3)
    t = torch.from_dlpack(a)
    assert tuple(t.shape) == (2, 3) and t.dtype == torch.float32
    np.testing.assert_array_equal(t.numpy(), np.asarray(a))
    back = fnp.from_dlpack(torch.arange(4, dtype=torch.int32))
    assert back.dtype == np.int32 and back.tolist() == [0, 1, 2, 3]


def test_unhashable():
    a = fnp.ones(3)
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    with pytest.raises(TypeError):
        {a}
    with pytest.raises(TypeError):
        hash(fnp.asarray(1.0))


def test_immutable():
    a = fnp.asarray([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"flfun arrays are immutable; use x = x\.at\[idx\]\.set\(value\)"):
        a[0] = 5.0
    b = a
    b += 1.0                                         # rebinds b to a new array; a is unchanged
    assert a.tolist() == [1.0, 2.0, 3.0] and b.tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(AttributeError):
        a.shape = (3, 1)
    with pytest.raises(AttributeError):
        a.extra = 1                                  # no __dict__: nothing can be attached either


def test_scalar_conversions():
    assert bool(fnp.asarray([True])) is True and bool(fnp.asarray(0.0)) is False
    assert float(fnp.ones((1, 1))) == 1.0 and int(fnp.asarray([7])) == 7
    assert operator.index(fnp.asarray(3)) == 3 and [10, 20, 30][fnp.asarray(1)] == 20
    assert fnp.asarray(2.5).item() == 2.5 and fnp.ones(2, dtype="int32").tolist() == [1, 1]
    with pytest.raises(TypeError, match=r"only arrays with one element can be converted to Python bool, "
                                        r"got shape \(2,\)"):
        bool(fnp.ones(2))
    with pytest.raises(TypeError, match="only arrays with one element can be converted to Python float"):
        float(fnp.ones((2, 2)))
    with pytest.raises(TypeError, match="only arrays with one element can be converted to Python int"):
        int(fnp.zeros(0))
    with pytest.raises(TypeError, match=r"only integer scalar arrays can be converted to an index, got f32\[\]"):
        operator.index(fnp.asarray(1.0))
    with pytest.raises(TypeError, match=r"only integer scalar arrays can be converted to an index, got i64\[1\]"):
        operator.index(fnp.asarray([1]))
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(fnp.asarray(1.0))


@pytest.mark.parametrize("convert", [bool, float, int, operator.index, np.asarray], ids=lambda f: f.__name__)
def test_conversions_of_traced_values_fail_clearly(convert):
    def f(x):
        convert(x)
        return x
    from flfun.transforms.jit import jit
    with pytest.raises(fl.ConcretizationError, match="needs a concrete value, but this array is traced"):
        jit(f)(fnp.asarray(1))
    with pytest.raises(fl.ConcretizationError, match="needs a concrete value, but this array is traced"):
        fl.vmap(f)(fnp.arange(3))
    with pytest.raises(fl.ConcretizationError):
        fl.jvp(f, (fnp.asarray(1.0),), (fnp.asarray(1.0),))


def test_metadata_and_iteration():
    a = fnp.ones((2, 3), dtype="int16")
    assert (a.shape, a.ndim, a.size, a.itemsize, a.nbytes, len(a)) == ((2, 3), 2, 6, 2, 12, 2)
    assert [r.tolist() for r in a] == [[1, 1, 1], [1, 1, 1]]
    assert a.device is fnp.__array_namespace_info__().default_device()
    assert isinstance(a, Array) and a.__array_namespace__() is fnp


# ---------------------------------------------------------------------------------------------- jaxtyping
jaxtyping = require("jaxtyping")
beartype = require("beartype")
from jaxtyping import Float, Int, TypeCheckError, jaxtyped  # noqa: E402
from beartype import beartype as _beartype  # noqa: E402


@jaxtyped(typechecker=_beartype)
def _scores(x: Float[Array, "batch dim"], w: Float[Array, " dim"]) -> Float[Array, " batch"]:  # noqa: F722
    return fnp.sum(x * w, axis=1)


@jaxtyped(typechecker=_beartype)
def _count(x: Int[Array, " n"]) -> Int[Array, ""]:  # noqa: F722
    return fnp.sum(x)


def test_jaxtyping_annotations_are_checked():
    out = _scores(fnp.ones((4, 3)), fnp.ones(3))
    assert out.shape == (4,) and out.tolist() == [3.0] * 4
    with pytest.raises(TypeCheckError, match="parameter 'w'"):    # dim=3 from x, but w has 5 elements
        _scores(fnp.ones((4, 3)), fnp.ones(5))
    with pytest.raises(TypeCheckError, match="parameter 'x'"):    # rank mismatch
        _scores(fnp.ones(3), fnp.ones(3))
    with pytest.raises(TypeCheckError, match="parameter 'x'"):    # Float annotation, integer array
        _scores(fnp.ones((2, 3), dtype="int32"), fnp.ones(3))
    assert _count(fnp.asarray([1, 2, 3])).item() == 6
    with pytest.raises(TypeCheckError, match="parameter 'x'"):
        _count(fnp.ones(3))


def test_jaxtyping_under_transforms():
    out = fl.vmap(_scores, in_axes=(0, None))(fnp.ones((2, 4, 3)), fnp.ones(3))   # tracers are Arrays too
    assert out.shape == (2, 4)
    g = fl.grad(lambda w: fnp.sum(_scores(fnp.ones((4, 3)), w)))(fnp.ones(3))
    assert g.tolist() == [4.0, 4.0, 4.0]
