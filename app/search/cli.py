"""``dpwatch search``: the command's body (``app.cli`` imports it when the command runs).

Exit codes: 1 when a violation is certified on fresh samples, 0 when none is found within the
budget (which does not mean that the claim holds), 2 on usage errors (a bad domain, claim, shape
or option, or an endpoint that fails on every input tried, or on so many that no pair could be sampled).

``--junit-xml PATH`` also writes the verdict as a JUnit report (app/reporting/junit.py): a failed
test case per certified finding, one passed case when nothing was certified, an error case when the
search could not run (usage errors before it starts write no report, as for ``dpwatch audit``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

__all__ = ["run_command", "usage_problem"]


class UsageError(Exception):
    """Exit 2 with this message."""


def _claim_spec(epsilon: float | None, delta: float, mu: float | None, rho: float | None) -> dict[str, Any]:
    given = sum(v is not None for v in (epsilon, mu, rho))
    if given != 1:
        raise UsageError("give one claim: --epsilon E [--delta D], --mu M or --rho R")
    if delta and epsilon is None:
        raise UsageError("--delta goes with --epsilon")
    if epsilon is not None:
        return {"epsilon": epsilon, "delta": delta} if delta else {"epsilon": epsilon}
    return {"gdp_mu": mu} if mu is not None else {"zcdp_rho": rho}


_MISSING_DOMAIN = ("give --domain: a JSON file or inline JSON, e.g. '{\"records\": {\"type\": \"real\", "
                   "\"low\": 0, \"high\": 1}, \"size\": {\"min\": 0, \"max\": 10}, \"neighbours\": "
                   "[\"add_remove\"]}' (docs/search.md)")


def usage_problem(domain: str | None, epsilon: float | None, delta: float, mu: float | None,
                  rho: float | None) -> str | None:
    """The usage errors found without loading the search's engine (no domain, no or two claims)."""
    if domain is None:
        return _MISSING_DOMAIN
    try:
        _claim_spec(epsilon, delta, mu, rho)
    except UsageError as exc:
        return str(exc)
    return None


def _early_rate(url: str, domain: str | None, shape: str | None, output_kind: str | None, dim: int | None,
                secret: str | None, max_batch: int, binary: bool, allow_networks: list[str], budget: int,
                time_limit: float | None, err: Any) -> tuple[Any, str] | None:
    """Time the endpoint on the first candidate database before the search's statistics are
    loaded, and print how long the budget will take (app.sampling.timing): (the measurement, the
    secret used), or None when the shape is not declared or the domain not readable (the search
    measures itself then)."""
    if domain is None or (shape is None and output_kind is None):
        return None
    import asyncio
    import math

    from app.sampling.protocol import generate_secret
    from app.sampling.safe_http import SafeHttpConfig
    from app.sampling.timing import budget_estimate, endpoint_rate, limit_left
    from app.search.domain import InputDomain
    from app.search.generators import candidate_pairs, statdp_patterns
    from app.stats.shapes import OutputShape

    try:
        text = domain.strip()
        the_domain = InputDomain.model_validate_json(text if text.startswith("{") else Path(text).read_text())
        patterns = statdp_patterns(the_domain)  # the edge cases and Halton load scipy.stats: seconds
        first = patterns[0].x if patterns else candidate_pairs(the_domain, 1)[0].x
        if shape is not None:
            declared = OutputShape.model_validate_json(shape)
        else:
            assert output_kind is not None  # one of the two, checked on entry
            declared = OutputShape.from_output_kind(output_kind, dim)
        the_secret = secret or generate_secret()
        measured = asyncio.run(endpoint_rate(url, the_secret, declared, first, max_batch=max_batch, binary=binary,
                                             http_config=SafeHttpConfig(allow_networks=tuple(allow_networks))))
    except Exception:  # noqa: BLE001 - the search itself reports what is wrong with the domain or endpoint
        return None
    left = limit_left(time_limit)
    usable = math.inf if left is None else measured.rate * max(0.0, left - 4.0) * 0.85
    size = len(first) if isinstance(first, list) else None
    # The rate of one small database: a search also draws on the domain's largest ones, which a table
    # release answers far more slowly (a PipelineDP mean: 21 581 outputs/s here, 590/s over its search).
    where = ("" if size is None else
             f" (timed on a database of {size} {'rows' if the_domain.is_table else 'records'}; larger ones may "
             "answer more slowly)")
    err(budget_estimate(measured, budget, time_limit, usable=usable) + where)
    return measured, the_secret


