"""The ``dpwatch`` command line (Typer)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:  # the commands import what they use when they run (a usage error stays fast)
    from collections.abc import Iterator
    from contextlib import AbstractContextManager
    from datetime import datetime

    from sqlalchemy.orm import Session
    from starlette.requests import Request

    from app.audit.engine import AuditResult
    from app.audit.engine import Progress as AuditProgress
    from app.settings import Settings


def _keep_hyphenated_words() -> None:
    """Click wraps help at hyphens, which split flags across lines ("--long-" / "run"); wrap at
    spaces only. Typer ≥ 0.26 vendors click as ``typer._click`` and builds a ``TextWrapper`` from
    ``_textwrap`` for every help paragraph (``formatting.wrap_text``); without that module the
    default wrapping stays."""
    try:
        from typer._click import _textwrap
    except ImportError:  # pragma: no cover - older typer on click
        return
    if getattr(_textwrap.TextWrapper, "_dpwatch_no_hyphen_breaks", False):
        return

    class Wrapper(_textwrap.TextWrapper):
        _dpwatch_no_hyphen_breaks = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("break_on_hyphens", False)
            super().__init__(*args, **kwargs)

    _textwrap.TextWrapper = Wrapper  # type: ignore[misc]


_keep_hyphenated_words()

# The claim's options, shared by the commands that test a claim (audit, search): --epsilon's help
# differs between them; δ, μ and ρ are the same everywhere.
DeltaOption = Annotated[float, typer.Option(help="The claimed δ of an (ε, δ) claim.")]
MuOption = Annotated[float | None, typer.Option("--mu", help="Instead of --epsilon: the claimed μ of μ-GDP.")]
RhoOption = Annotated[float | None, typer.Option("--rho", help="Instead of --epsilon: the claimed ρ of ρ-zCDP.")]

app = typer.Typer(
    name="dpwatch",
    help="Monitor deployed differentially private mechanisms and alarm when a change breaks their claimed epsilon.",
    no_args_is_help=True,
    add_completion=False,
    # Plain click help, not Rich: importing Rich's Markdown and traceback modules took about half of
    # a `dpwatch --help` on a busy machine, and click rewraps each paragraph of a help
    # text instead of keeping the docstring's line breaks. Each command has a one-line short_help,
    # so that the command list never cuts a sentence with "...".
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    """``dpwatch --version``: the installed distributions' versions (no import of the service)."""
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    typer.echo(f"dpwatch {installed('dpwatch')} (dpwatch-sdk {installed('dpwatch-sdk')})")
    raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Print dpwatch's version and exit.")] = False,
) -> None:
    """Monitor deployed differentially private mechanisms and alarm when a change breaks their claimed epsilon."""


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _fail(msg: str) -> NoReturn:
    _err(f"error: {msg}")
    raise typer.Exit(code=2)


def _networks(allow_networks: str | None) -> list[str]:
    """``--allow-networks`` as a list of CIDRs (DPWATCH_ALLOW_NETWORKS when not given); a usage error
    that names the flag, not the setting, when one is not a CIDR range."""
    import ipaddress

    given = [c.strip() for c in (allow_networks or "").split(",") if c.strip()]
    for cidr in given:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            _fail(f"--allow-networks: {cidr!r} is not a CIDR range (e.g. 127.0.0.0/8 or ::1/128)")
    return given or list(_settings().allow_networks)


