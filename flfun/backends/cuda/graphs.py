"""CUDA-graph replay of a planned step, with a clean fallback.

A planned program fixes every intermediate address (one arena), so the whole step can be captured once and
replayed with one launch. ``GraphRunner`` wraps ``run(*args) -> outputs``:

* the first call with a given set of input buffers runs ``run`` normally; the second captures it (after one more
  normal run, which compiles every kernel and gives this call's result) and later calls replay the graph;
* the graph reads the inputs where they were at capture ("pinned": their memory is kept alive, not the arrays),
  so a step called again on the same buffers (fixed data, donated parameters updated in place) copies nothing;
  outputs in donated inputs are returned as those inputs, every other output is copied out of the graph's buffers;
* after ``MAX_KEYS`` different input sets it switches to one "staged" graph that reads its own input buffers,
  which each call fills by copying;
* if capture fails (a host synchronisation, an op that cannot be captured), it runs normally from then on and
  ``status`` says why.

The device operations go through an ``api`` object (``CupyGraphAPI`` on a GPU; tests pass a fake).
"""
from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

MAX_GRAPHS = 4
MAX_KEYS = 4


class CaptureError(RuntimeError):
    """Stream capture failed; the step keeps running without a graph."""


class _Captured:
    __slots__ = ("graph", "keep", "outs", "staging")

    def __init__(self, graph, outs, keep, staging=None):
        self.graph, self.outs, self.keep, self.staging = graph, outs, keep, staging


class GraphRunner:
    """Capture ``run`` as a CUDA graph per set of input buffers and replay it (see the module docstring)."""

    def __init__(self, run: Callable, donated: tuple, api: Any, extra_key: Callable[[], Any] = lambda: None):
        self.run, self.donated, self.api, self.extra_key = run, frozenset(donated), api, extra_key
        self.graphs: OrderedDict = OrderedDict()
        self.seen: OrderedDict = OrderedDict()
        self.staged: dict = {}
        self.failed: str | None = None
        self.captures = self.launches = 0

    @property
    def status(self) -> str:
        if self.failed:
            return f"fallback: {self.failed}"
        return f"{self.captures} captured, {self.launches} replays" + (" (staged)" if self.staged else "")

    def __call__(self, args: list) -> list:
        if self.failed is not None:
            return self.run(*args)
        extra = self.extra_key()
        key = (tuple(self.api.key(a) for a in args), extra)
        hit = self.graphs.get(key)
        if hit is not None:
            self.graphs.move_to_end(key)
            return self._replay(hit, args)
        st = self.staged.get(extra)
        if st is not None:
            for buf, a in zip(st.staging, args):
                self.api.copy_into(buf, a)
            return self._replay(st, args)
        if key not in self.seen:
            self.seen[key] = True
            if len(self.seen) > 4 * MAX_KEYS:
                self.seen.popitem(last=False)
            if len(self.seen) <= MAX_KEYS or self.graphs:
                return self.run(*args)
            return self._capture_staged(args, extra)     # input buffers keep changing: copy into our own
        with self.api.capture_conditions():
            outs = self.run(*args)                        # compiles every kernel the capture will record
        cap = self._capture(args, pinned=True)
        if cap is not None:
            self.graphs[key] = cap
            if len(self.graphs) > MAX_GRAPHS:
                self.graphs.popitem(last=False)
        return outs

    def _capture(self, args: list, pinned: bool) -> _Captured | None:
        """The graph of ``run(*args)``, or ``None`` when capture fails (``failed`` says why; no more tries)."""
        try:
            graph, outs, keep = self.api.capture(lambda: self.run(*args), args)
        except CaptureError as e:
            self.failed = str(e)
            return None
        self.captures += 1
        slots = []
        for o in outs:
            k = next((k for k, a in enumerate(args) if o is a), None)
            slots.append((k, None) if pinned and k is not None and k in self.donated else (None, o))
        keep = list(keep) + [self.api.pin(a) for a in args]
        return _Captured(graph, slots, keep, None if pinned else args)

    def _capture_staged(self, args: list, extra) -> list:
        staging = [self.api.empty_like(a) for a in args]
        for buf, a in zip(staging, args):
            self.api.copy_into(buf, a)
        with self.api.capture_conditions():
            outs = [self.api.copy(o) for o in self.run(*staging)]    # outputs may be views of the staging
        cap = self._capture(staging, pinned=False)
        if cap is not None:
            self.staged[extra] = cap
        return outs

    def _replay(self, cap: _Captured, args: list) -> list:
        self.api.launch(cap.graph)
        self.launches += 1
        return [args[k] if k is not None else self.api.copy(o) for k, o in cap.outs]


class CupyGraphAPI:
    """The device side of ``GraphRunner`` on cupy: capture on a side stream, with every allocation made during
    capture kept alive for the graph's lifetime and cupy's cub/cuTENSOR accelerators off (their temporaries
    and host-side calls break capture); replay on the current stream."""

    def __init__(self, cupy, device_id: int):
        self.cp, self.device_id = cupy, device_id
        with cupy.cuda.Device(device_id):
            self.stream = cupy.cuda.Stream(non_blocking=True)

    @staticmethod
    def key(a):
        return a.data.ptr, a.strides

    @staticmethod
    def pin(a):
        return a.data        # keeps the memory alive without holding the array (donation counts references)

    @contextlib.contextmanager
    def capture_conditions(self):
        from cupy._core import _accelerator as acc
        red, rout = acc.get_reduction_accelerators(), acc.get_routine_accelerators()
        acc.set_reduction_accelerators([])
        acc.set_routine_accelerators([])
        try:
            yield
        finally:
            acc.set_reduction_accelerators(red)
            acc.set_routine_accelerators(rout)

    def capture(self, fn: Callable, args=()):
        cp, s = self.cp, self.stream
        keep: list = []
        base = cp.cuda.get_allocator()

        def malloc(nbytes):
            mem = base(nbytes)
            keep.append(mem)
            return mem
        with self.capture_conditions(), cp.cuda.using_allocator(malloc), s:
            with contextlib.suppress(Exception):   # point flfun's cuBLAS handle at s before, not during, capture
                from flfun.backends.cuda import cublas
                from flfun.config import config
                cublas.handle(cp, self.device_id).prepare(config.tf32)
            s.begin_capture()
            try:
                outs = fn()
            except BaseException as e:
                with contextlib.suppress(Exception):
                    s.end_capture()
                raise CaptureError(f"{type(e).__name__}: {e}") from e
            try:
                graph = s.end_capture()
            except Exception as e:
                raise CaptureError(f"{type(e).__name__}: {e}") from e
        return graph, outs, keep

    def launch(self, graph) -> None:
        graph.launch(stream=self.cp.cuda.get_current_stream())

    @staticmethod
    def copy(a):
        return a.copy()

    def empty_like(self, a):
        return self.cp.empty(a.shape, a.dtype)

    def copy_into(self, dst, src) -> None:
        if not isinstance(src, self.cp.ndarray):
            dst.set(src)
        elif dst.flags.c_contiguous and src.flags.c_contiguous:
            dst.data.copy_from_device_async(src.data, src.nbytes)
        else:
            self.cp.copyto(dst, src)


__all__ = ["MAX_GRAPHS", "MAX_KEYS", "CaptureError", "CupyGraphAPI", "GraphRunner"]
