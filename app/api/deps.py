"""Dependencies shared by every router, as ``Annotated`` aliases (``SessionDep``, ``CurrentPrincipal``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from app.api.errors import ForbiddenError, ProblemError, UnauthorizedError, field_problem
from app.auth.key_cache import KEY_CACHE
from app.auth.key_use import KeyUseRecorder
from app.auth.service import Principal, authenticate, cached_principal, hash_api_key
from app.settings import Settings

T = TypeVar("T")


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A session whose transaction the request owns: commit when the handler returns, roll back
    when it raises. Services only ``flush``.

    ``async``: opening a session does no I/O (the connection is checked out by its first
    statement), so it costs no thread hop; the end (commit or rollback, then giving the
    connection back) is one hop. The statement and lock timeouts are the connection's own when
    the app made its engine (``app.state.timeouts_at_connect``, app.main); otherwise (a session
    factory given, as in tests) the transaction sets them first, as it always did."""
    read_factory = getattr(request.app.state, "read_session_factory", None)
    if read_factory is not None and request.method in ("GET", "HEAD"):
        # A read on Postgres runs in autocommit: no BEGIN and no COMMIT round trips (two of a
        # GET's four); its statements still run under the connection's timeouts.
        session: Session = read_factory()
    else:
        session = request.app.state.session_factory()
    try:
        if not request.app.state.timeouts_at_connect:
            settings = request.app.state.settings
            await run_in_threadpool(apply_timeouts, session, settings.db_statement_timeout_ms,
                                    settings.db_lock_timeout_ms)
        yield session
    except BaseException:
        if not session.in_transaction():  # nothing to roll back and no connection to give back
            session.close()
            raise
        with anyio.CancelScope(shield=True):  # the connection goes back even when cancelled
            await run_in_threadpool(_end, session, False)
        raise
    if not session.in_transaction():
        # Ended already (:func:`run_read`) or never used: closing does no I/O, so no hop.
        session.close()
        return
    with anyio.CancelScope(shield=True):
        await run_in_threadpool(_end, session, True)


