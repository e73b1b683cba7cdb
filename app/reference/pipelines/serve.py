"""Serve one pipeline of the catalog over the protocol, for ``dpwatch audit`` and monitors::

    PYTHONPATH=. <library venv>/bin/python -m app.reference.pipelines.serve pipelinedp-count-selection \\
        --port 8080 --secret whsec_...
    # a deployment switched to another version from period 5 on:
    ... serve pipelinedp-count-selection --switch-to pipelinedp-keys-from-data --at-period 5

Prints ``listening on URL`` once the endpoint answers, then serves until killed.
"""

from __future__ import annotations

import argparse
import json
import sys

from dpwatch_sdk import Endpoint

from app.reference.pipelines.build import build, switching


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--secret", default=None, help="the whsec_ secret dpwatch signs with (none: unsigned, tests)")
    parser.add_argument("--switch-to", default=None, help="another entry served from --at-period on")
    parser.add_argument("--at-period", type=int, default=0)
    args = parser.parse_args(argv)
    mechanism = build(args.name) if args.switch_to is None else switching(args.name, args.switch_to, args.at_period)
    server = Endpoint(mechanism, secret=args.secret).start(args.host, args.port)
    claim = mechanism.claim.to_api() if mechanism.claim is not None else None
    print(json.dumps({"listening": server.url, "claim": claim, "shape": mechanism.output.shape(),
                      "domain": mechanism.details.get("domain")}), flush=True)
    try:
        server._thread.join()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        server.stop()
        sys.exit(0)


if __name__ == "__main__":
    main()
