"""``ShardedArray``: an Array whose slices along one axis live on different devices (what ``pmap`` returns).

It is an ``Array``: shape, dtype, indexing, arithmetic, ``np.asarray`` and printing work as usual (they assemble
the shards on the host once and cache the result). ``pmap`` takes a sharded array mapped along its sharded axis
straight from the shards, so the output of one pmap feeds the next without a host round trip.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from flfun.array import Array
from flfun.backends.base import Device
from flfun.core import default_device, short
from flfun.distributed.devices import device_put
from flfun.tree import tree_flatten, tree_unflatten


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
        return default_device()

    def __array__(self, dtype=None, copy=None):
        v = self._value
        return v.astype(dtype) if dtype is not None and np.dtype(dtype) != v.dtype else v.copy() if copy else v

    def __getitem__(self, idx):
        if self.axis == 0 and isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
            n = len(self.shards)
            if -n <= idx < n:              # one shard: hand it over without assembling the rest
                return device_put(self.shards[int(idx)])
        return super().__getitem__(idx)

    def block_until_ready(self) -> "ShardedArray":
        for s in self.shards:
            s.block_until_ready()
        return self

    def __repr__(self) -> str:
        return "Sharded" + super().__repr__()


def device_put_sharded(shards: Sequence, devices: Sequence[Device]) -> Any:
    """Put ``shards[i]`` (arrays or pytrees of one structure) on ``devices[i]``; returns a ``ShardedArray``
    (per leaf) of shape ``(len(devices), *shard.shape)``, ready for ``pmap`` without another copy.

    Example::

        >>> x = flfun.device_put_sharded([fnp.zeros(3), fnp.ones(3)], flfun.devices()[:2])
        >>> x.shape
        (2, 3)
    """
    shards, devices = list(shards), list(devices)
    if len(shards) != len(devices) or not shards:
        raise ValueError(f"device_put_sharded: need one shard per device, got {len(shards)} shards for "
                         f"{len(devices)} devices")
    flat = [tree_flatten(s) for s in shards]
    if any(td != flat[0][1] for _, td in flat):
        raise ValueError("device_put_sharded: the shards have different pytree structures")
    out = [ShardedArray([device_put(leaf, d) for leaf, d in zip(leaves, devices)], 0)    # (checks shapes, dtypes)
           for leaves in zip(*[lv for lv, _ in flat])]
    return tree_unflatten(flat[0][1], out)


def device_put_replicated(x: Any, devices: Sequence[Device]) -> Any:
    """One copy of ``x`` (an array or pytree) on each of ``devices``: ``ShardedArray``s of shape
    ``(len(devices), *x.shape)`` whose shards are equal (free for CPU devices, which share memory).

    Example::

        >>> params = flfun.device_put_replicated({"w": fnp.ones(3)}, flfun.devices())
    """
    devices = list(devices)
    return device_put_sharded([x] * len(devices), devices)


__all__ = ["ShardedArray", "device_put_sharded", "device_put_replicated"]
