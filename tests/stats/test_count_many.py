"""count_many: the counts of many events on one sample, sharing what they compute
(app.stats.events.count_many), equal event by event to count_in."""

import numpy as np
import pytest

from app.reference.corpus import corpus
from app.stats.candidates import ProposalSettings, propose
from app.stats.events import Projected, count_in, count_many
from app.stats.shapes import n_outputs

PROP = ProposalSettings(n_test=100_000, level=0.001, target=0.1, learned=True, seed=1)


@pytest.mark.parametrize("slug", ["svt3-list", "svt1-vector", "rnm-laplace-value"])
def test_count_many_equals_count_in_event_by_event(slug):
    m = corpus()[slug]
    rng = np.random.default_rng(7)
    x, y = m.pairs[0]
    cands = propose(m.sample(x, 4_000, rng), m.sample(y, 4_000, rng), m.shape, PROP)
    events = [c.event for c in cands]
    assert len(events) >= (3 if m.shape.container == "scalar" else 10)
    if m.shape.container != "scalar":  # projections of several statistics, learned ones among them
        projections = {e.projection.kind for e in events if isinstance(e, Projected)}
        assert "linear" in projections and len(projections) >= 3
    sample = m.sample(x, 5_000, rng)
    assert n_outputs(sample) == 5_000
    # blocks that do not divide the sample
    assert count_many(events, sample, block=1_234) == [count_in(e, sample) for e in events]
