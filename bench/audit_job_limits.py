"""One audit under the limits of a service job's child process (app.jobs.child.apply_limits: the
memory limit as RLIMIT_DATA and, with 512 MiB of slack, RLIMIT_AS; glibc arenas capped at 2; one
thread per numeric library): does it finish, and its peak resident size (docs/benchmarks.md,
"Late re-ranking as the default").

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/audit_job_limits.py svt3-values 7 [--memory-mb 768] [--no-rescore-late]

The mechanism runs in the same process (the service's job samples over HTTP instead).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.jobs.child import Limits, apply_limits  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slug")
    ap.add_argument("seed", type=int)
    ap.add_argument("--claim", type=float, default=0.1)
    ap.add_argument("--memory-mb", type=int, default=768)
    ap.add_argument("--rescore-late", action=argparse.BooleanOptionalAction, default=None)
    args = ap.parse_args()
    apply_limits(Limits(memory_bytes=args.memory_mb * 2**20, cpu_seconds=3600, wall_seconds=3600.0))

    from app.audit import AuditSettings, local_sampler, run_engine
    from app.reference.corpus import corpus
    from app.stats.claims import PureDP

    m = corpus()[args.slug]
    extra = {} if args.rescore_late is None else {"rescore_late": args.rescore_late}
    settings = AuditSettings(seed=args.seed, **extra)
    t0 = time.time()
    try:
        res = asyncio.run(run_engine(local_sampler(m.sample, seed=args.seed), m.pairs, m.shape, PureDP(args.claim),
                                     settings))
        outcome = f"refuted {res.refuted}, LB {res.lower_bound:.4g}, samples {res.samples_used:,}"
    except MemoryError:
        outcome = "MemoryError (the job would fail: memory limit)"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.slug} seed {args.seed}, limit {args.memory_mb} MiB, rescore_late {settings.rescore_late}: {outcome}; "
          f"peak resident {peak:.0f} MiB, {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
