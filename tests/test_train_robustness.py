"""The training command never loses a run: signals stop it after the current step with every output written,
divergence stops it with a clear message, and path and checkpoint problems are one ``error:`` line."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from models import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--batch-size", "16", "--no-progress"]


def strict_json(path):
    """The file's JSON, refusing NaN and Infinity (which ``json.load`` accepts but JSON does not)."""
    def refuse(name):
        raise ValueError(f"{path} is not valid JSON: it holds {name}")
    with open(path) as f:
        return json.load(f, parse_constant=refuse)


def cli(*argv, timeout=120):
    return subprocess.run([sys.executable, "-m", "models.train", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(p, code, message):
    assert p.returncode == code, p.stderr
    assert "Traceback" not in p.stderr and message in p.stderr.strip().splitlines()[-1], p.stderr


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_after_the_step_and_writes_every_output(tmp_path, sig, code):
    out, ckd = tmp_path / "out", tmp_path / "ck"
    p = subprocess.Popen([sys.executable, "-m", "models.train", "mlp", *TINY, "--steps", "1000000", "--out",
                          str(out), "--checkpoint-dir", str(ckd), "--checkpoint-every", "5"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not (ckd / "losses.json").exists():        # training is under way once the first checkpoint is there
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.05)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == code, stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert f"interrupted by {signal.Signals(sig).name} after step" in stderr
    m = strict_json(out / "metrics.json")
    assert m["interrupted"] is True and m["signal"] == signal.Signals(sig).name and 5 <= m["steps"] < 1000000
    assert (out / "loss.png").exists() and len(strict_json(ckd / "losses.json")) == m["steps"]
    from flfun.serialization import load_metadata
    assert load_metadata(ckd / train.CKPT_NAME)["step"] == str(m["steps"])    # a checkpoint of the last step


def test_divergence_stops_with_one_line_and_outputs(tmp_path):
    p = cli("mlp", *TINY, "--steps", "8", "--lr", "1e30", "--out", str(tmp_path))
    one_error_line(p, 1, "error: training diverged at step")
    m = strict_json(tmp_path / "metrics.json")
    assert m["diverged"] and not m["interrupted"] and (tmp_path / "loss.png").exists()


def test_skip_nonfinite_keeps_the_model_and_counts_the_skipped_steps(tmp_path):
    import flfun.numpy as fnp
    from flfun import optim
    step = train.make_step(lambda w, x, y: fnp.sum(fnp.sqrt(w) * x) + y, optim.sgd(0.5), True,
                           skip_nonfinite=True)
    w = state = fnp.asarray([4.0, 1.0])
    state = optim.sgd(0.5).init(w)
    for x, w0, finite_loss, good in (([2.0, 1.0], 4.0, True, True),      # grad of sqrt(w) * x: x / (2 sqrt(w))
                                     ([1.0, np.nan], 3.75, False, False),
                                     ([1.0, 1.0], 0.0, True, False)):  # finite loss, infinite gradient at w=0
        w = fnp.asarray([w0, 1.0])
        w2, state, loss, ok = step(w, state, fnp.asarray(x), fnp.asarray(0.0))
        assert bool(ok) is good and bool(np.isfinite(float(loss))) is finite_loss
        want = np.asarray(w) - 0.5 * np.asarray(x) / (2 * np.sqrt(np.asarray(w))) if good else np.asarray(w)
        np.testing.assert_allclose(np.asarray(w2), want, rtol=1e-6)
    assert train.main(["mlp", *TINY, "--steps", "6", "--lr", "1e30", "--skip-nonfinite", "--out",
                       str(tmp_path)]) == 0
    m = strict_json(tmp_path / "metrics.json")
    assert m["steps"] == 6 and 1 <= m["skipped_nonfinite_steps"] <= 5 and not m["diverged"]


def test_path_problems_are_one_error_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    one_error_line(cli("mlp", "--steps", "1", "--out", str(f)), 2, f"error: --out: '{f}' is a file, not a folder")
    one_error_line(cli("mlp", "--steps", "1", "--checkpoint-dir", str(f / "sub")), 2,
                   f"error: --checkpoint-dir: cannot create '{f / 'sub'}': '{f}' is a file, not a folder")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_folder_is_a_usage_error(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(SystemExit) as e:
        train.parse_args(["mlp", "--out", str(locked / "out")])
    assert e.value.code == 2 and "is not writable" in capsys.readouterr().err


def test_resume_from_a_corrupt_checkpoint_is_one_error_line(tmp_path):
    ckd = tmp_path / "ck"
    assert train.main(["mlp", *TINY, "--steps", "2", "--out", str(tmp_path), "--checkpoint-dir", str(ckd)]) == 0
    path = ckd / train.CKPT_NAME
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    one_error_line(cli("mlp", *TINY, "--steps", "4", "--checkpoint-dir", str(ckd), "--resume", "--out",
                       str(tmp_path)), 2, "error: --resume: load:")


def test_resume_of_another_shape_is_one_error_line(tmp_path, monkeypatch):
    from flfun import serialization as checkpoint
    ckd = str(tmp_path / "ck")
    checkpoint.save(os.path.join(ckd, train.CKPT_NAME), {"model": {"w": np.ones(2)}}, {"model": "mlp", "step": "1"})
    with pytest.raises(SystemExit, match="error: --resume: .* does not fit this model: load: .* missing key"):
        train.main(["mlp", *TINY, "--steps", "2", "--checkpoint-dir", ckd, "--resume", "--out", str(tmp_path)])


def test_resume_without_losses_json_writes_valid_json(tmp_path):
    ckd, out = tmp_path / "ck", tmp_path / "out"
    assert train.main(["mlp", *TINY, "--steps", "3", "--out", str(out), "--checkpoint-dir", str(ckd)]) == 0
    os.unlink(ckd / "losses.json")
    assert train.main(["mlp", *TINY, "--steps", "3", "--out", str(out), "--checkpoint-dir", str(ckd),
                       "--resume"]) == 0      # nothing left to train: the final loss is unknown
    assert strict_json(out / "metrics.json")["final_train_loss"] is None
    assert train.main(["mlp", *TINY, "--steps", "5", "--out", str(out), "--checkpoint-dir", str(ckd),
                       "--resume"]) == 0
    m = strict_json(out / "metrics.json")
    assert m["steps"] == 5 and np.isfinite(m["final_train_loss"])
    assert strict_json(ckd / "losses.json")[:3] == [None] * 3


def test_json_safe_and_folder_problem():
    from models.runlog import folder_problem, json_safe
    assert json_safe({"a": [float("nan"), 1.0, (float("-inf"),)], "b": "x"}) == {"a": [None, 1.0, [None]], "b": "x"}
    assert folder_problem("--out", ROOT) is None and folder_problem("--out", os.path.join(ROOT, "new", "dir")) is None
