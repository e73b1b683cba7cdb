"""The testers' corpus: shapes, ground truth, and serving it over the protocol."""

import asyncio
import math

import numpy as np
import pytest
from fastapi import FastAPI

from app.reference.corpus import corpus, corpus_mechanism, exact_epsilon_finite
from app.reference.server import endpoint_router, reference_routes
from app.sampling.client import MechanismEndpoint, SamplingClient
from app.sampling.protocol import generate_secret
from app.sampling.safe_http import SafeHttpConfig
from app.stats.shapes import ListSamples, conformance, detect_shape, n_outputs

C = corpus()


def test_every_mechanism_fits_its_shape_on_every_pair():
    rng = np.random.default_rng(0)
    for slug, m in C.items():
        for x, xp in m.pairs[:3]:
            for db in (x, xp):
                out = m.sample(db, 300, rng)
                assert n_outputs(out) == 300, slug
                assert conformance(m.shape, out) is None, slug
        assert m.true_epsilon >= m.epsilon or math.isclose(m.true_epsilon, m.epsilon), slug


def test_the_corpus_covers_every_shape_and_family():
    shapes = {(m.shape.container, m.shape.values, m.shape.lattice is not None, m.shape.nullable) for m in C.values()}
    assert ("vector", "integer", False, True) in shapes  # SVT ⊤/⊥ with null once aborted
    assert ("list", "integer", False, False) in shapes  # SVT stopping at the cutoff
    assert ("vector", "real", False, True) in shapes  # SVT 3's noisy values, null for ⊥
    assert ("list", "real", False, True) in shapes
    assert ("vector", "real", False, False) in shapes  # noisy histograms
    assert ("scalar", "real", True, False) in shapes  # a lattice
    assert ("scalar", "label", False, False) in shapes
    assert {m.family for m in C.values()} == {"svt", "rnm", "hist", "geometric", "laplace"}
    for alg in (1, 2, 3, 4, 5, 6):
        assert any(slug.startswith(f"svt{alg}") for slug in C)


def test_ground_truth():
    eps = 0.1
    assert C["svt4-vector"].true_epsilon == pytest.approx(1.75 * eps)
    assert C["rnm-laplace-value"].true_epsilon == pytest.approx(5 * eps / 2)
    assert C["noisy-hist-wrong-scale"].true_epsilon == pytest.approx(1 / eps)
    assert C["truncated-geometric"].true_epsilon == pytest.approx(eps)  # clamping is post-processing
    assert C["truncated-geometric-resampled"].true_epsilon > eps  # conditioning is not
    for slug in ("svt5-vector", "rnm-exponential-value", "laplace-lattice-noise", "laplace-coarse-uniform"):
        assert math.isinf(C[slug].true_epsilon)
    assert exact_epsilon_finite({0: np.array([0.5, 0.5]), 1: np.array([1.0, 0.0])}, [(0, 1)]) == math.inf
    # SVT 6 with k = 10: bounded by kε/2, not exact; verdicts between the pairs' loss and the bound are open
    svt6 = C["svt6-vector"]
    assert not svt6.exact and svt6.true_epsilon == pytest.approx(0.5)
    assert C["svt4-list"].pair_epsilon() == pytest.approx(0.1725, abs=2e-3)  # DP-Sniper found 0.1687
    assert C["svt4-list"].expected_verdict(0.1) == "refute"
    assert C["svt4-list"].expected_verdict(0.175) == "hold"
    assert C["rnm-laplace"].expected_verdict(0.097) == "either"  # the pairs show 0.0946 < 0.097 < ε
    # the empirical frequencies of the resampled geometric agree with its exact pmf's loss
    m = C["truncated-geometric-resampled"]
    rng = np.random.default_rng(1)
    f0 = np.bincount(m.sample([0], 200_000, rng), minlength=6) / 200_000
    f1 = np.bincount(m.sample([1], 200_000, rng), minlength=6) / 200_000
    assert np.max(np.abs(np.log(f0 / f1))) == pytest.approx(m.true_epsilon, abs=0.04)


def test_svt3_answers_once_with_a_value_and_null_elsewhere():
    rng = np.random.default_rng(2)
    out = C["svt3-values"].sample([1] * 10, 2000, rng)
    assert (np.sum(~np.isnan(out), axis=1) <= 1).all()
    lists = C["svt3-list"].sample([1] * 10, 2000, rng)
    assert isinstance(lists, ListSamples)
    ends = lists.lengths
    answered = ends < 10
    assert np.all(~np.isnan(lists.values[answered, ends[answered] - 1]))  # the last entry is the value


def test_detection_recovers_the_declared_shapes():
    rng = np.random.default_rng(3)
    for slug in ("laplace-rounded", "noisy-hist", "svt3-values", "rnm-laplace", "svt1-list"):
        m = C[slug]
        det = detect_shape(m.sample(m.pairs[0][0], 2000, rng)).shape
        assert det.container == m.shape.container and det.values == m.shape.values, slug
        assert (det.lattice is None) == (m.shape.lattice is None), slug


def test_unknown_slug_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown corpus mechanism"):
        corpus_mechanism("nope")


def test_serve_reference_carries_the_corpus_in_its_shapes():
    from tests.support.sampling_server import serve_app

    routes = reference_routes()
    assert {f"/corpus/{slug}" for slug in C} <= set(routes)
    secret = generate_secret()
    api = FastAPI()
    picked = ("svt1-list", "svt3-values", "laplace-rounded", "rnm-laplace-label")
    api.include_router(endpoint_router({f"/{s}": routes[f"/corpus/{s}"] for s in picked}, secret=secret,
                                            seed=4), prefix="/reference")

    async def fetch(base):
        out = {}
        async with SamplingClient(http_config=SafeHttpConfig(allow_networks=("127.0.0.0/8",))) as client:
            for slug in picked:
                m = C[slug]
                endpoint = MechanismEndpoint(sampling_url=f"{base}/reference/{slug}", secret=secret, shape=m.shape,
                                             max_batch=150, prefer_binary=m.shape.binary_capable)
                out[slug] = await client.sample(endpoint, m.pairs[0][0], 400, monitor_id="t", period=0)
        return out

    with serve_app(api) as base:
        got = asyncio.run(fetch(base))
    for slug, out in got.items():
        assert n_outputs(out) == 400 and conformance(C[slug].shape, out) is None, slug
