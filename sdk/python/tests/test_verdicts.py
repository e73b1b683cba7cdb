"""Done means: an OpenDP pipeline and a diffprivlib mechanism, each served by three lines of user
code inside the user's own web app, audited by dpwatch (the CLI of a real installation), get the
right verdict, correctly configured and misconfigured."""

from __future__ import annotations

import pytest
from dpwatch_sdk import generate_secret
from dpwatch_sdk.serve_asgi import serve_asgi

dp = pytest.importorskip("opendp.prelude")
dp.enable_features("contrib")
mechanisms = pytest.importorskip("diffprivlib.mechanisms")

SECRET = generate_secret()
BUDGET = 8_000  # outputs per database: the pilot and two rounds

# The user's three lines, verbatim (docs/sdk.md shows the same).
OPENDP_USER_CODE = """
from dpwatch_sdk.adapters import from_opendp
mechanism = from_opendp(pipeline, d_in=D_IN)
app.mount("/dp", mechanism.asgi(secret=SECRET))
"""
DIFFPRIVLIB_USER_CODE = """
from dpwatch_sdk.adapters import from_diffprivlib
mechanism = from_diffprivlib(Laplace(epsilon=1.0, sensitivity=1.0), query=sum)
flask_app.wsgi_app = mechanism.endpoint(secret=SECRET).wsgi_middleware(flask_app.wsgi_app, "/dp")
"""


def bounded_sum_pipeline():
    """A sum of records in [0, 1] with Laplace noise of scale 1. Its privacy map gives ε = d_in, the
    number of records one person may add or remove (the symmetric distance)."""
    space = dp.vector_domain(dp.atom_domain(bounds=(0.0, 1.0))), dp.symmetric_distance()
    return dp.t.make_sum(*space) >> dp.m.then_laplace(scale=1.0)


# In the deployment each person contributes up to two records: neighbours differ by a person's two
# records (d_in = 2). The claim read at d_in = 1 is the classic misconfiguration.
ONE_PERSON_REMOVED = [([1.0, 1.0, 0.0], [0.0])]


@pytest.mark.parametrize("d_in, refuted", [(2, False), (1, True)], ids=["correct d_in=2", "misconfigured d_in=1"])
def test_opendp_pipeline_in_fastapi(auditor, d_in, refuted):
    from fastapi import FastAPI

    app = FastAPI()
    user = {"app": app, "pipeline": bounded_sum_pipeline(), "SECRET": SECRET, "D_IN": d_in}
    exec(OPENDP_USER_CODE, user)
    claim = user["mechanism"].claim
    assert claim.epsilon == pytest.approx(float(d_in), rel=1e-6)
    with serve_asgi(app) as base_url:
        result = auditor.run_url(base_url + "/dp/", secret=SECRET, claim=claim, pairs=ONE_PERSON_REMOVED,
                                 output=user["mechanism"].output, budget=BUDGET)
    assert result.violated is refuted, result.report
    assert ("REFUTED" in result.report) is refuted


@pytest.mark.parametrize("records, refuted", [((0, 1), False), ((0, 2), True)],
                         ids=["correct records in [0,1]", "misconfigured in [0,2]"])
def test_diffprivlib_mechanism_in_flask(auditor, records, refuted):
    from dpwatch_sdk.endpoint import RunningServer
    from flask import Flask

    flask_app = Flask("users_service")
    user = {"flask_app": flask_app, "Laplace": mechanisms.Laplace, "SECRET": SECRET}
    exec(DIFFPRIVLIB_USER_CODE, user)
    low, high = records
    # sensitivity=1.0 is right for records in [0, 1] and wrong for records in [0, 2] (true ε = 2).
    pairs = [([low] * 4, [low] * 3 + [high])]
    with RunningServer(flask_app, "127.0.0.1", 0) as server:  # the standard library's server runs Flask here
        result = auditor.run_url(server.url + "dp", secret=SECRET, claim=user["mechanism"].claim, pairs=pairs,
                                 output=user["mechanism"].output, budget=BUDGET)
    assert result.violated is refuted, result.report


@pytest.mark.parametrize("d_in, refuted", [(2, False), (1, True)], ids=["correct d_in=2", "misconfigured d_in=1"])
def test_opendp_pipeline_in_process(d_in, refuted):
    """assert_dp with no server: the same right verdicts (OpenDP draws one output per call, about
    2,500 a second here, hence a small budget)."""
    from dpwatch_sdk.adapters import from_opendp
    from dpwatch_sdk.testing import check_dp

    result = check_dp(from_opendp(bounded_sum_pipeline(), d_in=d_in), pairs=ONE_PERSON_REMOVED, budget=20_000,
                      seed=1)
    assert result.violated is refuted, result.report
    assert "inconclusive" in result.report  # OpenDP's randomness is its own: coupled mode cannot read it


@pytest.mark.parametrize("records, refuted", [((0, 1), False), ((0, 2), True)],
                         ids=["correct records in [0,1]", "misconfigured in [0,2]"])
def test_diffprivlib_mechanism_in_process(records, refuted):
    from dpwatch_sdk.adapters import from_diffprivlib
    from dpwatch_sdk.testing import check_dp

    low, high = records
    mechanism = from_diffprivlib(mechanisms.Laplace(epsilon=1.0, sensitivity=1.0), query=sum)
    result = check_dp(mechanism, pairs=[([low] * 4, [low] * 3 + [high])], budget=20_000, seed=1)
    assert result.violated is refuted, result.report
