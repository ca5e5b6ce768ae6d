"""Data-parallel W3 (the MLP training step of WORKLOADS.md) on 1 vs 2 processes under mpiexec: weak scaling.

Every process runs the W3 step on its own batch of 256 (the same W3 batch on every rank, so the averaged gradient
equals the single-process gradient and the W3 check values hold), with one BLAS thread per process; gradients
are averaged with ``pmean`` (MPI allreduce). No thread variable is set: under mpiexec, ``initialize()`` gives
each rank its share of the cores, and 2 devices in one process split them; the 1-process baseline limits BLAS
to one thread itself (threadpoolctl), the same per-process work. Weak-scaling efficiency = step time on 1 process / step time on 2.
Also: the same on 2 in-process CPU devices (threads), the 1-process run twice at once without any collective
(the most two processes can reach here), the time spent in collectives (psum impls, and a bare allreduce of the
gradient bytes), and Adam's optimizer-state bytes per device with and without ZeRO-1.

Run: ``python -m benchmarks.dp_scaling`` (writes ``benchmarks/dp_scaling.md`` and the raw rounds to
``dp_scaling.json``). The machine is shared: configurations are measured in interleaved rounds, each timed loop
records the CPU that other processes used (``/proc/stat``), and only quiet rounds make the headline figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from benchmarks.harness import assert_check, fmt_time
from benchmarks.w3_mlp import CHECK, LR, data, mlp_loss as _loss

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 0.5          # seconds per timed loop
LOOPS = 7


# ------------------------------------------------------------------------------------------------ worker
def _dp_step(params, x, y):
    import flfun as fl
    from flfun.lax import pmean
    value, grads = fl.value_and_grad(_loss)(params, x, y)
    grads, value = pmean((grads, value), "i")          # one allreduce of the gradients and the loss together
    return [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)], value


class _Clock:
    """Wall time spent inside collective impls, per device thread (wraps the registered impls)."""

    def __init__(self, names=("psum", "psum_scatter", "all_gather")):
        import threading
        import flfun.numpy as fnp
        from flfun import primitives, register_impl
        fnp.zeros(1)                       # install the numpy impls before wrapping them
        self.total, self.calls, self.lock = 0.0, 0, threading.Lock()
        for name in names:
            prim = primitives.get(name)
            register_impl(prim, "numpy", self.wrap(prim.impls["numpy"]))

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.total += time.perf_counter() - t0
                    self.calls += 1
        return timed


def _sync_n(comm, n: int) -> int:
    return comm.bcast(n, root=0) if comm is not None else n


def _jiffies():
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)
    with open("/proc/self/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return busy, int(parts[11]) + int(parts[12])


def _time_steps(call, comm, clock=None):
    """Median/min per-call time over LOOPS loops of n calls (n chosen by rank 0), with the CPU use of
    processes other than ours during the loops (in cores) and the collective time the clock saw per call."""
    for _ in range(3):
        call()
    t0 = time.perf_counter()
    for _ in range(3):
        call()
    n = _sync_n(comm, max(1, int(TARGET / ((time.perf_counter() - t0) / 3))))
    times = []
    c0, k0 = (clock.total, clock.calls) if clock else (0.0, 0)
    b0, o0 = _jiffies()
    w0 = time.perf_counter()
    for _ in range(LOOPS):
        t = time.perf_counter()
        for _ in range(n):
            call()
        times.append((time.perf_counter() - t) / n)
    wall = time.perf_counter() - w0
    b1, o1 = _jiffies()
    own = o1 - o0
    if comm is not None:
        own = comm.allreduce(own)
    elif os.environ.get("DP_SCALING_SOLO"):      # the other lone process's CPU is ours too (about as much)
        own *= 2
    other = max(0.0, ((b1 - b0) - own) / os.sysconf("SC_CLK_TCK") / wall)
    times.sort()
    out = {"median": times[len(times) // 2], "min": times[0], "n": n, "other_load": other}
    if clock:
        out["collective_s"] = (clock.total - c0) / (n * LOOPS)
        out["collective_calls"] = (clock.calls - k0) / (n * LOOPS)
    return out


def worker() -> dict:
    """One configuration: this process (maybe one of several under mpiexec) with its local CPU devices."""
    import flfun as fl
    import flfun.distributed as dist
    import flfun.numpy as fnp
    from flfun.distributed.devices import local_device_count, process_count, process_index
    from flfun.distributed.pmap import pmap
    comm = None
    if int(os.environ.get("PMI_SIZE", "1")) > 1 and not os.environ.get("DP_SCALING_SOLO"):
        dist.initialize()
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    rank, procs, local = process_index(), process_count(), local_device_count()
    if procs == 1 and local == 1:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1, "blas")
    clock = _Clock()
    pn, xn, yn = data()
    params = [(fnp.asarray(w), fnp.asarray(b)) for w, b in pn]
    xs, ys = np.stack([xn] * local), np.stack([yn] * local)        # the W3 batch on every device
    step = pmap(_dp_step, "i", in_axes=(None, 0, 0), out_axes=(None, None))
    state, check = params, []
    for _ in range(3):
        state, loss = step(state, xs, ys)
        check.append(float(loss))
    assert_check(f"W3 data parallel ({procs} processes x {local} devices)", check, CHECK)
    res = {"processes": procs, "devices_per_process": local, "check": check}
    st = [params]

    def one():
        st[0], _ = step(st[0], xs, ys)
    res["dp"] = _time_steps(one, comm, clock)
    res["collective_s_per_step"] = res["dp"]["collective_s"] / local
    res["collective_calls_per_step"] = res["dp"]["collective_calls"] / local
    if procs == 1 and local == 1:
        jstep = fl.jit(lambda p, x, y: _dp_like_single(p, x, y))
        jst = [params]
        xj, yj = fnp.asarray(xn), fnp.asarray(yn)

        def jone():
            jst[0], _ = jstep(jst[0], xj, yj)
        res["jit"] = _time_steps(jone, None)
    if comm is not None:
        res["allreduce"] = _bare_allreduce(dist, pn)
    res.update(_zero_memory(pn))
    return res if rank == 0 else {}


def _dp_like_single(params, x, y):
    import flfun as fl
    value, grads = fl.value_and_grad(_loss)(params, x, y)
    return [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, grads)], value


def _bare_allreduce(dist, pn) -> dict:
    """MPI allreduce of W3's gradient buffers alone (ranks in step: a barrier first), per step."""
    comm = dist.world().comm
    bufs = [a for wb in pn for a in wb]
    outs = [np.empty_like(b) for b in bufs]          # as in the step, where the plan gives each psum its buffer
    comm.comm.Barrier()
    times = []
    for _ in range(15):
        comm.comm.Barrier()
        t = time.perf_counter()
        for b, o in zip(bufs, outs):
            comm.allreduce(comm.rank, b, out=o)
        times.append(time.perf_counter() - t)
    times.sort()
    nbytes = sum(b.nbytes for b in bufs)
    return {"median": times[len(times) // 2], "min": times[0], "bytes": nbytes}


def _zero_memory(pn) -> dict:
    """Adam state bytes on one device: unsharded, and with ZeRO-1 over this configuration's devices."""
    import flfun.numpy as fnp
    from flfun import optim
    from flfun.distributed.devices import local_device_count
    from flfun.optim.sharded import sharded, state_bytes_per_device
    from flfun.distributed.pmap import pmap
    params = [(fnp.asarray(w), fnp.asarray(b)) for w, b in pn]
    full = state_bytes_per_device(optim.adam(1e-3).init(params))
    zinit = pmap(sharded(optim.adam(1e-3), "i").init, "i", in_axes=None, axis_size=local_device_count())
    return {"adam_state_bytes": full, "zero_adam_state_bytes": state_bytes_per_device(zinit(params)),
            "n_params": int(sum(a.size for wb in pn for a in wb))}


# ------------------------------------------------------------------------------------------------ driver
def _mpiexec() -> str:
    import shutil
    import sysconfig
    for cand in (shutil.which("mpiexec"), os.path.join(sysconfig.get_path("scripts"), "mpiexec")):
        if cand and os.path.exists(cand):
            return cand
    return "mpiexec"


CONFIGS = {
    "1 process": ([], {"FLFUN_CPU_DEVICES": "1"}),
    "2 processes (mpiexec)": ([_mpiexec(), "-n", "2"], {"FLFUN_CPU_DEVICES": "1"}),
    "2 devices, 1 process (threads)": ([], {"FLFUN_CPU_DEVICES": "2"}),
    # the 1-process run twice at once, unconnected: what running two ranks' compute side by side costs
    "2 lone processes at once": ([_mpiexec(), "-n", "2"], {"FLFUN_CPU_DEVICES": "1", "DP_SCALING_SOLO": "1"}),
}


_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "FLFUN_CPU_THREADS")


def _run_config(name: str) -> dict | None:
    pre, env = CONFIGS[name]
    env = {**{k: v for k, v in os.environ.items() if k not in _THREAD_VARS}, "PYTHONPATH": ROOT, **env}
    cmd = pre + [sys.executable, "-m", "benchmarks.dp_scaling", "--worker"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.stderr.write(f"[{name}] failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}\n")
    return None


def _busy_cores(seconds: float = 2.0) -> float:
    """Cores other processes keep busy (this one is idle meanwhile), from /proc/stat."""
    b0, _ = _jiffies()
    time.sleep(seconds)
    b1, _ = _jiffies()
    return (b1 - b0) / os.sysconf("SC_CLK_TCK") / seconds


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


QUIET = 0.3       # cores of other processes' CPU above which a round is measured again


def main(rounds: int, budget: float) -> tuple[str, list]:
    """Measure rounds (every configuration once each) until ``rounds`` quiet ones (other processes below
    QUIET cores during every timed loop) or ``budget`` seconds; returns the report and all rounds."""
    log: list[dict] = []
    t0 = time.time()
    while sum(r["quiet"] for r in log) < rounds and time.time() - t0 < budget:
        while _busy_cores() > QUIET and time.time() - t0 < budget:     # wait for a quieter machine
            time.sleep(5)
        load0 = _loadavg()
        got = {name: _run_config(name) for name in CONFIGS}
        busy = max((r["dp"]["other_load"] for r in got.values() if r), default=0.0)
        log.append({"results": got, "other_load": busy, "quiet": busy <= QUIET and all(got.values()),
                    "loadavg": [load0, _loadavg()]})
        print(f"round {len(log)}: other processes used up to {busy:.2f} cores", file=sys.stderr)
    return report(log), log


def report(log: list) -> str:
    med = lambda xs: float(np.median(xs)) if xs else float("nan")        # noqa: E731
    quiet = [r for r in log if r["quiet"]] or log
    results = {name: [r["results"][name] for r in quiet if r["results"].get(name)] for name in CONFIGS}
    one = med([r["dp"]["median"] for r in results["1 process"]])
    one_min = min((r["dp"]["min"] for r in results["1 process"]), default=float("nan"))
    which = (f"the {len(quiet)} quiet rounds of {len(log)} (other processes below {QUIET} cores throughout)"
             if any(r["quiet"] for r in log) else f"all {len(log)} rounds (none was quiet: read with care)")
    lines = ["### Data-parallel W3: weak scaling (256 examples per process, one BLAS thread each)", "",
             f"2-core machine shared with other work; figures from {which}: medians over rounds of each round's "
             f"median step time (7 loops of n steps).", "",
             "| configuration | step (median) | efficiency | step (min) | efficiency (min) | in collectives per "
             "step | collective calls / step | other load (cores) | check |", "|---|---|---|---|---|---|---|---|---|"]
    for name, rs in results.items():
        if not rs:
            lines.append(f"| {name} | failed | | | | | | | |")
            continue
        t, tmin = med([r["dp"]["median"] for r in rs]), min(r["dp"]["min"] for r in rs)
        lines.append(f"| {name} | {fmt_time(t)} | {one / t:.2f} | {fmt_time(tmin)} | {one_min / tmin:.2f} | "
                     f"{fmt_time(med([r['collective_s_per_step'] for r in rs]))} | "
                     f"{rs[0]['collective_calls_per_step']:.0f} | {med([r['dp']['other_load'] for r in rs]):.2f} "
                     f"| {', '.join(f'{c:.6g}' for c in rs[0]['check'])} |")
    lines += ["", "Efficiency = 1-process step time / this configuration's (same work per process: ideal 1.00). "
                  "'2 lone processes at once' runs the 1-process configuration twice side by side, not connected "
                  "(no collective): its efficiency is the most data parallelism over 2 processes can reach on "
                  "this machine. Per round (other load in cores: step medians 1 process / 2 processes / 2 "
                  "threads / 2 lone processes):"]
    for k, r in enumerate(log, 1):
        ts = [r["results"][n]["dp"]["median"] if r["results"].get(n) else float("nan") for n in CONFIGS]
        la = f"; /proc/loadavg {r['loadavg'][0]} before, {r['loadavg'][1]} after" if "loadavg" in r else ""
        lines.append(f"- round {k} ({r['other_load']:.2f}{', quiet' if r['quiet'] else ''}{la}): "
                     f"{' / '.join(fmt_time(t) for t in ts)}; efficiency {ts[0] / ts[1]:.2f} (MPI), "
                     f"{ts[0] / ts[2]:.2f} (threads), {ts[0] / ts[3]:.2f} (lone processes)")
    if results["1 process"] and "jit" in results["1 process"][0]:
        j = med([r["jit"]["median"] for r in results["1 process"]])
        lines += ["", f"Plain `jit` W3 step in the 1-process run (no pmap, no collective): {fmt_time(j)}; "
                      f"pmap over one device costs {one / j:.2f}x that."]
    mp = results["2 processes (mpiexec)"]
    if mp and "allreduce" in mp[0]:
        a = med([r["allreduce"]["median"] for r in mp])
        nb = mp[0]["allreduce"]["bytes"]
        lines += ["", f"Bare MPI allreduce of the 6 gradient buffers ({nb / 1e6:.2f} MB) between 2 processes, ranks "
                      f"in step: {fmt_time(a)} per step ({nb / a / 1e9:.2f} GB/s of gradient)."]
    z = next((r for r in mp or []), None) or next((r for r in results["2 devices, 1 process (threads)"]), None)
    base = results["1 process"][0] if results["1 process"] else None
    if z and base:
        full, zero = base["adam_state_bytes"], z["zero_adam_state_bytes"]
        lines += ["", f"Adam optimizer state per device for W3's {base['n_params']:,} parameters: unsharded "
                      f"{full:,} bytes; ZeRO-1 over 2 devices {zero:,} bytes ({zero / full:.4f} of unsharded: 8 "
                      f"bytes per parameter / 2, plus the 4-byte step count and padding)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3, help="quiet rounds wanted")
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds to spend at most (waiting included)")
    ap.add_argument("--nice", type=int, default=0, help="lower this benchmark's niceness by N (root only: on a "
                    "shared machine the others' processes then disturb it less)")
    a = ap.parse_args()
    if a.nice:
        os.nice(-a.nice)
    if a.worker:
        out = worker()
        if out:                                   # rank 0 reports; the other ranks stay quiet
            print("RESULT " + json.dumps(out), flush=True)
    else:
        text, log = main(a.rounds, a.budget)
        print(text)
        here = os.path.dirname(__file__)
        with open(os.path.join(here, "dp_scaling.md"), "w") as f:
            f.write(text)
        with open(os.path.join(here, "dp_scaling.json"), "w") as f:
            json.dump(log, f, indent=1)
