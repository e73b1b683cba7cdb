"""One verdict: app/alarms/verdict.py."""

from __future__ import annotations

import pytest

from app.alarms.verdict import (
    DESCRIPTIVE_PREFIX,
    DESCRIPTIVE_WHY,
    DETECTION_PREFIX,
    NOT_A_TEST_PREFIX,
    NOT_CONFIRMED_PREFIX,
    NOT_REFUTED_PREFIX,
    REFUTES_PREFIX,
    WEAKER_PREFIX,
    Verdict,
    alarm_verdict,
    audit_verdict,
    snapshot_verdict,
)
from app.stats.evidence import alarm_evidence, confirmation

# An alarm stored before the anytime-valid bound (its `check` held the window bound as its headline), with
# three readings that seemed to disagree: the window bound (0.602) does not reach the claimed 1, the MPL snapshot's LB does
# not either, but its claim terms refute 1-DP with δ(1) ≥ 0.0392.
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


def new_check(detector: str, *, violation: int = 2) -> dict:
    """The evidence the engine stores (app.stats.evidence.alarm_evidence): 30 periods
    on the boundary of ε = 1 (27 vs 10 of 200, e^1 ≈ 2.7), then `violation` periods at 55 vs 10. With
    2 of them the window's score bound (1.33) and exact bound (1.11) exceed the claim while the
    anytime-valid bound (0.9 with the e-process of method.md §13.3c) does not exclude it; with 3 at
    60/65/70 vs 10 of 200 after 20 it does."""
    if violation == 2:
        a, b = [27] * 30 + [55, 55], [10] * 32
    else:
        a, b = [20] * 20 + [60, 65, 70], [10] * 23
    n, t = [200] * len(a), list(range(1, len(a) + 1))
    arl = 400.0 if detector == "e-detector" else None
    return alarm_evidence(a, b, n, t, lag=2 if violation == 2 else 3, claim=1.0, alpha=0.05, detector=detector,
                          arl=arl, window=20)


def new_alarm(detector: str, *, confirmation_counts: tuple[int, int] | None = None, snapshot: dict | None = None,
              violation: int = 2) -> dict:
    conf = (confirmation(*confirmation_counts, 50_000, 1.0) if confirmation_counts else None)
    return {"kind": "privacy", "statistic": 6.1, "threshold": 5.99, "t": 32, "horizon_index": 1,
            "claim": {"epsilon": 1.0},
            "evidence": {"kind": "privacy", "statement": "…", "check": new_check(detector, violation=violation),
                         "contract": None, "snapshot": snapshot, "confirmation": conf}}


CONFIRMS, DOES_NOT_CONFIRM = (16_000, 5_000), (14_000, 5_000)  # fresh counts of 50 000: ε ≥ 1.12 / 0.989
DETECTORS = ["aggregator", "naive", "e-process", "e-detector"]


