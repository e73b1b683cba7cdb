"""Reading a sampling answer as it arrives, in bounded memory (docs/protocol.md §3-§5,
docs/hardening.md "Hostile tenants").

:func:`answer_reader` returns a :class:`~app.sampling.safe_http.BodyReader` for one ``200``
answer; the safe client feeds it the body chunk by chunk and its ``finish()`` returns the
canonical samples (what :func:`~app.sampling.protocol.parse_samples` returns).

- **Binary** answers are collected up to the ``n × d × 8`` bytes they must hold; one byte more is
  refused at once (``wrong_count``), then :func:`parse_samples` checks the rows.
- **JSON** answers whose ``Content-Length`` is at most :data:`SMALL_JSON_BYTES` are collected and
  parsed at once by :func:`parse_samples` (pydantic-core's parser: at most a few milliseconds,
  and at most ``SMALL_JSON_BYTES`` worth of Python objects).
- **Other JSON** answers (larger, or chunked without a length) are parsed *as they stream* by an incremental parser (ijson over
  yajl, C): each received chunk is parsed at once, its events are checked, and the outputs are
  converted to arrays piece by piece (:data:`PIECE_VALUES` values at a time), so at most one piece
  is ever held as Python objects. The answer is refused at the first event that cannot belong to
  ``n`` outputs of its shape: an object or array where a scalar is due (or the reverse), a value
  of the wrong JSON type, a row longer than the shape allows, the ``(n+1)``-th output. The rest of
  the body is then never read (its connection is dropped). Parsing a 64 KiB chunk takes a few
  milliseconds, between which the event loop runs other work.

A valid answer of 60 MiB of ``[{},{},...]`` used to become 20 million dicts (8.5 GB in a worker)
before its first element was looked at; it is now refused at its first ``{``.

**Keyed** answers are refused (``oversized``) when they release more than ``max_keys`` distinct
keys (:data:`MAX_KEYS`) or a key longer than ``max_key_length`` characters
(:data:`MAX_KEY_LENGTH`): the streaming parser counts the distinct keys as they arrive and stops
at the first one too many; a small answer is checked once parsed. The bytes alone do not bound
the work: 30 MiB of keyed JSON holding 2 million distinct keys cost a worker seconds of CPU per
answer and a gigabyte of memory, and stalled its event loop (docs/hardening.md, "Keyed answers").
"""

from __future__ import annotations

import operator
import re
import sys
import typing

import ijson
import numpy as np

from app.stats.shapes import KeyedSamples, ListSamples, OutputShape, concat_outputs

from .protocol import (
    BINARY_MEDIA_TYPE,
    DIM_HEADER,
    OutputKind,
    SamplingError,
    coerce_samples,
    media_type,
    parse_dim_header,
    parse_samples,
)

__all__ = ["MAX_KEYS", "MAX_KEY_LENGTH", "PIECE_VALUES", "SMALL_JSON_BYTES", "answer_reader", "check_key_limits",
           "too_many_keys"]

#: JSON answers up to this size are parsed at once (a few ms; bounded Python objects).
SMALL_JSON_BYTES = 256 * 1024
#: Bytes given to the incremental parser at a time (its events are checked after each slice).
SLICE_BYTES = 16 * 1024
#: Values converted to arrays at a time while a larger JSON answer streams.
PIECE_VALUES = 32_768
#: Longest row accepted when the shape does not say (a list without max_length, a vector without dim).
UNKNOWN_WIDTH_CAP = 65_536
#: Distinct keys one keyed sample may release (an answer, and a call's batches together);
#: the service's default is ``Settings.sampling_max_keys``.
MAX_KEYS = 100_000
#: Longest key (characters) of a keyed output; the service's is ``Settings.sampling_max_key_length``.
MAX_KEY_LENGTH = 1_000


def check_key_limits(samples: typing.Any, max_keys: int, max_key_length: int) -> None:
    """Refuse (``oversized``) keyed outputs with more than ``max_keys`` distinct keys or a key
    longer than ``max_key_length`` characters; other outputs pass."""
    if not isinstance(samples, KeyedSamples):
        return
    if len(samples.keys) > max_keys:
        raise too_many_keys(max_keys)
    longest = max(map(len, samples.keys), default=0)
    if longest > max_key_length:
        raise _key_too_long(longest, max_key_length)


def too_many_keys(max_keys: int) -> SamplingError:
    return SamplingError("oversized", f"the outputs release more than {max_keys} distinct keys "
                         "(DPWATCH_SAMPLING_MAX_KEYS)")


