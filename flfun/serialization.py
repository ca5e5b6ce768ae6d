"""Checkpoints: save and load any pytree of arrays as a safetensors file, without pickle.

The file format is handled by the ``safetensors`` package (``pip install safetensors``, part of the ``models``
extra), so other tools can read the files. Leaf names are the tree paths (``layers.0.weight``); ``__metadata__``
adds a SHA-256 of the data, the leaf order and user metadata. Writes are atomic (temp file + rename); loads validate the file and,
given a template tree, every name, shape and dtype.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import struct
import tempfile
from typing import Any

import numpy as np

from flfun import dtypes
from flfun.array import Array
from flfun.tree import PyTreeDef, tree_flatten_with_path, tree_unflatten

_DTYPES = frozenset(map(np.dtype, ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                                   "uint16", "uint32", "uint64", "bool"])) | {dtypes.bfloat16}
_FILE_DTYPES = {"BOOL": dtypes.bool_, "BF16": dtypes.bfloat16,     # safetensors' names (the header's "dtype")
                **{f"{d.kind.upper()}{8 * d.itemsize}": d for d in _DTYPES if d.kind in "iuf"}}


_ORDER = "flfun.names"   # metadata key: the saved tree's leaf names in order (safetensors sorts its tensors)
_RESERVED_META = frozenset({"format", _ORDER, "sha256"})  # metadata keys that save writes itself
_TMP = re.compile(r"\.tmp-(?P<host>.+)-(?P<pid>\d+)-[^-]*\.safetensors\Z")


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, corrupt, or does not match the expected tree."""


def _safetensors():
    try:
        import safetensors.numpy
    except ImportError as e:
        raise ImportError("flfun.serialization needs the safetensors package: pip install safetensors "
                          "(or pip install 'flfun[models]')") from e
    return safetensors


def tree_paths(tree: Any) -> tuple[list[str], list, PyTreeDef]:
    """Dotted path names of a tree's leaves: ``({"a": [x, y]}) -> ["a.0", "a.1"]``, the leaves and structure.

    Example::

        >>> tree_paths({"w": 1, "b": (2, 3)})[0]
        ['b.0', 'b.1', 'w']
    """
    pairs, treedef = tree_flatten_with_path(tree)
    names = [".".join(str(k[0]) for k in path) or "value" for path, _ in pairs]   # each key's one field
    if len(set(names)) != len(names):
        raise CheckpointError(f"save: leaf names are not unique: {names}")
    return names, [leaf for _, leaf in pairs], treedef


def _to_numpy(name: str, leaf) -> np.ndarray:
    if isinstance(leaf, (Array, np.ndarray, np.generic, int, float, bool)):
        a = np.asarray(leaf, dtype=np.float32 if type(leaf) is float else None)   # Python floats are f32
        if a.dtype not in _DTYPES:
            raise CheckpointError(f"save: leaf '{name}' has unsupported dtype {a.dtype}")
        return a if a.flags.c_contiguous else a.copy()
    raise CheckpointError(f"save: leaf '{name}' is a {type(leaf).__name__}, not an array")


def _split(blob: bytes) -> tuple[dict, memoryview]:
    """The parsed JSON header and the tensor bytes of a safetensors blob that the library wrote or validated."""
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), memoryview(blob)[8 + n:]