def assert_consistent(v: Verdict) -> None:
    """The sentence and every estimator's label agree on `refutes`; nothing reads as clearing; a
    descriptive figure or a detection is never counted as refuting nor quoted at a confidence."""
    assert v.refutes == any(e.refutes for e in v.estimators)
    if v.subject == "claim":
        assert v.sentence.startswith("Refuted" if v.refutes else ("Not refuted", "No claim", "Detected, not refuted"))
        if not v.refutes:
            assert "does not show" in v.sentence or "says nothing" in v.sentence
            assert "Refuted" not in v.sentence and "refutes it" not in v.sentence
    for e in v.estimators:
        if e.refutes:
            assert e.valid and e.label.startswith(REFUTES_PREFIX), e
        elif not e.valid:
            assert e.label.startswith((NOT_A_TEST_PREFIX, DESCRIPTIVE_PREFIX, DETECTION_PREFIX)), e
            assert "nor clears" in e.label or "nor does it clear" in e.label, e
            assert e.name not in ("window_bound", "exact_bound") or e.label.startswith(
                f"{DESCRIPTIVE_PREFIX}: {DESCRIPTIVE_WHY}"), e
            assert "confidence" not in e.figure and e.confidence is None or e.name == "mpl_point_estimate", e
        elif e.name == "confirmation":  # fresh outputs that do not contradict the claim: never "the weaker estimator"
            assert e.label.startswith(NOT_CONFIRMED_PREFIX) and "does not clear the mechanism" in e.label, e
            assert v.confirmed is False and "does not show that the claim holds" in e.label, e
        elif v.refutes:
            assert e.label.startswith(WEAKER_PREFIX) and "does not clear the mechanism" in e.label, e
        else:
            assert e.label.startswith(NOT_REFUTED_PREFIX) and "does not show that the claim holds" in e.label, e
        for wrong in ("satisfies", "is private", "clears the mechanism.", "holds."):
            assert wrong not in e.label, (wrong, e.label)
    # the window bounds are descriptive, whatever their number; they are never the sentence's evidence
    for e in v.estimators:
        if e.name in ("window_bound", "exact_bound"):
            assert not e.valid and not e.refutes and e.figure not in v.sentence.split(" (")[0]
    # the fresh outputs decide `confirmed`; when the alarm's own data refute and they do not, the sentence says so first
    conf = next((e for e in v.estimators if e.name == "confirmation"), None)
    assert v.confirmed is (None if conf is None else conf.refutes)
    if v.refutes and v.confirmed is False:
        assert v.sentence.startswith("Refuted by the alarm's own data, not confirmed: ")
        assert "does not show that the claim holds" in v.sentence and conf is not None and conf.figure in v.sentence
    # refuting estimators come first, the quoted one is the first of them
    flags = [e.refutes for e in v.estimators]
    assert flags == sorted(flags, reverse=True)
    if v.refutes:
        assert v.strongest == v.estimators[0].name and v.estimators[0].figure in v.sentence
    if "% confidence" in v.sentence and not v.sentence.startswith("No claim"):
        # only ever said of the valid estimator the sentence leads with
        assert v.refutes and v.estimators[0].confidence is not None
        assert v.sentence.count("% confidence") == 1


def test_three_readings_that_seemed_to_disagree_yield_one_refuting_verdict() -> None:
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
    assert names["window_bound"].figure == "score bound on ε over the window: 0.602 (claimed 1)"


def test_legacy_window_bound_above_the_claim_is_descriptive_not_a_refutation() -> None:
    """An alarm stored before the anytime-valid bound whose window bound (its old headline) exceeds the claim: the
    bound is read as descriptive; the alarm refutes as the detector's test (legacy alarms carry no
    `detection`, and the detectors before the e-detector were level-α tests), never "at 95%"."""
    check = {**CHECK, "lower_bound": 1.42, "epsilon_lower_bound": 1.42, "exceeds_claim": True}
    v = alarm_verdict({**ALARM, "evidence": {**ALARM["evidence"], "check": check, "snapshot": None}})
    assert_consistent(v)
    assert v.refutes and v.strongest == "detector"
    assert v.sentence.startswith("Refuted: M_t = 3.91 > threshold 3.42 (the detector's sequential test, a level-α "
                                 "test, period 17 of horizon 1), which contradicts ε = 1.")
    assert "95% confidence" not in v.sentence and "1.42" not in v.sentence
    window = next(e for e in v.estimators if e.name == "window_bound")
    assert not window.valid and not window.refutes and window.value == pytest.approx(1.42)
    assert window.label.startswith("descriptive: the window was chosen by the data; not a confidence statement")
    assert "older dpwatch" in window.label
    # with the snapshot's claim terms refuting as well: they are the valid evidence quoted first
    v = alarm_verdict({**ALARM, "evidence": {**ALARM["evidence"], "check": check}})
    assert_consistent(v)
    assert v.strongest == "claim_terms" and "1.42" not in v.sentence