@app.command(short_help="Print the detector's threshold q_{1-α}(T, γ).")
def threshold(
    horizon: Annotated[int, typer.Option("--horizon", "-T", help="Horizon T (number of periods).")],
    gamma: Annotated[float, typer.Option(help="Weight γ in [0, 1/2).")] = 0.25,
    alpha: Annotated[float, typer.Option(help="False-alarm rate α over the horizon.")] = 0.05,
    replications: Annotated[int | None, typer.Option(help="Monte-Carlo replications; forces a fresh simulation.")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed of the simulation.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print the threshold q_{1-α}(T, γ) of the weighted aggregator and its Monte Carlo standard error.

    Uses the shipped table when (T, γ, α) is on its grid and no --replications/--seed is given;
    otherwise simulates (method.md §3).
    """
    from app.stats.thresholds import (
        DEFAULT_REPLICATIONS,
        DEFAULT_SEED,
        threshold_from_table,
        threshold_quantile,
    )

    try:
        est = None
        if replications is None and seed is None:
            est = threshold_from_table(horizon, gamma, alpha)
        if est is None:
            reps = replications or DEFAULT_REPLICATIONS
            last = [-1]

            def progress(done: int, total: int) -> None:
                pct = int(100 * done / total)
                if pct != last[0] and not as_json:
                    last[0] = pct
                    _err(f"\rsimulating: {done}/{total} replications ({pct}%)")

            est = threshold_quantile(horizon, gamma, alpha, reps, seed if seed is not None else DEFAULT_SEED, progress)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(est.to_dict()))
    else:
        typer.echo(
            f"q_(1-{alpha:g})(T={horizon}, gamma={gamma:g}) = {est.value:.4f}  "
            f"(Monte-Carlo s.e. {est.std_error:.4f}; {est.replications} replications, seed {est.seed}, {est.source})"
        )


@app.command(short_help="Compare the detectors on the paper's scenarios.")
def simulate(
    scenarios: Annotated[str, typer.Option(help="Scenario letters, e.g. 'abcdefgh' or 'a,d'; 'ijkl' are the "
                                                "(ε, δ)/GDP claim scenarios (docs/claims.md).")] = "abcdefgh",
    detectors: Annotated[str, typer.Option(help="Comma-separated: aggregator, aggregator-wald, naive (exact), "
                                           "naive-normal, e-process, e-detector.")] = "aggregator,naive,e-process,e-detector",
    replications: Annotated[int | None, typer.Option("--replications", "-R",
                                                        help="Runs per scenario [500; 200 with --long-run].")] = None,
    horizon: Annotated[int, typer.Option("--horizon", "-T", help="Periods per run (the aggregator's horizon T).")] = 200,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples per side and period.")] = 200,
    change_at: Annotated[int | None, typer.Option(help="First period of the changed mechanism (t0) "
                                                     "[50; 5000 with --long-run].")] = None,
    gamma: Annotated[float, typer.Option(help="The aggregator's weight γ in [0, 1/2).")] = 0.25,
    alpha: Annotated[float, typer.Option(help="False-alarm rate α of every detector over the horizon.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Random seed of the simulation (the same seed gives the same table).")] = 2024,
    long_run: Annotated[bool, typer.Option("--long-run", help="A run of change_at − 1 stable periods and --after "
                                           "changed ones, counts from the exact probabilities.")] = False,
    after: Annotated[int, typer.Option(help="With --long-run: periods after the change.")] = 1000,
    renew_horizon: Annotated[int, typer.Option(help="With --long-run: the aggregator's horizon, renewed at "
                                               "alpha_j = 6 alpha/(pi^2 j^2).")] = 1000,
    threshold_replications: Annotated[int | None, typer.Option(
        help="With --long-run: Monte-Carlo paths for the renewed thresholds [enough for the last alpha_j].")] = None,
    out_dir: Annotated[Path, typer.Option(help="Where the CSV, the figures and the JSON go.")] = Path("out/simulate"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as strict JSON instead of a table.")] = False,
) -> None:
    """Compare the detectors offline on the paper's scenarios (a)-(h), on the same draws.

    The JSON is strict (no Infinity or NaN): a null delay means the change was not detected by
    the end of the run in more than half (p90: 10%) of the runs.
    """
    from app import simulation

    keys = [k for k in scenarios.replace(",", "").replace(" ", "")]
    try:
        chosen = simulation.parse_detectors(detectors)
        if long_run:
            long_cfg = simulation.LongRunConfig(
                change_at=change_at or 5000, after=after, replications=replications or 200,
                samples_per_period=samples, renew_horizon=renew_horizon, gamma=gamma, alpha=alpha, seed=seed,
                threshold_replications=threshold_replications, detectors=chosen)
            cfg: simulation.SimulationConfig | simulation.LongRunConfig = long_cfg
            results = simulation.run_long(keys, long_cfg, progress=_err)
        else:
            cfg = simulation.SimulationConfig(replications or 500, horizon, samples, change_at or 50, gamma, alpha,
                                              seed, chosen)
            results = simulation.run(keys, cfg, progress=_err)
    except ValueError as exc:
        _fail(str(exc))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "summary.json", out_dir / "summary.png"]
    if isinstance(cfg, simulation.SimulationConfig):  # not --long-run: the curves of a fixed horizon
        simulation.write_curves_csv(results, out_dir / "detection_curves.csv")
        simulation.plot_curves(results, cfg, out_dir / "detection_curves.png")
        written += [out_dir / "detection_curves.csv", out_dir / "detection_curves.png"]
    simulation.plot_summary(results, cfg, out_dir / "summary.png")
    simulation.write_json(results, cfg, out_dir / "summary.json")
    if as_json:
        typer.echo(simulation.dumps_json(results, cfg))
    else:
        typer.echo(simulation.format_table(results, cfg))
    _err("wrote " + ", ".join(str(p) for p in written))


keys_app = typer.Typer(help="API keys: create, list and revoke them.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(keys_app, name="keys")


def _settings() -> Settings:
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        _fail(f"invalid DPWATCH_* settings: {exc}")


@app.command(short_help="Apply the database migrations.")
def migrate() -> None:
    """Apply the database migrations (alembic upgrade head) to DPWATCH_DATABASE_URL."""
    from app.db import run_migrations

    settings = _settings()
    run_migrations(settings.database_url)
    _err("database is at the latest migration")


def _keys_session() -> AbstractContextManager[Session]:
    """A session on DPWATCH_DATABASE_URL (migrated first when DPWATCH_MIGRATE_ON_START)."""
    from contextlib import contextmanager

    from app.db import make_engine, make_session_factory, run_migrations

    settings = _settings()
    if settings.migrate_on_start:
        run_migrations(settings.database_url)

    @contextmanager
    def opened() -> Iterator[Session]:
        engine = make_engine(settings.database_url)
        try:
            with make_session_factory(engine)() as session:
                yield session
        finally:
            engine.dispose()

    return opened()


@keys_app.command("create", short_help="Add an API key to a tenant; prints it once.")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant name; the key is added to it, and it is created if it does not exist.")] = "default",
    name: Annotated[str, typer.Option(help="A label for the key.")] = "first key",
    scope: Annotated[str, typer.Option(help="admin (everything) or read (GET only).")] = "admin",
    create_tenant: Annotated[bool, typer.Option("--create-tenant/--no-create-tenant",
                                                help="Create the tenant when it does not exist.")] = True,
) -> None:
    """Add an API key to a tenant (creating the tenant first if needed); prints the key once."""
    from sqlalchemy.exc import IntegrityError

    from app.auth.service import add_key_to_tenant

    if scope not in ("admin", "read"):
        _fail(f"--scope must be admin or read, not {scope!r}")
    with _keys_session() as session:
        try:
            created_tenant, api_key, key, created = add_key_to_tenant(session, tenant, name, scope, create=create_tenant)
            session.commit()
        except (LookupError, ValueError) as exc:
            _fail(str(exc.args[0]) if exc.args else str(exc))
        except IntegrityError:  # the same tenant name made at the same moment by another command
            _fail(f"a tenant named {tenant!r} was created concurrently; run the command again to add a key to it")
    what = "new tenant" if created else "tenant"
    _err(f"{what} {created_tenant.name!r} ({created_tenant.id}), {scope} key {api_key.id}; "
         "store this key now, it is not shown again:")
    typer.echo(key)


@keys_app.command("list", short_help="List a tenant's keys (never their secrets).")
def keys_list(
    tenant: Annotated[str, typer.Option(help="Tenant name.")],
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
) -> None:
    """List a tenant's keys (never their secrets: the prefix tells them apart)."""
    import json

    from app.auth.service import get_tenant_by_name, list_api_keys

    with _keys_session() as session:
        found = get_tenant_by_name(session, tenant)
        if found is None:
            _fail(f"no tenant named {tenant!r}")
        keys = list_api_keys(session, found.id)
    def when(value: datetime | None) -> str:
        return value.isoformat(timespec="seconds") if value is not None else "-"

    if as_json:
        for k in keys:
            typer.echo(json.dumps({"id": str(k.id), "name": k.name, "scope": k.scope, "prefix": k.prefix,
                                   "created_at": when(k.created_at), "last_used_at": when(k.last_used_at),
                                   "revoked_at": when(k.revoked_at)}))
        return
    typer.echo(f"{'id':36}  {'prefix':8}  {'scope':5}  {'created':25}  {'last used':25}  {'revoked':25}  name")
    for k in keys:
        typer.echo(f"{k.id!s:36}  {k.prefix:8}  {k.scope:5}  {when(k.created_at):25}  {when(k.last_used_at):25}  "
                   f"{when(k.revoked_at):25}  {k.name}")


@keys_app.command("revoke", short_help="Revoke an API key.")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `dpwatch keys list`).")],
    force: Annotated[bool, typer.Option(help="Revoke even the tenant's last active admin key.")] = False,
) -> None:
    """Revoke an API key: it gets 401 from then on."""
    import uuid

    from app.auth.service import LastAdminKeyError, revoke_api_key

    try:
        parsed = uuid.UUID(key_id)
    except ValueError:
        _fail(f"{key_id!r} is not a key id (a UUID)")
    with _keys_session() as session:
        try:
            api_key = revoke_api_key(session, parsed, allow_last_admin=force)
        except LastAdminKeyError as exc:
            _fail(f"{exc} (or pass --force)")
        if api_key is None:
            _fail(f"no API key {key_id}")
        session.commit()
        revoked_at = api_key.revoked_at
    _err(f"key {key_id} revoked at {revoked_at.isoformat(timespec='seconds')}")


