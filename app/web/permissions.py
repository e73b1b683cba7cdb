"""Who may change a monitor from the dashboard: the one decision point for key scopes there.

Every page that shows a pause, resume, reset, acknowledge or snapshot button, and every form
handler that carries one out, asks :func:`may_change_monitor`. It follows the key's scope, as the
JSON API does (app/api/deps.py): an ``admin`` key may, a ``read`` key may not; the buttons are
then not shown, and the form handlers answer 403.
"""

from __future__ import annotations

from app.auth.service import Principal


def may_change_monitor(principal: Principal) -> bool:
    """True when ``principal``'s key may pause, resume, reset, snapshot or acknowledge."""
    return principal.may_write
