"""The cupy backend: NVIDIA GPUs through CuPy, imported only when this backend is asked for.

``make_backend()`` imports cupy and lists the GPUs, raising ``BackendUnavailableError`` with the reason when there
is no cupy or no GPU (importing flfun never needs cupy). Its ``install()`` fills the primitives' ``'cupy'`` impl
slots: the xp impls instantiated with ``xp = cupy``, overridden where cupy needs it (GEMMs and leading/trailing
sums on flfun's own cuBLAS handle, so they follow ``config.tf32`` and can be captured in CUDA graphs; a
two-way select kernel that writes ``out=``). ``flfun.jit`` on a cupy device compiles with
``flfun/backends/cuda/executor.py``: elementwise fusion, one device arena per program, CUDA-graph replay.

Precision: float32 GEMMs run in true fp32 unless ``flfun.config.tf32`` (or ``FLFUN_TF32=1``) is set; TF32 keeps
10 mantissa bits of the inputs (results agree with fp32 to about 1e-3 relative), fp32 to about 1e-6.
"""
from __future__ import annotations

from flfun.backends import register_backend_factory
from flfun.backends.base import Backend, Device
from flfun.backends.xp import WritesOut, install_impls


class BackendUnavailableError(RuntimeError):
    """The cupy backend cannot run here (no cupy, no CUDA driver or no GPU); the message says which."""


def _import_cupy():
    try:
        import cupy
    except ImportError as e:
        raise BackendUnavailableError(
            "cupy backend: cupy is not installed (pip install cupy-cuda12x or cupy-cuda13x, matching the CUDA "
            f"driver); flfun works without it on the numpy backend ({e})") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - cupy raises several error types when there is no driver
        raise BackendUnavailableError(f"cupy backend: no usable CUDA GPU ({type(e).__name__}: {e})") from None
    if count < 1:
        raise BackendUnavailableError("cupy backend: cupy found no CUDA GPU")
    return cupy, count


def is_available() -> bool:
    """Whether the cupy backend can run here (cupy imports and sees at least one GPU).

    Example::

        >>> from flfun.backends import cupy_backend
        >>> cupy_backend.is_available()
        False
    """
    try:
        _import_cupy()
        return True
    except BackendUnavailableError:
        return False


class GpuDevice(Device):
    """A GPU: transfers to it happen on its own CUDA device (``to_host`` and ``synchronize`` are ``Device``'s)."""

    def put(self, value):
        with self.xp.cuda.Device(self.id):
            return self.xp.asarray(value)


def make_backend() -> Backend:
    """The cupy backend (raises ``BackendUnavailableError`` when it cannot run here)."""
    cupy, count = _import_cupy()
    devices = [GpuDevice("gpu", i, "cupy", cupy) for i in range(count)]
    return Backend("cupy", cupy, devices, lambda: install(cupy))


def overrides(cp) -> dict:
    """The cupy impls that replace the shared xp ones."""
    from flfun.backends.cuda import cublas
    from flfun.backends.xp import elementwise, linalg, reduce
    xp_impls = {**linalg.impls(cp), **reduce.impls(cp)}
    out = {name: WritesOut(fn) for name, fn in cublas.impls(cp, xp_impls).items()} if cublas.available(cp) else {}
    where = cp.ElementwiseKernel("bool which, T on_false, T on_true", "T out", "out = which ? on_true : on_false",
                                 "flfun_select")
    xp_select = elementwise.impls(cp)["select_n"]

    def select_n(which, *cases, out=None):
        if len(cases) != 2 or which.dtype != bool:
            return xp_select(which, *cases, out=out)
        if out is None:
            return where(which, cases[0], cases[1])
        where(which, cases[0], cases[1], out)
        return out
    out["select_n"] = WritesOut(select_n)
    return out


def install(cp) -> None:
    """Fill the ``'cupy'`` impl slots (impls someone registered already stay), the fused-kernel builder and the
    jit compiler for cupy devices."""
    from flfun.backends.cuda import executor, kernels
    from flfun.compiler.fusion import register_kernel_builder
    from flfun.compiler.pipeline import register_backend_compiler
    install_impls(cp, "cupy", overrides(cp))
    register_kernel_builder("cupy", kernels.build)
    register_backend_compiler("cupy", executor.compile_program)


register_backend_factory("cupy", make_backend)

__all__ = ["BackendUnavailableError", "GpuDevice", "install", "is_available", "make_backend", "overrides"]