def save(path: str | os.PathLike, tree: Any, metadata: dict[str, str] | None = None) -> str:
    """Write ``tree``'s arrays to ``path`` (safetensors), atomically: readers see the old file or the new one.

    ``metadata`` is a dict of strings stored in the header (e.g. the step number or the model config as JSON).

    Example::

        >>> save("ckpt.safetensors", {"params": params, "opt_state": state}, {"step": "100"})
    """
    st = _safetensors()
    path = os.fspath(path)
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("save: metadata must be a dict of str to str")
    clash = sorted(_RESERVED_META & set(metadata or ()))
    if clash:
        raise ValueError(f"save: metadata key {clash[0]!r} is reserved (save writes {sorted(_RESERVED_META)} "
                         f"itself); rename it")
    names, leaves, _ = tree_paths(tree)
    if "__metadata__" in names:     # the header key that safetensors keeps for metadata
        raise CheckpointError("save: leaf name '__metadata__' is reserved by the safetensors format (it names "
                              "the header's metadata); rename that key of the tree")
    arrays = {n: _to_numpy(n, leaf) for n, leaf in zip(names, leaves)}
    meta = {**(metadata or {}), "format": "flfun", _ORDER: json.dumps(names), "sha256": "0" * 64}
    # the checksum covers the data in the order safetensors lays it out: serialise once with a placeholder
    # digest of the same length, then write the real one into the header (JSON escapes quotes inside strings,
    # so the placeholder's key-value text occurs exactly once)
    blob = st.numpy.save(arrays, meta)
    data_start = 8 + struct.unpack("<Q", blob[:8])[0]
    digest = hashlib.sha256(memoryview(blob)[data_start:]).hexdigest()
    header = blob[:data_start].replace(b'"sha256":"' + b"0" * 64 + b'"', b'"sha256":"%s"' % digest.encode())
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_orphans(directory)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{socket.gethostname()}-{os.getpid()}-", suffix=".safetensors",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(memoryview(blob)[data_start:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _remove_orphans(directory: str) -> None:
    """Delete temp files that a killed ``save`` left in ``directory``: those named after a process of this host
    that no longer runs (a live process's temp file may be a save in progress)."""
    host = socket.gethostname()
    for name in os.listdir(directory):
        m = _TMP.match(name)
        if m is None or m["host"] != host or _alive(int(m["pid"])):
            continue
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass            # another process cleaned it up first, or the folder is read-only to us


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # it runs, under another user
        return True
    return True


def _read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    st = _safetensors()
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise CheckpointError(f"load: cannot read checkpoint {path!r}: {e.strerror}") from None
    try:
        arrays = {k: np.frombuffer(v["data"], _FILE_DTYPES[v["dtype"]]).reshape(v["shape"])
                  for k, v in st.deserialize(blob)}
    except st.SafetensorError as e:
        raise CheckpointError(f"load: {path!r} is corrupt, truncated or not a safetensors file: {e}") from None
    except KeyError as e:   # a dtype flfun lacks, such as F8_E4M3
        raise CheckpointError(f"load: {path!r} holds unsupported dtype {e}") from None
    header, data = _split(blob)
    meta = header.get("__metadata__") or {}
    want = meta.get("sha256")
    if want is not None and hashlib.sha256(data).hexdigest() != want:
        raise CheckpointError(f"load: {path!r} is corrupt: the data does not match its SHA-256 checksum")
    return meta, arrays


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Read a checkpoint written by ``save`` (or any safetensors file).

    With ``like`` (a tree of the expected structure, e.g. freshly initialised params), returns a tree of that
    structure and checks that every name is present with the same shape and dtype; otherwise returns a dict
    ``{path name: Array}`` in the saved tree's order. Raises ``CheckpointError`` (a ValueError) naming the offending
    key.

    Example::

        >>> restored = load("ckpt.safetensors", like={"params": params, "opt_state": state})
    """
    from flfun.numpy import asarray
    path = os.fspath(path)
    meta, arrays = _read(path)
    if like is None:
        return {k: asarray(arrays[k]) for k in _saved_order(meta, arrays)}
    names, leaves, treedef = tree_paths(like)
    missing = [n for n in names if n not in arrays]
    if missing:
        raise CheckpointError(f"load: {path!r} is missing key '{missing[0]}'"
                              + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    extra = sorted(set(arrays) - set(names))
    if extra:
        raise CheckpointError(f"load: {path!r} has unexpected key '{extra[0]}' that the template lacks")
    for n, leaf in zip(names, leaves):
        a, want = arrays[n], _to_numpy(n, leaf)
        if a.shape != want.shape or a.dtype != want.dtype:
            raise CheckpointError(f"load: key '{n}' has {a.dtype.name}{list(a.shape)} in {path!r} but the "
                                  f"template expects {want.dtype.name}{list(want.shape)}")
    return tree_unflatten(treedef, [asarray(arrays[n]) for n in names])


def _saved_order(meta: dict, arrays: dict) -> list[str]:
    """The names in the order of the tree that was saved; sorted for files written by other tools."""
    try:
        names = [str(n) for n in json.loads(meta[_ORDER])]
    except (KeyError, TypeError, ValueError):
        names = []
    return names if sorted(names) == sorted(arrays) else sorted(arrays)


def load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The string metadata stored by ``save`` (plus ``format`` and ``sha256``).

    Example::

        >>> int(load_metadata("ckpt.safetensors")["step"])
    """
    meta = _read(os.fspath(path))[0]
    return {k: v for k, v in meta.items() if k != _ORDER}


__all__ = ["CheckpointError", "load", "load_metadata", "save", "tree_paths"]
