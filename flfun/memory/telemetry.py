"""Allocation telemetry: record what a program asks of memory, replay it through any allocator, compare policies.

``record()`` logs every buffer an eager primitive creates and the moment it dies, by wrapping each primitive's
impl for the duration of the block (``core.py`` is untouched; the profiler shares the same hook). ``replay`` runs a
trace through an allocator offline; ``compare`` tabulates and plots several; ``to_memory_viz`` writes a snapshot
for PyTorch's memory visualizer (https://pytorch.org/memory_viz).
"""
from __future__ import annotations

import contextlib
import gc
import gzip
import json
import pickle
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from flfun.memory.allocator import Allocator
from flfun.memory.caching import CachingAllocator
from flfun.memory.report import figure as _figure, format_bytes as _fmt

# ------------------------------------------------------------------------------------------ impl instrumentation
_listeners: list = []
_saved: dict = {}   # (prim, backend) -> (original impl, our wrapper)
_lock = threading.RLock()   # listeners are called from every device thread (and frees from finalizers)


def _wrap(prim, impl: Callable) -> Callable:
    name, multiple, clock = prim.name, prim.multiple_results, time.perf_counter_ns

    def instrumented(*args, **params):
        t0 = clock()
        out = impl(*args, **params)
        t1 = clock()
        fresh = () if "out" in params else _fresh_buffers(args, out if multiple else (out,))
        with _lock:
            for listener in _listeners:
                listener.on_call(name, t0, t1, fresh, out)
        return out

    instrumented.__wrapped__ = impl
    return instrumented


@contextlib.contextmanager
def listen(listener) -> Iterator[None]:
    """Call ``listener.on_call(prim_name, t0_ns, t1_ns, fresh_buffers, out)`` after every impl call in the block.

    The first listener wraps every registered impl with ``register_impl`` (which bumps the registry version, so
    jitted functions pick the wrappers up); when the last one leaves, the originals come back.
    """
    from flfun import core
    if not _listeners:
        core.default_device()   # make sure the default backend's impls are installed before wrapping them
        for prim in list(core.PRIMITIVES.values()):
            for backend, impl in list(prim.impls.items()):
                _saved[(prim, backend)] = (impl, wrapper := _wrap(prim, impl))
                # (a wrapped impl that writes out= keeps doing so: jit's plans stay what they are unrecorded)
                core.register_impl(prim, backend, wrapper, writes_out=backend in prim.writes_out)
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)
        if not _listeners:
            for (prim, backend), (impl, wrapper) in _saved.items():
                if prim.impls.get(backend) is wrapper:   # leave impls someone replaced meanwhile alone
                    core.register_impl(prim, backend, impl)
            _saved.clear()


def _root(a):
    while isinstance(getattr(a, "base", None), np.ndarray) or type(getattr(a, "base", None)).__name__ == "ndarray":
        a = a.base
    return a


def _fresh_buffers(args, outs) -> list:
    """The outputs' underlying buffers that are new: not views of an input and not repeated."""
    seen = {id(_root(a)) for a in args}
    return list({id(r): r for r in (_root(o) for o in outs if hasattr(o, "nbytes")) if id(r) not in seen}.values())


# ------------------------------------------------------------------------------------------------------ traces
class Event(NamedTuple):
    """One allocation event: ``kind`` 'alloc' or 'free', the buffer ``id``, sizes, address, time and the op."""
    kind: str
    id: int
    requested: int
    allocated: int
    ptr: int
    t_ns: int
    op: str


