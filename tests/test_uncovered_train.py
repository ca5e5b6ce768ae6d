"""The training command as a user runs it first (flags, outputs, resume, profile, data parallel, sample) and the
checkpoint file details it relies on (saved leaf order, checksums of older files)."""
import dataclasses
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import flfun.random as fr
from flfun import serialization as ck
from flfun.tree import register_pytree_node
from models import cnn, data, train
from models import transformer as T

TINY = ["--steps", "4", "--batch-size", "16", "--no-progress"]


def read_json(path):
    with open(path) as f:
        return json.load(f)


def run(argv):
    assert train.main(argv) == 0


# ---------------------------------------------------------------------------------------------------- flags
@pytest.mark.parametrize("argv,message", [
    (["mlp", "--steps", "abc"], "--steps: expected a positive int, got 'abc'"),
    (["mlp", "--time-limit", "inf"], "--time-limit: expected a positive float, got 'inf'"),
    (["mlp", "--weight-decay", "-1"], "--weight-decay: expected a non-negative number, got '-1'"),
    (["mlp", "--weight-decay", "x"], "--weight-decay: expected a non-negative number, got 'x'"),
    (["mlp", "--checkpoint-every", "5"], "--checkpoint-every needs --checkpoint-dir"),
])
def test_bad_flags_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_help_lists_the_models_and_options():
    text = train.build_parser().format_help()
    assert "{mlp,cnn,transformer,lstm,sample}" in text and "--time-limit" in text and "--zero" in text


def test_cupy_backend_without_cupy_is_a_usage_error(capsys):
    try:
        import cupy  # noqa: F401
        pytest.skip("cupy is installed")
    except ImportError:
        pass
    with pytest.raises(SystemExit):
        train.parse_args(["mlp", "--backend", "cupy"])
    assert "--backend cupy: cupy is not installed" in capsys.readouterr().err


def test_readme_quick_start_command_runs(tmp_path):
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "models.train", "mlp", *TINY, "--out", str(out)],
                       capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr
    assert "test_accuracy=" in r.stdout and f"wrote {out / 'metrics.json'}" in r.stdout
    assert read_json(out / "metrics.json")["steps"] == 4 and (out / "loss.png").exists()


# ------------------------------------------------------------------------------------------------- training
def test_progress_bar_and_no_jit_match_the_jitted_run(tmp_path, capsys):
    run(["mlp", *TINY, "--out", str(tmp_path / "a"), "--checkpoint-dir", str(tmp_path / "a")])
    run(["mlp", *TINY[:-1], "--no-jit", "--out", str(tmp_path / "b"), "--checkpoint-dir", str(tmp_path / "b")])
    assert "4/4" in capsys.readouterr().out                  # the progress bar went to stdout
    jitted, eager = read_json(tmp_path / "a" / "losses.json"), read_json(tmp_path / "b" / "losses.json")
    assert len(eager) == 4 and eager == pytest.approx(jitted, rel=1e-5)
    assert read_json(tmp_path / "b" / "metrics.json")["jit"] is False


def test_checkpoint_every_and_resume_past_the_end(tmp_path, monkeypatch, capsys):
    saved, save = [], train._save

    def recording_save(args, model, opt_state, step, *rest):
        saved.append(step)
        save(args, model, opt_state, step, *rest)
    monkeypatch.setattr(train, "_save", recording_save)
    ckd, out = str(tmp_path / "ck"), str(tmp_path / "o")
    run(["mlp", *TINY, "--steps", "5", "--checkpoint-dir", ckd, "--checkpoint-every", "2", "--out", out])
    assert saved == [2, 4, 5] and len(read_json(os.path.join(ckd, "losses.json"))) == 5
    run(["mlp", *TINY, "--steps", "3", "--checkpoint-dir", ckd, "--resume", "--out", out])
    assert "checkpoint is already at step 5 >= --steps 3; evaluating only" in capsys.readouterr().out
    m = read_json(os.path.join(out, "metrics.json"))
    assert m["steps"] == 5 and m["resumed_from"] == 5 and m["steps_per_s"] is None


