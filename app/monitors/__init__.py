"""Monitors, their checks and their periods."""
