"""Per-monitor and per-check metrics in the Prometheus text format (``/metrics``)."""
