"""One verdict (issue 18 item 3): app/alarms/verdict.py."""

from __future__ import annotations

import pytest

from app.alarms.verdict import (
    NOT_A_TEST_PREFIX,
    NOT_REFUTED_PREFIX,
    REFUTES_PREFIX,
    WEAKER_PREFIX,
    Verdict,
    alarm_verdict,
    audit_verdict,
    snapshot_verdict,
)

# The alarm of issue 18 item 3: the window bound (0.602) does not reach the claimed 1, the MPL
# snapshot's LB does not either, but its claim terms refute 1-DP with δ(1) ≥ 0.0392.
CHECK = {
    "method": "score", "window": {"lag": 3, "from_t": 15, "to_t": 17}, "counts": {"a": 120, "b": 60, "n": 600},
    "p_hat": 0.2, "q_hat": 0.1, "parameter": "ε", "lower_bound": 0.602, "epsilon_lower_bound": 0.602,
    "orientation": "x",
    "exact": {"method": "clopper_pearson", "p_lower": 0.17, "q_upper": 0.12, "lower_bound": 0.35,
              "epsilon_lower_bound": 0.35, "exceeds_claim": False},
    "confidence": 0.95, "claim": {"epsilon": 1.0}, "claim_description": "ε = 1", "exceeds_claim": False,
    "statement": "… its 95% lower bound (0.602, ε̂ = 1.2) does not reach the claimed 1 …",
    "some_key_added_later": {"x": 1},
}
SNAPSHOT = {
    "snapshot_id": "5b0f5d5e-8c1e-4d4f-9a57-6a1f0b1f3a11", "role": "separate_estimator", "lower_bound": 0.81,
    "epsilon_hat": 1.2, "t_hat": 0.4, "confidence": 0.95, "verdict": "weaker_estimator", "statement": "…",
    "claim_terms": {"claim": {"epsilon": 1.0}, "description": "1-DP", "alpha": 0.05, "delta_hat": 0.06,
                    "delta_lower_bound": 0.0392, "mu_hat": 0.5, "mu_lower_bound": 0.2, "refutes": True,
                    "refuting_event": {"index": 3, "threshold": 0.1, "p_hat": 0.3, "q_hat": 0.05},
                    "statement": "the outputs contradict 1-DP at 95% confidence; δ(1) ≥ 0.0392"},
}
ALARM = {"kind": "privacy", "statistic": 3.91, "threshold": 3.42, "t": 17, "horizon_index": 1,
         "claim": {"epsilon": 1.0},
         "evidence": {"kind": "privacy", "statement": "…", "check": CHECK, "contract": None, "snapshot": SNAPSHOT}}


def assert_consistent(v: Verdict) -> None:
    """The sentence and every estimator's label agree on `refutes`; nothing reads as clearing."""
    assert v.refutes == any(e.refutes for e in v.estimators)
    if v.subject == "claim":
        assert v.sentence.startswith("Refuted" if v.refutes else ("Not refuted", "No claim"))
        if not v.refutes:
            assert "does not show" in v.sentence or "says nothing" in v.sentence
    for e in v.estimators:
        if e.refutes:
            assert e.valid and e.label.startswith(REFUTES_PREFIX), e
        elif not e.valid:
            assert e.label.startswith(NOT_A_TEST_PREFIX) and "nor clears" in e.label, e
        elif v.refutes:
            assert e.label.startswith(WEAKER_PREFIX) and "does not clear the mechanism" in e.label, e
        else:
            assert e.label.startswith(NOT_REFUTED_PREFIX) and "does not show that the claim holds" in e.label, e
        for wrong in ("satisfies", "is private", "clears the mechanism.", "holds."):
            assert wrong not in e.label, (wrong, e.label)
    # refuting estimators come first, the quoted one is the first of them
    flags = [e.refutes for e in v.estimators]
    assert flags == sorted(flags, reverse=True)
    if v.refutes:
        assert v.strongest == v.estimators[0].name and v.estimators[0].figure in v.sentence


