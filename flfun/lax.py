"""``flfun.lax``: the primitives' public wrappers in one namespace (strict dtypes, explicit broadcasting), the
control flow, and jax.lax's further math (``lax_math``) and shape/convolution helpers (``lax_shape``)."""
from flfun.primitives.base import (broadcast_in_dim, convert_element_type, full, iota, moveaxis,  # noqa: F401
                                   reduce_sum, reshape, transpose)
from flfun.primitives.elementwise import *  # noqa: F401,F403
from flfun.primitives.reduce import *  # noqa: F401,F403
from flfun.primitives.shape import *  # noqa: F401,F403
from flfun.primitives.slicing import *  # noqa: F401,F403
from flfun.primitives.indexing import *  # noqa: F401,F403
from flfun.primitives.linalg import *  # noqa: F401,F403
from flfun.primitives.collective import *  # noqa: F401,F403
from flfun.primitives.decomp import *  # noqa: F401,F403
from flfun.primitives.fft import *  # noqa: F401,F403
from flfun.lax_control import *  # noqa: F401,F403  (cond, switch, while_loop, fori_loop, scan, map)
from flfun.lax_math import *  # noqa: F401,F403
from flfun.lax_shape import *  # noqa: F401,F403  (its conv_dimension_numbers takes jax.lax's shapes)
from flfun.lax_gather import *  # noqa: F401,F403  (gather/scatter with dimension numbers; axes= as before)
from flfun.lax_solve import *  # noqa: F401,F403  (custom_root, custom_linear_solve, betainc)
