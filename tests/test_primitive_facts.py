"""Primitive facts given as constructor keywords: set like the slots, unknown ones rejected with a clear error."""
import pytest

from flfun.primitives import get, rules


def test_facts_as_keywords_set_the_slots():
    p = rules.Primitive("test_facts_kw", replace=True, linear_in=(0,), inplace=(0,), involution=True)
    assert (p.linear_in, p.inplace, p.involution, p.elementwise) == ((0,), (0,), True, False)


def test_unknown_fact_is_an_error():
    with pytest.raises(TypeError, match=r"Primitive\('test_facts_bad'\): unknown facts \['linear'\]"):
        rules.Primitive("test_facts_bad", linear="all")


@pytest.mark.parametrize("name, facts", [
    ("neg", dict(linear_in="all", involution=True)), ("conj", dict(linear_in="all", involution=True)),
    ("add", dict(elementwise=True, linear_in="all", inplace=(0, 1), identities=((1, 0), (0, 0)))),
    ("div", dict(linear_in=(0,), inplace=(0, 1))), ("reshape", dict(linear_in="all", value_preserving=True)),
    ("reduce_sum", dict(linear_in="all")), ("cumsum", dict(linear_in="all", inplace=(0,))),
    ("cummax", dict(inplace=(0,))), ("scatter", dict(inplace=(0,))), ("gather", dict(linear_in=(0,))),
    ("dynamic_update_slice", dict(linear_in=(0, 1))), ("select_n", dict(linear_in="all", elementwise=True))])
def test_builtin_facts(name, facts):
    p = get(name)
    assert {k: getattr(p, k) for k in facts} == facts
