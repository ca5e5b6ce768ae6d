"""Host stand-ins for the GPU pieces the cupy backend drives, so that their contracts are tested on a CPU:
a graph API whose "graphs" re-run the captured step, a column-major cuBLAS that reads and writes host memory at the
pointers it is given, and cupy's ElementwiseKernel / ReductionKernel compiled with the host C++ compiler."""
from __future__ import annotations

import contextlib
import ctypes

import numpy as np

from flfun.backends.cuda.graphs import CaptureError


class FakeGraphAPI:
    """Numpy stand-in for the device: a 'graph' re-runs the captured function and writes the captured output
    buffers, as replaying kernels would; capture itself leaves the inputs untouched, as on a GPU."""

    def __init__(self, fail: bool = False):
        self.fail, self.launched, self.copies = fail, 0, 0

    key = staticmethod(lambda a: (a.__array_interface__["data"][0], a.strides))
    pin = staticmethod(lambda a: a)
    capture_conditions = staticmethod(contextlib.nullcontext)

    def capture(self, fn, args=()):
        if self.fail:
            raise CaptureError("fake: this step cannot be captured")
        saved = [a.copy() for a in args]
        outs = [o if isinstance(o, np.ndarray) else np.asarray(o) for o in fn()]   # cupy has no scalars
        for a, s in zip(args, saved):
            a[...] = s                     # capture records, it does not run
        return (fn, outs), outs, []

    def launch(self, graph):
        fn, bufs = graph
        self.launched += 1
        for b, n in zip(bufs, fn()):
            if b is not n:
                b[...] = n

    def copy(self, a):
        self.copies += 1
        return a.copy()

    empty_like = staticmethod(np.empty_like)

    def copy_into(self, dst, src):
        dst[...] = src


class HostArray(np.ndarray):
    """A numpy array that answers cupy's ``.data.ptr`` and ``.device.id`` (for the fake cuBLAS below)."""

    @property
    def data(self):
        return type("Ptr", (), {"ptr": self.__array_interface__["data"][0]})()

    @property
    def device(self):
        return type("Dev", (), {"id": 0})()


def colmajor(ptr, rows, cols, ld, dtype):
    """The column-major ``rows x cols`` matrix with leading dimension ``ld`` at address ``ptr``."""
    if rows == 0 or cols == 0:
        return np.zeros((rows, cols), dtype)
    n = (rows - 1) + (cols - 1) * ld + 1
    ct = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    buf = np.ctypeslib.as_array((ct * n).from_address(ptr))
    return np.lib.stride_tricks.as_strided(buf, (rows, cols), (buf.itemsize, buf.itemsize * ld))