@app.command(short_help="Make a whsec_ signing secret for an endpoint.")
def secret(
    check: Annotated[str | None, typer.Option(help="Check this secret instead of making one: exit 0 when it is a "
                                                     "valid whsec_ secret, 2 with the reason when not.")] = None,
) -> None:
    """Print a fresh whsec_ signing secret (32 random bytes, Standard Webhooks): the secret a sampling
    endpoint checks dpwatch's signatures with. Give it to the endpoint (e.g. DPWATCH_SECRET in its
    environment) and to dpwatch when you register the mechanism ("secret", or the manifest's
    secret_env). The SDK makes the same: dpwatch_sdk.generate_secret()."""
    from dpwatch_sdk.protocol import generate_secret, validate_secret

    if check is not None:
        try:
            key = validate_secret(check)
        except ValueError as exc:
            _fail(str(exc))
        _err(f"a valid signing secret ({len(key)} bytes)")
        return
    typer.echo(generate_secret())


@app.command(short_help="Run the API (and by default a worker).")
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0 for every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on; DPWATCH_PUBLIC_URL follows it when unset.")] = 8000,
    worker: Annotated[bool, typer.Option(help="Also run the scheduler worker (in this process; with --workers above "
                                                "1, in a process of its own beside the API's).")] = True,
    workers: Annotated[int, typer.Option(min=1, max=64, help="API processes sharing the port (uvicorn's workers; "
                                                             "/metrics adds up every process's counters).")] = 1,
) -> None:
    """Run the API (and, by default, a worker) with uvicorn; ``--workers N`` runs N API processes."""
    import uvicorn

    from app.settings import with_listen_address

    settings = with_listen_address(_settings(), host, port)  # generatorURL follows --port unless DPWATCH_PUBLIC_URL is set
    if workers == 1:
        from app.main import create_app
        from app.scheduler import attach_worker

        api = create_app(settings)
        if worker:
            attach_worker(api, settings)
        uvicorn.run(api, host=host, port=port, log_config=None, proxy_headers=False)
        return
    _serve_processes(settings, host, port, workers, worker)


