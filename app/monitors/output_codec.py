"""Compact storage of a period's raw outputs.

- real outputs and real vectors: little-endian float32 (4 bytes an output and dimension). KDE
  and density ratios need nowhere near float64's 16 digits; float32 keeps 7. Random mantissas do
  not compress, so there is no zlib step.
- integer outputs (discrete labels, SVT answer vectors of 1/0/−1): the smallest integer type that
  holds them, then zlib. SVT rows are highly repetitive and compress several times over.
- strings: JSON, then zlib.
- variable-length lists (``app.stats.shapes.ListSamples``): the lengths as int32 and the
  NaN-padded values as float32, then zlib (``list``).
- keyed outputs (``app.stats.keyed.KeyedSamples``): the key table as JSON, the row pointers and
  key indices as int32 and the values as float32 (NaN: null), then zlib (``keyed``; the shape is
  ``[n, entries, bytes of the key table]``).

At n = 1000 outputs per database, a real-valued check costs 8 kB per period for x and x'
(``docs/mpl.md`` has measured sizes).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np

_INT_TYPES = (np.int8, np.int16, np.int32, np.int64)


def encode_outputs(outputs: Any) -> tuple[str, list[int], bytes]:
    """(encoding, shape, bytes) for an array of outputs as the sampling client returns it."""
    from app.stats.shapes import KeyedSamples, ListSamples

    if isinstance(outputs, KeyedSamples):
        table = json.dumps(list(outputs.keys), separators=(",", ":")).encode()
        body = (table + np.asarray(outputs.indptr, dtype="<i4").tobytes()
                + np.asarray(outputs.key_index, dtype="<i4").tobytes() + np.asarray(outputs.values, dtype="<f4").tobytes())
        return "keyed", [len(outputs), outputs.nnz, len(table)], zlib.compress(body, 6)
    if isinstance(outputs, ListSamples):
        values = np.asarray(outputs.values, dtype="<f4")
        body = np.asarray(outputs.lengths, dtype="<i4").tobytes() + values.tobytes()
        return "list", [int(v) for v in values.shape], zlib.compress(body, 6)
    arr = np.asarray(outputs)
    shape = [int(s) for s in arr.shape]
    if arr.dtype.kind == "f":
        return "f4", shape, arr.astype("<f4").tobytes()
    if arr.dtype.kind in "iub":
        ints = arr.astype(np.int64)
        lo, hi = (int(ints.min()), int(ints.max())) if ints.size else (0, 0)
        for t in _INT_TYPES:
            info = np.iinfo(t)
            if info.min <= lo and hi <= info.max:
                dt = np.dtype(t).newbyteorder("<")
                return f"i{dt.itemsize}z", shape, zlib.compress(ints.astype(dt).tobytes(), 6)
    return "jsonz", shape, zlib.compress(json.dumps(arr.tolist()).encode(), 6)


def decode_outputs(encoding: str, shape: list[int], data: bytes) -> Any:
    if encoding == "keyed":
        from app.stats.keyed import KeyedSamples

        raw = zlib.decompress(data)
        n, nnz, size = shape
        keys = tuple(json.loads(raw[:size]))
        at = size + 4 * (n + 1)
        indptr = np.frombuffer(raw[size:at], dtype="<i4").astype(np.int64)
        key_index = np.frombuffer(raw[at: at + 4 * nnz], dtype="<i4").astype(np.int64)
        entries = np.frombuffer(raw[at + 4 * nnz:], dtype="<f4").astype(np.float64)
        return KeyedSamples(keys, indptr, key_index, entries)
    if encoding == "list":
        from app.stats.shapes import ListSamples

        raw = zlib.decompress(data)
        n = shape[0]
        lengths = np.frombuffer(raw[: 4 * n], dtype="<i4").astype(np.int64)
        values = np.frombuffer(raw[4 * n:], dtype="<f4").astype(np.float64).reshape(shape)
        return ListSamples(values, lengths)
    if encoding == "f4":
        return np.frombuffer(data, dtype="<f4").astype(np.float64).reshape(shape)
    if encoding.startswith("i") and encoding.endswith("z"):
        itemsize = int(encoding[1:-1])
        dt = np.dtype(f"<i{itemsize}")
        return np.frombuffer(zlib.decompress(data), dtype=dt).astype(np.int64).reshape(shape)
    if encoding == "jsonz":
        values: Any = json.loads(zlib.decompress(data))
        return np.asarray(values, dtype=object).reshape(shape)
    raise ValueError(f"unknown output encoding {encoding!r}")
