"""dpwatch audit --sequential: one pair, bet pair by pair (app.audit.sequential, method.md §13.10)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from app.audit.sequential import claim_line, sequential_pair_audit
from app.cli import app
from app.reference.server import endpoint_router
from app.sampling.protocol import generate_secret
from app.sampling.safe_http import SafeHttpConfig
from app.stats.sequential import SupportingLine, gdp_supporting_line
from app.stats.shapes import OutputShape
from tests.support.sampling_server import serve_app

SECRET = generate_secret()


def _server():
    api = FastAPI()
    routes = {
        # Σx + Lap(1/ε) at ε = 0.5: exactly 0.5-DP for neighbours at distance 1
        "/laplace": (lambda db, n, rng: float(np.sum(db)) + rng.laplace(0.0, 2.0, n), "real"),
        # the same with a quarter of the scale: truly 2-DP, so a claim of 0.5 is false
        "/laplace-small": (lambda db, n, rng: float(np.sum(db)) + rng.laplace(0.0, 0.5, n), "real"),
        # Σx + N(0, 1/4): μ = 2 for neighbours at distance 1, so 1-GDP is false
        "/gauss-small": (lambda db, n, rng: float(np.sum(db)) + rng.normal(0.0, 0.5, n), "real"),
        "/vector": (lambda db, n, rng: rng.laplace(0.0, 1.0, (n, 3)),
                    OutputShape(container="vector", values="real", length=3)),
    }
    api.include_router(endpoint_router(routes, secret=SECRET, seed=11))
    return serve_app(api)


def _run(url, *extra):
    return CliRunner().invoke(app, ["audit", url, "--secret", SECRET, "--allow-networks", "127.0.0.0/8",
                                    "--no-progress", "--sequential", *extra])


def test_the_sequential_audit_stops_at_the_first_rejection_and_not_on_a_correct_mechanism(tmp_path):
    pair = json.dumps([[[0], [1]]])
    with _server() as base:
        broken = _run(f"{base}/laplace-small", "--pairs", pair, "--epsilon", "0.5", "--max-pairs", "5000",
                      "--pair-batch", "50", "--json", "--junit-xml", str(tmp_path / "r.xml"))
        correct = _run(f"{base}/laplace", "--pairs", pair, "--epsilon", "0.5", "--max-pairs", "1500")
        gdp = _run(f"{base}/gauss-small", "--pairs", pair, "--mu", "1", "--max-pairs", "5000", "--json")
    assert broken.exit_code == 1, broken.output
    r = json.loads(broken.stdout)
    assert r["rejected"] and r["log_wealth"] >= r["log_threshold"] and r["claim"] == "0.5-DP"
    assert 3 <= r["pairs_used"] <= r["pairs_drawn"] < 5000 and r["pairs_drawn"] % 50 == 0
    assert r["pairs_drawn"] - r["pairs_used"] < 50  # it stopped within the batch that rejected
    assert r["statement"].startswith("Refuted: the claim 0.5-DP is rejected after ")
    assert 'failures="1"' in (tmp_path / "r.xml").read_text()
    assert correct.exit_code == 0, correct.output
    assert correct.stdout.startswith("verdict: Not refuted: 1,500 pairs did not reject the claim 0.5-DP")
    assert "does not show that the claim holds" in correct.stdout
    assert gdp.exit_code == 1, gdp.output
    assert json.loads(gdp.stdout)["claim"] == "1-GDP"


def test_sequential_usage_errors_exit_2():
    with _server() as base:
        two = _run(f"{base}/laplace", "--pairs", json.dumps([[[0], [1]], [[1], [2]]]), "--epsilon", "1")
        no_claim = _run(f"{base}/laplace", "--pairs", json.dumps([[[0], [1]]]))
        vector = _run(f"{base}/vector", "--pairs", json.dumps([[[0], [1]]]), "--epsilon", "1",
                      "--output-kind", "vector", "--dim", "3")
        undeclared_vector = _run(f"{base}/vector", "--pairs", json.dumps([[[0], [1]]]), "--epsilon", "1")
    assert two.exit_code == 2 and "one pair" in two.output
    assert no_claim.exit_code == 2 and "--sequential tests a claim" in no_claim.output
    assert vector.exit_code == 2 and "one number per output" in vector.output
    assert undeclared_vector.exit_code == 2 and "sampling failed (wrong_type)" in undeclared_vector.output


def test_claim_lines():
    line, words = claim_line({"epsilon": 1.0, "delta": 1e-5})
    assert line == SupportingLine(np.e, 1e-5) and words == "(1, 1e-05)-DP"
    tangent, words = claim_line({"gdp_mu": 1.0})
    assert words == "1-GDP" and callable(tangent)
    assert tangent(0.3).slope == pytest.approx(gdp_supporting_line(1.0, 0.3).slope)
    assert tangent(0.3).intercept == pytest.approx(gdp_supporting_line(1.0, 0.3).intercept)
    zc, words = claim_line({"zcdp_rho": 0.5})
    assert words == "0.5-zCDP" and zc(0.3).slope > 0


def test_a_budget_that_runs_out_reads_pairs_in_order_and_counts_them():
    import asyncio

    rng = np.random.default_rng(0)
    calls = []

    async def sample(db, n):
        calls.append((db, n))
        return rng.laplace(float(np.sum(db)), 2.0, n)

    result = asyncio.run(sequential_pair_audit(None, [0], [1], {"epsilon": 0.5}, max_pairs=230, batch=100,  # type: ignore[arg-type]
                                               http_config=SafeHttpConfig(), sample=sample))
    assert [n for _, n in calls] == [100, 100, 100, 100, 30, 30]  # x then x', the last batch cut to the budget
    assert result.pairs_drawn == 230 and (result.rejected or result.pairs_used == 230)
    with pytest.raises(ValueError, match="max_pairs"):
        asyncio.run(sequential_pair_audit(None, [0], [1], {"epsilon": 0.5}, max_pairs=2,  # type: ignore[arg-type]
                                          http_config=SafeHttpConfig(), sample=sample))
