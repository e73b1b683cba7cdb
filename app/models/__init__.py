"""Every table of the service, in one low place (SQLAlchemy 2.0 ``Mapped[...]`` models).

``app.db`` holds the declarative ``Base`` and knows no domain; each module here holds one domain's
tables and imports nothing but ``app.db``, so every domain (monitors, alarms, mechanisms, jobs,
snapshots, silences, quotas, auth) can read another's tables without importing its services.
Importing this package registers every table in ``Base.metadata`` (Alembic's ``env.py``, the
tests' schema checks).
"""

from __future__ import annotations

import app.models.alarms  # noqa: F401
import app.models.auth  # noqa: F401
import app.models.jobs  # noqa: F401
import app.models.mechanisms  # noqa: F401
import app.models.monitors  # noqa: F401
import app.models.quotas  # noqa: F401
import app.models.silences  # noqa: F401
import app.models.snapshots  # noqa: F401
from app.db import Base


def load_models() -> type[Base]:
    """``Base`` with every table registered (importing this module registers them)."""
    return Base
