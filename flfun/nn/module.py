"""``Module``: the base class of flfun's layers, an immutable dataclass that is also a pytree (Equinox-style).

Subclasses declare their arrays (and sub-modules) as dataclass fields and their configuration with
``static_field()``; they become frozen dataclasses registered with ``flfun.tree.register_dataclass``, so a model
passes through ``grad``, ``vmap``, ``jit``, optimisers and checkpoints as a tree of its arrays. A custom
``__init__`` may assign ``self.name = value``; after construction the module is frozen.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

from flfun.core import short
from flfun.tree import register_dataclass, tree_leaves

_BUILDING = "_flfun_building"


def static_field(**kwargs) -> Any:
    """A dataclass field that is part of the tree structure (hashable configuration), not a leaf.

    Example::

        class Conv2d(Module):
            weight: Array
            stride: tuple = static_field()
    """
    return dataclasses.field(metadata={**(kwargs.pop("metadata", None) or {}), "static": True}, **kwargs)


def _wrap_init(init):
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if _BUILDING in self.__dict__:      # a subclass's __init__ calling this one
            return init(self, *args, **kwargs)
        object.__setattr__(self, _BUILDING, True)
        try:
            init(self, *args, **kwargs)
        finally:
            object.__delattr__(self, _BUILDING)
        missing = [f.name for f in dataclasses.fields(self) if f.name not in self.__dict__]
        if missing:
            raise ValueError(f"{type(self).__name__}.__init__ did not set field(s) {', '.join(missing)}")
    return __init__


class Module:
    """Base class for layers: an immutable pytree whose fields are arrays, sub-modules or static config.

    Example::

        class Affine(Module):
            scale: Array
            shift: Array

            def __call__(self, x):
                return x * self.scale + self.shift

        m = Affine(fnp.ones(3), fnp.zeros(3))
        grads = flfun.grad(lambda m, x: fnp.sum(m(x)))(m, x)   # an Affine of gradients
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls._flfun_custom_init = True
        dataclasses.dataclass(cls, init=not getattr(cls, "_flfun_custom_init", False), repr=False, eq=False)
        if "__init__" in cls.__dict__:
            cls.__init__ = _wrap_init(cls.__dict__["__init__"])
        register_dataclass(cls)

    def __setattr__(self, name: str, value) -> None:
        if _BUILDING not in self.__dict__:
            raise dataclasses.FrozenInstanceError(
                f"{type(self).__name__} is immutable: cannot set '{name}'; use module.replace({name}=...)")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"{type(self).__name__} is immutable: cannot delete '{name}'")

    def replace(self, **changes) -> Module:
        """A copy with some fields replaced (no ``__init__`` is run).

        Example::

            >>> lin2 = lin.replace(bias=fnp.zeros_like(lin.bias))
        """
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"{type(self).__name__}.replace: no field(s) named {', '.join(unknown)}")
        obj = object.__new__(type(self))
        for n in names:
            object.__setattr__(obj, n, changes.get(n, self.__dict__.get(n)))
        return obj

    def __repr__(self) -> str:
        parts = [f"{f.name}={_short_repr(self.__dict__.get(f.name))}" for f in dataclasses.fields(self)]
        return f"{type(self).__name__}({', '.join(parts)})"


def _short_repr(v) -> str:
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return short(v)
    if isinstance(v, (list, tuple)) and any(isinstance(e, Module) for e in v):
        inner = ", ".join(_short_repr(e) for e in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if callable(v) and hasattr(v, "__name__"):
        return v.__name__
    return repr(v)


def count_params(tree) -> int:
    """The number of scalars in all array leaves of ``tree``.

    Example::

        >>> count_params(Linear(3, 4, key=key))
        16
    """
    return sum(int(getattr(leaf, "size", 1)) for leaf in tree_leaves(tree))


__all__ = ["Module", "count_params", "static_field"]
