"""``flfun.scipy``: ``special``, ``stats`` and ``linalg`` as in ``jax.scipy``."""
from flfun.scipy import special  # noqa: F401
from flfun.scipy import linalg, stats  # noqa: F401,E402
