"""Recording an API key's last use outside the request's transaction.

A request's transaction lasts as long as the request (a validation probe of a hanging endpoint:
seconds). Writing ``last_used_at`` inside it held the key's row lock for that long, and every other
request of the same key that wanted to write it too waited on the lock, then answered 503. The
write is now its own short transaction, at most once per key and process per
``LAST_USED_RESOLUTION_SECONDS`` (and once across processes: the update's own condition), that
never waits for a row lock on Postgres (``SKIP LOCKED``) and waits at most
``SQLITE_BUSY_MS`` for SQLite's write lock. A failure is logged and forgotten: it is bookkeeping.
"""

from __future__ import annotations

import threading
import time
import uuid

import structlog
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.auth.service import LAST_USED_RESOLUTION_SECONDS, record_key_use

log = structlog.get_logger("dpwatch.auth")

#: How long the write waits for SQLite's database lock (another connection's write transaction).
SQLITE_BUSY_MS = 250
#: The process-wide busy timeout the write restores (``app.db``'s pragma).
SQLITE_DEFAULT_BUSY_MS = 5000


class KeyUseRecorder:
    """Throttles and performs the ``last_used_at`` writes of one process (thread-safe)."""

    def __init__(self, resolution_seconds: float = LAST_USED_RESOLUTION_SECONDS, max_keys: int = 10_000) -> None:
        self._resolution = resolution_seconds
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._claimed: dict[uuid.UUID, float] = {}

    def claim(self, api_key_id: uuid.UUID) -> bool:
        """True for the first caller per key within the resolution (that caller writes)."""
        now = time.monotonic()
        with self._lock:
            last = self._claimed.get(api_key_id)
            if last is not None and now - last < self._resolution:
                return False
            if len(self._claimed) >= self._max_keys:
                self._claimed = {k: t for k, t in self._claimed.items() if now - t < self._resolution}
                if len(self._claimed) >= self._max_keys:
                    self._claimed.clear()
            self._claimed[api_key_id] = now
            return True

    def record(self, factory: sessionmaker[Session] | None, api_key_id: uuid.UUID) -> bool:
        """Write the key's use in a transaction of its own if this process has not within the
        resolution; whether a row was written. Never raises a database error."""
        if factory is None or not self.claim(api_key_id):
            return False
        return self.write(factory, api_key_id)

    def write(self, factory: sessionmaker[Session] | None, api_key_id: uuid.UUID) -> bool:
        """The write of :meth:`record` for a caller that has :meth:`claim`-ed the key already."""
        if factory is None:
            return False
        session = factory()
        sqlite = False
        try:
            sqlite = session.get_bind().dialect.name == "sqlite"
            if sqlite:
                session.connection().exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
            written = record_key_use(session, api_key_id)
            session.commit()
            return written
        except SQLAlchemyError as exc:
            session.rollback()
            log.warning("auth.key_use_not_recorded", api_key_id=str(api_key_id), error=type(exc).__name__)
            return False
        finally:
            if sqlite:
                try:
                    session.connection().exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_DEFAULT_BUSY_MS}")
                except SQLAlchemyError:
                    pass
            session.close()
