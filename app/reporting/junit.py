"""JUnit XML reports for CI (``dpwatch audit --junit-xml``, ``dpwatch search --junit-xml``): one ``<testsuite>`` of ``<testcase>``s, each passed, failed (the claim is refuted or a
violation certified), or in error (the test could not run, e.g. the endpoint failed).

The format is the one Jenkins, GitLab, GitHub Actions' test reporters and pytest's
``--junitxml`` share: ``<testsuites>`` → ``<testsuite name tests failures errors skipped time
timestamp>`` → ``<properties>`` and ``<testcase classname name time>`` with an optional
``<failure message type>`` or ``<error message type>`` and ``<system-out>``.
"""

from __future__ import annotations

import os
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from app.reporting.text import shorten

__all__ = ["JUnitCase", "audit_case", "error_case", "junit_xml", "search_cases", "search_properties", "shown_url",
           "write_junit"]

Outcome = Literal["passed", "failed", "error", "skipped"]

# Characters XML 1.0 cannot hold, even escaped.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass
class JUnitCase:
    """One test: ``outcome`` passed, failed (``message`` says why, ``text`` is the report), error
    (the test could not run) or skipped. ``properties`` are numbers worth keeping (LB, ε̂, samples)."""

    name: str
    classname: str
    seconds: float
    outcome: Outcome = "passed"
    message: str | None = None
    text: str = ""
    failure_type: str = "DPViolation"
    properties: Mapping[str, Any] = field(default_factory=dict)


def _clean(text: Any) -> str:
    return _INVALID_XML.sub("\ufffd", str(text))


def shown_url(url: str) -> str:
    """A URL as reports show it: without its query string or credentials (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def junit_xml(suite: str, cases: Sequence[JUnitCase], *, timestamp: datetime | None = None,
              properties: Mapping[str, Any] | None = None) -> bytes:
    """The report as UTF-8 bytes."""
    counts = {k: sum(c.outcome == k for c in cases) for k in ("failed", "error", "skipped")}
    total = f"{sum(c.seconds for c in cases):.3f}"
    root = ET.Element("testsuites", name=_clean(suite), tests=str(len(cases)), failures=str(counts["failed"]),
                      errors=str(counts["error"]), skipped=str(counts["skipped"]), time=total)
    node = ET.SubElement(root, "testsuite", name=_clean(suite), tests=str(len(cases)),
                         failures=str(counts["failed"]), errors=str(counts["error"]), skipped=str(counts["skipped"]),
                         time=total, timestamp=(timestamp or datetime.now(UTC)).isoformat(timespec="seconds"))
    merged = dict(properties or {})
    for case in cases:
        if len(cases) == 1:
            merged.update(case.properties)
        else:
            merged.update({f"{case.name}: {k}": v for k, v in case.properties.items()})
    if merged:
        props = ET.SubElement(node, "properties")
        for key, value in merged.items():
            ET.SubElement(props, "property", name=_clean(key), value=_clean("" if value is None else value))
    for case in cases:
        element = ET.SubElement(node, "testcase", classname=_clean(case.classname), name=_clean(case.name),
                                time=f"{case.seconds:.3f}")
        if case.outcome in ("failed", "error"):
            tag = "failure" if case.outcome == "failed" else "error"
            detail = ET.SubElement(element, tag, message=_clean(case.message or case.outcome),
                                   type=_clean(case.failure_type if tag == "failure" else "DpwatchError"))
            detail.text = _clean(case.text)
        elif case.outcome == "skipped":
            ET.SubElement(element, "skipped", message=_clean(case.message or "skipped"))
        if case.text:
            ET.SubElement(element, "system-out").text = _clean(case.text)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(path: str | os.PathLike[str], suite: str, cases: Sequence[JUnitCase], **options: Any) -> Path:
    """Write the report to ``path`` atomically (a reader never sees half a file); the folder is
    made when missing."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = junit_xml(suite, cases, **options)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def audit_case(result: Mapping[str, Any], url: str, report: str, *, claimed: bool = True) -> JUnitCase:
    """The test case of one ``dpwatch audit`` (``AuditResult.to_dict()``): failed when the claim is
    refuted, passed otherwise (which does not show that the mechanism satisfies it). Without a
    claim (``claimed=False``, an estimate only) nothing can fail."""
    claim = result.get("claim") if claimed else "estimate"
    refuted = claimed and bool(result.get("refuted"))
    lower_bound = result.get("lower_bound")
    message = None
    if refuted:
        message = f"claim {claim} refuted at level α = {result.get('alpha')}"
        if isinstance(lower_bound, (int, float)):
            message += f" (lower confidence bound {lower_bound:.4g})"
    return JUnitCase(
        name=f"{claim} of {shown_url(url)}",
        classname="dpwatch.audit",
        seconds=float(result.get("seconds") or 0.0),
        outcome="failed" if refuted else "passed",
        message=message,
        text=report,
        properties={"verdict": "refuted" if refuted else "not refuted", "claim": claim, "alpha": result.get("alpha"),
                    "lower_bound": lower_bound, "epsilon_hat": result.get("epsilon_hat"),
                    "samples_used": result.get("samples_used"), "stopped": result.get("stopped")},
    )




