"""One verdict per alarm, snapshot or audit: does dpwatch's evidence refute the claim?

Why: an alarm used to carry three readings that seemed to disagree (the window bound
"does not reach the claimed 1", the snapshot card "LB does not exceed the claim", the snapshot's
claim terms "contradict 1-DP at 95%"). :func:`alarm_verdict`, :func:`snapshot_verdict` and
:func:`audit_verdict` read the stored evidence and say one thing first.

The rule: **the verdict refutes when any valid test at its stated level refutes.** What is valid
at an alarm (docs/method.md §11, docs/jobs_and_evidence.md §2):

- the detector's alarm: for the aggregator, the naive test and the e-process a level-α
  sequential test of the claim (seed 002; method.md §4, §13.3): it refutes by itself. For the
  e-detector an **ARL-controlled detection** (ARL ≥ c, method.md §13.4), not a refutation at
  level α: it is shown as a detection and never counted as refuting;
- the anytime-valid lower bound (``check.anytime``, eq. CS): valid across runs at any stopping time,
  so at the alarm's, but *not given the alarm* and not independent of it (it reads the periods that
  raised the alarm; for a pure-ε e-process check it rejects exactly when the detector alarms). It
  refutes when it excludes the claim, and its label and the sentence say what it is valid for;
- the confirmation on fresh outputs drawn after the alarm (``confirmation``, method.md §11.3):
  valid also given the alarm; it refutes when it contradicts the claim;
- the MPL snapshot (seed 003 eq. 26, t̂ chosen and LB computed on different fresh outputs)
  refutes a pure-ε claim when its lower bound exceeds it; the snapshot's claim terms (method.md
  §10.4) refute when the Clopper–Pearson box of their event lies outside the claim's region;
- the bound over the detector's window and its exact Clopper–Pearson version are
  **descriptive**: the window and the time were chosen by the data (coverage measured at
  0.83–0.97), so they are never counted as refuting and never quoted "at 95% confidence". Alarms
  stored before the anytime-valid bound held that window bound as their headline: it is read as descriptive too;
- MPL's ε̂ is a point estimate without a confidence level: it is shown, never counted as a test.

An estimator that does not refute is *labelled as the weaker estimator* (when another refutes) or
as "no refutation" (when none does), and its label always says that it does not clear the
mechanism: a lower bound below a claim says nothing about how large the loss may be.

The functions are pure: they read the typed records of :mod:`app.alarms.records`, parsed once
from the stored JSON (the alarm's ``evidence``, a snapshot's ``result``, an audit's ``to_dict()``);
the parsers read the shapes older versions stored, and ignore keys added later.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from app.alarms.records import (
    AlarmRecord,
    AnytimeRecord,
    CheckRecord,
    ClaimTermsRecord,
    ConfirmationRecord,
    SnapshotRecord,
    SnapshotResultRecord,
    StoredClaim,
    Validity,
    claimed_value,
    parse_alarm,
    parse_audit,
    parse_snapshot_result,
)
from app.stats.claims import ApproxDP, Claim, GaussianDP, PureDP

EstimatorName = Literal["detector", "anytime_bound", "confirmation", "window_bound", "exact_bound",
                        "mpl_lower_bound", "claim_terms", "mpl_point_estimate", "held_out_test", "contract"]

#: Order in which refuting estimators are considered for the verdict's sentence: the test on fresh
#: outputs drawn after the alarm first (valid also given the alarm), then the anytime-valid bound,
#: the snapshot's bounds, the detector (no number on the parameter) last.
_STRENGTH: dict[str, int] = {"confirmation": 0, "held_out_test": 0, "contract": 0, "anytime_bound": 1,
                             "mpl_lower_bound": 2, "claim_terms": 3, "detector": 4, "window_bound": 9,
                             "exact_bound": 9, "mpl_point_estimate": 9}

#: Words that open every label, so that a label never reads otherwise than its ``refutes``.
REFUTES_PREFIX = "refutes the claim"
WEAKER_PREFIX = "weaker estimator"
NOT_REFUTED_PREFIX = "does not refute"
NOT_A_TEST_PREFIX = "not a test"
DESCRIPTIVE_PREFIX = "descriptive"
DETECTION_PREFIX = "a detection, not a refutation"
#: The confirmation on fresh outputs when they do not contradict the claim: not "the weaker
#: estimator", since it is the one statement that stays at level α given the alarm.
NOT_CONFIRMED_PREFIX = "does not confirm the alarm"
#: What a descriptive figure's label says first.
DESCRIPTIVE_WHY = "the window was chosen by the data; not a confidence statement"
#: What the anytime-valid bound is valid for (app.stats.evidence.VALIDITY_WORDS["across_runs"]).
ACROSS_RUNS_WORDS = "valid across runs, not given the alarm; not independent evidence"


class EstimatorReading(BaseModel):
    """One estimator's reading of the claim, labelled with what it can and cannot show."""

    name: EstimatorName = Field(description="`detector` (the sequential test or detection that raised the alarm), "
                                "`anytime_bound` (the anytime-valid lower bound at the alarm, eq. CS), "
                                "`confirmation` (the exact test on fresh outputs drawn after the alarm), "
                                "`window_bound` (the bound over the detector's data-chosen window: descriptive), "
                                "`exact_bound` (its Clopper–Pearson version: descriptive), `mpl_lower_bound` (the "
                                "MPL snapshot's LB), `claim_terms` (the snapshot in the claim's own terms), "
                                "`held_out_test` (an audit's test), `mpl_point_estimate` (ε̂, not a test), "
                                "`contract` (the output contract).")
    label: str = Field(description="What this estimator can and cannot show. Opens with `refutes the claim` when it "
                       "refutes, with `weaker estimator` or `does not refute` when it does not (then it also says "
                       "that it does not clear the mechanism), with `not a test` for a point estimate, with "
                       "`descriptive` for a figure over a window chosen by the data (never a confidence statement), "
                       "with `a detection, not a refutation` for an e-detector's alarm (ARL-controlled), with "
                       "`does not confirm the alarm` for a confirmation on fresh outputs that does not contradict the claim.")
    figure: str = Field(description="Its own number, e.g. `ε > 1.08 > claimed 1` or `M_t = 3.91 > threshold 3.42`.")
    value: float | None = Field(None, description="The number in `figure` (a bound, a statistic), when finite.")
    refutes: bool = Field(description="This estimator, on its own, refutes the claim at its stated level (never true "
                          "when `valid` is false).")
    valid: bool = Field(description="It is a test at a stated level, valid where it is stated (false for a point "
                        "estimate, a descriptive window figure and an e-detector's ARL-controlled detection).")
    confidence: float | None = Field(None, description="Its level 1 − α, when it has one.")
    validity: Validity | None = Field(
        None, description="What its figure is valid for: `across_runs` (the anytime-valid bound: P(it ever exceeds "
        "the truth) ≤ α over runs, not given the alarm), `given_alarm` (fresh outputs drawn after the alarm: valid "
        "also conditionally on the alarm), `descriptive` (a window the data chose). Null for the detector itself, "
        "a point estimate and an audit's test.")
    restates_alarm: bool | None = Field(
        None, description="Computed on the data that raised the alarm, so not independent evidence of it (null when "
        "not about an alarm).")


