"""Hypothesis profiles: 'ci' (quick, the default, no deadlines: shared machines are noisy), 'thorough'
(run before resolving an issue: HYPOTHESIS_PROFILE=thorough pytest) and 'gpu' (few examples: every new shape or
dtype compiles kernels on a GPU).

Backends: ``pytest --backend cupy`` (or ``FLFUN_BACKEND=cupy``) runs the suite with the cupy backend as the default
device; without cupy or a GPU those runs, and tests marked ``gpu``, are skipped with the reason.
"""
import os

import pytest

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=12, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("gpu", max_examples=3, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption("--backend", default=None, choices=("numpy", "cupy"),
                     help="flfun backend of the default device for this run (same as FLFUN_BACKEND)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs cupy and a CUDA GPU (skipped elsewhere)")
    backend = config.getoption("--backend")
    if backend:
        os.environ["FLFUN_BACKEND"] = backend
        from flfun.config import config as flfun_config
        flfun_config.default_backend = backend


def pytest_collection_modifyitems(config, items):
    import pytest
    on_cupy = os.environ.get("FLFUN_BACKEND") == "cupy"
    if not on_cupy and not any(item.get_closest_marker("gpu") for item in items):
        return
    from flfun.backends import cupy_backend
    try:
        cupy_backend._import_cupy()
        return
    except cupy_backend.BackendUnavailableError as e:
        reason = str(e)
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if on_cupy or item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def jax_x64():
    """JAX with float64 enabled for one test module (``pytestmark = pytest.mark.usefixtures("jax_x64")``), and
    the setting restored after it, so modules that compare with JAX in float32 see JAX's defaults."""
    from peers import require
    jax = require("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", before)