@dataclass
class Trace:
    """An ordered log of allocations and frees; build one by recording, by hand, or by loading a file.

    Example::

        t = Trace()
        a = t.alloc(10 << 20, op="big"); t.free(a)
        t.alloc(5 << 20); t.alloc(6 << 20)
        t.save("classic.json.gz")
    """
    events: list[Event] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self._next_id = max((e.id for e in self.events), default=-1) + 1
        freed = {e.id for e in self.events if e.kind == "free"}
        self._live = {e.id: e for e in self.events if e.kind == "alloc" and e.id not in freed}
        self._t0 = time.perf_counter_ns()

    def alloc(self, nbytes: int, op: str = "user", allocated: int | None = None, ptr: int = 0,
              t_ns: int | None = None) -> int:
        """Append an allocation of ``nbytes``; returns its id (for ``free``)."""
        i, self._next_id = self._next_id, self._next_id + 1
        t = time.perf_counter_ns() - self._t0 if t_ns is None else t_ns
        self.events.append(Event("alloc", i, int(nbytes), int(nbytes if allocated is None else allocated), ptr, t, op))
        self._live[i] = self.events[-1]
        return i

    def free(self, i: int, t_ns: int | None = None) -> None:
        """Append the free of allocation ``i``."""
        if i not in self._live:
            raise ValueError(f"Trace.free: no live allocation with id {i!r}")
        t = time.perf_counter_ns() - self._t0 if t_ns is None else t_ns
        self.events.append(self._live.pop(i)._replace(kind="free", t_ns=t))

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    @property
    def num_allocs(self) -> int:
        return sum(e.kind == "alloc" for e in self.events)

    def live_bytes(self) -> np.ndarray:
        """Requested bytes live after each event."""
        return np.cumsum([e.requested if e.kind == "alloc" else -e.requested for e in self.events], dtype=np.int64)

    def by_op(self) -> dict[str, tuple[int, int]]:
        """{op: (allocations, requested bytes)}, largest first."""
        out: dict[str, tuple[int, int]] = {}
        for e in (e for e in self.events if e.kind == "alloc"):
            n, nbytes = out.get(e.op, (0, 0))
            out[e.op] = (n + 1, nbytes + e.requested)
        return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

    def summary(self) -> str:
        return (f"Trace({self.num_allocs} allocations, {len(self.events) - self.num_allocs} frees, "
                f"peak live {_fmt(int(self.live_bytes().max(initial=0)))}, {len(self._live)} live at end)")

    __repr__ = summary

    def save(self, path: str) -> None:
        """Write the trace as JSON (gzip-compressed when ``path`` ends in ``.gz``)."""
        doc = {"format": "flfun-alloc-trace", "version": 1, "meta": self.meta, "columns": Event._fields,
               "events": [list(e) for e in self.events]}
        with _open(path, "wb") as f:
            f.write(json.dumps(doc, separators=(",", ":")).encode())

    @classmethod
    def load(cls, path: str) -> Trace:
        """Read a trace written by ``save``."""
        with _open(path, "rb") as f:
            doc = json.loads(f.read())
        if not isinstance(doc, dict) or doc.get("format") != "flfun-alloc-trace":
            raise ValueError(f"Trace.load: {path!r} is not an flfun allocation trace")
        return cls([Event(**dict(zip(doc["columns"], row))) for row in doc["events"]], doc.get("meta", {}))


def _open(path, mode: str):
    return (gzip.open if str(path).endswith(".gz") else open)(path, mode)


# ---------------------------------------------------------------------------------------------------- recording
class _Recorder:
    def __init__(self, trace: Trace, shadow: Allocator | None):
        self.trace, self.shadow = trace, shadow
        self.finalizers = {}   # trace id -> weakref.finalize freeing it (and its shadow block)

    def on_call(self, name, t0, t1, fresh, out) -> None:
        for buf in fresh:
            nbytes = int(buf.nbytes)
            block = self.shadow.malloc(nbytes) if self.shadow is not None else None
            i = self.trace.alloc(nbytes, name, allocated=block.size if block else nbytes, ptr=block.ptr if block else 0)
            try:
                self.finalizers[i] = weakref.finalize(buf, self.on_free, i, block)
            except TypeError:   # numpy scalars cannot be weakly referenced: count them as freed at once
                self.on_free(i, block)

    def on_free(self, i: int, block) -> None:
        with _lock:
            self.finalizers.pop(i, None)
            self.trace.free(i)
            if block is not None:
                self.shadow.free(block)

    def close(self) -> None:
        for f in list(self.finalizers.values()):
            f.detach()
        self.trace.meta["live_at_end"] = len(self.finalizers)
        self.finalizers.clear()


@contextlib.contextmanager
def record(shadow: Allocator | None | bool = True, collect: bool = True, **meta) -> Iterator[Trace]:
    """Record every buffer eager primitives create (requested and allocated size, op, time) and when it dies.

    Buffers are freed in the trace when the last reference to them goes away (``weakref.finalize``); buffers
    still alive at the end stay allocated in the trace. Buffers that existed before the block (parameters, data)
    are not in it. ``shadow`` is an allocator each allocation also goes through, so events carry the block
    address and the allocated (rounded) size it would get: by default a ``CachingAllocator`` on virtual memory;
    ``False`` or ``None`` records requested sizes only. ``collect`` runs the garbage collector before the block
    ends so buffers held only by reference cycles are freed inside the trace.

    Example::

        with flfun.memory.record() as trace:
            loss, grads = value_and_grad(loss_fn)(params, x, y)
        print(trace.summary()); trace.save("step.json.gz")
    """
    rec = _Recorder(Trace(meta=dict(meta)), CachingAllocator(memory="virtual") if shadow is True else shadow or None)
    with contextlib.closing(rec), listen(rec):
        yield rec.trace
        if collect:
            gc.collect()