class Verdict(BaseModel):
    """dpwatch's one conclusion: `refutes` and one `sentence` (read first), then every estimator."""

    refutes: bool = Field(description="True when any valid test at its stated level refutes the claim (for a "
                          "contract alarm: the output contract). A descriptive window bound or an e-detector's "
                          "detection never makes it true.")
    subject: Literal["claim", "contract"] = Field("claim", description="What is refuted or not.")
    claim: str | None = Field(None, description="The claim in words, e.g. `ε = 1`.")
    sentence: str = Field(description="The verdict in one sentence, with its strongest valid evidence and its number. "
                          "Opens with `Refuted:`, `Not refuted:`, `No claim to test:`, or, for an e-detector's alarm "
                          "that no valid test confirms, `Detected, not refuted:`.")
    strongest: EstimatorName | None = Field(None, description="The estimator the sentence quotes.")
    confirmed: bool | None = Field(None, description="For a privacy alarm: whether the fresh outputs drawn after the "
                                   "alarm contradict the claim (`true`: confirmed), do not (`false`: the refutation rests "
                                   "on the data that raised the alarm, which is how a false alarm looks; the sentence opens "
                                   "with `Refuted by the alarm's own data, not confirmed:`), or `null` (no confirmation "
                                   "yet, or not an alarm). Among false alarms at the claim's boundary the fresh outputs "
                                   "contradicted the claim in 4 of 1,155 (docs/jobs_and_evidence.md §2); a test on the "
                                   "alarm's own data cannot do that, since the alarm chose them.")
    estimators: list[EstimatorReading] = Field(
        description="Every estimator, the refuting ones first, each with its own figure and `refutes`.")


