"""Period slots of a monitor: every ``period_seconds`` from its anchor, or the fire times of a cron.

Slots are deterministic, so two replicas that compute the next slot of a monitor agree on it, and
``period_runs (monitor_id, scheduled_for)`` can be unique. Cron expressions are read in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol

from apscheduler.triggers.cron import CronTrigger

_MICROSECOND = timedelta(microseconds=1)
#: How many missed cron slots ``due_slot`` counts one by one before it only looks for the latest.
MAX_COUNTED_SLOTS = 10_000
# Windows (seconds) searched backwards from now for the latest cron slot once counting gives up.
_SEARCH_WINDOWS = (60, 3600, 86_400, 32 * 86_400, 367 * 86_400, 5 * 367 * 86_400, 30 * 367 * 86_400)


_CRONTAB_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _crontab_day(token: str) -> int:
    token = token.strip().lower()
    if token[:3] in _CRONTAB_DAYS and token.isalpha():
        return _CRONTAB_DAYS.index(token[:3])
    if not token.isdigit() or not 0 <= int(token) <= 7:
        raise ValueError(f"day of week {token!r} is not 0-7 (0 and 7 are Sunday) or a name (sun-sat)")
    return int(token) % 7


def crontab_day_of_week(field: str) -> str:
    """The crontab day-of-week field (0 or 7 = Sunday, 1 = Monday, names, ranges, steps) as
    APScheduler day names. ``CronTrigger.from_crontab`` reads numbers as 0 = Monday, so "1" would
    be Tuesday there: the days are translated to names instead."""
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ValueError(f"day of week step {step_text!r} is not a positive integer")
        if base == "*":
            low, high = 0, 6
        elif "-" in base:
            low_text, high_text = base.split("-", 1)
            low = _crontab_day(low_text)
            high = 7 if high_text.strip() == "7" else _crontab_day(high_text)  # "1-7": through Sunday
            if high < low:
                raise ValueError(f"day of week range {base!r} runs backwards")
        else:
            low = _crontab_day(base)
            high = 6 if step else low
        days.update(day % 7 for day in range(low, high + 1, step or 1))
    apscheduler_names = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
    return ",".join(apscheduler_names[day] for day in sorted(days))


@lru_cache(maxsize=1024)
def _trigger(expression: str) -> CronTrigger:
    """A UTC trigger for a 5-field crontab expression (standard crontab day-of-week numbering).

    CronTrigger.get_next_fire_time keeps no state, so one instance may serve every caller.
    When both day-of-month and day-of-week are restricted, both must match (APScheduler's rule;
    Vixie cron fires when either does).
    """
    minute, hour, day, month, day_of_week = expression.split()
    return CronTrigger(
        minute=minute, hour=hour, day=day, month=month, day_of_week=crontab_day_of_week(day_of_week), timezone=UTC
    )


def parse_cron(expression: str) -> CronTrigger:
    """A UTC ``CronTrigger`` for a 5-field crontab expression; ValueError with a clear message."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}: {expression!r}"
        )
    try:
        trigger = _trigger(" ".join(fields))
    except ValueError as exc:
        raise ValueError(f"cron {expression!r} is not valid: {exc}") from exc
    if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
        raise ValueError(f"cron {expression!r} never fires")
    return trigger


class Scheduled(Protocol):
    """What ``Schedule.of`` reads of a ``Monitor``."""

    @property
    def schedule_anchor(self) -> datetime: ...
    @property
    def period_seconds(self) -> int | None: ...
    @property
    def cron(self) -> str | None: ...


@dataclass(frozen=True)
class Schedule:
    anchor: datetime
    period_seconds: int | None = None
    cron: str | None = None

    def __post_init__(self) -> None:
        if (self.period_seconds is None) == (self.cron is None):
            raise ValueError("a schedule has exactly one of period_seconds and cron")
        if self.anchor.tzinfo is None:
            raise ValueError("the schedule anchor must be timezone-aware")

    @classmethod
    def of(cls, monitor: Scheduled) -> Schedule:
        """The schedule of a ``Monitor`` (anything with schedule_anchor, period_seconds, cron)."""
        return cls(
            anchor=monitor.schedule_anchor,
            period_seconds=monitor.period_seconds,
            cron=monitor.cron,
        )

    def slot_at_or_after(self, when: datetime) -> datetime:
        """The first slot at or after ``when`` (and never before the anchor)."""
        when = max(when.astimezone(UTC), self.anchor.astimezone(UTC))
        if self.period_seconds is not None:
            # Integer microseconds: exact, whatever the period length.
            elapsed = (when - self.anchor) // _MICROSECOND
            period = self.period_seconds * 1_000_000
            k = -(-elapsed // period)
            return self.anchor.astimezone(UTC) + timedelta(microseconds=k * period)
        assert self.cron is not None
        fire = _trigger(self.cron).get_next_fire_time(None, when)
        if fire is None:
            raise ValueError(f"cron {self.cron!r} never fires after {when.isoformat()}")
        return fire.astimezone(UTC)

    def slot_after(self, slot: datetime) -> datetime:
        """The slot strictly after ``slot`` (what the runner schedules once a period is done)."""
        return self.slot_at_or_after(slot + _MICROSECOND)

    def latest_slot_at_or_before(self, when: datetime) -> datetime | None:
        """The last slot at or before ``when``; None if ``when`` is before the first slot."""
        when = when.astimezone(UTC)
        anchor = self.anchor.astimezone(UTC)
        if when < anchor:
            return None
        if self.period_seconds is not None:
            period = self.period_seconds * 1_000_000
            k = ((when - anchor) // _MICROSECOND) // period
            return anchor + timedelta(microseconds=k * period)
        for window in _SEARCH_WINDOWS:
            start = max(anchor, when - timedelta(seconds=window))
            slot = self.slot_at_or_after(start)
            if slot <= when:
                while (following := self.slot_after(slot)) <= when:
                    slot = following
                return slot
            if start == anchor:
                return None
        return None

    def due_slot(self, scheduled: datetime, now: datetime) -> tuple[datetime, int]:
        """The slot a worker should run at ``now`` for a monitor due at ``scheduled``, and how many
        slots it skips.

        A worker that is on time runs ``scheduled`` itself (skipped = 0). One that is late (the
        service was down, the queue was long) runs only the latest slot at or before ``now``: a
        period samples the mechanism as it is now, so catching up on old slots would only repeat
        the same draw under old dates. ``skipped`` counts the slots in [scheduled, that slot); for
        a cron more than ``MAX_COUNTED_SLOTS`` behind it is capped at that number.
        """
        scheduled = scheduled.astimezone(UTC)
        now = now.astimezone(UTC)
        latest = self.latest_slot_at_or_before(now)
        if latest is None or latest <= scheduled:
            return scheduled, 0
        if self.period_seconds is not None:
            first = self.slot_at_or_after(scheduled)
            return latest, (latest - first) // timedelta(seconds=self.period_seconds)
        skipped = 0
        slot = self.slot_at_or_after(scheduled)
        while slot < latest and skipped < MAX_COUNTED_SLOTS:
            skipped += 1
            slot = self.slot_after(slot)
        return latest, skipped
