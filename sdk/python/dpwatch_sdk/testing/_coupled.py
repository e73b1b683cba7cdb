"""Coupled mode: x and x′ run on the same random stream, and on a replay with the noise set to zero.

When dpwatch controls the randomness (a sampler ``f(database, n, rng)`` draws from the generator it
is given), the tester runs ``f`` on x and on x′ with identically seeded generators that record the
Laplace and Gaussian noise drawn through them (``laplace``, ``normal``, ``standard_normal``), and
once more on each with that noise replayed as zero. The idea is Re:cord-play's (Cebere, Erb,
Desfontaines, Bellet & Fitzsimons, *Privacy in Theory, Bugs in Practice: Grey-Box Auditing of
Differential Privacy Libraries*, PoPETs 2026): run neighbours on identical randomness and compare
the measured sensitivity (how far the un-noised answers move) with the one the noise was
calibrated for.

**What it asserts, and when.** On each database it looks for one structure: every output number is
a fixed answer plus a fixed multiple of one noise value drawn, i.e. ``o = a + c·w``, where ``w`` is
the noise drawn for that output (one value per output number, one family, one scale ``b``), ``a``
is what the replay with zero noise returns (the same for every output and seed) and ``c`` is one
coefficient. This is the additive-noise mechanism (the Laplace mechanism, Dwork, McSherry, Nissim &
Smith 2006; the Gaussian mechanism, Dwork & Roth 2014, App. A), with effective noise scale
β = |c|·b. When both databases show it on every draw and replay, the two output distributions are
known exactly, and the claim is checked on them without sampling error:

- Laplace noise of equal scales: the privacy loss at the pair is Σ|a − a′|/β (pure ε), its
  (ε, δ) profile is 1 − exp((ε − s)/2) for a scalar shift s, and its Rényi divergence of order α is
  ``log[α/(2α−1)·e^{(α−1)s} + (α−1)/(2α−1)·e^{−αs}]/(α − 1)`` per coordinate (Mironov, *Rényi
  Differential Privacy*, CSF 2017, Table II), for zCDP;
- Gaussian noise of equal scales: μ = ‖a − a′‖₂/β exactly (μ-GDP, Dong, Roth & Su 2022, Thm. 2.7),
  ρ = μ²/2 (zCDP, Bun & Steinke 2016, Prop. 1.6), δ_μ(ε) for (ε, δ);
- different scales on x and x′ (the noise's effect depends on the data, e.g. a noisy sum divided
  by the true count): the privacy loss is unbounded, which no ε-DP, μ-GDP or ρ-zCDP claim allows
  (μ-GDP implies (μ²/2)-zCDP, Rényi divergences being monotone under post-processing); for
  (ε, δ) an event of the pair witnesses δ(ε).

It **fails** only when that computation violates the claim: then the claim is false for the
mechanism the replays describe, with certainty. Everything else is **inconclusive** and says why
(no noise drawn from dpwatch's generator, several noise values per output, outputs rounded or
clamped, other randomness in the answer, labels or lists): the statistical test stands alone then.
It **reports** (never fails on) draws that differ between x and x′: data-dependent control flow,
which correct mechanisms such as the sparse vector technique also have.

The one premise is that the structure seen on every draw and replay holds for every draw; a
mechanism built to look additive on these draws and not elsewhere could defeat it, but no
correct mechanism is failed by chance: nothing here is random once the seed is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from ..protocol import Output, OutputError
from ._claims import ClaimModel, gdp_delta, zcdp_delta
from ._events import Featurizer

__all__ = ["CoupledFinding", "CoupledReport", "RecordingGenerator", "coupled_check"]

Family = Literal["laplace", "gaussian"]

#: Outputs per run and seeds per database.
COUPLED_OUTPUTS = 128
COUPLED_SEEDS = 4
#: Relative tolerance of "the same number" (float round-off of sums and divisions).
REL_TOL = 1e-9

_OTHER_METHODS = (
    "random", "integers", "choice", "permutation", "shuffle", "permuted", "uniform", "exponential",
    "standard_exponential", "geometric", "poisson", "binomial", "gumbel", "logistic", "gamma", "standard_gamma",
    "beta", "bytes", "multinomial", "multivariate_normal", "lognormal", "standard_cauchy", "standard_t",
    "triangular", "vonmises", "wald", "weibull", "zipf", "rayleigh", "pareto", "power", "chisquare", "f",
    "hypergeometric", "logseries", "negative_binomial", "noncentral_chisquare", "noncentral_f", "dirichlet",
    "multivariate_hypergeometric",
)


def _signature(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", value.shape, str(value.dtype))
    if isinstance(value, (list, tuple)):
        return ("seq", len(value))
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    return type(value).__name__


class RecordingGenerator(np.random.Generator):
    """A NumPy ``Generator`` (so that ``isinstance`` checks and libraries that take one still work)
    that records every call, and the Laplace and Gaussian noise drawn, and can replay that noise
    multiplied by ``kappa`` (0: no noise). The bit stream is consumed exactly as without the
    recording, so a replay with the same seed draws the same values."""

    def __init__(self, seed: np.random.SeedSequence, kappa: float = 1.0) -> None:
        super().__init__(np.random.PCG64(seed))
        self.kappa = kappa
        self.calls: list[tuple[Any, ...]] = []
        self.noise: list[NDArray[np.float64]] = []
        self.scales: list[NDArray[np.float64]] = []
        self.families: list[Family] = []

    def _noise(self, family: Family, loc: Any, scale: Any, drawn: Any) -> Any:
        values = np.asarray(drawn, dtype=np.float64)
        loc_arr = np.broadcast_to(np.asarray(loc, dtype=np.float64), values.shape)
        scale_arr = np.broadcast_to(np.asarray(scale, dtype=np.float64), values.shape)
        w = values - loc_arr
        distinct = np.unique(scale_arr)
        self.calls.append(("noise", family, values.shape, tuple(distinct.tolist()[:4])))
        self.noise.append(w.reshape(-1))
        self.scales.append(scale_arr.reshape(-1).copy())
        self.families.append(family)
        if self.kappa == 1.0:
            return drawn
        replayed = loc_arr + self.kappa * w
        return float(replayed) if np.ndim(drawn) == 0 else replayed

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        return self._noise("laplace", loc, scale, super().laplace(loc, scale, size))

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        return self._noise("gaussian", loc, scale, super().normal(loc, scale, size))

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        return self._noise("gaussian", 0.0, 1.0, super().standard_normal(size, dtype, out))


def _recording(name: str) -> Callable[..., Any]:
    base = getattr(np.random.Generator, name)

    def method(self: RecordingGenerator, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((name, tuple(_signature(a) for a in args),
                           tuple(sorted((k, _signature(v)) for k, v in kwargs.items()))))
        return base(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in _OTHER_METHODS:
    if hasattr(np.random.Generator, _name):
        setattr(RecordingGenerator, _name, _recording(_name))


@dataclass(frozen=True)
class Structure:
    """One database's outputs as ``a + c·w`` with noise w of ``family`` and scale ``b``."""

    family: Family
    b: float
    c: float
    a: NDArray[np.float64]  # the answer, one entry per output number (d of them)

    @property
    def beta(self) -> float:
        return abs(self.c) * self.b


