"""models/lstm.py: the character LSTM (state carried across calls), and ``python -m models.train lstm`` end to end
on a tiny configuration: metrics, plot, checkpoint, resume to the same parameters, and ``sample``."""
import json
import os

import numpy as np
import pytest

import flfun.numpy as fnp
import flfun.random as fr
from flfun import serialization as checkpoint
from flfun.distributed import threads
from models import data
from models import lstm as L
from models import train

TINY = L.LSTMConfig(embed_dim=8, hidden_size=16, seq_len=16)


def test_state_carries_across_calls_and_generation():
    model = L.init(fr.key(0), TINY)
    x = fnp.asarray(np.random.default_rng(0).integers(0, 96, (2, 12)).astype(np.int32))
    whole = np.asarray(model(x))
    first, state = model(x[:, :5], return_state=True)
    rest = model(x[:, 5:], state)
    assert whole.shape == (2, 12, 96)
    np.testing.assert_allclose(np.concatenate([np.asarray(first), np.asarray(rest)], 1), whole, atol=1e-5)
    ids = L.generate(model, data.encode("def "), 6, fr.key(1))
    assert ids.shape == (6,) and ids.dtype == np.int32 and 0 <= ids.min() and ids.max() < 96
    with pytest.raises(ValueError, match="temperature must be positive"):
        L.generate(model, data.encode("x"), 2, fr.key(1), temperature=0)


def test_train_command_checkpoint_resume_and_sample(tmp_path, monkeypatch, capsys, request):
    monkeypatch.setattr(L, "LSTMConfig", lambda: TINY)
    for var in ("FLFUN_CPU_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    out, ck, ck2 = (str(tmp_path / n) for n in ("out", "ck", "ck2"))
    common = ["lstm", "--steps", "4", "--batch-size", "4", "--out", out, "--no-progress", "--seed", "2"]
    request.addfinalizer(lambda before=threads.count: threads.set_cpu_threads(before))
    assert train.main(common + ["--checkpoint-dir", ck]) == 0
    assert threads.count == 1            # the LSTM's default: one BLAS thread
    with open(os.path.join(out, "metrics.json")) as f:
        m = json.load(f)
    assert m["model"] == "lstm" and m["steps"] == 4 and m["config"]["hidden_size"] == 16
    assert m["params"] == 96 * 8 + 4 * 16 * (8 + 16 + 2) + 16 * 96 + 96
    assert 3.5 < m["unigram_entropy_bits"] < 6 and 0 < m["val_bits_per_char"] < 8
    assert os.path.getsize(os.path.join(out, "loss.png")) > 1000
    printed = capsys.readouterr().out
    assert "val_bits_per_char=" in printed and "unigram_entropy_bits=" in printed
    straight = checkpoint.load(os.path.join(ck, train.CKPT_NAME))
    # stop after the first step (a zero time budget), then resume: the same parameters as 4 steps straight
    assert train.main(common + ["--checkpoint-dir", ck2, "--time-limit", "1e-9"]) == 0
    assert checkpoint.load_metadata(os.path.join(ck2, train.CKPT_NAME))["step"] == "1"
    assert train.main(common + ["--checkpoint-dir", ck2, "--resume"]) == 0
    resumed = checkpoint.load(os.path.join(ck2, train.CKPT_NAME))
    assert set(resumed) == set(straight) and any(k.startswith("model.lstm.weight_hh") for k in straight)
    for k in straight:
        np.testing.assert_allclose(np.asarray(resumed[k]), np.asarray(straight[k]), rtol=1e-5, atol=1e-6)
    with open(os.path.join(out, "metrics.json")) as f:
        assert json.load(f)["resumed_from"] == 1
    capsys.readouterr()
    monkeypatch.undo()
    assert train.main(["sample", "--checkpoint-dir", ck, "--prompt", "import ", "--chars", "10"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("import ") and len(text.rstrip("\n")) >= len("import ") + 10 - 2