def _serve_processes(settings: Any, host: str, port: int, workers: int, worker: bool) -> None:
    """``serve --workers N``: migrate once here, then N uvicorn processes (``app.main:app``, built from
    the environment: the public URL and "no migration" are passed down through it), with
    prometheus_client's multiprocess mode in a fresh directory unless PROMETHEUS_MULTIPROC_DIR is
    set, and the scheduler worker as a process of its own when asked."""
    import os
    import shutil
    import subprocess
    import tempfile

    import uvicorn

    from app.db import run_migrations

    if settings.migrate_on_start:
        run_migrations(settings.database_url)
    os.environ["DPWATCH_MIGRATE_ON_START"] = "false"
    os.environ["DPWATCH_PUBLIC_URL"] = str(settings.public_url)
    made_dir = None
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        made_dir = tempfile.mkdtemp(prefix="dpwatch-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = made_dir
    else:  # stale files of an earlier run would be added up with this one's
        for stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db"):
            stale.unlink()
    scheduler = subprocess.Popen([sys.executable, "-m", "app.cli", "worker"]) if worker else None
    try:
        uvicorn.run("app.main:app", host=host, port=port, workers=workers, log_config=None, proxy_headers=False)
    finally:
        if scheduler is not None:
            scheduler.terminate()
            try:
                scheduler.wait(30)
            except subprocess.TimeoutExpired:
                scheduler.kill()
        if made_dir is not None:
            shutil.rmtree(made_dir, ignore_errors=True)


def _run_worker(roles: tuple[str, ...]) -> None:
    import asyncio

    from app.db import make_engine, make_session_factory, run_migrations
    from app.observability import (
        configure_logging,
        freeze_startup_objects,
        freeze_warm_objects_later,
    )
    from app.scheduler.worker import Worker

    settings = _settings()
    configure_logging(settings.log_level, settings.log_format, settings.scheduler_log_level)
    if settings.migrate_on_start:
        run_migrations(settings.database_url)
    engine = make_engine(settings.database_url, ping_after_idle=1.0)  # busy connections are not pinged

    async def run() -> None:
        worker = Worker(settings, make_session_factory(engine), roles=roles)
        await worker.start()
        freeze_startup_objects()  # full collections no longer scan start-up's objects
        freeze_warm_objects_later()  # ... nor, after a minute, what the first periods built
        try:
            await asyncio.Event().wait()
        finally:
            await worker.stop()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    finally:
        engine.dispose()


@app.command("worker", short_help="Run only the scheduler worker.")
def worker_command(
    jobs: Annotated[bool, typer.Option(
        "--jobs/--no-jobs",
        help="Also run jobs (searches, audits, discovery) here. --no-jobs leaves them to `dpwatch jobs` processes "
        "(default: DPWATCH_WORKER_RUNS_JOBS, on).")] = True,
) -> None:
    """Run only the scheduler worker (no API); replicas share the work through database leases."""
    settings = _settings()
    _run_worker(("periods", "jobs") if jobs and settings.worker_runs_jobs else ("periods",))


@app.command("jobs", short_help="Run only jobs (searches, audits, discovery).")
def jobs_command() -> None:
    """Run a job runner: it claims queued jobs fairly across tenants and runs each in a child process with
    its memory and time limits, and runs no periods. Pair it with `dpwatch worker --no-jobs`."""
    _run_worker(("jobs",))


@app.command("quota", short_help="Show or set a tenant's quotas.")
def quota_command(
    tenant: Annotated[str, typer.Argument(help="The tenant's name or id.")],
    max_monitors: Annotated[int | None, typer.Option(help="Monitors (0: no limit).")] = None,
    max_concurrent_jobs: Annotated[int | None, typer.Option(help="Jobs running at once.")] = None,
    max_queued_jobs: Annotated[int | None, typer.Option(help="Jobs queued or running.")] = None,
    max_outputs_per_day: Annotated[int | None, typer.Option(help="Outputs drawn per day.")] = None,
    max_stored_output_bytes: Annotated[int | None, typer.Option(help="Raw-output bytes kept.")] = None,
    reset: Annotated[bool, typer.Option(help="Back to the deployment's defaults (DPWATCH_QUOTA_*).")] = False,
) -> None:
    """Print a tenant's quotas and usage as JSON; with options, set them first."""
    import json
    import uuid as _uuid

    from sqlalchemy import or_, select

    from app.db import make_engine, make_session_factory
    from app.models.auth import Tenant
    from app.quotas import service as quotas

    settings = _settings()
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            try:
                as_id = _uuid.UUID(tenant)
            except ValueError:
                as_id = None
            row = session.scalar(select(Tenant).where(or_(Tenant.name == tenant, Tenant.id == as_id)))
            if row is None:
                _fail(f"tenant {tenant!r}: no such tenant (give its name or id)")
            values = {"max_monitors": max_monitors, "max_concurrent_jobs": max_concurrent_jobs,
                      "max_queued_jobs": max_queued_jobs, "max_outputs_per_day": max_outputs_per_day,
                      "max_stored_output_bytes": max_stored_output_bytes}
            given = {k: v for k, v in values.items() if v is not None}
            if reset or given:
                try:
                    quotas.set_quotas(session, row.id, {k: None for k in values} if reset else given)
                except ValueError as exc:
                    _fail(str(exc))
                session.commit()
            typer.echo(json.dumps({"tenant": str(row.id), "name": row.name,
                                   "quotas": quotas.quotas_of(session, row.id, settings).as_dict(),
                                   "usage": quotas.usage(session, row.id)}, indent=2))
    finally:
        engine.dispose()


@app.command("serve-reference", short_help="Serve the reference mechanisms.")
def serve_reference(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9000,
    secret: Annotated[str | None, typer.Option(help="whsec_ secret to verify signatures with; generated if omitted.")] = None,
    epsilon: Annotated[float, typer.Option(help="Claimed epsilon of every reference mechanism.")] = 1.0,
    change_period: Annotated[int, typer.Option(help="Period at which /reference/scenarios/<key> switches.")] = 20,
    corpus_epsilon: Annotated[float, typer.Option(help="Claimed epsilon of the testers' corpus under /reference/corpus/.")] = 0.1,
) -> None:
    """Serve the reference mechanisms as sampling endpoints under /reference (docs/protocol.md), and the
    testers' corpus (StatDP, DP-Sniper, CheckDP) in every output shape under /reference/corpus/
    (docs/reference_mechanisms.md)."""
    import uvicorn

    from app.reference.mechanisms import REFERENCE_MECHANISMS
    from app.reference.server import reference_app
    from app.sampling.protocol import generate_secret, validate_secret

    if secret is None:
        secret = generate_secret()
        _err("generated signing secret (register your mechanisms with it):")
        typer.echo(secret)
    else:
        try:
            validate_secret(secret)
        except ValueError as exc:
            _fail(str(exc))
    from app.reference.corpus import corpus

    _err(f"serving {', '.join(REFERENCE_MECHANISMS)} and scenarios/a..h on http://{host}:{port}/reference/")
    _err(f"and the corpus at ε = {corpus_epsilon:g} on http://{host}:{port}/reference/corpus/: "
         + ", ".join(corpus(corpus_epsilon)))
    from app.reference.gaussian import GAUSSIAN_MECHANISMS

    _err(f"and Gaussian mechanisms with their claims on http://{host}:{port}/reference/gaussian/: "
         + ", ".join(GAUSSIAN_MECHANISMS) + "; claim scenarios on /reference/scenarios/i..l (docs/claims.md)")
    uvicorn.run(reference_app(secret, epsilon=epsilon, change_period=change_period, corpus_epsilon=corpus_epsilon),
                host=host, port=port, log_level="warning")


@app.command(short_help="Audit a sampling endpoint for a claim.")
def audit(
    sampling_url: Annotated[str, typer.Argument(help="The mechanism's sampling endpoint (docs/protocol.md).")],
    pairs: Annotated[str | None, typer.Option(help='Neighbouring databases: a JSON file or inline JSON, [{"x": …, "x_prime": …}, …] or {"pattern": "table1", "queries": 5}.')] = None,
    epsilon: Annotated[float | None, typer.Option(help="The claimed ε to test (without it: estimate only, whole budget).")] = None,
    delta: DeltaOption = 0.0,
    mu: MuOption = None,
    rho: RhoOption = None,
    output_kind: Annotated[str | None, typer.Option(help="real | discrete | vector (with --dim; null entries allowed) | keyed (JSON objects from keys to numbers, open keys; declare keys with --shape); discrete accepts 16.0.")] = None,
    dim: Annotated[int | None, typer.Option(help="Length of vector outputs.")] = None,
    shape: Annotated[str | None, typer.Option(help='Output shape as JSON, e.g. \'{"container": "list", "values": "integer"}\' (docs/protocol.md §3.1). Default: detected from a probe.')] = None,
    region: Annotated[str | None, typer.Option(help="Region C for real outputs as LOW,HIGH (default: chosen from the samples).")] = None,
    budget: Annotated[int, typer.Option(help="Outputs per database at most, pilot and rounds included.")] = 4_096_000,
    first_round: Annotated[int, typer.Option(help="Pilot size per database; round r draws first_round·2^(r-1).")] = 2_000,
    alpha: Annotated[float, typer.Option(help="Level of the test: a mechanism that satisfies the claim is refuted "
                                              "with probability at most α.")] = 0.05,
    secret: Annotated[str | None, typer.Option(help="whsec_ secret the endpoint verifies; a throwaway one if omitted.")] = None,
    max_batch: Annotated[int, typer.Option(help="Outputs asked for in one request at most (larger draws are split).")] = 10_000,
    binary: Annotated[bool, typer.Option(help="Ask for binary float64 answers.")] = False,
    allow_networks: Annotated[str | None, typer.Option(help="Comma-separated CIDRs the URL may resolve to (e.g. 127.0.0.0/8).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of the report.")] = False,
    progress_bar: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")] = True,
    junit_xml: Annotated[Path | None, typer.Option("--junit-xml", help="Also write the verdict as a JUnit XML "
                                                      "report (a failure when refuted, an error when sampling fails).")] = None,
    sequential: Annotated[bool, typer.Option("--sequential", help="Bet on one pair (x, x') one output pair at a time "
                                             "and stop at the first rejection (scalar real outputs; method.md §13.10).")] = False,
    max_pairs: Annotated[int, typer.Option(help="With --sequential: output pairs at most.")] = 10_000,
    pair_batch: Annotated[int, typer.Option(help="With --sequential: outputs drawn per request on each database.")] = 100,
    time_limit: Annotated[float | None, typer.Option("--time-limit", help="Seconds for the whole audit: the endpoint's rate is measured first and the budget sized to fit; it ends with a verdict and its power.")] = None,
) -> None:
    """Audit an endpoint for a claimed ε, (ε, δ), μ-GDP (--mu) or ρ-zCDP (--rho): sample in rounds until
    the claim is refuted at level α or the budget is spent (docs/audit.md, docs/claims.md). Reports ε̂ (MPL), LB (held-out Clopper–Pearson), the
    samples used and the seconds. With --sequential, one pair is tested pair by pair with an anytime-valid
    test that stops at the first rejection (docs/audit.md §7).

    Exits 1 when the claim is refuted, 0 when it is not, 2 on usage errors.
    """
    # Usage errors first, before the audit engine (scipy, the stats) is imported: they answer in a
    # fraction of a second (tests/test_cli_ops.py).
    if pairs is None:
        _fail('give --pairs: a JSON file or inline JSON such as \'[{"x": [0], "x_prime": [1]}]\' '
              'or \'{"pattern": "table1", "queries": 5}\'')
    if shape is not None and output_kind is not None:
        _fail("give --shape or --output-kind, not both")
    if sum(v is not None for v in (epsilon, mu, rho)) > 1:
        _fail("give one claim: --epsilon E [--delta D], --mu M or --rho R")
    if delta and epsilon is None:
        _fail("--delta goes with --epsilon")
    if not 0 < alpha < 1:
        _fail(f"--alpha must lie in (0, 1), got {alpha:g}")
    if time_limit is not None and not time_limit > 0:
        _fail(f"--time-limit must be positive, got {time_limit:g}")
    timed = None if sequential else _early_rate(sampling_url, pairs, secret, shape, output_kind, dim, budget,
                                                 time_limit, max_batch, binary, allow_networks)
    # the endpoint's failure is reported after the usage errors below, which come first
    early_failure = timed if isinstance(timed, Exception) else None
    early = None if isinstance(timed, Exception) else timed
    if early is not None:
        secret = early[1]

    import asyncio

    from app.audit.engine import AuditSettings
    from app.audit.service import audit_endpoint, format_report, probe_shape, read_pairs
    from app.observability import configure_logging
    from app.sampling.client import MechanismEndpoint
    from app.sampling.protocol import SamplingError, generate_secret
    from app.sampling.safe_http import SafeHttpConfig
    from app.sampling.timing import limit_left
    from app.stats.claims import dp_claim
    from app.stats.shapes import OutputShape

    configure_logging("WARNING", "console")  # progress goes to stderr; logs only for problems
    try:
        candidates = read_pairs(pairs)
        declared = None
        if shape is not None:
            declared = OutputShape.model_validate_json(shape)
        elif output_kind is not None:
            declared = OutputShape.from_output_kind(output_kind, dim)
        elif dim is not None:
            _fail("--dim goes with --output-kind vector")
        box = None
        if region is not None:
            try:
                lo, hi = (float(v) for v in region.split(","))
            except ValueError:
                _fail("--region must be LOW,HIGH")
            box = (lo, hi)
        settings = AuditSettings(alpha=alpha, budget=budget, first_round=first_round, region=box)
        claim = None if epsilon is None else dp_claim(epsilon, delta)
        if sum(v is not None for v in (epsilon, mu, rho)) > 1:
            _fail("give one claim: --epsilon E [--delta D], --mu M or --rho R")
        if delta and epsilon is None:
            _fail("--delta goes with --epsilon")
        if mu is not None or rho is not None or delta:
            # (ε, δ), μ-GDP and ρ-zCDP claims (docs/claims.md): both constraints of (ε, δ)
            from app.stats.claims import parse_claim

            claim = parse_claim({"gdp_mu": mu} if mu is not None else {"zcdp_rho": rho} if rho is not None
                                else {"epsilon": epsilon, "delta": delta})
        networks = _networks(allow_networks)
        http_config = SafeHttpConfig(allow_networks=tuple(networks))
        the_secret = secret or generate_secret()
    except ValueError as exc:
        _fail(str(exc).splitlines()[0] if "validation error" not in str(exc) else str(exc))

    if early_failure is not None:
        from app.reporting.junit import shown_url

        _audit_failed(early_failure, junit_xml, f"audit of {shown_url(sampling_url)}")

    if sequential:
        if claim is None:
            _fail("--sequential tests a claim: give --epsilon E [--delta D], --mu M or --rho R")
        if len(candidates) != 1:
            _fail(f"--sequential audits one pair; --pairs gave {len(candidates)}")
        if declared is not None and (declared.container != "scalar" or declared.values == "label"):
            _fail("--sequential needs one number per output (a scalar shape)")
        if max_pairs < 3 or pair_batch < 1:
            _fail("--max-pairs must be at least 3 and --pair-batch at least 1")
        spec = ({"gdp_mu": mu} if mu is not None else {"zcdp_rho": rho} if rho is not None
                else {"epsilon": epsilon, **({"delta": delta} if delta else {})})
        _sequential_audit(sampling_url, candidates[0], spec, alpha=alpha, max_pairs=max_pairs, batch=pair_batch,
                          secret=the_secret, max_batch=max_batch, binary=binary, http_config=http_config,
                          as_json=as_json, progress_bar=progress_bar, junit_xml=junit_xml, shape=declared)
        return

    async def run() -> AuditResult:
        nonlocal declared
        probe_endpoint = MechanismEndpoint(sampling_url=sampling_url, secret=the_secret, timeout_seconds=60)
        if declared is None:
            detection = await probe_shape(probe_endpoint, candidates[0][0], min(first_round, 2000),
                                          http_config=http_config)
            declared = detection.shape
            _err(f"detected output shape: {declared.describe()} (evidence: {json.dumps(detection.evidence)[:300]})")
        endpoint = MechanismEndpoint(sampling_url=sampling_url, secret=the_secret, max_batch=max_batch,
                                     timeout_seconds=60, prefer_binary=binary, shape=declared)
        if not progress_bar:
            return await audit_endpoint(endpoint, candidates, claim, settings, http_config=http_config,
                                        time_limit=limit_left(time_limit), on_estimate=None if early else _err,
                                        measured=early[0] if early else None)
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} outputs"),
                      TimeElapsedColumn(), console=Console(stderr=True), transient=False) as bar:
            task = bar.add_task("pilot", total=settings.budget * len({json.dumps(d, sort_keys=True) for p in candidates for d in p}))

            def on_progress(p: AuditProgress) -> None:
                lb = "n/a" if p.lower_bound is None else f"{p.lower_bound:.3g}"
                left = p.message.rsplit(" · ", 1)[-1] if " · " in p.message else ""
                bar.update(task, total=p.budget_samples, completed=p.samples_used,
                           description=f"round {p.round}/{p.rounds}, LB {lb}" + (f", {left}" if left else ""))

            return await audit_endpoint(endpoint, candidates, claim, settings, http_config=http_config,
                                        progress=on_progress, time_limit=limit_left(time_limit),
                                        on_estimate=None if early else lambda line: bar.console.print(line, markup=False),
                                        measured=early[0] if early else None)

    from app.reporting.junit import audit_case, shown_url, write_junit

    try:
        result = asyncio.run(run())
    except (SamplingError, ValueError) as exc:
        _audit_failed(exc, junit_xml, f"audit of {shown_url(sampling_url)}")
    report = format_report(result)
    typer.echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else report)
    if junit_xml is not None:
        write_junit(junit_xml, "dpwatch audit", [audit_case(result.to_dict(), sampling_url, report,
                                                            claimed=claim is not None)])
    if claim is not None and result.refuted:
        raise typer.Exit(code=1)


