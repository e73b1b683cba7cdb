"""The testers' benchmark corpus, rebuilt from its published descriptions (docs/reference_mechanisms.md).

The mechanisms that StatDP (Ding et al., CCS 2018), DP-Sniper (Bichsel et al., S&P 2021) and
CheckDP (Wang et al., CCS 2020) are evaluated on, each with its true ε (``math.inf`` when it is
not ε-DP for any ε; for SVT 3 and SVT 6, which Lyu et al. call ∞-DP because their loss grows
without bound with the number of queries, the bound kε/2 that holds for k = 10 queries, marked
``exact=False``), the exact loss over the audited pairs (:meth:`CorpusMechanism.pair_epsilon`,
by quadrature) and the lower bounds DP-Sniper and StatDP publish, served in several output
shapes:

- Sparse Vector variants 1–6 of Lyu, Su & Li (VLDB 2017, Algorithms 1–6), ``c = 1`` answer,
  ``k = 10`` queries, threshold ``T = 0.5`` for Alg. 1 and ``1`` otherwise (DP-Sniper's
  settings): ⊤/⊥ as a nullable integer vector (``null`` once aborted), as a variable-length list
  stopping at the cutoff, and, for Alg. 3, which answers with the noisy value, as a nullable real
  vector and a list (``null`` for ⊥);
- Report Noisy Max with Laplace and with exponential noise (the index: ε-DP), and the buggy
  variants that return the noisy value (Laplace: kε/2; exponential: unbounded), ``k = 5``;
- noisy histograms with the right scale ``Lap(1/ε)`` and the wrong one ``Lap(ε)`` (DP-Sniper's
  NoisyHist1/NoisyHist2), vectors of reals;
- the truncated geometric mechanism of Ghosh, Roughgarden & Sundararajan (2009) on counts in
  ``[0, 5]``, and a broken variant that truncates by resampling;
- Laplace on a lattice: rounding the noisy value (post-processing: ε-DP), adding lattice noise to
  an unrounded value (the output's residue reveals the input: unbounded), and Mironov's (CCS 2012)
  floating-point flaw made observable with a coarse uniform (unbounded).

Databases are query answers (StatDP's setting): neighbours differ by at most 1 in every query
(counting queries, sensitivity 1); a histogram's neighbours differ by 1 in one bin.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.reference.mechanisms import SVT1, SVT2, SVT4, SVT5, SVT6
from app.stats.mpl import table1_pairs
from app.stats.shapes import Lattice, ListSamples, OutputShape

__all__ = ["CORPUS_EPSILON", "CorpusMechanism", "corpus", "corpus_mechanism", "exact_epsilon_finite"]

CORPUS_EPSILON = 0.1
"""ε the published evaluations use (DP-Sniper §VI, its ``exp_default``; StatDP §6)."""
SVT_QUERIES = 10
RNM_QUERIES = 5
HIST_BINS = 5
GEOMETRIC_MAX = 5
LATTICE_STEP = 0.25
COARSE_UNIFORM_BITS = 10

Sampler = Callable[[Any, int, np.random.Generator], Any]

DPSNIPER = "DP-Sniper (Bichsel et al., S&P 2021), logistic regression, eval_sp2021/reference-results/dd_search_reg_data.log"
STATDP = "StatDP (Ding et al., CCS 2018) as run by DP-Sniper's authors, eval_sp2021/reference-results/statdp_2_data.log"


@dataclass(frozen=True)
class CorpusMechanism:
    """One mechanism of the corpus in one output shape."""

    slug: str
    family: str
    description: str
    shape: OutputShape
    epsilon: float
    true_epsilon: float  # the sup over all neighbours where known exactly, else an upper bound (see exact)
    sample: Sampler = field(repr=False, compare=False)
    pairs: tuple[tuple[Any, Any], ...] = field(repr=False)
    source: str = ""
    published_as: str | None = None
    dpsniper_lb: float | None = None
    statdp_lb: float | None = None
    exact: bool = True  # False: true_epsilon is an upper bound only (SVT 3 and 6 with k = 10 queries)
    pair_loss: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    @property
    def claimed_epsilon(self) -> float:
        return self.epsilon

    @property
    def output_kind(self) -> str:
        return self.shape.output_kind

    def pair_epsilon(self) -> float:
        """The exact largest loss over the corpus pairs (what an audit of these pairs can at most
        establish): numerical quadrature (app.reference.exact_corpus) or closed form."""
        return self.true_epsilon if self.pair_loss is None else _cached_loss(self.slug, self.epsilon, self.pair_loss)

    def expected_verdict(self, claim: float) -> str:
        """``"refute"`` when the pairs exhibit a loss above ``claim``; ``"hold"`` when the mechanism
        satisfies the claim (claim ≥ its true ε or its upper bound); ``"either"`` in between."""
        if claim >= self.true_epsilon * (1 - 1e-9):
            return "hold"
        if claim < self.pair_epsilon() * (1 - 1e-6):
            return "refute"
        return "either"

    def breaks(self, claim: float) -> bool:
        """Whether the mechanism is known to break a claim of ``claim``-DP."""
        return self.expected_verdict(claim) == "refute"

    def to_row(self) -> dict[str, Any]:
        return {"slug": self.slug, "family": self.family, "shape": self.shape.describe(),
                "epsilon": self.epsilon, "true_epsilon": "unbounded" if math.isinf(self.true_epsilon)
                else self.true_epsilon, "exact": self.exact, "source": self.source, "published_as": self.published_as,
                "dpsniper_lb": self.dpsniper_lb, "statdp_lb": self.statdp_lb}


_LOSS_CACHE: dict[tuple[str, float], float] = {}


def _cached_loss(slug: str, epsilon: float, compute: Callable[[], float]) -> float:
    key = (slug.split("-")[0] if slug.startswith("svt") else slug, epsilon)
    if key not in _LOSS_CACHE:
        _LOSS_CACHE[key] = float(compute())
    return _LOSS_CACHE[key]


# --------------------------------------------------------------------------------------------
# samplers


def _q(database: Any, k: int | None = None) -> np.ndarray:
    arr = np.asarray(database, dtype=np.float64).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError("the database must be a non-empty list of finite query answers")
    if k is not None and arr.size != k:
        raise ValueError(f"this mechanism answers {k} queries; got {arr.size}")
    return arr


def _tb_vector(rows: np.ndarray) -> np.ndarray:
    """⊤/⊥ rows with −1 for aborted → float (n, k): 1, 0, NaN for aborted (null)."""
    out = rows.astype(np.float64)
    out[rows < 0] = np.nan
    return out


def _tb_list(rows: np.ndarray) -> ListSamples:
    """⊤/⊥ rows with −1 for aborted → lists stopping at the cutoff."""
    lengths = np.where((rows < 0).any(axis=1), np.argmax(rows < 0, axis=1), rows.shape[1])
    values = rows.astype(np.float64)
    values[rows < 0] = np.nan
    return ListSamples(values, lengths.astype(np.int64))


def _svt3(q: np.ndarray, n: int, rng: np.random.Generator, epsilon: float, c: int, threshold: float) -> np.ndarray:
    """Lyu-Su-Li Alg. 3 (Roth's lecture notes): ρ = Lap(2/ε), ν_i = Lap(2c/ε); a query above the
    noisy threshold is answered with its noisy value q_i + ν_i (the same ν as the comparison), else
    ⊥ (NaN), until c answers; then the rest is aborted (−inf marks it here)."""
    k = q.size
    rho = rng.laplace(0.0, 2.0 / epsilon, size=(n, 1))
    noisy = q[None, :] + rng.laplace(0.0, 2.0 * c / epsilon, size=(n, k))
    above = noisy >= threshold + rho
    out = np.where(above, noisy, np.nan)
    count = np.cumsum(above, axis=1)
    aborted = np.zeros((n, k), dtype=bool)
    aborted[:, 1:] = count[:, :-1] >= c
    out[aborted] = -np.inf
    return out


def _svt3_vector(q, n, rng, epsilon, c, threshold) -> np.ndarray:
    out = _svt3(q, n, rng, epsilon, c, threshold)
    out[np.isinf(out)] = np.nan
    return out


def _svt3_list(q, n, rng, epsilon, c, threshold) -> ListSamples:
    out = _svt3(q, n, rng, epsilon, c, threshold)
    ab = np.isinf(out)
    lengths = np.where(ab.any(axis=1), np.argmax(ab, axis=1), out.shape[1])
    out[ab] = np.nan
    return ListSamples(out, lengths.astype(np.int64))


def _rnm_noise(kind: str, scale: float, rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    return rng.laplace(0.0, scale, size=size) if kind == "laplace" else rng.exponential(scale, size=size)


def _geometric_noise(epsilon: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Two-sided geometric noise P(Z = z) ∝ e^{−ε|z|} (Ghosh et al. 2009): the difference of two
    geometric variables with success probability 1 − e^{−ε}."""
    p = 1.0 - math.exp(-epsilon)
    return rng.geometric(p, size=n) - rng.geometric(p, size=n)


def _truncated_geometric(epsilon: float, m: int, resample: bool) -> Sampler:
    def sample(database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        f = _q(database, 1)[0]
        if f != round(f) or not 0 <= f <= m:
            raise ValueError(f"the count must be an integer in [0, {m}]")
        out = f + _geometric_noise(epsilon, n, rng)
        if not resample:
            return np.clip(out, 0, m).astype(np.int64)
        bad = (out < 0) | (out > m)
        while bad.any():  # rejection: condition on the range (the broken truncation)
            out[bad] = f + _geometric_noise(epsilon, int(bad.sum()), rng)
            bad = (out < 0) | (out > m)
        return out.astype(np.int64)

    return sample


def _geometric_pmf(epsilon: float, m: int, resample: bool, f: int) -> np.ndarray:
    """Exact output distribution of the truncated geometric mechanism on count f."""
    a = math.exp(-epsilon)
    o = np.arange(m + 1)
    if resample:
        w = a ** np.abs(o - f)
        return w / w.sum()
    # clamping: P(o) = P(Z = o − f) inside, the tails' mass at 0 and m
    norm = (1 - a) / (1 + a)
    pmf = norm * a ** np.abs(o - f)
    pmf[0] = norm * sum(a ** abs(z) for z in range(-5000 - m, -f + 1))
    pmf[m] = norm * sum(a ** abs(z) for z in range(m - f, m + 5000))
    return pmf / pmf.sum()


def exact_epsilon_finite(pmfs: dict[Any, np.ndarray], neighbours: list[tuple[Any, Any]]) -> float:
    """max over neighbours and outputs of |ln P(o|x) − ln P(o|x')| for finite supports (inf when
    one side is 0 and the other not)."""
    worst = 0.0
    for x, xp in neighbours:
        p, q = pmfs[x], pmfs[xp]
        if np.any((p == 0) != (q == 0)):
            return math.inf
        nz = p > 0
        worst = max(worst, float(np.max(np.abs(np.log(p[nz]) - np.log(q[nz])))))
    return worst


def _lattice_laplace(epsilon: float, step: float, kind: str) -> Sampler:
    def sample(database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        f = _q(database, 1)[0]
        noise = rng.laplace(0.0, 1.0 / epsilon, size=n)
        if kind == "round-output":  # post-processing of the Laplace mechanism
            return np.round((f + noise) / step) * step
        if kind == "round-noise":  # the grid is anchored at f: the residue reveals f
            return f + np.round(noise / step) * step
        raise AssertionError(kind)

    return sample


def _coarse_uniform_laplace(epsilon: float, bits: int) -> Sampler:
    """Mironov (CCS 2012) §3: the textbook sampler −b·sgn(u)·ln(1 − 2|u|) from a uniform u of
    finite precision yields a sparse set of noise values, and f + noise is not shift-invariant, so
    the outputs' set reveals f. With 53-bit uniforms no sample-based tester sees it; with
    ``bits``-bit uniforms the atoms repeat and the same flaw is observable."""
    size = 2**bits

    def sample(database: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        f = _q(database, 1)[0]
        u = (rng.integers(0, size, size=n) + 0.5) / size - 0.5
        noise = -(1.0 / epsilon) * np.sign(u) * np.log(1.0 - 2.0 * np.abs(u))
        return f + noise

    return sample


# --------------------------------------------------------------------------------------------
# the corpus


def _table1(k: int) -> tuple[tuple[Any, Any], ...]:
    return tuple((list(p.x), list(p.xp)) for p in table1_pairs(k))


def corpus(epsilon: float = CORPUS_EPSILON) -> dict[str, CorpusMechanism]:
    """Every mechanism of the corpus, at claimed ε = ``epsilon``, by slug."""
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError("epsilon must be a positive finite number")
    out: list[CorpusMechanism] = []
    lyu = "Lyu, Su & Li, Understanding the Sparse Vector Technique, VLDB 2017"
    svt_pairs = _table1(SVT_QUERIES)
    from app.reference import exact_corpus as ex

    k_bound = SVT_QUERIES * eps / 2  # post-processing of the k noisy answers, each ε/2 (ν = Lap(2/ε))
    svt_cfg = {
        # slug: (class, threshold, true ε, published name, DP-Sniper LB, StatDP LB, exact?, pair loss)
        "svt1": (SVT1, 0.5, eps, "SparseVectorTechnique1", 0.0858, 0.0298, True,
                 lambda: ex.pair_loss_svt_cutoff1(svt_pairs, eps, 2 / eps, 4 / eps, 0.5)),
        "svt2": (SVT2, 1.0, eps, "SparseVectorTechnique2", 0.0859, 0.0407, True,
                 lambda: ex.pair_loss_svt_cutoff1(svt_pairs, eps, 2 / eps, 4 / eps, 1.0)),
        "svt4": (SVT4, 1.0, (1 + 6 * 1) / 4 * eps, "SparseVectorTechnique4", 0.1687, 0.1719, True,
                 lambda: ex.pair_loss_svt_cutoff1(svt_pairs, eps, 4 / eps, 4 / (3 * eps), 1.0)),
        "svt5": (SVT5, 1.0, math.inf, "SparseVectorTechnique5", 1.7612, 14.3143, True, None),
        "svt6": (SVT6, 1.0, k_bound, "SparseVectorTechnique6", 0.2720, 0.3200, False,
                 lambda: ex.pair_loss_svt_nocutoff(svt_pairs, 2 / eps, 2 / eps, 1.0)),
    }
    for slug, (cls, threshold, true_eps, name, dps, sdp, exact, loss) in svt_cfg.items():
        kwargs = {"epsilon": eps, "threshold": threshold}
        if cls in (SVT1, SVT2, SVT4):
            kwargs["cutoff"] = 1
        mech = cls(**kwargs)
        alg = slug[-1]
        base = dict(family="svt", epsilon=eps, true_epsilon=true_eps, pairs=svt_pairs,
                    source=f"{lyu}, Algorithm {alg}", published_as=name, dpsniper_lb=dps, statdp_lb=sdp,
                    exact=exact, pair_loss=loss)
        has_cutoff = cls in (SVT1, SVT2, SVT4)
        out.append(CorpusMechanism(
            slug=f"{slug}-vector", description=f"SVT {alg}: ⊤/⊥ per query" + (", null once aborted" if has_cutoff else ""),
            shape=OutputShape(container="vector", length=SVT_QUERIES, values="integer", nullable=has_cutoff),
            sample=(lambda m: lambda db, n, rng: _tb_vector(m.sample(_q(db, SVT_QUERIES), n, rng)))(mech), **base))
        out.append(CorpusMechanism(
            slug=f"{slug}-list", description=f"SVT {alg}: the answers up to the cutoff, as a list",
            shape=OutputShape(container="list", values="integer", max_length=SVT_QUERIES),
            sample=(lambda m: lambda db, n, rng: _tb_list(m.sample(_q(db, SVT_QUERIES), n, rng)))(mech), **base))
    svt3 = dict(family="svt", epsilon=eps, true_epsilon=k_bound, pairs=svt_pairs, source=f"{lyu}, Algorithm 3",
                published_as="SparseVectorTechnique3", dpsniper_lb=0.1716, statdp_lb=0.1793, exact=False,
                pair_loss=lambda: ex.pair_loss_svt3(svt_pairs, 2 / eps, 2 / eps, 1.0))
    out.append(CorpusMechanism(
        slug="svt3-values", description="SVT 3: the noisy value for ⊤, null for ⊥ and once aborted",
        shape=OutputShape(container="vector", length=SVT_QUERIES, nullable=True),
        sample=lambda db, n, rng: _svt3_vector(_q(db, SVT_QUERIES), n, rng, eps, 1, 1.0), **svt3))
    out.append(CorpusMechanism(
        slug="svt3-list", description="SVT 3: null for ⊥, the noisy value for ⊤, stopping at the cutoff",
        shape=OutputShape(container="list", nullable=True, max_length=SVT_QUERIES),
        sample=lambda db, n, rng: _svt3_list(_q(db, SVT_QUERIES), n, rng, eps, 1, 1.0), **svt3))

    dr = "Dwork & Roth, The Algorithmic Foundations of DP, §3.3; buggy variants: Ding et al. CCS 2018 §6"
    rnm_pairs = _table1(RNM_QUERIES)
    rnm_cfg = {
        "rnm-laplace": ("laplace", "index", eps, "ReportNoisyMax1", 0.0923, 0.0921,
                        lambda: ex.pair_loss_rnm_index(rnm_pairs, 2 / eps, "laplace")),
        "rnm-exponential": ("exponential", "index", eps, "ReportNoisyMax2", 0.0975, 0.0997,
                            lambda: ex.pair_loss_rnm_index(rnm_pairs, 2 / eps, "exponential")),
        "rnm-laplace-value": ("laplace", "value", RNM_QUERIES * eps / 2, "ReportNoisyMax3", 0.2478, 0.1961, None),
        "rnm-exponential-value": ("exponential", "value", math.inf, "ReportNoisyMax4", 0.3463, 0.1988, None),
    }
    for slug, (noise, what, true_eps, name, dps, sdp, loss) in rnm_cfg.items():
        def sampler(db, n, rng, noise=noise, what=what):
            q = _q(db, RNM_QUERIES)
            noisy = q[None, :] + _rnm_noise(noise, 2.0 / eps, rng, (n, q.size))
            return np.argmax(noisy, axis=1).astype(np.int64) if what == "index" else noisy.max(axis=1)
        shape = OutputShape(values="integer", bounds=(0, RNM_QUERIES - 1)) if what == "index" else OutputShape()
        out.append(CorpusMechanism(
            slug=slug, family="rnm", description=f"Report Noisy Max, {noise} noise of scale 2/ε, returns the {what}",
            shape=shape, epsilon=eps, true_epsilon=true_eps, sample=sampler, pairs=rnm_pairs, source=dr,
            published_as=name, dpsniper_lb=dps, statdp_lb=sdp, pair_loss=loss))
    # the index as a label, and as float-valued integers (16.0): the same mechanism, other shapes
    out.append(CorpusMechanism(
        slug="rnm-laplace-label", family="rnm", description="Report Noisy Max (Laplace), the index as a label 'q<i>'",
        shape=OutputShape(values="label"), epsilon=eps, true_epsilon=eps,
        sample=lambda db, n, rng: np.array([f"q{i}" for i in np.argmax(
            _q(db, RNM_QUERIES)[None, :] + rng.laplace(0.0, 2.0 / eps, size=(n, RNM_QUERIES)), axis=1)], dtype=object),
        pairs=rnm_pairs, source=dr, published_as="ReportNoisyMax1", dpsniper_lb=0.0923, statdp_lb=0.0921,
        pair_loss=lambda: ex.pair_loss_rnm_index(rnm_pairs, 2 / eps, "laplace")))

    hist_pairs = (([1] * HIST_BINS, [2] + [1] * (HIST_BINS - 1)), ([1] * HIST_BINS, [0] + [1] * (HIST_BINS - 1)))
    for slug, scale, true_eps, name, dps, sdp in (("noisy-hist", 1.0 / eps, eps, "NoisyHist1", 0.0978, 0.0994),
                                                  ("noisy-hist-wrong-scale", eps, 1.0 / eps, "NoisyHist2", 4.6020, 10.0022)):
        out.append(CorpusMechanism(
            slug=slug, family="hist", description=f"histogram + Lap({'1/ε' if scale != eps else 'ε'}) per bin",
            shape=OutputShape(container="vector", length=HIST_BINS), epsilon=eps, true_epsilon=true_eps,
            sample=(lambda s: lambda db, n, rng: _q(db, HIST_BINS)[None, :] + rng.laplace(0.0, s, size=(n, HIST_BINS)))(scale),
            pairs=hist_pairs, source="Dwork & Roth §3.3 (histogram queries); the wrong scale: DP-Sniper's NoisyHist2",
            published_as=name, dpsniper_lb=dps, statdp_lb=sdp))

    geo_pairs = tuple(([i], [i + 1]) for i in range(GEOMETRIC_MAX))
    ghosh = "Ghosh, Roughgarden & Sundararajan, Universally Utility-Maximizing Privacy Mechanisms, STOC 2009"
    for slug, resample, desc, name, dps, sdp in (
            ("truncated-geometric", False, "count + two-sided geometric noise, clamped to [0, 5]",
             "TruncatedGeometricMechanism", 0.1156, 0.1169),
            ("truncated-geometric-resampled", True, "count + geometric noise, redrawn until in [0, 5] (broken)",
             None, None, None)):
        pmfs = {(i,): _geometric_pmf(eps, GEOMETRIC_MAX, resample, i) for i in range(GEOMETRIC_MAX + 1)}
        true_eps = exact_epsilon_finite(pmfs, [((i,), (i + 1,)) for i in range(GEOMETRIC_MAX)])
        out.append(CorpusMechanism(
            slug=slug, family="geometric", description=desc,
            shape=OutputShape(values="integer", bounds=(0, GEOMETRIC_MAX)), epsilon=eps, true_epsilon=true_eps,
            sample=_truncated_geometric(eps, GEOMETRIC_MAX, resample), pairs=geo_pairs,
            source=ghosh + ("" if not resample else "; truncation by rejection is our broken variant"),
            published_as=name, dpsniper_lb=dps, statdp_lb=sdp))

    mironov = "Mironov, On Significance of the Least Significant Bits for Differential Privacy, CCS 2012"
    out.append(CorpusMechanism(
        slug="laplace", family="laplace", description="q + Lap(1/ε)", shape=OutputShape(), epsilon=eps,
        true_epsilon=eps, sample=lambda db, n, rng: _q(db, 1)[0] + rng.laplace(0.0, 1.0 / eps, size=n),
        pairs=(([0], [1]),), source="Dwork, McSherry, Nissim & Smith, TCC 2006", published_as="LaplaceMechanism",
        dpsniper_lb=0.0968, statdp_lb=0.0996))
    lat = OutputShape(lattice=Lattice(step=LATTICE_STEP))
    out.append(CorpusMechanism(
        slug="laplace-rounded", family="laplace", description=f"round(q + Lap(1/ε)) to the grid {LATTICE_STEP}ℤ",
        shape=lat, epsilon=eps, true_epsilon=eps, sample=_lattice_laplace(eps, LATTICE_STEP, "round-output"),
        pairs=(([0], [1]),), source=f"{mironov} (rounding after the noise is post-processing)"))
    out.append(CorpusMechanism(
        slug="laplace-lattice-noise", family="laplace",
        description=f"q + {0.3}·round(Lap(1/ε)/{0.3}): the grid is anchored at q", shape=OutputShape(),
        epsilon=eps, true_epsilon=math.inf, sample=_lattice_laplace(eps, 0.3, "round-noise"),
        pairs=(([0], [1]),), source=f"{mironov} §3 (the output's low-order part reveals the input)"))
    out.append(CorpusMechanism(
        slug="laplace-coarse-uniform", family="laplace",
        description=f"q − (1/ε)·sgn(u)·ln(1 − 2|u|), u on a {COARSE_UNIFORM_BITS}-bit grid",
        shape=OutputShape(), epsilon=eps, true_epsilon=math.inf,
        sample=_coarse_uniform_laplace(eps, COARSE_UNIFORM_BITS), pairs=(([0], [1]),), source=f"{mironov} §3"))
    return {m.slug: m for m in out}


def corpus_mechanism(slug: str, epsilon: float = CORPUS_EPSILON) -> CorpusMechanism:
    table = corpus(epsilon)
    try:
        return table[slug]
    except KeyError:
        raise ValueError(f"unknown corpus mechanism {slug!r}; known: {', '.join(sorted(table))}") from None
