"""Request and response bodies of /v1/monitors and their periods."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, model_validator

from app.api.patch import Omittable
from app.claims.schemas import CLAIM_DESCRIPTION, ClaimSpec
from app.monitors.schedule import parse_cron
from app.stats.events import (
    Box,
    DiscreteSet,
    Interval,
    IntervalUnion,
    KeyCount,
    KeyReleased,
    KeySet,
    KeySets,
    KeySum,
    KeyValue,
    LatticeSet,
    Projected,
    RowSet,
)

MonitorState = Literal["calibrating", "active", "alarm", "completed", "paused", "degraded"]
Variance = Literal["score", "wald"]
Detector = Literal["aggregator", "e-process", "e-detector"]
DETECTOR_DESCRIPTION = (
    "The sequential test each check runs (docs/sequential.md, method.md §13). `aggregator` (default): the weighted "
    "aggregator over a horizon of T = `horizon` periods, P(false alarm by T) ≤ α; the monitor completes after T, or "
    "renews with `renew`. `e-process`: a test supermartingale, alarm when W_t ≥ m/α; P(any false alarm, ever) ≤ α; "
    "no horizon to its guarantee: it runs until an alarm. With a `horizon` of H periods its bets are tuned to detect "
    "within H (method.md §13.3d), and the guarantee still holds for ever; without one it runs the design without a "
    "horizon. `e-detector`: a mixture e-SR change detector, "
    "alarm when M_t ≥ T·m/α; P(false alarm within T = `horizon` periods) ≤ α and mean time to a false alarm ≥ T·m/α; "
    "it keeps running after T. The horizon-free detectors keep a few numbers of state per check, never renew "
    "(`renew` must be false) and do not re-discover events (`rediscover_every` must be 0 or absent)."
)

MAX_CHECKS = 64


def _normalised_cron(value: str) -> str:
    """A crontab with its whitespace collapsed, refused (422) when it does not parse or never fires."""
    value = " ".join(value.split())
    parse_cron(value)
    return value


#: A 5-field crontab in UTC, as MonitorCreate and MonitorUpdate take it.
Cron = Annotated[str, AfterValidator(_normalised_cron)]
CheckOrigin = Literal["given", "auto", "rediscovery", "search"]
_ORIGIN = ("`given` (the event sent), `auto` (chosen by discovery while calibrating; still `auto` when no candidate "
           "was worth adopting), `rediscovery` (added during a horizon by re-discovery) or `search` (a pair and event "
           "a search found, added during a horizon: docs/search.md §5).")


class AutoEvent(BaseModel):
    """Let dpwatch choose the event E from the mechanism's outputs (discovery, while calibrating)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["auto"] = "auto"


CheckEvent = Annotated[
    Interval | IntervalUnion | DiscreteSet | Box | LatticeSet | RowSet | Projected | KeyReleased | KeyValue | KeyCount
    | KeySet | KeySets | KeySum | AutoEvent,
    Field(
        discriminator="kind",
        description="The event E whose probability under x and x' is compared: `interval`, `union` "
        "(of intervals), `set` (of values, or of tuples for vectors), `lattice` (points of a lattice "
        "output), `box`, `rows` (whole vector or list outputs) and `projection` (a statistic of a vector or "
        "list output in a scalar event) for vectors and lists; for keyed outputs `key` (a key released, or not), "
        "`key_value` (a key's value in a scalar event; a key not released is no member unless `absent`), "
        "`key_count` (the number of released keys in a scalar event), `key_set` (the released keys contain a set, "
        "or some key outside a set is released), `key_sets` (the released keys are exactly one of some sets) and "
        "`key_sum` (the sum of some keys' values in a scalar event; a key not released counts 0); "
        "or `auto` (chosen by discovery before the "
        "first horizon starts, and again as the deployment changes). Discovery's candidates paste as is.",
    ),
]

_CREATE_EXAMPLE = {
    "name": "count-query neighbours",
    "mechanism_id": "7d3b9c1e-2f4a-4b6c-8d0e-1f2a3b4c5d6e",
    "checks": [{"x": [1, 1, 0, 1], "x_prime": [1, 1, 0, 0], "event": {"kind": "interval", "low": 2.5, "high": None}}],
    "epsilon": 1.0,
    "alpha": 0.05,
    "gamma": 0.25,
    "horizon": 100,
    "samples_per_period": 10000,
    "period_seconds": 3600,
    "variance": "score",
    "symmetric": True,
    "renew": False,
}


