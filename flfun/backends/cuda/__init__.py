"""GPU pieces of the cupy backend: ctypes cuBLAS (``cublas``), the primitives' CUDA C lowering (``lowering``),
fused-kernel generation (``kernels``), the jit executor with device arenas (``executor``) and CUDA-graph capture
with its fallback (``graphs``). Nothing here imports cupy at import time; ``graphs``, ``lowering`` and the planning
part of ``executor`` are testable on the CPU."""
