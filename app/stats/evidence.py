"""The evidence an alarm carries: the counts that raised it and a lower confidence bound on ε.

Pure functions (no I/O); method.md §11 writes the formulas out.

When a check's detector fires at period t, eq. (13) of seed 002 attains M_t at a lag k: the
last k periods are the detector's own window of evidence. Over that window the pooled counts
are A = Σ a_s and B = Σ b_s out of N = Σ n_s outputs per side, with p̂ = A/N and q̂ = B/N.

**Exact bounds on p and q** (Clopper & Pearson 1934, *Biometrika* 26(4), 404–413): the
one-sided lower bound of a binomial proportion at level β is the β-quantile of
Beta(A, N − A + 1) (0 when A = 0), and the upper bound is the (1 − β)-quantile of
Beta(B + 1, N − B) (1 when B = N).

**A lower bound on ε for the event** (the batch recipe of Jagielski et al. 2020 and Nasr et al.
2023; DP-Sniper and StatDP bound ε the same way; /work/shared/docs/sequential.md §1; computed by
the engine's ``app.stats.heldout.test_claim``): with each side at β = α/2, the pair (p ≥ p_lo,
q ≤ q_hi) holds with probability ≥ 1 − α (Bonferroni), and on that event any (ε, δ) claim that
the mechanism satisfies has p ≤ e^ε·q + δ ≤ e^ε·q_hi + δ, so

    ε_lb = ln((p_lo − δ) / q_hi)            (pure ε: δ = 0)

is a lower confidence bound on the ε of any (ε, δ)-DP guarantee the mechanism can have. The
claim is contradicted when p_lo > e^ε·q_hi + δ, i.e. when ε_lb exceeds the claimed ε.

**The score bound** (pure ε claims, equal sample sizes). The Bonferroni split makes the exact
bound conservative: measured on the paper's scenario (a) at n = 50 per period, it stayed at or
below the claim on 11% of right alarms (docs/jobs_and_evidence.md). The detector's own test
statistic, the Farrington–Manning score statistic z(ε') of seed 002 eq. (12) with the
restricted-MLE variance (method.md §1), decreases in ε'; inverting it,

    ε_lb^score = sup{ε' : z(ε') > Φ⁻¹(1 − α)}

is the (asymptotic) level-(1 − α) lower confidence bound on ln(p/q) that matches the detector's
test. It is the headline ``epsilon_lower_bound`` of a pure-ε alarm; the exact bound is reported
beside it. For (ε, δ) claims the headline is the exact bound.

:func:`claim_evidence` is the one place where a claim meets an alarm's counts; it takes any claim
of ``app.stats.heldout`` (``Claim``: the engine's ``test_claim`` is where a claim meets exact
bounds), so that richer claims plug in there: a pure ε gets the score bound as its
headline, any other claim the exact test.

The window is the one the detector chose, on the same data: the bound describes "that event over
that window" (what the alarm saw), it is not a fresh test. The MPL snapshot (seed 003) that
follows an alarm draws fresh outputs and is a *separate* estimator of where the loss is; when its
bound falls below the claim it is the weaker estimator there, not a sign that the claim holds
(:func:`snapshot_reading`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.stats.claims import ApproxDP, Claim, PureDP, dp_claim
from app.stats.confidence import confidence_sequence, cs_claim_of
from app.stats.heldout import Counts, HeldOutResult, epsilon_lower_bound, test_claim
from app.stats.sequential import EProcessDesign

__all__ = [
    "VALIDITY_WORDS",
    "alarm_evidence",
    "confirmation_statement",
    "detection_guarantee",
    "as_claim",
    "claim_evidence",
    "event_bound",
    "score_lower_bound",
    "score_statistic",
    "snapshot_reading",
]


def as_claim(claim: Any) -> Claim:
    """The claim (app.stats.claims.Claim) of the evidence's input: a number is a pure ε; an object
    with ``epsilon`` (and ``delta``) is ε or (ε, δ); a :class:`~app.stats.claims.Claim` is used as is."""
    if isinstance(claim, (int, float)):
        return PureDP(float(claim))
    if isinstance(claim, Claim):
        return claim
    if hasattr(claim, "epsilon"):
        return dp_claim(float(claim.epsilon), float(getattr(claim, "delta", 0.0) or 0.0))
    raise TypeError(f"not a claim: {claim!r}")


def _pure_epsilon(claim: Claim) -> float | None:
    """The ε of a pure-ε claim (the score bound applies), else None."""
    return float(claim.epsilon) if isinstance(claim, PureDP) else None


def claim_parameter(claim: Claim) -> str:
    """The parameter the claim's lower bound is about: ``ε`` (pure or (ε, δ)), ``μ`` (GDP), ``ρ`` (zCDP)."""
    return claim.parameter


