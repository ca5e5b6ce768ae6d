"""cuBLAS through ctypes, with flfun's own handle, stream and workspace per GPU.

Why not cupy's matmul: cupy refuses cuBLAS calls while a stream is being captured into a CUDA graph, and its TF32
switch is process-wide. A handle of our own, its workspace set before capture, captures fine, and its math mode
follows ``flfun.config.tf32`` per call (true fp32 by default). ``dot_general`` and ``reduce_sum`` (as a GEMM
against a ones vector) are the impls built on it; anything cuBLAS cannot take falls back to the xp impls.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import itertools
import os
import sys
from math import prod

import numpy as np

from flfun.config import config

OP_N, OP_T = 0, 1
DEFAULT_MATH, TF32_MATH = 0, 3
WORKSPACE_BYTES = 32 << 20


class CublasError(RuntimeError):
    """A cuBLAS call failed (the message names the call and its status code)."""


def find_library() -> str | None:
    """The path of libcublas: one already mapped into this process (cupy or torch loaded it), the nvidia-cublas
    wheel, ``cuda.pathfinder``, or the system's."""
    with contextlib.suppress(Exception):            # no cupy or no GPU: look elsewhere
        import cupy
        cupy.cuda.device.get_cublas_handle()         # makes cupy load its libcublas
    with contextlib.suppress(OSError), open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libcublas.so"):
                return path
    for base in sys.path:
        hits = sorted(glob.glob(os.path.join(base, "nvidia", "**", "libcublas.so*"), recursive=True))
        if hits:
            return hits[0]
    with contextlib.suppress(Exception):
        from cuda import pathfinder
        return pathfinder.load_nvidia_dynamic_lib("cublas").abs_path
    import ctypes.util
    return ctypes.util.find_library("cublas")


@functools.cache
def _lib():
    path = find_library()
    if path is None:
        raise CublasError("cuBLAS: libcublas was not found (install nvidia-cublas or the CUDA toolkit)")
    lib = ctypes.CDLL(path)
    vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    for name in ("cublasSgemm_v2", "cublasDgemm_v2"):
        getattr(lib, name).argtypes = [vp, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i]
    for name in ("cublasSgemmStridedBatched", "cublasDgemmStridedBatched"):
        getattr(lib, name).argtypes = [vp, i, i, i, i, i, vp, vp, i, ll, vp, i, ll, vp, vp, i, ll, i]
    lib.cublasSetStream_v2.argtypes = [vp, vp]
    lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
    lib.cublasSetMathMode.argtypes = [vp, i]
    return lib


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CublasError(f"cuBLAS: {what} failed with status {status}")


class Handle:
    """One cuBLAS handle on one GPU, with its workspace; ``prepare`` points it at the current stream."""

    def __init__(self, cupy, device_id: int):
        self.cp, self.lib = cupy, _lib()
        with cupy.cuda.Device(device_id):
            self.ptr = ctypes.c_void_p()
            _check(self.lib.cublasCreate_v2(ctypes.byref(self.ptr)), "cublasCreate")
            self.workspace = cupy.empty(WORKSPACE_BYTES, dtype=cupy.uint8)
        self.stream = self.math = None
        self.one = {np.dtype(np.float32): ctypes.c_float(1.0), np.dtype(np.float64): ctypes.c_double(1.0)}
        self.zero = {np.dtype(np.float32): ctypes.c_float(0.0), np.dtype(np.float64): ctypes.c_double(0.0)}

    def prepare(self, tf32: bool) -> None:
        s = self.cp.cuda.get_current_stream().ptr
        if s != self.stream:
            _check(self.lib.cublasSetStream_v2(self.ptr, s), "cublasSetStream")
            # setting the stream resets the workspace to cuBLAS's own pool, which graph capture cannot use
            _check(self.lib.cublasSetWorkspace_v2(self.ptr, self.workspace.data.ptr, WORKSPACE_BYTES),
                   "cublasSetWorkspace")
            self.stream = s
        mode = TF32_MATH if tf32 else DEFAULT_MATH
        if mode != self.math:
            _check(self.lib.cublasSetMathMode(self.ptr, mode), "cublasSetMathMode")
            self.math = mode


@functools.cache
def handle(cupy, device_id: int) -> Handle:
    """The handle of GPU ``device_id`` (one per GPU, made on first use)."""
    return Handle(cupy, device_id)


def available(cupy) -> bool:
    """Whether flfun's cuBLAS path works here (the library loads and a handle can be made)."""
    try:
        handle(cupy, cupy.cuda.runtime.getDevice())
        return True
    except Exception:  # noqa: BLE001
        return False


