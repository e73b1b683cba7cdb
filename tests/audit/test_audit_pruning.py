"""Pruning the pairs: each pair is scored on outputs that did not choose its events
(app.audit.engine._held_apart_score)."""

import numpy as np

from app.audit.engine import _held_apart_score
from app.stats.candidates import ProposalSettings, propose
from app.stats.shapes import OutputShape

SHAPE = OutputShape(container="scalar", values="real")
PROP = ProposalSettings(n_test=64_000, level=0.05 / 4, target=0.1, learned=False)


def test_a_difference_seen_only_by_the_choosing_half_does_not_rank_the_pair():
    # Even positions (the choosing half) differ completely, odd positions (the scoring half) not at all:
    # scored on the outputs that chose it the best event looks certain; scored apart it is worthless.
    rng = np.random.default_rng(3)
    n = 20_000
    x, y = rng.laplace(0.0, 1.0, n), rng.laplace(0.0, 1.0, n)
    x[0::2] = rng.uniform(10.0, 11.0, n // 2)
    y[0::2] = rng.uniform(-11.0, -10.0, n // 2)
    in_sample = propose(x[0::2], y[0::2], SHAPE, PROP)[0].predicted
    apart = _held_apart_score(x, y, SHAPE, PROP, 8, None)
    assert in_sample > 50
    assert apart < 0


def test_a_real_violation_outranks_pairs_without_one():
    rng = np.random.default_rng(4)
    n = 60_000
    nulls = [_held_apart_score(rng.laplace(0.0, 10.0, n), rng.laplace(0.0, 10.0, n), SHAPE, PROP, 8, None)
             for _ in range(3)]
    # Laplace(0, 1/ε) against Laplace(1, 1/ε) with ε = 0.5: the pair's loss is 0.5, the claim 0.1
    violating = _held_apart_score(rng.laplace(0.0, 2.0, n), rng.laplace(1.0, 2.0, n), SHAPE, PROP, 8, None)
    assert violating > max(nulls)
    assert violating > 0  # the held-out test is predicted to refute
