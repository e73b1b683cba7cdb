"""Where a worker's busy samples go: a py-spy speedscope profile cut into components.

Samples whose innermost frame is a wait (the event loop's select, psycopg waiting for the server,
an idle thread pool thread) are dropped; the others are attributed to the first matching
component of COMPONENTS (in that order) with a frame anywhere in the stack. With the number of periods the
worker committed during the recording and its measured CPU seconds, each component's share is
converted to ms of CPU per period.

    .venv/bin/python bench/profile_breakdown.py PROFILE.speedscope.json [--periods N --cpu-seconds S]
"""

from __future__ import annotations

import argparse
import collections
import json

IDLE = ("EpollSelector.select", "Connection.wait", "Condition.wait", "_worker@thread.py:81", "select@selectors",
        "Event.wait", "Thread.join", "sleep")

#: (component, substrings of "name file" any of which marks a frame as the component's)
COMPONENTS = [
    ("logging (structlog)", ("structlog", "app/observability.py", "logging/__init__")),
    ("db: connection checkout + pre-ping", ("do_ping", "_ConnectionFairy._checkout", "Pool.connect")),
    ("db: commit / rollback", ("do_commit", "do_rollback")),
    ("claim (leases)", ("claim_monitors", "Worker._claim", "_fair_query")),
    ("plan (ORM read)", ("PeriodRunner.plan",)),
    ("routine write (SQL build + execute)", ("write_routine_period", "encode_outputs")),
    ("ORM write path", ("PeriodRunner._write_success",)),
    ("statistics (count, detector step)", ("app/stats", "PeriodRunner.compute", "event_contains", "check_outputs",
                                            "app/monitors/detectors", "app/claims")),
    ("sampling: answer parsing", ("app/sampling/answers", "frombuffer")),
    ("sampling: request build + signing", ("sign_headers", "encode_request", "standardwebhooks", "hmac")),
    ("sampling: HTTP client (httpx/httpcore/h11/safe_http)", ("httpx", "httpcore", "h11", "safe_http", "anyio")),
    ("sampling: retry wrapper (tenacity)", ("tenacity",)),
    ("event loop + thread hops", ("asyncio", "concurrent/futures", "threading")),
]


def frame_key(f: dict) -> str:
    return f"{f['name']} {f.get('file', '')}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--periods", type=int, default=0)
    ap.add_argument("--cpu-seconds", type=float, default=0.0)
    args = ap.parse_args()
    d = json.load(open(args.profile))
    frames = [frame_key(f) for f in d["shared"]["frames"]]
    comp = collections.Counter()
    busy = 0
    for prof in d["profiles"]:
        for stack in prof["samples"]:
            if not stack:
                continue
            leaf = d["shared"]["frames"][stack[-1]]
            leaf_id = f"{leaf['name']}@{leaf.get('file', '').rsplit('/', 1)[-1]}:{leaf.get('line')}"
            if any(i in leaf_id or leaf["name"] == i for i in IDLE):
                continue
            busy += 1
            names = [frames[i] for i in reversed(stack)]
            # the first component of COMPONENTS (in its order) with a frame anywhere in the stack
            found = next((c for c, keys in COMPONENTS if any(k in name for name in names for k in keys)), "other")
            comp[found] += 1
    print(f"busy samples: {busy}")
    print("| component | share of busy samples | ms of CPU per period |")
    print("|---|---|---|")
    for c, n in comp.most_common():
        ms = (n / busy * args.cpu_seconds / args.periods * 1e3) if args.periods else float("nan")
        print(f"| {c} | {n / busy * 100:.1f}% | {ms:.2f} |")


if __name__ == "__main__":
    main()
