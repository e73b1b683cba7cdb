"""Drawing outputs for the search: a store of outputs per database, concurrency, and inputs that
fail (docs/search.md §3).

An endpoint that fails on some databases (a 500 on an overflowing sum, a refused value, an answer
that breaks the declared output shape) does not stop the search: :class:`SearchDraws` records the
database and the reason as a finding (:attr:`SearchDraws.failures`), and the pairs that need that
database are dropped. Only when every one of the first databases fails is the endpoint itself
taken to be unusable (:class:`EndpointUnusable`).

The store keeps the outputs that choose: the screening phase's, and a staged test's once it has
been tested on them (app.search.certify.staged_test draws fresh outputs with :meth:`draw` and adds
them afterwards). Refinement draws are scored and thrown away, and the final certification draws
its own (the audit engine samples through :meth:`engine_sampler`, which is only counted here).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.sampling.protocol import database_key
from app.sampling.timing import DeadlineReached, RequestTimedOut
from app.stats.shapes import concat_outputs, n_outputs, take_outputs

__all__ = ["EndpointUnusable", "SearchDraws", "SearchCancelled", "failure_of"]

Sampler = Callable[[Any, int], Awaitable[Any]]
#: Databases that must all fail, before any succeeds, for the endpoint to count as unusable.
UNUSABLE_AFTER = 5


class EndpointUnusable(Exception):
    """Every database tried so far failed: the endpoint (URL, secret, shape) is the problem."""


class SearchCancelled(Exception):
    """The search was cancelled."""


def failure_of(exc: BaseException) -> dict[str, Any]:
    """A failing input's reason as JSON: the sampling client's reason, detail, status and breach."""
    reason = getattr(exc, "reason", None) or type(exc).__name__
    out: dict[str, Any] = {"reason": str(reason), "detail": str(getattr(exc, "detail", None) or exc)[:500]}
    status = getattr(exc, "status_code", None)
    if status is not None:
        out["status_code"] = int(status)
    breach = getattr(exc, "breach", None)
    if breach is not None:
        out["breach"] = breach.model_dump(mode="json") if hasattr(breach, "model_dump") else str(breach)
    return out


@dataclass
class SearchDraws:
    """Samples databases through ``sampler`` and keeps count by phase."""

    sampler: Sampler
    concurrency: int = 4
    cancel: Any = None
    store: dict[str, Any] = field(default_factory=dict)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=lambda: {"screening": 0, "refinement": 0, "certification": 0})
    successes: int = 0
    on_draw: Callable[[], Any] | None = None

    @property
    def total(self) -> int:
        return sum(self.used.values())

    def cancelled(self) -> bool:
        flag = self.cancel
        if flag is None:
            return False
        if callable(flag):
            return bool(flag())
        is_set = getattr(flag, "is_set", None)
        return bool(is_set()) if is_set is not None else False

    def check_cancelled(self) -> None:
        if self.cancelled():
            raise SearchCancelled("cancelled")

    def failed(self, db: Any) -> bool:
        return database_key(db) in self.failures

    async def _one(self, db: Any, n: int, phase: str, note: str) -> Any | None:
        key = database_key(db)
        if key in self.failures:
            return None
        self.check_cancelled()
        started = time.perf_counter()
        try:
            out = await self.sampler(db, n)
        except (asyncio.CancelledError, SearchCancelled, DeadlineReached):
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of an input is a finding
            info = failure_of(exc)
            if info["reason"] == "timeout":  # our own request timed out: the endpoint is slow, the input is fine
                raise RequestTimedOut(f"a request for {n:,} outputs timed out ({info['detail'][:200]})") from None
            self.failures[key] = {"database": db, "phase": phase, "pair": note, **info,
                                  "seconds": round(time.perf_counter() - started, 3)}
            if not self.successes and len(self.failures) >= UNUSABLE_AFTER:
                first = next(iter(self.failures.values()))
                raise EndpointUnusable(f"the endpoint failed on every one of the first {len(self.failures)} databases "
                                       f"tried ({first['reason']}: {first['detail']})") from None
            return None
        if n_outputs(out) != n:
            raise ValueError(f"the sampler returned {n_outputs(out)} outputs instead of {n}")
        self.successes += 1
        self.used[phase] += n
        if self.on_draw is not None:
            res = self.on_draw()
            if asyncio.iscoroutine(res):
                await res
        return out

    async def draw(self, dbs: list[Any], n: int, phase: str, note: str = "") -> dict[str, Any]:
        """``n`` fresh outputs of each database (concurrently), by key; failed ones are absent."""
        sem = asyncio.Semaphore(self.concurrency)
        unique = {database_key(db): db for db in dbs}

        async def one(db: Any) -> tuple[str, Any]:
            async with sem:
                return database_key(db), await self._one(db, n, phase, note)

        tasks = [asyncio.ensure_future(one(db)) for db in unique.values()]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            # The first error ends the draw (an unusable endpoint, a cancellation, a deadline): the
            # databases still waiting or being drawn are cancelled, and their own errors collected
            # here, rather than left to run and fail unseen at the loop's shutdown.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return {k: v for k, v in results if v is not None}

    async def top_up(self, dbs: list[Any], n: int, phase: str, cap: int) -> None:
        """Bring the stored outputs of each database to ``n`` (kept: the latest ``cap``)."""
        need: dict[int, list[Any]] = {}
        for db in {database_key(d): d for d in dbs}.values():
            have = n_outputs(self.store[database_key(db)]) if database_key(db) in self.store else 0
            if have < n and not self.failed(db):
                need.setdefault(n - have, []).append(db)
        for size, group in need.items():
            fresh = await self.draw(group, size, phase)
            for key, out in fresh.items():
                old = self.store.get(key)
                merged = out if old is None else concat_outputs([old, out])
                m = n_outputs(merged)
                self.store[key] = merged if m <= cap else take_outputs(merged, slice(m - cap, m))

    def forget(self, keep_keys: set[str]) -> None:
        for key in [k for k in self.store if k not in keep_keys]:
            del self.store[key]

    def engine_sampler(self) -> Sampler:
        """A sampler for the audit engine (certification): fresh draws, counted, no store. A
        failure here is the endpoint failing on a finalist it answered before: it is raised."""

        async def sample(db: Any, n: int) -> Any:
            self.check_cancelled()
            out = await self.sampler(db, n)
            self.used["certification"] += n
            if self.on_draw is not None:
                res = self.on_draw()
                if asyncio.iscoroutine(res):
                    await res
            return out

        return sample


def function_sampler(function: Callable[..., Any], shape: Any, seed: int | None = None) -> Sampler:
    """A sampler for a Python function ``f(database, n, rng)`` that checks its outputs as the
    sampling protocol would (benches and tests without HTTP): an exception, or a non-finite value
    where the shape allows no null, fails the input with the protocol's reason."""
    import numpy as np

    from app.sampling.protocol import SamplingError
    from app.stats.shapes import KeyedSamples, ListSamples, ShapeBreach, to_canonical

    rng = np.random.default_rng(seed)

    async def sample(database: Any, n: int) -> Any:
        try:
            out = await asyncio.to_thread(function, database, n, rng)
        except Exception as exc:  # noqa: BLE001 - what an endpoint would answer with a 500
            raise SamplingError("http_status", f"the mechanism raised {type(exc).__name__}: {exc}",
                                status_code=500) from None
        if getattr(shape, "container", None) == "keyed" and isinstance(out, list):
            try:  # dicts from keys to numbers, read as the protocol reads them
                out = to_canonical(shape, out)
            except ShapeBreach as exc:
                raise SamplingError("wrong_type", exc.breach.detail, breach=exc.breach) from None
        if isinstance(out, KeyedSamples):
            values = out.values
        elif isinstance(out, ListSamples):
            values = out.values[out.valid_mask()]
        else:
            out = np.asarray(out)
            values = out if out.dtype != object else None
        if values is not None and values.dtype.kind == "f":
            bad = np.isinf(values) if (shape.nullable or isinstance(out, (ListSamples, KeyedSamples))) \
                else ~np.isfinite(values)
            if bad.any():
                raise SamplingError("non_finite", "an output is NaN or infinite")
        return out

    return sample
