"""The exceptions of ``dpwatch_sdk.testing``."""

from __future__ import annotations

import typing

__all__ = ["DPViolation", "DpwatchError"]


class DPViolation(AssertionError):
    """The claim is refuted: the mechanism's outputs contradict it (at level α, or with certainty in
    coupled mode). ``result`` holds the whole test's result."""

    def __init__(self, message: str, result: typing.Any) -> None:
        super().__init__(message)
        self.result = result


class DpwatchError(RuntimeError):
    """The test could not run (a sampler that fails, a usage error; for the dpwatch command: not
    installed, a timeout, a sampling failure). Never a pass."""