def _certified_findings(result: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    findings = [f for f in result.get("findings") or [] if f.get("exceeds_claim")]
    return findings or ([result["finding"]] if result.get("finding") else [])


def search_cases(result: Mapping[str, Any], url: str, report: str) -> list[JUnitCase]:
    """The test cases of one ``dpwatch search`` (``SearchResult.to_dict()``); its numbers are in
    :func:`search_properties`.

    A certified violation is one failed case per finding whose held-out test refuted the claim
    (``exceeds_claim``), each with the whole report. Without one the search is a single case:
    passed when it ran to its budget or time limit (which does not show that the claim holds), in
    error when certification could not run because the endpoint failed on a finalist."""
    claim = result.get("claim")
    where = shown_url(url)
    seconds = float((result.get("seconds") or {}).get("total") or 0.0)
    if result.get("certified"):
        findings = _certified_findings(result)
        cases = []
        for f in findings:
            lower_bound = f.get("lower_bound")
            message = f"violation of {claim} certified at level α = {result.get('alpha')}"
            if isinstance(lower_bound, (int, float)):
                message += f" (lower confidence bound {lower_bound:.4g} on {result.get('parameter') or 'ε'})"
            message += f" on x = {shorten(f.get('x'), 60)}, x′ = {shorten(f.get('x_prime'), 60)}"
            cases.append(JUnitCase(
                name=f"{claim} of {where}: finding {f.get('rank')}, x = {shorten(f.get('x'), 40)}, "
                     f"x′ = {shorten(f.get('x_prime'), 40)}, {f.get('describe') or shorten(f.get('event'), 40)}",
                classname="dpwatch.search", seconds=seconds / max(1, len(findings)), outcome="failed",
                message=message, text=report))
        return cases
    if (result.get("certification") or {}).get("error"):
        return [JUnitCase(name=f"{claim} of {where}", classname="dpwatch.search", seconds=seconds, outcome="error",
                          message=f"the search could not certify: {result.get('stopped')}", text=report)]
    return [JUnitCase(name=f"{claim} of {where}", classname="dpwatch.search", seconds=seconds, outcome="passed",
                      text=report)]


def search_properties(result: Mapping[str, Any]) -> dict[str, Any]:
    """The suite's properties for a search: the verdict and sizes, and each certified finding's
    pair, event and lower bound (``finding N: …``)."""
    certified = bool(result.get("certified"))
    error = (result.get("certification") or {}).get("error")
    out: dict[str, Any] = {
        "verdict": "violation certified" if certified else ("error" if error else "no violation certified"),
        "claim": result.get("claim"), "alpha": result.get("alpha"), "stopped": result.get("stopped"),
        "samples_used": (result.get("samples") or {}).get("total"),
        "candidates": (result.get("candidates") or {}).get("generated")}
    for f in _certified_findings(result) if certified else []:
        label = f"finding {f.get('rank')}"
        out.update({f"{label}: lower_bound": f.get("lower_bound"), f"{label}: x": shorten(f.get("x"), 500),
                    f"{label}: x_prime": shorten(f.get("x_prime"), 500), f"{label}: event": shorten(f.get("event"), 500),
                    f"{label}: relation": f.get("relation")})
    return out


def error_case(name: str, classname: str, message: str, seconds: float = 0.0) -> JUnitCase:
    """A test that could not run (the endpoint failed, a timeout): an ``<error>``, not a failure."""
    return JUnitCase(name=name, classname=classname, seconds=seconds, outcome="error", message=message, text=message)