# ------------------------------------------------------------------------------------------------------- replay
@dataclass
class ReplayResult:
    """Stats over time (one row per event) and the final stats of one allocator replaying one trace."""
    name: str
    allocated: np.ndarray
    reserved: np.ndarray
    requested: np.ndarray
    ooms: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    @property
    def fragmentation(self) -> np.ndarray:
        """Internal fragmentation after each event: 1 - requested / allocated."""
        return np.where(self.allocated > 0, 1.0 - self.requested / np.maximum(self.allocated, 1), 0.0)

    def summary(self) -> dict:
        """Peaks, byte-weighted mean internal fragmentation, fragmentation at peak reserved, OOM count."""
        peaks = (int(r.max(initial=0)) for r in (self.reserved, self.allocated, self.requested))
        (peak_res, peak_alloc, peak_req), alloc_sum = peaks, float(self.allocated.sum())
        return dict(zip(_COLUMNS, (
            peak_res, peak_alloc, peak_req,
            (1.0 - float(self.requested.sum()) / alloc_sum) if alloc_sum else 0.0,
            float(self.fragmentation[np.argmax(self.reserved)]) if len(self.reserved) else 0.0,
            (1.0 - peak_req / peak_res) if peak_res else 0.0, len(self.ooms), self.stats.get("num_device_alloc", 0))))


_pct = "{:.2%}".format
# summary key -> (table heading, width, formatter)
_COLUMNS = {"peak_reserved": ("peak reserved", 15, _fmt), "peak_allocated": ("peak alloc", 13, _fmt),
            "peak_requested": ("peak live", 13, _fmt), "internal_fragmentation": ("int.frag", 10, _pct),
            "fragmentation_at_peak": ("frag@peak", 11, _pct), "reserved_overhead": ("overhead", 10, _pct),
            "ooms": ("OOMs", 6, str), "device_mallocs": ("mallocs", 9, str)}


def replay(trace: Trace, allocator: Allocator, *, name: str = "", on_oom: str = "skip") -> ReplayResult:
    """Run ``trace`` through ``allocator``; returns its allocated/reserved/requested bytes after every event.

    ``on_oom='skip'`` counts a ``MemoryError`` and drops that allocation (and its free); ``'raise'`` re-raises.
    The same trace through an equally configured fresh allocator always gives the same result.

    Example::

        r = replay(trace, CachingAllocator(memory="virtual", max_split_size=64 << 20))
        print(r.summary()["peak_reserved"], r.ooms)
    """
    if on_oom not in ("skip", "raise"):
        raise ValueError(f"on_oom: expected 'skip' or 'raise', got {on_oom!r}")
    out = np.zeros((3, len(trace.events)), dtype=np.int64)
    keys, own, ooms = ("allocated_bytes", "reserved_bytes", "requested_bytes"), getattr(allocator, "_stats", None), []
    for k, e, oom in _steps(trace, allocator, {}, on_oom == "raise"):
        if oom:
            ooms.append((k, e.requested, e.op))
        # a BaseAllocator's counters are read without building its stats dict
        out[:, k] = [own[n]["all"].current if own is not None else allocator.stats().get(f"{n}.all.current", 0)
                     for n in keys]
    return ReplayResult(name or type(allocator).__name__, out[0], out[1], out[2], ooms, allocator.stats())


def _steps(trace: Trace, allocator: Allocator, blocks: dict, raise_oom: bool = False) -> Iterator[tuple]:
    """Run each event through ``allocator`` (``blocks``: event id -> live block), yielding ``(index, event,
    whether the allocation ran out of memory)`` after each."""
    for k, e in enumerate(trace.events):
        oom = False
        if e.kind == "alloc":
            try:
                blocks[e.id] = allocator.malloc(e.requested)
            except MemoryError:
                if raise_oom:
                    raise
                oom = True
        elif e.id in blocks:
            allocator.free(blocks.pop(e.id))
        yield k, e, oom


