"""Soak check, run by hand: random programs of op-table primitives through eager, jit, grad and vmap from several
threads for a while, against single-threaded results, watching the process's memory.

Run: ``python -m benchmarks.soak --minutes 10 --threads 4`` (``--cases 20`` for one quick batch).

A program is 1-3 op-table records (tests/op_table.py) applied to arguments drawn by their strategies, sometimes
with degenerate values (0, -0, +-inf, nan, huge) or, for elementwise primitives, empty shapes. The main thread
computes each program's eager result (checked against the record's numpy float64 reference when the values are
ordinary) and its gradient; then every worker thread runs every program of the batch eagerly, through one shared
``jit`` (so first calls race), through ``grad`` and through ``vmap`` over two stacked copies, and compares. The
resident memory is sampled after each batch: the last quarter's median may exceed the first's (after the warm-up
batch) by at most ``--max-growth-mb``. Exit status 1 on any disagreement, error or growth.
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30)


def draw_cases(n: int, seed: int) -> list:
    """``n`` programs: lists of ``(record, dtype, numpy args, params, ordinary values?)``."""
    from hypothesis import HealthCheck, Phase, given, settings, strategies as st
    from hypothesis import seed as hseed
    from op_table import RECORDS

    from flfun import primitives
    cases = []

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def gen(data):
        ops = []
        for _ in range(data.draw(st.integers(1, 3))):
            rec = data.draw(st.sampled_from(RECORDS))
            dtype = data.draw(st.sampled_from(rec.dtypes))
            args, params = data.draw(rec.args(dtype))
            args, ordinary = [np.array(a) for a in args], True
            mode = data.draw(st.integers(0, 7))
            if mode == 0 and dtype.startswith("float"):
                ordinary = False
                for a in args:
                    if a.dtype.kind == "f" and a.size:
                        a.flat[data.draw(st.integers(0, a.size - 1))] = data.draw(st.sampled_from(SPECIALS))
            elif mode == 1 and primitives.get(rec.prim).elementwise and all(a.ndim for a in args):
                ordinary, args = False, [a[..., :0] for a in args]
            ops.append((rec, dtype, args, params, ordinary))
        cases.append(ops)
    gen()
    return cases


def program(ops):
    """The flat function of a case: all arguments in, all output leaves out."""
    import flfun as fl

    def f(*xs):
        outs, i = [], 0
        for rec, _, args, params, _ in ops:
            outs += fl.tree_leaves(rec.fn(*xs[i:i + len(args)], **params))
            i += len(args)
        return outs
    return f


def _wide(a: np.ndarray) -> np.ndarray:
    """``a`` in float64 (complex128 when complex) for the reference; other dtypes as they are."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) if a.dtype.kind in "fc" else a


def _float_positions(ops) -> list:
    flat = [a for op in ops for a in op[2]]
    return [i for i, a in enumerate(flat) if a.dtype == np.float64]


def _loss(f):
    """The sum of ``f``'s float64 outputs (what the grad mode differentiates)."""
    import flfun.numpy as fnp
    return lambda *xs: sum(fnp.sum(o) for o in f(*xs) if o.dtype == np.float64)


def _differentiable(ops, outs) -> bool:
    return all(rec.diff and ok for rec, _, _, _, ok in ops) and any(np.asarray(o).dtype == np.float64 for o in outs) \
        and bool(_float_positions(ops))


def _close(what, got, want, tol) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if want.dtype.kind in "biu":
        return None if np.array_equal(got, want) else f"{what}: values differ"
    t = tol if want.dtype == np.float64 else max(tol, 1e-5)
    ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=t, atol=t, equal_nan=True)
    return None if ok else f"{what}: max abs diff {np.nanmax(np.abs(got.astype(float) - want.astype(float)))}"


def reference(ops) -> dict:
    """The single-threaded results of a case, and its disagreements with the numpy float64 reference."""
    import flfun as fl
    import flfun.numpy as fnp
    f = program(ops)
    flat = [fnp.asarray(a) for op in ops for a in op[2]]
    ref = {"eager": [np.asarray(o) for o in f(*flat)], "jit": fl.jit(f), "errors": []}
    i = 0
    for rec, dtype, args, params, ordinary in ops:
        n = len(fl.tree_leaves(rec.fn(*[fnp.asarray(a) for a in args], **params)))
        if ordinary:
            want = fl.tree_leaves(rec.ref(*[_wide(a) for a in args], **params))
            for o, w in zip(ref["eager"][i:i + n], want):
                o, w = np.asarray(o), np.asarray(w)
                tol = (1e-9, 1e-9) if dtype in ("float64", "complex128") else (rec.atol, rec.rtol)
                if o.shape != w.shape or not np.allclose(_wide(o), w, atol=tol[0], rtol=tol[1], equal_nan=True):
                    ref["errors"].append(f"{rec.name} {dtype} vs numpy float64")
        i += n
    if _differentiable(ops, ref["eager"]):
        pos = _float_positions(ops)
        ref["grad"] = [np.asarray(g) for g in fl.grad(_loss(f), argnums=tuple(pos))(*flat)]
    return ref


