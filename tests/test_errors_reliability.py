"""Issue 18's unclear or missing errors: each message names the function, the argument and what was expected."""
from __future__ import annotations

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp


@pytest.mark.parametrize("ret,got", [(lambda x: fnp.sum(x), "Array"), (lambda x: (fnp.sum(x), 1, 2), "tuple of length 3"),
                                     (lambda x: [fnp.sum(x), 1], "list of length 2")])
@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp"])
def test_has_aux_needs_a_pair(transform, ret, got):
    x = fnp.ones(2)
    name = "vjp" if transform == "vjp" else "grad"
    with pytest.raises(TypeError, match=rf"{name}: with has_aux=True the function must return a tuple \(output, "
                                        rf"aux\), got (a )?{got}"):
        if transform == "vjp":
            fl.vjp(ret, x, has_aux=True)
        else:
            getattr(fl, transform)(ret, has_aux=True)(x)


def test_pmap_over_an_empty_axis():
    with pytest.raises(ValueError, match="pmap: the mapped axis .* has size 0"):
        fl.pmap(lambda x: x)(fnp.ones((0, 3)))


@pytest.mark.parametrize("make,shape", [(fnp.zeros, (10**10, 10**10)), (fnp.ones, 10**13),
                                        (lambda s: fnp.full(s, 2.0), (10**7, 10**7))])
def test_arrays_larger_than_memory(make, shape):
    with pytest.raises(MemoryError, match=r"(zeros|ones|full): an array of shape \(1000.*\) and dtype float32 needs "
                                          r".* GiB, more than this machine's"):
        make(shape)
    assert make((0, 10**12)).shape == (0, 10**12)      # empty is fine however long the other side


@pytest.mark.parametrize("obj,kind", [({"a": 1}, "dict"), (b"ab", "bytes"), (memoryview(b"ab"), "memoryview"),
                                      ([1.0, {"a": 1}], "dict"), ("abc", "str")])
def test_asarray_of_non_numbers(obj, kind):
    with pytest.raises(TypeError, match=rf"^asarray: cannot convert {type(obj).__name__} to an array: .* \(a "
                                        rf"{kind}\) is not a number, bool or array, nor a list/tuple of them"):
        fnp.asarray(obj)


@pytest.mark.parametrize("obj,dtype,bad", [(2**70, None, 2**70), ([1, 2**70], None, 2**70), (-1, "uint8", -1),
                                           (2**64, "uint64", 2**64)])
def test_asarray_of_out_of_range_ints(obj, dtype, bad):
    with pytest.raises(OverflowError, match=rf"asarray: .*{bad}.* is out of range for {dtype or 'int64'}"):
        fnp.asarray(obj, dtype=dtype)


def test_inv_of_a_singular_matrix_names_inv():
    with pytest.raises(np.linalg.LinAlgError, match=r"inv: singular matrix, it has no inverse \(input f32\[2,2\]\)"):
        fnp.linalg.inv(fnp.zeros((2, 2)))


def _f(x, y=1.0):
    return x * y


@pytest.mark.parametrize("kwargs,match", [
    (dict(static_argnums=5), r"jit: static_argnums=\(5,\) for _f, which takes 2 positional argument"),
    (dict(static_argnums=-3), r"jit: static_argnums=\(-3,\) for _f"),
    (dict(donate_argnums=2), r"jit: donate_argnums=\(2,\) for _f, which takes 2 positional argument"),
    (dict(static_argnames="z"), r"jit: static_argnames \['z'\] are not parameters of _f \(x, y\)"),
    (dict(static_argnums=1, donate_argnums=-1), r"jit: argument\(s\) \[1\] of _f are both static and donated"),
    (dict(static_argnames="x", donate_argnums=0), r"jit: argument\(s\) \[0\] of _f are both static and donated"),
])
def test_jit_argument_numbers_and_names_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fl.jit(_f, **kwargs)


def test_jit_accepts_what_a_signature_allows():
    assert float(fl.jit(lambda *a: a[0] * 2, static_argnums=3)(fnp.asarray(1.0))) == 2.0   # *args: unknown
    assert float(fl.jit(lambda x, **kw: x * kw["k"], static_argnames="k")(fnp.asarray(1.0), k=3.0)) == 3.0
    assert float(fl.jit(_f, static_argnums=-1)(fnp.asarray(2.0), 4.0)) == 8.0
    assert float(fl.jit(_f, donate_argnums=0)(fnp.asarray(2.0))) == 2.0


def test_jacrev_of_an_integer_output():
    with pytest.raises(TypeError, match=r"jacrev requires real- or complex-valued outputs .* but got int32"):
        fl.jacrev(lambda x: (x > 0).astype("int32"))(fnp.ones(2))
    with pytest.raises(TypeError, match=r"jacrev requires .* but got bool"):
        fl.jacrev(lambda x: (fnp.sin(x), x > 0))(fnp.ones(2))


@pytest.mark.parametrize("name,make", [
    ("broadcast_to", lambda: fnp.broadcast_to(fnp.ones(1), (2**32, 2**32))),
    ("broadcast_to", lambda: fl.jit(lambda x: fnp.broadcast_to(x, (2**32, 2**32)))(fnp.ones(1))),
    ("tile", lambda: fnp.tile(fnp.ones(2), (2**32, 2**32))),
    ("broadcast_in_dim", lambda: fl.lax.broadcast_in_dim(fnp.ones(()), (2**32, 2**32), ())),
    ("iota", lambda: fl.lax.iota("int32", (2**32, 2**32), 0)),
    ("arange", lambda: fnp.arange(2**64)), ("linspace", lambda: fnp.linspace(0.0, 1.0, 2**63)),
    ("eye", lambda: fnp.eye(2**33))])
def test_shapes_whose_size_overflows(name, make):
    with pytest.raises(ValueError, match=rf"^{name}: shape \(\d+,.*\) has .* elements, more than the 2\*\*63 - 1 an "
                                         r"array can hold"):
        make()
    with pytest.raises(MemoryError, match=r"zeros: an array of shape \(4294967296, 4294967296\)"):
        fnp.zeros((2**32, 2**32))
