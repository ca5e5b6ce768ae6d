"""The jit benchmarks in one run: W1 (jit chain), W2 (jit of grad), W3 (MLP step vs its 8 GEMMs), W4 (jit of
vmap of grad) and W7 (memory), every peer in its own process, with the issue's targets checked as ratios of the
same run. Writes ``benchmarks/JIT_RESULTS.md`` and prints it.

Run: ``python -m benchmarks.jit_suite`` (``--only W3,W7`` for a subset).
"""
from __future__ import annotations

import os
import platform
import time

from benchmarks.harness import markdown_table, run_rows, run_workload, suite_cli

os.environ.setdefault("JAX_PLATFORMS", "cpu")   # the CPU workloads: JAX on the CPU even where a GPU exists

PEERS = [("numpy", None), ("flfun", None), ("torch", "torch"), ("jax", "jax")]


def _median(rows, peer, variant):
    return next((r["median"] for r in rows if r.get("peer") == peer and r.get("variant") == variant), None)


def _target(lines, name, value, limit, fmt="{:.2f}x"):
    if value is None:
        lines.append(f"| {name} | n/a | {fmt.format(limit)} | - |")
    else:
        lines.append(f"| {name} | {fmt.format(value)} | <= {fmt.format(limit)} | "
                     f"{'yes' if value <= limit else '**no**'} |")


def main(only: set[str], out_path: str | None = None) -> str:
    parts, targets = [], ["| target | measured | limit | met |", "|---|---|---|---|"]
    load0 = os.getloadavg()

    def flush():               # after every workload, so a run cut short still leaves its results
        if out_path:
            with open(out_path, "w") as f:
                f.write("\n".join(["## Targets so far", "", *targets, ""] + parts))
    for name, module, title, base, variant, label, limit in (
            ("W1", "benchmarks.w1_dispatch", "W1: dispatch, 100 float32 elements", "numpy/chain", "jit chain",
             "numpy `np.sum(x*y+1.0)`", 2.0),
            ("W2", "benchmarks.w2_small_grad", "W2: small gradient", "numpy/floor (hand-written)", "jit(grad)",
             "hand-written floor", 1.3)):
        if name not in only:
            continue
        rows = run_workload(module, PEERS, base)
        parts.append(markdown_table(title, rows, base))
        floor = _median(rows, *base.split("/", 1))
        j, jj = _median(rows, "flfun", variant), _median(rows, "jax", variant)
        _target(targets, f"{name} flfun {variant} / {label}", j / floor if j and floor else None, limit)
        if jj and floor:
            targets.append(f"| (JAX {variant} / {label}) | {jj / floor:.2f}x | | |")
        flush()
    if "W3" in only:
        from benchmarks import w3_mlp
        rows, extras = run_rows("benchmarks.w3_mlp", PEERS, w3_mlp.BASE)
        parts.append(markdown_table("W3: MLP training step (ratios to the 8 GEMMs)", rows, w3_mlp.BASE))
        g = _median(rows, "numpy", "8 GEMMs (floor)")
        for peer, variant, limit in (("flfun", "jit step", 1.25), ("flfun", "jit step (donate params)", 1.25),
                                     ("flfun", "jit step (unplanned)", None),
                                     ("numpy", "step (hand-written)", None), ("torch", "eager step", None),
                                     ("jax", "jit step", None)):
            m = _median(rows, peer, variant)
            if limit is None:
                if m and g:
                    targets.append(f"| (W3 {peer} {variant} / 8 GEMMs) | {m / g:.2f}x | | |")
                continue
            _target(targets, f"W3 {peer} {variant} / 8 GEMMs", m / g if m and g else None, limit)
        fg = _median(rows, "flfun", "8 GEMMs (floor, same process)")
        fj = _median(rows, "flfun", "jit step")
        if fg and fj:
            targets.append(f"| (W3 flfun jit step / 8 GEMMs timed in the flfun process) | {fj / fg:.2f}x | | |")
        if "flfun" in extras:
            _target(targets, "W3 first jit call (trace + passes + plan + code)", extras["flfun"]["first_call_s"],
                    0.3, "{:.3f} s")
    flush()
    if "W4" in only:
        from benchmarks import w4_per_example
        rows, _ = run_rows("benchmarks.w4_per_example", PEERS, w4_per_example.BASE)
        parts.append(markdown_table("W4: per-example gradients", rows, w4_per_example.BASE))
        j, f = _median(rows, "flfun", "jit(vmap(grad))"), _median(rows, "numpy", "floor (hand-written, batched)")
        _target(targets, "W4 flfun jit(vmap(grad)) / batched floor", j / f if j and f else None, 1.2)
        jj = _median(rows, "jax", "jit(vmap(grad))")
        if jj and f:
            targets.append(f"| (JAX jit(vmap(grad)) / floor) | {jj / f:.2f}x | | |")
    flush()
    if "W7" in only:
        from benchmarks import w7_memory
        from benchmarks.harness import available, run_peer
        fl = run_peer("benchmarks.w7_memory", "flfun")["memory"]
        jx = run_peer("benchmarks.w7_memory", "jax")["memory"] if available("jax") else {}
        for name, f in fl.items():
            parts.append(w7_memory.table(fl, jx.get(name), name))
            a = f["arena"]["auto"]
            _target(targets, f"W7 {name} planned arena / lower bound", a / f["lower_bound"], 1.05, "{:.3f}x")
            _target(targets, f"W7 {name} planned arena / naive", a / f["naive"], 0.35, "{:.3f}x")
    flush()
    load1 = os.getloadavg()
    head = [f"# flfun jit benchmarks ({time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, "
            f"{os.cpu_count()} CPUs; load average {load0[0]:.2f} at start, {load1[0]:.2f} at end)", "",
            "## Targets (ratios of medians in this run)", "", *targets, ""]
    return "\n".join(head) + "\n" + "\n".join(parts)


if __name__ == "__main__":
    suite_cli(main, "W1,W2,W3,W4,W7", "JIT_RESULTS.md")
