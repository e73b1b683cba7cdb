"""assert_dp's failure rates (slow; the full study and its numbers: bench/assert_dp_rates.py,
docs/sdk.md): no correct mechanism fails at the default α, and every violating one of the bench
whose true parameter is above the stated power fails in every run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from assert_dp_rates import correct_study, violating_study  # noqa: E402


@pytest.mark.slow
def test_correct_mechanisms_never_fail_and_violations_above_the_stated_power_always_do():
    for row in correct_study(300, 2, print):
        assert row["failures"] == 0, row
        assert row["calibration"]["0.01"]["rate"] <= 0.01 + 0.02, row  # ≤ α up to sampling error
    for row in violating_study(20, 2, print):
        if row["stated_power_theta"] is not None and row["truth"] == "ε = 1.03":
            continue  # below the stated power: no promise
        assert row["failures"] == row["runs"], row
