"""``flfun.tree_util``: JAX's ``jax.tree_util`` names over flfun's pytrees (``flfun.tree``), plus what JAX has
beyond them: ``register_pytree_node_class``, ``Partial``, ``tree_reduce``/``tree_all``, ``tree_transpose`` and
key paths (``tree_flatten_with_path``, ``tree_map_with_path``, ``keystr``)."""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

from flfun.tree import (PyTreeDef, register_dataclass, register_pytree_node, tree_flatten, tree_leaves,
                        tree_map, tree_structure, tree_unflatten)

__all__ = ["PyTreeDef", "register_dataclass", "register_pytree_node", "register_pytree_node_class", "tree_flatten",
           "tree_leaves", "tree_map", "tree_structure", "tree_unflatten", "tree_reduce", "tree_all",
           "tree_transpose", "treedef_is_leaf", "Partial", "SequenceKey", "DictKey", "GetAttrKey",
           "FlattenedIndexKey", "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "keystr"]


def register_pytree_node_class(cls):
    """Class decorator: ``cls`` is a pytree through its ``tree_flatten(self) -> (children, aux)`` method and
    ``tree_unflatten(cls, aux, children)`` classmethod, as in JAX."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def tree_reduce(function: Callable, tree: Any, initializer: Any = ..., is_leaf=None) -> Any:
    """``functools.reduce`` over the leaves: ``tree_reduce(operator.add, (1, [2, 3])) == 6``."""
    leaves = tree_leaves(tree, is_leaf)
    return functools.reduce(function, leaves) if initializer is ... else functools.reduce(function, leaves,
                                                                                          initializer)


def tree_all(tree: Any, *, is_leaf=None) -> bool:
    """Whether every leaf is truthy: ``tree_all((True, [1]))``."""
    return all(tree_leaves(tree, is_leaf))


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether the structure is a single leaf."""
    return treedef.node_type is None


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef, pytree_to_transpose: Any) -> Any:
    """Turn an outer-of-inner pytree into an inner-of-outer one: ``[(a, b), (c, d)] -> ([a, c], [b, d])``."""
    flat = tree_leaves(pytree_to_transpose)
    n_in, n_out = inner_treedef.num_leaves, outer_treedef.num_leaves
    if len(flat) != n_in * n_out:
        raise TypeError(f"tree_transpose: {len(flat)} leaves do not make outer {outer_treedef} of inner "
                        f"{inner_treedef}")
    columns = [tree_unflatten(outer_treedef, flat[i::n_in]) for i in range(n_in)]
    return tree_unflatten(inner_treedef, columns)


class Partial(functools.partial):
    """``functools.partial`` whose bound arguments are pytree children, so it can cross ``jit``/``vmap``
    boundaries as an argument (the function itself is static), as JAX's ``Partial``."""


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, c: Partial(func, *c[0], **c[1]))


class SequenceKey(NamedTuple):
    idx: int

    def __str__(self):
        return f"[{self.idx}]"


class DictKey(NamedTuple):
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


class GetAttrKey(NamedTuple):
    name: str

    def __str__(self):
        return f".{self.name}"


class FlattenedIndexKey(NamedTuple):
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def _keys(td: PyTreeDef) -> list:
    t, n = td.node_type, len(td.children)
    if t is dict:
        return [DictKey(k) for k in td.aux]
    if t in (list, tuple):
        return [SequenceKey(i) for i in range(n)]
    names = getattr(t, "_fields", None) or getattr(t, "__tree_children__", None)
    return [GetAttrKey(k) for k in names] if names and len(names) == n else [FlattenedIndexKey(i) for i in range(n)]


def _paths(td: PyTreeDef, prefix: tuple) -> list:
    if td.node_type is None:
        return [prefix]
    return [p for k, c in zip(_keys(td), td.children) for p in _paths(c, prefix + (k,))]


def tree_flatten_with_path(tree: Any, is_leaf=None):
    """``([(key path, leaf), ...], treedef)``: each leaf with the keys that lead to it.

    Example::

        >>> keystr(tree_flatten_with_path({"a": [1, 2]})[0][1][0])
        "['a'][1]"
    """
    leaves, td = tree_flatten(tree, is_leaf)
    return list(zip(_paths(td, ()), leaves)), td


def tree_leaves_with_path(tree: Any, is_leaf=None) -> list:
    """``[(key path, leaf), ...]``."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf=None) -> Any:
    """``tree_map`` whose ``f(path, leaf, *others)`` also gets each leaf's key path."""
    pairs, td = tree_flatten_with_path(tree, is_leaf)
    others = [tree_flatten(r, is_leaf) for r in rest]
    for _, otd in others:
        if otd != td:
            raise ValueError(f"tree_map_with_path: structures differ: {td} and {otd}")
    return tree_unflatten(td, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *[o[0] for o in others])])


def keystr(keys: tuple) -> str:
    """A key path as text: ``"['a'][1]"``."""
    return "".join(str(k) for k in keys)