def run_case(ops, ref) -> list[str]:
    """Every mode of one case in this thread: the disagreements with the single-threaded results."""
    import flfun as fl
    import flfun.numpy as fnp
    f, errs = program(ops), []
    flat = [fnp.asarray(a) for op in ops for a in op[2]]
    name = "+".join(f"{op[0].name}:{op[1]}" for op in ops)
    checks = [("eager", lambda: f(*flat), ref["eager"], 1e-12), ("jit", lambda: ref["jit"](*flat), ref["eager"], 1e-9)]
    if "grad" in ref:
        checks.append(("grad", lambda: fl.grad(_loss(f), argnums=tuple(_float_positions(ops)))(*flat),
                       ref["grad"], 1e-9))
    if all(op[0].vmap for op in ops):
        checks.append(("vmap", lambda: [o[1] for o in fl.vmap(f)(*[fnp.stack([x, x]) for x in flat])],
                       ref["eager"], 1e-9))
    for mode, run, want, tol in checks:
        try:
            got = run()
            if len(got) != len(want):
                errs.append(f"{name} {mode}: {len(got)} outputs, want {len(want)}")
            errs += [f"{name} {e}" for e in (_close(f"{mode} output {k}", g, w, tol)
                                             for k, (g, w) in enumerate(zip(got, want))) if e]
        except Exception as e:        # noqa: BLE001 (every error is a finding)
            errs.append(f"{name} {mode}: {type(e).__name__}: {e}"[:300])
    return errs


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    p.add_argument("--cases", type=int, help="run this many programs in one batch instead")
    p.add_argument("--batch", type=int, default=40, help="programs per batch (default 40)")
    p.add_argument("--threads", type=int, default=4, help="worker threads (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-growth-mb", type=float, default=100.0)
    args = p.parse_args(argv)
    with warnings.catch_warnings(), np.errstate(all="ignore"):    # (degenerate values overflow on purpose)
        warnings.simplefilter("ignore")
        return soak(args)


def soak(args) -> int:
    deadline, t0 = time.monotonic() + 60 * args.minutes, time.monotonic()
    failures, samples, n_cases, prims, batch = [], [], 0, set(), 0
    with ThreadPoolExecutor(args.threads) as pool:
        while batch == 0 or (args.cases is None and time.monotonic() < deadline):
            cases = draw_cases(args.cases or args.batch, args.seed + batch)
            refs = []
            for ops in cases:
                try:
                    refs.append(reference(ops))
                except Exception as e:   # noqa: BLE001 (degenerate values may make a matrix singular: no case)
                    refs.append(None)
                    if all(op[4] for op in ops):
                        failures.append(f"reference {[op[0].name for op in ops]}: {type(e).__name__}: {e}"[:300])
            failures += [e for r in refs if r for e in r["errors"]]
            work = [(ops, r) for ops, r in zip(cases, refs) if r]

            def worker(t):
                order = random.Random(t).sample(work, len(work))
                return [e for ops, r in order for e in run_case(ops, r)]
            for errs in pool.map(worker, range(args.threads)):
                failures += errs
            n_cases += len(work)
            prims |= {op[0].prim for ops in cases for op in ops}
            del cases, refs, work
            gc.collect()
            samples.append(rss_mib())
            batch += 1
    growth = 0.0
    if len(samples) >= 5:
        q = max(1, (len(samples) - 1) // 4)
        growth = float(np.median(samples[-q:]) - np.median(samples[1:1 + q]))
        if growth > args.max_growth_mb:
            failures.append(f"memory: resident size grew {growth:.0f} MiB ({samples[1]:.0f} -> {samples[-1]:.0f})")
    print(f"soak: {n_cases} programs ({len(prims)} primitives) x {args.threads} threads, {batch} batches in "
          f"{time.monotonic() - t0:.0f} s; resident {samples[0]:.0f} -> {samples[-1]:.0f} MiB (growth {growth:.0f}); "
          f"{len(failures)} failures")
    for f in failures[:20]:
        print("  FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