_CREATE_CLAIM_EXAMPLE = {
    "name": "gaussian sum, 0.5-GDP",
    "mechanism_id": "7d3b9c1e-2f4a-4b6c-8d0e-1f2a3b4c5d6e",
    "claim": {"gdp_mu": 0.5},
    "checks": [
        {"x": [0], "x_prime": [1], "event": {"kind": "interval", "high": -2.0}},
        {"x": [0], "x_prime": [1], "event": {"kind": "interval", "low": 3.0},
         "claim": {"epsilon": 1.0, "delta": 1e-5}},
    ],
    "horizon": 100,
    "samples_per_period": 5000,
    "period_seconds": 60,
}


class CheckCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    x: JsonValue = Field(description="The database x (any JSON the mechanism accepts).")
    x_prime: JsonValue = Field(description="A neighbouring database x'.")
    event: CheckEvent
    claim: ClaimSpec | None = Field(
        None, description=CLAIM_DESCRIPTION + " Default: the monitor's `claim` (or `epsilon`)."
    )

    @model_validator(mode="after")
    def _distinct(self) -> CheckCreate:
        if self.x == self.x_prime:
            raise ValueError(
                "x and x_prime are the same database; a check compares two different (neighbouring) databases"
            )
        return self


class MonitorCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_CREATE_EXAMPLE, _CREATE_CLAIM_EXAMPLE]})

    name: str = Field(min_length=1, max_length=200)
    mechanism_id: uuid.UUID = Field(description="The mechanism to sample (one of this tenant's).")
    checks: list[CheckCreate] = Field(
        min_length=1, max_length=MAX_CHECKS, description="The (x, x', E) triples to test."
    )
    epsilon: float | None = Field(
        None, gt=0, le=50,
        description="The claimed ε (0 < ε ≤ 50), the same as `\"claim\": {\"epsilon\": ε}`: the monitor alarms when "
        "the outputs contradict it. Give `epsilon` or `claim`, not both; either may be left out when every "
        "check has its own `claim`.",
    )
    claim: ClaimSpec | None = Field(
        None, description=CLAIM_DESCRIPTION + " The default of the checks that have no `claim` of their own. "
        "Exclusive with `epsilon`.",
    )
    alpha: float = Field(
        0.05, gt=0, lt=1, description="False-alarm probability over the whole monitor (all checks, all horizons)."
    )
    gamma: float = Field(
        0.25,
        ge=0,
        lt=0.5,
        description="Weight exponent γ of the aggregator: small γ favours long drifts, large γ abrupt changes.",
    )
    detector: Detector = Field("aggregator", description=DETECTOR_DESCRIPTION)
    horizon: int | None = Field(
        None, ge=2, le=100_000,
        description="T, the number of periods of one horizon. Required for the `aggregator`; for the `e-detector` "
        "the window of its false-alarm guarantee (default 1000); for the `e-process` the periods within which its "
        "bets are tuned to detect (optional: its guarantee holds for ever either way).",
    )
    samples_per_period: int = Field(ge=1, le=10_000_000, description="n, outputs drawn on each of x and x' per period.")
    period_seconds: int | None = Field(
        None, ge=1, le=366 * 24 * 3600, description="Run a period every this many seconds (or give `cron`)."
    )
    cron: Cron | None = Field(
        None, max_length=200, description="5-field crontab expression, in UTC (or give `period_seconds`)."
    )
    variance: Variance = Field(
        "score", description="Estimator of σ̂: `score` (restricted MLE, default) or `wald` (the paper's eq. 8)."
    )
    kappa: float = Field(1e-6, gt=0, le=1, description="Variance floor κ (eq. 16).")
    symmetric: bool = Field(False, description="Also test each pair reversed, (x', x), as its own check.")
    renew: bool = Field(False, description="Start a new horizon after each completed one, at level α_j = 6α/(π²j²).")
    outputs_window: int = Field(
        20, ge=0, le=10_000,
        description="Keep the raw outputs of the last this-many periods for MPL snapshots (0 keeps none). "
        "Real outputs cost 4 bytes each (float32); integer outputs are zlib-compressed.",
    )
    snapshot_every: int | None = Field(
        None, ge=1, le=100_000, description="Also take an MPL snapshot every this-many periods (none by default)."
    )
    alarm_snapshot_samples: int = Field(
        50_000, ge=0, le=1_000_000,
        description="Fresh outputs per database drawn for an alarm's snapshot (seed 003's N): half, with the "
        "periods the detector pooled, choose t̂; the other half bound the loss there. 0: use the kept outputs "
        "only. The alarm's webhooks are sent once its snapshot is done.",
    )
    start_at: AwareDatetime | None = Field(
        None, description="When the first period starts (default: now). Anchors the schedule."
    )
    rediscover_every: int | None = Field(
        None, ge=0, le=100_000,
        description="With `auto` events: run discovery again every this-many periods on fresh draws, and when the "
        "outputs break their contract; a better event becomes a new check with its own share of α (method.md §11). "
        "Default ⌈T/10⌉ (at least 5); 0 turns it off (the checks then share all of α). Ignored without `auto` events.",
    )
    discovery_samples: int | None = Field(
        None, ge=400, le=5_000_000,
        description="Discovery's budget: outputs per database the audit engine may draw, in rounds, to find the events "
        "of `auto` checks (default: the service's `DPWATCH_DISCOVERY_SAMPLES`).",
    )
    discovery_fresh_samples: int | None = Field(
        None, ge=100, le=1_000_000,
        description="Fresh outputs per database on which re-discovery compares candidates with the existing checks "
        "(default: the service's `DPWATCH_DISCOVERY_FRESH_SAMPLES`).",
    )
    search_every: int = Field(
        0, ge=0, le=100_000,
        description="Search the mechanism's `input_domain` for inputs that break the claim every this-many periods "
        "(docs/search.md §5; 0: never). A new pair it finds becomes a check with its own share of α; the monitor then "
        "reserves half of each horizon's α for added checks. Needs the aggregator and a mechanism with an "
        "`input_domain`. With it, `POST /v1/monitors/{id}/checks/from-search` also adds a finished search's finding.",
    )
    search_budget: int | None = Field(
        None, ge=20_000, le=200_000_000,
        description="Outputs each of the monitor's searches draws in all (default 2,000,000).")

    @model_validator(mode="after")
    def _one_schedule(self) -> MonitorCreate:
        if (self.period_seconds is None) == (self.cron is None):
            raise ValueError("give exactly one of period_seconds and cron")
        if self.epsilon is not None and self.claim is not None:
            raise ValueError("give epsilon or claim, not both (epsilon e is the claim {\"epsilon\": e})")
        if self.epsilon is None and self.claim is None and any(c.claim is None for c in self.checks):
            raise ValueError("every check needs a claim: give the monitor an epsilon or a claim, or each check a claim")
        if self.variance == "wald":
            claims = [c.claim for c in self.checks if c.claim is not None] + ([self.claim] if self.claim else [])
            if any(set(c.to_dict()) != {"epsilon"} for c in claims):
                raise ValueError("variance 'wald' applies to pure-epsilon claims only; other claims use 'score'")
        if self.detector == "aggregator" and self.horizon is None:
            raise ValueError("the aggregator needs a horizon (T periods); or choose detector 'e-process' or "
                             "'e-detector', which need none")
        if self.detector != "aggregator":
            if self.renew:
                raise ValueError(f"renew applies to the aggregator only: the {self.detector} has no horizon to renew")
            if self.rediscover_every:
                raise ValueError(f"rediscover_every applies to the aggregator only, not to the {self.detector}")
            if self.search_every:
                raise ValueError(f"search_every applies to the aggregator only, not to the {self.detector}")
        if self.symmetric and 2 * len(self.checks) > MAX_CHECKS:
            raise ValueError(f"with symmetric, at most {MAX_CHECKS // 2} checks (each is doubled)")
        return self


