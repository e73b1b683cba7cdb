"""pytest plugin (registered through the ``pytest11`` entry point): ``--dpwatch-command`` and the
``dpwatch_auditor`` fixture. Loading it imports nothing heavy."""

from __future__ import annotations

import typing

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpwatch", "DP tests with dpwatch (dpwatch_sdk.testing.assert_dp)")
    group.addoption("--dpwatch-command", default=None,
                    help="How to run dpwatch: a path ('.venv/bin/dpwatch'), a command line ('pipx run dpwatch', "
                         "'docker run --rm --network host dpwatch dpwatch'). Default: $DPWATCH_COMMAND, else "
                         "`dpwatch` on PATH.")
    group.addoption("--dpwatch-junit-dir", default=None,
                    help="Write each assert_dp's JUnit XML report into this folder.")


def pytest_configure(config: pytest.Config) -> None:
    command = config.getoption("--dpwatch-command", default=None)
    junit_dir = config.getoption("--dpwatch-junit-dir", default=None)
    if command or junit_dir:
        from . import testing

        testing.configure(command=command, junit_dir=junit_dir)


@pytest.fixture
def dpwatch_auditor() -> typing.Any:
    """The configured :class:`dpwatch_sdk.testing.Auditor` (``auditor.assert_dp(f, epsilon=…)``)."""
    from . import testing

    return testing.default_auditor()
