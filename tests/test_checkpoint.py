"""flfun.serialization: safetensors round trips, the on-disk format, atomic writes, corruption and mismatch errors."""
import dataclasses
import json
import os
import struct

import numpy as np
import pytest

import flfun.numpy as fnp
from flfun import serialization as ck
from flfun import nn, optim, random
from flfun.tree import register_dataclass


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def sample_tree():
    model = nn.MLP([3, 4, 2], key=random.key(0))
    state = optim.adamw(1e-3).init(model)
    return {"model": model, "opt": state, "extra": [fnp.asarray(np.arange(3, dtype=np.int32)),
                                                    fnp.asarray(np.array([True, False])),
                                                    fnp.asarray(np.float64(2.5)),
                                                    fnp.zeros((0, 3), dtype=np.float16)]}


def assert_tree_equal(a, b):
    from flfun.tree import tree_flatten
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_round_trip_with_template(tmp_path):
    tree = sample_tree()
    path = ck.save(tmp_path / "c.safetensors", tree, {"step": "12"})
    back = ck.load(path, like=tree)
    assert_tree_equal(back, tree)
    assert isinstance(back["model"], nn.MLP) and isinstance(back["opt"], optim.AdamState)
    assert back["model"].activation is tree["model"].activation
    meta = ck.load_metadata(path)
    assert meta["step"] == "12" and meta["format"] == "flfun" and len(meta["sha256"]) == 64
    flat = ck.load(path)
    assert set(flat) == set(ck.tree_paths(tree)[0]) and "model.layers.0.weight" in flat
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")]


