"""``ShardedArray``: an Array whose slices along one axis live on different devices (what ``pmap`` returns).

It is an ``Array``: shape, dtype, indexing, arithmetic, ``np.asarray`` and printing work as usual (they assemble
the shards on the host once and cache the result). ``pmap`` takes a sharded array mapped along its sharded axis
straight from the shards, so the output of one pmap feeds the next without a host round trip.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from flfun.array import Array
from flfun.core import short


class ShardedArray(Array):
    """Shards (Arrays of equal shape and dtype, one per device) stacked along ``axis``.

    Example::

        >>> y = flfun.pmap(lambda v: v * 2)(fnp.arange(4.0).reshape(2, 2))   # with 2 devices
        >>> y.shape, [s.device for s in y.shards]
        ((2, 2), [cpu:0, cpu:1])
        >>> np.asarray(y).tolist()
        [[0.0, 2.0], [4.0, 6.0]]
    """
    __slots__ = ("shards", "axis", "_host")

    def __init__(self, shards: Sequence[Array], axis: int = 0):
        shards = list(shards)
        if not shards:
            raise ValueError("ShardedArray: shards must not be empty")
        s0 = shards[0]
        if any(s.shape != s0.shape or s.dtype != s0.dtype for s in shards):
            raise ValueError(f"ShardedArray: shards must share shape and dtype, got {[short(s) for s in shards]}")
        if not 0 <= axis <= len(s0.shape):
            raise ValueError(f"ShardedArray: axis {axis} is out of range for shards of rank {len(s0.shape)}")
        self.shards, self.axis, self._host = shards, axis, None

    # --- metadata without assembling
    @property
    def shape(self) -> tuple[int, ...]:
        s = tuple(self.shards[0].shape)
        return s[:self.axis] + (len(self.shards),) + s[self.axis:]

    @property
    def dtype(self):
        return self.shards[0].dtype

    @property
    def devices(self) -> list:
        """The device of each shard, in order."""
        return [s.device for s in self.shards]

    @property
    def _value(self):
        """The assembled value (an ordinary host Array's buffer on the default device), made once."""
        if self._host is None:
            self._host = np.stack([np.asarray(s) for s in self.shards], axis=self.axis)
            self._host.flags.writeable = False
        return self._host

    @property
    def _device(self):
        from flfun.core import default_device
        return default_device()

    def __array__(self, dtype=None, copy=None):
        v = self._value
        return v.astype(dtype) if dtype is not None and np.dtype(dtype) != v.dtype else v.copy() if copy else v

    def __getitem__(self, idx):
        if self.axis == 0 and isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
            n = len(self.shards)
            if -n <= idx < n:              # one shard: hand it over without assembling the rest
                from flfun.devices import device_put
                return device_put(self.shards[int(idx)])
        return super().__getitem__(idx)

    def block_until_ready(self) -> "ShardedArray":
        for s in self.shards:
            s.block_until_ready()
        return self

    def __repr__(self) -> str:
        return "Sharded" + super().__repr__()


__all__ = ["ShardedArray"]
