"""Run-time switches, read from the environment in one place.

``FLFUN_DEBUG=1`` turns on extra checks; ``FLFUN_JIT_PLANNED=0`` runs jitted programs without the memory
planner; ``FLFUN_EAGER_TAPE=0`` makes eager grad use linearize + transpose; ``FLFUN_BACKEND`` picks the default
backend; ``FLFUN_CPU_DEVICES`` sets the number of CPU devices;
``FLFUN_CPU_FUSION=0`` keeps jit on the CPU off the fused C kernels;
``FLFUN_TF32``, ``FLFUN_FUSION`` and ``FLFUN_CUDA_GRAPHS`` control the cupy backend (see cupy_backend.py);
``FLFUN_JIT_CACHE_SIZE`` / ``FLFUN_JIT_CACHE_BYTES`` bound each jitted function's compiled programs (LRU).
"""
from __future__ import annotations

import os
from dataclasses import dataclass


def _flag(name: str, default: bool) -> bool:
    return os.environ.get(name, "1" if default else "0").lower() not in ("0", "false", "no", "off", "")


@dataclass
class Config:
    debug: bool = _flag("FLFUN_DEBUG", False)
    jit_planned: bool = _flag("FLFUN_JIT_PLANNED", True)
    default_backend: str = os.environ.get("FLFUN_BACKEND", "numpy")
    cpu_devices: int = int(os.environ.get("FLFUN_CPU_DEVICES", "1"))
    tf32: bool = _flag("FLFUN_TF32", False)      # cupy: float32 GEMMs in TF32 (default: true fp32)
    fusion: bool = _flag("FLFUN_FUSION", True)   # cupy jit: elementwise chains become generated kernels
    cpu_fusion: bool = _flag("FLFUN_CPU_FUSION", True)   # numpy jit: fused chains become C kernels (where gcc is)
    cuda_graphs: bool = _flag("FLFUN_CUDA_GRAPHS", True)   # cupy jit: replay a repeated step as a CUDA graph
    eager_tape: bool = _flag("FLFUN_EAGER_TAPE", True)   # eager grad on a tape (False: linearize + transpose)
    # the bounds of each jitted function's cache of compiled programs (entries, and bytes of arenas they pin)
    jit_cache_size: int = int(os.environ.get("FLFUN_JIT_CACHE_SIZE", "256"))
    jit_cache_bytes: int = int(os.environ.get("FLFUN_JIT_CACHE_BYTES", str(512 << 20)))


config = Config()
