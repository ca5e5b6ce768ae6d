"""``flfun.extend``: everything needed to add to flfun from outside, in one documented place.

flfun's own code is written with these same functions:

- primitives: ``Primitive`` (its slots: ``linear_in``, ``identities``, ``value_preserving``, ``chain``,
  ``involution``, ``elementwise``, ...), ``register_impl`` (``writes_out=`` declares an impl that fills ``out=``),
  ``register_lowering`` (a backend's code template, e.g. the CUDA C one), ``get_primitive``, ``primitive_names``,
  ``impl_override``, and the rule helpers of ``flfun.primitives.rules`` (``Zero``, ``is_zero``, ``is_undefined``,
  ``jvp_rule``, ``linear``, ``vectorized_batch``, ``broadcasting_batch``, ...);
- compilation: ``register_backend_compiler`` (a backend's own code generator for jit and pmap),
  ``register_kernel_builder`` (a backend's kernel for a fused elementwise group);
- memory: ``register_strategy`` (a planner's offset strategy, named in ``jit(memory_strategy=...)``),
  ``register_allocator`` and ``use_allocator``;
- backends: ``register_backend_factory``, ``Backend``, ``Device``;
- pytrees: ``register_pytree_node``, ``register_dataclass``.

Example::

    import numpy as np
    from flfun import extend as fx

    cube_p = fx.Primitive("cube")
    cube_p.def_abstract_eval(lambda x: fx.ShapedArray(x.shape, x.dtype))
    cube_p.def_batch(fx.vectorized_batch(cube_p))
    fx.register_impl(cube_p, "numpy", lambda x, out=None: np.power(x, 3, out=out), writes_out=True)
    fx.jvp_rule(cube_p)(lambda out, primals, tangents: 3 * primals[0] ** 2 * tangents[0])
"""
from __future__ import annotations

from flfun.backends import register_backend_factory
from flfun.backends.base import Backend, Device
from flfun.compiler.fusion import register_kernel_builder
from flfun.compiler.pipeline import register_backend_compiler
from flfun.core import register_lowering
from flfun.memory import register_allocator, use_allocator
from flfun.memory.planner import register_strategy
from flfun.primitives import all_primitives, get as get_primitive, impl_override, names as primitive_names
from flfun.primitives.rules import *  # noqa: F401,F403
from flfun.primitives.rules import __all__ as _rules_all
from flfun.tree import register_dataclass, register_pytree_node

__all__ = sorted({*_rules_all, "Backend", "Device", "all_primitives", "get_primitive", "impl_override",
                  "primitive_names", "register_allocator", "register_backend_compiler", "register_backend_factory",
                  "register_dataclass", "register_kernel_builder", "register_lowering", "register_pytree_node",
                  "register_strategy", "use_allocator"})
