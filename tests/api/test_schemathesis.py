"""Schemathesis against the app in process (SQLite): the OpenAPI description is the contract.

Every operation under /v1 and the operations routes is fuzzed with schemathesis' default checks
(no 5xx, documented statuses and content types, response schemas, schema-valid data accepted,
schema-invalid data refused), then the stateful phase follows the OpenAPI links
(mechanism → monitor → alarms, and the others). The dashboard (/ui, HTML) is left out.
The default run keeps few examples per operation (≤ 60 s together); ``-m slow`` runs more.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.auth.service import create_tenant_with_key
from app.db import make_engine, make_session_factory
from app.main import create_app
from app.mechanisms.router import get_prober
from app.settings import Settings

FAST_EXAMPLES = int(os.environ.get("DPWATCH_FUZZ_EXAMPLES", "10"))
SLOW_EXAMPLES = 100
# schemathesis' examples and coverage phases are built while pytest collects (minutes on this
# schema, even when the test is then deselected): on only with DPWATCH_FUZZ_COVERAGE=1.
COVERAGE = os.environ.get("DPWATCH_FUZZ_COVERAGE") == "1"
EXCLUDE_PATH = r"^/(ui|docs|redoc|static)"

# Rules between fields that JSON Schema cannot state; each is written in the field's description
# and answered with a 422 that points at the field. For these operations only, schemathesis'
# "schema-valid data is accepted" check is left out (every other check still runs on them).
CROSS_FIELD_RULES = {
    "POST /v1/mechanisms": "dim only with output_kind 'vector'; output_shape agrees with output_kind and dim",
    "PATCH /v1/mechanisms/{mechanism_id}": "the same, against the stored mechanism",
    "POST /v1/monitors": "a 5-field cron that fires; exactly one of period_seconds and cron; epsilon xor claim; "
    "events that fit the mechanism's output kind; x differs from x'",
    "POST /v1/mechanisms/{mechanism_id}/discover": "region is [low, high] with low < high",
    "POST /v1/mechanisms/{mechanism_id}/audits": "region is [low, high] with low < high",
    "POST /v1/mechanisms/{mechanism_id}/searches": "a claim of exactly one form; the domain's own rules (low < high, "
    "size.min <= size.max, sensitivity with linf/l1 only, ...); a domain in the request or on the mechanism",
    "POST /v1/monitors/{monitor_id}/checks/from-search": "job_id names a succeeded search of the monitor's mechanism "
    "with that finding",
    "POST /v1/silences": "at least one matcher; ends_at after starts_at, in the future, at most 90 days later; the "
    "monitor and mechanism are this tenant's",
    "PATCH /v1/monitors/{monitor_id}": "a 5-field cron that fires; not both period_seconds and cron, nor a null one "
    "alone",
    # Not a rule between fields but one on the stored state, stated in the route's description: an
    # input to probe with (the body's database, the mechanism's probe_database or a monitor's check).
    "POST /v1/mechanisms/{mechanism_id}/validate": "an input to probe with must exist",
}


def _excluded(case: Any) -> list[Any]:
    return [positive_data_acceptance] if case.operation.label in CROSS_FIELD_RULES else []


async def _fake_prober(mechanism: Any, settings: Any, *, database: Any, n: int) -> dict[str, Any]:
    """``?validate=true`` without a network: a correct answer of n zeros."""
    return {"ok": True, "reason": None, "problems": [], "outputs_received": n, "elapsed_seconds": 0.0,
            "preview": [0.0] * min(n, 5)}


_DB_DIR = Path(tempfile.mkdtemp(prefix="dpwatch-fuzz-"))
_URL = f"sqlite:///{_DB_DIR / 'dpwatch.sqlite3'}"
_SETTINGS = Settings(
    _env_file=None,  # type: ignore[call-arg]
    database_url=_URL, migrate_on_start=False, env="development", allow_networks=["0.0.0.0/0"],
    worker_id="fuzz", public_url="http://dpwatch.test", log_level="ERROR",
)
# The schema is read from the app at import (it needs no database); the database is attached by
# the fixture below, from the suite's migrated SQLite template.
APP = create_app(_SETTINGS)
APP.dependency_overrides[get_prober] = lambda: _fake_prober
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).exclude(path_regex=EXCLUDE_PATH)


@pytest.fixture(scope="module")
def fuzz_app(sqlite_template: Path) -> Iterator[tuple[Any, str]]:
    shutil.copyfile(sqlite_template, _DB_DIR / "dpwatch.sqlite3")
    engine = make_engine(_URL)
    factory = make_session_factory(engine)
    with factory() as session:
        _tenant, key = create_tenant_with_key(session, "fuzz", "fuzz-key")
        session.commit()
    APP.state.session_factory = factory
    yield APP, key
    APP.state.session_factory = None
    engine.dispose()
    shutil.rmtree(_DB_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def api_schema(fuzz_app: tuple[Any, str]) -> Any:
    return schema


def _settings(examples: int, *, explicit: bool) -> hypothesis.settings:
    # Without Phase.explicit, schemathesis skips its "examples" and "coverage" phases: the coverage
    # phase alone takes minutes on this schema, so it runs only in the `slow` variant.
    phases = [Phase.explicit, Phase.generate] if explicit else [Phase.generate]
    return hypothesis.settings(
        max_examples=examples, deadline=None, derandomize=True, database=None, phases=phases,
        suppress_health_check=list(HealthCheck),
    )


@schema.parametrize()
@_settings(FAST_EXAMPLES, explicit=False)
def test_api_contract(case: Any, fuzz_app: tuple[Any, str]) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {fuzz_app[1]}"}, excluded_checks=_excluded(case))


@pytest.mark.slow
@schema.parametrize()
@_settings(SLOW_EXAMPLES, explicit=COVERAGE)
def test_api_contract_slow(case: Any, fuzz_app: tuple[Any, str]) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {fuzz_app[1]}"}, excluded_checks=_excluded(case))


def _run_stateful(api_schema: Any, key: str, examples: int, steps: int) -> None:
    machine = api_schema.as_state_machine()

    class Workflow(machine):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"Authorization": f"Bearer {key}"}}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            kwargs.pop("headers", None)
            case.validate_response(response, excluded_checks=_excluded(case))

    Workflow.run(settings=hypothesis.settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck),
    ))


def test_api_stateful(api_schema: Any, fuzz_app: tuple[Any, str]) -> None:
    _run_stateful(api_schema, fuzz_app[1], examples=FAST_EXAMPLES, steps=6)


@pytest.mark.slow
def test_api_stateful_slow(api_schema: Any, fuzz_app: tuple[Any, str]) -> None:
    _run_stateful(api_schema, fuzz_app[1], examples=SLOW_EXAMPLES, steps=20)
