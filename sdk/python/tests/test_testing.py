"""assert_dp in-process (numpy and scipy, no server), and the dpwatch CLI behind
``assert_dp(domain=…)`` and ``Auditor``: verdicts, reports, and clear errors when it cannot run."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from dpwatch_sdk import Claim
from dpwatch_sdk.adapters import from_function
from dpwatch_sdk.testing import Auditor, DPViolation, DpwatchError, assert_dp, configure_auditor

PAIRS = [([0, 0, 0], [0, 0, 1])]


def laplace(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def half_noise(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 0.5, n)


def test_in_process_correct_passes_and_half_noise_fails_with_the_report():
    result = assert_dp(laplace, epsilon=1.0, pairs=PAIRS)  # no server, no environment variable
    assert not result.violated and "passes 1-DP" in result.report and "power:" in result.report
    mechanism = from_function(half_noise, epsilon=1.0)  # the claim travels with the mechanism
    with pytest.raises(DPViolation) as caught:
        assert_dp(mechanism, pairs=PAIRS)
    assert "half_noise violates 1-DP with certainty" in str(caught.value) and "reproduce:" in str(caught.value)
    with pytest.raises(DPViolation, match="fails 1-DP"):
        assert_dp(mechanism, pairs=PAIRS, coupled=False)


def test_the_cli_auditor_audits_a_served_endpoint(auditor, tmp_path):
    configure_auditor(auditor.argv)  # what the pytest plugin's --dpwatch-command does
    result = auditor.run(laplace, epsilon=1.0, pairs=PAIRS)
    assert not result.violated and "not refuted" in result.report and "whsec_…" in result.command
    mechanism = from_function(half_noise, epsilon=1.0)
    with pytest.raises(DPViolation) as caught:
        auditor.assert_dp(mechanism, pairs=PAIRS, junit_xml=tmp_path / "r.xml")
    message = str(caught.value)
    assert "refuted the claim 1-DP of half_noise" in message and "REFUTED" in message and "held out" in message
    assert ET.parse(tmp_path / "r.xml").getroot().get("failures") == "1"


def test_what_cannot_run_is_a_clear_error(auditor, tmp_path):
    with pytest.raises(ValueError, match="give the claim"):
        auditor.assert_dp(laplace, pairs=PAIRS)
    with pytest.raises(ValueError, match="give the claim"):
        assert_dp(laplace, pairs=PAIRS)
    with pytest.raises(ValueError, match="pairs= .* or domain="):
        auditor.assert_dp(laplace, epsilon=1.0)
    with pytest.raises(DpwatchError, match="exit code 2"):
        auditor.assert_dp(laplace, epsilon=1.0, pairs=PAIRS, extra_args=["--no-such-option"])
    with pytest.raises(DpwatchError, match="cannot run dpwatch"):
        Auditor(str(tmp_path / "nowhere" / "dpwatch")).assert_dp(laplace, epsilon=1.0, pairs=PAIRS)
    if not auditor.has_search():
        with pytest.raises(DpwatchError, match="needs `dpwatch search`"):
            auditor.assert_dp(laplace, epsilon=1.0, domain={"records": {"type": "real", "low": 0, "high": 1}})
    assert Claim.of(1.0, 1e-6).cli_args() == ["--epsilon", "1.0", "--delta", "1e-06"]


def test_domain_runs_dpwatch_search_when_the_installation_has_it(tmp_path):
    """A stand-in dpwatch that has `search`: assert_dp(domain=…) calls it with the domain file, the
    claim, the secret and the output kind, and reads its exit code (1: a certified violation)."""
    fake = tmp_path / "dpwatch"
    fake.write_text("#!/bin/sh\n"
                    "if [ \"$1\" = search ] && [ \"$3\" = --help ] || [ \"$2\" = --help ]; then exit 0; fi\n"
                    "echo \"called: $*\"; domain=$(sed -n 1p \"$4\"); echo \"domain: $domain\"\n"
                    "exit ${FAKE_EXIT:-1}\n")
    fake.chmod(0o755)
    auditor = Auditor(str(fake))
    assert auditor.has_search()
    domain = {"records": {"type": "real", "low": 0, "high": 1}, "size": {"min": 0, "max": 10}}
    with pytest.raises(DPViolation) as caught:
        auditor.assert_dp(laplace, epsilon=1.0, domain=domain)
    report = caught.value.result.report
    assert "called: search http://127.0.0.1:" in report and "--domain" in report and "--epsilon 1.0" in report
    assert "--output-kind real" in report and '"records"' in report
    assert "found a certified violation of the claim 1-DP" in str(caught.value)
    ok = Auditor(str(fake), env={"FAKE_EXIT": "0"}).assert_dp(laplace, epsilon=1.0, domain=domain)
    assert not ok.violated
