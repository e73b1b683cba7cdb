"""DP tests you can leave in CI: :func:`assert_dp` runs in-process, with no server and no
environment variable (``pip install 'dpwatch-sdk[testing]'``: numpy and scipy).

    from dpwatch_sdk.testing import assert_dp

    def test_noisy_sum_is_1_dp():
        assert_dp(noisy_sum, epsilon=1.0, pairs=[([0, 0, 0], [0, 0, 1])])

Two tests run, and the first that refutes the claim fails the test (:class:`DPViolation`):

- **coupled mode** (``_coupled``): where the sampler draws its Laplace or Gaussian noise from the
  generator dpwatch passes, x and x′ run on the same random stream and on a replay with zero
  noise; when both are an answer plus a multiple of the noise, the privacy loss at the pair is
  computed exactly and a violation is certain (no false failures). Otherwise it says why it is
  inconclusive;
- **the sequential test** (``_sequential``): batches of fresh outputs, events chosen on earlier
  outputs only, e-processes that stop at the first batch where the evidence reaches 1/α. A
  mechanism that satisfies its claim fails with probability at most ``alpha``
  (:data:`DEFAULT_ALPHA` = 10⁻⁵), whenever it stops.

Every run has a seed (``seed=``, ``--dpwatch-seed``, ``$DPWATCH_SEED``, else random) and prints it
with the command that reproduces the verdict, and states its power: the smallest violation it would
have caught with probability ≥ 0.9. docs/sdk.md has the method and the measured rates.

``assert_dp(domain=…)`` and :class:`Auditor` use a dpwatch installation (the server's CLI) instead.
"""

from __future__ import annotations

try:
    import numpy  # noqa: F401
    import scipy  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("dpwatch_sdk.testing needs numpy and scipy: pip install 'dpwatch-sdk[testing]'") from exc

from ._api import DEFAULT_ALPHA, DEFAULT_BUDGET, DEFAULT_TIME_LIMIT, DpTestResult, assert_dp, check_dp, configure
from ._cli_audit import Auditor, CliAuditResult, configure_auditor, default_auditor
from ._coupled import CoupledFinding, CoupledReport
from ._errors import DPViolation, DpwatchError
from ._sequential import PowerPoint, PowerStatement

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_BUDGET",
    "DEFAULT_TIME_LIMIT",
    "Auditor",
    "CliAuditResult",
    "CoupledFinding",
    "CoupledReport",
    "DPViolation",
    "DpTestResult",
    "DpwatchError",
    "PowerPoint",
    "PowerStatement",
    "assert_dp",
    "check_dp",
    "configure",
    "configure_auditor",
    "default_auditor",
]