#: Fields of a monitor that define the test it runs: its threshold, levels and detectors were set for
#: them. ``PATCH /v1/monitors/{id}`` refuses (409) a new value for any of them.
TEST_FIELDS = ("mechanism_id", "checks", "epsilon", "claim", "alpha", "gamma", "detector", "horizon", "variance",
               "kappa", "symmetric", "renew")
#: Fields PATCH changes in place: none of them enters the threshold, a check's level or a detector's state.
SAFE_FIELDS = ("name", "samples_per_period", "period_seconds", "cron", "outputs_window", "snapshot_every",
               "alarm_snapshot_samples", "discovery_samples", "discovery_fresh_samples", "rediscover_every",
               "search_every", "search_budget")
_TEST_FIELD = ("Defines the test the monitor runs, so it cannot change in place: a value different from the current "
               "one answers 409 (create a new monitor instead); the current value is accepted and changes nothing.")


class MonitorUpdate(BaseModel):
    """A JSON merge patch (RFC 7396) of a monitor: the fields given change, the others keep their value.

    Changed in place, keeping the monitor's id, periods, alarms and running detectors, because none of
    them enters the threshold q(T, γ, α_j/m), a check's level or a detector's state: ``name``;
    ``samples_per_period`` (n: each period's z_t is standardised with that period's own n, and the
    lines and bets chosen from past periods use each period's own counts); the schedule
    (``period_seconds`` or ``cron``: the test counts periods, not time); the snapshot and discovery
    sizes; and ``rediscover_every``/``search_every`` between positive values (the share of α they
    reserve does not depend on K). They take effect from the next period: a period already sampling
    finishes with the values it started with. The fields that define the test (`mechanism_id`,
    `checks`, `epsilon`, `claim`, `alpha`, `gamma`, `detector`, `horizon`, `variance`, `kappa`,
    `symmetric`, `renew`) answer 409 when their value would change."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"samples_per_period": 20000}, {"name": "count neighbours (prod)", "cron": "*/30 * * * *"}]})

    # Omittable but not nullable fields are `Omittable[T]`: pydantic validates them as T (it does not
    # validate defaults), so an explicit null is a 422 that the schema predicts.
    name: Omittable[str] = Field(None, min_length=1, max_length=200)
    samples_per_period: Omittable[int] = Field(
        None, ge=1, le=10_000_000,
        description="n, outputs drawn on each of x and x' per period, from the next period on. Safe mid-horizon: "
        "z_t = √n D̂/σ̂ is standardised with each period's own n (eq. 12), and the threshold depends on T, γ and α "
        "only.")
    period_seconds: int | None = Field(
        None, ge=1, le=366 * 24 * 3600,
        description="Run a period every this many seconds from the last period's slot (replaces a `cron`). The "
        "next period is the first slot of the new schedule from now.")
    cron: Cron | None = Field(None, max_length=200, description="A 5-field crontab in UTC (replaces `period_seconds`).")
    outputs_window: Omittable[int] = Field(None, ge=0, le=10_000, description="Raw outputs kept for MPL snapshots, "
                                           "in periods (0 keeps none).")
    snapshot_every: int | None = Field(None, ge=1, le=100_000, description="An MPL snapshot every this-many "
                                       "periods (`null`: none on a schedule).")
    alarm_snapshot_samples: Omittable[int] = Field(None, ge=0, le=1_000_000,
                                                   description="Fresh outputs per database for an alarm's snapshot.")
    discovery_samples: int | None = Field(None, ge=400, le=5_000_000, description="Discovery's budget (`null`: "
                                          "the service's default).")
    discovery_fresh_samples: int | None = Field(None, ge=100, le=1_000_000, description="Re-discovery's fresh "
                                                "outputs per database (`null`: the service's default).")
    rediscover_every: Omittable[int] = Field(
        None, ge=0, le=100_000,
        description="K of re-discovery. It may change between positive values; turning it on or off (0 ↔ K > 0) "
        "changes how α is split between the checks (α_j/m or α_j/(2m)) and answers 409.")
    search_every: Omittable[int] = Field(
        None, ge=0, le=100_000,
        description="K of the monitor's searches. Like `rediscover_every`: between positive values only (409 "
        "otherwise).")
    search_budget: int | None = Field(None, ge=20_000, le=200_000_000, description="Outputs each search draws "
                                      "(`null`: the default).")

    mechanism_id: Omittable[uuid.UUID] = Field(None, description=_TEST_FIELD)
    checks: Omittable[list[CheckCreate]] = Field(
        None, max_length=MAX_CHECKS, description="Cannot change in place: any `checks` answers 409 (create a new "
        "monitor, or add a search's finding with `POST /v1/monitors/{id}/checks/from-search`).")
    epsilon: float | None = Field(None, gt=0, le=50, description=_TEST_FIELD)
    claim: ClaimSpec | None = Field(None, description=_TEST_FIELD)
    alpha: Omittable[float] = Field(None, gt=0, lt=1, description=_TEST_FIELD)
    gamma: Omittable[float] = Field(None, ge=0, lt=0.5, description=_TEST_FIELD)
    detector: Omittable[Detector] = Field(None, description=_TEST_FIELD)
    horizon: Omittable[int] = Field(None, ge=2, le=100_000, description=_TEST_FIELD)
    variance: Omittable[Variance] = Field(None, description=_TEST_FIELD)
    kappa: Omittable[float] = Field(None, gt=0, le=1, description=_TEST_FIELD)
    symmetric: Omittable[bool] = Field(None, description=_TEST_FIELD)
    renew: Omittable[bool] = Field(None, description=_TEST_FIELD)

    @model_validator(mode="after")
    def _consistent(self) -> MonitorUpdate:
        for name in ("name", "samples_per_period", "outputs_window", "alarm_snapshot_samples", "rediscover_every",
                     "search_every", "mechanism_id", "checks", "alpha", "gamma", "detector", "horizon", "variance",
                     "kappa", "symmetric", "renew"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; omit it to keep the current value")
        given = {"period_seconds", "cron"} & self.model_fields_set
        if given == {"period_seconds", "cron"}:
            if (self.period_seconds is None) == (self.cron is None):
                raise ValueError("give exactly one of period_seconds and cron")
        elif given and getattr(self, given.pop()) is None:
            raise ValueError("a monitor needs a schedule: give the other of period_seconds and cron instead of "
                             "null")
        return self


class CheckRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    position: int
    x: Any
    x_prime: Any
    event: dict[str, Any]
    reversed: bool = Field(description="True for the (x', x) copy added by `symmetric`.")
    origin: CheckOrigin = Field("given", description=_ORIGIN)
    joined_t: int = Field(0, description="The period of the horizon after which the check joined (0: from the start).")
    level: float | None = Field(None, description="The check's false-alarm level in this horizon.")
    discovery: dict[str, Any] | None = Field(
        None, description="For a check created with an `auto` event or added by re-discovery: what discovery found "
        "and chose (the candidate, its held-out bound, the level and threshold it runs at)."
    )
    claim: dict[str, float] = Field(description="The claim this check is tested against (its own or the monitor's).")
    claim_description: str = Field(description="The claim in words, e.g. `(1, 1e-05)-DP` or `0.5-GDP`.")


CALIBRATION_ATTEMPTS = "Failed attempts at the current calibration (event discovery, a Monte-Carlo threshold)."
CALIBRATION_ERROR = ("Why the last calibration attempt failed (`memory limit`, `time limit`, `crashed` or `error`, "
                     "with details), null when none did. A monitor whose calibration gave up is `paused` with "
                     "`paused_from_state: calibrating`; `resume` tries again.")


class MonitorRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    mechanism_id: uuid.UUID
    state: MonitorState
    epsilon: float | None = Field(description="The claimed ε of a pure-ε or (ε, δ) default claim, else null.")
    claim: dict[str, float] | None = Field(description="The monitor's default claim (null when only checks have claims).")
    alpha: float
    gamma: float
    horizon: int
    samples_per_period: int
    period_seconds: int | None
    cron: str | None
    variance: Variance
    kappa: float
    symmetric: bool
    renew: bool
    detector: Detector = Field("aggregator", description=DETECTOR_DESCRIPTION)
    design_horizon: int | None = Field(
        None, description="An `e-process` created with a `horizon`: the H its bets are tuned to (method.md §13.3d). "
        "Null for an e-process without one (its `horizon` is then the default window, unused) and for the other "
        "detectors.")
    outputs_window: int
    snapshot_every: int | None
    alarm_snapshot_samples: int
    rediscover_every: int = Field(description="K: re-discovery every K periods (0: off).")
    rediscoveries: int = Field(description="Checks re-discovery added in this horizon.")
    discovery_samples: int | None
    discovery_fresh_samples: int | None
    search_every: int = Field(0, description="K: a search of the input domain every K periods (0: off).")
    search_budget: int | None = Field(None, description="Outputs each search draws (null: the default).")
    horizon_index: int = Field(description="j, the current horizon (1 for the first).")
    horizon_alpha: float = Field(description="α_j: α, or 6α/(π²j²) when `renew`.")
    threshold: float | None = Field(description="q(T, γ, α_j/m); null while calibrating.")
    threshold_std_error: float | None
    threshold_source: str | None = Field(description="`table` or `monte_carlo`.")
    calibration_attempts: int = Field(0, description=CALIBRATION_ATTEMPTS)
    calibration_error: str | None = Field(None, description=CALIBRATION_ERROR)
    t: int = Field(description="Periods completed in the current horizon.")
    next_run_at: datetime
    last_period_at: datetime | None
    created_at: datetime
    updated_at: datetime
    checks: list[CheckRead]


class DetectorAdvice(BaseModel):
    """Approximate periods to detect the reference violation for each detector, and the fewest (the
    mean-path approximations, method.md §13.9; measured comparisons in docs/sequential.md)."""

    n: int
    gap: float = Field(description="D = p₁ − s·q − d per pair.")
    per_period_z: float = Field(description="z̄ = √n·D/√V: one period's mean score under the violation.")
    nats_per_period: float = Field(description="n·D²/(2V): one period's evidence for the oracle bet.")
    periods: dict[str, float | None] = Field(description="Per detector (aggregator, naive, e-process, e-detector): "
                                             "about how many periods; null when it is not expected to find it.")
    recommended: str | None = Field(description="The detector with the fewest periods (null: none finds it).")
    reason: str


class EventPower(BaseModel):
    """Whether a check's event is frequent enough for its test to have power (method.md §13.7,
    docs/sequential.md "Sparse events")."""

    sparse: bool = Field(description="True when n·(p₁ + q) is small (most periods carry no evidence) or a 50% "
                         "excess over the claim would take more than 50 periods to detect.")
    reasons: list[str]
    n: int = Field(description="The monitor's samples_per_period.")
    expected_hits: float = Field(description="n·(p₁ + q): outputs in the event per period under the reference "
                                 "violation p₁ = 1.5·(s·q + d).")
    periods_to_detect: float | None = Field(description="About log(1/α)/(n·G) periods to detect that violation.")
    suggested_n: int | None = Field(description="The smallest n that is not sparse (null: no n helps).")
    source: Literal["periods", "discovery"] = Field(
        description="Where (p, q) come from: the check's recent periods (discounted counts) or discovery's estimate.")
    p_estimate: float
    q_estimate: float
    detector_advice: DetectorAdvice | None = Field(
        None, description="Which detector finds the reference violation soonest at this n (method.md §13.9).")


class CheckPowerWithin(BaseModel):
    periods: int = Field(description="K: the violation is caught within this many periods of its start.")
    epsilon: float | None = Field(description="X: a violation of ε ≥ X on this check's event is caught within K periods "
                                  "with probability ≥ `probability`; null: no violation of this event is (too rare).")
    violation_p: float | None = Field(description="p = min(1, e^X·q): the event's probability on x at that violation.")


class CheckDetectionPower(BaseModel):
    """How large a violation this check catches, and how soon (app/stats/monitor_power.py, method.md §13.11):
    the check's design (n per period, its detector and threshold) at the event's estimated q, for a
    violation starting at the next period. Pure-ε claims only; others get `within` empty and the reason."""

    probability: float = Field(description="The detection probability the statement is made at (0.9).")
    detector: str
    n: int = Field(description="The monitor's samples_per_period.")
    q_estimate: float | None = Field(description="The event's estimated probability on x' (null: no estimate yet).")
    source: Literal["periods", "discovery"] | None = Field(description="Where q comes from.")
    within: list[CheckPowerWithin] = Field(description="For K = 1, 10 and 100 periods (the aggregator: those left in "
                                      "its horizon).")
    statement: str = Field(description="In words: \"a violation of ε ≥ X on this check is caught within K periods "
                           "with probability ≥ 0.9\", or why there is no figure.")


class CheckStatus(BaseModel):
    id: uuid.UUID
    position: int
    reversed: bool
    event: dict[str, Any]
    origin: CheckOrigin = Field("given", description=_ORIGIN)
    joined_t: int = Field(0, description="The period of the horizon after which the check joined (0: from the start).")
    level: float | None = Field(None, description="The check's false-alarm level in this horizon.")
    threshold: float | None = Field(None, description="The check's threshold (its own, for a re-discovered check).")
    discovery: dict[str, Any] | None = Field(None, description="For an `auto` event: what discovery found.")
    claim: dict[str, float] = Field(description="The claim this check is tested against.")
    claim_description: str = Field(description="The claim in words, e.g. `(1, 1e-05)-DP`.")
    line: dict[str, Any] | None = Field(
        None, description="The supporting line of the claim's region tested in the latest period: `orientation` "
        "(`upper`: p − s·q ≤ d; `lower`: q − s·p ≤ d), `slope` s and `intercept` d (method.md §10.3).",
    )
    last_z: float | None = Field(description="z of the latest period.")
    last_statistic: float | None = Field(description="M_t of the latest period.")
    max_statistic: float | None = Field(description="Largest M_t so far in this horizon.")
    alarm: bool = Field(description="Whether this check has an open alarm.")
    power: EventPower | None = Field(None, description="Sparse-event advice at the event's estimated probabilities; "
                                     "null until there is an estimate (the first period, or discovery).")
    detection_power: CheckDetectionPower | None = Field(
        None, description="The smallest violation this check catches within K periods with probability ≥ 0.9.")


class MonitorStatus(BaseModel):
    """Where a monitor stands: what a dashboard polls."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "0b6c7f9e-3f0e-4a43-9a0f-7c0f63a2b7f1",
                    "name": "count-query neighbours",
                    "state": "active",
                    "paused_from_state": None,
                    "t": 17,
                    "horizon": 100,
                    "horizon_index": 1,
                    "periods_remaining": 83,
                    "alpha": 0.05,
                    "horizon_alpha": 0.05,
                    "check_alpha": 0.025,
                    "checks_count": 2,
                    "threshold": 3.42,
                    "threshold_std_error": 0.004,
                    "threshold_source": "table",
                    "consecutive_failures": 0,
                    "open_alarms": 0,
                    "last_period_at": "2026-01-01T16:00:00Z",
                    "next_run_at": "2026-01-01T17:00:00Z",
                    "checks": [],
                }
            ]
        }
    )

    id: uuid.UUID
    name: str
    state: MonitorState
    paused_from_state: MonitorState | None = Field(description="The state `resume` returns to.")
    t: int
    horizon: int
    horizon_index: int
    detector: Detector = Field("aggregator", description=DETECTOR_DESCRIPTION)
    periods_remaining: int | None = Field(description="T − t for the aggregator; null for the horizon-free "
                                          "detectors, which run until an alarm.")
    alpha: float
    horizon_alpha: float
    check_alpha: float = Field(description="Level of each check present at the horizon's start: α_j/m (Bonferroni "
                               "over the m checks), or α_j/(2m) when re-discovery may add checks.")
    checks_count: int
    threshold: float | None
    threshold_std_error: float | None
    threshold_source: str | None
    consecutive_failures: int
    calibration_attempts: int = Field(0, description=CALIBRATION_ATTEMPTS)
    calibration_error: str | None = Field(None, description=CALIBRATION_ERROR)
    open_alarms: int
    last_period_at: datetime | None
    next_run_at: datetime
    checks: list[CheckStatus]
    warnings: list[str] = Field(default_factory=list, description="Checks whose event is too sparse for the test to "
                                "have power, each with the samples_per_period that would give it power.")


class PeriodCheckRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    check_id: uuid.UUID
    a: int = Field(description="Outputs on x in E.")
    b: int = Field(description="Outputs on x' in E.")
    n: int
    p_hat: float = Field(description="p̂ = a/n.")
    q_hat: float = Field(description="q̂ = b/n.")
    d_hat: float = Field(description="D̂ = p̂ − e^ε q̂ (eq. 7) for a pure-ε claim; in general the tested line's "
                         "p̂ − s·q̂ − d (or q̂ − s·p̂ − d), method.md §10.3.")
    sigma_hat: float = Field(description="σ̂ (eq. 8/16, or the score variance).")
    z: float = Field(description="z = √n D̂/σ̂ (eq. 12).")
    statistic: float = Field(description="M_t (eq. 13).")
    threshold: float
    alarm: bool = Field(description="M_t > threshold.")
    claim: dict[str, float] | None = Field(None, description="The claim tested (null on periods recorded before claims).")
    line: dict[str, Any] | None = Field(None, description="The supporting line tested: `orientation`, `slope`, `intercept`.")


class PeriodRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    seq: int = Field(description="1, 2, … over the monitor's life (all horizons, failed periods included).")
    scheduled_for: datetime
    horizon_index: int
    t: int | None = Field(description="The period's index in its horizon; null for a failed period.")
    status: Literal["ok", "failed"]
    failure_reason: str | None
    failure_detail: str | None
    started_at: datetime
    finished_at: datetime | None
    sampling_seconds: float | None
    worker_id: str | None
    checks: list[PeriodCheckRead]


