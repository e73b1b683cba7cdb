"""Generate dpwatch_sdk/_sync_client.py from dpwatch_sdk/_async_client.py (the async client is the
one source; the sync one is it without async/await).

    python sdk/python/scripts/unasync.py          # write
    python sdk/python/scripts/unasync.py --check  # exit 1 when the committed file is stale
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "dpwatch_sdk"
SOURCE, TARGET = HERE / "_async_client.py", HERE / "_sync_client.py"

RULES = [
    (r'"""The async client of the dpwatch REST API', '"""The sync client of the dpwatch REST API'),
    (r"This file is the source of both clients: ``_sync_client.py`` is generated from it by\n"
     r"``scripts/unasync.py`` \(async/await removed\), and a test keeps the two in step.",
     "GENERATED from ``_async_client.py`` by ``scripts/unasync.py``: do not edit."),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\bAsyncClient\b", "Client"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\basync def __aenter__", "def __enter__"),
    (r"\basync def __aexit__", "def __exit__"),
    (r"\baclose\b", "close"),
    (r"\basync def\b", "def"),
    (r"\basync for\b", "for"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"^import asyncio\n", ""),
]


def convert(text: str) -> str:
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    return text


def main() -> int:
    generated = convert(SOURCE.read_text())
    if "--check" in sys.argv:
        if TARGET.read_text() != generated:
            print(f"{TARGET} is stale: run python sdk/python/scripts/unasync.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(generated)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
