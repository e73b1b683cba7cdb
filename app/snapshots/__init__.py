"""MPL snapshots: estimates of the privacy loss from a monitor's raw outputs (seed 003)."""