class DatabaseProbe(BaseModel):
    database: Any = Field(description="A database of the monitor's checks (x or x').")
    checks: list[int] = Field(description="Positions of the checks that use it.")
    report: Any = Field(description="What the probe on it showed (a `ProbeReport`).")


class MonitorValidation(BaseModel):
    """One probe of the mechanism on each distinct database of the monitor's checks."""

    ok: bool = Field(description="True when every probe answered correctly (and within the output contract).")
    probes: list[DatabaseProbe]


class MonitorCreated(MonitorRead):
    validation: MonitorValidation | None = Field(None, description="Result of `?validate=true`, when asked.")
    warnings: list[str] = Field(
        default_factory=list, description="Checks whose event is too sparse for the test to have power, when an "
        "estimate of its probabilities exists at creation (discovery's); otherwise the status shows them from the "
        "first period on.")


# --------------------------------------------------------------------------- events that cannot work


def _covers_everything(interval: dict[str, Any], bounds: tuple[float, float] | None) -> bool:
    """Whether an interval holds every output: (−∞, ∞), or the whole declared range."""
    low, high = interval.get("low"), interval.get("high")
    if low is None and high is None:
        return True
    if bounds is None:
        return False
    lo, hi = bounds
    low_ok = low is None or low < lo or (low == lo and interval.get("closed_low", True))
    high_ok = high is None or high > hi or (high == hi and interval.get("closed_high", True))
    return low_ok and high_ok


