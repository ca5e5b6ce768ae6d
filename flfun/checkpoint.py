"""Checkpoints: save and load any pytree of arrays as a safetensors file, without pickle.

The file is the standard safetensors layout (8-byte header length, a JSON header of ``{name: dtype, shape,
data_offsets}``, then raw little-endian bytes), so other tools can read it. Leaf names are the tree paths
(``layers.0.weight``); ``__metadata__`` adds a SHA-256 of the data and user metadata. Writes are atomic (temp file
+ rename); loads validate the file and, given a template tree, every name, shape and dtype.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import tempfile
from typing import Any

import numpy as np

from flfun.array import Array
from flfun.tree import PyTreeDef, tree_flatten, tree_unflatten

_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
           "I32": np.int32, "I64": np.int64, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
           "U64": np.uint64, "BOOL": np.bool_}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 2 ** 20


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, corrupt, or does not match the expected tree."""


def _child_names(td: PyTreeDef) -> list[str]:
    t, aux, n = td.node_type, td.aux, len(td.children)
    if t is dict:
        return [str(k) for k in aux]
    if dataclasses.is_dataclass(t):   # static fields sit in aux, in field order; the children are the rest
        fields = dataclasses.fields(t)
        names = [f.name for f in fields if len(fields) == n or not f.metadata.get("static")]
        if len(names) == n:
            return names
    elif hasattr(t, "_fields"):
        return list(t._fields)
    return [str(i) for i in range(n)]


def tree_paths(tree: Any) -> tuple[list[str], list, PyTreeDef]:
    """Dotted path names of a tree's leaves: ``({"a": [x, y]}) -> ["a.0", "a.1"]``, the leaves and structure.

    Example::

        >>> tree_paths({"w": 1, "b": (2, 3)})[0]
        ['b.0', 'b.1', 'w']
    """
    leaves, treedef = tree_flatten(tree)
    names: list[str] = []

    def rec(td: PyTreeDef, prefix: str):
        if td.node_type is None:
            names.append(prefix or "value")
            return
        for name, child in zip(_child_names(td), td.children):
            rec(child, f"{prefix}.{name}" if prefix else name)

    rec(treedef, "")
    if len(set(names)) != len(names):
        raise CheckpointError(f"save: leaf names are not unique: {names}")
    return names, leaves, treedef


def _to_numpy(name: str, leaf) -> np.ndarray:
    if isinstance(leaf, (Array, np.ndarray, np.generic, int, float, bool)):
        a = np.asarray(leaf, dtype=np.float32 if isinstance(leaf, float) else None)   # Python floats are f32
        if a.dtype not in _CODES:
            raise CheckpointError(f"save: leaf '{name}' has unsupported dtype {a.dtype}")
        return a if a.flags.c_contiguous else a.copy()
    raise CheckpointError(f"save: leaf '{name}' is a {type(leaf).__name__}, not an array")