# ---------------------------------------------------------------------------------------------


def _num(value: float) -> float | None:
    x = float(value)
    return x if math.isfinite(x) else None


def _g(x: float | None) -> str:
    return "−∞" if x is None else f"{x:.3g}"


def _pct(confidence: float | None) -> str:
    return f"{100 * confidence:g}%" if confidence is not None else "its stated level"


def _label(refutes: bool, any_refutes: bool, can: str, cannot: str) -> str:
    if refutes:
        return f"{REFUTES_PREFIX}: {can}"
    if any_refutes:
        return f"{WEAKER_PREFIX}: {cannot}; it does not clear the mechanism, and the refuting evidence stands"
    return f"{NOT_REFUTED_PREFIX} at its level: {cannot}; this does not show that the claim holds"


#: What a draft is: a test at a stated level, a point estimate, a descriptive figure (a window the
#: data chose), or an ARL-controlled detection (the e-detector's alarm). Only a test can refute.
DraftKind = Literal["test", "point", "descriptive", "detection"]


class _Draft:
    """An estimator before its label is written (the label depends on whether any other refutes)."""

    def __init__(self, name: EstimatorName, figure: str, refutes: bool, *, kind: DraftKind = "test",
                 value: float | None = None, confidence: float | None = None, can: str = "", cannot: str = "",
                 where: str = "", short: str | None = None, note: str = "", validity: Validity | None = None,
                 restates_alarm: bool | None = None) -> None:
        self.name, self.figure, self.kind, self.valid = name, figure, kind, kind == "test"
        self.validity, self.restates_alarm = validity, restates_alarm
        self.note = note
        self.short = short or _SHORT.get(name, name)
        self.refutes = bool(refutes and self.valid)
        self.value, self.confidence, self.can, self.cannot, self.where = value, confidence, can, cannot, where

    def reading(self, any_refutes: bool) -> EstimatorReading:
        if self.kind == "point":
            label = f"{NOT_A_TEST_PREFIX}: {self.cannot}; it neither refutes the claim nor clears the mechanism"
        elif self.kind == "descriptive":
            label = (f"{DESCRIPTIVE_PREFIX}: {DESCRIPTIVE_WHY} ({self.cannot}); it neither refutes the claim nor "
                     "clears the mechanism")
        elif self.kind == "detection":
            label = (f"{DETECTION_PREFIX}: {self.cannot}; it does not by itself refute the claim at level α, nor "
                     "does it clear the mechanism")
        elif self.name == "confirmation" and not self.refutes:
            label = (f"{NOT_CONFIRMED_PREFIX}: {self.cannot}; it is the one statement that keeps its level given the "
                     "alarm; it does not clear the mechanism, and this does not show that the claim holds")
        else:
            label = _label(self.refutes, any_refutes, self.can, self.cannot)
        return EstimatorReading(name=self.name, label=label, figure=self.figure, value=self.value,
                                refutes=self.refutes, valid=self.valid, confidence=self.confidence,
                                validity=self.validity, restates_alarm=self.restates_alarm)