def _early_rate(url: str, pairs: str, secret: str | None, shape: str | None, output_kind: str | None,
                dim: int | None, budget: int, time_limit: float | None, max_batch: int, binary: bool,
                allow_networks: str | None) -> tuple[Any, str] | Exception | None:
    """Time the endpoint before the statistics are loaded, and print how long the budget will take
    (app.sampling.timing): (the measurement, the secret used) or None when the shape or the pairs
    are not declared plainly (the audit measures later then), or the endpoint's error.

    An endpoint that answers the first database with an error (down, a 401 for the secret, a 500 from
    the mechanism, an answer that breaks the declared shape) is returned, and fails the command after
    its usage errors, as the audit would: the audit used to ask again, and the user waited for the
    retries and read them twice. Only a request of ours that timed out is left to the audit, which
    allows a slow endpoint longer."""
    if shape is None and output_kind is None:
        return None
    text = pairs.strip()
    try:
        data = json.loads(text if text.startswith(("[", "{")) else Path(text).read_text())
        first = data[0]["x"] if isinstance(data[0], dict) else data[0][0]
        n_dbs = len({json.dumps(db, sort_keys=True) for item in data
                     for db in ((item["x"], item["x_prime"]) if isinstance(item, dict) else item)})
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    import asyncio

    from app.sampling.protocol import SamplingError, generate_secret
    from app.sampling.safe_http import SafeHttpConfig
    from app.sampling.timing import budget_estimate, endpoint_rate, limit_left
    from app.stats.shapes import OutputShape

    try:
        if shape is not None:
            declared = OutputShape.model_validate_json(shape)
        else:
            assert output_kind is not None  # one of the two, checked on entry
            declared = OutputShape.from_output_kind(output_kind, dim)
        the_secret = secret or generate_secret()
        config = SafeHttpConfig(allow_networks=tuple(_networks(allow_networks)))
        measured = asyncio.run(endpoint_rate(url, the_secret, declared, first, max_batch=max_batch, binary=binary,
                                             http_config=config))
    except SamplingError as exc:
        return None if exc.reason == "timeout" else exc
    except Exception:  # noqa: BLE001 - the audit itself reports what is wrong with the endpoint
        return None
    left = limit_left(time_limit)
    usable = math.inf if left is None else measured.rate * max(0.0, left - 4.0) * 0.85
    _err(budget_estimate(measured, budget * n_dbs, time_limit, usable=usable))
    return measured, the_secret