def test_the_contradicting_case_of_the_issue_yields_one_refuting_verdict() -> None:
    v = alarm_verdict(ALARM)
    assert_consistent(v)
    assert v.refutes is True and v.claim == "ε = 1"
    names = {e.name: e for e in v.estimators}
    assert set(names) == {"window_bound", "exact_bound", "mpl_lower_bound", "claim_terms", "detector"}
    assert not names["window_bound"].refutes and names["window_bound"].value == pytest.approx(0.602)
    assert not names["mpl_lower_bound"].refutes
    assert names["claim_terms"].refutes and names["claim_terms"].figure == "δ(1) ≥ 0.0392 > claimed δ = 0"
    assert names["detector"].refutes and names["detector"].figure == "M_t = 3.91 > threshold 3.42"
    # the strongest refuting evidence, with its number, first
    assert v.strongest == "claim_terms"
    assert v.sentence.startswith("Refuted: δ(1) ≥ 0.0392 > claimed δ = 0 at 95% confidence")
    assert "the detector's sequential test refutes it too (M_t = 3.91 > threshold 3.42)" in v.sentence
    assert "0.602, not above the claimed 1" in names["window_bound"].figure


def test_window_bound_above_the_claim_is_quoted_first() -> None:
    check = {**CHECK, "lower_bound": 1.42, "epsilon_lower_bound": 1.42, "exceeds_claim": True}
    v = alarm_verdict({**ALARM, "evidence": {**ALARM["evidence"], "check": check, "snapshot": None}})
    assert_consistent(v)
    assert v.sentence.startswith("Refuted: ε ≥ 1.42 > claimed 1 at 95% confidence (the alarm's bound over the "
                                 "detector's window, periods 15–17), which contradicts ε = 1; the detector's "
                                 "sequential test refutes it too (M_t = 3.91 > threshold 3.42).")
    # with the snapshot's claim terms refuting as well: the strongest first, the others counted
    v = alarm_verdict({**ALARM, "evidence": {**ALARM["evidence"], "check": check}})
    assert_consistent(v)
    assert v.strongest == "window_bound" and v.sentence.endswith("; 2 other estimators refute it too.")


def test_an_alarm_without_evidence_is_the_detectors_refutation() -> None:
    v = alarm_verdict({**ALARM, "evidence": None})
    assert_consistent(v)
    assert v.refutes and [e.name for e in v.estimators] == ["detector"]


def test_contract_alarm() -> None:
    v = alarm_verdict({"kind": "contract", "statistic": None, "threshold": None, "claim": None,
                       "evidence": {"kind": "contract", "statement": "…", "check": None, "snapshot": None,
                                    "contract": {"breach": "type", "detail": "a string where a float was expected"}}})
    assert v.subject == "contract" and v.refutes
    assert "type (a string where a float was expected)" in v.sentence
    assert_consistent(v)


def test_snapshot_alone_refuted_by_its_claim_terms() -> None:
    result = {"alpha": 0.05, "claimed_epsilon": 1.0, "epsilon_hat": 1.2, "lower_bound": 0.81, "exceeds_claim": False,
              "claim": {"epsilon": 1.0}, "claim_terms": SNAPSHOT["claim_terms"]}
    v = snapshot_verdict(result, status="done")
    assert v is not None
    assert_consistent(v)
    assert v.refutes and v.strongest == "claim_terms"
    assert snapshot_verdict(result, status="pending") is None and snapshot_verdict(None) is None


def test_snapshot_below_the_claim_is_not_refuted_and_does_not_clear() -> None:
    terms = {**SNAPSHOT["claim_terms"], "refutes": False, "delta_lower_bound": 0.0}
    result = {"alpha": 0.05, "claimed_epsilon": 1.0, "epsilon_hat": 0.7, "lower_bound": 0.3, "exceeds_claim": False,
              "claim": {"epsilon": 1.0}, "claim_terms": terms}
    v = snapshot_verdict(result, status="done")
    assert v is not None and not v.refutes
    assert_consistent(v)
    assert "ε ≥ 0.3, not above the claimed 1" in v.sentence


