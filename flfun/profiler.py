"""Op-level profiler: per-primitive calls, wall time and bytes allocated, for eager and jitted code.

``with flfun.profile() as prof:`` wraps every primitive impl for the duration of the block (the same hook that
``flfun.memory.record`` uses), so nothing is paid when profiling is off; jitted functions see the wrappers because
``register_impl`` bumps the registry version their caches are keyed on.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from flfun.memory import telemetry
from flfun.memory.report import format_bytes as _fmt


@dataclass
class OpStats:
    """Totals for one primitive."""
    name: str
    calls: int = 0
    time_ns: int = 0
    bytes: int = 0
    max_ns: int = 0


class Profile:
    """The result of one ``profile()`` block: per-primitive totals and, with ``trace=True``, every call.

    Example::

        with flfun.profile() as prof:
            step(params, batch)
        print(prof.table(sort_by="time", limit=10))
        prof.export_chrome_trace("trace.json")     # open in https://ui.perfetto.dev
    """

    def __init__(self, trace: bool = True):
        self.ops: dict[str, OpStats] = {}
        self.events: list[tuple[str, int, int, int, int]] = []   # name, t0, t1, bytes, thread id
        self.keep_events = trace
        self.start_ns = self.end_ns = time.perf_counter_ns()

    def on_call(self, name: str, t0: int, t1: int, fresh, out) -> None:
        nbytes, dt = sum(int(b.nbytes) for b in fresh), t1 - t0
        st = self.ops.get(name) or self.ops.setdefault(name, OpStats(name))
        st.calls, st.time_ns, st.bytes, st.max_ns = st.calls + 1, st.time_ns + dt, st.bytes + nbytes, max(st.max_ns, dt)
        if self.keep_events:
            self.events.append((name, t0, t1, nbytes, threading.get_ident()))

    @property
    def total_ns(self) -> int:
        """Time spent inside primitive impls."""
        return sum(s.time_ns for s in self.ops.values())

    @property
    def wall_ns(self) -> int:
        """Wall time of the profiled block (impls plus everything around them)."""
        return self.end_ns - self.start_ns

    def table(self, sort_by: str = "time", limit: int | None = None) -> str:
        """A text table of primitives sorted by ``'time'``, ``'calls'``, ``'bytes'`` or ``'name'``.

        Example::

            print(prof.table(sort_by="bytes", limit=5))
        """
        keys = {"time": "time_ns", "calls": "calls", "bytes": "bytes", "name": "name"}
        if sort_by not in keys:
            raise ValueError(f"sort_by: expected one of {sorted(keys)}, got {sort_by!r}")
        rows = sorted(self.ops.values(), key=lambda s: s.name if sort_by == "name" else -getattr(s, keys[sort_by]))
        head = f"{'primitive':<24}{'calls':>8}{'total':>12}{'%':>7}{'mean':>11}{'max':>11}{'allocated':>13}"
        lines = [head, "-" * len(head)]
        lines += [f"{s.name:<24}{s.calls:>8}{_ms(s.time_ns):>12}{100 * s.time_ns / (self.total_ns or 1):>6.1f}%"
                  f"{s.time_ns / s.calls / 1e3:>8.1f} us{s.max_ns / 1e3:>8.1f} us{_fmt(s.bytes):>13}"
                  for s in rows[:limit]]
        lines += ["-" * len(head), (f"{'total in impls':<24}{sum(s.calls for s in rows):>8}{_ms(self.total_ns):>12}"
                                    f"{_fmt(sum(s.bytes for s in rows)):>42}"),
                  f"wall time of the block: {_ms(self.wall_ns)}"]
        return "\n".join(lines)

    __str__ = table

    def chrome_trace(self) -> dict:
        """The calls as a Chrome trace-event document (``ph: X`` slices plus a cumulative-bytes counter)."""
        pid = os.getpid()
        ev = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "flfun"}}]
        total = 0
        for name, t0, t1, nbytes, tid in self.events:
            ev.append({"name": name, "cat": "primitive", "ph": "X", "pid": pid, "tid": tid,
                       "ts": (t0 - self.start_ns) / 1e3, "dur": (t1 - t0) / 1e3, "args": {"bytes": nbytes}})
            if nbytes:
                total += nbytes
                ev.append({"name": "bytes allocated", "ph": "C", "pid": pid, "ts": (t1 - self.start_ns) / 1e3,
                           "args": {"cumulative": total}})
        return {"traceEvents": ev, "displayTimeUnit": "ms"}

    def export_chrome_trace(self, path: str) -> None:
        """Write ``chrome_trace()`` to ``path`` (opens in Perfetto or chrome://tracing)."""
        if not self.keep_events:
            raise ValueError("export_chrome_trace: profile(trace=False) kept no per-call events")
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


@contextlib.contextmanager
def profile(trace: bool = True) -> Iterator[Profile]:
    """Profile every primitive call in the block; ``trace=False`` keeps only the per-primitive totals.

    Example::

        with flfun.profile() as prof:
            loss = train_step(params, x, y)
        print(prof.table())
    """
    prof = Profile(trace)
    try:
        with telemetry.listen(prof):
            yield prof
    finally:
        prof.end_ns = time.perf_counter_ns()