def _audit_failed(exc: Exception, junit_xml: Path | None, case: str) -> None:
    """An audit that could not sample (or was refused): the JUnit error case when asked for, then exit 2."""
    from app.reporting.junit import error_case, write_junit
    from app.sampling.protocol import SamplingError

    problem = f"sampling failed ({exc.reason}): {exc.detail}" if isinstance(exc, SamplingError) else str(exc)
    if junit_xml is not None:
        write_junit(junit_xml, "dpwatch audit", [error_case(case, "dpwatch.audit", problem)])
    _fail(problem)


def _sequential_audit(sampling_url: str, pair: tuple[Any, Any], claim: dict[str, Any], *, alpha: float, max_pairs: int,
                      batch: int, secret: str, max_batch: int, binary: bool, http_config: Any, as_json: bool,
                      progress_bar: bool, junit_xml: Path | None, shape: Any = None) -> None:
    """``dpwatch audit --sequential`` (app.audit.sequential): exits 1 when the claim is rejected."""
    import asyncio

    from app.audit.sequential import sequential_pair_audit
    from app.reporting.junit import audit_case, shown_url, write_junit
    from app.sampling.client import MechanismEndpoint
    from app.sampling.protocol import SamplingError
    from app.stats.shapes import OutputShape

    endpoint = MechanismEndpoint(sampling_url=sampling_url, secret=secret, max_batch=max_batch, timeout_seconds=60,
                                 prefer_binary=binary, shape=shape if shape is not None else OutputShape())

    def on_progress(pairs: int, log_w: float) -> None:
        if progress_bar:
            _err(f"pairs {pairs:,}/{max_pairs:,}: log wealth {log_w:.3g} (rejects at {math.log(1 / alpha):.3g})")

    try:
        result = asyncio.run(sequential_pair_audit(endpoint, pair[0], pair[1], claim, alpha=alpha,
                                                   max_pairs=max_pairs, batch=batch, http_config=http_config,
                                                   progress=on_progress))
    except (SamplingError, ValueError) as exc:
        _audit_failed(exc, junit_xml, f"sequential audit of {shown_url(sampling_url)}")
    r = result.to_dict()
    report = (f"verdict: {result.statement}\n\npair: x = {json.dumps(pair[0])}, x' = {json.dumps(pair[1])}\n"
              f"pairs read: {result.pairs_used:,}; outputs drawn per database: {result.pairs_drawn:,} "
              f"(at most {max_pairs:,}) in {result.seconds:.1f} s")
    typer.echo(json.dumps(r, indent=2) if as_json else report)
    if junit_xml is not None:
        write_junit(junit_xml, "dpwatch audit", [audit_case(
            {"claim": result.claim, "refuted": result.rejected, "alpha": alpha, "lower_bound": None,
             "seconds": result.seconds, "samples_used": 2 * result.pairs_drawn,
             "stopped": "rejected" if result.rejected else "budget"}, sampling_url, report)])
    if result.rejected:
        raise typer.Exit(code=1)


