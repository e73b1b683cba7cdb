"""The output contract of a mechanism, checked on every period (contract alarms).

The contract is an ``OutputShape`` (app.stats.shapes): declared at registration, or detected
from the outputs of the first period that has none. Every period then checks its outputs against
it with ``conformance``; a breach (a changed type, length or support: an index that becomes a
value, a vector that grows, a label never declared) raises a ``contract`` alarm with an
offending output, once per breach kind until the monitor is reset, and asks an ``auto`` monitor
to look for events again (the outputs' shape changed).

Periods are sampled with a *lenient* form of the contract (numbers as reals, nulls allowed, no
lattice, bounds, labels, key universe or key limit), so that outputs which break the strict contract are still counted in
the checks' events: a contract breach must not blind the privacy checks. Only outputs that even
the lenient form cannot read (another container or length) fail the period; the failure's
breach then raises the contract alarm.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.auth.rotation import signing_secrets
from app.models.mechanisms import Mechanism
from app.sampling.client import MechanismEndpoint
from app.sampling.protocol import SamplingError
from app.stats.shapes import (
    KeyedSamples,
    OutputShape,
    concat_outputs,
    conformance,
    detect_shape,
    n_outputs,
    take_outputs,
)

#: Outputs per database a contract is detected from.
DETECTION_SAMPLE = 20_000
#: ... and at most this many keyed entries (detection reads keyed outputs as Python dicts: 2 million
#: entries, 4 000 outputs of 500 keys, cost 3 s and 450 MB per period).
DETECTION_ENTRIES = 100_000


def _detection_part(outputs: Any) -> Any:
    """The first outputs of a database that detection reads."""
    k = min(n_outputs(outputs), DETECTION_SAMPLE)
    if isinstance(outputs, KeyedSamples) and k and int(outputs.indptr[k]) > DETECTION_ENTRIES:
        k = max(1, int(np.searchsorted(outputs.indptr, DETECTION_ENTRIES, side="right")) - 1)
    return take_outputs(outputs, slice(0, k))


def contract_of(mechanism: Mechanism) -> OutputShape | None:
    """The mechanism's contract, if it has one yet."""
    if mechanism.output_shape is None:  # {} is a contract: every field at its default
        return None
    return OutputShape.model_validate(mechanism.output_shape)


def _legacy_readable(shape: OutputShape) -> bool:
    """Whether the mechanism's ``output_kind`` parser reads this contract's outputs already (and
    as leniently: vectors are read with the lenient shape, so that a ``null`` a contract detected
    without nulls breaches the contract without failing the period)."""
    if shape.nullable:
        return False
    return shape.container == "scalar" and shape.values in ("real", "integer", "discrete", "label")


def kind_shape(mechanism: Mechanism) -> OutputShape | None:
    """The shape a mechanism without a contract is read in: a vector or keyed ``output_kind``'s
    (``null`` entries allowed: a kind names the container, not whether entries may be null), or
    None for the ``output_kind`` parser of real and discrete outputs."""
    if mechanism.output_kind in ("vector", "keyed"):
        return OutputShape.from_output_kind(mechanism.output_kind, mechanism.dim)
    return None


def parsing_shape(mechanism: Mechanism) -> OutputShape | None:
    """The lenient shape periods are sampled with, or None to use the ``output_kind`` parser."""
    contract = contract_of(mechanism)
    if contract is None:
        return kind_shape(mechanism)
    if _legacy_readable(contract):
        return None
    values = "real" if contract.values in ("real", "integer") else contract.values
    if contract.container == "keyed":  # any key, any number of them: the contract checks those
        return OutputShape(container="keyed", nullable=True)
    if contract.container == "vector":
        return OutputShape(container="vector", length=contract.length, values=values, nullable=True)
    if contract.container == "list":
        return OutputShape(container="list", values=values, nullable=True)
    return OutputShape(values=values, nullable=True)


