"""jax.numpy's call signatures (issue 14): every function flfun.numpy shares with jax.numpy takes the same
parameters positionally, so that ``fnp.mean(x, -1)`` or ``fnp.sum(x, 0, None, None, True)`` mean what they mean in
JAX. Compared: the positional parameters, in order and by name (a positional-only parameter, on either side,
matches any name: no caller can pass it by name). Skipped: functions that either side takes ``*args`` for (jax's
ufuncs, flfun's host readers). jax's trailing ``where``, ``initial``, ``promote_integers`` and ``mean`` (masks,
starting values and precomputed means, which no one passes by position) are left out of the comparison; flfun
takes ``initial`` by keyword where it supports it. Every other difference is listed in ``DIFFERENT`` with its
reason, and must still be one."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from peers import require

import flfun.numpy as fnp

jnp = require("jax.numpy")

P = inspect.Parameter
JAX_TRAILING = {"where", "initial", "promote_integers", "mean"}
DIFFERENT = {
    **{n: "order=: flfun arrays have no memory layout to choose" for n in ("asarray", "copy", "ravel", "reshape")},
    "put_along_axis": "functional: returns the updated array and has no inplace= (jax requires inplace=False)",
    "trim_zeros": "axis= (trimming several axes) is not implemented",
    **{n: "out= is not accepted yet (flfun/numpy/_linalg.py)" for n in ("outer", "trace")},
}


def _positional(fn) -> list | None:
    """The positional parameters of ``fn``; None if it takes ``*args`` or has no introspectable signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == P.VAR_POSITIONAL for p in params):
        return None
    return [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]


def _common() -> list[str]:
    names = []
    for n in sorted(set(dir(fnp)) & set(dir(jnp))):
        ours, theirs = getattr(fnp, n), getattr(jnp, n)
        if n.startswith("_") or isinstance(theirs, type) or isinstance(ours, type) or not callable(theirs):
            continue
        if _positional(ours) is not None and _positional(theirs) is not None:
            names.append(n)
    return names


def _difference(ours, theirs) -> str:
    """What keeps ``ours`` from taking ``theirs``' positional parameters ('' if nothing)."""
    mine, ref = _positional(ours), _positional(theirs)
    while ref and ref[-1].name in JAX_TRAILING:
        ref = ref[:-1]
    named = [f"{p.name} for {q.name}" for p, q in zip(mine, ref)
             if p.name != q.name and P.POSITIONAL_ONLY not in (p.kind, q.kind)]
    if len(mine) != len(ref) or named:
        return f"positional ({', '.join(p.name for p in mine)}), jax.numpy ({', '.join(q.name for q in ref)})"
    return ""


COMMON = _common()


def test_many_functions_are_compared():
    assert len(COMMON) > 200 and {"sum", "mean", "std", "cumsum", "median", "take", "sort"} <= set(COMMON)


@pytest.mark.parametrize("name", COMMON)
def test_positional_parameters_match_jax(name):
    problem = _difference(getattr(fnp, name), getattr(jnp, name))
    if name in DIFFERENT:
        assert problem, f"{name} now matches jax.numpy: remove it from DIFFERENT"
        pytest.xfail(DIFFERENT[name])
    assert not problem, f"{name}: {problem}"


def test_the_comparison_can_fail():
    def keyword_axis(x, /, *, axis=None, keepdims=False): ...
    def renamed(a, axis=None, dtype=None, out=None, keep=False): ...
    def positional_only(x, axis=None, dtype=None, out=None, keepdims=False, /): ...
    assert _difference(keyword_axis, jnp.sum) and _difference(renamed, jnp.sum)
    assert not _difference(positional_only, jnp.sum)


def test_issue_14_calls():
    x = np.arange(12.0).reshape(3, 4)
    a = fnp.asarray(x)
    np.testing.assert_allclose(fnp.mean(a, -1), x.mean(-1))
    np.testing.assert_allclose(fnp.sum(a, 0, None, None, True), x.sum(0, keepdims=True))
    np.testing.assert_allclose(fnp.std(a, 1, None, None, 1), x.std(1, ddof=1), rtol=1e-6)
    np.testing.assert_allclose(fnp.var(a, None, "float64", None, 0, True), x.var(keepdims=True))
    np.testing.assert_allclose(fnp.cumsum(a, 1), x.cumsum(1))
    np.testing.assert_allclose(fnp.median(a, 0), np.median(x, 0))
    np.testing.assert_allclose(fnp.quantile(a, 0.25, 1, None, False, "lower"), np.quantile(x, 0.25, 1, method="lower"))
    np.testing.assert_array_equal(fnp.argmax(a, 1, None, True), x.argmax(1, keepdims=True))
    np.testing.assert_array_equal(fnp.take(a, np.asarray([2, 0]), 1), x.take([2, 0], 1))
    np.testing.assert_array_equal(fnp.sort(-a, 0), np.sort(-x, 0))
    np.testing.assert_array_equal(fnp.diff(a, 2, 0), np.diff(x, 2, 0))
    np.testing.assert_array_equal(fnp.isin(a, [1.0, 5.0], False, True), np.isin(x, [1.0, 5.0], False, True))
    np.testing.assert_allclose(a.sum(0), x.sum(0))
    np.testing.assert_allclose(a.std(0, None, None, 1), x.std(0, ddof=1), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="sum: out= is not supported"):
        fnp.sum(a, 0, None, fnp.zeros(4))