def _key_too_long(length: int, max_key_length: int) -> SamplingError:
    return SamplingError("oversized", f"a key of {length} characters; keys may have at most {max_key_length} "
                         "(DPWATCH_SAMPLING_MAX_KEY_LENGTH)")

_EVENT, _VALUE = operator.itemgetter(0), operator.itemgetter(1)
_SCALAR_EVENTS = frozenset({"number", "string", "boolean", "null"})
_EVENT_TYPE = {"number": "a number", "string": "a string", "boolean": "a boolean", "null": "null",
               "start_map": "an object", "start_array": "an array"}
# States of the JSON stream.
_ROOT, _IN_ROOT, _EXPECT_SAMPLES, _IN_SAMPLES, _IN_ROW, _SKIP, _DONE, _IN_OBJECT = range(8)


_INDEX = re.compile(r"\b(sample|output) (\d+)")


def _shift(detail: str, offset: int) -> str:
    """``"sample 3 is ..."`` of a piece starting at output ``offset`` -> ``"sample <3+offset> ..."``."""
    return _INDEX.sub(lambda m: f"{m[1]} {int(m[2]) + offset}", detail)


class _Buffered:
    """Collects the body (at most ``limit`` bytes) and parses it whole."""

    parses = False  # feed() only collects

    def __init__(self, parse: typing.Callable[[bytes], typing.Any], limit: int,
                 too_long: typing.Callable[[int], SamplingError]) -> None:
        self._parse = parse
        self._limit = limit
        self._too_long = too_long
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._limit:
            raise self._too_long(self._size)
        self._chunks.append(chunk)

    def finish(self) -> typing.Any:
        return self._parse(b"".join(self._chunks))


class _JsonAnswer:
    """A JSON answer that announces at most :data:`SMALL_JSON_BYTES` is collected and parsed
    whole; any other (larger, or without a ``Content-Length``) streams through
    :class:`_JsonStream` from its first byte, so that no single call parses more than a slice."""

    def __init__(self, n: int, output_kind: OutputKind | None, dim: int | None, shape: OutputShape | None,
                 content_type: str, announced: int | None, max_keys: int = MAX_KEYS,
                 max_key_length: int = MAX_KEY_LENGTH) -> None:
        self._args = (n, output_kind, dim, shape)
        self._limits = (max_keys, max_key_length)
        self._content_type = content_type
        self._chunks: list[bytes] = []
        self._size = 0
        small = announced is not None and announced <= SMALL_JSON_BYTES
        self._stream: _JsonStream | None = None if small else _JsonStream(*self._args, *self._limits)
        self.parses = self._stream is not None  # the safe client feeds a parser in slices

    def feed(self, chunk: bytes) -> None:
        if self._stream is not None:
            try:
                self._stream.feed(chunk)
            except BaseException:
                self._stream.discard()
                raise
            return
        self._size += len(chunk)
        if self._size > SMALL_JSON_BYTES:  # more than announced: the safe client refuses it first
            raise SamplingError("oversized", f"the answer is longer than its Content-Length ({self._size} bytes)")
        self._chunks.append(chunk)

    def finish(self) -> typing.Any:
        if self._stream is not None:
            try:
                return self._stream.finish()
            finally:
                self._stream.discard()
        n, output_kind, dim, shape = self._args
        samples = parse_samples(b"".join(self._chunks), self._content_type, n, output_kind, dim, shape=shape)
        check_key_limits(samples, *self._limits)
        return samples


