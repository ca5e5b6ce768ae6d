"""Pytrees: nested tuples, lists, dicts, None, namedtuples and registered classes, flattened to leaves.

Every transform flattens its inputs and outputs with these functions, so any registered container works
everywhere. ``register_dataclass`` turns a frozen dataclass into a pytree node (fields marked static go into
the tree structure, not the leaves), which is how ``flfun.nn`` modules are built.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable, NamedTuple

_REGISTRY: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """Register ``cls`` as a pytree node.

    ``flatten(x) -> (children, aux)`` with hashable ``aux``; ``unflatten(aux, children) -> x``.

    Example::

        register_pytree_node(Point, lambda p: ((p.x, p.y), None), lambda _, c: Point(*c))
    """
    _REGISTRY[cls] = (flatten, unflatten)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
register_pytree_node(list, lambda l: (l, None), lambda _, c: list(c))
register_pytree_node(dict, lambda d: (tuple(d[k] for k in sorted(d)), tuple(sorted(d))),
                     lambda keys, c: dict(zip(keys, c)))
register_pytree_node(type(None), lambda n: ((), None), lambda _, c: None)


def register_dataclass(cls=None, *, static: tuple[str, ...] = ()):
    """Class decorator: a dataclass whose fields are children, except those named in ``static`` or marked
    ``dataclasses.field(metadata={"static": True})``, which are hashable parts of the tree structure.

    Example::

        @register_dataclass
        @dataclasses.dataclass(frozen=True)
        class Linear:
            w: Array
            b: Array
    """
    def wrap(cls):
        fields = dataclasses.fields(cls)
        static_names = tuple(f.name for f in fields if f.metadata.get("static") or f.name in static)
        dynamic = tuple(f.name for f in fields if f.name not in static_names)

        def flatten(x):
            return tuple(getattr(x, n) for n in dynamic), tuple(getattr(x, n) for n in static_names)

        def unflatten(aux, children):
            obj = object.__new__(cls)
            for n, v in zip(dynamic + static_names, (*children, *aux)):
                object.__setattr__(obj, n, v)
            return obj

        register_pytree_node(cls, flatten, unflatten)
        cls.__tree_children__ = dynamic     # the children's names, for checkpoint paths
        return cls
    return wrap if cls is None else wrap(cls)


class PyTreeDef(NamedTuple):
    """Hashable structure of a pytree: node type, auxiliary data, children structures (``None`` = a leaf)."""
    node_type: type | None
    aux: Hashable
    children: tuple

    @property
    def num_leaves(self) -> int:
        return 1 if self.node_type is None else sum(c.num_leaves for c in self.children)

    def __repr__(self) -> str:
        if self.node_type is None:
            return "*"
        kids = list(map(repr, self.children))
        if self.node_type is dict:
            kids = [f"{k!r}: {kid}" for k, kid in zip(self.aux, kids)]
        return f"{self.node_type.__name__}({', '.join(kids)})"


LEAF = PyTreeDef(None, None, ())


def _node(x):
    t = type(x)
    if t in _REGISTRY:
        return t, _REGISTRY[t]
    if isinstance(x, tuple) and hasattr(t, "_fields"):     # namedtuple
        return t, (lambda n: (tuple(n), None), lambda _, c, t=t: t(*c))
    return None, None


def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
    t, fns = (None, None) if is_leaf is not None and is_leaf(x) else _node(x)
    if t is None:
        leaves.append(x)
        return LEAF
    children, aux = fns[0](x)
    return PyTreeDef(t, aux, tuple(_flatten(c, leaves, is_leaf) for c in children))


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    """Leaves in order and the structure: ``tree_flatten({'a': 1, 'b': (2, 3)}) -> ([1, 2, 3], treedef)``."""
    leaves: list = []   # module-level recursion (no closure): a closure cycle would keep leaves alive until gc
    return leaves, _flatten(tree, leaves, is_leaf)


def _unflatten(td: PyTreeDef, it):
    if td.node_type is None:
        return next(it)
    children = [_unflatten(c, it) for c in td.children]
    if td.node_type in _REGISTRY:
        return _REGISTRY[td.node_type][1](td.aux, children)
    return td.node_type(*children)        # namedtuple


def tree_unflatten(treedef: PyTreeDef, leaves) -> Any:
    """Inverse of ``tree_flatten``."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, it) is not it:
        raise ValueError(f"tree_unflatten: too many leaves for structure {treedef}")
    return out


def tree_leaves(tree: Any, is_leaf=None) -> list:
    """``tree_leaves([1, (2, None)]) == [1, 2]``."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf=None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf=None) -> Any:
    """Apply ``f`` leafwise: ``tree_map(lambda a, b: a + b, (1, [2]), (10, [20])) == (11, [22])``."""
    leaves, td = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(f"tree_map: structures differ: {td} and {rtd}")
        others.append(rl)
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others)])


def broadcast_prefix(prefix: Any, tree: Any, what: str) -> list:
    """Expand a prefix tree (e.g. ``in_axes``) to one entry per leaf of ``tree``."""
    out: list = []

    def rec(p, t):
        pt, pfns = _node(p)
        if p is None or pt is None:
            out.extend([p] * tree_structure(t).num_leaves)
            return
        pc, tc = pfns[0](p)[0], (pfns[0](t)[0] if type(t) is pt else None)     # t: a node of p's type?
        if tc is None or len(pc) != len(tc):
            raise ValueError(f"{what}: structure {tree_structure(p)} is not a prefix of {tree_structure(t)}")
        for a, b in zip(pc, tc):
            rec(a, b)

    rec(prefix, tree)
    return out


# ------------------------------------------------------------------------------------------------- key paths
def _key_type(name: str, field: str, fmt: str) -> type:
    """One step of a key path: a one-field NamedTuple printed as ``fmt`` (``keystr`` joins the steps)."""
    cls = NamedTuple(name, [(field, Any)])
    cls.__str__ = lambda k: fmt.format(k[0])
    return cls


SequenceKey = _key_type("SequenceKey", "idx", "[{}]")
DictKey = _key_type("DictKey", "key", "[{!r}]")
GetAttrKey = _key_type("GetAttrKey", "name", ".{}")
FlattenedIndexKey = _key_type("FlattenedIndexKey", "key", "[<flat index {}>]")


def _keys(td: PyTreeDef) -> list:
    t, n = td.node_type, len(td.children)
    if t is dict:
        return [DictKey(k) for k in td.aux]
    if t in (list, tuple):
        return [SequenceKey(i) for i in range(n)]
    names = getattr(t, "_fields", None) or getattr(t, "__tree_children__", None) or (
        [f.name for f in dataclasses.fields(t)] if dataclasses.is_dataclass(t) else None)
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
    paths = iter([p for p, _ in tree_leaves_with_path(tree, is_leaf)])
    return tree_map(lambda *xs: f(next(paths), *xs), tree, *rest, is_leaf=is_leaf)


def keystr(keys: tuple) -> str:
    """A key path as text: ``"['a'][1]"``."""
    return "".join(str(k) for k in keys)
