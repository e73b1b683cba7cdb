"""`dpwatch audit --junit-xml` and `dpwatch search --junit-xml`: the verdict as a JUnit report
(app/reporting/junit.py), for an endpoint served by the SDK on loopback: refuted (or a certified
violation) -> a failure, not refuted -> passed, an endpoint that fails -> an error."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from dpwatch_sdk import Endpoint, generate_secret
from typer.testing import CliRunner

from app.cli import app
from app.reporting.junit import JUnitCase, junit_xml, shown_url
from app.reporting.text import shorten

SECRET = generate_secret()
PAIRS = json.dumps([{"x": [0, 0], "x_prime": [0, 1]}])


def laplace(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def half_noise(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 0.5, n)


def broken(database, n, rng):
    raise RuntimeError("the model server is down")


def audit(f, path, *extra):
    with Endpoint(f, secret=SECRET, seed=11).start() as server:
        return CliRunner().invoke(app, ["audit", server.url + "?token=hidden", "--pairs", PAIRS, "--secret", SECRET,
                                        "--allow-networks", "127.0.0.0/8", "--no-progress", "--output-kind", "real",
                                        "--budget", "8000", "--junit-xml", str(path), *extra])


def test_refuted_is_a_failure_and_not_refuted_passes(tmp_path):
    refuted = audit(half_noise, tmp_path / "refuted.xml", "--epsilon", "1")
    assert refuted.exit_code == 1, refuted.output
    suite = ET.parse(tmp_path / "refuted.xml").getroot()
    assert suite.tag == "testsuites" and suite.get("failures") == "1" and suite.get("tests") == "1"
    case = suite.find("testsuite/testcase")
    assert case.get("classname") == "dpwatch.audit" and case.get("name").startswith("1-DP of http://127.0.0.1:")
    assert "token" not in case.get("name")  # the query string may hold a secret
    failure = case.find("failure")
    assert "refuted at level α = 0.05" in failure.get("message") and "REFUTED" in failure.text
    props = {p.get("name"): p.get("value") for p in suite.find("testsuite/properties")}
    assert props["verdict"] == "refuted" and float(props["lower_bound"]) > 1

    passed = audit(laplace, tmp_path / "ok.xml", "--epsilon", "1")
    assert passed.exit_code == 0, passed.output
    suite = ET.parse(tmp_path / "ok.xml").getroot()
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    case = suite.find("testsuite/testcase")
    assert case.find("failure") is None and "not refuted" in case.find("system-out").text


def test_a_failing_endpoint_is_an_error(tmp_path):
    result = audit(broken, tmp_path / "error.xml", "--mu", "1")
    assert result.exit_code == 2
    suite = ET.parse(tmp_path / "error.xml").getroot()
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    assert "sampling failed (http_status)" in suite.find("testsuite/testcase/error").get("message")


def test_a_failing_endpoint_is_asked_once_not_again_by_the_audit_after_the_rate_probe(tmp_path):
    """The command times the endpoint first; when that fails (here the mechanism raises, a 500 the
    client retries), the command fails with that error: the audit used to ask again, so the user
    waited for the retries twice and read every one of them twice."""
    calls = []

    def counted(database, n, rng):
        calls.append(n)
        raise RuntimeError("the model server is down")

    result = audit(counted, tmp_path / "error.xml", "--epsilon", "1")
    assert result.exit_code == 2, result.output
    assert "sampling failed (http_status)" in result.output and "the model server is down" in result.output
    assert 1 <= len(calls) <= 5, calls  # one request and its retries (SAMPLING_MAX_ATTEMPTS)
    assert ET.parse(tmp_path / "error.xml").getroot().get("errors") == "1"


DOMAIN = json.dumps({"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 1, "max": 3},
                     "neighbours": ["add_remove"]})


def search(f, path, *extra):
    with Endpoint(f, secret=SECRET, seed=11).start() as server:
        return CliRunner().invoke(app, ["search", server.url + "?token=hidden", "--domain", DOMAIN, "--secret", SECRET,
                                        "--allow-networks", "127.0.0.0/8", "--no-progress", "--output-kind", "real",
                                        "--candidates", "30", "--budget", "200000", "--epsilon", "1",
                                        "--junit-xml", str(path), *extra])


def test_search_a_certified_violation_is_a_failure_per_finding(tmp_path):
    certified = search(half_noise, tmp_path / "search.xml", "--json")
    assert certified.exit_code == 1, certified.output
    result = json.loads(certified.stdout)
    exceeding = [f for f in result["findings"] if f["exceeds_claim"]]
    assert result["certified"] and exceeding
    suite = ET.parse(tmp_path / "search.xml").getroot()
    cases = suite.findall("testsuite/testcase")
    assert suite.get("failures") == str(len(exceeding)) == str(len(cases)) and suite.get("errors") == "0"
    first = cases[0]
    assert first.get("classname") == "dpwatch.search" and first.get("name").startswith("1-DP of http://127.0.0.1:")
    # x as the name shows it: its JSON, cut to 40 characters (a finding's x may be a long record list)
    assert "token" not in first.get("name") and f"x = {shorten(exceeding[0]['x'], 40)}," in first.get("name")
    failure = first.find("failure")
    assert failure.get("message").startswith("violation of 1-DP certified at level α = 0.05 (lower confidence bound")
    assert "VIOLATION CERTIFIED" in failure.text  # the report
    props = {p.get("name"): p.get("value") for p in suite.find("testsuite/properties")}
    assert props["verdict"] == "violation certified" and props["stopped"] == "certified"
    assert float(props["finding 1: lower_bound"]) > 1 and props["finding 1: x"] == json.dumps(exceeding[0]["x"])


def test_search_without_a_certified_violation_passes(tmp_path):
    passed = search(laplace, tmp_path / "ok.xml")
    assert passed.exit_code == 0, passed.output
    # the time estimate says which database it was timed on (a small one: the search draws larger ones)
    assert "endpoint rate:" in passed.output and "(timed on a database of 2 records;" in passed.output
    suite = ET.parse(tmp_path / "ok.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")
    case = suite.find("testsuite/testcase")
    assert case.find("failure") is None and "does not show that the claim holds" in case.find("system-out").text
    props = {p.get("name"): p.get("value") for p in suite.find("testsuite/properties")}
    assert props["verdict"] == "no violation certified" and int(props["samples_used"]) <= 200_000


def test_search_on_a_failing_endpoint_is_an_error(tmp_path):
    result = search(broken, tmp_path / "error.xml")
    assert result.exit_code == 2
    suite = ET.parse(tmp_path / "error.xml").getroot()
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    assert "failed on every one" in suite.find("testsuite/testcase/error").get("message")


def answers_only_the_empty_database(database, n, rng):
    """A release whose schema the domain does not match: every non-empty table fails (a missing
    column), the empty one has no row to fail on."""
    if database:
        raise KeyError("city")
    return rng.laplace(0.0, 1.0, n)


def test_search_that_could_sample_no_pair_is_an_error(tmp_path):
    """Only the empty database answered: no pair was sampled and nothing tested. That exited 0 (a
    passed JUnit case), as if the search had found nothing, although the endpoint failed on every
    other input (the unusable-endpoint rule needs every database to fail, and the empty one did not)."""
    table = json.dumps({"table": {"columns": {"user": {"type": "id"}}, "privacy_unit": "user"},
                        "size": {"min": 0, "max": 20}, "neighbours": ["add_remove_unit"]})
    result = search(answers_only_the_empty_database, tmp_path / "error.xml", "--domain", table)  # the last --domain
    assert result.exit_code == 2, result.output
    assert "no pair of the domain could be sampled" in result.output and "city" in result.output
    suite = ET.parse(tmp_path / "error.xml").getroot()
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    assert "no pair of the domain could be sampled" in suite.find("testsuite/testcase/error").get("message")


def test_report_escapes_and_strips_what_xml_cannot_hold():
    data = junit_xml("s", [JUnitCase("a <b> & \x00c", "k", 1.5, "failed", "bad \x1b", "report\x07")])
    root = ET.fromstring(data)
    case = root.find("testsuite/testcase")
    assert case.get("name") == "a <b> & \ufffdc" and case.find("failure").text == "report\ufffd"
    assert shown_url("https://u:p@h.example:8443/x?k=s#f") == "https://h.example:8443/x"


def test_the_ci_workflow_example_uses_real_options():
    """docs/ci/dp-tests.yml: valid YAML, and every option it gives dpwatch or the pytest plugin exists."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    workflow = yaml.safe_load((root / "docs" / "ci" / "dp-tests.yml").read_text())
    runs = [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]
    script = "\n".join(runs).replace("\\\n", " ")
    checked = 0
    for command in ("audit", "search", "apply"):
        for line in script.splitlines():
            if f" {command} " not in line or "dpwatch" not in line.lower():
                continue
            help_text = CliRunner().invoke(app, [command, "--help"], terminal_width=200).stdout
            for flag in {t for t in line.split() if t.startswith("--")}:
                assert flag in help_text, f"dpwatch {command} has no {flag}"
                checked += 1
    plugin = (root / "sdk" / "python" / "dpwatch_sdk" / "pytest_plugin.py").read_text()
    plugin_flags = {t for t in script.split() if t.startswith("--dpwatch-")}
    assert plugin_flags, "the workflow uses no option of the pytest plugin"
    for flag in plugin_flags:
        assert f'"{flag}"' in plugin, f"the pytest plugin has no {flag}"
    assert checked >= 15
