"""The evidence the verdict reads, typed: an alarm (its evidence JSON), a snapshot's result, an audit's result.

The stored JSON keeps its shape (the API and the webhooks show it as stored); these records are
what :mod:`app.alarms.verdict` reads, parsed once from it by the ``parse`` functions here. The
parsers are lenient as the stored JSON needs: a key missing, null or not a finite number reads
as None, keys added later are ignored, and the shapes of alarms stored by older versions are
read here, in one place:

- alarms stored before the anytime-valid bound held the window bound as their check's headline
  (``lower_bound``, ``method`` ``score`` or ``clopper_pearson``): :class:`WindowBoundRecord` with
  ``legacy`` true;
- alarms stored before the evidence had a ``check`` part held the snapshot's summary only (with
  ``exceeds_claim``): read as the alarm's snapshot;
- alarms stored without a ``detection`` field: their detector reads as a level-α test;
- a confirmation stored inside the check, and an alarm without a ``claim`` (the check's is used).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, SupportsFloat, SupportsIndex

from app.stats.claims import Claim, PureDP, claim_of_record

#: What a figure is valid for (app.stats.evidence.VALIDITY_WORDS).
Validity = Literal["across_runs", "given_alarm", "descriptive"]


def _num(value: object) -> float | None:
    """A finite number, else None (strings that spell one are read too, as the stored JSON may hold them)."""
    if not isinstance(value, SupportsFloat | str):
        return None
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _int(value: object) -> int | None:
    """A period index (an integer, or an integral float), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, SupportsIndex):
        return operator.index(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _str(value: object) -> str | None:
    """A non-empty value in words, else None."""
    return str(value) if value else None


def _validity(value: object) -> Validity:
    """A stored ``validity`` (the anytime bound's, ``across_runs``, when none is stored)."""
    if value == "given_alarm":
        return "given_alarm"
    if value == "descriptive":
        return "descriptive"
    return "across_runs"


def _mapping(value: object) -> Mapping[str, object] | None:
    return value if isinstance(value, Mapping) else None


def _get(obj: object, key: str) -> object:
    """``key`` of a mapping or an attribute of an object (an ORM row, a pydantic model)."""
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


@dataclass(frozen=True)
class StoredClaim:
    """A claim as stored (``{"epsilon": 1}``, ``{"gdp_mu": 1}``, …, a description, or a
    :class:`~app.stats.claims.Claim`): the claim when it is readable, and in words."""

    claim: Claim | None = None
    words: str | None = None
    given: bool = False  # something was stored, readable or not

    @property
    def pure_epsilon(self) -> float | None:
        """The ε of a pure-ε claim, else None."""
        return _num(self.claim.epsilon) if isinstance(self.claim, PureDP) else None


def parse_claim_record(raw: object) -> StoredClaim:
    if raw is None:
        return StoredClaim()
    parsed = claim_of_record(raw)
    if isinstance(raw, str):
        words: str = raw
    elif isinstance(raw, Mapping) and raw.get("describe"):
        words = str(raw["describe"])
    elif parsed is None:
        words = str(raw)
    else:
        words = f"ε = {parsed.epsilon:g}" if isinstance(parsed, PureDP) else parsed.describe()
    return StoredClaim(claim=parsed, words=words, given=True)


def claimed_value(param: str, claim: Claim | None) -> float | None:
    """The claimed value of ``param`` (ε, μ or ρ) when the claim names that parameter, else None."""
    return _num(claim.value) if claim is not None and claim.parameter == param else None


# --------------------------------------------------------------------------- an alarm's parts


@dataclass(frozen=True)
class DetectionRecord:
    """What the detector's alarm guarantees (``check.detection``); all None on alarms stored without it."""

    detector: str | None = None
    kind: str | None = None  # "level" or "arl"
    alpha: float | None = None
    arl: float | None = None
    statement: str | None = None


def parse_detection(raw: object) -> DetectionRecord:
    d = _mapping(raw)
    if d is None:
        return DetectionRecord()
    return DetectionRecord(detector=_str(d.get("detector")), kind=_str(d.get("kind")), alpha=_num(d.get("alpha")),
                           arl=_num(d.get("arl")), statement=_str(d.get("statement")))


@dataclass(frozen=True)
class AnytimeRecord:
    """The anytime-valid lower bound at the alarm (``check.anytime``, eq. CS)."""

    parameter: str
    lower_bound: float | None
    contradicts_claim: bool
    confidence: float | None
    from_t: int | None
    to_t: int | None
    validity: Validity
    restates_alarm: bool


@dataclass(frozen=True)
class WindowBoundRecord:
    """The bound over the detector's window (descriptive). ``legacy``: the check's own headline, as
    alarms stored before the anytime-valid bound held it."""

    lower_bound: float | None
    method: str | None
    legacy: bool


def _bound_of(raw: Mapping[str, object]) -> float | None:
    return _num(raw.get("lower_bound", raw.get("epsilon_lower_bound")))


@dataclass(frozen=True)
class ConfirmationRecord:
    """The exact test of the claim on fresh outputs drawn after the alarm."""

    parameter: str
    lower_bound: float | None
    confirms: bool
    confidence: float | None
    n: int | None  # outputs per database


def parse_confirmation(raw: Mapping[str, object]) -> ConfirmationRecord:
    counts = _mapping(raw.get("counts")) or {}
    n = _num(counts.get("n"))
    return ConfirmationRecord(parameter=str(raw.get("parameter") or "ε"), lower_bound=_num(raw.get("lower_bound")),
                              confirms=bool(raw.get("confirms")), confidence=_num(raw.get("confidence")),
                              n=None if n is None else int(n))


@dataclass(frozen=True)
class CheckRecord:
    """What raised a privacy alarm (``evidence.check``)."""

    parameter: str
    claim_description: str | None
    detection: DetectionRecord
    anytime: AnytimeRecord | None
    window_bound: WindowBoundRecord | None
    window_from_t: int | None
    window_to_t: int | None
    exact_lower_bound: float | None
    has_exact: bool
    confirmation: ConfirmationRecord | None


def parse_check(raw: Mapping[str, object]) -> CheckRecord:
    parameter = str(raw.get("parameter") or "ε")
    any_raw = _mapping(raw.get("anytime"))
    anytime = None
    if any_raw is not None:
        anytime = AnytimeRecord(
            parameter=str(any_raw.get("parameter") or parameter), lower_bound=_num(any_raw.get("lower_bound")),
            contradicts_claim=bool(any_raw.get("contradicts_claim")),
            confidence=_num(any_raw.get("confidence")) or _num(raw.get("confidence")),
            from_t=_int(any_raw.get("from_t")), to_t=_int(any_raw.get("to_t")),
            validity=_validity(any_raw.get("validity")),
            restates_alarm=bool(any_raw.get("restates_alarm", True)))
    legacy = "window_bound" not in raw and "anytime" not in raw
    wb_raw = raw if legacy else _mapping(raw.get("window_bound"))
    window_bound = None if wb_raw is None else WindowBoundRecord(
        lower_bound=_bound_of(wb_raw), method=_str(wb_raw.get("method") or raw.get("method")), legacy=legacy)
    window = _mapping(raw.get("window")) or {}
    exact = _mapping(raw.get("exact"))
    conf = _mapping(raw.get("confirmation"))
    return CheckRecord(
        parameter=parameter, claim_description=_str(raw.get("claim_description")), detection=parse_detection(raw.get("detection")),
        anytime=anytime, window_bound=window_bound, window_from_t=_int(window.get("from_t")),
        window_to_t=_int(window.get("to_t")), exact_lower_bound=None if exact is None else _bound_of(exact),
        has_exact=exact is not None, confirmation=None if conf is None else parse_confirmation(conf))


@dataclass(frozen=True)
class ClaimTermsRecord:
    """The MPL snapshot read in the claim's own terms (``claim_terms``: δ̂, μ̂ and the refuting event)."""

    refutes: bool
    claim: Claim | None
    alpha: float | None
    delta_lower_bound: float | None
    mu_lower_bound: float | None
    event_p_hat: float | None
    event_q_hat: float | None
    description: str | None
    statement: str | None


def parse_claim_terms(raw: Mapping[str, object]) -> ClaimTermsRecord:
    event = _mapping(raw.get("refuting_event")) or {}
    return ClaimTermsRecord(
        refutes=bool(raw.get("refutes")), claim=claim_of_record(raw.get("claim")), alpha=_num(raw.get("alpha")),
        delta_lower_bound=_num(raw.get("delta_lower_bound")), mu_lower_bound=_num(raw.get("mu_lower_bound")),
        event_p_hat=_num(event.get("p_hat")), event_q_hat=_num(event.get("q_hat")),
        description=_str(raw.get("description")), statement=_str(raw.get("statement")))


@dataclass(frozen=True)
class SnapshotRecord:
    """An MPL snapshot's reading: the alarm's ``evidence.snapshot`` or a snapshot's own result."""

    lower_bound: float | None
    epsilon_hat: float | None
    confidence: float | None
    claimed_epsilon: float | None
    verdict: str | None  # exceeds_claim, weaker_estimator, …, not_comparable
    claim_terms: ClaimTermsRecord | None  # present when the stored terms say whether they refute


def parse_snapshot(raw: Mapping[str, object], *, confidence: float | None = None) -> SnapshotRecord:
    """``confidence``: the snapshot's level when the caller knows it, else its stored ``confidence``, else 1 − α."""
    if confidence is None:
        confidence = _num(raw.get("confidence"))
    alpha = _num(raw.get("alpha"))
    if confidence is None and alpha is not None:
        confidence = 1 - alpha
    terms = _mapping(raw.get("claim_terms"))
    return SnapshotRecord(
        lower_bound=_num(raw.get("lower_bound")), epsilon_hat=_num(raw.get("epsilon_hat")), confidence=confidence,
        claimed_epsilon=_num(raw.get("claimed_epsilon")), verdict=_str(raw.get("verdict")),
        claim_terms=parse_claim_terms(terms) if terms is not None and "refutes" in terms else None)


@dataclass(frozen=True)
class ContractRecord:
    """What broke the output contract, in words."""

    breach: str
    detail: str


@dataclass(frozen=True)
class AlarmRecord:
    """An alarm as the verdict reads it."""

    kind: str | None
    statistic: float | None
    threshold: float | None
    t: int | None
    horizon_index: int | None
    claim: StoredClaim  # the alarm's claim, else its check's
    #: The claim the check's bounds are read against: the check's own when stored, else the alarm's.
    bound_claim: Claim | None = None
    check: CheckRecord | None = None
    detection: DetectionRecord = field(default_factory=DetectionRecord)
    confirmation: ConfirmationRecord | None = None
    snapshot: SnapshotRecord | None = None
    contract: ContractRecord | None = None

    @property
    def words(self) -> str | None:
        """The claim in words: the check's description, else the claim's."""
        return (self.check.claim_description if self.check else None) or self.claim.words


def _evidence_of(alarm: object) -> Mapping[str, object]:
    evidence = _get(alarm, "evidence")
    dump = getattr(evidence, "model_dump", None)
    if callable(dump):
        evidence = dump(mode="json")
    return _mapping(evidence) or {}


def parse_alarm(alarm: object) -> AlarmRecord:
    """An alarm (an ORM ``Alarm``, an ``AlarmRead`` or a dict with ``kind``, ``statistic``,
    ``threshold``, ``t``, ``horizon_index``, ``claim`` and ``evidence``) as the verdict reads it."""
    evidence = _evidence_of(alarm)
    kind = _str(_get(alarm, "kind"))
    statistic, threshold = _num(_get(alarm, "statistic")), _num(_get(alarm, "threshold"))
    t, horizon_index = _int(_get(alarm, "t")), _int(_get(alarm, "horizon_index"))
    if kind == "contract":
        contract = _mapping(evidence.get("contract")) or {}
        detail = contract.get("detail") or evidence.get("statement") or ""
        return AlarmRecord(kind, statistic, threshold, t, horizon_index, claim=StoredClaim(),
                           contract=ContractRecord(breach=str(contract.get("breach") or "breach"), detail=str(detail)))
    check_raw = _mapping(evidence.get("check"))
    check = None if check_raw is None else parse_check(check_raw)
    claim_raw = _get(alarm, "claim")
    if claim_raw is None and check_raw is not None:
        claim_raw = check_raw.get("claim")
    conf_raw = _mapping(evidence.get("confirmation") or (check_raw or {}).get("confirmation"))
    snap_raw = evidence.get("snapshot")
    if snap_raw is None and "kind" not in evidence and "snapshot_id" in evidence:
        # alarms stored before the evidence had a `check` part held the snapshot's summary only
        snap_raw = {**evidence, "verdict": "exceeds_claim" if evidence.get("exceeds_claim") else "weaker_estimator"}
    snap = _mapping(snap_raw)
    return AlarmRecord(
        kind, statistic, threshold, t, horizon_index, claim=parse_claim_record(claim_raw),
        bound_claim=claim_of_record((check_raw or {}).get("claim") or claim_raw), check=check,
        detection=check.detection if check is not None else DetectionRecord(),
        confirmation=None if conf_raw is None else parse_confirmation(conf_raw),
        snapshot=None if snap is None else parse_snapshot(snap))


# --------------------------------------------------------------------------- a snapshot, an audit


@dataclass(frozen=True)
class SnapshotResultRecord:
    """A done snapshot's ``result`` as the verdict reads it."""

    snapshot: SnapshotRecord
    claim: StoredClaim  # its claim; a bare ``claimed_epsilon`` is read as a pure ε
    alpha: float
    terms_description: str | None
    has_terms: bool


def parse_snapshot_result(result: Mapping[str, object]) -> SnapshotResultRecord:
    alpha = _num(result.get("alpha"))
    alpha = 0.05 if alpha is None else alpha
    claim_raw = result.get("claim")
    claimed = _num(result.get("claimed_epsilon"))
    if claim_raw is None and claimed is not None:
        claim_raw = {"epsilon": claimed}
    terms = _mapping(result.get("claim_terms"))
    return SnapshotResultRecord(
        snapshot=parse_snapshot(result, confidence=1 - alpha), claim=parse_claim_record(claim_raw), alpha=alpha,
        terms_description=None if terms is None else _str(terms.get("description")), has_terms=terms is not None)


@dataclass(frozen=True)
class AuditRecord:
    """An audit's result (``AuditResult.to_dict()``) as the verdict reads it."""

    alpha: float
    claim_words: str | None  # None when the audit tested no claim
    parameter: str  # ε, μ (a GDP claim) or ρ (a zCDP claim)
    lower_bound: float | None
    claimed_epsilon: float | None
    refuted: bool
    epsilon_hat: float | None


def parse_audit(result: Mapping[str, object]) -> AuditRecord:
    alpha = _num(result.get("alpha"))
    claim = result.get("claim")
    words = None if not claim or str(claim).startswith("none") else str(claim)
    param = "μ" if str(claim).endswith("-GDP") else "ρ" if str(claim).endswith("-zCDP") else "ε"
    return AuditRecord(alpha=0.05 if alpha is None else alpha, claim_words=words, parameter=param,
                       lower_bound=_num(result.get("lower_bound")), claimed_epsilon=_num(result.get("claimed_epsilon")),
                       refuted=bool(result.get("refuted")) and words is not None, epsilon_hat=_num(result.get("epsilon_hat")))
