"""The fused CPU kernels (flfun/backends/cfuse/) on W3, W5 and W6: the jit step with the fused path on and off at
1 and 2 threads, the first call with a cold and a warm kernel cache, and the time split of one step (GEMMs and
convolutions / fused kernels / other equations) from ``Executable.profile``. Peers: ``benchmarks.run``.

Run: ``python -m benchmarks.cpu_fusion`` (``W3,W6`` as an argument for a subset).
"""
from __future__ import annotations

import collections
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks.harness import fmt_time, time_fn

GEMMS = {"dot_general", "conv_general_dilated"}
T = 0.3


def workload(name: str):
    """``(step, args, advance)``: W3/W5/W6's flfun step, its first arguments and ``advance(jitted, args) ->
    next args``."""
    import flfun.numpy as fnp
    if name == "W3":
        from benchmarks import w3_mlp as w
        pn, xn, yn = w.data()
        args = ([(fnp.asarray(a), fnp.asarray(b)) for a, b in pn], fnp.asarray(xn), fnp.asarray(yn))
        return w.flfun_step, args, lambda j, a: (j(*a)[0],) + a[1:]
    if name == "W5":
        from benchmarks import w5_cnn as w
        params, xn, yn = w.data()
        step, opt = w.flfun_step_fn(fnp.asarray(xn), fnp.asarray(yn))
        model = w.flfun_model(params)
    else:
        from benchmarks import w6_transformer as w
        wte, wpe, layers, w_head, xn, yn = w.data()
        opt, step = w.flfun_step_fn(fnp.asarray(xn), fnp.asarray(yn))
        model = w.flfun_model(wte, wpe, layers, w_head)
    return step, (model, opt.init(model)), lambda j, a: tuple(j(*a)[:2])


def split(jitted, args) -> str:
    """One step's time by kind of equation (medians of 5 instrumented runs)."""
    from flfun.tree import tree_flatten
    exe = jitted.lower(*args).compile().executable
    leaves, _ = tree_flatten((args, {}))
    kinds: collections.Counter = collections.Counter()
    for _, prim, t in exe.profile(*[x._value for x in leaves]):
        kinds["GEMM/conv" if prim in GEMMS else "fused" if prim.startswith("flfun_fused") else "other"] += t
    total = sum(kinds.values())
    return ", ".join(f"{k} {fmt_time(v)} ({v / total:.0%})" for k, v in kinds.most_common())


def first_call(name: str, fused: bool, cache: str) -> float:
    """The first call (trace, passes, kernels, plan, run) in a fresh process with the kernel cache ``cache``."""
    import subprocess
    env = dict(os.environ, FLFUN_CACHE_DIR=cache, FLFUN_CPU_FUSION="1" if fused else "0")
    code = ("import time, flfun as fl; from benchmarks.cpu_fusion import workload; s, a, adv = workload(%r); "
            "t = time.perf_counter(); adv(fl.jit(s), a); print(time.perf_counter() - t)" % name)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main(names: list[str]) -> str:
    import flfun as fl
    from flfun.config import config
    from flfun.distributed import threads
    lines = ["| workload | path | threads | median | min | split of one step |", "|---|---|---|---|---|---|"]
    firsts = ["| workload | numpy path | fused, warm cache | fused, cold cache |", "|---|---|---|---|"]
    for name in names:
        step, args, advance = workload(name)
        for fused in (False, True):
            config.cpu_fusion = fused
            for n in (1, 2):
                threads.set_cpu_threads(n)
                jitted, state = fl.jit(step), [args]

                def one(jitted=jitted, state=state):
                    state[0] = advance(jitted, state[0])
                t = time_fn(one, T, loops=5)
                path = "fused C kernels" if fused else "numpy impls"
                lines.append(f"| {name} | {path} | {n} | {fmt_time(t.median)} | {fmt_time(t.min)} | "
                             f"{split(jitted, state[0])} |")
        threads.set_cpu_threads(threads.CORES)
        with tempfile.TemporaryDirectory() as cold:
            times = [first_call(name, False, cold), first_call(name, True, cold)]
            times.insert(1, first_call(name, True, cold))          # the cache the cold call just filled
        firsts.append(f"| {name} | " + " | ".join(f"{t:.3f} s" for t in times) + " |")
        print(lines[-4:], firsts[-1], flush=True)
    config.cpu_fusion = True
    return "\n".join(["### jit step: numpy impls vs fused C kernels", "", *lines, "",
                      "### first call (fresh process)", "", *firsts, ""])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", os.getcwd())
    print(main(sys.argv[1].split(",") if len(sys.argv) > 1 else ["W3", "W5", "W6"]))