def run_command(*, url: str, domain: str | None, epsilon: float | None, delta: float, mu: float | None,
                rho: float | None, output_kind: str | None, dim: int | None, shape: str | None, budget: int,
                time_limit: float | None, alpha: float, candidates: int, seed: int, secret: str | None, max_batch: int,
                binary: bool, allow_networks: list[str], as_json: bool, progress_bar: bool,
                monitor_body_path: Path | None, mechanism_id: str | None,
                echo: Any, err: Any, junit_xml: Path | None = None, full_report: bool = False,
                setup_logging: Any = None) -> int:
    """Run the search and print its report; returns the exit code (module docstring)."""
    early = _early_rate(url, domain, shape, output_kind, dim, secret, max_batch, binary, allow_networks, budget,
                        time_limit, err)
    if early is not None:
        secret = early[1]
    if setup_logging is not None:
        setup_logging()
    from app.sampling.client import MechanismEndpoint
    from app.sampling.protocol import SamplingError, generate_secret
    from app.sampling.safe_http import SafeHttpConfig
    from app.search.report import format_search_report, monitor_body
    from app.search.run import EndpointUnusable, SearchSettings
    from app.search.service import make_claim, read_domain, search_endpoint
    from app.stats.shapes import OutputShape

    try:
        if domain is None:
            raise UsageError(_MISSING_DOMAIN)
        the_domain = read_domain(domain)
        claim = make_claim(_claim_spec(epsilon, delta, mu, rho))
        if shape is not None and output_kind is not None:
            raise UsageError("give --shape or --output-kind, not both")
        declared = None
        if shape is not None:
            declared = OutputShape.model_validate_json(shape)
        elif output_kind is not None:
            declared = OutputShape.from_output_kind(output_kind, dim)
        elif dim is not None:
            raise UsageError("--dim goes with --output-kind vector")
        from app.sampling.timing import limit_left

        settings = SearchSettings(alpha=alpha, budget=budget, time_limit=limit_left(time_limit), seed=seed,
                                  max_candidates=candidates, stop_at_first=not full_report)
        http_config = SafeHttpConfig(allow_networks=tuple(allow_networks))
        the_secret = secret or generate_secret()
    except UsageError as exc:
        err(f"error: {exc}")
        return 2
    except ValueError as exc:
        err(f"error: {str(exc).splitlines()[0] if 'validation error' not in str(exc) else exc}")
        return 2

    async def run() -> Any:
        nonlocal declared
        if declared is None:
            from app.audit.service import probe_shape
            from app.search.generators import candidate_pairs

            pair = candidate_pairs(the_domain, limit=1)[0]
            # a table's first pair is often the empty table: probe the fuller side
            first = max((pair.x, pair.x_prime), key=len) if the_domain.is_table else pair.x
            probe = MechanismEndpoint(sampling_url=url, secret=the_secret, timeout_seconds=60)
            detection = await probe_shape(probe, first, 2_000, http_config=http_config)
            declared = detection.shape
            err(f"detected output shape: {declared.describe()} (on {json.dumps(first)[:80]}; declare --output-kind "
                "or --shape if other inputs answer in another shape)")
        endpoint = MechanismEndpoint(sampling_url=url, secret=the_secret, max_batch=max_batch, timeout_seconds=60,
                                     prefer_binary=binary, shape=declared)
        if not progress_bar:
            def rate_line(p: Any) -> None:  # the time the budget will take, even without a progress bar
                if p.phase == "rate" and early is None:
                    err(p.message)

            return await search_endpoint(endpoint, the_domain, claim, settings, http_config=http_config,
                                         progress=rate_line, measured=early[0] if early else None)
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed:,}/{task.total:,} outputs"), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=False) as bar:
            task = bar.add_task("generating candidates", total=settings.budget)

            def on_progress(p: Any) -> None:
                if p.phase == "rate" and early is None:
                    bar.console.print(p.message, markup=False)
                head, _, left = p.message.partition(" · ")
                bar.update(task, total=p.budget, completed=min(p.samples_used, p.budget),
                           description=head[:60] + (f" · {left}" if left else ""))

            return await search_endpoint(endpoint, the_domain, claim, settings, http_config=http_config,
                                         progress=on_progress, measured=early[0] if early else None)

    from app.reporting.junit import error_case, search_cases, search_properties, shown_url, write_junit

    def failed(problem: str) -> int:
        if junit_xml is not None:
            write_junit(junit_xml, "dpwatch search", [error_case(f"search of {shown_url(url)}", "dpwatch.search",
                                                                  problem)])
        err(f"error: {problem}")
        return 2

    try:
        result = asyncio.run(run())
    except EndpointUnusable as exc:
        return failed(str(exc))
    except SamplingError as exc:
        return failed(f"sampling failed ({exc.reason}): {exc.detail}")
    except ValueError as exc:
        return failed(str(exc))
    report = format_search_report(result, url=url)
    echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else report)
    if junit_xml is not None:
        data = result.to_dict()
        write_junit(junit_xml, "dpwatch search", search_cases(data, url, report), properties=search_properties(data))
    if monitor_body_path is not None:
        body = monitor_body(result, mechanism_id=mechanism_id)
        if body is None:
            err("no informative finding: no monitor body written")
        else:
            monitor_body_path.write_text(json.dumps(body, indent=2))
            err(f"wrote {monitor_body_path}: POST it to /v1/monitors to watch the finding from now on")
    return 1 if result.certified else 0