def test_resume_without_steps_keeps_the_schedule_of_the_checkpoint(tmp_path):
    ckd, out = str(tmp_path / "ck"), str(tmp_path / "o")
    run(["mlp", *TINY, "--steps", "6", "--weight-decay", "0", "--time-limit", "1e-9", "--checkpoint-dir", ckd,
         "--out", out])
    assert read_json(os.path.join(out, "metrics.json"))["weight_decay"] == 0.0
    assert ck.load_metadata(os.path.join(ckd, train.CKPT_NAME))["step"] == "1"
    run(["mlp", "--batch-size", "16", "--no-progress", "--checkpoint-dir", ckd, "--resume", "--out", out])
    m = read_json(os.path.join(out, "metrics.json"))
    assert m["steps"] == m["steps_planned"] == 6 and m["resumed_from"] == 1


def test_loss_plot_with_a_moving_average(tmp_path):
    train.plot_losses(list(np.linspace(2.3, 0.1, 200)), str(tmp_path / "loss.png"), "mlp")
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_mpiexec_is_detected_from_its_environment(monkeypatch):
    from models import data_parallel
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert not data_parallel.launched_by_mpiexec()
    monkeypatch.setenv("PMI_SIZE", "")
    assert not data_parallel.launched_by_mpiexec()
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert data_parallel.launched_by_mpiexec()