@dataclass(frozen=True)
class CoupledFinding:
    """Coupled mode's finding on one pair. ``status``: "violation" (certain), "consistent" (the
    exact computation allows the claim) or "inconclusive" (``reason``)."""

    pair: int
    status: Literal["violation", "consistent", "inconclusive"]
    summary: str
    control_flow: str | None = None
    measured: float | None = None
    declared: float | None = None
    norm: str | None = None


@dataclass(frozen=True)
class CoupledReport:
    findings: tuple[CoupledFinding, ...]

    @property
    def violation(self) -> CoupledFinding | None:
        return next((f for f in self.findings if f.status == "violation"), None)


@dataclass
class _Run:
    outputs: NDArray[np.float64] | None
    gen: RecordingGenerator
    error: str | None = None


def _matrix(outputs: Any, n: int, output: Output) -> NDArray[np.float64]:
    featurizer = Featurizer(output)
    if output.kind in ("real", "integer"):
        return featurizer._numbers(outputs, n)[:, None]
    return featurizer._matrix(outputs, n)


def _run(sample: Callable[..., Any], database: Any, output: Output, n: int, seed: np.random.SeedSequence,
         kappa: float) -> _Run:
    gen = RecordingGenerator(seed, kappa)
    try:
        return _Run(_matrix(sample(database, n, gen), n, output), gen)
    except (OutputError, ValueError, TypeError, ArithmeticError) as exc:
        return _Run(None, gen, f"{type(exc).__name__}: {exc}")


