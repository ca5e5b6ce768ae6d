"""Importing the peer libraries that cross-checks compare with (JAX, PyTorch, array-api-strict, ...).

``require(name)`` returns the module; without it the test is skipped on a developer's machine but FAILS in CI
(where the ``CI`` environment variable is set, and ``.ci/run`` installs every peer), so that a cross-check can
never silently stop running there.
"""
import importlib
import os

import pytest


def require(name: str):
    """The module ``name``; skip the calling test (or module) when it is missing, fail instead under ``CI``.

    Example::

        jax = require("jax")
    """
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI: this cross-check needs {name!r}, which does not import ({e}); .ci/run installs it "
                        f"with pip install -e '.[test]'", pytrace=False)
        pytest.skip(f"{name!r} is not installed (pip install -e '.[test]' brings every peer)",
                    allow_module_level=True)


__all__ = ["require"]
