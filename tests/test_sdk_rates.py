"""assert_dp's failure rates (slow; the study and its numbers: bench/assert_dp_rates.py, docs/sdk.md):
on a correct Laplace mechanism it fails in at most α of 200 runs; with half its noise, in all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from assert_dp_rates import study  # noqa: E402

from dpwatch_sdk.testing import Auditor  # noqa: E402


@pytest.mark.slow
def test_assert_dp_false_failures_at_most_alpha_and_half_noise_always_fails():
    dpwatch = Path(sys.executable).parent / "dpwatch"
    results = study(200, Auditor(str(dpwatch)), alpha=0.05, budget=20_000, workers=2)
    correct, broken = results.values()
    assert correct["failures"] <= 0.05 * 200, correct
    assert broken["failures"] == 200, broken