def _describe_calls(calls: list[tuple[Any, ...]]) -> str:
    if not calls:
        return "no draws"
    parts = []
    for call in calls[:3]:
        if call[0] == "noise":
            size = int(np.prod(call[2])) if call[2] else 1
            scales = ", ".join(f"{s:g}" for s in call[3])
            parts.append(f"{call[1]}({size} value{'s' if size != 1 else ''}, scale {scales})")
        else:
            parts.append(f"{call[0]}(…)")
    more = f" and {len(calls) - 3} more" if len(calls) > 3 else ""
    return ", ".join(parts) + more + f" ({len(calls)} call{'s' if len(calls) != 1 else ''})"


def _recognise(runs: list[tuple[_Run, _Run]]) -> Structure | str:
    """The additive structure of one database from (noise, zero-noise) runs on several seeds, or
    why it is not there."""
    families: set[Family] = set()
    scales: list[NDArray[np.float64]] = []
    w_all, diff_all, o1_all, o0_all = [], [], [], []
    for one, zero in runs:
        if one.outputs is None or zero.outputs is None:
            return f"the sampler failed under the recording generator ({one.error or zero.error})"
        if not one.gen.noise:
            return ("it drew no Laplace or Gaussian noise from the generator it was given "
                    f"({_describe_calls(one.gen.calls)}): its randomness, if any, is its own")
        if one.gen.calls != zero.gen.calls:
            return "setting the noise to zero changed what it draws (the noise steers its control flow)"
        if any(call[0] != "noise" for call in one.gen.calls):
            return f"it also draws other randomness ({_describe_calls(one.gen.calls)})"
        w = np.concatenate(one.gen.noise)
        if w.size != one.outputs.size:
            return (f"it drew {w.size} noise values for {one.outputs.size} output numbers "
                    "(one value per output number is the structure coupled mode reads)")
        families.update(one.gen.families)
        scales.append(np.concatenate(one.gen.scales))
        w_all.append(w)
        o1_all.append(one.outputs.reshape(-1))
        o0_all.append(zero.outputs.reshape(-1))
        diff_all.append(one.outputs.reshape(-1) - zero.outputs.reshape(-1))
    if len(families) != 1:
        return "it mixes Laplace and Gaussian noise"
    family = families.pop()
    scale = np.concatenate(scales)
    b = float(scale[0])
    if b <= 0 or not np.all(np.abs(scale - b) <= REL_TOL * b):
        return "its noise scale varies from one output to the next"
    zero_outputs = np.stack([z.outputs for _, z in runs if z.outputs is not None])  # (seeds, n, d)
    a = zero_outputs[0, 0]
    if not np.all(np.abs(zero_outputs - a) <= REL_TOL * (np.abs(a) + 1e-300)):
        return "with the noise replayed as zero its outputs still vary (other randomness reaches them)"
    w, diff = np.concatenate(w_all), np.concatenate(diff_all)
    o1, o0 = np.concatenate(o1_all), np.concatenate(o0_all)
    c = float(np.dot(w, diff) / max(float(np.dot(w, w)), 1e-300))
    if abs(c) * b <= 1e-12 * (1 + float(np.max(np.abs(a)))):
        return "the noise it draws does not move its outputs"
    tolerance = REL_TOL * (np.abs(o1) + np.abs(o0) + np.abs(c * w)) + 1e-300
    if not np.all(np.abs(diff - c * w) <= tolerance):
        return "its outputs are not the answer plus a multiple of the noise (rounded, clamped or transformed)"
    return Structure(family, b, c, np.asarray(a, dtype=np.float64))


