"""Every CPU workload of ../shared/WORKLOADS.md in one command: W1-W4 and W7 (``jit_suite``), then W5 and W6,
each peer in its own process. Writes ``benchmarks/CPU_RESULTS.md`` and prints it. GPU: ``bash benchmarks/gpu.sh``;
the allocator experiment: ``python -m benchmarks.fragmentation``; scaling: ``python -m benchmarks.dp_scaling``.

Run: ``python -m benchmarks.run`` (``--only W1,W5`` for a subset).
"""
from __future__ import annotations

from benchmarks import jit_suite
from benchmarks.harness import suite_cli


def main(only: set[str], out_path: str) -> str:
    parts = [jit_suite.main(only & {"W1", "W2", "W3", "W4", "W7"}, out_path)]
    if "W5" in only:
        from benchmarks import w5_cnn
        parts.append(w5_cnn.main())
    if "W6" in only:
        from benchmarks import w6_transformer
        parts.append(w6_transformer.main())
    if "W9" in only:
        from benchmarks import w9_lstm
        parts.append(w9_lstm.main())
    if "W10" in only:
        from benchmarks import w10_remat
        parts.append(w10_remat.main())
    return "\n".join(parts)


if __name__ == "__main__":
    suite_cli(main, "W1,W2,W3,W4,W5,W6,W7,W9,W10", "CPU_RESULTS.md")
