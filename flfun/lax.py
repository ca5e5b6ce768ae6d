"""``flfun.lax``: the primitives' public wrappers in one namespace (strict dtypes, explicit broadcasting)."""
from flfun.primitives.base import *  # noqa: F401,F403
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
