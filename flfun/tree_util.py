"""``flfun.tree_util``: JAX's ``jax.tree_util`` names over flfun's pytrees (``flfun.tree``), plus what JAX has
beyond them: ``register_pytree_node_class``, ``Partial``, ``tree_reduce``/``tree_all``, ``tree_transpose`` and
key paths (``tree_flatten_with_path``, ``tree_map_with_path``, ``keystr``)."""
from __future__ import annotations

import functools
from typing import Any, Callable

from flfun.tree import (DictKey, FlattenedIndexKey, GetAttrKey, PyTreeDef, SequenceKey, keystr, register_dataclass,
                        register_pytree_node, tree_flatten, tree_flatten_with_path, tree_leaves, tree_leaves_with_path,
                        tree_map, tree_map_with_path, tree_structure, tree_unflatten)

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
