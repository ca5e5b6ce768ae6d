"""Several processes under ``mpiexec`` (the mpich wheel provides it): collectives and pmap across processes,
gradients, data-parallel training and ZeRO-1 against single-process runs, the training command, and ranks that
fail (raise, hang, die, exit, are interrupted) or call a collective wrongly (shapes, dtypes, kinds) turning
into errors on every rank instead of hangs or garbage. Skipped when mpi4py or mpiexec is missing."""
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
    return {k: v for k, v in env.items() if v is not None}          # None: unset


def _run(args: list, n: int | None, timeout: float = 150, **env) -> subprocess.CompletedProcess:
    cmd = ([MPIEXEC, "-n", str(n)] if n else []) + [sys.executable] + args
    return subprocess.run(cmd, cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("n,devices", [(2, 1), (4, 1), (2, 2)])
def test_collectives_pmap_training_and_zero_across_processes(n, devices):
    # (2, 1) runs with no BLAS thread variable: initialize() gives each rank its share of the cores
    r = _run(["tests/mpi_checks.py"], n, FLFUN_CPU_DEVICES=str(devices),
             OPENBLAS_NUM_THREADS=None if (n, devices) == (2, 1) else "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(re.findall(r"MPI_CHECKS_OK (\d+)", r.stdout)) == [str(i) for i in range(n)], r.stdout


def _misbehave(mode: str, *launcher, timeout: str = "3") -> tuple[str, float]:
    """``tests/mpi_failure.py MODE`` on 2 ranks with a collective timeout of ``timeout`` seconds: its output and
    the seconds from rank 1's misbehaving to the end of the job."""
    r = subprocess.run([*launcher, sys.executable, "tests/mpi_failure.py", mode], cwd=ROOT, capture_output=True,
                       text=True, timeout=90, env=_env(FLFUN_COLLECTIVE_TIMEOUT=timeout))
    end, out = time.time(), r.stdout + r.stderr
    assert r.returncode != 0 or mode == "die0", out       # hydra ends a job whose rank called os._exit(0) with 0
    assert "rank 0 first psum [2.0, 2.0, 2.0]" in out and "second collective returned" not in out, out
    return out, end - float(re.search(r"rank 1 misbehaves from ([\d.]+)", out).group(1))


@pytest.mark.parametrize("mode", ["raise", "hang", "die"])
def test_a_failing_rank_gives_errors_not_a_hang(mode):
    out, elapsed = _misbehave(mode, MPIEXEC, "-n", "2")
    assert elapsed < 10, out
    if mode == "raise":
        assert "ValueError: rank 1 failed on purpose" in out
        assert "rank 0 got CollectiveAbortedError" in out and "because rank 1 failed: ValueError" in out
    if mode == "hang":
        assert "rank 0 got CollectiveTimeoutError" in out and "waited 3." in out


@pytest.mark.parametrize("mode", ["exit", "interrupt", "die0"])
def test_a_rank_that_exits_or_is_interrupted_ends_the_job_at_once(mode):
    """``sys.exit`` (no excepthook) and ``KeyboardInterrupt`` reach the peers long before the 60 s timeout."""
    out, elapsed = _misbehave(mode, MPIEXEC, "-n", "2", timeout="60")
    assert elapsed < 10 and "CollectiveTimeoutError" not in out, out
    if mode == "exit":
        assert "rank 0 got CollectiveAbortedError" in out and "because rank 1 exited" in out, out
    if mode == "interrupt":
        assert "KeyboardInterrupt" in out, out


def test_peers_notice_a_rank_gone_without_notice_when_the_launcher_does_not():
    """With hydra's auto-cleanup off, ``os._exit(0)`` on rank 1 is noticed by rank 0's wait (its pid is gone)."""
    out, elapsed = _misbehave("die0", MPIEXEC, "-disable-auto-cleanup", "-n", "2", timeout="60")
    assert elapsed < 10 and "rank 0 got CollectiveAbortedError" in out and "is gone while rank 0 waits" in out, out


@pytest.mark.parametrize("mode,expect", [
    ("shape", "psum over axis 'i': ranks disagree on the operand: rank 0 f64[3], rank 1 f64[4]"),
    ("dtype", "psum over axis 'i': ranks disagree on the operand: rank 0 f64[3], rank 1 f32[3]"),
    ("kind", "ranks disagree on the collective: rank 0 psum over axis 'i' (sum) of f64[3], rank 1 all_gather "
             "over axis 'i' of f64[3]")])
def test_ranks_that_disagree_on_a_collective_all_raise_before_moving_data(mode, expect):
    out, elapsed = _misbehave(mode, MPIEXEC, "-n", "2", timeout="60")
    assert elapsed < 10, out
    for rank in (0, 1):
        assert re.search(rf"rank {rank} got CollectiveMismatchError after [\d.]+ s: .*{re.escape(expect)}", out), out


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
