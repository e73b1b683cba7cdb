"""dpwatch audit against endpoints served on loopback (corpus mechanisms, every shape)."""

import json

import numpy as np
from fastapi import FastAPI
from typer.testing import CliRunner

from app.cli import app
from app.reference.corpus import corpus
from app.reference.server import endpoint_router
from app.sampling.protocol import generate_secret
from tests.support.sampling_server import serve_app

SECRET = generate_secret()
C = corpus()


def _server():
    api = FastAPI()
    routes = {f"/{slug}": (C[slug].sample, C[slug].shape)
              for slug in ("laplace", "noisy-hist-wrong-scale", "svt5-list", "rnm-laplace")}
    # an index sent as 3.0: float-valued integers
    routes["/floaty-index"] = (lambda db, n, rng: C["rnm-laplace"].sample(db, n, rng).astype(float), "real")
    api.include_router(endpoint_router(routes, secret=SECRET, seed=3))
    return serve_app(api)


def _run(url, *extra, progress=False):
    return CliRunner().invoke(app, ["audit", url, "--secret", SECRET, "--allow-networks", "127.0.0.0/8",
                                    "--progress" if progress else "--no-progress", *extra])


def test_audit_refutes_broken_claims_and_not_correct_ones():
    with _server() as base:
        hist = _run(f"{base}/noisy-hist-wrong-scale", "--pairs", json.dumps([[[1] * 5, [2] + [1] * 4]]),
                    "--epsilon", "0.1", "--budget", "8000", "--json", progress=True)
        svt = _run(f"{base}/svt5-list", "--pairs", json.dumps([[[2] + [1] * 9, [1] * 10]]), "--epsilon", "0.5",
                   "--budget", "8000", "--shape", '{"container": "list", "values": "integer"}')
        lap = _run(f"{base}/laplace", "--pairs", '[{"x": [0], "x_prime": [1]}]', "--epsilon", "0.1",
                   "--budget", "16000", "--region", "-40,40")
        floaty = _run(f"{base}/floaty-index", "--pairs", '[[[2, 1, 1, 1, 1], [1, 1, 1, 1, 1]]]', "--epsilon", "0.1",
                      "--budget", "8000", "--output-kind", "discrete")
    assert hist.exit_code == 1, hist.output
    result = json.loads(hist.stdout)
    assert result["refuted"] and result["lower_bound"] > 0.1 and result["samples_used"] > 0
    assert result["seconds"] > 0 and result["best"]["held_out"]["refutes"]
    assert "detected output shape: vector of 5 × real" in hist.stderr
    assert "round 1/" in hist.stderr and "outputs" in hist.stderr  # the progress bar
    assert svt.exit_code == 1, svt.output
    assert "REFUTED" in svt.stdout and "samples used" in svt.stdout
    assert svt.stdout.startswith("verdict: Refuted: ε ≥ ")  # one verdict, first
    assert lap.exit_code == 0, lap.output
    assert "not refuted" in lap.stdout and "LB = " in lap.stdout and "ε̂ = " in lap.stdout
    assert lap.stdout.startswith("verdict: Not refuted: no test refutes 0.1-DP at its level")
    assert "nothing is refuted" not in lap.stdout and "held-out test is the weaker" not in lap.stdout
    assert floaty.exit_code == 0, floaty.output  # 3.0 read as the integer 3, a correct mechanism


def test_audit_usage_errors_exit_2(tmp_path):
    url = "http://127.0.0.1:9/x"
    assert _run(url).exit_code == 2  # no pairs
    res = _run(url, "--pairs", '[{"x": 1}]')
    assert res.exit_code == 2 and "pair 0" in res.output
    res = _run(url, "--pairs", str(tmp_path / "missing.json"))
    assert res.exit_code == 2 and "cannot read pairs" in res.output
    assert _run(url, "--pairs", "[[0, 1]]", "--region", "5").exit_code == 2
    assert _run(url, "--pairs", "[[0, 1]]", "--shape", "{}", "--output-kind", "real").exit_code == 2
    assert _run(url, "--pairs", "[[0, 1]]", "--budget", "10").exit_code == 2


def test_readme_pairs_file_form_still_reads(tmp_path):
    from app.audit.service import read_pairs

    f = tmp_path / "pairs.json"
    f.write_text(json.dumps([{"x": [0], "x_prime": [1]}]))
    assert read_pairs(f) == [([0], [1])]
    assert len(read_pairs('{"pattern": "table1", "queries": 4}')) == 8
    assert np.asarray(read_pairs("[[[1, 2], [2, 2]]]")[0][1]).tolist() == [2, 2]