def useless_event(event: dict[str, Any], output_kind: str, output_shape: dict[str, Any] | None) -> str | None:
    """Why ``event`` can never show a violation on these outputs, or None.

    * an interval (or a union with an interval, or a box) that holds every output: p = q = 1
      in every period, so the statistic never moves;
    * a `set` of numbers on continuous real outputs: each value has probability 0, so p = q = 0.
      Continuous means the mechanism's output contract (declared or detected) says real values
      off any lattice; with no contract yet, a set with a non-integer value is refused (a set of
      integers may fit integer-valued outputs, and the first period detects the contract).
    """
    bounds = None
    if output_shape and output_shape.get("bounds") is not None:
        bounds = (float(output_shape["bounds"][0]), float(output_shape["bounds"][1]))
    kind = event.get("kind")
    everything = "the event holds every output (p = q = 1 in every period), so it can never show a violation"
    if kind == "interval" and _covers_everything(event, bounds):
        return everything
    if kind == "union" and any(_covers_everything(i, bounds) for i in event.get("intervals", [])):
        return everything
    if kind == "box" and all(v is None for v in event.get("low", [])) and all(v is None for v in event.get("high", [])):
        return everything
    if kind == "set" and output_kind == "real":
        values = event.get("values") or []
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if not numbers or len(numbers) != len(values):
            return None
        continuous = output_shape is not None and output_shape.get("values", "real") == "real" \
            and not output_shape.get("lattice")
        if continuous or (output_shape is None and any(float(v) != int(v) for v in numbers)):
            return ("a `set` of values on continuous real outputs has probability 0 under x and x' (z = 0 forever); "
                    "use an `interval`, or declare an integer or lattice output_shape on the mechanism")
    return None