# ------------------------------------------------------------------------------------------------------ GEMM
def layout(shape, strides, itemsize):
    """``(order, ld)`` of a matrix with these byte strides: ``'row'`` (unit column stride) or ``'col'`` (unit row
    stride), or ``None`` when BLAS cannot read it without a copy. Strides of size-1 dims are free."""
    r, c = shape
    if any(s % itemsize for s, n in zip(strides, shape) if n > 1):
        return None
    s0, s1 = (s // itemsize for s in strides)
    if c == 1:
        s1 = 1
    if r == 1:
        s0 = max(c, 1) if s1 == 1 else 1
    if s1 == 1 and s0 >= max(c, 1):
        return "row", s0
    if s0 == 1 and s1 >= max(r, 1):
        return "col", s1
    return None


def _batch_stride(x, nbatch: int):
    """The single element stride of ``x``'s leading ``nbatch`` dims seen as one, or ``None``."""
    dims = [(n, s) for n, s in zip(x.shape[:nbatch], x.strides[:nbatch]) if n != 1]
    if not dims:
        return 0
    if any(s1 != s2 * n2 for (_, s1), (n2, s2) in itertools.pairwise(dims)):
        return None
    s = dims[-1][1]
    return None if s % x.itemsize else s // x.itemsize


def gemm(cp, a, b, c, tf32: bool) -> None:
    """``c[...] = a @ b`` for row-major ``c`` of shape ``(*B, M, N)`` (C-contiguous), ``a`` ``(*B, M, K)`` and ``b``
    ``(*B, K, N)`` (any strides; copied when BLAS cannot read them). float32 / float64 only."""
    *bshape, M, K = a.shape
    dt, N, nb, batch = c.dtype, b.shape[-1], len(bshape), prod(bshape)
    if M == 0 or N == 0 or batch == 0:
        return
    if K == 0:
        c.fill(0)
        return
    la, lb = layout(a.shape[-2:], a.strides[-2:], a.itemsize), layout(b.shape[-2:], b.strides[-2:], b.itemsize)
    sa, sb = _batch_stride(a, nb), _batch_stride(b, nb)
    if la is None or sa is None:
        a = cp.ascontiguousarray(a)
        la, sa = ("row", K), M * K
    if lb is None or sb is None:
        b = cp.ascontiguousarray(b)
        lb, sb = ("row", N), K * N
    # column-major view: C^T (N x M) = B^T (N x K) @ A^T (K x M)
    (op_a, ld_a), (op_b, ld_b) = ((OP_N if order == "row" else OP_T, ld) for order, ld in (la, lb))
    h = handle(cp, c.device.id)
    h.prepare(tf32 and dt == np.float32)
    one, zero = ctypes.byref(h.one[dt]), ctypes.byref(h.zero[dt])
    if batch == 1:
        fn = h.lib.cublasSgemm_v2 if dt == np.float32 else h.lib.cublasDgemm_v2
        _check(fn(h.ptr, op_b, op_a, N, M, K, one, b.data.ptr, ld_b, a.data.ptr, ld_a, zero, c.data.ptr, N),
               "gemm")
        return
    fn = h.lib.cublasSgemmStridedBatched if dt == np.float32 else h.lib.cublasDgemmStridedBatched
    _check(fn(h.ptr, op_b, op_a, N, M, K, one, b.data.ptr, ld_b, sb, a.data.ptr, ld_a, sa, zero, c.data.ptr, N,
              M * N, batch), "strided batched gemm")


# ----------------------------------------------------------------------------------------------------- impls
def impls(cp, fallback: dict) -> dict:
    """cupy impls of ``dot_general`` and ``reduce_sum`` on cuBLAS, falling back to ``fallback[name]``."""
    from flfun.backends.xp import finish
    from flfun.backends.xp.linalg import dot_operands
    xp_dot, xp_sum = fallback["dot_general"], fallback["reduce_sum"]
    floats = (np.dtype(np.float32), np.dtype(np.float64))

    def dot_general(lhs, rhs, *, dimension_numbers, preferred_element_type=None, out=None):
        if preferred_element_type is not None and lhs.dtype != preferred_element_type:
            lhs, rhs = lhs.astype(preferred_element_type), rhs.astype(preferred_element_type)
        if lhs.dtype not in floats or lhs.dtype != rhs.dtype or not isinstance(lhs, cp.ndarray) \
                or not isinstance(rhs, cp.ndarray):
            return xp_dot(lhs, rhs, dimension_numbers=dimension_numbers, out=out)
        a, b, shape = dot_operands(cp, lhs, rhs, dimension_numbers)
        res = out if out is not None and out.flags.c_contiguous else cp.empty(shape, lhs.dtype)
        gemm(cp, a, b, res.reshape(a.shape[:-1] + b.shape[-1:]), config.tf32)
        return finish(res, out)

    def reduce_sum(x, *, axes, out=None):
        """Sums over leading or trailing axes of a C-contiguous float array as ``ones @ x`` or ``x @ ones``
        (always true fp32): one GEMV-shaped GEMM instead of a reduction kernel."""
        nd = x.ndim
        axes_t = tuple(sorted(axes))
        lead, trail = axes_t == tuple(range(len(axes_t))), axes_t == tuple(range(nd - len(axes_t), nd))
        if x.dtype not in floats or not axes_t or len(axes_t) == nd or not (lead or trail) \
                or not isinstance(x, cp.ndarray) or not x.flags.c_contiguous or x.size == 0:
            return xp_sum(x, axes=axes, out=out)
        r = prod(x.shape[d] for d in axes_t)
        rest = x.size // r
        res = out if out is not None and out.flags.c_contiguous else cp.empty(
            tuple(n for d, n in enumerate(x.shape) if d not in axes_t), x.dtype)
        ones = _ones(cp, r, x.dtype, x.device.id)
        if lead:    # (1, r) @ (r, rest)
            gemm(cp, ones.reshape(1, r), x.reshape(r, rest), res.reshape(1, rest), False)
        else:       # (rest, r) @ (r, 1)
            gemm(cp, x.reshape(rest, r), ones.reshape(r, 1), res.reshape(rest, 1), False)
        return finish(res, out)

    return {"dot_general": dot_general, "reduce_sum": reduce_sum}


_ONES: dict = {}


def _ones(cp, n: int, dtype, device_id: int):
    key = (n, np.dtype(dtype), device_id)
    if key not in _ONES:
        with cp.cuda.Device(device_id):
            _ONES[key] = cp.ones(n, dtype)
    return _ONES[key]


__all__ = ["CublasError", "Handle", "available", "find_library", "gemm", "handle", "impls", "layout"]
