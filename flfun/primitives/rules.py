"""The public API for writing primitives: the ``Primitive`` class and its slots, ``register_impl``, and the rule
builders flfun's own families are written with (every family imports from here).

A primitive is one ``Primitive`` object; its shape rule, transform rules and facts are set in its own block::

    from flfun.primitives import rules

    cube_p = rules.Primitive("cube")
    cube_p.def_abstract_eval(lambda x: rules.ShapedArray(x.shape, x.dtype))
    cube_p.def_batch(rules.vectorized_batch(cube_p))
    rules.register_impl(cube_p, "numpy", lambda x, out=None: np.power(x, 3, out=out), writes_out=True)

    @rules.jvp_rule(cube_p)
    def _cube_jvp(out, primals, tangents):
        return 3 * primals[0] ** 2 * tangents[0]

Autodiff: ``Zero`` / ``is_zero`` (symbolic zero tangents and cotangents), ``is_undefined`` (the linear input of
a transpose rule), ``instantiate``, ``jvp_rule`` / ``guarded_jvp`` / ``zero_jvp`` / ``linear``, ``unbroadcast``.
Batching: ``vectorized_batch``, ``broadcasting_batch``, ``front_batch``, ``batch_axes``, ``moveaxis``,
``not_mapped``. Shape rules: ``naryop_abstract_eval``, ``broadcast_shapes``, ``check_kinds``, ``check_same``,
``reduction``. The planner strategies (``flfun.memory.planner.register_strategy``) and allocators
(``flfun.memory.register_allocator``) sit above the primitives; ``flfun.extend`` gathers all of these.
"""
from __future__ import annotations

from flfun.core import Primitive, ShapedArray, bind, register_impl
from flfun.primitives.base import (broadcast_to_shape, broadcasting_batch, front_batch, instantiate, linear, linear_jvp,
                                   moveaxis, moveaxis_to_front, reduction, unbroadcast)
from flfun.primitives.common import (UndefinedPrimal, Zero, batch_axes, broadcast_shapes, check_kinds, check_same,
                                     guarded_jvp, is_undefined, is_zero, jvp_rule, naryop_abstract_eval, not_mapped,
                                     tangent_aval, vectorized_batch, zero_jvp)

__all__ = ["Primitive", "ShapedArray", "UndefinedPrimal", "Zero", "batch_axes", "bind", "broadcast_shapes",
           "broadcast_to_shape", "broadcasting_batch", "check_kinds", "check_same", "front_batch", "guarded_jvp",
           "instantiate", "is_undefined", "is_zero", "jvp_rule", "linear", "linear_jvp", "moveaxis",
           "moveaxis_to_front", "naryop_abstract_eval", "not_mapped", "reduction", "register_impl", "tangent_aval",
           "unbroadcast", "vectorized_batch", "zero_jvp"]