class _JsonStream:
    """The event checker of a large JSON answer (see the module docstring)."""

    def __init__(self, n: int, output_kind: OutputKind | None, dim: int | None, shape: OutputShape | None,
                 max_keys: int = MAX_KEYS, max_key_length: int = MAX_KEY_LENGTH) -> None:
        self.n = n
        self.max_keys = max_keys
        self.max_key_length = max_key_length
        self.distinct_keys: set[str] = set()  # keyed outputs: the keys released so far
        self.output_kind = output_kind
        self.dim = dim
        self.shape = shape
        if shape is None and output_kind == "keyed":
            shape = self.shape = OutputShape.from_output_kind("keyed")
        #: keyed outputs: each output is a JSON object (key → number), read key by key
        self.objects = shape is not None and shape.container == "keyed"
        if shape is not None:
            self.rows = shape.container in ("vector", "list")
            width = {"vector": shape.length, "list": shape.max_length, "keyed": shape.max_keys}.get(shape.container)
            values = shape.values
            self.scalar_events = ({"string"} if values == "label" else {"number", "string"} if values == "discrete"
                                  else {"number"}) | ({"null"} if shape.nullable else set())
        else:
            self.rows = output_kind == "vector"
            width = dim
            self.scalar_events = {"number", "string"} if output_kind == "discrete" else {"number"}
        if width is None:
            # A keyed output without a declared max_keys is bounded by the distinct keys an answer may
            # release (max_keys, refused as ``oversized`` naming DPWATCH_SAMPLING_MAX_KEYS), not by
            # the row cap: its keys are all distinct, so they count there one by one.
            width = sys.maxsize if self.objects else UNKNOWN_WIDTH_CAP
        self.width = width
        self.fixed_width = (shape is not None and shape.container == "vector") or (shape is None and self.rows)
        self.events = ijson.sendable_list()
        self.parser = ijson.basic_parse_coro(self.events, use_float=True)
        self.state = _ROOT
        self.skip_depth = 0
        self.seen_samples = False
        self.count = 0  # outputs seen
        self.piece: list[typing.Any] = []
        self.piece_values = 0
        self.offset = 0  # index of the piece's first output
        self.parts: list[typing.Any] = []
        self.row: list[typing.Any] = []
        self.object: dict[str, typing.Any] = {}
        self.key: str | None = None

    # ------------------------------------------------------------------ input

    def feed(self, chunk: bytes) -> None:
        # yajl turns all it is given into events before returning: small slices keep the events
        # of one call bounded and let the first wrong one stop the parse early.
        for start in range(0, len(chunk), SLICE_BYTES):
            try:
                self.parser.send(chunk[start : start + SLICE_BYTES])
            except ijson.common.JSONError as exc:
                self._consume()  # what came before the error may be refused for a better reason
                raise self._syntax_error(exc) from None
            self._consume()

    def finish(self) -> typing.Any:
        try:
            self.parser.close()
        except ijson.common.JSONError as exc:
            self._consume()
            raise self._syntax_error(exc) from None
        self._consume()
        if not self.seen_samples or self.state != _DONE:
            raise SamplingError("invalid_json", "the answer must be a JSON object with a 'samples' array")
        if self.count != self.n:
            raise SamplingError("wrong_count", f"expected {self.n} samples, got {self.count}")
        self._flush()
        return self._concatenate()

    def discard(self) -> None:
        """Drop what the parse holds (its keys, pieces, parser). A refused answer's error keeps
        the frames that raised it, and so this object, alive until the cyclic garbage collector
        runs: without this, eight refused keyed answers at a time held a worker's memory above a
        gigabyte (each one's set of 10⁵ distinct keys)."""
        self.distinct_keys = set()
        self.piece, self.parts, self.row, self.object = [], [], [], {}
        self.events = ijson.sendable_list()
        self.parser = None

    @staticmethod
    def _syntax_error(exc: Exception) -> SamplingError:
        text = str(exc)
        first = text.splitlines()[0] if text else type(exc).__name__
        if "overflow" in first or any(word in text for word in ("NaN", "Infinity")):
            return SamplingError("non_finite", f"the answer holds a non-finite number, which JSON cannot carry ({first})")
        return SamplingError("invalid_json", f"the answer is not valid JSON ({first})")

    # ------------------------------------------------------------------ events

    def _consume(self) -> None:
        events = self.events
        if not events:
            return
        scalar_events = self.scalar_events
        if self.state == _IN_SAMPLES and not self.rows and not self.objects \
                and set(map(_EVENT, events)) <= scalar_events:
            # The common case, at C speed: a run of scalar outputs of the expected JSON types.
            values = list(map(_VALUE, events))
            del events[:]
            if self.count + len(values) > self.n:
                raise SamplingError("wrong_count", f"expected {self.n} samples, got more (refused at output {self.n})")
            self.count += len(values)
            self.piece.extend(values)
            self.piece_values += len(values)
            if self.piece_values >= PIECE_VALUES:
                self._flush()
            return
        try:
            for event, value in events:
                state = self.state
                if state == _IN_OBJECT:
                    self._object_event(event, value)
                elif state == _IN_SAMPLES:
                    if self.objects and event == "start_map":
                        self.object = {}
                        self.state = _IN_OBJECT
                    elif self.objects and event != "end_array":
                        self._refuse_item(value if event in _SCALAR_EVENTS else [], event)
                    elif event in _SCALAR_EVENTS:
                        if self.rows or event not in scalar_events:
                            self._refuse_item(value if event in _SCALAR_EVENTS else None, event)
                        self._item(value, 1)
                    elif event == "start_array":
                        if not self.rows:
                            self._refuse_item([], event)
                        self.row = []
                        self.state = _IN_ROW
                    elif event == "end_array":
                        self.state = _IN_ROOT
                    else:  # start_map
                        self._refuse_item({}, event)
                elif state == _IN_ROW:
                    row = self.row
                    if event in _SCALAR_EVENTS:
                        if event not in scalar_events:
                            row.append(value)
                            self._item(row, len(row))
                            self._flush()  # names the offending entry
                            raise SamplingError("wrong_type", f"output {self.count - 1} holds {_EVENT_TYPE[event]}")
                        row.append(value)
                        if len(row) > self.width:
                            raise self._too_wide()
                    elif event == "end_array":
                        if self.fixed_width and self.count == 0 and self.shape is None and self.dim is None:
                            self.width = len(row)  # a vector without dim: its first row fixes d
                        self._item(row, len(row))
                        self.state = _IN_SAMPLES
                    else:  # a container inside an output
                        kind = "array" if event == "start_array" else "object"
                        raise self._type_error(f"output {self.count} holds an {kind}; entries must be scalars",
                                               self.count)
                elif state == _SKIP:
                    if event in ("start_map", "start_array"):
                        self.skip_depth += 1
                    elif event in ("end_map", "end_array"):
                        self.skip_depth -= 1
                    if self.skip_depth == 0:
                        self.state = _IN_ROOT
                elif state == _IN_ROOT:
                    if event == "map_key":
                        if value == "samples":
                            if self.seen_samples:
                                raise SamplingError("invalid_json", "the answer has two 'samples' members")
                            self.state = _EXPECT_SAMPLES
                        else:
                            self.state = _SKIP  # another member: parsed, checked, not kept
                    else:  # end_map
                        self.state = _DONE
                elif state == _EXPECT_SAMPLES:
                    if event != "start_array":
                        raise SamplingError("invalid_json", f"'samples' must be an array, got {_EVENT_TYPE.get(event, event)}")
                    self.seen_samples = True
                    self.state = _IN_SAMPLES
                elif state == _ROOT:
                    if event != "start_map":
                        raise SamplingError("invalid_json", "the answer must be a JSON object with a 'samples' array; "
                                            f"got {_EVENT_TYPE.get(event, event)}")
                    self.state = _IN_ROOT
        finally:
            del events[:]

    def _object_event(self, event: str, value: typing.Any) -> None:
        """One event inside a keyed output: a key (refused when repeated or one too many), its
        value (a number, or null when the shape allows it), or the output's end."""
        obj = self.object
        if event == "map_key":
            if value in obj:
                raise SamplingError("invalid_json", f"output {self.count} holds the key {value!r} twice; a keyed "
                                    "output releases each key once")
            if len(obj) >= self.width:
                raise self._type_error(f"keyed output {self.count} releases more than {self.width} keys",
                                       self.count, "length")
            if value not in self.distinct_keys:
                if len(value) > self.max_key_length:
                    raise _key_too_long(len(value), self.max_key_length)
                if len(self.distinct_keys) >= self.max_keys:
                    raise too_many_keys(self.max_keys)
                self.distinct_keys.add(value)
            self.key = value
        elif event in _SCALAR_EVENTS:
            if event not in self.scalar_events:
                obj[self.key] = value  # type: ignore[index]
                self._item(obj, len(obj) + 1)
                self._flush()  # names the offending value as coerce_samples does
                raise self._type_error(f"output {self.count - 1} holds {_EVENT_TYPE[event]} at key {self.key!r}",
                                       self.count - 1)
            obj[self.key] = value  # type: ignore[index]
        elif event == "end_map":
            self._item(obj, len(obj) + 1)
            self.state = _IN_SAMPLES
        else:  # a container as a value
            kind = "array" if event == "start_array" else "object"
            raise self._type_error(f"output {self.count} holds an {kind} at key {self.key!r}; values must be numbers",
                                   self.count)

    def _item(self, value: typing.Any, values: int) -> None:
        self.count += 1
        if self.count > self.n:
            raise SamplingError("wrong_count", f"expected {self.n} samples, got more (refused at output {self.n})")
        self.piece.append(value)
        self.piece_values += values
        if self.piece_values >= PIECE_VALUES:
            self._flush()

    def _refuse_item(self, placeholder: typing.Any, event: str) -> typing.NoReturn:
        """An output of the wrong JSON type: converting the piece up to it names it as
        :func:`coerce_samples` would; if that conversion accepts it, refuse it here."""
        self._item(placeholder, 1)
        self._flush()
        raise self._type_error(f"output {self.count - 1} is {_EVENT_TYPE.get(event, event)}", self.count - 1)

    def _too_wide(self) -> SamplingError:  # rows only; keyed outputs say it in _object_event
        what = "vector" if self.fixed_width else "list"
        return self._type_error(f"{what} output {self.count} has more than {self.width} entries", self.count, "length")

    def _type_error(self, detail: str, index: int, kind: str = "type") -> SamplingError:
        if self.shape is not None:
            from .protocol import _shape_error

            return _shape_error(detail, kind, index)
        return SamplingError("wrong_type", detail)

    # ------------------------------------------------------------------ pieces

    def _flush(self) -> None:
        if not self.piece:
            return
        piece, self.piece, self.piece_values = self.piece, [], 0
        try:
            part = coerce_samples(piece, len(piece), self.output_kind, self.dim, shape=self.shape)
        except SamplingError as exc:
            if self.offset:  # the piece's indices, as indices of the whole answer
                exc.detail = _shift(exc.detail, self.offset)
                exc.args = (f"{exc.reason}: {exc.detail}",)
                if exc.breach is not None:
                    index = exc.breach.index
                    exc.breach = exc.breach.model_copy(update={
                        "detail": _shift(exc.breach.detail, self.offset),
                        "index": None if index is None else index + self.offset})
            raise
        self.offset += len(piece)
        self.parts.append(part)

    def _concatenate(self) -> typing.Any:
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        if isinstance(parts[0], (ListSamples, KeyedSamples)):
            return concat_outputs(parts)
        kinds = {p.dtype.kind for p in parts}
        if "O" in kinds and len(kinds) > 1:  # strings in one piece, numbers in another
            raise SamplingError("wrong_type", "discrete outputs must be all integers or all strings, not a mix of both")
        if kinds == {"i", "f"}:  # a nullable integer shape: pieces without a null are int64
            parts = [p.astype(np.float64) for p in parts]
        widths = {p.shape[1:] for p in parts}
        if len(widths) > 1:
            raise SamplingError("wrong_type", f"vector outputs have different lengths: {sorted(w[0] for w in widths)[:5]}")
        return np.concatenate(parts)


