"""assert_dp in-process (dpwatch_sdk.testing): verdicts, reproducibility, power, coupled mode, and
its claim arithmetic checked against the service's accounting. The rates are measured by
bench/assert_dp_rates.py (docs/sdk.md)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from dpwatch_sdk.adapters import from_function
from dpwatch_sdk.protocol import Output
from dpwatch_sdk.testing import DPViolation, DpwatchError, assert_dp, check_dp
from dpwatch_sdk.testing._claims import ClaimModel, gdp_delta, zcdp_delta
from dpwatch_sdk.testing._coupled import _delta_witness, laplace_delta, laplace_renyi
from dpwatch_sdk.testing._events import Featurizer, Interval, OneOf

ROOT = Path(__file__).resolve().parents[2]
PAIR = [([0, 0, 0], [0, 0, 1])]
FAST = {"budget": 40_000}


def laplace(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def half_noise(database, n, rng):
    return float(sum(database)) + rng.laplace(0.0, 0.5, n)


def noisy_sum_unclamped(database, n, rng):
    """Claims records in [0, 1] (sensitivity 1) but forgets to clamp them."""
    return float(sum(database)) + rng.laplace(0.0, 1.0, n)


def mean_by_true_count(database, n, rng):
    """A noisy sum of records clamped to [0, 1], divided by the true count."""
    clamped = np.clip(np.asarray(database, dtype=float), 0.0, 1.0)
    return (clamped.sum() + rng.laplace(0.0, 1.0, n)) / len(database)


def gaussian(database, n, rng):
    return rng.normal(float(sum(database)), 1.0, n)


# ---------------------------------------------------------------------------- verdicts


def test_a_correct_laplace_passes_and_says_its_seed_power_and_coupled_check(capsys):
    result = assert_dp(laplace, epsilon=1.0, pairs=PAIR, seed=7)
    assert not result.violated and result.seed == 7
    printed = capsys.readouterr().out
    assert "passes 1-DP" in printed and "seed 7" in printed
    assert "power: this run would have failed, with probability ≥ 0.9, on a violation to ε ≥" in printed
    assert "coupled: " in printed and "measured sensitivity 1 (L1)" in printed
    assert "DPWATCH_SEED=7 python -m pytest 'tests/sdk/test_sdk_assert_dp.py::" in printed
    best = result.power.smallest
    assert best is not None and 1.0 < best.theta < 1.2
    assert result.outputs_per_database == 200_000


def test_half_noise_fails_in_coupled_mode_and_in_the_statistical_test():
    with pytest.raises(DPViolation) as caught:
        assert_dp(half_noise, epsilon=1.0, pairs=PAIR, seed=1)
    message = str(caught.value)
    assert "violates 1-DP with certainty (coupled mode" in message
    assert "measured sensitivity 1 (L1) against the 0.5 = ε·β" in message
    assert "privacy loss at this pair is 2" in message
    result = check_dp(half_noise, epsilon=1.0, pairs=PAIR, seed=1, coupled=False)
    assert result.violated and result.sequential is not None and result.sequential.rejected
    assert result.outputs_per_database < 20_000  # a clear violation fails in the first batches
    assert "fails 1-DP" in result.report and "event: E = {o : " in result.report and "p̂ = " in result.report


def test_the_same_seed_gives_the_same_verdict_and_evidence():
    first = check_dp(laplace, epsilon=1.0, pairs=PAIR, seed=42, coupled=False, **FAST)
    second = check_dp(laplace, epsilon=1.0, pairs=PAIR, seed=42, coupled=False, **FAST)
    other = check_dp(laplace, epsilon=1.0, pairs=PAIR, seed=43, coupled=False, **FAST)
    assert first.sequential.log_evalue == second.sequential.log_evalue
    assert first.sequential.log_evalue != other.sequential.log_evalue
    broken = [check_dp(half_noise, epsilon=1.0, pairs=PAIR, seed=5, coupled=False, **FAST) for _ in range(2)]
    assert broken[0].violated and broken[0].sequential.drawn == broken[1].sequential.drawn
    assert broken[0].report.split("reproduce")[0].replace(f"{broken[0].sequential.seconds:.1f} s", "") == \
        broken[1].report.split("reproduce")[0].replace(f"{broken[1].sequential.seconds:.1f} s", "")


def test_the_seed_comes_from_the_environment_and_the_budget_can_be_pinned(monkeypatch):
    monkeypatch.setenv("DPWATCH_SEED", "1234")
    monkeypatch.setenv("DPWATCH_BUDGET", "5000")
    result = check_dp(laplace, epsilon=1.0, pairs=PAIR, coupled=False, time_limit=0.001)
    assert result.seed == 1234 and result.outputs_per_database == 5000  # pinned: the time limit is off
    assert "DPWATCH_SEED=1234 DPWATCH_BUDGET=5000 python -m pytest" in result.reproduce


def test_a_slow_sampler_gets_a_smaller_budget_which_the_reproduction_pins():
    def slow(database, n, rng):
        time.sleep(n * 2e-5)  # 50,000 outputs per second
        return float(sum(database)) + rng.laplace(0.0, 1.0, n)

    result = check_dp(slow, epsilon=1.0, pairs=PAIR, coupled=False, time_limit=2.0, seed=3)
    assert result.outputs_per_database < 200_000
    assert any("the budget was cut from 200,000" in note for note in result.notes)
    assert f"DPWATCH_BUDGET={result.sequential.plan.total}" in result.reproduce
    assert result.seconds < 6


def test_a_sampler_with_randomness_of_its_own_is_said_so():
    def own(database, n, rng):
        return float(sum(database)) + np.random.default_rng().laplace(0.0, 1.0, n)

    result = check_dp(own, epsilon=1.0, pairs=PAIR, seed=3, **FAST)
    assert not result.violated
    assert any("its randomness is its own" in note for note in result.notes)
    assert "inconclusive: on x it drew no Laplace or Gaussian noise" in result.report


def test_usage_errors_are_clear():
    with pytest.raises(ValueError, match="give the claim"):
        check_dp(laplace, pairs=PAIR)
    with pytest.raises(ValueError, match="give pairs="):
        check_dp(laplace, epsilon=1.0)
    with pytest.raises(ValueError, match="alpha must lie in"):
        check_dp(laplace, epsilon=1.0, pairs=PAIR, alpha=0)
    with pytest.raises(ValueError, match="pair 0"):
        check_dp(laplace, epsilon=1.0, pairs=[[1, 2, 3]])

    def wrong_count(database, n, rng):
        return [0.0] * (n + 1)

    with pytest.raises(DpwatchError, match="did not return valid outputs"):
        check_dp(wrong_count, epsilon=1.0, pairs=PAIR, coupled=False, **FAST)


def test_the_claim_travels_with_an_adapters_mechanism():
    mechanism = from_function(half_noise, epsilon=1.0)
    with pytest.raises(DPViolation):
        assert_dp(mechanism, pairs=PAIR, seed=2)


# ---------------------------------------------------------------------------- output kinds


def randomized_response(epsilon):
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))

    def sample(database, n, rng):
        truth = "yes" if database[0] else "no"
        lie = "no" if database[0] else "yes"
        return np.where(rng.random(n) < keep, truth, lie).tolist()

    return sample


def discrete_laplace(epsilon):
    def sample(database, n, rng):
        p = -math.expm1(-epsilon)
        return int(sum(database)) + rng.geometric(p, n) - rng.geometric(p, n)

    return sample


HISTOGRAM_PAIR = [([0, 1, 2], [0, 1, 1])]  # a record moved from one count to another: L1 distance 2


def histogram(scale):
    def sample(database, n, rng):
        counts = np.bincount(np.asarray(database), minlength=3).astype(float)
        return counts[None, :] + rng.laplace(0.0, scale, (n, 3))

    return sample


@pytest.mark.parametrize("name, sampler, output, claim, pairs, violated", [
    ("labels, correct", randomized_response(1.0), "label", {"epsilon": 1.0}, [([1], [0])], False),
    ("labels, ε doubled", randomized_response(2.0), "label", {"epsilon": 1.0}, [([1], [0])], True),
    ("integers, correct", discrete_laplace(1.0), "integer", {"epsilon": 1.0}, PAIR, False),
    ("integers, ε doubled", discrete_laplace(2.0), "integer", {"epsilon": 1.0}, PAIR, True),
    ("vectors, correct (L1 2, scale 2)", histogram(2.0), ("vector", 3), {"epsilon": 1.0}, HISTOGRAM_PAIR, False),
    ("vectors, L1 sensitivity 2 given scale 1", histogram(1.0), ("vector", 3), {"epsilon": 1.0}, HISTOGRAM_PAIR, True),
    ("Gaussian, μ-GDP", gaussian, "real", {"mu": 1.0}, [([0], [1])], False),
    ("Gaussian, claimed μ too small", gaussian, "real", {"mu": 0.7}, [([0], [1])], True),
    ("Gaussian, ρ-zCDP", gaussian, "real", {"rho": 0.5}, [([0], [1])], False),
    ("Gaussian, (ε, δ) analytic", gaussian, "real", {"epsilon": 3.73, "delta": 1e-5}, [([0], [1])], False),
])
def test_output_kinds_and_claims_get_the_right_statistical_verdict(name, sampler, output, claim, pairs, violated):
    result = check_dp(sampler, output=output, pairs=pairs, seed=11, coupled=False, **claim)
    assert result.violated is violated, result.report


def keyed_counts(scale, *, keys_from_data=False):
    """Laplace counts per key of a list of group keys: over the public keys a and b, or (the
    mistake) over the keys present in the data."""

    def sample(database, n, rng):
        keys = sorted(set(database)) if keys_from_data else ["a", "b"]
        counts = {k: database.count(k) for k in keys}
        noise = rng.laplace(0.0, scale, (n, len(keys)))
        return [{k: counts[k] + float(noise[i, j]) for j, k in enumerate(keys)} for i in range(n)]

    return sample


KEYED_PAIR = [(["a", "a", "b", "z"], ["a", "a", "b"])]


@pytest.mark.parametrize("name, sampler, violated", [
    ("public keys, correct", keyed_counts(1.0), False),
    ("public keys, noise scale halved", keyed_counts(0.5), True),
    ("keys from the data", keyed_counts(1.0, keys_from_data=True), True),
])
def test_keyed_outputs_get_the_right_statistical_verdict(name, sampler, violated):
    """The library adapters release keyed outputs (a group-by with partition selection); assert_dp
    read them as lists and failed on the first batch ("could not convert string to float: 'a'")."""
    pairs = [(["a", "a", "b"], ["a", "a"])] if "halved" in name else KEYED_PAIR
    result = check_dp(sampler, output="keyed", pairs=pairs, seed=11, coupled=False, epsilon=1.0, budget=20_000)
    assert result.violated is violated, result.report
    if name == "keys from the data":
        assert "keys" in result.report


def test_coupled_mode_checks_vectors_with_their_l1_sensitivity():
    found = check_dp(histogram(1.0), output=("vector", 3), epsilon=1.0, pairs=[([0, 1, 2], [0, 1, 1])], seed=1,
                     budget=2_000)
    assert found.coupled.violation is not None and "measured sensitivity 2 (L1)" in found.report
    fine = check_dp(histogram(2.0), output=("vector", 3), epsilon=1.0, pairs=[([0, 1, 2], [0, 1, 1])], seed=1, **FAST)
    assert fine.coupled.findings[0].status == "consistent" and not fine.violated


# ---------------------------------------------------------------------------- coupled mode


CORPUS = [  # (name, sampler, claim, pairs): sensitivity bugs coupled mode must find on every seed
    ("half the noise", half_noise, {"epsilon": 1.0}, PAIR),
    ("forgotten clamp", noisy_sum_unclamped, {"epsilon": 1.0}, [([0, 0, 5], [0, 0])]),
    ("mean by the true count", mean_by_true_count, {"epsilon": 1.0}, [([1, 1, 1], [1, 1])]),
    ("Gaussian with σ for a smaller μ", gaussian, {"mu": 0.5}, [([0], [1])]),
    ("Gaussian under zCDP with ρ too small", gaussian, {"rho": 0.2}, [([0], [1])]),
]


@pytest.mark.parametrize("name, sampler, claim, pairs", CORPUS, ids=[c[0] for c in CORPUS])
def test_coupled_mode_finds_the_corpus_sensitivity_bugs_on_every_seed(name, sampler, claim, pairs):
    for seed in range(5):
        result = check_dp(sampler, pairs=pairs, seed=seed, budget=2_000, **claim)
        assert result.coupled is not None and result.coupled.violation is not None, result.report
        assert result.violated and result.sequential is None  # certain: no statistical test needed


def clamped_output(database, n, rng):
    """Correct: a noisy sum (records in [0, 1]) post-processed into [0, 3]."""
    clamped = np.clip(np.asarray(database, dtype=float), 0, 1)
    return np.clip(clamped.sum() + rng.laplace(0.0, 1.0, n), 0.0, 3.0)


def rounded(database, n, rng):
    """Correct: a noisy count, rounded (post-processing)."""
    return np.round(float(len(database)) + rng.laplace(0.0, 1.0, n))


def report_noisy_max(database, n, rng):
    """Correct: report noisy max of three counts with Laplace(2/ε) (ε = 1)."""
    counts = np.bincount(np.asarray(database), minlength=3).astype(float)
    return np.argmax(counts[None, :] + rng.laplace(0.0, 2.0, (n, 3)), axis=1).astype(float)


def sparse_vector(database, n, rng):
    """Correct (data-dependent control flow): an above-threshold test on one query, ε = 1."""
    threshold = 2.0 + rng.laplace(0.0, 2.0)
    answer = float(sum(database)) + rng.laplace(0.0, 4.0, n)
    return (answer >= threshold).astype(float)


def noisy_sum_and_scaled(database, n, rng):
    """Correct: twice (half the sum plus Laplace(0.5)) is the sum plus Laplace(1)."""
    return 2.0 * (float(sum(database)) / 2.0 + rng.laplace(0.0, 0.5, n))


CORRECT = [
    ("Laplace", laplace, "real", {"epsilon": 1.0}, PAIR),
    ("Laplace at exactly its sensitivity, floats", lambda d, n, r: 0.1 * sum(d) + r.laplace(0, 0.1, n), "real",
     {"epsilon": 1.0}, [([0.1, 0.2], [0.3])]),
    ("Gaussian GDP", gaussian, "real", {"mu": 1.0}, [([0], [1])]),
    ("clamped output", clamped_output, "real", {"epsilon": 1.0}, [([0, 0, 1], [0, 0])]),
    ("rounded output", rounded, "real", {"epsilon": 1.0}, [([0, 0, 1], [0, 0])]),
    ("report noisy max", report_noisy_max, "integer", {"epsilon": 1.0}, [([0, 1, 2], [0, 1, 1])]),
    ("sparse vector", sparse_vector, "real", {"epsilon": 1.0}, [([0, 0, 1], [0, 0])]),
    ("noise scaled after drawing", noisy_sum_and_scaled, "real", {"epsilon": 1.0}, PAIR),
    ("discrete Laplace", discrete_laplace(1.0), "integer", {"epsilon": 1.0}, PAIR),
]


@pytest.mark.parametrize("name, sampler, output, claim, pairs", CORRECT, ids=[c[0] for c in CORRECT])
def test_coupled_mode_never_fails_a_correct_mechanism(name, sampler, output, claim, pairs):
    for seed in range(5):
        result = check_dp(sampler, output=output, pairs=pairs, seed=seed, budget=2_000, **claim)
        assert result.coupled is not None and result.coupled.violation is None, result.report


def test_coupled_mode_says_why_it_is_inconclusive_and_reports_data_dependent_control_flow():
    rounded_result = check_dp(rounded, epsilon=1.0, pairs=[([0, 0, 1], [0, 0])], seed=1, budget=2_000)
    assert "not the answer plus a multiple of the noise" in rounded_result.coupled.findings[0].summary
    svt = check_dp(sparse_vector, epsilon=1.0, pairs=[([0, 0, 1], [0, 0])], seed=1, budget=2_000)
    assert svt.coupled.findings[0].status == "inconclusive"

    def branches(database, n, rng):  # draws noise only when the sum is positive
        if sum(database) > 0:
            return float(sum(database)) + rng.laplace(0.0, 1.0, n)
        return np.zeros(n) + rng.laplace(0.0, 1.0, n) + rng.laplace(0.0, 1.0, n)

    flow = check_dp(branches, epsilon=1.0, pairs=[([1], [0])], seed=1, budget=2_000)
    assert flow.coupled.findings[0].control_flow is not None
    assert "the random draws differ between x and x′" in flow.report


# ---------------------------------------------------------------------------- arithmetic


def test_gdp_and_zcdp_conversions_agree_with_dp_accounting():
    from app.stats import accounting

    for mu in (0.5, 1.0, 2.0):
        for eps in (0.0, 0.5, 1.0, 3.0):
            assert float(gdp_delta(mu, eps)) == pytest.approx(accounting.gdp_delta(mu, eps), rel=1e-6, abs=1e-12)
    for rho in (0.1, 0.5, 2.0):
        for eps in (0.5, 1.0, 3.0, 6.0):
            ours, theirs = float(zcdp_delta(rho, eps)), accounting.zcdp_delta(rho, eps)
            assert ours >= theirs * (1 - 1e-6) - 1e-15 or ours == pytest.approx(theirs, rel=0.05)
            assert ours == pytest.approx(theirs, rel=0.25, abs=1e-12)


def test_claim_lines_contain_the_claim_and_are_tight_somewhere():
    models = (ClaimModel("gdp", 1.0), ClaimModel("zcdp", 0.5), ClaimModel("pure", 1.0), ClaimModel("approx", 1.0, 1e-3))
    for model in models:
        q = np.linspace(1e-4, 0.99, 200)
        h = model.upper(q)
        s, c = model.line_at(q)
        assert np.all(s * q + c >= np.minimum(h, s * q + c) - 1e-12)
        if model.kind == "gdp":  # every line lies above the exact GDP boundary
            slopes, intercepts = model.lines()
            assert np.all(slopes[:, None] * q[None, :] + intercepts[:, None] >= h[None, :] - 1e-9)


def test_laplace_privacy_profile_and_renyi_divergence_match_numeric_integration():
    from scipy import integrate, stats

    for shift in (0.5, 1.0, 2.0):
        for eps in (0.0, 0.3, 0.9):
            exact = laplace_delta(eps, shift)
            numeric = _delta_witness("laplace", 0.0, 1.0, shift, 1.0, eps)
            assert numeric == pytest.approx(exact, abs=2e-4)
        for alpha in (1.5, 3.0, 10.0):
            def integrand(t: float, alpha: float = alpha, shift: float = shift) -> float:
                return stats.laplace.pdf(t, 0, 1) ** alpha * stats.laplace.pdf(t, shift, 1) ** (1 - alpha)

            value = sum(integrate.quad(integrand, a, b)[0] for a, b in ((-60, 0), (0, shift), (shift, 60)))
            exact = float(laplace_renyi(np.array([alpha]), shift)[0])
            assert exact == pytest.approx(math.log(value) / (alpha - 1), rel=1e-6)


def test_events_render_as_mathematics():
    fz = Featurizer(Output("integer"))
    batch = fz.extract(np.array([1, 2, 2, 5]), 4)
    assert Interval("o", -math.inf, 0.52).describe(fz) == "o ≤ 0.52"
    assert Interval("o", 1.2, math.inf).describe(fz) == "o ≥ 1.2"
    assert Interval("o", -1.5, 2.0, inside=False).describe(fz) == "o < −1.5 or o > 2"
    codes = tuple(sorted(int(c) for c in np.unique(batch.categorical["o"][:3])))
    assert OneOf("o", codes).describe(fz) == "o ∈ {1, 2}"
    vec = Featurizer(Output("vector", 3))
    assert "max(o) ≥ 2" == Interval("max", 2.0, math.inf).describe(vec)


# ---------------------------------------------------------------------------- packaging


def test_the_testing_package_imports_no_part_of_the_service():
    code = textwrap.dedent("""
        import sys
        import dpwatch_sdk.testing
        from dpwatch_sdk.testing import check_dp
        assert not [m for m in sys.modules if m == "app" or m.startswith("app.")], "imported app"
        assert "sqlalchemy" not in sys.modules and "fastapi" not in sys.modules
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "sdk",
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ""}, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_pytest_plugin_pins_the_seed_and_prints_the_reproduction(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        from dpwatch_sdk.testing import assert_dp

        def half(database, n, rng):
            return float(sum(database)) + rng.laplace(0.0, 0.5, n)

        def test_half():
            assert_dp(half, epsilon=1.0, pairs=[([0], [1])], coupled=False, budget=4000)
    """))
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # the server's venv has many pytest plugins
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "dpwatch_sdk.pytest_plugin", "-p", "no:cacheprovider",
                           "--dpwatch-seed", "99", "test_user.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 1, done.stdout
    assert "dpwatch: every assert_dp without a seed uses seed 99" in done.stdout
    assert "DPWATCH_SEED=99 python -m pytest 'test_user.py::test_half'" in done.stdout
