"""``flfun.nn``: activations and losses (``functional``), and layers as pytrees."""
from flfun.nn.functional import *  # noqa: F401,F403
