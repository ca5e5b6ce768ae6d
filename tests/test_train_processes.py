"""The training command with several processes on one machine: each sizes its BLAS pool to its share of the
cores, and only rank 0 writes outputs and messages."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from flfun.distributed import threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_VARS = ("FLFUN_CPU_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.fixture
def clean_env(monkeypatch):
    for var in (*_VARS, *threads._LOCAL_SIZE):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_the_thread_share_follows_the_processes_on_this_machine(clean_env):
    cores = threads.CORES
    assert threads.local_processes() == 1 and threads.default_cpu_threads(threads.local_processes()) == cores
    clean_env.setenv("MPI_LOCALNRANKS", "2")
    assert threads.local_processes() == 2 and threads.default_cpu_threads(2) == max(cores // 2, 1)
    clean_env.setenv("MPI_LOCALNRANKS", str(4 * cores))
    assert threads.default_cpu_threads(threads.local_processes()) == 1
    clean_env.setenv("FLFUN_CPU_THREADS", "5")
    assert threads.default_cpu_threads(2) == 5
    clean_env.delenv("FLFUN_CPU_THREADS")
    clean_env.setenv("OMP_NUM_THREADS", "1")
    assert threads.default_cpu_threads(2) is None              # the user's own setting wins


def test_train_sizes_the_blas_pool(clean_env, tmp_path):
    code = ("import sys; from models import train; from flfun.distributed import threads; "
            "train.main(sys.argv[1:]); print('threads', threads.count, [l.num_threads for l in threads.blas_libraries()])")
    args = ["mlp", "--steps", "1", "--batch-size", "8", "--no-progress", "--out", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if k not in _VARS}
    p = subprocess.run([sys.executable, "-c", code, *args, "--cpu-threads", "1"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("threads")][-1]
    assert line.startswith("threads 1 ") and set(eval(line.split(" ", 2)[2])) <= {1}, line


MPIEXEC = shutil.which("mpiexec") or os.path.join(os.path.dirname(sys.executable), "mpiexec")


@pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="needs mpiexec (pip install 'flfun[distributed]')")
def test_under_mpiexec_only_rank_0_writes(tmp_path):
    out, ckd = tmp_path / "out", tmp_path / "ck"
    env = {k: v for k, v in os.environ.items() if k not in _VARS}
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "models.train", "mlp", "--steps", "3",
                        "--batch-size", "16", "--no-progress", "--out", str(out), "--checkpoint-dir", str(ckd)],
                       cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("wrote ") == 1 and p.stderr.count("data parallel: 2 devices") == 1, (p.stdout, p.stderr)
    assert sorted(os.listdir(out)) == ["loss.png", "metrics.json"]
    assert sorted(os.listdir(ckd)) == ["checkpoint.safetensors", "losses.json"]


def _ranks(marker: str) -> list[int]:
    """Process ids of the python ranks whose command line holds ``marker`` (not mpiexec itself)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if marker in argv and "models.train" in argv and "mpiexec" not in os.path.basename(argv[0]):
            pids.append(int(pid))
    return pids


@pytest.mark.skipif(not os.path.exists(MPIEXEC), reason="needs mpiexec (pip install 'flfun[distributed]')")
def test_under_mpiexec_a_signal_to_one_rank_stops_all_after_the_same_step(tmp_path):
    import json
    import signal
    import time
    out, ckd = tmp_path / "out", tmp_path / "ck"
    p = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "models.train", "mlp", "--steps", "1000000",
                          "--batch-size", "16", "--no-progress", "--out", str(out), "--checkpoint-dir", str(ckd),
                          "--checkpoint-every", "5"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 120
    while not (ckd / "losses.json").exists():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    ranks = _ranks(str(out))
    assert len(ranks) == 2
    os.kill(max(ranks), signal.SIGTERM)         # one rank only: the other learns it inside the next step
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 143, stderr
    assert stderr.count("interrupted by SIGTERM after step") == 1 and "Traceback" not in stderr, stderr
    with open(out / "metrics.json") as f:
        m = json.load(f)
    assert m["interrupted"] and m["signal"] == "SIGTERM" and m["steps"] >= 5
    from flfun.serialization import load_metadata
    assert load_metadata(ckd / "checkpoint.safetensors")["step"] == str(m["steps"])


def test_data_parallel_stop_requests_ride_in_the_one_gradient_allreduce():
    import flfun.random as fr
    from models import train as T
    from models.data_parallel import DataParallel
    task = T.make_task("mlp", 0)
    model = task.init(fr.key(0))
    opt = T.make_optimizer(4, 2e-3, 1e-4, 2)
    dp = DataParallel(task.loss_fn, opt, devices=2, agree_stop=True)
    state = dp.init(model)
    xb, yb = task.batch(0, 16)
    requests = np.zeros((2, 65), np.float32)
    ir = dp._step.lower(model, state, dp.shard_batch(xb), dp.shard_batch(yb), requests).ir
    assert ir.count("psum[") == 1, ir           # gradients, loss and stop requests: one flat float32 buffer
    for asked in (0, 2, 15, 64):
        assert dp.step(model, state, xb, yb, asked)[3] == asked
    with pytest.raises(ValueError, match=r"stop request must be in \[0, 65\), got 65"):
        dp.step(model, state, xb, yb, 65)


def test_pmean_of_a_pytree_divides_each_flat_buffer_once():
    import flfun as fl
    from flfun.lax import pmean
    fl.set_cpu_device_count(max(2, fl.local_device_count()))
    tree = {"w": np.arange(12.0, dtype=np.float32).reshape(2, 2, 3), "b": np.array([[1, 1], [3, 3]], np.float32),
            "n": np.arange(2, dtype=np.int32)}
    f = fl.pmap(lambda t: pmean(t, "i"), "i")
    ir = f.lower(tree).ir
    assert ir.count("psum[") == 2 and ir.count(" div ") == 2, ir     # float32 leaves as one buffer, int32 alone
    out = f(tree)
    for k, v in tree.items():
        np.testing.assert_array_equal(np.asarray(out[k]), np.broadcast_to(v.mean(0).astype(v.dtype), v.shape))