def detect_contract(outputs: dict[str, Any]) -> tuple[OutputShape, dict[str, Any]] | None:
    """A contract detected from a period's outputs on all its databases (with its evidence), or
    None if no shape describes them."""
    # A sample of each database is enough, and keeps detection cheap at large n.
    parts = [_detection_part(o) for o in outputs.values()]
    try:
        found = detect_shape(concat_outputs(parts))
    except ValueError:
        return None
    return found.shape, dict(found.evidence)


def _observed(outputs: Any) -> dict[str, Any] | None:
    try:
        return detect_shape(outputs).shape.model_dump(mode="json", exclude_defaults=True)
    except ValueError:
        return None


def check_outputs(contract: OutputShape, outputs: dict[str, Any], databases: dict[str, Any],
                  period: int) -> dict[str, Any] | None:
    """The first breach of the contract among a period's outputs (by database), as the evidence
    a contract alarm carries; None when every output fits."""
    for key, values in outputs.items():
        breach = conformance(contract, values)
        if breach is None:
            continue
        index, sample = breach.index, breach.sample
        if sample is None and isinstance(values, np.ndarray) and values.ndim >= 1 and len(values):
            bad = _first_breaking(contract, values)
            if bad is not None:
                index, sample = bad, values[bad].tolist()
        return {
            "breach": breach.kind,
            "detail": breach.detail,
            "index": index,
            "sample": sample,
            "database": databases.get(key),
            "expected_shape": contract.model_dump(mode="json", exclude_defaults=True),
            "observed_shape": _observed(values),
            "period": period,
        }
    return None


def _first_breaking(contract: OutputShape, values: np.ndarray) -> int | None:
    """Index of the first output that breaks the contract on its own (bisection on prefixes)."""
    lo, hi = 0, len(values)
    if conformance(contract, values[:hi]) is None:
        return None
    while hi - lo > 1:  # invariant: values[:hi] breaks, values[:lo] does not
        mid = (lo + hi) // 2
        if conformance(contract, values[:mid]) is None:
            lo = mid
        else:
            hi = mid
    return hi - 1


def breach_of_error(error: SamplingError, contract: OutputShape | None, period: int) -> dict[str, Any] | None:
    """A failed period whose answers the sampling client could not read in the contract's shape
    (another container, length or type): the contract alarm's evidence, or None for other failures."""
    breach = getattr(error, "breach", None)
    if breach is None and error.reason != "wrong_type":
        return None
    return {
        "breach": breach.kind if breach is not None else "type",
        "detail": breach.detail if breach is not None else str(error.detail),
        "index": breach.index if breach is not None else None,
        "sample": breach.sample if breach is not None else None,
        "database": None,
        "expected_shape": None if contract is None else contract.model_dump(mode="json", exclude_defaults=True),
        "observed_shape": None,
        "period": period,
    }


def strict_shape(mechanism: Mechanism) -> OutputShape | None:
    """The shape a validation probe reads answers in: the contract, else the kind's."""
    return contract_of(mechanism) or kind_shape(mechanism)


def sampling_endpoint(mechanism: Mechanism, shape: OutputShape | None) -> MechanismEndpoint:
    """The mechanism as the sampling client sees it (a ``MechanismEndpoint``), signing with its
    current secret and, during a rotation's overlap, the previous one; outputs are read with
    ``shape`` (periods pass the lenient form of the contract, probes the strict one)."""
    return MechanismEndpoint(
        sampling_url=mechanism.sampling_url,
        secret=mechanism.secret,
        previous_secrets=signing_secrets(mechanism)[1:],
        output_kind=mechanism.output_kind,  # type: ignore[arg-type]
        max_batch=mechanism.max_batch,
        timeout_seconds=mechanism.timeout_seconds,
        prefer_binary=mechanism.prefer_binary,
        vector_dim=mechanism.dim,
        shape=shape,
        isolation_key=f"mechanism:{mechanism.id}",  # connections are never shared with another mechanism
    )


def endpoint_of(mechanism: Mechanism) -> MechanismEndpoint:
    """The mechanism as the sampling client sees it; outputs are read with the lenient form of its
    output contract (app.mechanisms.contract), which periods then check strictly."""
    return sampling_endpoint(mechanism, parsing_shape(mechanism))
