"""False alarms of the service's detectors on checks with keyed events at the claim's boundary
(app.simulation_keyed; bench/keyed_far.py prints the full table recorded in docs/audit.md §8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.monitors.detectors import initial_state, sequential_line, sequential_log_threshold, sequential_step
from app.reference.keyed import KEYED_BOUNDARY_CELLS
from app.simulation_keyed import false_alarms, keyed_counts, log_statistic_paths


@pytest.mark.parametrize("cell", [KEYED_BOUNDARY_CELLS[1], KEYED_BOUNDARY_CELLS[3]], ids=lambda c: c.label)
def test_the_batch_detectors_are_the_services_step_functions(cell):
    """The simulation's e-process and e-detector paths equal the runner's period-by-period steps
    (anchored lines for the (ε, δ) claim, the claim's line for pure ε)."""
    rng = np.random.default_rng(4)
    a, b = keyed_counts(cell, 40, 2, 10, rng)
    b[0, 3] += 1  # a count the boundary never gives, so the paths move both ways
    for detector in ("e-process", "e-detector"):
        batch = log_statistic_paths(detector, a, b, 40, cell.claim)
        for run in range(2):
            state = initial_state(detector, horizon=10, gamma=0.25, level=0.05, claim=cell.claim,
                                  threshold=sequential_log_threshold(detector, 0.05, 10))
            steps = []
            for t in range(10):
                step = sequential_step(state, int(a[run, t]), int(b[run, t]), 40,
                                       sequential_line(state, cell.claim))
                state = step.state
                steps.append(step.statistic)
            assert np.allclose(steps, batch[run], atol=1e-9), (detector, run)


@pytest.mark.parametrize("cell", KEYED_BOUNDARY_CELLS, ids=lambda c: c.label)
@pytest.mark.parametrize("n", [10, 100])
def test_false_alarms_at_the_boundary_stay_near_alpha(cell, n):
    replications, alpha = 200, 0.05
    rates = false_alarms(cell, n, replications, 40, alpha=alpha, seed=17)
    # the keyed events are counted at their exact probabilities (4 standard errors)
    first = next(iter(rates.values()))
    total = replications * 40 * n
    for exact, seen in ((cell.p, first["p_hat"]), (cell.q, first["q_hat"])):
        assert abs(seen - exact) <= 4 * math.sqrt(max(exact * (1 - exact), 1e-12) / total) + 1e-12, (exact, seen)
    for name, r in rates.items():
        assert r["low"] <= r["rate"] <= r["high"]
        # α + 0.01, and three standard errors of a rate near α over R runs
        assert r["rate"] <= alpha + 0.01 + 3 * math.sqrt(0.06 * 0.94 / replications), (cell.label, n, name, r)
