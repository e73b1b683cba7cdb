"""dpwatch audit against reference endpoints served on loopback."""

import json

from fastapi import FastAPI
from typer.testing import CliRunner

from app.cli import app
from app.reference.mechanisms import Laplace, RNMReportValue
from app.sampling.endpoint import make_endpoint_router
from app.sampling.protocol import generate_secret
from tests.sampling_server import serve_app

SECRET = generate_secret()


def _server():
    api = FastAPI()
    api.include_router(make_endpoint_router({"/laplace": (Laplace(epsilon=1.0).sample, "real"),
                                             "/rnm-value": (RNMReportValue(epsilon=1.0).sample, "real")},
                                            secret=SECRET, seed=3))
    return serve_app(api)


def _run(base, path, pairs_file, *extra):
    return CliRunner().invoke(app, ["audit", f"{base}{path}", "--pairs", str(pairs_file), "--secret", SECRET,
                                    "--allow-networks", "127.0.0.0/8", "-n", "5000", "-N", "20000", *extra])


def test_audit_refutes_a_broken_claim_and_not_a_correct_one(tmp_path):
    table1 = tmp_path / "t1.json"
    table1.write_text(json.dumps({"pattern": "table1", "queries": 5}))
    laplace_pairs = tmp_path / "laplace.json"
    laplace_pairs.write_text(json.dumps([{"x": [0], "x_prime": [1]}]))
    with _server() as base:
        broken = _run(base, "/rnm-value", table1, "--epsilon", "1", "--json")
        correct = _run(base, "/laplace", laplace_pairs, "--epsilon", "1")
    assert broken.exit_code == 1, broken.output
    result = json.loads(broken.stdout)
    assert result["refutes_claim"] is True and result["lower_bound"] > 1 and len(result["pairs"]) == 8
    assert correct.exit_code == 0, correct.output
    assert "not refuted" in correct.stdout and "step 3/3" in correct.output


def test_audit_explains_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"x": 1}]')
    res = CliRunner().invoke(app, ["audit", "http://127.0.0.1:9/x", "--pairs", str(bad)])
    assert res.exit_code == 2 and "pair 0" in res.output
    res = CliRunner().invoke(app, ["audit", "http://127.0.0.1:9/x", "--pairs", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and "cannot read pairs" in res.output