def test_resume_with_another_seed_is_an_error(tmp_path):
    ckd = str(tmp_path / "ck")
    run(["mlp", *TINY, "--steps", "1", "--seed", "3", "--checkpoint-dir", ckd, "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="trained with --seed 3, not 0; resume with the same seed"):
        train.main(["mlp", *TINY, "--checkpoint-dir", ckd, "--resume", "--out", str(tmp_path)])


def test_divergence_is_reported(tmp_path, capsys):
    ckd = str(tmp_path / "ck")
    assert train.main(["mlp", *TINY, "--steps", "8", "--lr", "1e30", "--out", str(tmp_path),
                       "--checkpoint-dir", ckd]) == 1
    err = capsys.readouterr().err
    assert "error: training diverged at step" in err and "try a smaller --lr" in err
    m = read_json(tmp_path / "metrics.json")
    assert m["diverged"]["step"] == m["steps"] + 1 and m["diverged"]["loss"] in ("nan", "inf")
    assert not m["interrupted"] and (tmp_path / "loss.png").exists() and not os.path.exists(ckd)


@pytest.mark.parametrize("steps", ["3", "1"])
def test_profile_of_a_run_shorter_than_ten_steps(tmp_path, steps):
    run(["mlp", *TINY, "--steps", steps, "--profile", "--out", str(tmp_path)])
    assert "dot_general" in (tmp_path / "profile.txt").read_text()
    events = read_json(tmp_path / "trace.json")["traceEvents"]
    assert any(e.get("name") == "dot_general" and e["ph"] == "X" for e in events)


def test_data_parallel_and_zero_match_one_device(tmp_path):
    def final_loss(name, *extra):
        run(["mlp", *TINY, "--batch-size", "32", "--out", str(tmp_path / name), *extra])
        return read_json(tmp_path / name / "metrics.json")["final_train_loss"]
    single = final_loss("single")
    assert final_loss("dp", "--devices", "2") == pytest.approx(single, rel=1e-4)
    assert final_loss("zero", "--devices", "2", "--zero") == pytest.approx(single, rel=1e-4)
    with pytest.raises(SystemExit, match="batch size 64 does not split evenly over 3 devices; pass a --batch-size"):
        train.main(["mlp", "--steps", "1", "--devices", "3", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--zero shards the optimizer state .* --checkpoint-dir or --resume"):
        train.main(["mlp", *TINY, "--zero", "--checkpoint-dir", str(tmp_path / "ck"), "--out", str(tmp_path)])


# ------------------------------------------------------------------------------------------------ sampling
def test_sample_errors(tmp_path):
    with pytest.raises(SystemExit, match="sample: no checkpoint at .*train first"):
        train.main(["sample", "--checkpoint-dir", str(tmp_path / "none")])
    ckd = str(tmp_path / "ck")
    run(["mlp", *TINY, "--steps", "1", "--checkpoint-dir", ckd, "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="holds a 'mlp' model, not a transformer"):
        train.main(["sample", "--checkpoint-dir", ckd])
    like = {"w": np.zeros((2, 3), np.float32)}
    with pytest.raises(ck.CheckpointError, match="sample: the checkpoint lacks key 'model.w'"):
        train._restore(like, {})
    with pytest.raises(ck.CheckpointError, match=r"key 'model.w' has shape \(3, 2\), the config expects \(2, 3\)"):
        train._restore(like, {"w": np.zeros((3, 2), np.float32)})


# ---------------------------------------------------------------------------------------------- model APIs
def test_model_and_data_argument_errors(monkeypatch):
    with pytest.raises(ValueError, match="CNN: pool must be 'avg' or 'max', got 'min'"):
        cnn.CNN(key=fr.key(0), pool="min")
    model = T.init(fr.key(0), T.GPTConfig(d_model=8, num_heads=2, num_layers=1, seq_len=8))
    with pytest.raises(ValueError, match="generate: temperature must be positive, got 0"):
        T.generate(model, data.encode("a"), 2, fr.key(0), temperature=0)
    small = data.load_text_corpus(max_chars=1000)
    assert len(small.train) == 1000 and len(small.val) == 100
    with pytest.raises(ValueError, match="bits_per_char: text of 8 characters is shorter than one window of 9"):
        T.bits_per_char(model, small.val[:8])
    monkeypatch.setattr(data, "stdlib_files", lambda: [])
    with pytest.raises(RuntimeError, match="load_text_corpus: found no standard-library"):
        data.load_text_corpus()


# ---------------------------------------------------------------------------------------------- checkpoints
def test_load_without_template_keeps_the_saved_order(tmp_path):
    tree = {"layers": [np.full(2, i, np.float32) for i in range(12)], "count": np.int64(3)}
    path = ck.save(tmp_path / "c.safetensors", tree, {"step": "1"})
    names = ck.tree_paths(tree)[0]
    assert list(ck.load(path)) == names == ["count"] + [f"layers.{i}" for i in range(12)]
    meta = ck.load_metadata(path)
    assert set(meta) == {"step", "format", "sha256"} and meta["sha256"] != "0" * 64


def test_save_serialises_once(tmp_path, monkeypatch):
    import safetensors.numpy
    calls, real = [], safetensors.numpy.save
    monkeypatch.setattr(safetensors.numpy, "save", lambda *a: calls.append(1) or real(*a))
    ck.save(tmp_path / "c.safetensors", {"w": np.ones(3, np.float32), "n": np.arange(2)})
    assert len(calls) == 1


def _session2_file(path, arrays: dict) -> None:
    """The hand-written writer of session 2: header and data in tree order, SHA-256 of the data."""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, offset, body = {}, 0, b""
    for n, a in arrays.items():
        header[n] = {"dtype": codes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        body += a.tobytes()
    header["__metadata__"] = {"format": "flfun", "sha256": hashlib.sha256(body).hexdigest()}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + body)


def _double_serialising_file(path, arrays: dict) -> None:
    """The writer before the leaf order was stored: serialise, hash the data, serialise again with the hash."""
    import safetensors.numpy as stn
    blob = stn.save(arrays, {"format": "flfun"})
    start = 8 + struct.unpack("<Q", blob[:8])[0]
    with open(path, "wb") as f:
        f.write(stn.save(arrays, {"format": "flfun", "sha256": hashlib.sha256(blob[start:]).hexdigest()}))


@pytest.mark.parametrize("writer", [_session2_file, _double_serialising_file])
def test_files_of_earlier_writers_still_verify(tmp_path, writer):
    arrays = {"z": np.arange(3, dtype=np.float32), "a": np.arange(4, dtype=np.int64).reshape(2, 2)}
    path = str(tmp_path / "old.safetensors")
    writer(path, arrays)
    back = ck.load(path)
    assert list(back) == ["a", "z"]                    # no stored order: sorted
    for n, a in arrays.items():
        np.testing.assert_array_equal(np.asarray(back[n]), a)
    raw = bytearray(open(path, "rb").read())
    raw[-1] ^= 1
    open(path, "wb").write(bytes(raw))
    with pytest.raises(ck.CheckpointError, match="does not match its SHA-256 checksum"):
        ck.load(path)


def test_dataclass_registered_by_hand_is_named_by_field():
    @dataclasses.dataclass
    class Pair:
        left: object
        right: object
    register_pytree_node(Pair, lambda p: ((p.left, p.right), None), lambda _, c: Pair(*c))
    assert ck.tree_paths({"p": Pair(np.ones(1), np.zeros(1))})[0] == ["p.left", "p.right"]