def _listing(drafts: list[_Draft]) -> str:
    return "; ".join(f"{d.short}: {d.figure}" for d in drafts)


def _verdict(drafts: list[_Draft], claim: str | None, *, subject: Literal["claim", "contract"] = "claim",
             fallback: str = "") -> Verdict:
    refuting = sorted((d for d in drafts if d.refutes), key=lambda d: _STRENGTH.get(d.name, 5))
    any_refutes = bool(refuting)
    what = claim or "the claim"
    valid_others = [d for d in drafts if d.valid and not d.refutes]
    detection = next((d for d in drafts if d.kind == "detection"), None)
    confirmation = next((d for d in drafts if d.name == "confirmation"), None)
    if subject == "contract":
        top = refuting[0] if refuting else None
        sentence = (f"The outputs broke the mechanism's output contract: {top.figure}." if top else
                    "No breach of the output contract is recorded.")
    elif refuting and confirmation is not None and not confirmation.refutes:
        # the alarm's own data refute the claim, the fresh outputs drawn after it do not: say that
        # first, since it is what a false alarm looks like, and never let the same-data bound read as confirmed
        top = refuting[0]
        level = f" at {_pct(top.confidence)} confidence" if top.confidence is not None else ""
        sentence = (f"Refuted by the alarm's own data, not confirmed: {top.figure}{level} ({top.short}{top.where}) "
                    f"contradicts {what}, but {confirmation.short} does not ({confirmation.figure}"
                    f"{confirmation.where}). The first is valid at level α across runs, yet it reads the data that "
                    "raised the alarm; the fresh outputs do not depend on the alarm. Either the violation is too "
                    "small for this many fresh outputs, or this is one of the false alarms the detector allows "
                    "(at most α). This does not show that the claim holds.")
    elif refuting:
        top = refuting[0]
        level = f" at {_pct(top.confidence)} confidence" if top.confidence is not None else ""
        others = refuting[1:]
        also = ""
        if len(others) == 1:
            also = f"; {others[0].short} refutes it too ({others[0].figure})"
        elif others:
            also = f"; {len(others)} other estimators refute it too"
        sentence = f"Refuted: {top.figure}{level} ({top.short}{top.where}), which contradicts {what}{also}."
        if top.restates_alarm and top.validity == "across_runs":
            # the same-data bound leads only until the fresh outputs are in: say what it is valid for
            sentence += (f" That bound is {ACROSS_RUNS_WORDS}: it reads the periods that raised the alarm"
                         + ("" if confirmation is not None else "; the confirmation on fresh outputs follows") + ".")
        if top.name == "detector" and not others:
            # the alarm is the detector's own level-α test; say what the valid bounds do not (yet) show
            shown = f" ({_listing(valid_others)})" if valid_others else ""
            sentence += (f" No bound valid at the alarm excludes the claim beyond the detector yet{shown}; this does "
                         "not weaken the detector's refutation"
                         + ("" if any(d.name == "confirmation" for d in drafts)
                            else ", and the confirmation on fresh outputs follows") + ".")
    elif detection is not None:
        top = None
        shown = f" ({_listing(valid_others)})" if valid_others else ""
        pending = ("" if any(d.name == "confirmation" for d in drafts)
                   else "; it awaits the confirmation on fresh outputs drawn after the alarm")
        sentence = (f"Detected, not refuted: {detection.figure} ({detection.short}{detection.where}) is an "
                    f"ARL-controlled detection ({detection.note}), not a test of {what} at level α{pending}. "
                    f"No test valid at the alarm refutes {what} yet{shown}. This does not show that the claim holds.")
    else:
        top = None
        shown = f" ({_listing(valid_others)})" if valid_others else ""
        sentence = (f"Not refuted: no test refutes {what} at its level{shown}. " + (fallback or
                    "A bound below a claim does not show that the claim holds."))
    ordered = refuting + [d for d in drafts if not d.refutes]
    return Verdict(refutes=any_refutes, subject=subject, claim=claim, sentence=sentence,
                   strongest=top.name if top else None,
                   confirmed=None if confirmation is None else confirmation.refutes,
                   estimators=[d.reading(any_refutes) for d in ordered])


