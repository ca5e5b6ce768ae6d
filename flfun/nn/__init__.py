"""``flfun.nn``: activations and losses (``functional``), and layers as pytrees."""
from flfun.nn.functional import *  # noqa: F401,F403
from flfun.nn import initializers  # noqa: F401,E402
from flfun.nn.module import Module, count_params, static_field  # noqa: F401,E402
from flfun.nn.layers import *  # noqa: F401,F403,E402
from flfun.nn.attention import dot_product_attention  # noqa: F401,E402
from flfun.nn.losses import mse, softmax_cross_entropy  # noqa: F401,E402
