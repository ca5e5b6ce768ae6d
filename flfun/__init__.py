"""flfun: a small, modular, JAX-style functional array library for ML systems research.

Pure functions on immutable arrays (``flfun.numpy``), transformed by ``grad``, ``vmap``, ``jit``, ``pmap`` ...
Every operation is a primitive whose impl can be swapped with ``register_impl``; every transform follows.
"""
from flfun import dtypes, primitives, tree
from flfun.backends import numpy_backend, cupy_backend  # noqa: F401,I001  (they register their factories, in this order)
from flfun.array import Array
from flfun.config import config
from flfun.core import (ConcretizationError, Primitive, ShapedArray, UnexpectedTracerError, get_aval,
                        register_impl)
from flfun.primitives import impl_override
from flfun.primitives.elementwise import stop_gradient
from flfun.transforms.custom import custom_jvp, custom_vjp
from flfun.transforms.jacobians import hessian, jacfwd, jacrev
from flfun.transforms.jit import jit, make_ir
from flfun.transforms.jvp import jvp, linearize
from flfun.transforms.vjp import grad, value_and_grad, vjp
from flfun.transforms.vmap import vmap
from flfun.tree import (register_dataclass, register_pytree_node, tree_flatten, tree_leaves, tree_map,
                        tree_structure, tree_unflatten)
from flfun import lax, numpy  # noqa: E402
from flfun.numpy import from_dlpack  # noqa: E402
from flfun.host import block_until_ready, device_get  # noqa: E402
from flfun.transforms.shapes import ShapeDtypeStruct, eval_shape  # noqa: E402
make_jaxpr = make_ir   # JAX's name; prints as a jaxpr-like program
from flfun.profiler import profile  # noqa: E402
from flfun.distributed.devices import (device_count, device_put, devices, local_device_count,  # noqa: E402
                                       local_devices, process_count, process_index, set_cpu_device_count)
from flfun.distributed.sharded import ShardedArray, device_put_replicated, device_put_sharded  # noqa: E402
from flfun.distributed.pmap import pmap  # noqa: E402
from flfun import distributed, extend, nn, optim, random, serialization, tree_util  # noqa: E402
from flfun.transforms import remat as ad_checkpoint  # noqa: E402  (jax.ad_checkpoint: checkpoint_name, ...)
from flfun.transforms.remat import checkpoint, checkpoint_name, checkpoint_policies, remat  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "Array", "ShapedArray", "Primitive", "register_impl", "impl_override", "primitives", "dtypes", "tree", "config",
    "grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev", "hessian", "vmap", "stop_gradient",
    "get_aval", "register_pytree_node", "register_dataclass", "tree_map", "tree_flatten", "tree_unflatten",
    "tree_leaves", "tree_structure", "ConcretizationError", "UnexpectedTracerError", "numpy", "lax", "from_dlpack",
    "profile", "jit", "make_ir", "pmap", "distributed", "devices", "local_devices", "device_count",
    "local_device_count", "process_index", "process_count", "set_cpu_device_count", "device_put",
    "device_put_sharded", "device_put_replicated", "ShardedArray", "random", "nn", "optim", "checkpoint", "remat",
    "checkpoint_name", "checkpoint_policies", "ad_checkpoint", "serialization", "custom_jvp", "custom_vjp", "extend",
    "tree_util", "device_get", "block_until_ready", "ShapeDtypeStruct", "eval_shape", "make_jaxpr",
]
