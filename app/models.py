"""The registry of every domain's tables.

``app.db`` holds the declarative ``Base`` and knows no domain; each domain's ``models`` module
imports ``Base`` from it. This module sits above them all and imports each one, so that
``Base.metadata`` knows every table (Alembic's ``env.py``, the tests' schema checks).
"""

from __future__ import annotations

import app.alarms.models  # noqa: F401
import app.auth.models  # noqa: F401
import app.jobs.models  # noqa: F401
import app.mechanisms.models  # noqa: F401
import app.monitors.models  # noqa: F401
import app.quotas.models  # noqa: F401
import app.silences.models  # noqa: F401
import app.snapshots.models  # noqa: F401
from app.db import Base


def load_models() -> type[Base]:
    """``Base`` with every table registered (importing this module registers them)."""
    return Base
