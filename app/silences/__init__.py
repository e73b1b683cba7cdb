"""Silences: on-call maintenance windows (Alertmanager's model; docs/dashboard.md)."""
