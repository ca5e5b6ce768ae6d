"""Memory plans: the arena buffers of a program, and the strategies that give them offsets in one arena.

The compiler's liveness analysis (``flfun.compiler.liveness.plan_program``) finds which values need an arena
buffer and when each is live (``BufferSpec``); a strategy (``naive``, ``greedy_by_size``, ``best_fit``, ``auto``
or one you register) assigns offsets, and ``MemoryPlan`` holds the result.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flfun.ir import Program, Var
from flfun.memory.raw import ALIGNMENT
from flfun.memory.report import figure as _figure, format_bytes as _fmt


@dataclass
class BufferSpec:
    """What a strategy places: ``size`` bytes (a multiple of the alignment), live over eqns ``start..end``. In a
    ``MemoryPlan`` it also holds its ``offset``, a ``label`` and how many program ``values`` live in it (> 1:
    in-place reuse)."""
    id: int
    size: int
    start: int
    end: int
    offset: int = 0
    label: str = ""
    values: int = 1

    def overlaps_in_time(self, other: BufferSpec) -> bool:
        return self.start <= other.end and other.start <= self.end


# ---------------------------------------------------------------------------------------------- strategies
STRATEGIES: dict[str, Callable[[list[BufferSpec], int], dict[int, int]]] = {}


def register_strategy(name: str):
    """Register an offset-assignment strategy ``fn(buffers, alignment) -> {buffer id: offset}``.

    Example::

        @register_strategy("first_fit_by_start")
        def first_fit(buffers, alignment):
            return place_in_order(sorted(buffers, key=lambda b: b.start))
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_strategy: name must be a non-empty str, got {name!r}")

    def wrap(fn):
        STRATEGIES[name] = fn
        return fn
    return wrap


def _free_gaps(busy: Iterable[tuple[int, int]], size: int) -> tuple[list[tuple[int, int]], int]:
    """The holes between ``(offset, size)`` intervals that hold ``size`` bytes, as ``(hole size, offset)`` in
    address order, and the first offset above them all."""
    gaps, top = [], 0
    for offset, n in sorted(busy):
        if offset - top >= size:
            gaps.append((offset - top, top))
        top = max(top, offset + n)
    return gaps, top


def place_in_order(buffers: Iterable[BufferSpec]) -> dict[int, int]:
    """First fit: each buffer, in the given order, at the lowest offset free during its whole lifetime."""
    placed: list[tuple[int, BufferSpec]] = []
    out = {}
    for b in buffers:
        gaps, top = _free_gaps(((o, p.size) for o, p in placed if p.overlaps_in_time(b) and p.size), b.size)
        out[b.id] = gaps[0][1] if gaps else top
        placed.append((out[b.id], b))
    return out


@register_strategy("naive")
def _naive(buffers, alignment):
    """No reuse: every buffer gets its own bytes (what an executor without a planner allocates)."""
    order = sorted(buffers, key=lambda b: (b.start, b.id))
    return dict(zip((b.id for b in order), itertools.accumulate((b.size for b in order), initial=0)))


@register_strategy("greedy_by_size")
def _greedy_by_size(buffers, alignment):
    """Largest buffer first, each at the lowest offset that no time-overlapping placed buffer uses."""
    return place_in_order(sorted(buffers, key=lambda b: (-b.size, b.start, b.id)))


@register_strategy("best_fit")
def _best_fit(buffers, alignment):
    """XLA's heap simulator with best fit: walk the program in order, free buffers after their last use, and
    put each new buffer in the smallest free gap that holds it (the top of the heap if none does)."""
    live: list[tuple[int, BufferSpec]] = []
    out = {}
    for b in sorted(buffers, key=lambda b: (b.start, -b.size, b.id)):
        live = [(o, x) for o, x in live if x.end >= b.start]
        gaps, top = _free_gaps(((o, x.size) for o, x in live), b.size)
        out[b.id] = min(gaps)[1] if gaps else top
        live.append((out[b.id], b))
    return out


@register_strategy("auto")
def _auto(buffers, alignment):
    """The smallest arena of ``greedy_by_size``, ``best_fit`` and first fit in order of start."""
    candidates = [_greedy_by_size(buffers, alignment), _best_fit(buffers, alignment),
                  place_in_order(sorted(buffers, key=lambda b: (b.start, -b.size, b.id)))]
    return min(candidates, key=lambda offs: arena_size(buffers, offs))


def arena_size(buffers: list[BufferSpec], offsets: dict[int, int]) -> int:
    return max((offsets[b.id] + b.size for b in buffers), default=0)