def compare(trace: Trace, allocators: dict, *, plot: str | None = None, title: str = "",
            printer: Callable | None = print) -> dict[str, ReplayResult]:
    """Replay ``trace`` through each allocator (or zero-argument factory), print a table, optionally plot.

    Example::

        compare(trace, {"unrestricted": CachingAllocator(memory="virtual"),
                        "split<=64MiB": CachingAllocator(memory="virtual", max_split_size=64 << 20)},
                plot="frag.png")
    """
    results = {name: replay(trace, alloc() if callable(alloc) and not hasattr(alloc, "malloc") else alloc, name=name)
               for name, alloc in allocators.items()}
    if printer is not None:
        printer(format_table(results, title))
    if plot:
        plot_results(results, plot, title)
    return results


def format_table(results: dict[str, ReplayResult], title: str = "") -> str:
    """A fixed-width table of each result's summary."""
    head = f"{'policy':<22}" + "".join(f"{h:>{w}}" for h, w, _ in _COLUMNS.values())
    rows = [f"{name:<22}" + "".join(f"{f(v):>{w}}" for (_, w, f), v in zip(_COLUMNS.values(), r.summary().values()))
            for name, r in results.items()]
    return "\n".join([title] * bool(title) + [head, "-" * len(head), *rows])


def plot_results(results: dict[str, ReplayResult], path: str, title: str = "", axes=None) -> None:
    """Reserved, allocated and internal fragmentation over the trace, one line per allocator (PNG)."""
    if axes is None:
        with _figure(path, 110, nrows=3, figsize=(9, 8), sharex=True) as (_, new):
            return plot_results(results, path, title, new)
    for name, r in results.items():
        for ax, y, lw in zip(axes, (r.reserved / 2**20, r.allocated / 2**20, r.fragmentation * 100), (1, 1, 0.8)):
            ax.plot(np.arange(len(y)), y, label=name, lw=lw)
    for ax, lab in zip(axes, ("reserved (MiB)", "allocated (MiB)", "internal frag. (%)")):
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[0].set_title(title)
    axes[-1].set_xlabel("event")


# ------------------------------------------------------------------------------------------- memory visualizer
def to_memory_viz(trace: Trace, path: str, allocator: Allocator | None = None) -> dict:
    """Replay ``trace`` and write a snapshot that https://pytorch.org/memory_viz opens (JSON, or pickle when
    ``path`` ends in ``.pickle``), with each allocation's op as its stack frame. Returns the snapshot dict.

    Example::

        to_memory_viz(trace, "snapshot.pickle", CachingAllocator(memory="virtual", max_split_size=64 << 20))
    """
    alloc = allocator if allocator is not None else CachingAllocator(memory="virtual")
    if not hasattr(alloc, "events"):
        raise ValueError("to_memory_viz: allocator must log events (a flfun.memory BaseAllocator)")
    alloc.events, ops, blocks, times = [], {}, {}, []
    for _, e, oom in _steps(trace, alloc, blocks):
        if oom:
            alloc.events.append(("oom", 0, e.requested))
        elif e.kind == "alloc":
            ops[blocks[e.id].ptr] = e.op
        times += [e.t_ns // 1000] * (len(alloc.events) - len(times))
    log, alloc.events = alloc.events, None
    names = {"free": ["free_requested", "free_completed"]}   # PyTorch's action names where they differ from ours
    frames = lambda ptr: [{"name": ops.get(ptr, "?"), "filename": "flfun", "line": 0}]
    device_trace = [{"action": a, "addr": ptr, "size": size, "stream": 0, "frames": frames(ptr), "time_us": t}
                    for (action, ptr, size), t in zip(log, times) for a in names.get(action, [action])]
    live = lambda blks, attr: sum(getattr(b, attr) for b in blks if b.allocated)
    segments = [{"device": 0, "address": seg.ptr, "total_size": seg.size, "stream": 0,
                 "segment_type": seg.pool.removesuffix("_pool"), "segment_pool_id": [0, 0], "is_expandable": False,
                 "frames": [], "allocated_size": live(blks, "size"), "active_size": live(blks, "size"),
                 "requested_size": live(blks, "requested"),
                 "blocks": [{"address": b.ptr, "size": b.size, "requested_size": b.requested if b.allocated else 0,
                             "state": "active_allocated" if b.allocated else "inactive", "frames": frames(b.ptr)}
                            for b in blks]} for seg, blks in getattr(alloc, "segments", list)()]
    snapshot = {"segments": segments, "device_traces": [device_trace],
                "allocator_settings": {k: getattr(alloc, k, None) for k in
                                       ("max_split_size", "recycling_size_limit", "capacity")}}
    with open(path, "wb") as f:
        f.write(pickle.dumps(snapshot, protocol=4) if str(path).endswith(".pickle") else json.dumps(snapshot).encode())
    return snapshot

