"""Keyed outputs in memory: a set of keys with values per output, where keys may be absent (a
group-by released with partition selection; docs/protocol.md §3.2, docs/audit.md §8).

:class:`KeyedSamples` holds n keyed outputs in compressed sparse rows (CSR):

- ``keys``: the key table, sorted, each key once (strings);
- ``indptr`` (n + 1,): output ``i`` owns the entries ``indptr[i]:indptr[i+1]``;
- ``key_index`` (nnz,): each entry's key, an index into ``keys``, increasing within an output
  (no key twice in one output);
- ``values`` (nnz,): each entry's value, NaN for a key released without a value (``null``).

A key of the table that an output holds no entry for was **not released** by it: absent and
null stay distinct (absent: no entry; null: an entry whose value is NaN). Samples whose key sets
differ (between batches, between x and x′) concatenate over the union of their key tables, and
an event that names a key the table lacks sees it absent from every output, so an event chosen on
one sample is evaluated on fresh samples with keys it never saw. Sparse rows, not a dense
``(n, |keys|)`` matrix: a mechanism that takes its keys from private data may release a new key in
every output, and the union of keys then grows with n; CSR memory stays that of the answer itself.

Every function here is vectorised over entries (no Python loop per output), except building the
key table from decoded JSON, which visits each entry once.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Any

import numpy as np

__all__ = ["KeyedInputError", "KeyedSamples", "concat_keyed", "keyed_from_dense", "keyed_from_rows", "set_code"]


class KeyedInputError(ValueError):
    """Decoded outputs that are not keyed outputs: ``kind`` (type or length, as a shape breach),
    the output's ``index`` and the offending ``sample``."""

    def __init__(self, kind: str, detail: str, index: int | None = None, sample: Any = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.index = index
        self.sample = sample


@dataclass(frozen=True, eq=False)
class KeyedSamples:
    """n keyed outputs in compressed sparse rows (module docstring)."""

    keys: tuple[str, ...]
    indptr: np.ndarray
    key_index: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.indptr.ndim != 1 or self.indptr.size < 1 or self.key_index.shape != self.values.shape \
                or self.key_index.ndim != 1 or int(self.indptr[-1]) != self.key_index.size:
            raise ValueError("KeyedSamples needs indptr (n + 1,) ending at nnz, and key_index, values (nnz,)")

    @classmethod
    def empty(cls, n: int = 0) -> KeyedSamples:
        """n outputs that release no key."""
        return cls((), np.zeros(n + 1, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # Without this numpy would read the outputs as nested sequences (each output is again a
        # KeyedSamples of one output) and recurse without end.
        raise TypeError("keyed outputs are not an array: count them with keyed events (app.stats.events), or "
                        "take dense() over chosen keys")

    # ------------------------------------------------------------------ sizes and rows

    def __len__(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def nnz(self) -> int:
        return int(self.key_index.size)

    def counts(self) -> np.ndarray:
        """The number of keys each output released (nulls included), int64 (n,)."""
        return np.diff(self.indptr)

    def entry_rows(self) -> np.ndarray:
        """The output each entry belongs to, int64 (nnz,)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.counts())

    def __getitem__(self, index: Any) -> KeyedSamples:
        """Outputs ``index`` (an int, a slice, an index array or a boolean mask), same key table."""
        n = len(self)
        if isinstance(index, (int, np.integer)):
            i = int(index) + (n if int(index) < 0 else 0)
            index = slice(i, i + 1)
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step == 1:
                stop = max(start, stop)
                lo, hi = int(self.indptr[start]), int(self.indptr[stop])
                return KeyedSamples(self.keys, self.indptr[start: stop + 1] - lo, self.key_index[lo:hi],
                                    self.values[lo:hi])
        rows = np.arange(n, dtype=np.int64)[index]
        counts = np.diff(self.indptr)[rows]
        indptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        pos = np.repeat(self.indptr[rows] - indptr[:-1], counts) + np.arange(int(indptr[-1]), dtype=np.int64)
        return KeyedSamples(self.keys, indptr, self.key_index[pos], self.values[pos])

    def row(self, i: int) -> dict[str, float | None]:
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        return {self.keys[int(k)]: (None if math.isnan(v) else float(v))
                for k, v in zip(self.key_index[lo:hi], self.values[lo:hi])}

    def tolist(self) -> list[dict[str, float | None]]:
        return [self.row(i) for i in range(len(self))]

    # ------------------------------------------------------------------ keys

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {key: i for i, key in enumerate(self.keys)}

    def position(self, key: str) -> int:
        """The index of ``key`` in the key table, or -1 when no output of this sample has it."""
        return self._positions.get(key, -1)

    def column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(released, value)`` of one key in every output: bool (n,), and float (n,) with NaN
        where the key is absent or null. A key the table lacks is absent everywhere."""
        n = len(self)
        released = np.zeros(n, dtype=bool)
        value = np.full(n, np.nan)
        k = self.position(key)
        if k >= 0:
            hits = np.flatnonzero(self.key_index == k)
            rows = np.searchsorted(self.indptr, hits, side="right") - 1
            released[rows] = True
            value[rows] = self.values[hits]
        return released, value

    def key_mask(self, keys: Iterable[str]) -> np.ndarray:
        """Which keys of the table are among ``keys``, bool (|table|,)."""
        wanted = set(keys)
        return np.fromiter((k in wanted for k in self.keys), dtype=bool, count=len(self.keys))

    def count_among(self, keys: Iterable[str]) -> np.ndarray:
        """How many of ``keys`` each output released, int64 (n,)."""
        inside = self.key_mask(keys)[self.key_index] if self.keys else np.zeros(0, dtype=bool)
        return np.bincount(self.entry_rows()[inside], minlength=len(self)).astype(np.int64)

    def key_frequencies(self) -> np.ndarray:
        """In how many outputs each key of the table was released, int64 (|table|,)."""
        return np.bincount(self.key_index, minlength=len(self.keys)).astype(np.int64)

    def key_set_codes(self) -> np.ndarray:
        """A 64-bit code of each output's set of released keys (equal sets, equal codes; distinct
        sets collide with probability ~2⁻⁶⁴): the sum modulo 2⁶⁴ of a hash of each key. Codes do
        not depend on the key table, so two samples' codes compare."""
        if not self.nnz:
            return np.zeros(len(self), dtype=np.uint64)
        table = np.fromiter((_key_hash(k) for k in self.keys), dtype=np.uint64, count=len(self.keys))
        cumulative = np.zeros(self.nnz + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            np.cumsum(table[self.key_index], out=cumulative[1:])  # wraps modulo 2⁶⁴
            return cumulative[self.indptr[1:]] - cumulative[self.indptr[:-1]]

    def key_set_in(self, sets: Sequence[Sequence[str]]) -> np.ndarray:
        """Which outputs released exactly one of ``sets`` (each a set of distinct keys), bool (n,).

        Exact and vectorised: each output's set code (:meth:`key_set_codes`) picks the one set it
        can equal, then every entry of the output is checked to be a key of that set and the counts
        compared, so a collision of codes can never make a member."""
        n, m = len(self), len(sets)
        counts = self.counts()
        codes = np.fromiter((set_code(keys) for keys in sets), dtype=np.uint64, count=m)
        sizes = np.fromiter((len(keys) for keys in sets), dtype=np.int64, count=m)
        if np.unique(codes).size != m:  # two of the event's sets collide: one set at a time
            mask = np.zeros(n, dtype=bool)
            for keys in sets:
                mask |= (counts == len(keys)) & (self.count_among(keys) == len(keys))
            return mask
        order = np.argsort(codes)
        row_codes = self.key_set_codes()
        at = np.minimum(np.searchsorted(codes[order], row_codes), m - 1)
        which = order[at]  # the one set each output's code may equal
        candidate = (codes[which] == row_codes) & (counts == sizes[which])
        pairs = np.fromiter((self._positions[k] * m + j for j, keys in enumerate(sets) for k in keys
                             if k in self._positions), dtype=np.int64)
        if self.nnz:
            rows = self.entry_rows()
            ok = np.isin(self.key_index * m + which[rows], pairs)
            good = np.bincount(rows[ok], minlength=n)
            candidate &= good == counts
        return candidate

    def key_set_labels(self) -> np.ndarray:
        """Each output's set of released keys as a label (the JSON array of its sorted keys, e.g.
        ``'["a","c"]'``), object (n,): the outcome of the key set for discrete estimators. Built
        once per distinct set, not once per output."""
        import json

        codes = self.key_set_codes()
        uniq, first, inv = np.unique(codes, return_index=True, return_inverse=True)
        labels = np.empty(uniq.size, dtype=object)
        for j, i in enumerate(first):
            lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
            labels[j] = json.dumps([self.keys[int(k)] for k in self.key_index[lo:hi]], separators=(",", ":"))
        return labels[inv.ravel()]

    def reindexed(self, keys: Sequence[str]) -> KeyedSamples:
        """The same outputs over a sorted key table ``keys`` that contains this one's."""
        if tuple(keys) == self.keys:
            return self
        table = np.asarray(keys, dtype=object)
        mapping = np.searchsorted(table, np.asarray(self.keys, dtype=object)).astype(np.int64) if self.keys \
            else np.empty(0, dtype=np.int64)
        return KeyedSamples(tuple(keys), self.indptr, mapping[self.key_index], self.values)

    def dense(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(released, values)`` over the given keys: bool (n, k) and float (n, k) with NaN where
        absent or null (for features over a few chosen keys)."""
        n = len(self)
        released = np.zeros((n, len(keys)), dtype=bool)
        values = np.full((n, len(keys)), np.nan)
        where = {key: j for j, key in enumerate(keys)}
        col = np.fromiter((where.get(k, -1) for k in self.keys), dtype=np.int64, count=len(self.keys))
        if self.nnz:
            cols = col[self.key_index]
            keep = cols >= 0
            rows = self.entry_rows()[keep]
            released[rows, cols[keep]] = True
            values[rows, cols[keep]] = self.values[keep]
        return released, values


def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def set_code(keys: Iterable[str]) -> int:
    """The code :meth:`KeyedSamples.key_set_codes` gives an output that released exactly ``keys``."""
    return sum(_key_hash(k) for k in keys) % 2**64


def keyed_from_dense(keys: Sequence[str], released: np.ndarray, values: np.ndarray) -> KeyedSamples:
    """Keyed outputs from a dense draw over a few keys: ``released`` bool (n, k) and ``values``
    float (n, k) (NaN where released: null). For mechanisms written in numpy; keys in any order."""
    order = sorted(range(len(keys)), key=lambda j: keys[j])
    table = tuple(keys[j] for j in order)
    if len(set(table)) != len(table):
        raise ValueError("keys repeat a key")
    released = np.asarray(released, dtype=bool)[:, order]
    values = np.asarray(values, dtype=np.float64)[:, order]
    indptr = np.zeros(released.shape[0] + 1, dtype=np.int64)
    np.cumsum(released.sum(axis=1), out=indptr[1:])
    rows, cols = np.nonzero(released)  # row-major: keys increasing within each output
    return KeyedSamples(table, indptr, cols.astype(np.int64), values[rows, cols])


def concat_keyed(parts: Sequence[KeyedSamples]) -> KeyedSamples:
    """The outputs of ``parts`` one after the other, over the union of their key tables.

    Linear in the parts' keys and entries: one dictionary over the union maps every part's key
    table at once (reindexing each part over the whole union cost |parts| × |union|, 29 s for an
    answer of 4 million distinct keys streamed in 122 pieces)."""
    if len(parts) == 1:
        return parts[0]
    union = tuple(sorted(set(chain.from_iterable(p.keys for p in parts))))
    position = {key: i for i, key in enumerate(union)}
    # Each part's table is sorted and so is the union: the mapping is increasing, and keys stay
    # increasing within every output.
    mappings = [np.fromiter(map(position.__getitem__, p.keys), dtype=np.int64, count=len(p.keys)) for p in parts]
    offsets = np.cumsum([0] + [p.nnz for p in parts[:-1]])
    indptr = np.concatenate([np.zeros(1, dtype=np.int64)] + [p.indptr[1:] + off for p, off in zip(parts, offsets)])
    return KeyedSamples(union, indptr.astype(np.int64),
                        np.concatenate([m[p.key_index] for m, p in zip(mappings, parts)]).astype(np.int64),
                        np.concatenate([p.values for p in parts]).astype(np.float64))


def _type_name(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a non-integer number", str: "a string",
            list: "an array", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def keyed_from_rows(samples: Sequence[Any], *, nullable: bool, integer: bool,
                    max_keys: int | None = None) -> KeyedSamples:
    """Decoded keyed outputs (dicts from string keys to numbers) as :class:`KeyedSamples`.

    Refused (:class:`KeyedInputError`): an output that is not a dict, a key that is not a string,
    a value that is not a number (``null`` only when ``nullable``; NaN counts as null, infinity
    never), a non-integral value when ``integer`` (16.0 counts as 16), more than ``max_keys`` keys.
    """
    n = len(samples)
    bad = [i for i, row in enumerate(samples) if type(row) is not dict]
    if bad:
        i = bad[0]
        raise KeyedInputError("type", f"keyed outputs must be objects (key → value); output {i} is "
                              f"{_type_name(samples[i])}", i, samples[i])
    lengths = np.fromiter(map(len, samples), dtype=np.int64, count=n)
    if max_keys is not None and n and int(lengths.max()) > max_keys:
        i = int(np.argmax(lengths > max_keys))
        raise KeyedInputError("length", f"keyed outputs may release at most {max_keys} keys; output {i} releases "
                              f"{int(lengths[i])}", i, samples[i])
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    keys = list(chain.from_iterable(samples))
    raw = list(chain.from_iterable(row.values() for row in samples))

    def output_of(pos: int) -> int:
        return int(np.searchsorted(indptr, pos, side="right") - 1)

    if not set(map(type, keys)) <= {str}:
        pos = next(j for j, k in enumerate(keys) if type(k) is not str)
        i = output_of(pos)
        raise KeyedInputError("type", f"keys must be strings; output {i} has the key {keys[pos]!r} "
                              f"({_type_name(keys[pos])})", i, samples[i])
    allowed = {int, float} | ({type(None)} if nullable else set())
    if not set(map(type, raw)) <= allowed:
        pos = next(j for j, v in enumerate(raw) if type(v) not in allowed)
        i, v = output_of(pos), raw[pos]
        hint = " (the shape allows no null)" if v is None else (" (booleans are not accepted: send 0/1)"
                                                                 if type(v) is bool else "")
        raise KeyedInputError("type", f"values must be numbers; output {i} holds {_type_name(v)} at key "
                              f"{keys[pos]!r}{hint}", i, samples[i])
    try:
        values = np.array(raw, dtype=np.float64) if raw else np.empty(0)
    except OverflowError:
        pos = next(j for j, v in enumerate(raw) if type(v) is int and abs(v) > 1e308)
        i = output_of(pos)
        raise KeyedInputError("type", f"output {i} holds an integer too large for float64 at key {keys[pos]!r}",
                              i, samples[i]) from None
    # None (allowed only when nullable) became NaN: NaN is null when nullable, else non-finite
    nonfinite = np.isinf(values) if nullable else ~np.isfinite(values)
    if nonfinite.any():
        pos = int(np.flatnonzero(nonfinite)[0])
        i = output_of(pos)
        raise KeyedInputError("type", f"output {i} holds a non-finite value at key {keys[pos]!r}", i, samples[i])
    if integer:
        with np.errstate(invalid="ignore"):
            nonint = ~np.isnan(values) & ((values != np.round(values)) | (np.abs(values) > 2.0**53))
        if nonint.any():
            pos = int(np.flatnonzero(nonint)[0])
            i = output_of(pos)
            raise KeyedInputError("type", f"values must be integers (16.0 counts as 16); output {i} holds "
                                  f"{float(values[pos])!r} at key {keys[pos]!r}", i, samples[i])
    if not keys:
        return KeyedSamples((), indptr, np.empty(0, dtype=np.int64), np.empty(0))
    names = sorted(dict.fromkeys(keys))  # the distinct keys, at C speed
    table = {k: i for i, k in enumerate(names)}
    codes = np.fromiter(map(table.__getitem__, keys), dtype=np.int64, count=len(keys))
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    order = np.lexsort((codes, rows))  # keys increasing within each output
    return KeyedSamples(tuple(names), indptr, codes[order], values[order])
