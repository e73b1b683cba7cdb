"""The adapters against the real libraries (OpenDP, diffprivlib), installed in this test
environment only: the claim each one reports, and its outputs served over the protocol."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dpwatch_sdk import Claim, Endpoint
from dpwatch_sdk.adapters import from_diffprivlib, from_function, from_opendp, opendp_claim

dp = pytest.importorskip("opendp.prelude")
dp.enable_features("contrib")


def request(database, n):
    return json.dumps({"database": database, "n": n, "request_id": "r-0", "monitor_id": "m", "period": 0}).encode()


def served(mechanism, database, n=200):
    status, headers, answer = Endpoint(mechanism, secret=None).handle(request(database, n), {})
    assert status == 200, answer
    return json.loads(answer)["samples"]


def bounded_sum(scale):
    space = dp.vector_domain(dp.atom_domain(bounds=(0.0, 10.0))), dp.symmetric_distance()
    return dp.t.make_sum(*space) >> dp.m.then_laplace(scale=scale)


def test_opendp_pure_dp_claim_is_the_privacy_map():
    meas = bounded_sum(10.0)
    mechanism = from_opendp(meas, d_in=1)
    assert mechanism.claim.epsilon == pytest.approx(meas.map(1)) and mechanism.claim.delta is None
    assert from_opendp(meas, d_in=2).claim.epsilon == pytest.approx(meas.map(2))
    samples = served(mechanism, [1.0, 2.0, 3.0])
    assert len(samples) == 200 and abs(np.median(samples) - 6.0) < 3


def test_opendp_zcdp_approximate_and_profile_claims():
    space = dp.vector_domain(dp.atom_domain(bounds=(0.0, 10.0))), dp.symmetric_distance()
    gaussian = dp.t.make_sum(*space) >> dp.m.then_gaussian(scale=10.0)
    assert from_opendp(gaussian).claim.zcdp_rho == pytest.approx(gaussian.map(1))
    profile = dp.c.make_zCDP_to_approxDP(gaussian)
    with pytest.raises(ValueError, match="delta="):
        opendp_claim(profile, 1)
    claim = opendp_claim(profile, 1, delta=1e-6)
    assert claim.delta == 1e-6 and claim.epsilon == pytest.approx(profile.map(1).epsilon(1e-6))
    fixed = dp.c.make_fix_delta(profile, 1e-6)
    eps, delta = fixed.map(1)
    claim = from_opendp(fixed).claim
    assert (claim.epsilon, claim.delta) == (pytest.approx(eps), pytest.approx(delta))


def test_opendp_integer_outputs_and_prepare():
    count = dp.t.make_count(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.symmetric_distance()) \
        >> dp.m.then_laplace(scale=1.0)
    mechanism = from_opendp(count, output="integer", prepare=lambda db: [float(v) for v in db["rows"]])
    samples = served(mechanism, {"rows": [1, 2, 3]})
    assert all(type(s) is int for s in samples) and mechanism.claim.epsilon == pytest.approx(1.0)


def test_diffprivlib_laplace_and_geometric():
    mechanisms = pytest.importorskip("diffprivlib.mechanisms")
    laplace = from_diffprivlib(mechanisms.Laplace(epsilon=0.5, sensitivity=1.0), sum)
    assert laplace.claim == Claim(epsilon=0.5) and laplace.output.kind == "real"
    samples = served(laplace, [1, 2, 3], n=2000)
    assert abs(np.median(samples) - 6.0) < 0.3
    gaussian = from_diffprivlib(mechanisms.GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0), len)
    assert gaussian.claim == Claim(epsilon=1.0, delta=1e-5)
    geometric = from_diffprivlib(mechanisms.Geometric(epsilon=1.0, sensitivity=1), len)
    assert geometric.output.kind == "integer"
    assert all(type(s) is int for s in served(geometric, [0, 0, 0]))
    binary = from_diffprivlib(mechanisms.Binary(epsilon=1.0, value0="no", value1="yes"), lambda db: db["answer"])
    assert binary.output.kind == "label" and set(served(binary, {"answer": "yes"})) <= {"yes", "no"}


def test_function_adapter_and_registration_body():
    mechanism = from_function(lambda db, n, rng: rng.normal(size=(n, 2)), output=("vector", 2), mu=0.5, name="pair")
    assert mechanism.claim.to_api() == {"gdp_mu": 0.5} and mechanism.claim.cli_args() == ["--mu", "0.5"]
    registration = mechanism.registration("https://dp.example.org/pair", secret="whsec_x")
    assert registration["output_kind"] == "vector" and registration["dim"] == 2
    assert registration["output_shape"] == {"container": "vector", "length": 2}
    with pytest.raises(ValueError, match="exactly one"):
        Claim(epsilon=1.0, gdp_mu=1.0)


def test_adapters_refuse_what_they_cannot_read():
    with pytest.raises(TypeError):
        from_opendp(lambda x: x)
    with pytest.raises(TypeError):
        from_diffprivlib(object())
