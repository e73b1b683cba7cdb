"""pytest plugin (registered through the ``pytest11`` entry point): options for
``dpwatch_sdk.testing.assert_dp`` and the ``dpwatch_auditor`` fixture. Loading it imports nothing
heavy: ``dpwatch_sdk.testing`` (numpy, scipy) is imported only when an option is given or the
fixture is used."""

from __future__ import annotations

import os
import typing

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpwatch", "DP tests with dpwatch (dpwatch_sdk.testing.assert_dp)")
    group.addoption("--dpwatch-seed", type=int, default=None,
                    help="Seed of every assert_dp that gives none, to reproduce a failure (default: $DPWATCH_SEED, "
                         "else a random seed per call, printed with its verdict).")
    group.addoption("--dpwatch-budget", type=int, default=None,
                    help="Pin the outputs per database of every assert_dp, and switch its time limit off (default: "
                         "$DPWATCH_BUDGET, else each call's budget: 200,000).")
    group.addoption("--dpwatch-time-limit", type=float, default=None,
                    help="Seconds an assert_dp may take; a slower sampler gets a smaller budget, which its report "
                         "states (default: each call's time_limit, 60).")
    group.addoption("--dpwatch-command", default=None,
                    help="Only for assert_dp(domain=...) and the dpwatch_auditor fixture: how to run the dpwatch "
                         "server's CLI, a path ('.venv/bin/dpwatch') or a command line ('docker run --rm --network "
                         "host dpwatch dpwatch'). Default: $DPWATCH_COMMAND, else `dpwatch` on PATH.")
    group.addoption("--dpwatch-junit-dir", default=None,
                    help="Only with the dpwatch CLI (dpwatch_auditor, domain=): write each `dpwatch audit`'s JUnit XML "
                         "report into this folder.")


def pytest_configure(config: pytest.Config) -> None:
    seed = config.getoption("--dpwatch-seed", default=None)
    budget = config.getoption("--dpwatch-budget", default=None)
    time_limit = config.getoption("--dpwatch-time-limit", default=None)
    if seed is not None or budget is not None or time_limit is not None:
        from . import testing

        testing.configure(seed=seed, budget=budget, time_limit=time_limit)
    command = config.getoption("--dpwatch-command", default=None)
    junit_dir = config.getoption("--dpwatch-junit-dir", default=None)
    if command or junit_dir:
        from . import testing

        testing.configure_auditor(command=command, junit_dir=junit_dir)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--dpwatch-seed", default=None)
    if seed is None and os.environ.get("DPWATCH_SEED"):
        seed = os.environ["DPWATCH_SEED"]
    if seed is not None:
        return f"dpwatch: every assert_dp without a seed uses seed {seed}"
    return None


@pytest.fixture
def dpwatch_auditor() -> typing.Any:
    """The configured :class:`dpwatch_sdk.testing.Auditor` (the dpwatch CLI: ``auditor.run_url(...)``)."""
    from . import testing

    return testing.default_auditor()