def answer_reader(
    headers: typing.Mapping[str, str], n: int, output_kind: OutputKind | None, dim: int | None = None,
    *, shape: OutputShape | None = None, max_bytes: int, max_keys: int = MAX_KEYS,
    max_key_length: int = MAX_KEY_LENGTH,
) -> _Buffered | _JsonAnswer:
    """The reader of one ``200`` answer for ``n`` outputs (``dim``: the expected vector length,
    if known). A binary answer's ``x-dpwatch-dim`` header is read here; one that contradicts
    ``dim`` (legacy vectors) is refused before a byte of the body is read. Keyed outputs may
    release at most ``max_keys`` distinct keys, each of at most ``max_key_length`` characters."""
    content_type = headers.get("content-type", "")
    if media_type(content_type) != BINARY_MEDIA_TYPE:
        length = headers.get("content-length", "")
        return _JsonAnswer(n, output_kind, dim, shape, content_type, int(length) if length.strip().isdigit() else None,
                           max_keys, max_key_length)
    header_dim = parse_dim_header(headers.get(DIM_HEADER))
    if shape is None and output_kind == "vector" and dim is not None and header_dim is not None and header_dim != dim:
        raise SamplingError("wrong_type", f"vector outputs have length {header_dim}, expected {dim}")

    def parse(body: bytes) -> typing.Any:
        return parse_samples(body, content_type, n, output_kind, header_dim, shape=shape)

    needs_dim = shape.container != "scalar" if shape is not None else output_kind == "vector"
    binary_capable = shape.binary_capable if shape is not None else output_kind in ("real", "vector")
    if not binary_capable or (needs_dim and header_dim is None):
        return _Buffered(parse, max_bytes, lambda size: SamplingError("oversized", f"{size} bytes"))  # parse() names it
    row = header_dim or 1
    expected = n * row * 8

    def too_long(size: int) -> SamplingError:
        return SamplingError("wrong_count", f"expected {n} samples of {row} float64 ({expected} bytes); "
                             f"the binary answer holds more ({size} bytes and counting)")

    return _Buffered(parse, expected, too_long)
