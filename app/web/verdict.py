"""One verdict per alarm and per snapshot, as the dashboard states it (issue 18 item 3).

The pages state the verdict in one sentence first, then every estimator that went into it, each
labelled with what it showed and what it can and cannot show. The verdict *refutes* the claim
exactly when one of the estimators does (each at its own stated level); an estimator that does
not refute the claim is labelled as not refuting it **on its own**, never as clearing the
mechanism, because none of them can show that a claim holds.

This is the dashboard's local reading of the stored evidence. ``app/alarms/verdict.py`` (branch
``dashops``) gives the same verdict on the API; once it is merged, :func:`alarm_verdict` and
:func:`snapshot_verdict` are the only two functions to point at it: every template reads the
verdict through the ``verdict`` block of ``_macros.html``, fed by one of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

REFUTES = "refutes the claim"
NOT_ON_ITS_OWN = "does not refute the claim on its own"


@dataclass
class Estimator:
    """One estimator behind a verdict."""

    name: str
    refutes: bool
    finding: str  # what it measured, in words, with its numbers
    can_show: str
    cannot_show: str

    @property
    def label(self) -> str:
        return REFUTES if self.refutes else NOT_ON_ITS_OWN


@dataclass
class Verdict:
    sentence: str
    refutes: bool
    kind: str = "privacy"  # "privacy" or "contract"
    estimators: list[Estimator] = field(default_factory=list)


def _g(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(number):
        return "∞" if number > 0 else "−∞"
    return f"{number:.{digits}g}"


def _pct(confidence: Any) -> str:
    try:
        return f"{100 * float(confidence):g}%"
    except (TypeError, ValueError):
        return "95%"


def _detector(alarm: Any) -> Estimator:
    return Estimator(
        name="Sequential detector (the alarm's own test)",
        refutes=True,
        finding=(f"Mₜ = {_g(alarm.statistic, 4)} crossed its threshold {_g(alarm.threshold, 4)} at period {alarm.t} "
                 f"of horizon {alarm.horizon_index}."),
        can_show="that the outputs contradict the claim, at the monitor's level α over the whole horizon",
        cannot_show="how large the loss is",
    )


def _window(check: dict[str, Any]) -> Estimator:
    window = check.get("window") or {}
    counts = check.get("counts") or {}
    param = check.get("parameter") or "ε"
    refutes = bool(check.get("exceeds_claim"))
    span = (f"periods {window.get('from_t')}–{window.get('to_t')}" if window.get("from_t") != window.get("to_t")
            else f"period {window.get('to_t')}")
    finding = (f"Over {span}, {counts.get('a')} of {counts.get('n')} outputs on x and {counts.get('b')} of "
               f"{counts.get('n')} on x′ fell in the event; {param} ≥ {_g(check.get('lower_bound'))} at "
               f"{_pct(check.get('confidence'))} confidence"
               + (f", above the claim {check.get('claim_description')}." if refutes else
                  f", which does not reach the claim {check.get('claim_description')}."))
    return Estimator(
        name="Window bound (the alarm's last periods, pooled)",
        refutes=refutes,
        finding=finding,
        can_show=f"a lower bound on {param} from one window of periods",
        cannot_show="that the mechanism meets its claim (a bound below the claim clears nothing)",
    )


def _mpl(lower_bound: Any, epsilon_hat: Any, confidence: Any, claim: dict[str, Any] | None,
         verdict: str | None = None) -> Estimator:
    pure = claim is not None and set(claim) == {"epsilon"}
    if verdict is None:
        verdict = ("exceeds_claim" if pure and lower_bound is not None and float(lower_bound) > float(claim["epsilon"])
                   else "not_comparable" if not pure else "below_claim")
    refutes = verdict == "exceeds_claim"
    if not pure:
        finding = (f"ε̂ = {_g(epsilon_hat)}, {_pct(confidence)} lower bound {_g(lower_bound)} on the pure loss; the "
                   "claim bounds no pure ε, so this is not compared with it.")
    else:
        finding = (f"ε ≥ {_g(lower_bound)} at {_pct(confidence)} confidence (ε̂ = {_g(epsilon_hat)}), "
                   + ("above" if refutes else "not above") + f" the claimed {_g(claim['epsilon'])}.")
    return Estimator(
        name="MPL snapshot (where the loss is)",
        refutes=refutes,
        finding=finding,
        can_show="the largest pure privacy loss over the output space, and where it is",
        cannot_show="that the claim holds; with few samples it is the weaker estimator",
    )


def _claim_terms(terms: dict[str, Any], pair: str = "") -> Estimator:
    refutes = bool(terms.get("refutes"))
    parts = []
    if terms.get("delta_hat") is not None:
        parts.append(f"δ̂ = {_g(terms.get('delta_hat'))} (lower bound {_g(terms.get('delta_lower_bound'))})")
    if terms.get("mu_hat") is not None:
        parts.append(f"μ̂ = {_g(terms.get('mu_hat'))} (lower bound {_g(terms.get('mu_lower_bound'))})")
    statement = (terms.get("statement") or "").strip().rstrip(".")
    finding = "; ".join(([statement] if statement else []) + parts) + "." if (statement or parts) else ""
    return Estimator(
        name="Claim terms and trade-off curve" + (f" ({pair})" if pair else ""),
        refutes=refutes,
        finding=finding.strip() or "No claim terms.",
        can_show=f"a contradiction of {terms.get('description') or 'the claim'} in its own terms (δ, μ, trade-off)",
        cannot_show="that the claim holds",
    )


def _sentence(subject: str, claim_text: str, estimators: list[Estimator], confidence: str) -> tuple[str, bool]:
    refuting = [e for e in estimators if e.refutes]
    if refuting:
        strongest = next((e for e in refuting if not e.name.startswith("Sequential")), refuting[0])
        return (f"dpwatch concludes that {subject} contradict the claim {claim_text} at {confidence} confidence. "
                f"Strongest evidence ({strongest.name}): {strongest.finding}"), True
    return (f"dpwatch has not established that {subject} contradict the claim {claim_text}: no estimator refutes "
            "it. This does not show that the mechanism meets the claim."), False


def alarm_verdict(alarm: Any, claim_text: str, confidence: float = 0.95) -> Verdict:
    """The verdict of an alarm from its stored evidence (privacy or contract)."""
    evidence = alarm.evidence if isinstance(getattr(alarm, "evidence", None), dict) else {}
    if getattr(alarm, "kind", "privacy") == "contract":
        contract = evidence.get("contract") or {}
        breach = contract.get("breach") or "breach"
        estimator = Estimator(
            name="Output contract",
            refutes=False,
            finding=f"{breach}: {contract.get('detail') or 'the outputs broke their shape'}.",
            can_show="that the outputs changed type, length or support",
            cannot_show="anything about the privacy claim: the privacy checks keep running on the outputs that fit",
        )
        sentence = (f"The mechanism's outputs broke their output contract ({breach}) in period {alarm.t}: "
                    f"{contract.get('detail') or 'see the breach below'}. This alarm says nothing about the "
                    f"privacy claim {claim_text}.")
        return Verdict(sentence, False, "contract", [estimator])
    estimators = [_detector(alarm)]
    check = evidence.get("check")
    if isinstance(check, dict) and check:
        estimators.append(_window(check))
        confidence = float(check.get("confidence") or confidence)
    snap = evidence.get("snapshot")
    claim = getattr(alarm, "claim", None)
    if isinstance(snap, dict) and snap:
        estimators.append(_mpl(snap.get("lower_bound"), snap.get("epsilon_hat"), snap.get("confidence"), claim,
                               snap.get("verdict") if snap.get("verdict") in ("exceeds_claim",) else None))
        if isinstance(snap.get("claim_terms"), dict):
            estimators.append(_claim_terms(snap["claim_terms"]))
    sentence, refutes = _sentence("the mechanism's outputs", claim_text, estimators, _pct(confidence))
    return Verdict(sentence, refutes, "privacy", estimators)


def snapshot_verdict(result: dict[str, Any], claim: dict[str, Any] | None, claim_text: str,
                     alarm: Any = None) -> Verdict:
    """The verdict of a finished snapshot: its MPL bound, each pair's claim terms and, for an
    alarm's snapshot, the alarm's detector."""
    confidence = 1 - float(result.get("alpha") or 0.05)
    estimators = []
    if alarm is not None and getattr(alarm, "kind", "privacy") == "privacy":
        estimators.append(_detector(alarm))
    estimators.append(_mpl(result.get("lower_bound"), result.get("epsilon_hat"), confidence, claim))
    pairs = result.get("pairs") or []
    with_terms = [(i, p["claim_terms"]) for i, p in enumerate(pairs) if isinstance(p.get("claim_terms"), dict)]
    if with_terms:
        refuting = [(i, t) for i, t in with_terms if t.get("refutes")]
        i, terms = (refuting or [(result.get("chosen_pair", with_terms[0][0]), result.get("claim_terms"))])[0] \
            if (refuting or result.get("claim_terms")) else with_terms[0]
        estimators.append(_claim_terms(terms or with_terms[0][1], f"pair {i}" if len(pairs) > 1 else ""))
    sentence, refutes = _sentence("this snapshot's outputs", claim_text, estimators, _pct(confidence))
    return Verdict(sentence, refutes, "privacy", estimators)
