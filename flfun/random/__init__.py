"""``flfun.random``: splittable counter-based random numbers (threefry-2x32, as in JAX).

A key is a ``uint32[2]`` array. Every function is built from flfun primitives (uint32 add, xor, shifts), so keys
work under ``jit``, ``vmap``, ``grad`` and ``pmap`` and give the same numbers on every backend. The bit layout
follows JAX's partitionable threefry scheme, so ``uniform`` and ``permutation`` reproduce ``jax.random``.
"""
from flfun.random.keys import *  # noqa: F401,F403
from flfun.random.basic import *  # noqa: F401,F403
from flfun.random.continuous import *  # noqa: F401,F403
from flfun.random.discrete import *  # noqa: F401,F403
