"""dpwatch audit with (ε, δ), μ-GDP and ρ-zCDP claims (the engine's held-out test, Claim.bound and Claim.refuted_by in app/stats/claims.py)."""

import math

import numpy as np
import pytest
from fastapi import FastAPI
from scipy import special
from typer.testing import CliRunner

from app.cli import app
from app.reference.gaussian import GaussianGDP, GaussianMissingConstant, GaussianZCDP
from app.reference.server import endpoint_router
from app.sampling.protocol import generate_secret
from app.stats.claims import Claim, bernoulli_renyi, parse_claim, rho_lower_bound
from app.stats.heldout import Counts
from app.stats.heldout import test_claim as held_out_test
from tests.support.sampling_server import serve_app

SECRET = generate_secret()


def test_adapters_follow_the_engine_protocol():
    for data in ({"gdp_mu": 1.0}, {"zcdp_rho": 0.5}, {"epsilon": 1.0, "delta": 1e-5}):
        claim = parse_claim(data)
        assert isinstance(claim, Claim)
    g = parse_claim({"gdp_mu": 1.0})
    assert g.bound(0.8, 0.2) == pytest.approx(special.ndtri(0.8) - special.ndtri(0.2))
    assert g.refuted_by(0.8, 0.2) and not g.refuted_by(0.6, 0.3)
    ed = parse_claim({"epsilon": 1.0, "delta": 0.01})
    # the complementary constraint: 1 − q ≤ e^ε (1 − p) + δ is violated at p = 0.9, q = 0.6 only
    assert ed.refuted_by(0.9, 0.6) and ed.bound(0.9, 0.6) == pytest.approx(math.log((1 - 0.01 - 0.6) / 0.1))
    assert ed.epsilon == 1.0 and ed.delta == 0.01
    res = held_out_test(g, Counts(840, 1000, 160, 1000), 0.05)
    assert res.refutes and res.lower_bound > 1.0 and res.claim == "1-GDP"


def test_renyi_bound_is_valid_for_the_gaussian_mechanism():
    # σ = 1, shift 1: exactly 0.5-zCDP. Every half-line event's Rényi ratio stays ≤ ρ.
    rho = 0.5
    for t in np.linspace(-3, 3, 13):
        p, q = special.ndtr(t + 1), special.ndtr(t)
        assert rho_lower_bound(float(p), float(q)) <= rho + 1e-9
    # D_α of Bernoullis against a direct evaluation
    p, q, a = 0.3, 0.1, 2.5
    direct = math.log(p**a * q ** (1 - a) + (1 - p) ** a * (1 - q) ** (1 - a)) / (a - 1)
    assert float(bernoulli_renyi(p, q, np.array([a]))[0]) == pytest.approx(direct)


def _server():
    api = FastAPI()
    routes = {"/gdp": (GaussianGDP(mu=1.0).sample, "real"),
              "/gdp-half": (GaussianGDP(mu=1.0, sigma_factor=0.5).sample, "real"),
              "/ed-bug": (GaussianMissingConstant(1.0, 1e-5).sample, "real"),
              "/zcdp-half": (GaussianZCDP(rho=0.5, sigma_factor=0.5).sample, "real")}
    api.include_router(endpoint_router(routes, secret=SECRET, seed=5))
    return serve_app(api)


def _run(url, *extra):
    return CliRunner().invoke(app, ["audit", url, "--secret", SECRET, "--allow-networks", "127.0.0.0/8",
                                    "--no-progress", "--pairs", '[{"x": [-1], "x_prime": [1]}]',
                                    "--output-kind", "real", *extra])


def test_audit_flags_refute_broken_gaussians_and_not_a_correct_one():
    with _server() as base:
        half = _run(f"{base}/gdp-half", "--mu", "1", "--budget", "64000")
        ok = _run(f"{base}/gdp", "--mu", "1", "--budget", "16000")
        ed = _run(f"{base}/ed-bug", "--epsilon", "1", "--delta", "1e-5", "--budget", "256000")
        rho = _run(f"{base}/zcdp-half", "--rho", "0.5", "--budget", "64000")
    assert half.exit_code == 1, half.output
    assert "REFUTED" in half.stdout and "lower confidence bound on μ" in half.stdout
    assert ok.exit_code == 0, ok.output
    assert "not refuted" in ok.stdout
    assert ed.exit_code == 1, ed.output
    assert rho.exit_code == 1, rho.output
    assert "lower confidence bound on ρ" in rho.stdout


@pytest.mark.parametrize("args,message", [
    (["--mu", "1", "--rho", "1"], "give one claim"),
    (["--epsilon", "1", "--mu", "1"], "give one claim"),
    (["--delta", "1e-5"], "--delta goes with --epsilon"),
    (["--mu", "0"], "gdp_mu must lie"),
])
def test_audit_claim_usage_errors(args, message):
    res = _run("http://127.0.0.1:9/x", *args)
    assert res.exit_code == 2 and message in res.output
