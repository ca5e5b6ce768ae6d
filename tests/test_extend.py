"""``flfun.extend``, the public extension API: it names the same objects flfun's own code uses, and its
docstring example defines a primitive that works under grad, jit and vmap."""
from __future__ import annotations

import numpy as np
import pytest

import flfun as fl
import flfun.numpy as fnp
from flfun import core, extend, primitives
from flfun.primitives import rules


@pytest.fixture(autouse=True)
def _forget_test_primitives():
    before = set(core.PRIMITIVES)
    yield
    for name in set(core.PRIMITIVES) - before:
        del core.PRIMITIVES[name]


def test_every_exported_name_exists_and_rules_are_the_libraries_own():
    assert extend.__all__ == sorted(set(extend.__all__))
    for name in extend.__all__:
        assert hasattr(extend, name), name
    for name in rules.__all__:
        assert getattr(extend, name) is getattr(rules, name), name
    assert extend.get_primitive("add") is primitives.get("add")
    assert extend.register_impl is core.register_impl and fl.extend is extend


def test_docstring_example_defines_a_working_primitive():
    scope: dict = {}
    example = extend.__doc__.split("Example::\n", 1)[1]
    exec(compile("\n".join(line[4:] for line in example.splitlines()), "<extend example>", "exec"), scope)
    cube_p = scope["cube_p"]
    cube = lambda x: cube_p.bind(x)                                              # noqa: E731
    x = fnp.asarray([1.0, -2.0, 3.0])
    np.testing.assert_allclose(cube(x), [1.0, -8.0, 27.0])
    np.testing.assert_allclose(fl.grad(lambda v: fnp.sum(cube(v)))(x), 3 * np.asarray([1.0, 4.0, 9.0]))
    np.testing.assert_allclose(fl.jit(fl.vmap(cube))(x), [1.0, -8.0, 27.0])
    assert "numpy" in cube_p.writes_out


def test_an_existing_name_is_an_error_unless_replaced():
    with pytest.raises(ValueError, match="sort"):
        extend.Primitive("sort")
