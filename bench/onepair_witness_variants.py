"""The witness variants tried for the one-pair auditor (docs/sequential.md, "ours-v5", "What was tried").

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/onepair_witness_variants.py --runs 100 --seed 7 \
        --variants v4 sel:k=1 sel:k=1:a=0.8:hcap=10 orc orc:a=0.8

An exploration harness (not the shipped code path): each variant is a colon-separated spec,

  v4[:one]               app.stats.onepair with the spline witness (ours-v4; ``one``: first face only)
  orc[:a=A][:c=C]        the oracle witness from the true ratio of NonDP{Laplace,Gaussian}1 (not a test)
  sel / lap / gau        the location-scale fit of OP2c: family by likelihood / Laplace only / Gaussian only
  psel / plap / pgau     the Bayesian predictive ratio (conjugate scale prior, κ pseudo-observations)
  options                k=κ (scale pseudo-count), kl=κ_loc (centre pseudo-count, default κ), shared (one
                         centre for both sides), a=A (OP3' with shift A; default OP3), hcap=T₀ (the cap
                         (t − 1)/T₀), ramp=T₀ (the bet ramped instead), c=C (bet C/(s + d)), w=W (warm-up),
                         g=G (bet only while the in-sample score exceeds G), one (first face only)

``A+B`` averages the wealths of A and B. "sel:k=1:a=0.8:hcap=10" is the shipped ours-v5: it gives the
same rejection pair as ``app.stats.onepair.audit_pairs`` (checked on 60 runs). Streams as in
bench/sequential_audit.py (same seed and rng layout), truncated at ``--max-pairs``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

sys.path.insert(0, "bench")
from sequential_audit import MECHANISMS, X_DB, X_PRIME_DB, claim_for  # noqa
from app.stats.onepair import _centre_scale, _log_density, audit_pairs, kelly_witness


class Param:
    """log r̂ from location-scale fits of each side, shrunk to the pooled fit with pseudo-count kappa."""

    def __init__(self, fam, kappa=2.0, kloc=None, shared_loc=False):
        self.fam, self.kappa, self.kloc, self.shared = fam, kappa, (kappa if kloc is None else kloc), shared_loc

    def fit(self, xs, ys):
        fam, k, kl = self.fam, self.kappa, self.kloc
        n = xs.size
        mp, bp = _centre_scale(np.concatenate([xs, ys]), fam)
        if not bp > 0:
            bp = 1.0
        mx, bx = _centre_scale(xs, fam)
        my, by = _centre_scale(ys, fam)
        if self.shared:
            mx = my = mp
            # scale about the shared centre
            if fam == "laplace":
                bx = float(np.mean(np.abs(xs - mp)))
                by = float(np.mean(np.abs(ys - mp)))
            else:
                bx = float(np.sqrt(np.mean((xs - mp) ** 2)))
                by = float(np.sqrt(np.mean((ys - mp) ** 2)))
        else:
            mx = (n * mx + kl * mp) / (n + kl)
            my = (n * my + kl * mp) / (n + kl)
        if fam == "laplace":
            bx = (n * bx + k * bp) / (n + k)
            by = (n * by + k * bp) / (n + k)
        else:
            bx = math.sqrt((n * bx**2 + k * bp**2) / (n + k))
            by = math.sqrt((n * by**2 + k * bp**2) / (n + k))
        bx, by = max(bx, 1e-300), max(by, 1e-300)
        return lambda v: _log_density(v, mx, bx, fam) - _log_density(v, my, by, fam)


class Select:
    """family chosen by the in-sample log-likelihood of per-side fits"""

    def __init__(self, kappa, shared, kl=None):
        self.l = Param("laplace", kappa, kl, shared_loc=shared)
        self.g = Param("gaussian", kappa, kl, shared_loc=shared)

    def fit(self, xs, ys):
        return (self.l if likelier_family(xs, ys) == "laplace" else self.g).fit(xs, ys)


def likelier_family(xs, ys):
    """The family whose maximum-likelihood fits of each side give the larger likelihood (OP2c's choice)."""
    ll = {}
    for fam in ("laplace", "gaussian"):
        tot = 0.0
        for a in (xs, ys):
            m, b = _centre_scale(a, fam)
            tot += float(np.sum(_log_density(a, m, max(b, 1e-300), fam)))
        ll[fam] = tot
    return "laplace" if ll["laplace"] > ll["gaussian"] else "gaussian"


from scipy.special import gammaln


class Pred:
    """Bayesian predictive ratio: shared centre (pooled median/mean), conjugate scale prior with kappa pseudo-obs at the pooled scale."""

    def __init__(self, fam, kappa, sel=False, kl=None):
        self.fam, self.kappa, self.sel, self.kl = fam, kappa, sel, kl

    def fit(self, xs, ys):
        fam = likelier_family(xs, ys) if self.sel else self.fam
        pooled = np.concatenate([xs, ys])
        k = self.kappa
        n = xs.size
        if fam == "laplace":
            m = float(np.median(pooled))
            bp = float(np.mean(np.abs(pooled - m))) or 1.0
            if self.kl is None:
                mx = my = m
            else:
                mx = (n * float(np.median(xs)) + self.kl * m) / (n + self.kl)
                my = (n * float(np.median(ys)) + self.kl * m) / (n + self.kl)

            def side(a, mm):
                A = k + a.size
                B = k * bp + float(np.sum(np.abs(a - mm)))
                return A, B

            (ax, bx), (ay, by) = side(xs, mx), side(ys, my)

            def lr(v):
                return (math.log(ax) + ax * math.log(bx) - (ax + 1) * np.log(bx + np.abs(v - mx))) - (
                    math.log(ay) + ay * math.log(by) - (ay + 1) * np.log(by + np.abs(v - my))
                )

            return lr
        m = float(np.mean(pooled))
        bp2 = float(np.mean((pooled - m) ** 2)) or 1.0
        if self.kl is None:
            mx = my = m
        else:
            mx = (n * float(np.mean(xs)) + self.kl * m) / (n + self.kl)
            my = (n * float(np.mean(ys)) + self.kl * m) / (n + self.kl)

        def side(a, mm):
            A = k / 2 + a.size / 2
            B = k * bp2 / 2 + float(np.sum((a - mm) ** 2)) / 2
            return A, B

        (ax, bx), (ay, by) = side(xs, mx), side(ys, my)
        m = None
        cx = ax * math.log(bx) + gammaln(ax + 0.5) - gammaln(ax)
        cy = ay * math.log(by) + gammaln(ay + 0.5) - gammaln(ay)

        def lr(v):
            return (cx - (ax + 0.5) * np.log(bx + (v - mx) ** 2 / 2)) - (cy - (ay + 0.5) * np.log(by + (v - my) ** 2 / 2))

        return lr


SHAPE = ["op3", 1.0]


def wit(lv, s):
    if SHAPE[0] == "op3":
        return kelly_witness(lv, s)
    a = SHAPE[1]
    return np.clip(1.0 - a * s * np.exp(-np.clip(lv, -700, 700)), 0.0, 1.0)


def choose_face(lr_fn, xs, ys, s, d, faces="auto", gate=0.0):
    t = xs.size
    lx, ly = lr_fn(xs), lr_fn(ys)
    best, bf = gate, 0
    for face in (1, 2) if faces == "auto" else (1,):
        la, lb = (lx, ly) if face == 1 else (-ly, -lx)
        ha, hb = wit(la, s), wit(lb, s)
        ma, mb = ha.mean(), hb.mean()
        dh = ma - s * mb - d
        vh = ha.var() + s * s * hb.var() + 1.0 / t
        sc = dh / math.sqrt(vh)
        if sc > best:
            best, bf = sc, face
    return bf


BETMODE = ["const"]


def true_bet(lr_fn, face, s, d):
    from onepair_decomposition import grid, oracle_bet, true_law

    name, eps = CELL[0]
    P, Q = true_law("laplace" if "Laplace" in name else "gaussian", eps)
    mids, pw, qw = grid(P, Q, eps)
    lv = lr_fn(mids)
    if face == 2:
        lv = -lv
        pw, qw = qw, pw
    h = wit(lv, s)
    return oracle_bet(h, h, pw, qw, s, d)


OPT = {}


def run_witness_path(x, y, line, fitter, cap=0.9, warmup=2, faces="auto", tmax=None, gate=0.0):
    """log-wealth path of the constant-bet e-process with a predictable parametric witness."""
    ramp = float(OPT.get("ramp", 0))
    hcap = float(OPT.get("hcap", 0))
    s, d = line.slope, line.intercept
    T = x.size if tmax is None else tmax
    lw = np.zeros(T)
    cur = 0.0
    lr_fn = None
    face = 0
    lam = cap / (s + d)
    for t in range(T):
        if t >= warmup and face:
            lv = lr_fn(np.array([x[t], y[t]]))
            if face == 2:
                lv = -lv[::-1]
            hx, hy = wit(lv, s)
            if hcap:
                hm = min(1.0, t / hcap)
                hx, hy = min(hx, hm), min(hy, hm)
            lt = lam * (min(1.0, t / ramp) if ramp else 1.0)
            cur += math.log1p(lt * (hx - s * hy - d))
        lw[t] = cur
        n = t + 1
        if n >= warmup and (n <= 128 or n % max(1, -(-n // 64)) == 0):
            lr_fn = fitter.fit(x[:n], y[:n])
            face = choose_face(lr_fn, x[:n], y[:n], s, d, faces, gate)
            if BETMODE[0] == "oracle" and face:
                lam = true_bet(lr_fn, face, s, d)
    return lw


CELL = [None]


def oracle_path(x, y, line, cell, c):
    from scipy.stats import laplace, norm

    name, eps = cell
    dist = laplace if "Laplace" in name else norm
    P, Q = dist(0.0, 2.0 / eps), dist(0.5, 1.0 / eps)
    s, d = line.slope, line.intercept
    hx = wit(P.logpdf(x) - Q.logpdf(x), s)
    hy = wit(P.logpdf(y) - Q.logpdf(y), s)
    z = hx - s * hy - d
    z[:2] = 0
    return np.cumsum(np.log1p(c / (s + d) * z))


def v4_path(x, y, line, **kw):
    return audit_pairs(x, y, line, 0.05, stop=False, model="spline", shape="op3", ramp=0, **kw).log_wealth


def first_cross(lw, thr):
    i = np.argmax(lw >= thr)
    return int(i) + 1 if lw[i] >= thr else 0


def streams(mech, eps, runs, seed, max_pairs):
    for r in range(runs):
        rng = np.random.default_rng([seed, r, int(eps * 1e6), sum(map(ord, mech.name))])
        mech.draw(rng, X_DB, 20, eps)
        mech.draw(rng, X_PRIME_DB, 20, eps)
        yield mech.draw(rng, X_DB, max_pairs, eps), mech.draw(rng, X_PRIME_DB, max_pairs, eps)


VARIANTS = {}


def variant(name):
    def deco(f):
        VARIANTS[name] = f
        return f

    return deco


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-pairs", type=int, default=400)
    ap.add_argument("--cells", nargs="+", default=["NonDPLaplace1/0.01", "NonDPGaussian1/0.1"])
    ap.add_argument("--variants", nargs="+", required=True)
    a = ap.parse_args()
    thr = math.log(20)
    for cell in a.cells:
        name, eps = cell.split("/")
        eps = float(eps)
        mech = MECHANISMS[name]
        line = claim_for("dp", mech, eps).tangent(0.5)
        res = {v: [] for v in a.variants}
        CELL[0] = (name, eps)
        t0 = time.time()
        for x, y in streams(mech, eps, a.runs, a.seed, a.max_pairs):
            paths = {}
            for v in a.variants:
                parts = v.split("+")
                ps = [paths[p] if p in paths else paths.setdefault(p, build(p, x, y, line)) for p in parts]
                if len(ps) == 1:
                    lw = ps[0]
                else:
                    M = np.vstack(ps)
                    top = M.max(0)
                    lw = top + np.log(np.mean(np.exp(M - top), 0))
                res[v].append(first_cross(lw, thr))
        out = []
        for v in a.variants:
            arr = np.array(res[v])
            rej = arr[arr > 0]
            out.append(f"{v}: {rej.mean():.1f} ({rej.std(ddof=1):.0f}) med {np.median(rej):.0f} {rej.size}/{arr.size}")
        print(f"{cell} [{time.time() - t0:.0f}s]\n  " + "\n  ".join(out), flush=True)


def build(p, x, y, line):
    # p like "v4", "v3", "lap:k=2", "gau:k=2:shared", "lap:k=2:kl=10"
    toks = p.split(":")
    kind = toks[0]
    opts = dict(t.split("=") if "=" in t else (t, "1") for t in toks[1:])
    SHAPE[0], SHAPE[1] = ("kel", float(opts["a"])) if "a" in opts else ("op3", 1.0)
    BETMODE[0] = "oracle" if "obet" in opts else "const"
    OPT.clear()
    OPT.update(opts)
    if kind == "v4":
        kw = {}
        if "ridge" in opts:
            kw["ridge"] = float(opts["ridge"])
        if "one" in opts:
            kw["faces"] = "one"
        return v4_path(x, y, line, **kw)
    if kind == "orc":
        return oracle_path(x, y, line, CELL[0], float(opts.get("c", 0.9)))
    f: Select | Pred | Param
    if kind == "sel":
        f = Select(float(opts.get("k", 2)), "shared" in opts, float(opts["kl"]) if "kl" in opts else None)
    elif kind in ("plap", "pgau", "psel"):
        f = Pred(
            {"plap": "laplace", "pgau": "gaussian", "psel": None}[kind],
            float(opts.get("k", 2)),
            kind == "psel",
            float(opts["kl"]) if "kl" in opts else None,
        )
    else:
        fam = {"lap": "laplace", "gau": "gaussian"}[kind]
        f = Param(fam, float(opts.get("k", 2)), float(opts["kl"]) if "kl" in opts else None, "shared" in opts)
    return run_witness_path(
        x,
        y,
        line,
        f,
        cap=float(opts.get("c", 0.9)),
        warmup=int(opts.get("w", 2)),
        faces="one" if "one" in opts else "auto",
        gate=float(opts.get("g", 0)),
    )


if __name__ == "__main__":
    main()
