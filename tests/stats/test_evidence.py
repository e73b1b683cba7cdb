"""The evidence an alarm carries (app.stats.evidence) and the α spending of re-discovery."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.stats.claims import PureDP, dp_claim
from app.stats.evidence import (
    alarm_evidence,
    as_claim,
    claim_evidence,
    score_lower_bound,
    score_statistic,
    snapshot_reading,
)
from app.stats.heldout import Counts, test_claim
from app.stats.multiple import initial_check_alpha, rediscovery_alpha
from app.stats.period import period_statistic


def test_the_score_statistic_is_the_detectors_and_decreases_in_epsilon():
    for a, b, n in [(130, 22, 400), (10, 0, 400), (500, 184, 1000), (3, 1, 50)]:
        for eps in (0.0, 0.5, 1.0, 2.0):
            assert score_statistic(a, b, n, eps) == pytest.approx(float(period_statistic(a, b, n, eps).z), rel=1e-9)
        values = [score_statistic(a, b, n, e) for e in np.linspace(-3, 6, 40)]
        assert all(x >= y - 1e-12 for x, y in zip(values, values[1:]))


@pytest.mark.parametrize("p,ratio,n", [(0.5, math.e, 200), (0.05, math.e, 400), (0.01, 3.0, 2000), (0.3, 1.0, 100)])
def test_the_score_bound_covers_the_log_ratio(p, ratio, n):
    """Measured coverage of ln(p/q) over 400 draws, rare events and small n included."""
    rng = np.random.default_rng(11)
    q = p / ratio
    a = rng.binomial(n, p, 400)
    b = rng.binomial(n, q, 400)
    bounds = np.array([score_lower_bound(int(x), int(y), n, 0.05) for x, y in zip(a, b)])
    coverage = float(np.mean(bounds <= math.log(ratio)))
    assert coverage >= 0.92, coverage  # nominal 0.95; 400 draws have a standard error of 0.011


def test_degenerate_counts():
    assert score_lower_bound(0, 0, 100, 0.05) == -math.inf  # no output in the event: no evidence
    assert score_lower_bound(400, 0, 400, 0.05) == pytest.approx(5.0, abs=0.1)  # everything vs nothing
    assert score_lower_bound(50, 50, 100, 0.05) < 0


def test_the_exact_bound_is_the_engines_and_delta_claims_use_it():
    found = claim_evidence(1.0, 130, 22, 400, 400)
    engine = test_claim(PureDP(1.0), Counts(130, 400, 22, 400), 0.05)
    assert found["exact"] == engine and found["method"] == "score"
    assert found["epsilon_lower_bound"] >= engine.lower_bound  # the score bound is the tighter one here
    with_delta = claim_evidence(dp_claim(1.0, 0.05), 130, 22, 400, 400)
    assert with_delta["method"] == "clopper_pearson"
    # claims other than pure ε are tested in both orientations, each at α/2
    half = test_claim(dp_claim(1.0, 0.05), Counts(130, 400, 22, 400), 0.025)
    assert with_delta["orientation"] == "x" and with_delta["exact"] == half
    assert with_delta["epsilon_lower_bound"] == pytest.approx(math.log((half.p_lo - 0.05) / half.q_hi))

    class Epsilon:  # any object with epsilon (and delta) is a claim
        epsilon = 2.0

    assert as_claim(Epsilon()) == PureDP(2.0)
    with pytest.raises(TypeError):
        as_claim("two")


def test_alarm_evidence_pools_the_detectors_window():
    ev = alarm_evidence([50, 60, 70], [20, 10, 12], [200, 200, 200], [4, 5, 6], lag=2, claim=1.0)
    assert ev["window"] == {"lag": 2, "from_t": 5, "to_t": 6}
    assert ev["counts"] == {"a": 130, "b": 22, "n": 400}
    assert ev["p_hat"] == pytest.approx(0.325) and ev["q_hat"] == pytest.approx(0.055)
    # The headline is the anytime-valid bound on all three periods; the window's own
    # score and exact bounds are kept, labelled descriptive.
    assert ev["method"] == "confidence_sequence" and ev["anytime"]["periods"] == 3
    assert ev["exceeds_claim"] is True and ev["epsilon_lower_bound"] >= 1.0  # ε > LB: the claim is excluded
    assert ev["epsilon_lower_bound"] == ev["anytime"]["lower_bound"]
    assert ev["window_bound"]["descriptive"] is True and ev["window_bound"]["lower_bound"] > ev["epsilon_lower_bound"]
    assert "at best" not in ev["statement"] and "Evidence valid at the alarm" not in ev["statement"]
    # The headline says what it is valid for: across runs, not given the alarm, and not independent of it.
    assert "valid across runs, not given the alarm; not independent evidence" in ev["statement"]
    assert ev["validity"] == ev["anytime"]["validity"] == "across_runs"
    assert ev["restates_alarm"] is True and ev["anytime"]["restates_alarm"] is True
    assert ev["window_bound"]["validity"] == "descriptive"
    assert "Descriptive" in ev["statement"]
    # "95% confidence" is said of the anytime-valid bound only, never of the window bound.
    assert "95% confidence" not in ev["window_bound"]["statement"]
    weak = alarm_evidence([110], [100], [200], [3], lag=1, claim=1.0)
    assert weak["exceeds_claim"] is False and "does not clear the mechanism" in weak["statement"]
    with pytest.raises(ValueError):
        alarm_evidence([1], [1], [10], [1], lag=2, claim=1.0)


def test_a_snapshot_below_the_claim_never_reads_as_clearing():
    """A flagrant case: claim 0.1, true ε 10, snapshot LB −1.49."""
    after = snapshot_reading(-1.49, 0.3, 0.1, after_alarm=True)
    assert after["verdict"] == "weaker_estimator"
    assert "weaker estimator" in after["statement"] and "does not clear" in after["statement"]
    above = snapshot_reading(2.1, 2.3, 1.0)
    assert above["verdict"] == "exceeds_claim" and "separate estimator" in above["statement"]
    alone = snapshot_reading(0.4, 0.5, 1.0, after_alarm=False)
    assert alone["verdict"] == "below_claim" and "does not show that the claim holds" in alone["statement"]
    nothing = snapshot_reading(-0.2, 0.1, math.inf, after_alarm=False)
    assert nothing["verdict"] == "no_loss_established" and "does not show that the mechanism is private" in \
        nothing["statement"]
    for reading in (after, above, alone, nothing):
        assert "at best" not in reading["statement"]


def test_rediscovery_levels_sum_to_alpha():
    alpha = 0.05
    spent = 2 * initial_check_alpha(alpha, 2, True) + sum(rediscovery_alpha(alpha, r) for r in range(1, 60))
    assert spent == pytest.approx(alpha) and spent <= alpha
    assert initial_check_alpha(alpha, 4, False) == pytest.approx(alpha / 4)
    assert rediscovery_alpha(alpha, 1) == pytest.approx(alpha / 4) and rediscovery_alpha(alpha, 3) == pytest.approx(alpha / 16)
    with pytest.raises(ValueError):
        rediscovery_alpha(alpha, 0)


def test_rediscovery_never_adopts_an_empty_or_uninformative_event():
    """Discrete evidence: an interval that held no output, and a tuple chosen from counts of 4 against 1."""
    import json

    from app.monitors.rediscovery import assess_candidates

    rng = np.random.default_rng(5)
    x, xp = [0], [1]
    draws = {json.dumps(x): rng.laplace(0, 1, 20_000), json.dumps(xp): rng.laplace(1, 1, 20_000)}
    empty = {"x": xp, "x_prime": x, "event": {"kind": "interval", "low": 50.0, "high": 60.0}, "informative": True}
    flagged = {"x": xp, "x_prime": x, "event": {"kind": "interval", "low": 1.0}, "informative": False,
               "reason": "its held-out lower bound is not above 0"}
    good = {"x": xp, "x_prime": x, "event": {"kind": "interval", "low": 1.0}, "informative": True}
    existing = [{"id": "c0", "x": xp, "x_prime": x, "event": {"kind": "interval", "low": 3.0}}]
    out, assessed = assess_candidates([empty, flagged, good], draws, 0.05, existing)
    by_event = {json.dumps(c["event"]) + str(c["informative"]): c for c in out}
    assert by_event[json.dumps(empty["event"]) + "True"]["better"] is False
    assert "holds no output" in by_event[json.dumps(empty["event"]) + "True"]["why"]
    assert by_event[json.dumps(flagged["event"]) + "False"]["better"] is False
    assert by_event[json.dumps(good["event"]) + "True"]["better"] is True and out[0]["event"] == good["event"]
    assert assessed[0]["held_out"]["a"] > 0
    # Against an existing check with a higher bound on the same draws, it is not better.
    stronger = [{"id": "c1", "x": xp, "x_prime": x, "event": {"kind": "interval", "low": 0.9}}]
    out, _ = assess_candidates([good], draws, 0.05, stronger)
    assert out[0]["better"] is False or out[0]["comparison"]["epsilon_lower_bound"] > out[0]["best_existing_bound"]
    same = [{"id": "c2", "x": xp, "x_prime": x, "event": good["event"]}]
    out, _ = assess_candidates([good], draws, 0.05, same)
    assert out[0]["better"] is False and "already watches" in out[0]["why"]


def test_alarm_evidence_under_gdp_and_zcdp_claims_bounds_their_own_parameter():
    """A μ-GDP alarm's evidence bounds μ, not ε (μ_lb = Φ⁻¹(p_lo) − Φ⁻¹(q_hi), method.md §10.4),
    in whichever orientation the event points, and never calls μ an ε."""
    from scipy.stats import norm

    from app.stats.claims import parse_claim

    # Gaussian shift with μ' = 2 against a claim of μ = 0.5: the half-line {o ≥ 1} has
    # p = Φ(1) under x (mean 2) and q = Φ(−1) under x' (mean 0), so μ_lb ≈ 2 − margin.
    n = 4000
    p, q = norm.cdf(1.0), norm.cdf(-1.0)
    a, b = int(round(p * n)), int(round(q * n))
    ev = alarm_evidence([a], [b], [n], [7], lag=1, claim=parse_claim({"gdp_mu": 0.5}))
    assert ev["parameter"] == "μ" and ev["epsilon_lower_bound"] is None
    # The window's exact bound is the descriptive one: μ_lb ≈ 2 − margin.
    assert 1.7 < ev["window_bound"]["lower_bound"] < 2.0
    # The headline is anytime-valid; with one period its line is the tangent at the a-priori q = ½
    # (predictable: nothing was seen before), so it is lower, but above the claim.
    assert ev["method"] == "confidence_sequence" and 0.5 <= ev["lower_bound"] < ev["window_bound"]["lower_bound"]
    assert ev["exceeds_claim"] is True
    assert ev["claim"] == {"gdp_mu": 0.5} and "μ >" in ev["statement"]
    # With x and x' swapped the event is likelier under x': the next periods' orientation is chosen
    # from the past counts, so from period 2 on the sequence bounds μ on that side too.
    swapped = alarm_evidence([b] * 3, [a] * 3, [n] * 3, [5, 6, 7], lag=3, claim=parse_claim({"gdp_mu": 0.5}))
    assert swapped["orientation"] == "x_prime" and swapped["exceeds_claim"] is True
    assert swapped["lower_bound"] > 1.2
    # at the claim's own boundary nothing is contradicted
    a0, b0 = int(round(norm.cdf(0.25) * n)), int(round(norm.cdf(-0.25) * n))
    assert alarm_evidence([a0] * 5, [b0] * 5, [n] * 5, [1, 2, 3, 4, 5], lag=1,
                          claim=parse_claim({"gdp_mu": 0.5}))["exceeds_claim"] is False
    # ρ-zCDP: an anytime-valid bound on ρ too (the Gaussian shift μ' = 2 is ρ = μ'²/2 = 2-zCDP).
    zc = alarm_evidence([a], [b], [n], [7], lag=1, claim=parse_claim({"zcdp_rho": 0.05}))
    assert zc["parameter"] == "ρ" and zc["method"] == "confidence_sequence" and zc["window_bound"]["exceeds_claim"]
    assert zc["anytime"]["parameter"] == "ρ" and 0.05 <= zc["lower_bound"] < 2.0 and zc["exceeds_claim"] is True
    assert zc["epsilon_lower_bound"] is None and "not given the alarm" in zc["statement"] and "ρ >" in zc["statement"]


def test_a_snapshot_is_not_compared_with_a_claim_that_bounds_no_pure_epsilon():
    from app.stats.claims import parse_claim

    for claim in ({"gdp_mu": 1.0}, {"epsilon": 1.0, "delta": 1e-5}):
        reading = snapshot_reading(3.0, 3.5, parse_claim(claim))
        assert reading["verdict"] == "not_comparable" and "neither supports nor contradicts" in reading["statement"]
    assert snapshot_reading(3.0, 3.5, parse_claim({"epsilon": 1.0}))["verdict"] == "exceeds_claim"


def test_the_confirmation_on_fresh_outputs_is_added_to_the_alarms_evidence():
    """The exact test on fresh outputs drawn after the alarm, stored as ``confirmation``."""
    from app.alarms.evidence import with_confirmation

    ev = alarm_evidence([50, 60, 70], [20, 10, 12], [200, 200, 200], [4, 5, 6], lag=2, claim=1.0,
                        detector="e-detector", arl=20000.0, window=1000)
    assert ev["detection"]["kind"] == "arl" and "not a refutation" in ev["statement"]
    alarm = {"kind": "privacy", "statement": ev["statement"], "check": ev, "contract": None, "snapshot": None}
    out = with_confirmation(alarm, 8000, 2000, 25000, PureDP(1.0), 0.05)
    assert out["confirmation"]["confirms"] is True and out["confirmation"]["counts"]["n"] == 25000
    assert out["statement"].startswith(ev["statement"]) and "Confirmed on fresh outputs" in out["statement"]
    assert out["confirmation"]["orientation"] == "x" and out["confirmation"]["faces"]["event"]["confirms"] is True
    # the one bound valid given the alarm, and independent of it, says so
    assert out["confirmation"]["validity"] == "given_alarm" and out["confirmation"]["restates_alarm"] is False
    assert "valid given the alarm" in out["statement"]
    # the complement face is tested too (1 − q ≤ e·(1 − p): 0.10 > e·0.03), and said so
    comp = with_confirmation(alarm, 24250, 22500, 25000, PureDP(1.0), 0.05)
    assert comp["confirmation"]["confirms"] is True and comp["confirmation"]["face"] == "complement"
    assert "on the event's complement" in comp["statement"]
    # the orientation is the alarm's own (chosen before the fresh outputs): x' here
    swapped = with_confirmation({**alarm, "check": {**ev, "orientation": "x_prime"}}, 2000, 8000, 25000,
                                PureDP(1.0), 0.05)
    assert swapped["confirmation"]["orientation"] == "x_prime" and swapped["confirmation"]["confirms"] is True
    weak = with_confirmation(alarm, 2600, 1000, 25000, PureDP(1.0), 0.05)
    assert weak["confirmation"]["confirms"] is False and "does not clear the mechanism" in weak["statement"]


def test_the_typed_evidence_says_what_each_bound_is_valid_for():
    """The API's models carry `validity` and `restates_alarm`; alarms stored without them get the right ones."""
    from app.alarms.schemas import CheckEvidence, Confirmation

    ev = alarm_evidence([50, 60, 70], [20, 10, 12], [200, 200, 200], [4, 5, 6], lag=2, claim=1.0)
    typed = CheckEvidence.model_validate(ev)
    assert typed.validity == "across_runs" and typed.restates_alarm is True
    assert typed.anytime is not None and typed.anytime.validity == "across_runs"
    old = {k: v for k, v in ev.items() if k not in ("validity", "restates_alarm")}
    assert CheckEvidence.model_validate(old).validity == "across_runs"
    legacy = {**old, "method": "score", "anytime": None}
    assert CheckEvidence.model_validate(legacy).validity == "descriptive"
    conf = Confirmation.model_validate({"counts": {"a": 1, "b": 0, "n": 10}, "confidence": 0.95, "confirms": False})
    assert conf.validity == "given_alarm" and conf.restates_alarm is False