_SHORT = {
    "detector": "the detector's sequential test",
    "anytime_bound": "the anytime-valid bound",
    "confirmation": "the exact test on fresh outputs drawn after the alarm",
    "window_bound": "the descriptive bound over the detector's window",
    "exact_bound": "the descriptive exact bound over that window",
    "mpl_lower_bound": "the MPL snapshot's lower bound on fresh outputs",
    "claim_terms": "the MPL snapshot in the claim's own terms",
    "held_out_test": "the held-out Clopper–Pearson test",
    "mpl_point_estimate": "MPL's point estimate",
    "contract": "the output contract",
}


# --------------------------------------------------------------------------- the readings


def _param_bound(param: str, lb: float | None, claim: Claim | None, refutes: bool) -> str:
    claimed = claimed_value(param, claim)
    tail = "" if claimed is None else (f" > claimed {claimed:g}" if refutes else f", not above the claimed {claimed:g}")
    if lb is None:
        return f"no lower bound on {param}{'' if claimed is None else f' (claimed {claimed:g})'}"
    return f"{param} ≥ {_g(lb)}{tail}"


def _window_drafts(check: CheckRecord, claim: Claim | None) -> list[_Draft]:
    """The bound over the detector's window and its exact version: descriptive (alarms stored
    before the anytime-valid bound held it as their headline: ``legacy``)."""
    wb = check.window_bound
    if wb is None:
        return []
    param = check.parameter
    claimed = claimed_value(param, claim)
    tail = "" if claimed is None else f" (claimed {claimed:g})"
    where = (f", periods {check.window_from_t}–{check.window_to_t}" if check.window_from_t is not None else "")
    kind_of = "score" if wb.method == "score" else "exact"
    drafts = [_Draft(
        "window_bound", f"{kind_of} bound on {param} over the window: {_g(wb.lower_bound)}{tail}", False,
        kind="descriptive", value=wb.lower_bound, where=where, validity="descriptive", restates_alarm=True,
        cannot=f"the {kind_of} bound on {param} over the last periods the detector pooled, at the time it alarmed"
        + ("; stored by an older dpwatch as the alarm's headline" if wb.legacy else ""))]
    if wb.method == "score" and check.has_exact:
        elb = check.exact_lower_bound
        drafts.append(_Draft(
            "exact_bound", f"exact bound on {param} over the window: {_g(elb)}{tail}", False, kind="descriptive",
            value=elb, where=where, validity="descriptive", restates_alarm=True,
            cannot="the Clopper–Pearson version of the window bound (each side at α/2), on the same window"))
    return drafts