@app.command("apply", short_help="Make a running dpwatch match a manifest.")
def apply_manifest(
    file: Annotated[Path, typer.Option("--file", "-f", help="The manifest (YAML): mechanisms, monitors, webhooks.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    prune: Annotated[bool, typer.Option("--prune", help="Also destroy what the file does not list.")] = False,
    allow_replace: Annotated[bool, typer.Option(
        "--allow-replace", help="Replace (delete and create again, losing its periods and history) a monitor whose "
        "test changed (checks, claim, alpha, gamma, horizon, detector, ...). Without it such a plan changes nothing."
    )] = False,
    url: Annotated[str | None, typer.Option(envvar="DPWATCH_URL", help="The service, e.g. http://127.0.0.1:8000.")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="DPWATCH_API_KEY", help="An admin API key.")] = None,
    probe: Annotated[bool, typer.Option("--probe/--no-probe", help="Probe every mechanism the plan creates, changes "
                                        "or puts a new monitor on (one signed sampling request through the service) "
                                        "before the first monitor is created; a failure stops there (exit 1).")] = True,
) -> None:
    """Make a running dpwatch match a manifest: create or update its mechanisms, monitors and webhooks
    (matched by name; webhooks by url), printing the plan first (docs/sdk.md). Idempotent. A monitor
    whose n, schedule or snapshot sizes changed is updated in place (it keeps its id and periods); one
    whose test changed is replaced, only with --allow-replace.

    Exits 0 when done, 1 when the service refused a step or a mechanism's endpoint failed its probe
    (the error names the fix when it is known, e.g. a trailing slash), 2 for a bad file or usage (or a
    replacement without --allow-replace).
    """
    from app.manifest.apply import run_apply

    raise typer.Exit(run_apply(file, url=url, api_key=api_key, dry_run=dry_run, prune=prune,
                               allow_replace=allow_replace, echo=typer.echo, err=_err, probe=probe))


@app.command("export", short_help="Write the configuration as a manifest.")
def export_manifest(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the YAML here (default: stdout).")] = None,
    url: Annotated[str | None, typer.Option(envvar="DPWATCH_URL", help="The service, e.g. http://127.0.0.1:8000.")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="DPWATCH_API_KEY", help="An API key (read is enough).")] = None,
) -> None:
    """Write the tenant's current mechanisms, monitors and webhooks as a manifest for `dpwatch apply`
    (secrets are never exported)."""
    from app.manifest.apply import run_export

    raise typer.Exit(run_export(output, url=url, api_key=api_key, echo=typer.echo, err=_err))


