"""Several processes under ``mpiexec`` (the mpich wheel provides it): collectives and pmap across processes,
gradients, data-parallel training and ZeRO-1 against single-process runs, the training command, and ranks that
fail (raise, hang, die) turning into errors instead of hangs. Skipped when mpi4py or mpiexec is missing."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mpiexec() -> str | None:
    for cand in (shutil.which("mpiexec"), os.path.join(sysconfig.get_path("scripts"), "mpiexec"),
                 os.path.join(os.path.dirname(sys.executable), "mpiexec")):
        if cand and os.path.exists(cand):
            return cand
    return None


MPIEXEC = _mpiexec()
try:
    import mpi4py  # noqa: F401
    HAVE_MPI4PY = True
except ImportError:
    HAVE_MPI4PY = False

pytestmark = pytest.mark.skipif(MPIEXEC is None or not HAVE_MPI4PY,
                                reason="needs mpi4py and mpiexec (pip install 'flfun[distributed]')")


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.pop("FLFUN_CPU_DEVICES", None)
    env.update(extra)
    return env


def _run(args: list, n: int | None, timeout: float = 150, **env) -> subprocess.CompletedProcess:
    cmd = ([MPIEXEC, "-n", str(n)] if n else []) + [sys.executable] + args
    return subprocess.run(cmd, cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("n,devices", [(2, 1), (4, 1), (2, 2)])
def test_collectives_pmap_training_and_zero_across_processes(n, devices):
    r = _run(["tests/mpi_checks.py"], n, FLFUN_CPU_DEVICES=str(devices))
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(re.findall(r"MPI_CHECKS_OK (\d+)", r.stdout)) == [str(i) for i in range(n)], r.stdout


@pytest.mark.parametrize("mode", ["raise", "hang", "die"])
def test_a_failing_rank_gives_errors_not_a_hang(mode):
    t0 = time.monotonic()
    r = _run(["tests/mpi_failure.py", mode], 2, timeout=90, FLFUN_COLLECTIVE_TIMEOUT="3")
    elapsed = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0 and elapsed < 60, out
    assert "rank 0 first psum [2.0, 2.0, 2.0]" in out
    if mode == "raise":
        assert "ValueError: rank 1 failed on purpose" in out
        assert "rank 0 got CollectiveAbortedError" in out and "because rank 1 failed: ValueError" in out
    if mode == "hang":
        assert "rank 0 got CollectiveTimeoutError" in out and "waited 3." in out


def test_training_command_data_parallel_matches_single_device(tmp_path):
    common = ["-m", "models.train", "mlp", "--steps", "4", "--batch-size", "64", "--no-progress"]

    def losses(name, n=None, extra=()):
        ck = str(tmp_path / name)
        r = _run(common + ["--out", ck, "--checkpoint-dir", ck, *extra], n)
        assert r.returncode == 0, r.stdout + r.stderr
        with open(os.path.join(ck, "losses.json")) as f:
            return json.load(f)
    single = losses("single")
    threads = losses("threads", extra=("--devices", "2"))
    procs = losses("procs", n=2)
    assert len(single) == 4
    assert threads == pytest.approx(single, rel=2e-5) and procs == pytest.approx(single, rel=2e-5)
