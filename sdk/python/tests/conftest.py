"""Fixtures of the SDK's tests. The tests that run dpwatch need a dpwatch installation:
``DPWATCH_COMMAND`` (the main suite's tests/test_sdk.py sets it to the server's venv). Without one
they skip, except under ``CI``, where they fail."""

from __future__ import annotations

import os
import shutil

import pytest
from dpwatch_sdk.testing import Auditor


@pytest.fixture(scope="session")
def auditor() -> Auditor:
    command = os.environ.get("DPWATCH_COMMAND") or shutil.which("dpwatch")
    if not command:
        if os.environ.get("CI"):
            pytest.fail("no dpwatch installation: set DPWATCH_COMMAND")
        pytest.skip("no dpwatch installation: set DPWATCH_COMMAND to run the audits")
    return Auditor(command)
