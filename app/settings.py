"""Process settings, read from ``DPWATCH_*`` environment variables (and an optional ``.env``).

Follows fastapi/full-stack-fastapi-template's ``core/config.py``: pydantic-settings with
``env_ignore_empty`` so that an empty variable means "use the default", and a model validator
that refuses unsafe combinations outside development.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:
    from app.sampling.safe_http import SafeHttpConfig

DEFAULT_DATA_DIR = Path("data")
DEFAULT_DATABASE_URL = f"sqlite:///{(DEFAULT_DATA_DIR / 'dpwatch.sqlite3').as_posix()}"

# Cloud metadata endpoints: no setting may open these to the sampling client outside development.
_METADATA_ADDRESSES = (
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
)


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(BaseSettings):
    """Every knob of one dpwatch process."""

    model_config = SettingsConfigDict(
        env_prefix="DPWATCH_",
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
    )

    env: Literal["development", "production"] = "development"
    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL. SQLite (the default, a file under ./data) for one process; "
        "postgresql+psycopg://… for anything shared between replicas.",
    )
    migrate_on_start: bool = Field(True, description="Run `alembic upgrade head` when the app starts.")

    # Comma-separated in the environment (DPWATCH_ALLOW_NETWORKS=127.0.0.0/8,10.1.0.0/16) or JSON.
    allow_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="CIDR ranges the sampling client may reach although they are private or "
        "loopback. Empty by default: only public addresses are reachable.",
    )

    tick_seconds: float = Field(1.0, gt=0, description="Interval of the local scheduler ticker.")
    lease_seconds: int = Field(60, ge=1, description="How long a claimed monitor stays leased.")
    max_in_flight: int = Field(
        8, ge=1, le=1024,
        description="Periods one worker runs at once. More in flight costs CPU in the HTTP pool and the "
        "database; 4-8 gave the best throughput on 2 cores (docs/benchmarks.md). Raise it for slow endpoints.",
    )
    max_inflight_per_tenant: int = Field(
        6, ge=0, le=10_000,
        description="Periods of one tenant in flight at once across all replicas (live leases; 0: no cap). "
        "Below a worker's max_in_flight, so that one tenant's slow or hostile endpoints leave room for others; "
        "raise it with the number of replicas (docs/hardening-scheduling.md).",
    )
    max_inflight_per_mechanism: int = Field(
        4, ge=0, le=10_000,
        description="Periods of one mechanism in flight at once across all replicas (live leases; 0: no cap).",
    )
    worker_id: str = Field(default_factory=default_worker_id, min_length=1, max_length=200)
    degraded_after_failures: int = Field(
        3, ge=1, description="K: a monitor turns `degraded` after K consecutive failed periods."
    )
    public_url: str = Field(
        "http://127.0.0.1:8000",
        description="Base URL of this service, used for generatorURL links. When unset, `dpwatch serve` and "
        "`dpwatch demo` derive it from their --host and --port (`with_listen_address`).",
    )

    sampling_max_bytes: int = Field(
        64 * 1024 * 1024, ge=1024,
        description="Cap on the sampling answers of one period, every batch and database together (so also on one answer).",
    )
    sampling_heavy_period_bytes: int = Field(
        8 * 1024 * 1024, ge=0,
        description="A period whose answers pass this many bytes reads on, and writes, one at a time per tenant "
        "in a worker: one tenant's large answers are parsed and held one period at a time, and other tenants' "
        "periods never wait for them. Its other periods wait at the mark (their deadline runs). 0: off.",
    )
    sampling_max_keys: int = Field(
        100_000, ge=1, le=10_000_000,
        description="Distinct keys a keyed sampling answer may release, and a period's batches on one database "
        "together; more fails the period with `oversized` (the bytes alone do not bound a key table's cost).",
    )
    sampling_max_key_length: int = Field(
        1_000, ge=1, le=1_000_000,
        description="Longest key (characters) of a keyed output; a longer one fails the period with `oversized`.",
    )
    sampling_max_attempts: int = Field(
        4, ge=1, le=20, description="Attempts per sampling request within a period (timeouts, connection errors, 5xx, 429)."
    )
    sampling_backoff_seconds: float = Field(
        0.5, ge=0, description="First backoff between sampling attempts; doubles per retry, with jitter."
    )
    discovery_samples: int = Field(
        32_000, ge=400, le=5_000_000,
        description="A monitor's discovery budget: outputs per database the audit engine may draw, in rounds, to "
        "find the events of `auto` checks (app.audit.discovery).",
    )
    discovery_fresh_samples: int = Field(
        20_000, ge=100, le=1_000_000,
        description="Fresh outputs per database on which re-discovery compares its candidates with the existing "
        "checks.",
    )

    job_lease_seconds: int = Field(
        60, ge=3, le=3600,
        description="Lease of a running job (discovery, audit, re-discovery); its heartbeat renews it every third.",
    )
    max_jobs_in_flight: int = Field(
        2, ge=1, le=64,
        description="Jobs one worker runs at once (each in a process of its own: about one core and up to "
        "job_memory_mb each).",
    )
    job_isolation: Literal["process", "inline"] = Field(
        "process",
        description="`process`: each job runs in a child process with the limits below, and the worker's loop only "
        "watches it (app/jobs/isolation.py). `inline`: on the worker's loop, with no limits (tests, tools).",
    )
    job_memory_mb: int = Field(
        768, ge=64, le=1_000_000,
        description="Memory of one job's process: its data segment (RLIMIT_DATA) and resident size. Over it the "
        "job fails with `failure_reason: memory limit` and is not retried.",
    )
    job_cpu_seconds: int = Field(
        3600, ge=1, le=30 * 86_400,
        description="CPU time of one job's process (RLIMIT_CPU); over it the job fails with `time limit`.",
    )
    job_wall_seconds: int = Field(
        7200, ge=1, le=30 * 86_400,
        description="How long one job's process may live; over it the worker kills it (`time limit`).",
    )
    worker_runs_jobs: bool = Field(
        True,
        description="Whether `dpwatch worker` (and `dpwatch serve`'s worker) also runs jobs. Off "
        "(`dpwatch worker --no-jobs`), jobs are left to `dpwatch jobs` processes, on this host or others.",
    )
    # Quotas per tenant: the defaults; a tenant's own values are in `tenant_quotas` (`dpwatch quota`).
    quota_max_monitors: int = Field(
        1000, ge=0, description="Monitors one tenant may have (0: no limit). Over it, creating one is a 429.")
    quota_max_concurrent_jobs: int = Field(
        2, ge=0, description="Jobs of one tenant running at once across all workers (0: no limit); more wait queued.")
    quota_max_queued_jobs: int = Field(
        20, ge=0, description="Jobs of one tenant queued or running (0: no limit). Over it, starting one is a 429.")
    quota_max_outputs_per_day: int = Field(
        5_000_000_000, ge=0,
        description="Outputs one tenant may have drawn per day (0: no limit): its runnable monitors' periods per day "
        "× n × databases, plus the budgets of the jobs it started in the last 24 hours. A request that alone goes "
        "over is a 422, one that goes over with the rest a 429.")
    quota_max_stored_output_bytes: int = Field(
        10 * 2**30, ge=0,
        description="Raw-output bytes one tenant's monitors may keep (0: no limit): outputs_window × n × databases "
        "× bytes per output, summed over its monitors (422 alone, 429 with the rest).")

    # Retention (app/quotas/retention.py), run by the worker.
    retention_days: float = Field(
        30.0, ge=0, description="Periods older than this are deleted (0: kept forever), except those of a monitor's "
        "current horizon and those an alarm points at. Detector state and alarms are kept.")
    retention_every_seconds: float = Field(
        300.0, gt=0, description="How often a worker runs the retention sweep.")
    retention_batch: int = Field(
        5000, ge=1, le=1_000_000, description="Period rows one retention statement deletes at most.")
    retention_vacuum: bool = Field(
        True, description="Postgres: `VACUUM` the period tables after each retention sweep, so that the space of "
        "deleted periods and pruned outputs is reused even where autovacuum is off or behind.")
    calibration_isolation: Literal["process", "inline"] = Field(
        "process",
        description="`process`: a monitor's calibration (event discovery for `auto` checks, a Monte-Carlo threshold) "
        "runs in a child process with the job limits (app/monitors/calibration.py); `inline`: on the worker's loop "
        "(tests that inject a sampling client, tools).",
    )
    calibration_max_attempts: int = Field(
        3, ge=1, le=100,
        description="Attempts at a monitor's calibration that crashed or failed (sampling errors) before the monitor "
        "is paused with the reason (`calibration_error`); one over a memory or time limit is not tried again.",
    )
    calibration_retry_seconds: float = Field(
        30.0, ge=0, le=86_400,
        description="Back-off before a failed calibration is tried again; doubles with each attempt.",
    )
    max_calibrations_in_flight: int = Field(
        1, ge=1, le=64,
        description="Calibrations one worker runs at once (each in a process of its own: about one core and up to "
        "job_memory_mb). Claims take turns across tenants: the tenant with the fewest calibrations in flight, then "
        "the one served least recently, so a tenant runs a second at once only when no other tenant waits.",
    )
    snapshot_isolation: Literal["process", "inline"] = Field(
        "process",
        description="`process`: a snapshot's MPL computation runs in a child process with the job limits; `inline`: "
        "in a thread of the worker.",
    )

    # Webhook deliveries (docs/hardening.md, "Hostile tenants").
    webhook_timeout_seconds: float = Field(
        10.0, gt=0, le=120, description="Deadline of one webhook delivery attempt (connect, send, reply).",
    )
    webhook_max_parallel: int = Field(
        32, ge=1, le=1024, description="Webhook deliveries one worker makes at once.",
    )
    webhook_max_per_receiver: int = Field(
        2, ge=1, le=64,
        description="Deliveries to one webhook in flight at once (per worker): a slow receiver holds only these.",
    )
    webhook_max_per_tenant: int = Field(
        8, ge=1, le=1024,
        description="Deliveries of one tenant in flight at once (per worker), below webhook_max_parallel so that "
        "one tenant's slow receivers leave room for the others.",
    )

    # The API's edges (docs/hardening.md).
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, le=256 * 1024 * 1024,
        description="Largest request body the API reads; larger ones get 413 (Content-Length is checked first, "
        "chunked bodies are counted as they stream).",
    )
    db_statement_timeout_ms: int = Field(
        5000, ge=0, le=600_000,
        description="Postgres `statement_timeout` of API requests (0: none). A request that hits it answers 503 "
        "with Retry-After.",
    )
    db_lock_timeout_ms: int = Field(
        2000, ge=0, le=600_000,
        description="Postgres `lock_timeout` of API requests (0: none). A request that waits longer for a lock "
        "answers 503 with Retry-After.",
    )
    db_pool_timeout_seconds: float = Field(
        5.0, gt=0, le=300,
        description="How long a request waits for a free database connection before it answers 503.",
    )
    readyz_timeout_ms: int = Field(
        1000, ge=50, le=60_000,
        description="/readyz's own statement and lock timeout: it answers 503 when the database does not answer "
        "within it.",
    )
    retry_after_seconds: int = Field(
        2, ge=1, le=3600, description="`Retry-After` of 503 answers caused by database timeouts.",
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "console"] = "json"
    scheduler_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="Least level of APScheduler's own log lines (its INFO lines are two per tick).",
    )

    # The dashboard (app/web, docs/dashboard.md).
    session_secret: SecretStr | None = Field(
        None, description="Key that signs dashboard sessions and CSRF tokens. Unset: a random key per process, "
        "so sessions end on restart and do not span replicas; set it when several API processes serve the dashboard.",
    )
    cookie_secure: bool | None = Field(
        None, description="Send the dashboard's cookies with `Secure` (https only). Unset: on, except in development.",
    )
    session_max_age_seconds: int = Field(
        12 * 3600, ge=60, le=30 * 24 * 3600, description="How long a dashboard sign-in lasts."
    )
    key_cache_seconds: float = Field(
        5.0, ge=0, le=60,
        description="How long an API process reuses a resolved API key without asking the database (0: a query "
        "per request). A key revoked through another process may be accepted this long after (docs/keys.md).",
    )
    metrics_cache_seconds: float = Field(
        5.0, ge=0, le=300, description="How long /metrics reuses its per-monitor numbers (0: a query per scrape).",
    )

    @field_validator("allow_networks", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("allow_networks")
    @classmethod
    def _valid_networks(cls, value: list[str]) -> list[str]:
        out = []
        for item in value:
            try:
                out.append(str(ipaddress.ip_network(item, strict=False)))
            except ValueError as exc:
                raise ValueError(f"allow_networks: {item!r} is not a CIDR range ({exc})") from exc
        return out

    @field_validator("public_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("public_url must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("log_level", "scheduler_log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if self.lease_seconds <= 2 * self.tick_seconds:
            raise ValueError("lease_seconds must be more than twice tick_seconds, or leases lapse between ticks")
        if self.env == "development":
            return self
        for cidr in self.allow_networks:
            network = ipaddress.ip_network(cidr)
            if network.prefixlen == 0:
                raise ValueError(f"allow_networks {cidr} opens every address; refused outside development")
            if any(addr.version == network.version and addr in network for addr in _METADATA_ADDRESSES):
                raise ValueError(
                    f"allow_networks {cidr} contains a cloud metadata address; refused outside development"
                )
        return self

    def safe_http_config(self) -> SafeHttpConfig:
        """The one safe HTTP client's configuration (sampling, probes, discovery and webhooks)."""
        from app.sampling.safe_http import SafeHttpConfig

        return SafeHttpConfig(allow_networks=tuple(self.allow_networks), max_bytes=self.sampling_max_bytes)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build their own ``Settings`` instead)."""
    return Settings()


def listen_url(host: str, port: int) -> str:
    """The URL a browser on this machine reaches a server listening on ``host:port`` at: a wildcard
    address (0.0.0.0, ::) or an empty host becomes 127.0.0.1; an IPv6 literal gets brackets."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def with_listen_address(settings: Settings, host: str, port: int) -> Settings:
    """``settings`` with ``public_url`` following ``--host``/``--port`` when DPWATCH_PUBLIC_URL is
    unset (an explicit value, e.g. behind a proxy, is kept)."""
    if "public_url" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"public_url": listen_url(host, port)})
