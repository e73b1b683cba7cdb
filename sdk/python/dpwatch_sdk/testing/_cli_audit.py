"""A dpwatch installation (the server's ``dpwatch`` command) auditing an endpoint: what
``assert_dp(domain=…)`` uses to search an input domain (``dpwatch search``), and what a test uses to
audit an endpoint that its own web app serves (``Auditor.run_url``, ``dpwatch audit``).

``assert_dp(pairs=…)`` needs none of this: it runs in-process (``dpwatch_sdk.testing``).

Which dpwatch runs: ``command=`` / ``configure(command=...)``, the ``--dpwatch-command`` pytest
option, ``$DPWATCH_COMMAND``, else ``dpwatch`` on ``PATH``. A command is a path or a command line:
``/opt/dpwatch/.venv/bin/dpwatch`` or ``docker run --rm --network host dpwatch dpwatch`` (the
container must share the host's loopback). dpwatch itself is installed from its repository
(``pip install -e ./sdk/python -e .`` in a checkout; README), not from the package index.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..endpoint import Endpoint, Mechanism
from ..mechanism import Claim
from ..protocol import Output, generate_secret
from ._errors import DPViolation, DpwatchError

__all__ = ["Auditor", "CliAuditResult", "DpwatchError", "configure_auditor", "default_auditor"]

#: Outputs per database for ``assert_dp``'s audits: the pilot (2 000) and three rounds (2 000,
#: 4 000, 8 000). Enough to refute ε doubled (a Laplace mechanism with half its noise) in every
#: run measured (docs/sdk.md); raise it for subtler violations.
DEFAULT_BUDGET = 20_000
DEFAULT_TIMEOUT = 900.0


@dataclass
class CliAuditResult:
    """What one dpwatch run said. ``violated``: the claim was refuted (audit) or a violation was
    certified (search); otherwise nothing was found with this budget, which is not a proof."""

    command: str
    exit_code: int
    violated: bool
    report: str
    stderr: str
    seconds: float
    claim: Claim
    junit_xml: str | None = None
    details: dict[str, typing.Any] = field(default_factory=dict)


def _pairs_json(pairs: typing.Any) -> str:
    if isinstance(pairs, (str, os.PathLike)):
        text = str(pairs)
        return text if text.lstrip().startswith(("[", "{")) else Path(text).read_text()
    if isinstance(pairs, dict):
        return json.dumps(pairs)
    items = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, dict) and {"x", "x_prime"} <= set(pair):
            items.append({"x": pair["x"], "x_prime": pair["x_prime"]})
        elif isinstance(pair, (list, tuple)) and len(pair) == 2:
            items.append({"x": pair[0], "x_prime": pair[1]})
        else:
            raise ValueError(f"pair {i}: give (x, x_prime) or {{'x': …, 'x_prime': …}}, got {pair!r}")
    if not items:
        raise ValueError("pairs must hold at least one pair of neighbouring databases")
    return json.dumps(items)


def _claim(epsilon: float | None, delta: float | None, mu: float | None, rho: float | None,
           claim: Claim | None) -> Claim | None:
    if claim is not None:
        if any(v is not None for v in (epsilon, delta, mu, rho)):
            raise ValueError("give claim= or epsilon=/delta=/mu=/rho=, not both")
        return claim
    if any(v is not None for v in (epsilon, mu, rho)):
        return Claim.of(epsilon, delta, mu, rho)
    if delta is not None:
        raise ValueError("delta goes with epsilon")
    return None


def _mask(argv: Sequence[str], secret: str) -> str:
    return shlex.join(argv).replace(secret, "whsec_…")


def _test_name() -> str:
    current = os.environ.get("PYTEST_CURRENT_TEST", "assert_dp").split(" ")[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", current)[-120:]


class Auditor:
    """A dpwatch installation that runs DP tests. ``command``: see the module's docstring."""

    def __init__(self, command: str | Sequence[str] | None = None, *, env: dict[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT, junit_dir: str | os.PathLike[str] | None = None) -> None:
        self._command = command
        self.env = env
        self.timeout = timeout
        self.junit_dir = None if junit_dir is None else Path(junit_dir)
        self._has_search: bool | None = None

    @property
    def argv(self) -> list[str]:
        command = self._command or os.environ.get("DPWATCH_COMMAND")
        if command:
            return shlex.split(command) if isinstance(command, str) else list(command)
        found = shutil.which("dpwatch")
        if found is None:
            raise DpwatchError("no dpwatch command to run this (searching a domain or auditing a served endpoint "
                               "needs the dpwatch server's CLI; assert_dp(pairs=...) does not): install dpwatch from "
                               "its repository into a virtual environment (pip install -e ./sdk/python -e . in a "
                               "checkout) and set DPWATCH_COMMAND to its bin/dpwatch, or pass --dpwatch-command")
        return [found]

    def _run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **(self.env or {})}
        try:
            return subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=timeout, env=env,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise DpwatchError(f"cannot run dpwatch ({shlex.join(self.argv)}): {exc}") from None

    def has_search(self) -> bool:
        """Whether this dpwatch has the ``search`` command (newer dpwatch releases)."""
        if self._has_search is None:
            try:
                done = self._run(["search", "--help"], timeout=120)
            except subprocess.TimeoutExpired:
                done = None
            self._has_search = done is not None and done.returncode == 0
        return self._has_search

    def run(self, f: Mechanism | Callable[..., typing.Any], *, epsilon: float | None = None,
            delta: float | None = None, mu: float | None = None, rho: float | None = None,
            claim: Claim | None = None, output: Output | str | tuple[str, int] | None = None,
            **options: typing.Any) -> CliAuditResult:
        """Serve ``f`` on 127.0.0.1 (an ephemeral port) and test it with :meth:`run_url`; the
        result, without failing. See :func:`assert_dp`."""
        mechanism = f if isinstance(f, Mechanism) else Mechanism(f, Output.of(output or "real"))
        if output is not None:
            mechanism = Mechanism(mechanism.sample, Output.of(output), mechanism.claim, mechanism.name)
        the_claim = _claim(epsilon, delta, mu, rho, claim) or mechanism.claim
        if the_claim is None:
            raise ValueError("give the claim to test: epsilon= [delta=], mu= or rho= (or an adapter's mechanism, "
                             "which carries its own)")
        secret = generate_secret()
        with Endpoint(mechanism, secret=secret).start("127.0.0.1", 0) as server:
            return self.run_url(server.url, secret=secret, claim=the_claim, output=mechanism.output, **options)

    def run_url(self, url: str, *, secret: str, claim: Claim, pairs: typing.Any = None, domain: typing.Any = None,
                output: Output | str | tuple[str, int] | None = None, alpha: float = 0.05,
                budget: int | None = None, first_round: int | None = None, timeout: float | None = None,
                junit_xml: str | os.PathLike[str] | None = None, allow_networks: str = "127.0.0.0/8",
                extra_args: Sequence[str] = ()) -> CliAuditResult:
        """Run ``dpwatch audit`` (``pairs``) or ``dpwatch search`` (``domain``) on an endpoint that is
        already served at ``url`` and checks ``secret``."""
        spec = Output.of(output) if output is not None else None
        if (pairs is None) == (domain is None):
            raise ValueError("give pairs= (neighbouring databases, for dpwatch audit) or domain= (an input domain, "
                             "for dpwatch search), not both")
        if not 0 < alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        junit_path = Path(junit_xml) if junit_xml is not None else (
            self.junit_dir / f"{_test_name()}.xml" if self.junit_dir is not None else None)
        common = [*claim.cli_args(), "--secret", secret, "--allow-networks", allow_networks]
        junit = []
        if junit_path is not None:  # `dpwatch audit --junit-xml`; `search` has no such option yet
            junit_path.parent.mkdir(parents=True, exist_ok=True)
            junit = ["--junit-xml", str(junit_path)]
        with tempfile.TemporaryDirectory(prefix="dpwatch-test-") as tmp:
            if pairs is not None:
                verb = "audit"
                args = ["audit", url, "--pairs", _pairs_json(pairs), "--alpha", repr(alpha),
                        "--budget", str(budget or DEFAULT_BUDGET), "--no-progress", *common, *junit]
                if spec is not None and (spec.kind != "vector" or spec.length is not None):
                    args += ["--shape", json.dumps(spec.shape())]
                if first_round is not None:
                    args += ["--first-round", str(first_round)]
            else:
                verb = "search"
                junit_path = None
                if not self.has_search():
                    raise DpwatchError(f"domain= needs `dpwatch search`, which the dpwatch at {shlex.join(self.argv)} "
                                       "does not have; give pairs= (dpwatch audit) or upgrade dpwatch")
                domain_file = Path(tmp) / "domain.json"
                domain_file.write_text(domain if isinstance(domain, str) else json.dumps(domain))
                args = ["search", url, "--domain", str(domain_file), "--alpha", repr(alpha), *common]
                if spec is not None:
                    args += ["--output-kind", spec.output_kind]
                    if spec.kind == "vector" and spec.length is not None:
                        args += ["--dim", str(spec.length)]
                if budget is not None:
                    args += ["--budget", str(budget)]
            args += list(extra_args)
            started = time.monotonic()
            try:
                done = self._run(args, timeout or self.timeout)
            except subprocess.TimeoutExpired:
                raise DpwatchError(f"dpwatch {verb} did not finish within {timeout or self.timeout:g} s") from None
            seconds = time.monotonic() - started
        shown = _mask([*self.argv, *args], secret)
        if done.returncode not in (0, 1):
            raise DpwatchError(f"dpwatch {verb} failed (exit code {done.returncode}): "
                               f"{done.stderr.strip()[-2000:] or done.stdout.strip()[-2000:]}\ncommand: {shown}")
        return CliAuditResult(shown, done.returncode, done.returncode == 1, done.stdout.strip(), done.stderr.strip(),
                            seconds, claim, str(junit_path) if junit_path else None, {"verb": verb})

    def assert_dp(self, f: Mechanism | Callable[..., typing.Any], **options: typing.Any) -> CliAuditResult:
        """Fail (``DPViolation``) when dpwatch refutes the claim; see :func:`assert_dp`."""
        result = self.run(f, **options)
        name = (f.name if isinstance(f, Mechanism) else None) or getattr(f, "__name__", None) or "the mechanism"
        self.fail_on_violation(result, str(name))
        return result

    @staticmethod
    def fail_on_violation(result: CliAuditResult, name: str) -> None:
        """Raise :class:`DPViolation` with dpwatch's report when ``result`` is a violation."""
        if result.violated:
            what = "refuted" if result.details.get("verb") == "audit" else "found a certified violation of"
            raise DPViolation(f"dpwatch {what} the claim {result.claim.describe()} of {name}:\n\n{result.report}",
                              result)


_default: Auditor | None = None


def configure_auditor(command: str | Sequence[str] | None = None, *, junit_dir: str | os.PathLike[str] | None = None,
                      timeout: float = DEFAULT_TIMEOUT) -> Auditor:
    """Set the dpwatch installation that ``assert_dp(domain=…)`` and the ``dpwatch_auditor`` fixture
    use (the pytest plugin calls this with ``--dpwatch-command`` and ``--dpwatch-junit-dir``)."""
    global _default
    _default = Auditor(command, junit_dir=junit_dir, timeout=timeout)
    return _default


def default_auditor() -> Auditor:
    global _default
    if _default is None:
        _default = Auditor()
    return _default