def test_e_detector_with_a_window_bound_above_the_claim_is_a_detection_not_a_refutation() -> None:
    """The window bound (1.33, exact 1.11) exceeds the claimed 1, the anytime-valid bound
    (0.9) does not, and the alarm is an e-detector's: nothing valid refutes, so no "95% confidence"
    refutation; the sentence says it is a detection (ARL ≥ 400) awaiting confirmation."""
    alarm = new_alarm("e-detector")
    check = alarm["evidence"]["check"]
    assert check["window_bound"]["lower_bound"] > 1 and check["exact"]["lower_bound"] > 1  # the premise
    assert check["anytime"]["lower_bound"] < 1 and not check["anytime"]["contradicts_claim"]
    v = alarm_verdict(alarm)
    assert_consistent(v)
    assert v.refutes is False and v.strongest is None
    assert v.sentence.startswith("Detected, not refuted: log M_t = 6.1 > log threshold 5.99 (the e-detector's alarm, "
                                 "period 32 of horizon 1) is an ARL-controlled detection (ARL ≥ 400), not a test of "
                                 "ε = 1 at level α; it awaits the confirmation on fresh outputs drawn after the alarm.")
    assert "95% confidence" not in v.sentence and "1.33" not in v.sentence and "Refuted" not in v.sentence
    names = {e.name: e for e in v.estimators}
    assert set(names) == {"anytime_bound", "detector", "window_bound", "exact_bound"}
    assert names["detector"].label.startswith(DETECTION_PREFIX) and not names["detector"].valid
    assert "ARL" in names["detector"].label
    assert names["anytime_bound"].figure == "ε > 0.9, not excluding the claimed 1"
    assert names["anytime_bound"].label.startswith(NOT_REFUTED_PREFIX)
    for name in ("window_bound", "exact_bound"):
        assert names[name].label.startswith(f"{DESCRIPTIVE_PREFIX}: {DESCRIPTIVE_WHY}")
    # the fresh confirmation that does not contradict: still not refuted, no longer "awaiting"
    v = alarm_verdict(new_alarm("e-detector", confirmation_counts=DOES_NOT_CONFIRM))
    assert_consistent(v)
    assert not v.refutes and "awaits" not in v.sentence and "ε ≥ 0.989, not above the claimed 1" in v.sentence
    # the fresh confirmation that contradicts the claim: refuted, quoted first, with its level
    v = alarm_verdict(new_alarm("e-detector", confirmation_counts=CONFIRMS))
    assert_consistent(v)
    assert v.refutes and v.strongest == "confirmation"
    assert v.sentence.startswith("Refuted: ε ≥ 1.12 > claimed 1 at 95% confidence (the exact test on fresh outputs "
                                 "drawn after the alarm, 50,000 per database), which contradicts ε = 1.")
    detector = next(e for e in v.estimators if e.name == "detector")
    assert not detector.refutes and detector.label.startswith(DETECTION_PREFIX)


def test_a_level_alpha_detector_refutes_and_says_that_no_valid_bound_does_yet() -> None:
    v = alarm_verdict(new_alarm("aggregator"))
    assert_consistent(v)
    assert v.refutes and v.strongest == "detector"
    assert v.sentence.startswith("Refuted: M_t = 6.1 > threshold 5.99 (the aggregator detector's sequential test, a "
                                 "level-0.05 test, period 32 of horizon 1), which contradicts ε = 1. No bound valid "
                                 "at the alarm excludes the claim beyond the detector yet (the anytime-valid bound: "
                                 "ε > 0.9, not excluding the claimed 1)")
    assert "confirmation on fresh outputs follows" in v.sentence and "95% confidence" not in v.sentence
    detector = next(e for e in v.estimators if e.name == "detector")
    assert "level-0.05 test of the claim over the horizon" in detector.label


def test_the_anytime_bound_that_excludes_the_claim_leads() -> None:
    v = alarm_verdict(new_alarm("e-detector", violation=3))
    assert_consistent(v)
    assert v.refutes and v.strongest == "anytime_bound"
    assert v.sentence.startswith("Refuted: ε > 1.02 > claimed 1 at 95% confidence (the anytime-valid bound, every "
                                 "period t = 1–23), which contradicts ε = 1. That bound is valid across runs, not "
                                 "given the alarm; not independent evidence: it reads the periods that raised the "
                                 "alarm; the confirmation on fresh outputs follows.")
    anytime = next(e for e in v.estimators if e.name == "anytime_bound")
    assert anytime.validity == "across_runs" and anytime.restates_alarm is True
    assert "not given the alarm" in anytime.label
    v = alarm_verdict(new_alarm("e-process", violation=3, confirmation_counts=CONFIRMS))
    assert_consistent(v)
    assert v.strongest == "confirmation" and v.sentence.endswith("; 2 other estimators refute it too.")
    conf = next(e for e in v.estimators if e.name == "confirmation")
    assert conf.validity == "given_alarm" and conf.restates_alarm is False
    assert "not given the alarm" not in v.sentence  # the fresh test leads: valid given the alarm