# ---------------------------------------------------------------------------- exact privacy


def laplace_delta(epsilon: float, shift: float) -> float:
    """δ(ε) of Laplace noise of scale 1 between means ``shift`` apart: 1 − e^{(ε − s)/2} for ε < s."""
    return max(0.0, -math.expm1((epsilon - shift) / 2)) if epsilon < shift else 0.0


def laplace_renyi(alpha: NDArray[np.float64], shift: float) -> NDArray[np.float64]:
    """Rényi divergence of order α between Laplace(0, 1) and Laplace(s, 1) (Mironov 2017, Table II)."""
    s = float(shift)
    log_terms = np.logaddexp(np.log(alpha / (2 * alpha - 1)) + (alpha - 1) * s,
                             np.log((alpha - 1) / (2 * alpha - 1)) - alpha * s)
    return log_terms / (alpha - 1)


_ALPHAS = 1.0 + np.geomspace(1e-3, 1e3, 400)
_EPSILONS = np.concatenate([np.linspace(0.0, 2.0, 201), np.geomspace(2.0, 60.0, 200)])


def _claim_profile(claim: ClaimModel, eps: NDArray[np.float64]) -> NDArray[np.float64]:
    if claim.kind == "gdp":
        return gdp_delta(claim.theta, eps)
    if claim.kind == "zcdp":
        return zcdp_delta(claim.theta, eps)
    if claim.kind == "approx":
        return np.where(eps >= claim.theta, claim.delta, np.inf)
    return np.where(eps >= claim.theta, 0.0, np.inf)


def _delta_witness(family: Family, loc_p: float, scale_p: float, loc_q: float, scale_q: float, epsilon: float) -> float:
    """A lower bound on δ(ε) between two scalar distributions: P(E) − e^ε·Q(E) for E the union of
    grid cells where the density ratio exceeds e^ε (both orders), with exact CDFs. Any event gives
    a lower bound, so a violation found here is certain."""
    dist = stats.laplace if family == "laplace" else stats.norm
    width = max(scale_p, scale_q)
    grid = np.linspace(min(loc_p, loc_q) - 60 * width, max(loc_p, loc_q) + 60 * width, 40_001)
    edges = np.concatenate([[-np.inf], grid, [np.inf]])
    mids = np.concatenate([[grid[0] - width], (grid[:-1] + grid[1:]) / 2, [grid[-1] + width]])
    best = 0.0
    for (lp, sp), (lq, sq) in (((loc_p, scale_p), (loc_q, scale_q)), ((loc_q, scale_q), (loc_p, scale_p))):
        mass_p = np.diff(dist.cdf(edges, lp, sp))
        mass_q = np.diff(dist.cdf(edges, lq, sq))
        ratio = dist.logpdf(mids, lp, sp) - dist.logpdf(mids, lq, sq)
        chosen = ratio > epsilon
        best = max(best, float(mass_p[chosen].sum() - math.exp(epsilon) * mass_q[chosen].sum()))
    return best


