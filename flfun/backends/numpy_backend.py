"""The numpy backend: CPU devices (``FLFUN_CPU_DEVICES`` of them) and impls instantiated with ``xp = numpy``."""
from __future__ import annotations

import numpy as np

from flfun.backends import register_backend_factory
from flfun.backends.base import Backend, Device
from flfun.backends.xp import install_impls
from flfun.config import config


def make_backend() -> Backend:
    devices = [Device("cpu", i, "numpy", np) for i in range(max(1, config.cpu_devices))]
    return Backend("numpy", np, devices, _install)


def _install() -> None:
    install_impls(np, "numpy")
    from flfun.backends import cfuse       # jit's fused C kernels (used where a C compiler is found)
    cfuse.install()


register_backend_factory("numpy", make_backend)