async def run_read(session: Session, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in the thread pool for an ``async def`` read handler, then, in the
    same hop, the end of the request's session (commit when it returned, roll back when it
    raised; then the connection goes back to the pool), which :func:`get_session` would otherwise
    do in a hop of its own. A GET on a cached key is then one thread hop in all."""

    def call() -> T:
        try:
            result = function(*args)
        except BaseException:
            _end(session, False)
            raise
        _end(session, True)
        return result

    return await run_in_threadpool(call)


def _end(session: Session, commit: bool) -> None:
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def apply_timeouts(session: Session, statement_timeout_ms: int, lock_timeout_ms: int) -> None:
    """On Postgres, bound this transaction's statements and lock waits (``SET LOCAL``, so the
    connection goes back to the pool unchanged). A request that hits either gets a 503 with
    ``Retry-After`` (app.api.errors). One round trip; nothing on SQLite, whose ``busy_timeout``
    (5 s, app.db) plays the part of the lock timeout."""
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(
        text("SELECT set_config('statement_timeout', :statement, true), set_config('lock_timeout', :lock, true)"),
        {"statement": f"{statement_timeout_ms}ms", "lock": f"{lock_timeout_ms}ms"},
    )


# scope="function": the commit happens before the response is sent, so a failed commit is a 500
# rather than a 2xx for a change that was never stored.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


# The dependencies that do no I/O are ``async def``: FastAPI runs a plain ``def`` dependency in
# the thread pool, one thread hop each per request (the hops and the GIL
# hand-offs were a large part of a read's cost under 50 concurrent clients).


async def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    bearerFormat="dpw_…",
    description="An API key: `Authorization: Bearer dpw_…`. Create one with `dpwatch keys create`.",
)


class KeyLookups:
    """The key lookups under way in this process, one per key (a single flight).

    When a key's cache entry expires, every request of that key in flight misses the cache at
    once (50 concurrent clients: up to 50 lookups every ``DPWATCH_KEY_CACHE_SECONDS``). They
    share one lookup instead. A request joins a lookup only if no key was dropped from the cache
    since it started (``KEY_CACHE.generation``), so a revocation in this process is never
    answered by a lookup that read the key before it. The lookup runs as a task of its own: a
    request that is cancelled does not cancel it for the others."""

    def __init__(self) -> None:
        self._flights: dict[str, tuple[int, asyncio.Task[Principal | None]]] = {}

    async def resolve(self, session_factory: sessionmaker[Session], plaintext: str) -> Principal | None:
        key_hash = hash_api_key(plaintext)
        flight = self._flights.get(key_hash)
        if flight is None or flight[0] != KEY_CACHE.generation:
            task = asyncio.ensure_future(run_in_threadpool(lookup_key, session_factory, plaintext))
            flight = (KEY_CACHE.generation, task)
            self._flights[key_hash] = flight
            task.add_done_callback(lambda done: self._done(key_hash, done))
        return await asyncio.shield(flight[1])

    def _done(self, key_hash: str, task: asyncio.Task[Principal | None]) -> None:
        current = self._flights.get(key_hash)
        if current is not None and current[1] is task:
            del self._flights[key_hash]
        if not task.cancelled():
            task.exception()  # retrieved: every request that waited has raised it already


def lookup_key(session_factory: sessionmaker[Session], plaintext: str) -> Principal | None:
    """:func:`app.auth.service.authenticate` in a session of its own, whose connection goes back
    to the pool at once. (On the request's session the connection stayed checked out until the
    handler's hop: with 50 requests missing the cache together, requests holding connections
    waited for pool threads while pool threads waited for connections, and answered 503 after
    the pool's timeout.)"""
    with session_factory() as session:
        return authenticate(session, plaintext, cache=KEY_CACHE)


def key_lookups(request: Request) -> KeyLookups:
    """The app's single-flight key lookups (one per app and process)."""
    lookups = getattr(request.app.state, "key_lookups", None)
    if lookups is None:
        lookups = request.app.state.key_lookups = KeyLookups()
    return lookups


async def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    """The tenant behind the bearer key; 401 with ``WWW-Authenticate: Bearer`` otherwise.

    A key resolved within the last ``DPWATCH_KEY_CACHE_SECONDS`` is taken from the process's
    cache (app.auth.key_cache) on the event loop: no query and no thread hop. Otherwise the
    lookup is one query in the thread pool, in a session of its own, shared by the requests of
    that key that miss the cache meanwhile (:class:`KeyLookups`); it fills the cache.

    Nothing is written: a key whose use is due is noted on the request, and
    :func:`record_key_use_after` writes it after the handler."""
    if credentials is None:
        raise UnauthorizedError("Send an API key as `Authorization: Bearer <key>`.")
    principal = cached_principal(credentials.credentials)
    if principal is None:
        state = request.app.state
        factory = state.read_session_factory or state.session_factory
        principal = await key_lookups(request).resolve(factory, credentials.credentials)
    if principal is None:
        raise UnauthorizedError("The API key is unknown or has been revoked.", error="invalid_token")
    if principal.use_due:
        request.state.key_use_due = principal.api_key_id
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


async def record_key_use_after(request: Request) -> AsyncIterator[None]:
    """After the request (after its response when the handler succeeded, whatever it answered),
    write the key's ``last_used_at`` if :func:`get_principal` found it due: in a short transaction
    of its own (:class:`app.auth.key_use.KeyUseRecorder`), never in the request's, so no row lock
    is held across a request for bookkeeping. A router-wide dependency of ``/v1`` (request scope,
    so that its end runs after the response); no thread hop unless a write is due."""
    try:
        yield
    finally:
        api_key_id = getattr(request.state, "key_use_due", None)
        recorder = key_use_recorder(request)
        # The throttle is checked here, on the loop: a key found due in the cache stays due until
        # its entry expires, and only the first of those requests per resolution hops to write.
        if api_key_id is not None and recorder.claim(api_key_id):
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(recorder.write, request.app.state.session_factory, api_key_id)


def key_use_recorder(request: Request) -> KeyUseRecorder:
    """The app's recorder of API keys' last use (one per app and process)."""
    recorder = getattr(request.app.state, "key_use", None)
    if recorder is None:
        recorder = request.app.state.key_use = KeyUseRecorder()
    return recorder


#: Methods a ``read`` key may use; every other method needs an ``admin`` key.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


async def authorize(request: Request, principal: CurrentPrincipal) -> Principal:
    """The one place key scopes are enforced, for every ``/v1`` route (the router's dependency):
    a ``read`` key may only read; any other method answers 403 problem+json. The dashboard asks
    the same question through app.web.permissions.may_change_monitor."""
    if request.method not in READ_METHODS and not principal.may_write:
        raise ForbiddenError(
            f"This API key has the read scope; {request.method} {request.url.path} needs an admin key."
        )
    return principal


def document_scope_responses(schema: dict[str, Any], prefix: str = "/v1/") -> None:
    """Add the 403 that :func:`authorize` may answer to every write operation under ``prefix``
    of an OpenAPI document (the dependency is router-wide, so FastAPI cannot tell per route)."""
    ref = {"$ref": "#/components/schemas/Problem"}  # every /v1 route documents its 401 with it
    for path, item in schema.get("paths", {}).items():
        if not path.startswith(prefix):
            continue
        for method, operation in item.items():
            if method.upper() in READ_METHODS or not isinstance(operation, dict):
                continue
            operation.setdefault("responses", {}).setdefault(
                "403",
                {
                    "description": "The API key's scope does not allow this request (a `read` key on a write route).",
                    "content": {"application/problem+json": {"schema": ref}},
                },
            )


def _query_names(dependant: Any) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


#: The attribute of a route that keeps its declared query parameters, worked out on its first
#: request: (the dependant they were read from, the names).
_ALLOWED_QUERY = "_dpwatch_allowed_query"


async def reject_unknown_query(request: Request) -> None:
    """422 for a query parameter the operation does not declare (``?status=bogus`` on a route
    whose filter is ``state``): a typo must not silently widen a filter. The OpenAPI description
    lists every parameter an operation takes."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    cached = getattr(route, _ALLOWED_QUERY, None)
    if cached is None or cached[0] is not dependant:
        cached = (dependant, frozenset(_query_names(dependant)))
        setattr(route, _ALLOWED_QUERY, cached)
    allowed = cached[1]
    unknown = sorted({name for name in request.query_params if name not in allowed})
    if unknown:
        raise ProblemError(
            f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.",
            status=422,
            slug="validation-error",
            errors=[
                field_problem(["query", name], f"unknown query parameter; this operation takes: "
                              f"{', '.join(sorted(allowed)) or 'none'}", "query_unknown")
                for name in unknown
            ],
        )
