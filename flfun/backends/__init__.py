"""Backends supply impls. numpy (CPU) is always present; cupy (GPU) is loaded lazily when installed."""
from __future__ import annotations

import importlib

from flfun.backends.base import Backend, Device
from flfun.config import config

_BACKENDS: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The backend called ``name`` ('numpy' or 'cupy'), installing its impls on first use."""
    if name not in _BACKENDS:
        if name not in ("numpy", "cupy"):
            raise ValueError(f"unknown backend {name!r}; choose 'numpy' or 'cupy'")
        backend = importlib.import_module(f"flfun.backends.{name}_backend").make_backend()
        backend.install()
        _BACKENDS[name] = backend
    return _BACKENDS[name]


def default_device() -> Device:
    return get_backend(config.default_backend).devices[0]
