"""Audits and discovery: the round-based engine (engine.py), its use over HTTP (service.py) and
discovery of candidate checks with the same engine (discovery.py). docs/audit.md."""

from app.audit.engine import (
    AuditCancelled,
    AuditResult,
    AuditSettings,
    Progress,
    Sampler,
    local_sampler,
    round_schedule,
    run_engine,
)

__all__ = ["AuditCancelled", "AuditResult", "AuditSettings", "Progress", "Sampler", "local_sampler",
           "round_schedule", "run_engine"]
