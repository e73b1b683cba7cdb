"""The one verdict of an alarm or a snapshot, as the dashboard shows it.

The verdict itself is :mod:`app.alarms.verdict` (the same object the API returns as ``verdict``
on an alarm or a snapshot, and the CLI prints): one sentence, ``refutes``, and every estimator
with its label. This module only dresses it for the pages: a title per estimator, the label's
opening words as its short reading, and the mathematics written as a person reads it (Mₜ, not
``M_t``). Every template reads it through the ``verdict_block`` macro of ``_macros.html``, fed
by :func:`alarm_verdict` or :func:`snapshot_verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.alarms import verdict as core
from app.alarms.records import parse_alarm, parse_snapshot_result

TITLES = {
    "detector": "Sequential detector (the alarm's own test)",
    "anytime_bound": "Anytime-valid bound at the alarm (every period)",
    "confirmation": "Confirmation on fresh outputs (drawn after the alarm)",
    "window_bound": "Window bound (the detector's last periods; descriptive)",
    "exact_bound": "Exact bound over that window (descriptive)",
    "mpl_lower_bound": "MPL snapshot's lower bound (where the loss is)",
    "claim_terms": "Claim terms and trade-off curve",
    "held_out_test": "Held-out test",
    "mpl_point_estimate": "MPL's point estimate ε̂",
    "contract": "Output contract",
}
#: The label's opening words (app.alarms.verdict), shown as the estimator's short reading.
PREFIXES = (core.REFUTES_PREFIX, core.WEAKER_PREFIX, core.NOT_REFUTED_PREFIX, core.NOT_A_TEST_PREFIX,
            core.DESCRIPTIVE_PREFIX, core.DETECTION_PREFIX, core.NOT_CONFIRMED_PREFIX)


def _math(text: str) -> str:
    return text.replace("M_t", "Mₜ").replace("z_t", "zₜ")


@dataclass
class Estimator:
    name: str
    title: str
    refutes: bool
    reading: str  # the label's opening words: "refutes the claim", "weaker estimator", …
    finding: str  # its own number
    label: str  # the rest of the label: what it can and cannot show


@dataclass
class Verdict:
    sentence: str
    refutes: bool
    kind: str = "claim"  # "claim" or "contract" (app.alarms.verdict's subject)
    confirmed: bool | None = None  # the fresh outputs drawn after the alarm contradict the claim (None: not yet)
    estimators: list[Estimator] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a reader would otherwise misread


#: The reading of a contract alarm: a broken output contract is not a refutation of the privacy claim.
CONTRACT_READING = "the output breaks the declared contract"


def lower_bound_note(lb: float | None, eps: float | None) -> str | None:
    """Why MPL's lower bound can sit above its point estimate (when it does)."""
    if lb is None or eps is None or not lb > eps:
        return None
    return (f"The lower bound LB = {lb:.4g} is above the point estimate ε̂ = {eps:.4g}: they are different estimators "
            "on different outputs. ε̂ is MPL's estimate on the outputs that chose the point t̂; LB is computed at that "
            "t̂ on fresh outputs, which showed a larger loss there. LB holds at its stated confidence; ε̂ is a point "
            "estimate, not a bound, and can fall on either side of the true loss (docs/mpl.md).")


def _dress(v: core.Verdict | None) -> Verdict | None:
    if v is None:
        return None
    out = []
    for e in v.estimators:
        reading = next((p for p in PREFIXES if e.label.startswith(p)), "")
        rest = e.label[len(reading):].lstrip(": ").strip()
        title = TITLES.get(e.name, e.name)
        if e.name == "detector" and reading == core.DETECTION_PREFIX:
            title = "E-detector (the alarm's own detection, ARL-controlled)"
        if e.name == "contract":
            reading = CONTRACT_READING
        out.append(Estimator(name=e.name, title=title, refutes=e.refutes,
                             reading=reading or ("refutes" if e.refutes else "does not refute"),
                             finding=_math(e.figure), label=_math(rest)))
    return Verdict(sentence=_math(v.sentence), refutes=v.refutes, kind=v.subject, confirmed=v.confirmed,
                   estimators=out)


def alarm_verdict(alarm: object) -> Verdict:
    record = parse_alarm(alarm)
    dressed = _dress(core.alarm_verdict(record))
    assert dressed is not None
    if record.snapshot is not None:
        note = lower_bound_note(record.snapshot.lower_bound, record.snapshot.epsilon_hat)
        if note:
            dressed.notes.append(note)
    return dressed


def snapshot_verdict(result: Mapping[str, object] | None, status: str | None) -> Verdict | None:
    record = parse_snapshot_result(result) if result is not None else None
    dressed = _dress(core.snapshot_verdict(record, status=status))
    if dressed is not None and record is not None:
        note = lower_bound_note(record.snapshot.lower_bound, record.snapshot.epsilon_hat)
        if note:
            dressed.notes.append(note)
    return dressed
