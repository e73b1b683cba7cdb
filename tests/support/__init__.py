"""Helpers the tests and the benches share (servers on loopback, API helpers, library venvs)."""
