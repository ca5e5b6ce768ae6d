"""Pytrees: flatten/unflatten round trips for every node kind, registered classes, and prefix matching."""
from __future__ import annotations

import collections
import dataclasses

import pytest
from hypothesis import given, strategies as st

import flfun as fl
from flfun.tree import broadcast_prefix, register_dataclass, register_pytree_node, tree_flatten, tree_unflatten

Point = collections.namedtuple("Point", "x y")


@register_dataclass
@dataclasses.dataclass(frozen=True)
class Layer:
    w: object
    b: object
    name: str = dataclasses.field(default="l", metadata={"static": True})


class Box:
    def __init__(self, v):
        self.v = v


register_pytree_node(Box, lambda b: ((b.v,), None), lambda _, c: Box(c[0]))

leaves = st.integers() | st.floats(allow_nan=False) | st.none()
trees = st.recursive(leaves, lambda c: st.lists(c, max_size=3) | st.tuples(c, c)
                     | st.dictionaries(st.text(max_size=2), c, max_size=3)
                     | st.builds(Point, c, c), max_leaves=10)


@given(trees)
def test_round_trip(tree):
    flat, td = tree_flatten(tree)
    assert tree_unflatten(td, flat) == tree
    assert td.num_leaves == len(flat)


def test_node_kinds():
    tree = {"a": (1, [2, None]), "b": Point(3, 4), "c": Layer(5, 6, "x"), "d": Box(7)}
    flat, td = tree_flatten(tree)
    assert flat == [1, 2, 3, 4, 5, 6, 7]
    back = tree_unflatten(td, [v * 10 for v in flat])
    assert back["c"] == Layer(50, 60, "x") and back["d"].v == 70 and back["b"] == Point(30, 40)
    assert fl.tree_map(lambda a, b: a + b, (1, [2]), (10, [20])) == (11, [22])
    assert fl.tree_structure(Layer(1, 2, "a")) != fl.tree_structure(Layer(1, 2, "b"))  # static field in treedef


def test_errors():
    with pytest.raises(ValueError, match="structures differ"):
        fl.tree_map(lambda a, b: a, (1, 2), [1, 2])
    with pytest.raises(ValueError, match="too many leaves"):
        tree_unflatten(tree_flatten((1,))[1], [1, 2])
    with pytest.raises(ValueError, match="not a prefix"):
        broadcast_prefix((0, 0), (1, 2, 3), "in_axes")
    assert broadcast_prefix((0, None), ((1, 2), 3), "in_axes") == [0, 0, None]