def test_snapshot_mpl_bound_above_the_claim_refutes() -> None:
    v = snapshot_verdict({"alpha": 0.05, "claimed_epsilon": 1.0, "epsilon_hat": 2.3, "lower_bound": 2.1}, status="done")
    assert v is not None and v.refutes and v.strongest == "mpl_lower_bound"
    assert v.sentence.startswith("Refuted: ε ≥ 2.1 > claimed 1, ε̂ = 2.3 at 95% confidence")
    assert_consistent(v)


def test_snapshot_without_claim() -> None:
    v = snapshot_verdict({"alpha": 0.05, "claimed_epsilon": None, "epsilon_hat": 2.3, "lower_bound": 2.1},
                         status="done")
    assert v is not None and not v.refutes and v.sentence.startswith("No claim to test: ε ≥ 2.1")
    assert_consistent(v)


def test_approx_dp_claim_mpl_not_comparable() -> None:
    snap = {**SNAPSHOT, "verdict": "not_comparable", "lower_bound": 5.0,
            "claim_terms": {**SNAPSHOT["claim_terms"], "claim": {"epsilon": 1.0, "delta": 1e-5}, "refutes": False,
                            "delta_lower_bound": 0.0}}
    check = {**CHECK, "method": "clopper_pearson", "claim": {"epsilon": 1.0, "delta": 1e-5}}
    v = alarm_verdict({**ALARM, "claim": {"epsilon": 1.0, "delta": 1e-5},
                       "evidence": {"kind": "privacy", "check": check, "snapshot": snap}})
    assert_consistent(v)
    mpl = next(e for e in v.estimators if e.name == "mpl_lower_bound")
    assert not mpl.refutes and "bounds no pure ε" in mpl.label
    assert v.refutes and v.strongest == "detector"  # the alarm itself


@pytest.mark.parametrize("refuted", [True, False])
def test_audit_verdict(refuted: bool) -> None:
    r = {"claim": "ε = 0.1", "claimed_epsilon": 0.1, "alpha": 0.05, "refuted": refuted,
         "lower_bound": 0.3 if refuted else 0.05, "epsilon_hat": 0.156}
    v = audit_verdict(r)
    assert_consistent(v)
    assert v.refutes is refuted
    point = next(e for e in v.estimators if e.name == "mpl_point_estimate")
    assert not point.refutes and not point.valid and "above the claim" in point.figure
    if not refuted:
        assert "nothing is refuted" not in v.sentence and "weaker" not in v.sentence


def test_snapshot_of_an_approx_dp_claim_does_not_compare_mpl_with_its_epsilon() -> None:
    """MPL's LB above the ε of an (ε, δ) claim refutes nothing: that claim bounds no pure loss."""
    terms = {**SNAPSHOT["claim_terms"], "claim": {"epsilon": 1.0, "delta": 1e-5}, "refutes": False,
             "delta_lower_bound": 0.0, "description": "(1, 1e-05)-DP"}
    v = snapshot_verdict({"alpha": 0.05, "claimed_epsilon": 1.0, "epsilon_hat": 3.0, "lower_bound": 2.5,
                          "claim": {"epsilon": 1.0, "delta": 1e-5}, "claim_terms": terms}, status="done")
    assert v is not None and not v.refutes
    assert_consistent(v)
    mpl = next(e for e in v.estimators if e.name == "mpl_lower_bound")
    assert not mpl.refutes and "bounds no pure ε" in mpl.label


def test_legacy_evidence_holding_the_snapshot_summary_only() -> None:
    legacy = {"snapshot_id": "5b0f5d5e-8c1e-4d4f-9a57-6a1f0b1f3a11", "lower_bound": 0.4, "epsilon_hat": 0.9,
              "confidence": 0.95, "exceeds_claim": False, "statement": "…"}
    v = alarm_verdict({**ALARM, "evidence": legacy})
    assert_consistent(v)
    assert v.refutes and v.strongest == "detector"
    assert [e.name for e in v.estimators] == ["detector", "mpl_lower_bound"]