def _anytime_draft(anytime: AnytimeRecord, claim: Claim | None) -> _Draft:
    param, lb, refutes, confidence = anytime.parameter, anytime.lower_bound, anytime.contradicts_claim, anytime.confidence
    claimed = claimed_value(param, claim)
    if lb is None:
        figure = f"no loss on {param} shown yet" + ("" if claimed is None else f" (claimed {claimed:g})")
    elif claimed is None:
        figure = f"{param} > {_g(lb)}"
    elif refutes:
        figure = f"{param} > {_g(lb)}" + (f" > claimed {claimed:g}" if lb > claimed else f", above the claimed {claimed:g}")
    else:
        figure = f"{param} > {_g(lb)}, not excluding the claimed {claimed:g}"
    where = f", every period t = {anytime.from_t}–{anytime.to_t}" if anytime.from_t is not None else ""
    return _Draft(
        "anytime_bound", figure, refutes, value=lb, confidence=confidence, where=where,
        validity=anytime.validity, restates_alarm=anytime.restates_alarm,
        can=f"an anytime-valid {_pct(confidence)} lower bound on {param} from every period of the horizon (a "
        f"confidence sequence) excludes the claim; it is {ACROSS_RUNS_WORDS} (it reads the periods that raised the "
        "alarm, so only the confirmation on fresh outputs is valid given the alarm)",
        cannot=f"the anytime-valid lower bound on {param} pools every period and may not have caught up with the "
        "detector yet; a lower bound below a claim says nothing about how large the loss may be")


def _confirmation_draft(conf: ConfirmationRecord, claim: Claim | None) -> _Draft:
    where = f", {conf.n:,} per database" if conf.n is not None else ""
    return _Draft(
        "confirmation", _param_bound(conf.parameter, conf.lower_bound, claim, conf.confirms), conf.confirms,
        value=conf.lower_bound, confidence=conf.confidence, where=where, validity="given_alarm", restates_alarm=False,
        can="the exact Clopper–Pearson test on fresh outputs drawn after the alarm, independent of everything the "
        "detector saw, contradicts the claim (valid also given that the alarm happened)",
        cannot="the fresh outputs do not contradict the claim: the alarm may be a false alarm, or the violation too "
        "small for this many outputs")


def _snapshot_drafts(snap: SnapshotRecord, claim: StoredClaim) -> list[_Draft]:
    drafts: list[_Draft] = []
    lb, eps_hat, confidence = snap.lower_bound, snap.epsilon_hat, snap.confidence
    claimed_eps = claim.pure_epsilon
    if claimed_eps is None and not claim.given:
        claimed_eps = snap.claimed_epsilon
    if lb is not None or eps_hat is not None:
        # MPL bounds the pure loss: compared with a pure-ε claim only ((ε, δ), GDP and zCDP are not)
        if snap.verdict == "not_comparable" or (claimed_eps is None and claim.given):
            drafts.append(_Draft(
                "mpl_lower_bound", f"pure loss ε ≥ {_g(lb)}, ε̂ = {_g(eps_hat)}", False, value=lb,
                confidence=confidence,
                cannot="MPL bounds the pure privacy loss and this claim bounds no pure ε, so its bound is not "
                "compared with the claim (the claim terms are)"))
        else:
            refutes = (snap.verdict == "exceeds_claim") if snap.verdict else (
                lb is not None and claimed_eps is not None and lb > claimed_eps)
            tail = "" if claimed_eps is None else (f" > claimed {claimed_eps:g}" if refutes
                                                    else f", not above the claimed {claimed_eps:g}")
            drafts.append(_Draft(
                "mpl_lower_bound", f"ε ≥ {_g(lb)}{tail}, ε̂ = {_g(eps_hat)}", refutes, value=lb,
                confidence=confidence,
                can=f"MPL's {_pct(confidence)} lower bound at its t̂, on outputs that did not choose t̂, exceeds the "
                "claim",
                cannot="MPL's lower bound covers the loss at one point t̂ of one pair; it may miss where the loss is"))
    if snap.claim_terms is not None:
        drafts.append(_terms_draft(snap.claim_terms, confidence))
    return drafts


