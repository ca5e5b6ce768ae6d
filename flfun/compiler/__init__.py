"""The compiler behind ``jit`` and ``pmap``: IR passes (``passes``), elementwise fusion grouping (``fusion``),
liveness for memory plans (``liveness``; offset strategies live in ``flfun.memory.planner``), the planned executor
(``executor``) and the one pipeline with its cache key and backend-compiler registry (``pipeline``)."""
