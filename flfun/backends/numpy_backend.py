"""The numpy backend: CPU devices (``FLFUN_CPU_DEVICES`` of them) and impls instantiated with ``xp = numpy``."""
from __future__ import annotations

import numpy as np

from flfun.backends import register_backend_factory
from flfun.backends.base import Backend, Device
from flfun.backends.xp import install_impls
from flfun.config import config


def make_backend() -> Backend:
    devices = [Device("cpu", i, "numpy", np) for i in range(max(1, config.cpu_devices))]
    return Backend("numpy", np, devices, lambda: install_impls(np, "numpy"))


register_backend_factory("numpy", make_backend)
