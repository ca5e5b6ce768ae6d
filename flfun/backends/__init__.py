"""The backend registry. A backend module registers a factory (``register_backend_factory``); the backend is made
and its impls installed on first use. numpy (CPU) is always present; cupy (GPU) imports cupy only when asked for.
"""
from __future__ import annotations

from typing import Callable

from flfun.backends.base import Backend, Device
from flfun.config import config

_FACTORIES: dict[str, Callable[[], Backend]] = {}
_BACKENDS: dict[str, Backend] = {}


def register_backend_factory(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``get_backend(name)`` build its backend with ``factory()`` on first use (flfun's backend modules
    register themselves this way when ``flfun`` is imported).

    Example::

        register_backend_factory("numpy", flfun.backends.numpy_backend.make_backend)
    """
    if not isinstance(name, str) or not name or not callable(factory):
        raise ValueError(f"register_backend_factory: need a name and a callable, got {name!r}, {factory!r:.60}")
    _FACTORIES[name] = factory


def get_backend(name: str) -> Backend:
    """The backend called ``name`` ('numpy' or 'cupy'), installing its impls on first use."""
    if name not in _BACKENDS:
        if name not in _FACTORIES:
            raise ValueError(f"unknown backend {name!r}; choose {' or '.join(map(repr, _FACTORIES))}")
        backend = _FACTORIES[name]()
        backend.install()
        _BACKENDS[name] = backend
    return _BACKENDS[name]


def default_device() -> Device:
    return get_backend(config.default_backend).devices[0]
