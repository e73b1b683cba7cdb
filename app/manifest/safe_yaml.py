"""Reading a manifest's YAML with limits, before anything is built from it.

``yaml.safe_load`` builds no arbitrary objects, but it trusts the shape of the file: nine levels of
ten aliases (an 867-byte "billion laughs") build a small graph of shared lists that every later walk
(validation, the plan) expands to 10⁹ nodes; a deeply nested file ends in a ``RecursionError``; and
the pure-Python parser takes minutes over tens of megabytes. So the file is first read as a stream
of parser events (libyaml's C parser when PyYAML has it), which nests nothing and costs time linear
in the file, and checked against:

* ``MAX_BYTES``: the file's size, before it is read;
* ``MAX_DEPTH``: how deeply collections nest;
* ``MAX_ALIASES``: how many aliases (``*name``) it uses;
* ``MAX_NODES``: how many nodes the document holds once every alias is expanded (each alias counts
  the whole node it stands for), which is what any walk of it will visit.

Only a file within every limit is loaded, with the safe loader (the C one when available).
Every refusal is one :class:`ManifestError` line that says which limit and where.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.manifest.plan import ManifestError

__all__ = ["MAX_ALIASES", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "load_yaml_file"]

#: The largest manifest read (bytes). A thousand monitors with inline databases fit well within it.
MAX_BYTES = 4 * 1024 * 1024
#: Collections nested deeper than this are refused (a manifest needs about 8).
MAX_DEPTH = 64
#: Aliases in one file.
MAX_ALIASES = 1_000
#: Nodes (scalars and collections) with every alias expanded.
MAX_NODES = 1_000_000

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _one_line(exc: yaml.YAMLError) -> str:
    lines = str(exc).splitlines()
    problem = getattr(exc, "problem", None) or (lines[0] if lines else type(exc).__name__)
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}".replace("\n", " ")


def check_events(text: str, *, max_depth: int = MAX_DEPTH, max_aliases: int = MAX_ALIASES,
                 max_nodes: int = MAX_NODES) -> None:
    """Walk the parser's events once; ManifestError at the first limit passed."""
    sizes: dict[str, int] = {}  # anchor -> expanded nodes of the node it names
    # Per open collection: [expanded nodes so far, its anchor]
    stack: list[list[Any]] = []
    total = aliases = 0

    def count(n: int, event: Any) -> None:
        nonlocal total
        total += n
        if total > max_nodes:
            raise ManifestError(f"the file expands to more than {max_nodes:,} nodes once its aliases are "
                                f"expanded{_where(event)} (an alias bomb?)")
        if stack:
            stack[-1][0] += n

    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= max_depth:
                raise ManifestError(f"the file nests collections more than {max_depth} deep{_where(event)}")
            stack.append([1, event.anchor])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            size, anchor = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
            count(size, event)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            count(1, event)
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > max_aliases:
                raise ManifestError(f"the file uses more than {max_aliases:,} aliases{_where(event)}")
            # An alias to an unknown or still open anchor is the parser's error (raised by the load).
            count(sizes.get(event.anchor, 1), event)


def load_yaml_file(path: Path, *, max_bytes: int = MAX_BYTES, **limits: int) -> Any:
    """The YAML document in ``path``, read within the limits; ManifestError (one line) otherwise."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ManifestError(f"{path} holds {size:,} bytes; a manifest may hold at most {max_bytes:,}")
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise ManifestError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise ManifestError(f"{path} holds more than {max_bytes:,} bytes; a manifest may hold at most {max_bytes:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    try:
        check_events(text, **limits)
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - the safe loader (C or Python)
    except ManifestError as exc:
        raise ManifestError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path} is not valid YAML: {_one_line(exc)}") from None
    except (RecursionError, MemoryError) as exc:
        raise ManifestError(f"{path} cannot be read within this process's limits ({type(exc).__name__})") from None
