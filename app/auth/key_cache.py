"""A short-lived, in-process cache of resolved API keys (the bearer-key lookup of every request).

Every ``/v1`` request resolved its bearer key with a query (``SELECT … FROM api_keys WHERE
key_hash = …``) and a thread-pool hop to run it: 12% of a read's busy samples under load
(docs/hardening.md). :class:`KeyCache` keeps what the lookup found for an **active** key — its
tenant, id, scope and ``last_used_at`` — keyed by the key's SHA-256, for ``ttl`` seconds
(``DPWATCH_KEY_CACHE_SECONDS``, 5 s by default; 0 turns it off). A request whose key is in the
cache is authenticated on the event loop with no query and no hop.

Revocation:

* **In the process that revokes** (``revoke_api_key``: ``DELETE /v1/keys/{id}``, the dashboard,
  the CLI) the key is dropped at once, when the revocation is flushed and again after its commit,
  and every lookup that started before the drop is kept out of the cache (a generation count), so
  a request that read the key just before the revocation committed cannot put it back.
* **In any other process** (another API process of ``dpwatch serve --workers N``, another host),
  a revoked key may still be accepted for at most ``ttl`` seconds after the revocation commits
  (its entry was read from the database before the commit, and lives ``ttl`` seconds from that
  read). docs/keys.md says so.

Unknown and revoked keys are never cached: a key created a moment ago works at once, and a
guessed key costs a query every time, as before. The cache holds at most ``max_entries`` keys
(oldest dropped first).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

#: Default lifetime of an entry (``DPWATCH_KEY_CACHE_SECONDS``).
DEFAULT_KEY_CACHE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class CachedKey:
    """What the lookup found for an active key (``app.auth.service`` turns it into a ``Principal``)."""

    tenant_id: uuid.UUID
    api_key_id: uuid.UUID
    scope: str
    #: The key's ``last_used_at`` when it was read (None: never used).
    last_used_at: datetime | None
    expires: float  # time.monotonic()


class KeyCache:
    """Resolved active keys by the SHA-256 of their plaintext, for ``ttl`` seconds (thread-safe)."""

    def __init__(self, ttl: float = DEFAULT_KEY_CACHE_SECONDS, max_entries: int = 10_000) -> None:
        self.ttl = ttl
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, CachedKey] = OrderedDict()
        #: Bumped by every drop; a lookup that started under an older generation is not stored.
        self._generation = 0

    @property
    def generation(self) -> int:
        """Take it before reading a key from the database; pass it to :meth:`put`."""
        return self._generation

    def get(self, key_hash: str) -> CachedKey | None:
        """A cached active key, or None (not cached, expired, or caching off)."""
        if self.ttl <= 0:
            return None
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        if time.monotonic() >= entry.expires:
            with self._lock:
                if self._entries.get(key_hash) is entry:
                    del self._entries[key_hash]
            return None
        return entry

    def put(self, key_hash: str, tenant_id: uuid.UUID, api_key_id: uuid.UUID, scope: str,
            last_used_at: datetime | None, generation: int) -> None:
        """Keep an active key's resolution, unless a key was dropped since ``generation`` was taken."""
        if self.ttl <= 0:
            return
        entry = CachedKey(tenant_id, api_key_id, scope, last_used_at, time.monotonic() + self.ttl)
        with self._lock:
            if generation != self._generation:
                return
            self._entries[key_hash] = entry
            self._entries.move_to_end(key_hash)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def drop(self, key_hash: str) -> None:
        """Forget a key (it was revoked); lookups under way are not stored either."""
        with self._lock:
            self._generation += 1
            self._entries.pop(key_hash, None)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()


#: The process's cache (one per process: a revocation anywhere in the process drops the key from
#: it). ``create_app`` sets its ``ttl`` from the settings.
KEY_CACHE = KeyCache()
