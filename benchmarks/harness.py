"""Timing harness shared by every benchmark, following ../shared/WORKLOADS.md.

``time_fn`` warms up, calibrates ``n`` so one loop takes about ``target`` seconds, runs 7 timed loops and
reports the median and min per call, plus how much CPU other processes used meanwhile (a busy machine makes
the numbers meaningless, so the measurement is repeated). ``run_workload`` runs each peer in its own
process and prints a markdown table with ratios to a baseline.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

BUSY_LIMIT = 0.25  # cores of other processes' CPU during a measurement before we repeat it


def _cpu_jiffies() -> tuple[int, int]:
    """(busy jiffies of the whole machine, jiffies of this process)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)
    with open("/proc/self/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    own = int(parts[11]) + int(parts[12])  # utime + stime (children are not ours to count)
    return busy, own


@dataclass
class Timing:
    median: float   # seconds per call
    min: float
    n: int          # calls per loop
    loops: int
    other_load: float  # mean cores used by other processes during the timed loops

    def fmt(self) -> str:
        return f"{fmt_time(self.median)} (min {fmt_time(self.min)})"


def fmt_time(s: float) -> str:
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def time_fn(fn: Callable[[], object], target: float, loops: int = 7, warmup: int = 3, retries: int = 3,
            sync: Callable[[object], object] | None = None) -> Timing:
    """Per-call time of ``fn()``: median and min over ``loops`` loops of ``n`` calls each."""
    call = fn if sync is None else (lambda: sync(fn()))
    for _ in range(warmup):
        call()
    n, elapsed = 1, 0.0
    while True:  # calibration: grow n until one loop takes about `target`
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        elapsed = time.perf_counter() - t0
        if elapsed >= target * 0.5 or n >= 10**7:
            break
        n = max(n * 2, int(n * target / max(elapsed, 1e-9) * 0.6))
    n = max(1, int(n * target / max(elapsed, 1e-9)))
    best = None
    hz = os.sysconf("SC_CLK_TCK")
    for _ in range(retries):
        times = []
        b0, o0 = _cpu_jiffies()
        w0 = time.perf_counter()
        for _ in range(loops):
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            times.append((time.perf_counter() - t0) / n)
        wall = time.perf_counter() - w0
        b1, o1 = _cpu_jiffies()
        other = max(0.0, ((b1 - b0) - (o1 - o0)) / hz / wall)
        times.sort()
        t = Timing(times[len(times) // 2], times[0], n, loops, other)
        if best is None or t.other_load < best.other_load:
            best = t
        if other <= BUSY_LIMIT:
            break
    gc.collect()
    return best


def time_model_steps(jstep: Callable, step: Callable, model, init: Callable, target: float) -> dict:
    """``{"jit step": Timing, "eager step": Timing}`` of a training step ``step(model, opt_state) -> (model,
    opt_state, loss)`` jitted (``jstep``) and eager, each run on from ``(model, init(model))``."""
    out = {}
    for name, fn, loops in (("jit step", jstep, 7), ("eager step", step, 5)):
        state = [(model, init(model))]

        def one(fn=fn, state=state):
            m, s, _ = fn(*state[0])
            state[0] = (m, s)
        out[name] = time_fn(one, target, loops=loops)
    return out


def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def peer_main(peers: dict[str, Callable[[], dict]]) -> bool:
    """If invoked as ``--peer NAME``, run that peer, print its JSON result and return True."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--peer")
    args, _ = ap.parse_known_args()
    if not args.peer:
        return False
    result = peers[args.peer]()
    print("RESULT " + json.dumps(result, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__")
                                 else str(o)))
    return True


def run_peer(module: str, peer: str, env: dict | None = None, timeout: float = 900) -> dict | None:
    """Run ``python -m module --peer peer`` in its own process; None (with a note) if it fails."""
    cmd = [sys.executable, "-m", module, "--peer", peer]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=os.path.dirname(os.path.dirname(__file__)))
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.stderr.write(f"[{module} {peer}] failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}\n")
    return None


def run_rows(module: str, peers: list[tuple[str, str | None]], baseline: str) -> tuple[list[dict], dict]:
    """Run each ``(peer, required_module)`` in its own process; peers whose module is missing are skipped.

    Each peer prints ``{"variants": {name: Timing-dict}, "check": [...], ...}``. Returns rows for
    ``markdown_table`` (ratios to ``baseline``) and ``{peer: extra fields}`` (first-call time, plan totals, memory
    analyses: whatever a peer reports beside its timings).
    """
    rows, extras = [], {}
    for peer, needs in peers:
        if needs and not available(needs):
            rows.append({"peer": peer, "note": f"skipped: {needs} not installed"})
            continue
        res = run_peer(module, peer)
        if res is None:
            rows.append({"peer": peer, "note": "failed (see stderr)"})
            continue
        extras[peer] = {k: v for k, v in res.items() if k != "variants"}
        for variant, t in res.get("variants", {}).items():
            rows.append({"peer": peer, "variant": variant, **t, "check": res.get("check")})
    base = next((r for r in rows if f"{r.get('peer')}/{r.get('variant')}" == baseline), None)
    for r in rows:
        if base and "median" in r:
            r["ratio"] = r["median"] / base["median"]
    return rows, extras


def run_workload(module: str, peers: list[tuple[str, str | None]], baseline: str) -> list[dict]:
    """The rows of ``run_rows`` without the extras."""
    return run_rows(module, peers, baseline)[0]


def target_lines(rows: list[dict], header: str, reference: tuple[str, str],
                 targets: list[tuple[tuple[str, str], str]]) -> list[str]:
    """A markdown table of ``(peer, variant)`` medians divided by ``reference``'s, one line per ``targets`` entry
    ``((peer, variant), target)``, from one run's rows."""
    med = medians(rows)
    ref = med.get(reference)
    lines = [f"| {header} | measured | target |", "|---|---|---|"]
    for (peer, variant), target in targets:
        m = med.get((peer, variant))
        lines.append(f"| {peer} {variant} | {m / ref:.2f}x | {target} |" if m and ref else
                     f"| {peer} {variant} | n/a | {target} |")
    return lines


def medians(rows: list[dict]) -> dict[tuple[str, str], float]:
    """``{(peer, variant): median}`` of the rows that have timings."""
    return {(r["peer"], r.get("variant")): r["median"] for r in rows if "median" in r}


def markdown_table(title: str, rows: list[dict], baseline: str) -> str:
    lines = [f"### {title}", "", f"ratio = median / median of `{baseline}` (same run)", "",
             "| peer | variant | median | min | ratio | other load (cores) | check |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "median" not in r:
            lines.append(f"| {r['peer']} | {r.get('note', '')} | | | | | |")
            continue
        check = ", ".join(f"{c:.6g}" for c in r["check"]) if r.get("check") else ""
        lines.append(f"| {r['peer']} | {r['variant']} | {fmt_time(r['median'])} | {fmt_time(r['min'])} | "
                     f"{r.get('ratio', float('nan')):.2f}x | {r['other_load']:.2f} | {check} |")
    return "\n".join(lines) + "\n"


def timing_dict(t: Timing) -> dict:
    return asdict(t)


def assert_check(name: str, got, expected, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    """Fail loudly (before timing) if a workload's check values differ from WORKLOADS.md."""
    import numpy as np
    got = [float(g) for g in got]
    if not np.allclose(got, expected, rtol=rtol, atol=atol):
        raise AssertionError(f"{name}: check values {got} differ from the expected {expected}")


def suite_cli(main: Callable[[set, str], str], only: str, out: str) -> None:
    """The command line of a suite script: ``--only W1,W2`` picks workloads, ``--out`` the markdown file written."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=only)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), out))
    args = ap.parse_args()
    text = main(set(args.only.split(",")), args.out)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
