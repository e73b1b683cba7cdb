"""Period slots: fixed periods from an anchor, and UTC cron expressions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.monitors.schedule import MAX_COUNTED_SLOTS, Schedule, crontab_day_of_week, parse_cron

ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)


def test_fixed_period_slots() -> None:
    hourly = Schedule(ANCHOR, period_seconds=3600)
    assert hourly.slot_at_or_after(ANCHOR) == ANCHOR
    assert hourly.slot_at_or_after(ANCHOR - timedelta(days=3)) == ANCHOR  # never before the anchor
    assert hourly.slot_at_or_after(ANCHOR + timedelta(microseconds=1)) == ANCHOR + timedelta(hours=1)
    assert hourly.slot_after(ANCHOR + timedelta(hours=5)) == ANCHOR + timedelta(hours=6)
    # Exact for long periods too (a float ratio would round 1 µs away at this size).
    yearly = Schedule(ANCHOR, period_seconds=366 * 86_400)
    assert yearly.slot_after(ANCHOR) == ANCHOR + timedelta(days=366)
    # Other time zones are the same instants.
    plus_two = timezone(timedelta(hours=2))
    assert hourly.slot_at_or_after(datetime(2026, 1, 1, 3, 30, tzinfo=plus_two)) == ANCHOR + timedelta(hours=2)


def test_cron_slots_in_utc() -> None:
    quarter = Schedule(ANCHOR, cron="*/15 * * * *")
    assert quarter.slot_at_or_after(ANCHOR) == ANCHOR
    assert quarter.slot_after(ANCHOR) == ANCHOR + timedelta(minutes=15)
    assert quarter.slot_at_or_after(ANCHOR + timedelta(minutes=15, seconds=1)) == ANCHOR + timedelta(minutes=30)
    daily = Schedule(ANCHOR + timedelta(hours=7), cron="0 6 * * *")
    assert daily.slot_at_or_after(daily.anchor) == datetime(2026, 1, 2, 6, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "days"),
    [
        ("*", "*"),
        ("1", "mon"),
        ("0", "sun"),
        ("7", "sun"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("*/2", "sun,tue,thu,sat"),
        ("sat,sun", "sun,sat"),
        ("MON-wed", "mon,tue,wed"),
        ("5/1", "fri,sat"),
        ("1-7", "sun,mon,tue,wed,thu,fri,sat"),
    ],
)
def test_crontab_day_of_week_numbering(field: str, days: str) -> None:
    assert crontab_day_of_week(field) == days


def test_cron_day_of_week_is_standard_crontab() -> None:
    # 2026-01-05 is a Monday: "1" is Monday, as in crontab(5), not Tuesday as APScheduler reads numbers.
    monday = Schedule(ANCHOR, cron="30 9 * * 1")
    assert monday.slot_at_or_after(ANCHOR) == datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    weekdays = Schedule(datetime(2026, 1, 9, 10, tzinfo=UTC), cron="0 9 * * 1-5")  # a Friday, after 9:00
    assert weekdays.slot_at_or_after(weekdays.anchor) == datetime(2026, 1, 12, 9, tzinfo=UTC)
    sunday = Schedule(ANCHOR, cron="0 0 * * 7")
    assert sunday.slot_at_or_after(ANCHOR) == datetime(2026, 1, 4, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "5 fields"),
        ("* * * * * *", "5 fields"),
        ("61 * * * *", "is not valid"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 * * 8", "is not valid"),
        ("0 0 * * 5-1", "runs backwards"),
        ("0 0 * * */0", "positive integer"),
    ],
)
def test_parse_cron_errors(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_cron(expression)


def test_schedule_needs_exactly_one_kind_and_an_aware_anchor() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Schedule(ANCHOR)
    with pytest.raises(ValueError, match="exactly one"):
        Schedule(ANCHOR, period_seconds=60, cron="* * * * *")
    with pytest.raises(ValueError, match="timezone-aware"):
        Schedule(datetime(2026, 1, 1), period_seconds=60)


def test_latest_slot_at_or_before() -> None:
    hourly = Schedule(ANCHOR, period_seconds=3600)
    assert hourly.latest_slot_at_or_before(ANCHOR - timedelta(seconds=1)) is None
    assert hourly.latest_slot_at_or_before(ANCHOR + timedelta(hours=2, minutes=59)) == ANCHOR + timedelta(hours=2)
    weekly = Schedule(ANCHOR, cron="0 0 * * 1")  # Mondays 00:00; 2026-01-05 is a Monday
    assert weekly.latest_slot_at_or_before(datetime(2026, 1, 4, tzinfo=UTC)) is None
    assert weekly.latest_slot_at_or_before(datetime(2026, 1, 21, 12, tzinfo=UTC)) == datetime(2026, 1, 19, tzinfo=UTC)
    assert weekly.latest_slot_at_or_before(datetime(2026, 1, 19, tzinfo=UTC)) == datetime(2026, 1, 19, tzinfo=UTC)


def test_due_slot_on_time_and_late() -> None:
    hourly = Schedule(ANCHOR, period_seconds=3600)
    due = ANCHOR + timedelta(hours=3)
    assert hourly.due_slot(due, due + timedelta(seconds=2)) == (due, 0)
    assert hourly.due_slot(due, due - timedelta(minutes=1)) == (due, 0)  # not yet due: unchanged
    # Down for 5 h 10 min: run the latest slot, skipping the five before it.
    assert hourly.due_slot(due, due + timedelta(hours=5, minutes=10)) == (due + timedelta(hours=5), 5)

    quarter = Schedule(ANCHOR, cron="*/15 * * * *")
    assert quarter.due_slot(ANCHOR, ANCHOR + timedelta(minutes=50)) == (ANCHOR + timedelta(minutes=45), 3)
    assert quarter.due_slot(ANCHOR, ANCHOR + timedelta(minutes=14)) == (ANCHOR, 0)


def test_due_slot_counts_are_capped_for_a_cron_far_behind() -> None:
    minutely = Schedule(ANCHOR, cron="* * * * *")
    now = ANCHOR + timedelta(days=40, seconds=30)
    slot, skipped = minutely.due_slot(ANCHOR, now)
    assert slot == ANCHOR + timedelta(days=40)
    assert skipped == MAX_COUNTED_SLOTS