@app.command(short_help="Search inputs for a pair that breaks the claim.")
def search(
    sampling_url: Annotated[str, typer.Argument(help="The mechanism's sampling endpoint (docs/protocol.md).")],
    domain: Annotated[str | None, typer.Option(help="The input domain the claim covers: a JSON file or inline JSON (docs/search.md §1).")] = None,
    epsilon: Annotated[float | None, typer.Option(help="The claimed ε.")] = None,
    delta: DeltaOption = 0.0,
    mu: MuOption = None,
    rho: RhoOption = None,
    output_kind: Annotated[str | None, typer.Option(help="real | discrete | vector (with --dim) | keyed (JSON objects from keys to numbers).")] = None,
    dim: Annotated[int | None, typer.Option(help="Length of vector outputs.")] = None,
    shape: Annotated[str | None, typer.Option(help="Output shape as JSON (docs/protocol.md §3.1). Default: detected from a probe.")] = None,
    budget: Annotated[int, typer.Option(help="Outputs drawn in all, every phase and database.")] = 8_000_000,
    time_limit: Annotated[float | None, typer.Option(help="Seconds for the whole search, as naturally as --budget: the endpoint's rate is measured first, the budget sized to fit, and it ends within the limit with a verdict and its power.")] = None,
    alpha: Annotated[float, typer.Option(help="Level of the certification (false certifications at most α).")] = 0.05,
    candidates: Annotated[int, typer.Option(help="Candidate pairs the generators propose at most.")] = 300,
    seed: Annotated[int, typer.Option(help="Seed of the search's random choices (candidates, refinement).")] = 0,
    secret: Annotated[str | None, typer.Option(help="whsec_ secret the endpoint verifies; a throwaway one if omitted.")] = None,
    max_batch: Annotated[int, typer.Option(help="Outputs asked for in one request at most (larger draws are split).")] = 10_000,
    binary: Annotated[bool, typer.Option(help="Ask for binary float64 answers.")] = False,
    allow_networks: Annotated[str | None, typer.Option(help="Comma-separated CIDRs the URL may resolve to (e.g. 127.0.0.0/8).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of the report.")] = False,
    progress_bar: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")] = True,
    monitor_body: Annotated[Path | None, typer.Option(help="Write a POST /v1/monitors body that watches the best finding.")] = None,
    mechanism_id: Annotated[str | None, typer.Option(help="The mechanism's id for --monitor-body.")] = None,
    junit_xml: Annotated[Path | None, typer.Option("--junit-xml", help="Also write the verdict as a JUnit XML report: a failed test case per certified finding, with the report.")] = None,
    full_report: Annotated[bool, typer.Option("--full-report", help="Do not stop at the first certification: screen, refine and certify to the end of the budget, and report every finding.")] = False,
) -> None:
    """Search the input domain for a pair of neighbouring databases and an event that break the claim
    (docs/search.md): candidates from StatDP's patterns, Halton databases and edge cases, screened by
    successive halving, refined by Optuna, certified on fresh samples in stages (after every
    screening rung, and by the audit engine after refinement); stops at the first certification.

    Exits 1 when a violation is certified, 0 when none is found within the budget (which does not mean
    that the claim holds), 2 on usage errors.
    """
    from app.search.cli import (
        usage_problem,  # a light module: the search's engine loads in run_command
    )

    problem = usage_problem(domain, epsilon, delta, mu, rho)
    if problem is not None:
        _fail(problem)  # before the engine and the settings are loaded: in a fraction of a second
    from app.search.cli import run_command

    def quiet_logging() -> None:  # after the time estimate: structlog and prometheus take a second to load
        from app.observability import configure_logging

        configure_logging("WARNING", "console")

    networks = _networks(allow_networks)
    code = run_command(url=sampling_url, domain=domain, epsilon=epsilon, delta=delta, mu=mu, rho=rho,
                       output_kind=output_kind, dim=dim, shape=shape, budget=budget, time_limit=time_limit,
                       alpha=alpha, candidates=candidates, seed=seed, secret=secret, max_batch=max_batch, binary=binary,
                       allow_networks=networks, as_json=as_json, progress_bar=progress_bar,
                       monitor_body_path=monitor_body, mechanism_id=mechanism_id, full_report=full_report,
                       echo=typer.echo, err=_err, junit_xml=junit_xml, setup_logging=quiet_logging)
    if code:
        raise typer.Exit(code=code)


@app.command("receive-webhooks", short_help="Receive, verify and print webhooks.")
def receive_webhooks(
    secret: Annotated[str, typer.Option(help="The webhook's whsec_ secret (shown when the webhook was created).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9100,
    path: Annotated[str, typer.Option(help="The path deliveries are posted to.")] = "/hooks",
) -> None:
    """A local webhook receiver: verifies each delivery's Standard Webhooks signature and prints it."""
    import uvicorn
    from standardwebhooks import Webhook
    from standardwebhooks.webhooks import WebhookVerificationError
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    try:
        verifier = Webhook(secret)
    except Exception as exc:  # the library raises on a malformed secret
        _fail(f"invalid secret: {exc}")

    async def hook(request: Request) -> Response:
        body = await request.body()
        try:
            payload = verifier.verify(body, dict(request.headers))
        except WebhookVerificationError as exc:
            _err(f"rejected a delivery: {exc}")
            return Response(status_code=401)
        typer.echo(json.dumps({"verified": True, "webhook-id": request.headers.get("webhook-id"), **payload}))
        return Response(status_code=204)

    receiver = Starlette(routes=[Route(path, hook, methods=["POST"])])

    _err(f"listening on http://{host}:{port}{path}; each verified event is printed as one JSON line")
    uvicorn.run(receiver, host=host, port=port, log_level="warning")


@app.command(short_help="Run the service with demo mechanisms and monitors.")
def demo(
    port: Annotated[int, typer.Option(help="Port to listen on (127.0.0.1); the webhooks' links follow it.")] = 8000,
    horizon: Annotated[int, typer.Option("--horizon", "-T", help="Periods each demo monitor runs (its horizon T).")] = 100,
    samples: Annotated[int, typer.Option("--samples", "-n", help="Samples per database and period.")] = 200,
    change_period: Annotated[int, typer.Option(help="Period at which the scenarios' mechanisms change.")] = 10,
    scenarios: Annotated[str, typer.Option(help="Scenario letters: (a)-(h) claim ε, (i)-(l) claim (ε, δ) or μ-GDP.")] = "abcdefghijkl",
    exit_when_done: Annotated[bool, typer.Option(help="Exit once every harmful change has raised an alarm and "
                                                      "its alarm.firing webhook has been printed.")] = False,
) -> None:
    """Run the service on SQLite with the reference mechanisms and one monitor per scenario (12 by default).

    Prints the monitors' progress every 2 s until every harmful change has raised an alarm, then the
    verified webhooks as they arrive; the service keeps running (Ctrl-C stops it) unless
    --exit-when-done is given."""
    from app.demo import DemoOptions, run_demo

    keys = [k for k in scenarios if k.strip(", ")]
    from app.reference.gaussian import CLAIM_SCENARIOS
    from app.reference.scenarios import SCENARIOS

    unknown = [k for k in keys if k not in SCENARIOS and k not in CLAIM_SCENARIOS]
    if unknown:
        _fail(f"unknown scenario(s) {unknown}; choose from {''.join(sorted(SCENARIOS) + sorted(CLAIM_SCENARIOS))}")
    raise typer.Exit(run_demo(DemoOptions(port=port, horizon=horizon, samples_per_period=samples,
                                          change_period=change_period, scenarios="".join(keys),
                                          exit_when_done=exit_when_done)))


def main() -> None:  # pragma: no cover
    app(sys.argv[1:])


if __name__ == "__main__":  # python -m app.cli
    app()