def _terms_draft(terms: ClaimTermsRecord, confidence: float | None) -> _Draft:
    refutes, tclaim = terms.refutes, terms.claim
    if confidence is None and terms.alpha is not None:
        confidence = 1 - terms.alpha
    figure, value = None, None
    eps = _num(tclaim.epsilon) if isinstance(tclaim, (PureDP, ApproxDP)) else None
    dlb = terms.delta_lower_bound
    claimed_delta = tclaim.delta if isinstance(tclaim, ApproxDP) else 0.0
    if dlb is not None and eps is not None and (dlb > claimed_delta or not refutes):
        figure, value = f"δ({eps:g}) ≥ {_g(dlb)}" + (f" > claimed δ = {claimed_delta:g}" if dlb > claimed_delta
                                                      else f", not above the claimed δ = {claimed_delta:g}"), dlb
    mlb = terms.mu_lower_bound
    claimed_mu = _num(tclaim.mu) if isinstance(tclaim, GaussianDP) else None
    if figure is None and mlb is not None and claimed_mu is not None:
        figure, value = f"μ ≥ {_g(mlb)}" + (f" > claimed {claimed_mu:g}" if mlb > claimed_mu
                                            else f", not above the claimed {claimed_mu:g}"), mlb
    if figure is None:
        p, q = terms.event_p_hat, terms.event_q_hat
        figure = (f"the event with p̂ = {_g(p)}, q̂ = {_g(q)} lies "
                  + ("outside" if refutes else "inside") + f" the region of {terms.description or 'the claim'}"
                  if p is not None and q is not None else (terms.statement or "no figure"))
    return _Draft(
        "claim_terms", figure, refutes, value=value, confidence=confidence,
        can="the Clopper–Pearson box of the snapshot's event, on outputs that did not choose it, lies outside the "
        "claim's region",
        cannot="the snapshot tests one chosen event of one pair; a miss there says nothing about other events")


def _detector_draft(alarm: AlarmRecord) -> _Draft | None:
    """The detector's alarm: a level-α sequential test (aggregator, naive, e-process; alarms stored
    without ``detection`` are read as one), or the e-detector's ARL-controlled detection, which is
    not a refutation at level α (method.md §11.4, §13.4)."""
    stat, thr, detection = alarm.statistic, alarm.threshold, alarm.detection
    if stat is None or thr is None:
        return None
    where = ""
    if alarm.t is not None:
        where = f", period {alarm.t}" + (f" of horizon {alarm.horizon_index}" if alarm.horizon_index is not None else "")
    name = detection.detector
    # the e-values' statistic and threshold are stored as natural logarithms (app.stats.sequential)
    figure = (f"log M_t = {stat:.3g} > log threshold {thr:.3g}" if name in ("e-process", "e-detector")
              else f"M_t = {stat:.3g} > threshold {thr:.3g}")
    if detection.kind == "arl":
        arl_text = f"ARL ≥ {detection.arl:g}" if detection.arl is not None else "an average run length"
        return _Draft(
            "detector", figure, stat > thr, kind="detection", note=arl_text,
            value=stat, where=where, short="the e-detector's alarm",
            cannot=f"the e-detector controls the average run length under the claim ({arl_text} periods between false "
            "alarms), not the probability of a false alarm over the horizon")
    level = f"a level-{detection.alpha:g} " if detection.alpha is not None else "a level-α "
    short = f"the {name} detector's sequential test" if name else "the detector's sequential test"
    return _Draft("detector", figure, stat > thr, value=stat,
                  where=f", {level}test{where}", short=short,
                  can=detection.statement or ("the detector's statistic crossed its threshold, which keeps the "
                                              "false-alarm rate over the horizon at α (seed 002)"),
                  cannot="the detector's statistic stayed below its threshold")