class FakeCublas:
    """cuBLAS's column-major GEMM semantics on host memory: reads and writes exactly what the real one would."""

    def __init__(self, dtype):
        self.dtype, self.calls = dtype, []

    def _gemm(self, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, sa=0, sb=0, sc=0, batch=1):
        self.calls.append((ta, tb, m, n, k, lda, ldb, ldc, batch))
        for i in range(batch):
            a = colmajor(A + i * sa * np.dtype(self.dtype).itemsize, *((m, k) if ta == 0 else (k, m)), lda,
                          self.dtype)
            b = colmajor(B + i * sb * np.dtype(self.dtype).itemsize, *((k, n) if tb == 0 else (n, k)), ldb,
                          self.dtype)
            c = colmajor(C + i * sc * np.dtype(self.dtype).itemsize, m, n, ldc, self.dtype)
            assert lda >= max(1, m if ta == 0 else k) and ldb >= max(1, k if tb == 0 else n) and ldc >= max(1, m)
            c[...] = (a if ta == 0 else a.T) @ (b if tb == 0 else b.T)
        return 0

    def cublasSgemm_v2(self, h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
        return self._gemm(ta, tb, m, n, k, A, lda, B, ldb, C, ldc)

    cublasDgemm_v2 = cublasSgemm_v2

    def cublasSgemmStridedBatched(self, h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc,
                                  batch):
        return self._gemm(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, sa, sb, sc, batch)

    cublasDgemmStridedBatched = cublasSgemmStridedBatched


def parse_params(params: str):
    from flfun.backends.cuda.lowering import C_TYPES
    out = []
    for p in filter(None, (q.strip() for q in params.split(","))):
        dt, name = p.split()
        out.append((name, np.dtype(dt), C_TYPES[dt]))
    return out


class HostElementwiseKernel:
    """cupy.ElementwiseKernel's contract (broadcast inputs, outputs given or allocated) compiled for the host."""

    def __init__(self, in_params, out_params, operation, name, **kw):
        from test_fusion import _PRELUDE, _compile
        assert name.isidentifier()
        self.ins, self.outs = parse_params(in_params), parse_params(out_params)
        loads = "".join(f"    const {c} {n} = ((const {c}*)in[{k}])[i];\n" for k, (n, _, c) in enumerate(self.ins))
        refs = "".join(f"    {c}& {n} = (({c}*)out[{j}])[i];\n" for j, (n, _, c) in enumerate(self.outs))
        self.run = _compile(_PRELUDE + f'extern "C" void run(void** in, void** out, long n, long r) {{\n'
                            f"  for (long i = 0; i < n; ++i) {{\n{loads}{refs}    {{\n{operation}\n    }}\n  }}\n}}\n")

    def __call__(self, *args):
        ins, outs = args[:len(self.ins)], list(args[len(self.ins):])
        assert len(outs) == len(self.outs), "outputs must be passed"
        shape = np.broadcast_shapes(*[np.shape(a) for a in ins + tuple(outs)])
        assert all(o.shape == shape for o in outs)
        bins = [np.ascontiguousarray(np.broadcast_to(a, shape), dt) for a, (_, dt, _) in zip(ins, self.ins)]
        tmp = [np.empty(shape, dt) for _, dt, _ in self.outs]
        ptrs = lambda arrs: (ctypes.c_void_p * max(len(arrs), 1))(*[a.ctypes.data for a in arrs])  # noqa: E731
        self.run(ptrs(bins), ptrs(tmp), ctypes.c_long(int(np.prod(shape))), ctypes.c_long(1))
        for o, t in zip(outs, tmp):
            o[...] = t
        return outs


class HostReductionKernel:
    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name,
                 reduce_type=None, preamble="", **kw):
        from test_fusion import _PRELUDE, _compile
        assert name.isidentifier()
        self.ins, (self.out,) = parse_params(in_params), parse_params(out_params)
        loads = "".join(f"      const {c} {n} = ((const {c}*)in[{k}])[i];\n" for k, (n, _, c) in enumerate(self.ins))
        oc = self.out[2]
        self.run = _compile(
            _PRELUDE + preamble + f'extern "C" void run(void** in, void** out, long n, long r) {{\n'
            f"  for (long o = 0; o < n; ++o) {{\n    {reduce_type} a = {identity};\n"
            f"    for (long i = o * r; i < (o + 1) * r; ++i) {{\n{loads}      const {reduce_type} b = {map_expr};\n"
            f"      a = {reduce_expr};\n    }}\n    {oc}& {self.out[0]} = (({oc}*)out[0])[o];\n"
            f"    {post_map_expr};\n  }}\n}}\n")

    def __call__(self, *ins, axis, out):
        shape = np.broadcast_shapes(*[np.shape(a) for a in ins])
        keep = [d for d in range(len(shape)) if d not in axis]
        bins = [np.ascontiguousarray(np.transpose(np.broadcast_to(a, shape), keep + list(axis)), dt)
                for a, (_, dt, _) in zip(ins, self.ins)]
        tmp = np.empty(out.shape, out.dtype)
        ptrs = lambda arrs: (ctypes.c_void_p * max(len(arrs), 1))(*[a.ctypes.data for a in arrs])  # noqa: E731
        self.run(ptrs(bins), ptrs([tmp]), ctypes.c_long(tmp.size), ctypes.c_long(int(np.prod([shape[d] for d in axis]))))
        out[...] = tmp
        return out


def host_array(a):
    return np.asarray(a).view(HostArray)