def _judge(claim: ClaimModel, x: Structure, y: Structure) -> tuple[str, str, float | None, float | None, str | None]:
    """(status, summary, measured, declared, norm) for one pair's two structures."""
    family = x.family
    noun = "Laplace" if family == "laplace" else "Gaussian"
    d = x.a - y.a
    l1, l2 = float(np.abs(d).sum()), float(math.sqrt(float(np.dot(d, d))))
    beta_x, beta_y = x.beta, y.beta
    answers = (f"the zero-noise replay answers {_vec(x.a)} on x and {_vec(y.a)} on x′; the {noun} noise drawn "
               f"(scale {x.b:g}) enters with coefficient {x.c:.6g} on x and {y.c:.6g} on x′")
    if abs(beta_x - beta_y) > REL_TOL * max(beta_x, beta_y):
        where = f"the effective noise scales differ (|c|·b = {beta_x:.6g} on x, {beta_y:.6g} on x′)"
        if claim.kind != "approx":
            return ("violation", f"{answers}: {where}, so the privacy loss at this pair is unbounded, which "
                    f"{claim.describe()} does not allow", None, None, None)
        worst = int(np.argmax(np.abs(d))) if d.size else 0
        delta = _delta_witness(family, float(x.a[worst]), beta_x, float(y.a[worst]), beta_y, claim.theta)
        if delta > claim.delta + 1e-12:
            return ("violation", f"{answers}: {where}; an event of the pair has δ({claim.theta:g}) ≥ {delta:.3g} > "
                    f"{claim.delta:g}", None, None, None)
        return ("inconclusive", f"{answers}: {where}; the events tried give δ({claim.theta:g}) ≥ {delta:.3g} only, "
                "within the claim", None, None, None)
    beta = beta_x
    if family == "laplace":
        shifts = np.abs(d) / beta
        loss = float(shifts.sum())
        if claim.kind == "pure":
            declared = claim.theta * beta
            status = "violation" if loss > claim.theta * (1 + REL_TOL) + 1e-12 else "consistent"
            return (status, f"{answers}: measured sensitivity {l1:.6g} (L1) against the {declared:.6g} = ε·β that "
                    f"{noun} noise of scale β = {beta:.6g} covers at ε = {claim.theta:g}: the privacy loss at this "
                    f"pair is {loss:.6g}", l1, declared, "L1")
        if claim.kind == "zcdp":
            renyi = np.zeros_like(_ALPHAS)
            for shift in shifts:  # Rényi divergences add up over independent coordinates
                renyi = renyi + laplace_renyi(_ALPHAS, float(shift))
            renyi_excess = renyi - claim.theta * _ALPHAS * (1 + REL_TOL)
            k = int(np.argmax(renyi_excess))
            if renyi_excess[k] > 1e-12:
                return ("violation", f"{answers}: measured sensitivity {l1:.6g} (L1); its Rényi divergence of order "
                        f"{_ALPHAS[k]:.3g} is {renyi[k]:.4g} > ρ·α = {claim.theta * _ALPHAS[k]:.4g}", l1, None, "L1")
            return ("consistent", f"{answers}: measured sensitivity {l1:.6g} (L1); its Rényi divergences stay within "
                    f"ρ·α for ρ = {claim.theta:g}", l1, None, "L1")
        largest_shift = float(shifts.max()) if shifts.size else 0.0
        profile = np.array([laplace_delta(float(e), largest_shift) for e in _EPSILONS])
        allowed = _claim_profile(claim, _EPSILONS)
        excess = profile - allowed
        k = int(np.argmax(excess))
        if excess[k] > 1e-12:
            return ("violation", f"{answers}: measured sensitivity {l1:.6g} (L1); one coordinate alone has "
                    f"δ({_EPSILONS[k]:.3g}) = {profile[k]:.3g} > {allowed[k]:.3g}, the most the claim allows", l1,
                    None, "L1")
        if np.count_nonzero(shifts) <= 1:
            return ("consistent", f"{answers}: measured sensitivity {l1:.6g} (L1); its (ε, δ) profile stays within "
                    f"{claim.describe()}", l1, None, "L1")
        return ("inconclusive", f"{answers}: measured sensitivity {l1:.6g} (L1); the profile of a vector of Laplace "
                "noise is not computed here", l1, None, "L1")
    mu = l2 / beta
    if claim.kind == "pure":
        if l2 > REL_TOL * (1 + float(np.max(np.abs(x.a)))):
            return ("violation", f"{answers}: the answers move by {l2:.6g} (L2), and Gaussian noise never gives pure "
                    f"ε-DP to answers that move", l2, 0.0, "L2")
        return ("consistent", f"{answers}: the answers do not move", l2, 0.0, "L2")
    if claim.kind == "gdp":
        declared = claim.theta * beta
        status = "violation" if mu > claim.theta * (1 + REL_TOL) else "consistent"
    elif claim.kind == "zcdp":
        declared = beta * math.sqrt(2 * claim.theta)
        status = "violation" if mu * mu / 2 > claim.theta * (1 + REL_TOL) else "consistent"
    else:
        declared = beta * _gdp_mu_for(claim.theta, claim.delta)
        status = "violation" if float(gdp_delta(mu, claim.theta)) > claim.delta + 1e-12 else "consistent"
    return (status, f"{answers}: measured sensitivity {l2:.6g} (L2) against the {declared:.6g} that Gaussian noise of "
            f"scale β = {beta:.6g} covers for {claim.describe()}: μ = {mu:.6g} at this pair", l2, declared, "L2")


