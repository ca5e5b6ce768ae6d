"""A bounded least-recently-used cache of compiled programs (one per jitted function).

Each entry is a traced program; the executables compiled from it pin their arenas. Beyond ``max_entries`` entries
or ``max_bytes`` pinned arena bytes, the least recently used entries are dropped (never the newest), so their
executables and arenas are freed once nothing else holds them.
"""
from __future__ import annotations

import collections
import threading
from typing import Callable, NamedTuple


class CacheInfo(NamedTuple):
    """Counters of a ``ProgramCache``: ``jit(f).cache_info()``."""
    hits: int
    misses: int
    entries: int
    max_entries: int
    arena_bytes: int
    max_bytes: int
    evictions: int


def pinned_bytes(cache: dict) -> int:
    """The arena bytes of the executables in a ``ClosedProgram.cache``."""
    return sum(getattr(getattr(v, "arena", None), "nbytes", 0) for v in list(cache.values()))


class ProgramCache:
    """``key -> entry`` with LRU eviction by count and pinned bytes; ``on_evict(key, entry)`` is called for each
    dropped entry. ``get``/``__setitem__`` make it usable with ``flfun.util.once``.

    Example::

        cache = ProgramCache(max_entries=2, max_bytes=1 << 30)
        cache["a"] = traced; cache.pin("a", 4096)
    """

    def __init__(self, max_entries: int, max_bytes: int, on_evict: Callable = lambda key, entry: None,
                 owner: str = "jit"):
        for what, v in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if type(v) is not int or v < 1:
                raise ValueError(f"{owner}: {what} (the compiled-program cache bound) must be a positive int, got {v!r}")
        self.max_entries, self.max_bytes, self.on_evict = max_entries, max_bytes, on_evict
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._bytes: dict = {}
        self._lock = threading.RLock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key):
        hit = self._entries.get(key)
        if hit is not None:
            self.touch(key)
        return hit

    def touch(self, key) -> None:
        """Count a hit on ``key`` and make it the most recently used."""
        self.hits += 1
        try:
            self._entries.move_to_end(key)
        except KeyError:       # evicted by another thread meanwhile
            pass

    def __setitem__(self, key, entry) -> None:
        with self._lock:
            self.misses += 1
            self._entries[key] = entry
            self._evict()

    def pin(self, key, nbytes: int) -> None:
        """Record that ``key``'s executables pin ``nbytes`` of arenas (then evict to stay within the bounds)."""
        with self._lock:
            if key in self._entries:
                self._bytes[key] = nbytes
                self._evict()

    def _evict(self) -> None:
        while len(self._entries) > 1 and (len(self._entries) > self.max_entries or
                                          sum(self._bytes.values()) > self.max_bytes):
            key, entry = self._entries.popitem(last=False)
            self._bytes.pop(key, None)
            self.evictions += 1
            self.on_evict(key, entry)

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list:
        return list(self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes.clear()

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, len(self._entries), self.max_entries, sum(self._bytes.values()),
                         self.max_bytes, self.evictions)


__all__ = ["CacheInfo", "ProgramCache", "pinned_bytes"]
