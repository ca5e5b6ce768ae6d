"""Devices and moving arrays between them.

CPU devices come from the numpy backend (``FLFUN_CPU_DEVICES`` of them, or ``set_cpu_device_count`` at run
time), GPUs from cupy when it is installed. Every Array knows its device and operations run where their operands
live; mixing devices without ``device_put`` is an error. After ``flfun.distributed.initialize()``, ``devices()``
lists every process's devices and ``local_devices()`` this process's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from flfun.array import Array
from flfun.backends import get_backend
from flfun.backends.base import Device
from flfun.config import config
from flfun.core import Tracer, default_device, to_array, wrap
from flfun.distributed import is_initialized, world
from flfun.tree import tree_map


def local_devices(backend: str | None = None) -> list[Device]:
    """This process's devices of ``backend`` (default: the default backend).

    Example::

        >>> flfun.local_devices()[0].platform
        'cpu'
    """
    return list(get_backend(backend or config.default_backend).devices)


def devices(backend: str | None = None) -> list[Device]:
    """All devices of ``backend`` in all processes, ordered by process (one process unless
    ``flfun.distributed.initialize()`` joined several).

    Example::

        >>> len(flfun.devices()) == flfun.device_count()
        True
    """
    local = local_devices(backend)
    return local if world() is None or local[0] not in world().devices else list(world().devices)


def device_count(backend: str | None = None) -> int:
    """Number of devices in all processes: ``flfun.device_count()``."""
    return len(devices(backend))


def local_device_count(backend: str | None = None) -> int:
    """Number of this process's devices: ``flfun.local_device_count()``."""
    return len(local_devices(backend))


def process_index() -> int:
    """This process's rank among the processes joined by ``flfun.distributed.initialize()`` (0 if alone)."""
    return 0 if world() is None else world().comm.rank


def process_count() -> int:
    """Number of processes joined by ``flfun.distributed.initialize()`` (1 if alone)."""
    return 1 if world() is None else world().comm.size


def set_cpu_device_count(n: int) -> list[Device]:
    """Use ``n`` CPU devices from now on (as ``FLFUN_CPU_DEVICES=n`` does at start-up); returns them.

    Existing devices keep their identity (arrays on them stay valid); devices beyond ``n`` are dropped from the
    list. Useful to develop pmap code on a laptop and for tests.

    Example::

        >>> len(flfun.set_cpu_device_count(4))
        4
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_cpu_device_count: n must be a positive int, got {n!r}")
    if is_initialized():
        raise ValueError("set_cpu_device_count: the device list is fixed once flfun.distributed.initialize() "
                         "has run; set FLFUN_CPU_DEVICES before starting the processes")
    devs = get_backend("numpy").devices
    devs += [Device("cpu", i, "numpy", np) for i in range(len(devs), n)]
    del devs[n:]
    config.cpu_devices = n
    return list(devs)


def _put_leaf(x, device: Device) -> Any:
    if isinstance(x, Tracer):
        return x
    if type(x) is not Array:
        x = to_array(np.asarray(x)) if isinstance(x, Array) else to_array(x)
    if x._device is device:
        return x
    src = x._device                            # immutable host buffers are shared between CPUs, never copied
    return wrap(x._value if src.platform == device.platform == "cpu" else device.put(src.to_host(x._value)), device)


def device_put(x: Any, device: Device | None = None) -> Any:
    """``x`` (an array, numpy array, scalar or pytree of them) placed on ``device`` (default: the default device).

    CPU devices share host memory, so moving between them costs nothing; moving to or from a GPU copies.

    Example::

        >>> cpu1 = flfun.devices()[1]            # with FLFUN_CPU_DEVICES=2
        >>> flfun.device_put(fnp.ones(3), cpu1).device
        cpu:1
    """
    device = default_device() if device is None else device
    if not isinstance(device, Device):
        raise ValueError(f"device_put: device must be a flfun Device (see flfun.devices()), got {device!r:.60}")
    if device.process_index != process_index():
        raise ValueError(f"device_put: device {device} belongs to process {device.process_index}, not this one "
                         f"({process_index()}); each process can only place arrays on its local devices")
    return tree_map(lambda a: _put_leaf(a, device), x)


__all__ = ["devices", "local_devices", "device_count", "local_device_count", "process_index", "process_count",
           "set_cpu_device_count", "device_put"]