@pytest.mark.parametrize("detector", DETECTORS)
@pytest.mark.parametrize("conf", [None, CONFIRMS, DOES_NOT_CONFIRM])
@pytest.mark.parametrize("snap", [None, "refuting", "weaker"])
@pytest.mark.parametrize("violation", [2, 3])
def test_every_label_and_the_sentence_agree_on_refutes(detector: str, conf: tuple[int, int] | None, snap: str | None,
                                                       violation: int) -> None:
    snapshot = None if snap is None else (
        SNAPSHOT if snap == "refuting" else {**SNAPSHOT, "claim_terms": {**SNAPSHOT["claim_terms"], "refutes": False,
                                                                         "delta_lower_bound": 0.0}})
    v = alarm_verdict(new_alarm(detector, confirmation_counts=conf, snapshot=snapshot, violation=violation))
    assert_consistent(v)
    valid_refuting = [e.name for e in v.estimators if e.valid and e.refutes]
    assert v.refutes is bool(valid_refuting)
    # an e-detector's alarm refutes only through a valid estimator; any other detector's refutes by itself
    assert ("detector" in valid_refuting) is (detector != "e-detector")
    if detector == "e-detector" and not v.refutes:
        assert v.sentence.startswith("Detected, not refuted") and "ARL ≥ 400" in v.sentence


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


@pytest.mark.parametrize("detector", ["aggregator", "naive", "e-process"])
def test_an_alarm_the_fresh_outputs_do_not_confirm_says_so_first(detector: str) -> None:
    """On a false alarm the alarm's own data refute the claim (a valid level-α statement across runs),
    the fresh outputs drawn after it do not; the verdict leads with that, and `confirmed` is false."""
    v = alarm_verdict(new_alarm(detector, violation=3, confirmation_counts=DOES_NOT_CONFIRM))
    assert_consistent(v)
    assert v.refutes and v.confirmed is False
    assert v.sentence.startswith("Refuted by the alarm's own data, not confirmed: ")
    assert "the exact test on fresh outputs drawn after the alarm does not (" in v.sentence
    assert "false alarms the detector allows (at most α)" in v.sentence
    conf = next(e for e in v.estimators if e.name == "confirmation")
    assert conf.label.startswith(NOT_CONFIRMED_PREFIX) and not conf.refutes and conf.valid
    confirmed = alarm_verdict(new_alarm(detector, violation=3, confirmation_counts=CONFIRMS))
    assert confirmed.confirmed is True and confirmed.strongest == "confirmation"
    assert confirmed.sentence.startswith("Refuted: ")
    assert alarm_verdict(new_alarm(detector, violation=3)).confirmed is None


def test_a_zcdp_alarm_is_refuted_by_its_anytime_bound_on_rho() -> None:
    """A ρ-zCDP alarm gets the anytime-valid bound "ρ > LB at 95%", valid at the
    alarm, like GDP's μ; the window bound stays descriptive."""
    from app.stats.claims import ZCDP, parse_claim

    claim, n = parse_claim({"zcdp_rho": 0.5}), 500
    a = [int(round(float(ZCDP(0.5).upper(0.1)) * n))] * 20 + [475] * 3  # on the boundary, then p = 0.95
    b = [50] * 23
    check = alarm_evidence(a, b, [n] * 23, list(range(1, 24)), lag=3, claim=claim, detector="e-detector",
                           arl=400.0, window=20)
    assert check["method"] == "confidence_sequence" and check["anytime"]["parameter"] == "ρ"
    alarm = {"kind": "privacy", "statistic": 6.1, "threshold": 5.99, "t": 23, "horizon_index": 1,
             "claim": {"zcdp_rho": 0.5},
             "evidence": {"kind": "privacy", "statement": "…", "check": check, "contract": None, "snapshot": None,
                          "confirmation": None}}
    v = alarm_verdict(alarm)
    assert_consistent(v)
    lb = check["anytime"]["lower_bound"]
    assert v.refutes and v.strongest == "anytime_bound" and 0.5 < lb < 2.0
    assert v.sentence.startswith(f"Refuted: ρ > {lb:g} > claimed 0.5 at 95% confidence (the anytime-valid bound, "
                                 "every period t = 1–23), which contradicts 0.5-zCDP. That bound is valid across runs, "
                                 "not given the alarm")
    # the fresh confirmation (both faces) then leads
    alarm["evidence"]["confirmation"] = confirmation(23_750, 2_500, 25_000, claim)
    v = alarm_verdict(alarm)
    assert_consistent(v)
    assert v.strongest == "confirmation" and v.sentence.startswith("Refuted: ρ ≥ ")