def test_file_is_standard_safetensors(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = ck.save(tmp_path / "c.safetensors", {"w": w, "n": np.int64(7)})
    data = read_bytes(path)
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0
    header = json.loads(data[8:8 + n])
    assert header["w"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}
    assert header["n"] == {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}
    body = data[8 + n:]
    np.testing.assert_array_equal(np.frombuffer(body[8:32], "<f4").reshape(2, 3), w)


def test_interoperates_with_the_safetensors_package(tmp_path):
    from safetensors.numpy import load_file, save_file
    tree = sample_tree()
    names, leaves, _ = ck.tree_paths(tree)
    theirs = load_file(ck.save(tmp_path / "ours.safetensors", tree))
    assert set(theirs) == set(names)
    for n, leaf in zip(names, leaves):
        assert theirs[n].dtype == np.asarray(leaf).dtype
        np.testing.assert_array_equal(theirs[n], np.asarray(leaf))
    arrays = {n: np.asarray(leaf) for n, leaf in zip(names, leaves)}
    save_file(arrays, tmp_path / "theirs.safetensors", metadata={"step": "3"})
    assert_tree_equal(ck.load(tmp_path / "theirs.safetensors", like=tree), tree)
    assert ck.load_metadata(tmp_path / "theirs.safetensors") == {"step": "3"}


def test_missing_safetensors_says_how_to_install(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    for call in (lambda: ck.save(tmp_path / "c.safetensors", {"w": np.ones(2)}),
                 lambda: ck.load(tmp_path / "c.safetensors")):
        with pytest.raises(ImportError, match="pip install safetensors"):
            call()


def test_names_are_tree_paths():
    names, _, _ = ck.tree_paths({"b": (1, 2), "a": {"x": [3]}, "c": nn.Linear(2, 2, key=random.key(0))})
    assert names == ["a.x.0", "b.0", "b.1", "c.weight", "c.bias"]


def test_dataclass_children_are_named_by_field_whichever_way_static_fields_are_declared():
    @register_dataclass(static=("act",))
    @dataclasses.dataclass
    class ByArgument:
        w: object
        act: str
        b: object

    @register_dataclass
    @dataclasses.dataclass
    class ByMetadata:
        act: str = dataclasses.field(metadata={"static": True})
        w: object = None

    tree = {"a": ByArgument(fnp.ones(2), "relu", fnp.ones(1)), "m": ByMetadata("tanh", fnp.ones(3))}
    assert ck.tree_paths(tree)[0] == ["a.w", "a.b", "m.w"]


def test_atomic_overwrite_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    ck.save(path, {"w": np.ones(3, np.float32)})

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        ck.save(path, {"w": np.zeros(3, np.float32)})
    monkeypatch.undo()
    np.testing.assert_array_equal(np.asarray(ck.load(path)["w"]), np.ones(3))
    assert os.listdir(tmp_path) == ["c.safetensors"]


def _corrupt(path, fn):
    data = bytearray(read_bytes(path))
    data = fn(data)
    write_bytes(path, bytes(data))


def test_corruption_is_detected(tmp_path):
    tree = {"a": np.arange(4, dtype=np.float32), "b": np.ones((2, 2), np.float32)}
    path = str(tmp_path / "c.safetensors")
    ck.save(path, tree)

    def flip(d):
        d[-1] ^= 0x10
        return d
    _corrupt(path, flip)
    with pytest.raises(ck.CheckpointError, match="does not match its SHA-256 checksum"):
        ck.load(path)
    ck.save(path, tree)
    bad_file = "is corrupt, truncated or not a safetensors file: .*"   # then the reason safetensors gives
    damages = [(lambda d: d[:-6], "incomplete"),
               (lambda d: struct.pack("<Q", 10 ** 9) + d[8:], "header ?too ?large"),
               (lambda d: d[:8] + b"#" + d[9:], "invalid ?(json|header)"),
               (lambda d: b"abc", "header ?too ?small")]
    for damage, reason in damages:
        ck.save(path, tree)
        _corrupt(path, damage)
        with pytest.raises(ck.CheckpointError, match=f"(?i){bad_file}{reason}"):
            ck.load(path)
    header = b'{"x":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}}'     # (BF16 loads: test_lowp.py)
    write_bytes(path, struct.pack("<Q", len(header)) + header + bytes(2))
    with pytest.raises(ck.CheckpointError, match="holds unsupported dtype 'F8_E4M3'"):
        ck.load(path)
    with pytest.raises(ck.CheckpointError, match="cannot read checkpoint"):
        ck.load(tmp_path / "missing.safetensors")


def test_mismatch_errors_name_the_key(tmp_path):
    tree = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    path = ck.save(tmp_path / "c.safetensors", tree)
    with pytest.raises(ck.CheckpointError, match="missing key 'c'"):
        ck.load(path, like={**tree, "c": np.zeros(1, np.float32)})
    with pytest.raises(ck.CheckpointError, match="unexpected key 'b'"):
        ck.load(path, like={"w": tree["w"]})
    with pytest.raises(ck.CheckpointError, match=r"key 'w' has float32\[2, 3\] .* expects float32\[3, 2\]"):
        ck.load(path, like={"w": np.ones((3, 2), np.float32), "b": tree["b"]})
    with pytest.raises(ck.CheckpointError, match=r"key 'b' has float32\[3\] .* expects float64\[3\]"):
        ck.load(path, like={"w": tree["w"], "b": np.zeros(3)})
    with pytest.raises(ck.CheckpointError, match="leaf 'x' is a str, not an array"):
        ck.save(tmp_path / "d.safetensors", {"x": "hello"})
    with pytest.raises(ValueError, match="metadata must be a dict of str to str"):
        ck.save(tmp_path / "d.safetensors", tree, {"step": 3})


@pytest.mark.parametrize("tree", [{"__metadata__": np.ones(2)}, {"w": np.ones(2), "__metadata__": np.ones(1)}])
def test_reserved_leaf_name_is_rejected_at_save(tmp_path, tree):
    with pytest.raises(ck.CheckpointError, match="save: leaf name '__metadata__' is reserved"):
        ck.save(tmp_path / "c.safetensors", tree)
    assert os.listdir(tmp_path) == []
    nested = {"__metadata__": {"w": np.ones(2)}}     # a prefix only: the leaf is '__metadata__.w', which is fine
    assert_tree_equal(ck.load(ck.save(tmp_path / "n.safetensors", nested), like=nested), nested)


@pytest.mark.parametrize("key", ["sha256", "format", "flfun.names"])
def test_reserved_metadata_key_is_rejected_at_save(tmp_path, key):
    with pytest.raises(ValueError, match=f"save: metadata key '{key}' is reserved"):
        ck.save(tmp_path / "c.safetensors", {"w": np.ones(2)}, {key: "x"})


def _dead_pid() -> int:
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_orphaned_temp_files_of_killed_saves_are_removed_at_the_next_save(tmp_path):
    import socket
    host = socket.gethostname()
    path = tmp_path / "c.safetensors"
    ck.save(path, {"w": np.ones(3, np.float32)})
    dead = tmp_path / f".tmp-{host}-{_dead_pid()}-abc123.safetensors"      # what SIGKILL mid-save leaves
    live = tmp_path / f".tmp-{host}-{os.getpid()}-def456.safetensors"      # a save in progress: kept
    other_host = tmp_path / ".tmp-elsewhere.example-1-ghi789.safetensors"  # shared folder, other machine: kept
    unrelated = tmp_path / ".tmp-notes.txt"
    for f in (dead, live, other_host, unrelated):
        write_bytes(f, b"partial")
    ck.save(path, {"w": np.zeros(3, np.float32)})
    assert sorted(os.listdir(tmp_path)) == sorted(["c.safetensors", live.name, other_host.name, unrelated.name])
    np.testing.assert_array_equal(np.asarray(ck.load(path)["w"]), np.zeros(3))


def test_a_save_killed_midway_leaves_a_temp_file_that_the_next_save_removes(tmp_path):
    import signal
    import subprocess
    import sys
    code = ("import os, signal, numpy as np\n"
            "from flfun import serialization as ck\n"
            "real = os.replace\n"
            "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"   # die between write and rename
            f"ck.save({str(tmp_path / 'c.safetensors')!r}, {{'w': np.ones(1000, np.float32)}})\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=os.getcwd(), timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")]
    ck.save(tmp_path / "c.safetensors", {"w": np.zeros(2, np.float32)})
    assert os.listdir(tmp_path) == ["c.safetensors"]