def _claim_dict(claim: Claim) -> dict[str, Any]:
    """The claim's API form (``{"epsilon": e}``, ``{"epsilon": e, "delta": d}``, ``{"gdp_mu": m}``,
    ``{"zcdp_rho": r}``) with ``describe``."""
    text = f"ε = {claim.epsilon:g}" if isinstance(claim, PureDP) else claim.describe()
    return {**claim.to_dict(), "describe": text}


def event_bound(a: int, b: int, n_x: int, n_xp: int | None = None, *, alpha: float = 0.05,
                claim: Any = 0.0) -> HeldOutResult:
    """The exact test of one event's counts (Clopper–Pearson, each side at α/2): the engine's
    ``test_claim``, the one function where a claim meets exact bounds."""
    n_xp = n_x if n_xp is None else n_xp
    return test_claim(as_claim(claim), Counts(int(a), int(n_x), int(b), int(n_xp)), alpha)


def _json_float(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


#: ε' range searched when inverting the score statistic (|ln(p/q)| beyond it is reported as the cap).
SCORE_SEARCH = 30.0


def score_statistic(a: int, b: int, n: int, epsilon: float) -> float:
    """z(ε) of seed 002 eq. (12) with the restricted-MLE (score) variance at the boundary p = e^ε q
    (method.md §1), for pooled counts a, b out of n per side; any real ε (negative too)."""
    from app.stats.period import restricted_mle_q

    c = math.exp(epsilon)
    q = float(restricted_mle_q(a, b, n, epsilon))
    p = c * q
    d = a / n - c * b / n
    if d == 0:
        return 0.0
    var = max(p * (1 - p) + c * c * q * (1 - q), 1e-300)
    return math.sqrt(n) * d / math.sqrt(var)


def score_lower_bound(a: int, b: int, n: int, alpha: float) -> float:
    """ε_lb^score = sup{ε' : z(ε') > Φ⁻¹(1 − α)} (module docstring): −inf when even ε' = −30 is not
    rejected (no evidence of a loss), the cap 30 when ε' = 30 still is."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    if n < 1 or not (0 <= a <= n and 0 <= b <= n):
        raise ValueError(f"need 0 <= a, b <= n and n >= 1, got a={a}, b={b}, n={n}")
    critical = float(norm.isf(alpha))

    def excess(eps: float) -> float:
        return score_statistic(a, b, n, eps) - critical

    if excess(-SCORE_SEARCH) <= 0:
        return -math.inf
    if excess(SCORE_SEARCH) > 0:
        return SCORE_SEARCH
    return float(brentq(excess, -SCORE_SEARCH, SCORE_SEARCH, xtol=1e-6))


def claim_evidence(claim: Any, a: int, b: int, n_x: int, n_xp: int, *, alpha: float = 0.05) -> dict[str, Any]:
    """A claim against the counts of one event: the headline lower bound on the claim's parameter
    and whether it contradicts the claim, with the exact Clopper–Pearson test beside it (module
    docstring).

    Pure ε with equal sizes: the headline is the inverted score statistic (the detector's own
    test). Any other claim ((ε, δ), μ-GDP, ρ-zCDP): the exact test, in both orientations (the event
    likelier under x, and under x′), each at α/2 so that the pair keeps level α; the stronger one is
    reported. The one place where a claim meets an alarm's counts."""
    claim = as_claim(claim)
    epsilon = _pure_epsilon(claim)
    if epsilon is not None and n_x == n_xp:
        exact = event_bound(a, b, n_x, n_xp, alpha=alpha, claim=claim)
        score = score_lower_bound(a, b, n_x, alpha)
        return {"method": "score", "epsilon_lower_bound": score, "contradicts_claim": bool(score > epsilon),
                "exact": exact, "orientation": "x"}
    forward = event_bound(a, b, n_x, n_xp, alpha=alpha / 2, claim=claim)
    backward = event_bound(b, a, n_xp, n_x, alpha=alpha / 2, claim=claim)
    exact, orientation = (forward, "x") if (forward.refutes, forward.lower_bound) >= (
        backward.refutes, backward.lower_bound) else (backward, "x_prime")
    return {"method": "clopper_pearson", "epsilon_lower_bound": exact.lower_bound,
            "contradicts_claim": bool(exact.refutes), "exact": exact, "orientation": orientation}


#: What each detector's alarm guarantees under the claim (method.md §4, §13.3, §13.4).
DETECTION_GUARANTEES = {
    "aggregator": ("level", "a level-{alpha} test of the claim over the horizon: P(a false alarm by T) ≤ {alpha}"),
    "naive": ("level", "a level-{alpha} test of the claim over the horizon (Bonferroni): P(a false alarm by T) ≤ {alpha}"),
    "e-process": ("level", "a level-{alpha} test of the claim at any time: P(a false alarm, ever) ≤ {alpha} (Ville)"),
    "e-detector": ("arl", "an ARL-controlled detection, not a refutation at level {alpha}: under the claim the mean "
                   "number of periods between false alarms is at least {arl:g} (and P(a false alarm within "
                   "{window} periods) ≤ {alpha})"),
}


#: What a bound shown with an alarm is valid for (its ``validity``), in the words every page and payload
#: uses. ``across_runs``: the anytime-valid bound LB_τ (eq. CS) satisfies P(∃t: LB_t ≥ θ*) ≤ α over the
#: runs of a θ*-mechanism, so it is valid at any stopping time, but it is computed on the periods that
#: raised the alarm: *given* that an alarm happened it is not a 1 − α statement (among boundary false
#: alarms it excluded the claim in 11–100% of them), and it is no independent evidence
#: (``restates_alarm``). ``given_alarm``: the exact test on fresh outputs drawn after the alarm
#: (method.md §11.3), independent of the alarm, so its level holds conditionally on the alarm.
#: ``descriptive``: a figure over a window the data chose, no confidence statement at all.
VALIDITY_WORDS: dict[str, str] = {
    "across_runs": "valid across runs, not given the alarm; not independent evidence",
    "given_alarm": "valid given the alarm (fresh outputs the detector never saw)",
    "descriptive": "descriptive: the window was chosen by the data; not a confidence statement",
}


def detection_guarantee(detector: str | None, *, alpha: float, arl: float | None = None,
                        window: int | None = None) -> dict[str, Any] | None:
    """What the detector's alarm means (method.md §13.4 for the e-detector's ARL)."""
    if detector not in DETECTION_GUARANTEES:
        return None
    kind, text = DETECTION_GUARANTEES[detector]
    return {"detector": detector, "kind": kind, "alpha": alpha, "arl": arl,
            "statement": text.format(alpha=f"{alpha:g}", arl=arl or 0.0, window=window)}


def alarm_evidence(a: Sequence[int], b: Sequence[int], n: Sequence[int], t: Sequence[int], *,
                   lag: int, claim: Any, alpha: float = 0.05, detector: str | None = None,
                   arl: float | None = None, window: int | None = None,
                   design: EProcessDesign | None = None) -> dict[str, Any]:
    """The evidence of a check's alarm (JSON-ready; method.md §11.1–11.4).

    ``a``, ``b``, ``n``, ``t`` are **all** the check's periods since its detector started, in order,
    the last being the alarm's; ``lag`` is the window the detector pooled (the k that attains M_t
    of eq. 13, or the periods since the e-value was last ≤ 1).

    - headline (``anytime``, ``lower_bound``, ``exceeds_claim``): the anytime-valid lower bound LB_τ
      of app.stats.confidence (eq. CS) on every period: valid across runs at any stopping time, not
      given the alarm, and computed on the data that raised it (``validity`` ``across_runs``,
      ``restates_alarm`` true; :data:`VALIDITY_WORDS`);
    - ``window_bound``: the old bound on the last ``lag`` periods (the inverted score statistic for
      pure ε, else the exact test), a *descriptive* figure: the window was chosen on the same data;
    - ``detection``: what the detector's alarm guarantees (a level-α test, or an ARL);
    - ``confirmation``: null here; the exact test on fresh outputs drawn after the alarm is added
      by the snapshot (:func:`confirmation`).

    ``design``: the e-process the anytime bound inverts (the check's own for an e-process monitor,
    app.stats.sequential.design_of_state; None: the service's, method.md §13.3c).
    """

    if not (len(a) == len(b) == len(n) == len(t)) or len(a) == 0:
        raise ValueError("a, b, n and t must be non-empty sequences of the same length")
    if not 1 <= lag <= len(a):
        raise ValueError(f"lag must lie in [1, {len(a)}], got {lag}")
    claim = as_claim(claim)
    big_a, big_b, big_n = int(sum(a[-lag:])), int(sum(b[-lag:])), int(sum(n[-lag:]))
    found = claim_evidence(claim, big_a, big_b, big_n, big_n, alpha=alpha)
    exact: HeldOutResult = found["exact"]
    claimed = _claim_dict(claim)
    describe = claimed.pop("describe")
    param = claim_parameter(claim)
    confidence = round(100 * (1 - alpha), 1)
    counts = f"{big_a} of {big_n} outputs on x and {big_b} of {big_n} on x' in the event"
    window_lb = found["epsilon_lower_bound"]
    window_text = (f"Descriptive: over the last {lag} period(s), the window the detector chose on the same data "
                   f"({counts}), the {'score' if found['method'] == 'score' else 'exact'} bound on {param} is "
                   f"{window_lb:.3g}; not a confidence bound, since the window and the time were chosen by the data."
                   if math.isfinite(window_lb) else
                   f"Descriptive: over the last {lag} period(s) ({counts}) the window bound on {param} is −∞.")
    cs_claim = cs_claim_of(claim)
    anytime: dict[str, Any] | None = None
    if cs_claim is not None:
        cs = confidence_sequence(np.asarray(a), np.asarray(b), np.asarray(n), cs_claim, alpha, design=design)
        lb = float(cs.lower[0, -1])
        anytime = {"method": "confidence_sequence", "parameter": param, "lower_bound": _json_float(lb),
                   "confidence": 1 - alpha, "contradicts_claim": bool(cs.claim_rejected[0, -1]),
                   "periods": len(a), "from_t": int(t[0]), "to_t": int(t[-1]),
                   "grid_step": float(cs.grid[1] - cs.grid[0]) if cs.grid.size > 1 else None,
                   "validity": "across_runs", "restates_alarm": True}
        if anytime["contradicts_claim"]:
            head = (f"Anytime-valid bound ({VALIDITY_WORDS['across_runs']}: it reads the periods that raised the "
                    f"alarm): {param} > {lb:.3g} at {confidence:g}% confidence over runs, from every period since "
                    f"t = {t[0]}; it excludes the claim {describe} on the alarm's own data. The evidence valid given "
                    "the alarm is the confirmation on fresh outputs.")
        else:
            shown = f"{lb:.3g}" if math.isfinite(lb) else "−∞ (no loss shown yet)"
            head = (f"Anytime-valid bound ({VALIDITY_WORDS['across_runs']}): the {confidence:g}% lower bound on "
                    f"{param} from every period since t = {t[0]} is {shown}; it does not exclude the claim {describe} "
                    "yet. This does not clear the mechanism: the alarm is the detector's own test, and the "
                    "confirmation on fresh outputs follows.")
        headline_lb, contradicts, method = lb, anytime["contradicts_claim"], "confidence_sequence"
    else:
        head = (f"No anytime-valid bound is computed for {describe} claims (method.md §11.2); the window bound below is "
                "descriptive only.")
        headline_lb, contradicts, method = -math.inf, False, found["method"]
    guarantee = detection_guarantee(detector, alpha=alpha, arl=arl, window=window)
    parts = [head]
    if guarantee is not None:
        parts.append(f"The alarm is {guarantee['statement']}.")
    parts.append(window_text)
    is_epsilon = param == "ε"
    return {
        "method": method,
        "window": {"lag": int(lag), "from_t": int(t[-lag]), "to_t": int(t[-1])},
        "counts": {"a": big_a, "b": big_b, "n": big_n},
        "p_hat": exact.p_hat if found["orientation"] == "x" else exact.q_hat,
        "q_hat": exact.q_hat if found["orientation"] == "x" else exact.p_hat,
        "parameter": param,
        "lower_bound": _json_float(headline_lb),
        "epsilon_lower_bound": _json_float(headline_lb) if is_epsilon else None,
        "orientation": found["orientation"],
        "anytime": anytime,
        "validity": "across_runs" if method == "confidence_sequence" else "descriptive",
        "restates_alarm": True,
        "window_bound": {"method": found["method"], "lower_bound": _json_float(window_lb),
                         "exceeds_claim": bool(found["contradicts_claim"]), "descriptive": True,
                         "validity": "descriptive", "restates_alarm": True, "statement": window_text},
        "exact": {"method": "clopper_pearson", "p_lower": exact.p_lo, "q_upper": exact.q_hi,
                  "lower_bound": _json_float(exact.lower_bound),
                  "epsilon_lower_bound": _json_float(exact.lower_bound) if is_epsilon else None,
                  "exceeds_claim": bool(exact.refutes)},
        "detection": guarantee,
        "confirmation": None,
        "confidence": 1 - alpha,
        "claim": claimed,
        "claim_description": describe,
        "exceeds_claim": bool(contradicts),
        "statement": " ".join(parts),
    }


def confirmation_statement(conf: dict[str, Any], describe: str) -> str:
    """The confirmation on fresh outputs (:func:`confirmation`) in words."""
    c = conf["counts"]
    pct = round(100 * conf["confidence"], 1)
    lb = conf["lower_bound"]
    shown = "−∞" if lb is None else f"{lb:.3g}"
    if conf["confirms"]:
        where = (" (on the event's complement, the claim's other face)" if conf.get("face") == "complement" else "")
        return (f"Confirmed on fresh outputs drawn after the alarm ({c['a']} of {c['n']} on x, {c['b']} of {c['n']} on x' "
                f"in the event): {conf['parameter']} > {shown} at {pct:g}% confidence (exact; {VALIDITY_WORDS['given_alarm']})"
                f"{where}, which contradicts the claim {describe}.")
    return (f"Not confirmed on fresh outputs drawn after the alarm ({c['a']} of {c['n']} on x, {c['b']} of {c['n']} "
            f"on x'): their exact {pct:g}% bound on {conf['parameter']} (the event and its complement) is {shown}, which "
            f"does not contradict the claim "
            f"{describe}. The alarm may be a false alarm, or the violation too small for this many outputs; this does not "
            "clear the mechanism.")


def snapshot_reading(lower_bound: float, epsilon_hat: float, claim: Any, *,
                     alpha: float = 0.05, after_alarm: bool = True) -> dict[str, Any]:
    """How to read an MPL snapshot (seed 003 eq. 26) next to a claim, in words that never clear
    the mechanism: LB is a lower bound on the loss at the snapshot's t̂, a separate estimator of
    where the loss is. Below the claim it is the weaker estimator there, nothing more.

    MPL bounds the *pure* privacy loss. It is compared with a pure-ε claim only: an (ε, δ), μ-GDP
    or ρ-zCDP mechanism may have an unbounded pure loss and still keep its claim, so for those the
    verdict is ``not_comparable`` and the snapshot's claim terms (δ̂, μ̂, the trade-off curve) are
    the comparison."""
    eps: float | None
    if isinstance(claim, (int, float)):
        eps = float(claim)
    else:
        eps = _pure_epsilon(as_claim(claim)) if claim is not None else None
        if eps is None:
            confidence = round(100 * (1 - alpha), 1)
            described = claim.describe() if hasattr(claim, "describe") else str(claim)
            return {"verdict": "not_comparable", "statement": (
                f"MPL snapshot (a separate estimator of where the pure privacy loss is): ε̂ = {epsilon_hat:.3g}, "
                f"{confidence:g}% lower bound {lower_bound:.3g}. The claim {described} bounds no pure ε, so this "
                "bound neither supports nor contradicts it; the snapshot's claim terms are the comparison.")}
    confidence = round(100 * (1 - alpha), 1)
    if lower_bound > eps:
        verdict = "exceeds_claim"
        text = (f"MPL snapshot (a separate estimator of where the loss is): ε is at least {lower_bound:.3g} at "
                f"{confidence:g}% confidence (ε̂ = {epsilon_hat:.3g}), above the claimed {eps:g}.")
    elif after_alarm:
        verdict = "weaker_estimator"
        text = (f"MPL snapshot (a separate estimator of where the loss is): its {confidence:g}% lower bound "
                f"({lower_bound:.3g}, ε̂ = {epsilon_hat:.3g}) does not reach the claimed {eps:g}. The snapshot is the "
                "weaker estimator here; it does not clear the mechanism, and the alarm's own evidence stands.")
    elif lower_bound > 0:
        verdict = "below_claim"
        text = (f"MPL snapshot: ε is at least {lower_bound:.3g} at {confidence:g}% confidence (ε̂ = "
                f"{epsilon_hat:.3g}). A lower bound says nothing about how large ε may be"
                + (f"; being below the claimed {eps:g} does not show that the claim holds." if math.isfinite(eps)
                   else "."))
    else:
        verdict = "no_loss_established"
        text = (f"MPL snapshot: no privacy loss is established at {confidence:g}% confidence (LB = "
                f"{lower_bound:.3g}, ε̂ = {epsilon_hat:.3g}). This does not show that the mechanism is private"
                + (f" at the claimed {eps:g}." if math.isfinite(eps) else "."))
    return {"verdict": verdict, "statement": text}


def confirmation(a: int, b: int, n: int, claim: Any, alpha: float = 0.05,
                 orientation: str = "x") -> dict[str, Any]:
    """The exact test of the claim on fresh outputs counted in the alarm's event, on both faces of the
    claim (method.md §11.3, and app.stats.confidence's module docstring, 2.). JSON-ready.

    ``orientation`` (``"x"``: p is the event's frequency on x; ``"x_prime"``: x and x' swapped) must
    be fixed before the fresh outputs are drawn (the alarm's own, from its window). In it the
    engine's ``test_claim`` (Clopper–Pearson, each side at α/2) tests

    - the event's face, p ≤ e^ε q + δ (or p ≤ h(q)), at the corner (p_lo, q_hi), and
    - the complement's face, 1 − q ≤ e^ε (1 − p) + δ (or 1 − q ≤ h(1 − p), the symmetric point of
      a curve claim), on the complement's counts (n − b, n − a), i.e. at the corner
      (1 − q_hi, 1 − p_lo): Clopper–Pearson is symmetric (the lower bound of n − b out of n is
      1 − the upper bound of b), so it is the *same* box.

    Both faces are decreasing in p and increasing in q, so both are tested on the one event
    {p ≥ p_lo, q ≤ q_hi} of probability ≥ 1 − α: if the claim holds, neither refutes unless that
    event fails. One test at level α covers both faces, with no Bonferroni split; ``lower_bound``
    is the larger of the two faces' bounds (each valid on that event) and ``confirms`` says that
    either face contradicts the claim."""
    if n < 1 or not (0 <= a <= n and 0 <= b <= n):
        raise ValueError(f"need 0 <= a, b <= n and n >= 1, got a={a}, b={b}, n={n}")
    if orientation not in ("x", "x_prime"):
        raise ValueError(f"orientation must be 'x' or 'x_prime', got {orientation!r}")
    c = as_claim(claim)
    ta, tb = (a, b) if orientation == "x" else (b, a)
    faces = {"event": event_bound(ta, tb, n, n, alpha=alpha, claim=c),
             "complement": event_bound(n - tb, n - ta, n, n, alpha=alpha, claim=c)}
    # The region's test covers both faces, so the two agree (up to rounding); the face named is the one whose own
    # line p ≤ e^ε q + δ (on its own counts) is the more violated, for ε and (ε, δ) claims.
    delta = c.delta if isinstance(c, ApproxDP) else 0.0 if isinstance(c, PureDP) else None

    def own_line(r: HeldOutResult) -> float:
        return -math.inf if delta is None else float(epsilon_lower_bound(r.p_lo, r.q_hi, delta))

    face = max(faces, key=lambda k: (faces[k].refutes, own_line(faces[k]), faces[k].lower_bound, k == "event"))
    lb = faces[face].lower_bound
    return {"method": "clopper_pearson_fresh", "counts": {"a": int(a), "b": int(b), "n": int(n)},
            "parameter": claim_parameter(c), "lower_bound": float(lb) if math.isfinite(lb) else None,
            "confidence": 1 - alpha, "confirms": bool(faces[face].refutes), "orientation": orientation,
            "face": face, "validity": "given_alarm", "restates_alarm": False,
            "faces": {k: {"lower_bound": _json_float(r.lower_bound), "confirms": bool(r.refutes)}
                      for k, r in faces.items()}}