def _gdp_mu_for(epsilon: float, delta: float) -> float:
    """The largest μ with δ_μ(ε) ≤ δ (the analytic Gaussian mechanism's, Balle & Wang, ICML 2018)."""
    low, high = 0.0, 1.0
    while float(gdp_delta(high, epsilon)) <= delta and high < 1e6:
        low, high = high, high * 2
    for _ in range(100):
        mid = (low + high) / 2
        if float(gdp_delta(mid, epsilon)) <= delta:
            low = mid
        else:
            high = mid
    return low


def _vec(a: NDArray[np.float64]) -> str:
    if a.size == 1:
        return f"{float(a[0]):.6g}"
    shown = ", ".join(f"{float(v):.4g}" for v in a[:4])
    return f"({shown}{', …' if a.size > 4 else ''})"


def coupled_check(sample: Callable[..., Any], output: Output, claim: ClaimModel, pairs: list[tuple[Any, Any]],
                  seed: int) -> CoupledReport:
    """Run coupled mode on every pair (deterministic given ``seed``)."""
    findings = []
    if output.kind not in ("real", "integer", "vector") or output.nullable:
        return CoupledReport(tuple(CoupledFinding(i, "inconclusive", "coupled mode reads numeric outputs (real, "
                                                  "integer, vector) without ⊥") for i in range(len(pairs))))
    for i, (x, x_prime) in enumerate(pairs):
        first = _run(sample, x, output, COUPLED_OUTPUTS, np.random.SeedSequence(seed, spawn_key=(1, i, 0)), 1.0)
        if first.outputs is not None and not first.gen.noise:  # a sampler with randomness of its own: stop here
            findings.append(CoupledFinding(i, "inconclusive", "inconclusive: on x it drew no Laplace or Gaussian noise "
                                           f"from the generator it was given ({_describe_calls(first.gen.calls)}): its "
                                           "randomness, if any, is its own"))
            continue
        runs: dict[str, list[tuple[_Run, _Run]]] = {"x": [], "x′": []}
        for k in range(COUPLED_SEEDS):
            sequence = np.random.SeedSequence(seed, spawn_key=(1, i, k))
            for name, database in (("x", x), ("x′", x_prime)):
                runs[name].append((_run(sample, database, output, COUPLED_OUTPUTS, sequence, 1.0),
                                   _run(sample, database, output, COUPLED_OUTPUTS, sequence, 0.0)))
        control = None
        for (one_x, _), (one_y, _) in zip(runs["x"], runs["x′"], strict=True):
            if one_x.gen.calls != one_y.gen.calls:
                control = (f"the random draws differ between x and x′ on the same stream: x made "
                           f"{_describe_calls(one_x.gen.calls)}, x′ made {_describe_calls(one_y.gen.calls)} "
                           "(control flow or noise parameters depend on the data)")
                break
        sx, sy = _recognise(runs["x"]), _recognise(runs["x′"])
        if isinstance(sx, str) or isinstance(sy, str):
            why = f"on x {sx}" if isinstance(sx, str) else f"on x′ {sy}"
            findings.append(CoupledFinding(i, "inconclusive", f"inconclusive: {why}", control))
            continue
        if sx.family != sy.family or sx.a.shape != sy.a.shape:
            findings.append(CoupledFinding(i, "inconclusive", "inconclusive: x and x′ draw different kinds of noise",
                                           control))
            continue
        status, summary, measured, declared, norm = _judge(claim, sx, sy)
        findings.append(CoupledFinding(i, status, summary, control, measured, declared, norm))  # type: ignore[arg-type]
    return CoupledReport(tuple(findings))

