"""A logger that is quiet as a library: structlog once the service configured it, the standard
library's ``logging`` otherwise (never stdout).

structlog's default configuration prints every event, debug included, to stdout; library code
(``run_audit`` in a notebook, a script using the sampling client) must not. Before
``structlog.configure`` is called, events go to ``logging.getLogger(name)`` instead, where the
caller's logging configuration decides (by default: warnings and above on stderr).
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
           "exception": logging.ERROR, "critical": logging.CRITICAL}


class _QuietLogger:
    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}

    def bind(self, **values: Any) -> _QuietLogger:
        return _QuietLogger(self._name, {**self._context, **values})

    def _emit(self, method: str, event: str, **values: Any) -> None:
        if structlog.is_configured():
            getattr(structlog.get_logger(self._name).bind(**self._context), method)(event, **values)
            return
        logger = logging.getLogger(self._name)
        level = _LEVELS[method]
        if logger.isEnabledFor(level):
            fields = " ".join(f"{k}={v}" for k, v in {**self._context, **values}.items())
            logger.log(level, "%s %s", event, fields, exc_info=method == "exception")

    def debug(self, event: str, **values: Any) -> None:
        self._emit("debug", event, **values)

    def info(self, event: str, **values: Any) -> None:
        self._emit("info", event, **values)

    def warning(self, event: str, **values: Any) -> None:
        self._emit("warning", event, **values)

    def error(self, event: str, **values: Any) -> None:
        self._emit("error", event, **values)

    def exception(self, event: str, **values: Any) -> None:
        self._emit("exception", event, **values)


def get_logger(name: str) -> _QuietLogger:
    return _QuietLogger(name)