def _little_endian(a: np.ndarray) -> bytes:
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def save(path: str | os.PathLike, tree: Any, metadata: dict[str, str] | None = None) -> str:
    """Write ``tree``'s arrays to ``path`` (safetensors), atomically: readers see the old file or the new one.

    ``metadata`` is a dict of strings stored in the header (e.g. the step number or the model config as JSON).

    Example::

        >>> save("ckpt.safetensors", {"params": params, "opt_state": state}, {"step": "100"})
    """
    path = os.fspath(path)
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("save: metadata must be a dict of str to str")
    names, leaves, _ = tree_paths(tree)
    arrays = [_to_numpy(n, l) for n, l in zip(names, leaves)]
    header, offset, digest = {}, 0, hashlib.sha256()
    for n, a in zip(names, arrays):
        header[n] = {"dtype": _CODES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        digest.update(_little_endian(a))
    header["__metadata__"] = {**(metadata or {}), "format": "flfun", "sha256": digest.hexdigest()}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(blob)))
            f.write(blob)
            for a in arrays:
                f.write(_little_endian(a))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CheckpointError(f"load: cannot read checkpoint {path!r}: {e.strerror}") from None
    if len(data) < 8:
        raise CheckpointError(f"load: {path!r} is not a safetensors file (only {len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(len(data) - 8, _MAX_HEADER):
        raise CheckpointError(f"load: {path!r} is corrupt or truncated: header length {n} exceeds the file")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"load: {path!r} is corrupt: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"load: {path!r} is corrupt: the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    arrays, end = {}, 0
    for (begin, stop), name, info in sorted((_offsets(path, n, i), n, i) for n, i in header.items()):
        dt = _DTYPES.get(info.get("dtype"))
        if dt is None:
            raise CheckpointError(f"load: {path!r}: key '{name}' has unsupported dtype {info.get('dtype')!r}")
        shape = tuple(info.get("shape", ()))
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
        if begin != end or stop - begin != size or stop > len(body):
            raise CheckpointError(f"load: {path!r} is corrupt or truncated at key '{name}' (bytes {begin}-{stop}, "
                                  f"expected {size} bytes for {np.dtype(dt).name}{list(shape)})")
        arrays[name] = np.frombuffer(body[begin:stop], dtype=np.dtype(dt).newbyteorder("<")).reshape(shape)
        end = stop
    if end != len(body):
        raise CheckpointError(f"load: {path!r} is corrupt: {len(body) - end} unexpected bytes after the data")
    want = meta.get("sha256")
    if want is not None and hashlib.sha256(body).hexdigest() != want:
        raise CheckpointError(f"load: {path!r} is corrupt: the data does not match its SHA-256 checksum")
    return meta, arrays


def _offsets(path, name, info) -> tuple[int, int]:
    off = info.get("data_offsets") if isinstance(info, dict) else None
    if not (isinstance(off, list) and len(off) == 2 and all(isinstance(o, int) for o in off) and off[0] <= off[1]):
        raise CheckpointError(f"load: {path!r} is corrupt: key '{name}' has bad data_offsets {off!r}")
    return off[0], off[1]


def load(path: str | os.PathLike, like: Any = None) -> Any:
    """Read a checkpoint written by ``save`` (or any safetensors file).

    With ``like`` (a tree of the expected structure, e.g. freshly initialised params), returns a tree of that
    structure and checks that every name is present with the same shape and dtype; otherwise returns a dict
    ``{path name: Array}``. Raises ``CheckpointError`` (a ValueError) naming the offending key.

    Example::

        >>> restored = load("ckpt.safetensors", like={"params": params, "opt_state": state})
    """
    from flfun.numpy import asarray
    path = os.fspath(path)
    _, arrays = _read(path)
    if like is None:
        return {k: asarray(v) for k, v in arrays.items()}
    names, leaves, treedef = tree_paths(like)
    missing = [n for n in names if n not in arrays]
    if missing:
        raise CheckpointError(f"load: {path!r} is missing key '{missing[0]}'"
                              + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    extra = sorted(set(arrays) - set(names))
    if extra:
        raise CheckpointError(f"load: {path!r} has unexpected key '{extra[0]}' that the template lacks")
    out = []
    for n, leaf in zip(names, leaves):
        a = arrays[n]
        want_shape, want_dtype = np.shape(leaf), _to_numpy(n, leaf).dtype
        if a.shape != tuple(want_shape) or a.dtype != want_dtype:
            raise CheckpointError(f"load: key '{n}' has {a.dtype.name}{list(a.shape)} in {path!r} but the "
                                  f"template expects {np.dtype(want_dtype).name}{list(want_shape)}")
        out.append(asarray(a.astype(want_dtype.newbyteorder("=")) if a.dtype.byteorder == ">" else a))
    return tree_unflatten(treedef, out)


def load_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The string metadata stored by ``save`` (plus ``format`` and ``sha256``).

    Example::

        >>> int(load_metadata("ckpt.safetensors")["step"])
    """
    return _read(os.fspath(path))[0]


__all__ = ["CheckpointError", "load", "load_metadata", "save", "tree_paths"]