def alarm_verdict(alarm: object) -> Verdict:
    """The verdict of an alarm (an ORM ``Alarm``, an ``AlarmRead``, a dict with ``kind``,
    ``statistic``, ``threshold``, ``t``, ``horizon_index``, ``claim`` and ``evidence``, or its
    :class:`~app.alarms.records.AlarmRecord`)."""
    record = alarm if isinstance(alarm, AlarmRecord) else parse_alarm(alarm)
    if record.contract is not None:
        contract = record.contract
        figure = contract.breach + (f" ({contract.detail.rstrip('.')})" if contract.detail else "")
        draft = _Draft("contract", figure, True, can="an output broke the mechanism's declared output shape",
                       cannot="")
        return _verdict([draft], "the output contract", subject="contract")
    drafts: list[_Draft] = []
    detector = _detector_draft(record)
    if record.confirmation is not None:
        drafts.append(_confirmation_draft(record.confirmation, record.bound_claim))
    if record.check is not None and record.check.anytime is not None:
        drafts.append(_anytime_draft(record.check.anytime, record.bound_claim))
    if record.snapshot is not None:
        drafts += _snapshot_drafts(record.snapshot, record.claim)
    if detector is not None:
        drafts.append(detector)
    if record.check is not None:
        drafts += _window_drafts(record.check, record.bound_claim)
    return _verdict(drafts, record.words)


def snapshot_verdict(result: Mapping[str, object] | SnapshotResultRecord | None, *,
                     status: str | None = None) -> Verdict | None:
    """The verdict of a done snapshot (its ``result``, or its
    :class:`~app.alarms.records.SnapshotResultRecord`); None while it is pending or when it failed."""
    if result is None or (status is not None and status not in ("done", "succeeded")):
        return None
    record = result if isinstance(result, SnapshotResultRecord) else parse_snapshot_result(result)
    words = record.terms_description or record.claim.words
    drafts = _snapshot_drafts(record.snapshot, record.claim)
    if not record.claim.given and not record.has_terms:
        return Verdict(refutes=False, claim=None, sentence=(
            f"No claim to test: ε ≥ {_g(record.snapshot.lower_bound)} at {_pct(1 - record.alpha)} confidence "
            "(MPL snapshot). A lower bound says nothing about how large ε may be."),
            strongest=None, estimators=[d.reading(False) for d in drafts])
    return _verdict(drafts, words, fallback="This snapshot does not show that the claim holds.")


def audit_verdict(result: Mapping[str, object]) -> Verdict:
    """The verdict of an audit (``AuditResult.to_dict()``): the held-out test is the valid one;
    MPL's ε̂ is a point estimate shown beside it, never counted as a test."""
    audit = parse_audit(result)
    alpha, param, lb, claimed, refuted = (audit.alpha, audit.parameter, audit.lower_bound, audit.claimed_epsilon,
                                          audit.refuted)
    confidence = 1 - alpha
    tail = "" if claimed is None else (f" > claimed {claimed:g}" if refuted else f", not above the claimed {claimed:g}")
    drafts = [_Draft(
        "held_out_test", f"{param} ≥ {_g(lb)}{tail}" if lb is not None else f"no lower bound on {param}", refuted,
        value=lb, confidence=confidence,
        can=f"held-out Clopper–Pearson counts lie outside the claim's region at level α = {alpha:g}, over all "
        "rounds and events",
        cannot="it tests the events chosen from these pairs within this budget; other pairs or events may show more")]
    eps_hat = audit.epsilon_hat
    if eps_hat is not None:
        drafts.append(_Draft(
            "mpl_point_estimate", f"ε̂ = {_g(eps_hat)}" + ("" if claimed is None else
                                                           (" (above the claim)" if eps_hat > claimed
                                                            else " (below the claim)")), False, kind="point",
            value=eps_hat, cannot="ε̂ is MPL's point estimate without a confidence level"))
    if audit.claim_words is None:
        return Verdict(refutes=False, claim=None, sentence=(
            f"No claim to test: {param} ≥ {_g(lb)} at {_pct(confidence)} confidence (held-out test). A lower bound "
            f"says nothing about how large {param} may be."), strongest=None,
            estimators=[d.reading(False) for d in drafts])
    return _verdict(drafts, audit.claim_words, fallback="This audit tried these pairs within this budget; it does not "
                    "show that the mechanism satisfies the claim.")