# ---------------------------------------------------------------------------------------------------- plan
@dataclass
class MemoryPlan:
    """Where every intermediate of a program lives. Byte figures:

    * ``naive_bytes``: the sum of all equations' outputs (an executor that never reuses memory);
    * ``arena_bytes``: the planned arena; ``no_reuse_bytes``: the arena buffers laid end to end;
    * ``lower_bound``: the most arena-buffer bytes live at one program point (no placement can beat it);
    * ``peak_live_bytes``: like JAX's liveness figure, every equation output counted until its last use;
    * ``recomputed_eqns``, ``recomputed_bytes``: what remat (``flfun.checkpoint``) bodies recompute.
    """
    strategy: str
    alignment: int
    buffers: list[BufferSpec]
    arena_bytes: int
    naive_bytes: int
    no_reuse_bytes: int
    lower_bound: int
    peak_live_bytes: int
    inplace_hits: int
    num_eqns: int
    roots: dict = field(repr=False)             # root id -> flfun.compiler.liveness.Root
    var_roots: dict[int, frozenset] = field(repr=False)
    program: Program | None = field(default=None, repr=False)
    recomputed_eqns: int = 0
    recomputed_bytes: int = 0

    def offset_of(self, var: Var) -> int | None:
        """The arena offset of ``var``'s buffer, or ``None`` if it does not live in the arena."""
        rs = self.var_roots.get(var.id, ())
        if len(rs) == 1:
            r = self.roots[next(iter(rs))]
            if r.kind == "arena" and var.id in r.exact:
                return next(b.offset for b in self.buffers if b.id == r.id)
        return None

    def check(self) -> None:
        """Raise ``AssertionError``-free ``ValueError`` if two buffers live at the same time overlap in memory
        or an offset breaks the alignment."""
        bs = sorted(self.buffers, key=lambda b: b.offset)
        for i, a in enumerate(bs):
            if a.offset % self.alignment:
                raise ValueError(f"MemoryPlan: buffer {a.id} at offset {a.offset} is not {self.alignment}-aligned")
            if a.offset + a.size > self.arena_bytes:
                raise ValueError(f"MemoryPlan: buffer {a.id} ends past the arena")
            for b in bs[i + 1:]:
                if b.offset >= a.offset + a.size:
                    break
                if a.size and b.size and a.overlaps_in_time(b):
                    raise ValueError(f"MemoryPlan: buffers {a.id} ({a.label}) and {b.id} ({b.label}) overlap in "
                                     f"memory and in time")

    def summary(self) -> str:
        """A table of every arena buffer (offset, size, lifetime, values sharing it) and the totals."""
        rows = [f"{b.id:>4} {b.offset:>10} {b.size:>10} {f'{b.start}..{b.end}':>11} {b.values:>4}  {b.label}"
                for b in sorted(self.buffers, key=lambda b: (b.offset, b.start))]
        head = f"{'buf':>4} {'offset':>10} {'bytes':>10} {'live':>11} {'vals':>4}  value"
        return "\n".join([head, "-" * 64, *rows, "-" * 64, self.totals()])

    def totals(self) -> str:
        lb, nv = self.lower_bound or 1, self.naive_bytes or 1
        return (f"strategy {self.strategy}: arena {_fmt(self.arena_bytes)} = {self.arena_bytes / lb:.3f}x lower "
                f"bound {_fmt(self.lower_bound)}, {self.arena_bytes / nv:.3f}x naive {_fmt(self.naive_bytes)} "
                f"(arena buffers unshared {_fmt(self.no_reuse_bytes)}); {len(self.buffers)} buffers over "
                f"{self.num_eqns} equations, {self.inplace_hits} in-place" + (
                    f"; remat recomputes {self.recomputed_eqns} equations ({_fmt(self.recomputed_bytes)})"
                    if self.recomputed_eqns else ""))

    __str__ = totals

    def plot(self, path: str, title: str | None = None) -> None:
        """Draw the plan as rectangles over program point (x) and arena offset (y) into a PNG at ``path``."""
        from matplotlib.patches import Rectangle
        scale = 1 / (1 << 20)
        with _figure(path, 130, figsize=(10, 5.5)) as (plt, ax):
            for i, b in enumerate(sorted(self.buffers, key=lambda b: b.start)):
                ax.add_patch(Rectangle((b.start - 0.45, b.offset * scale), b.end - b.start + 0.9, b.size * scale,
                                       facecolor=plt.get_cmap("tab20")(i % 20), edgecolor="black", linewidth=0.4,
                                       alpha=0.85))
                if b.size >= 0.04 * max(self.arena_bytes, 1):
                    ax.text(b.start, (b.offset + b.size / 2) * scale, b.label.split(" ")[0], fontsize=6, va="center")
            ax.axhline(self.lower_bound * scale, color="red", linestyle="--", linewidth=1,
                       label=f"lower bound {_fmt(self.lower_bound)}")
            ax.axhline(self.arena_bytes * scale, color="black", linewidth=1, label=f"arena {_fmt(self.arena_bytes)}")
            # a checked plan's arena is never below the lower bound, so the arena sets the height
            ax.set(xlim=(-1, max(self.num_eqns, 1)), ylim=(0, max(self.arena_bytes, 1) * scale * 1.08),
                   xlabel="program point (equation index)", ylabel="arena offset (MiB)")
            ax.set_title(title or self.totals().replace("; ", "\n"), fontsize=9)
            ax.legend(loc="upper right", fontsize=8)


__all__ = ["ALIGNMENT", "STRATEGIES", "BufferSpec", "MemoryPlan", "arena_size", "place_in_order",
           "register_strategy"]
