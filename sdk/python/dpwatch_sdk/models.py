"""The API's resources as TypedDicts, generated from the OpenAPI of dpwatch by
datamodel-code-generator: do not edit; run sdk/python/scripts/generate_models.sh."""


from typing import Any, Literal, NotRequired, TypeAlias, TypedDict


class AcknowledgeRequest(TypedDict):
    note: NotRequired[str | None]


class AdoptFindingRequest(TypedDict):
    """
    Turn a finished search's finding into a check of this monitor (one call).
    """

    job_id: str
    finding: NotRequired[int]


class AnytimeBound(TypedDict):
    """
    The anytime-valid lower confidence bound on the claim's parameter (method.md §11.2).
    """

    method: NotRequired[Literal['confidence_sequence']]
    parameter: NotRequired[Literal['ε', 'μ', 'ρ']]
    lower_bound: NotRequired[float | None]
    confidence: float
    contradicts_claim: bool
    periods: int
    from_t: int
    to_t: int
    grid_step: NotRequired[float | None]
    validity: NotRequired[Literal['across_runs', 'given_alarm', 'descriptive']]
    restates_alarm: NotRequired[bool]


class ApiKeyCreate(TypedDict):
    name: str
    scope: NotRequired[Literal['read', 'admin']]


class ApiKeyCreated(TypedDict):
    id: str
    name: str
    scope: Literal['read', 'admin']
    prefix: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None
    key: str


class ApiKeyRead(TypedDict):
    """
    A key as listed: never its secret, only the first characters to recognise it.
    """

    id: str
    name: str
    scope: Literal['read', 'admin']
    prefix: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


class AttemptRead(TypedDict):
    attempted_at: str
    status_code: int | None
    error: str | None
    duration_ms: float | None
    worker_id: str | None


class AuditRequest1(TypedDict):
    """
    A one-shot audit of a claimed ε (or (ε, δ)) on candidate pairs: the engine samples in rounds until the
    claim is refuted at level α or the budget is spent (docs/audit.md).
    """

    pairs: list[Any] | None
    pattern: NotRequired[Literal['table1'] | None]
    queries: NotRequired[int]
    alpha: NotRequired[float]
    first_round: NotRequired[int]
    region: NotRequired[tuple[float, float] | None]
    learned: NotRequired[bool]
    epsilon: float
    delta: NotRequired[float]
    budget: NotRequired[int]


class AuditResult(TypedDict):
    """
    What an audit job found: the engine's report (docs/audit.md), JSON.
    """

    verdict: Literal['refuted', 'not refuted']
    refuted: bool
    lower_bound: float | None
    epsilon_hat: float | None
    claimed_epsilon: float | None
    alpha: float
    samples_used: int
    seconds: float


class AutoEvent(TypedDict):
    """
    Let dpwatch choose the event E from the mechanism's outputs (discovery, while calibrating).
    """

    kind: NotRequired[Literal['auto']]


class BoolColumn(TypedDict):
    """
    JSON ``true`` or ``false``.
    """

    type: Literal['bool']


class Box(TypedDict):
    """
    A box ``Π_j [low_j, high_j]`` for real vectors; ``None`` bounds are unbounded (and open).
    """

    kind: NotRequired[Literal['box']]
    low: list[float | None]
    high: list[float | None]


class CategoryColumn(TypedDict):
    """
    One of ``values`` (strings or integers); without ``values``, any string (open keys).
    """

    type: Literal['category']
    values: NotRequired[list[str | int] | None]


class CategoryRecords(TypedDict):
    """
    Each record is one of ``values`` (strings or integers).
    """

    type: Literal['category']
    values: list[str | int]


class CheckPowerWithin(TypedDict):
    periods: int
    epsilon: float | None
    violation_p: float | None


class CheckRead(TypedDict):
    id: str
    position: int
    x: Any
    x_prime: Any
    event: dict[str, Any]
    reversed: bool
    origin: NotRequired[Literal['given', 'auto', 'rediscovery', 'search']]
    joined_t: NotRequired[int]
    level: NotRequired[float | None]
    discovery: NotRequired[dict[str, Any] | None]
    claim: dict[str, float]
    claim_description: str


class ClaimRead(TypedDict):
    """
    The claim in its API form: exactly one of `{epsilon}`, `{epsilon, delta}`, `{gdp_mu}`, `{zcdp_rho}`.
    """

    epsilon: NotRequired[float | None]
    delta: NotRequired[float | None]
    gdp_mu: NotRequired[float | None]
    zcdp_rho: NotRequired[float | None]


class ClaimSpec(TypedDict):
    """
    The privacy claim the check is tested against: exactly one of `{"epsilon": e}` (pure ε-DP), `{"epsilon": e, "delta": d}` ((ε, δ)-DP, δ in (0, 1)), `{"gdp_mu": m}` (μ-GDP, μ > 0) or `{"zcdp_rho": r}` (ρ-zCDP, ρ > 0). Other combinations are rejected with 422.
    """

    epsilon: NotRequired[float | None]
    delta: NotRequired[float | None]
    gdp_mu: NotRequired[float | None]
    zcdp_rho: NotRequired[float | None]


class ConfirmationFace(TypedDict):
    """
    One face of the claim in the confirmation on fresh outputs.
    """

    lower_bound: NotRequired[float | None]
    confirms: bool


class ConfirmationFaces(TypedDict):
    """
    Both faces of the claim tested on the same fresh counts (one Clopper–Pearson box, level α for both).
    """

    event: ConfirmationFace
    complement: ConfirmationFace


class ContractEvidence(TypedDict):
    """
    What broke the mechanism's output contract, with an offending output.
    """

    breach: str
    detail: str
    sample: NotRequired[Any]
    database: NotRequired[Any]
    expected_shape: NotRequired[dict[str, Any] | None]
    observed_shape: NotRequired[dict[str, Any] | None]
    period: NotRequired[int | None]


class DatabaseProbe(TypedDict):
    database: Any
    checks: list[int]
    report: Any


class DeliveryRead(TypedDict):
    """
    One outbox message for this webhook and the log of its delivery attempts.
    """

    id: str
    event_type: str
    status: Literal['pending', 'delivered', 'failed', 'disabled']
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    created_at: str
    payload: dict[str, Any]
    attempt_log: list[AttemptRead]


class DetectionGuarantee(TypedDict):
    """
    What the detector's alarm guarantees under the claim.
    """

    detector: str
    kind: Literal['level', 'arl']
    alpha: float
    arl: NotRequired[float | None]
    statement: str


class DetectorAdvice(TypedDict):
    """
    Approximate periods to detect the reference violation for each detector, and the fewest (the
    mean-path approximations, method.md §13.9; measured comparisons in docs/sequential.md).
    """

    n: int
    gap: float
    per_period_z: float
    nats_per_period: float
    periods: dict[str, float | None]
    recommended: str | None
    reason: str


class DiscoverRequest1(TypedDict):
    """
    Find the checks worth watching: the engine's held-out candidate events, ranked.
    """

    pairs: list[Any] | None
    pattern: NotRequired[Literal['table1'] | None]
    queries: NotRequired[int]
    alpha: NotRequired[float]
    first_round: NotRequired[int]
    region: NotRequired[tuple[float, float] | None]
    learned: NotRequired[bool]
    epsilon: NotRequired[float | None]
    budget: NotRequired[int]
    top: NotRequired[int]


class DiscoveryResult(TypedDict):
    """
    What a discovery job found: candidate checks, best first.
    """

    candidates: list[dict[str, Any]]
    samples_used: int
    seconds: float


class DiscreteSet(TypedDict):
    """
    A finite set of discrete outputs: numbers, strings, or tuples (lists) for vector outputs.
    """

    kind: NotRequired[Literal['set']]
    values: list[int | float | str | list[int | float]]


class EstimatorReading(TypedDict):
    """
    One estimator's reading of the claim, labelled with what it can and cannot show.
    """

    name: Literal['detector', 'anytime_bound', 'confirmation', 'window_bound', 'exact_bound', 'mpl_lower_bound', 'claim_terms', 'mpl_point_estimate', 'held_out_test', 'contract']
    label: str
    figure: str
    value: NotRequired[float | None]
    refutes: bool
    valid: bool
    confidence: NotRequired[float | None]
    validity: NotRequired[Literal['across_runs', 'given_alarm', 'descriptive'] | None]
    restates_alarm: NotRequired[bool | None]


class EventPower(TypedDict):
    """
    Whether a check's event is frequent enough for its test to have power (method.md §13.7,
    docs/sequential.md "Sparse events").
    """

    sparse: bool
    reasons: list[str]
    n: int
    expected_hits: float
    periods_to_detect: float | None
    suggested_n: int | None
    source: Literal['periods', 'discovery']
    p_estimate: float
    q_estimate: float
    detector_advice: NotRequired[DetectorAdvice | None]


class EvidenceCounts(TypedDict):
    a: int
    b: int
    n: int


class EvidenceWindow(TypedDict):
    lag: int
    from_t: int
    to_t: int


class ExactBound(TypedDict):
    method: NotRequired[Literal['clopper_pearson']]
    p_lower: float
    q_upper: float
    lower_bound: NotRequired[float | None]
    epsilon_lower_bound: NotRequired[float | None]
    exceeds_claim: bool


class FieldProblem(TypedDict):
    """
    One invalid input.
    """

    pointer: str
    location: list[str | int]
    message: str
    type: str


class Health(TypedDict):
    status: str


class IdColumn(TypedDict):
    """
    An identifier: a JSON integer or string (e.g. the person a row belongs to).
    """

    type: Literal['id']


class IntegerColumn(TypedDict):
    """
    A JSON integer, in ``[low, high]`` when given.
    """

    type: Literal['integer']
    low: NotRequired[int | None]
    high: NotRequired[int | None]


class IntegerRecords(TypedDict):
    """
    Each record is an integer (JSON integer), in ``[low, high]`` when given.
    """

    type: Literal['integer']
    low: NotRequired[int | None]
    high: NotRequired[int | None]


class Interval(TypedDict):
    """
    An interval of the real line; ``None`` endpoints are infinite and always open.
    """

    kind: NotRequired[Literal['interval']]
    low: NotRequired[float | None]
    high: NotRequired[float | None]
    closed_low: NotRequired[bool]
    closed_high: NotRequired[bool]


class IntervalUnion(TypedDict):
    """
    A non-empty union of intervals (they may overlap).
    """

    kind: NotRequired[Literal['union']]
    intervals: list[Interval]


class JobProgress(TypedDict):
    fraction: float
    message: NotRequired[str | None]


class KeyReleased(TypedDict):
    """
    Key ``key`` released (with a value or ``null``), or with ``released=false`` not released.
    """

    kind: NotRequired[Literal['key']]
    key: str
    released: NotRequired[bool]


class KeySet(TypedDict):
    """
    ``contains``: every key of ``keys`` released; ``outside``: some key not in ``keys``
    released (with an empty ``keys``, any key released). Keys are kept sorted.
    """

    kind: NotRequired[Literal['key_set']]
    relation: Literal['contains', 'outside']
    keys: list[str]


class KeySets(TypedDict):
    """
    The set of released keys equals one of ``sets`` (each a set of keys; ``[]`` is "no key
    released"). Each set is kept sorted, and the sets in the order given.
    """

    kind: NotRequired[Literal['key_sets']]
    sets: list[list[str]]


class Lattice(TypedDict):
    """
    The grid ``offset + step·ℤ``; ``offset`` is normalised into ``[0, step)``.
    """

    step: float
    offset: NotRequired[float]


class LatticeSet(TypedDict):
    """
    Points ``offset + k·step`` for ``k`` in ``points`` of a real output on a lattice.

    A lattice output is discrete: an interval between two lattice points holds nothing, so the
    events proposed for it are sets of lattice points. Membership tolerates float rounding
    (``app.stats.shapes.Lattice.on_lattice``).
    """

    kind: NotRequired[Literal['lattice']]
    step: float
    offset: NotRequired[float]
    points: list[int]


class MechanismRead(TypedDict):
    id: str
    name: str
    sampling_url: str
    output_kind: Literal['real', 'discrete', 'vector', 'keyed']
    dim: int | None
    max_batch: int
    timeout_seconds: float
    prefer_binary: bool
    output_shape: NotRequired[dict[str, Any] | None]
    output_shape_source: NotRequired[Literal['declared', 'detected'] | None]
    probe_database: NotRequired[Any]
    input_domain: NotRequired[dict[str, Any] | None]
    created_at: str
    updated_at: str


class MonitorRead(TypedDict):
    id: str
    name: str
    mechanism_id: str
    state: Literal['calibrating', 'active', 'alarm', 'completed', 'paused', 'degraded']
    epsilon: float | None
    claim: dict[str, float] | None
    alpha: float
    gamma: float
    horizon: int
    samples_per_period: int
    period_seconds: int | None
    cron: str | None
    variance: Literal['score', 'wald']
    kappa: float
    symmetric: bool
    renew: bool
    detector: NotRequired[Literal['aggregator', 'e-process', 'e-detector']]
    design_horizon: NotRequired[int | None]
    outputs_window: int
    snapshot_every: int | None
    alarm_snapshot_samples: int
    rediscover_every: int
    rediscoveries: int
    discovery_samples: int | None
    discovery_fresh_samples: int | None
    search_every: NotRequired[int]
    search_budget: NotRequired[int | None]
    horizon_index: int
    horizon_alpha: float
    threshold: float | None
    threshold_std_error: float | None
    threshold_source: str | None
    calibration_attempts: NotRequired[int]
    calibration_error: NotRequired[str | None]
    t: int
    next_run_at: str
    last_period_at: str | None
    created_at: str
    updated_at: str
    checks: list[CheckRead]


class MonitorValidation(TypedDict):
    """
    One probe of the mechanism on each distinct database of the monitor's checks.
    """

    ok: bool
    probes: list[DatabaseProbe]


class OutputShape(TypedDict):
    """
    The contract of one output (module docstring). ``OutputShape()`` is a real scalar.
    """

    container: NotRequired[Literal['scalar', 'vector', 'list', 'keyed']]
    values: NotRequired[Literal['real', 'integer', 'label', 'discrete']]
    lattice: NotRequired[Lattice | None]
    length: NotRequired[int | None]
    max_length: NotRequired[int | None]
    nullable: NotRequired[bool]
    labels: NotRequired[list[str] | None]
    bounds: NotRequired[tuple[float, float] | None]
    keys: NotRequired[list[str] | None]
    max_keys: NotRequired[int | None]


class PageApiKeyRead(TypedDict):
    items: list[ApiKeyRead]
    next_cursor: str | None


class PageDeliveryRead(TypedDict):
    items: list[DeliveryRead]
    next_cursor: str | None


class PageMechanismRead(TypedDict):
    items: list[MechanismRead]
    next_cursor: str | None


class PageMonitorRead(TypedDict):
    items: list[MonitorRead]
    next_cursor: str | None


class PairIn(TypedDict):
    x: Any
    x_prime: Any


class PeriodCheckRead(TypedDict):
    check_id: str
    a: int
    b: int
    n: int
    p_hat: float
    q_hat: float
    d_hat: float
    sigma_hat: float
    z: float
    statistic: float
    threshold: float
    alarm: bool
    claim: NotRequired[dict[str, float] | None]
    line: NotRequired[dict[str, Any] | None]


class PeriodRead(TypedDict):
    id: str
    seq: int
    scheduled_for: str
    horizon_index: int
    t: int | None
    status: Literal['ok', 'failed']
    failure_reason: str | None
    failure_detail: str | None
    started_at: str
    finished_at: str | None
    sampling_seconds: float | None
    worker_id: str | None
    checks: list[PeriodCheckRead]


class ProbeReport(TypedDict):
    """
    What one call to the endpoint showed.
    """

    ok: bool
    reason: NotRequired[str | None]
    problems: list[str]
    outputs_received: int
    elapsed_seconds: float
    preview: list[Any]
    database: NotRequired[Any]


class ProbeRequest(TypedDict):
    database: NotRequired[Any]
    n: NotRequired[int]


class Problem(TypedDict):
    """
    An RFC 9457 problem details object.
    """

    type: NotRequired[str]
    title: str
    status: int
    detail: NotRequired[str | None]
    instance: NotRequired[str | None]
    errors: NotRequired[list[FieldProblem] | None]


class Projection(TypedDict):
    """
    A scalar statistic of a vector or list output (NaN, i.e. null, when undefined).

    - ``coordinate`` (``index``): the entry at ``index`` (null when null or beyond the length);
    - ``max``, ``min``, ``sum``, ``argmax``, ``argmin``: over the non-null entries;
    - ``length``; ``count_null``; ``count_value`` (``value``): entries equal to ``value``;
    - ``first_index``, ``first_value``: the position and value of the first non-null entry;
      ``first_value`` with ``low_index``/``high_index``: that value only when the position lies in
      ``[low_index, high_index]`` (either end open when absent), null otherwise — so that an event
      on it is an event on the joint law of the first non-null entry's position and value (SVT 3's
      first ⊤ and its noisy answer: "the first answer comes at a position ≤ k and is ≥ t");
    - ``linear``: a learned score ``w·(φ(o) − mean)/scale + b`` with the feature map φ of
      :func:`feature_map` (``width`` entries, their null, padding and after-the-first flags, length,
      null count, max, min, sum) — a DP-Sniper-style classifier stored as plain numbers.
    """

    kind: Literal['coordinate', 'max', 'min', 'sum', 'argmax', 'argmin', 'length', 'count_null', 'count_value', 'first_index', 'first_value', 'linear']
    index: NotRequired[int | None]
    value: NotRequired[float | None]
    width: NotRequired[int | None]
    mean: NotRequired[list[float] | None]
    scale: NotRequired[list[float] | None]
    weights: NotRequired[list[float] | None]
    intercept: NotRequired[float]
    low_index: NotRequired[int | None]
    high_index: NotRequired[int | None]


class QuotaLimits(TypedDict):
    max_monitors: int
    max_concurrent_jobs: int
    max_queued_jobs: int
    max_outputs_per_day: int
    max_stored_output_bytes: int


class QuotaUsage(TypedDict):
    monitors: int
    running_jobs: int
    queued_jobs: int
    outputs_per_day: int
    stored_output_bytes_committed: int
    stored_output_bytes_measured: int


class Readiness(TypedDict):
    status: str
    database: str
    migrations: str


class RealColumn(TypedDict):
    """
    A finite number, in ``[low, high]`` when given.
    """

    type: Literal['real']
    low: NotRequired[float | None]
    high: NotRequired[float | None]


class RealRecords(TypedDict):
    """
    Each record is a real number, in ``[low, high]`` when given (each side optional).
    """

    type: Literal['real']
    low: NotRequired[float | None]
    high: NotRequired[float | None]


class RediscoveryResult(TypedDict):
    """
    What a monitor's re-discovery found, and whether it added a check.
    """

    adopted: bool
    reason: str
    check_id: NotRequired[str | None]
    level: NotRequired[float | None]
    threshold: NotRequired[float | None]
    candidates: NotRequired[list[dict[str, Any]]]


class RotateMechanismSecret(TypedDict):
    grace_seconds: NotRequired[int]
    secret: NotRequired[str | None]


class RotateSecret(TypedDict):
    grace_seconds: NotRequired[int]


class RowSet(TypedDict):
    """
    A finite set of whole outputs of a vector or list shape; ``null`` entries allowed (SVT's ⊥,
    or an aborted query). A list output is a member when it equals a value, length included.
    """

    kind: NotRequired[Literal['rows']]
    values: list[list[float | None]]


class RowsPerUnit(TypedDict):
    """
    How many rows one privacy unit owns: ``min`` to ``max`` (absent: unbounded).
    """

    min: NotRequired[int]
    max: NotRequired[int | None]


class SearchResultModel(TypedDict):
    """
    What a search found (docs/search.md §2). `certified` is true only when a held-out test on fresh samples
    refuted the claim; otherwise nothing was found within the budget, which does not show that the claim holds.
    """

    certified: bool
    verdict: str
    statement: str
    claim: str
    finding: dict[str, Any] | None
    findings: list[dict[str, Any]]
    failing_inputs: list[dict[str, Any]]
    samples: dict[str, int]
    seconds: dict[str, float]
    candidates: dict[str, Any]
    stopped: str


class SecretRotated(TypedDict):
    id: str
    secret: str
    previous_secret_expires_at: str | None


class SilenceCreate(TypedDict):
    """
    Matchers, a time window and a comment. At least one matcher; every matcher set must match.
    """

    monitor_id: NotRequired[str | None]
    mechanism_id: NotRequired[str | None]
    kind: NotRequired[Literal['privacy', 'contract'] | None]
    starts_at: NotRequired[str | None]
    ends_at: str
    comment: str


class SilenceRead(TypedDict):
    id: str
    monitor_id: str | None
    mechanism_id: str | None
    kind: Literal['privacy', 'contract'] | None
    starts_at: str
    ends_at: str
    comment: str
    created_by: str
    created_at: str
    state: Literal['pending', 'active', 'expired']


class SizeRange(TypedDict):
    """
    How many records a database holds: ``min`` to ``max`` (both included).
    """

    min: int
    max: int


class SnapshotEvidence(TypedDict):
    """
    The alarm's MPL snapshot (seed 003): a separate estimator of where the loss is.
    """

    snapshot_id: str
    role: NotRequired[Literal['separate_estimator']]
    lower_bound: float
    epsilon_hat: float
    t_hat: NotRequired[Any]
    confidence: float
    verdict: Literal['exceeds_claim', 'weaker_estimator', 'below_claim', 'no_loss_established', 'not_comparable']
    statement: str


class SnapshotRequest(TypedDict):
    extra_samples: NotRequired[int]
    alpha: NotRequired[float]


class TableSpec(TypedDict):
    """
    The rows of a table (module docstring).
    """

    columns: dict[str, IdColumn | IntegerColumn | RealColumn | CategoryColumn | BoolColumn]
    privacy_unit: NotRequired[str | None]
    rows_per_unit: NotRequired[RowsPerUnit | None]


class VectorRecords(TypedDict):
    """
    Each record is a list of ``dim`` reals, each coordinate in ``[low, high]`` when given.
    """

    type: Literal['vector']
    dim: int
    low: NotRequired[float | list[float] | None]
    high: NotRequired[float | list[float] | None]


class Verdict(TypedDict):
    """
    dpwatch's one conclusion: `refutes` and one `sentence` (read first), then every estimator.
    """

    refutes: bool
    subject: NotRequired[Literal['claim', 'contract']]
    claim: NotRequired[str | None]
    sentence: str
    strongest: NotRequired[Literal['detector', 'anytime_bound', 'confirmation', 'window_bound', 'exact_bound', 'mpl_lower_bound', 'claim_terms', 'mpl_point_estimate', 'held_out_test', 'contract'] | None]
    confirmed: NotRequired[bool | None]
    estimators: list[EstimatorReading]


class WebhookCreate(TypedDict):
    url: str
    event_types: list[Literal['alarm.firing', 'alarm.resolved', 'monitor.degraded', 'monitor.completed']]


class WebhookCreated(TypedDict):
    id: str
    url: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    created_at: str
    secret: str


class WebhookRead(TypedDict):
    id: str
    url: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    created_at: str


class WebhookUpdate(TypedDict):
    """
    Fields to change. Setting `enabled: true` re-enables a webhook the deliverer disabled.
    """

    url: NotRequired[str]
    event_types: NotRequired[list[Literal['alarm.firing', 'alarm.resolved', 'monitor.degraded', 'monitor.completed']]]
    enabled: NotRequired[bool]


class WindowBound(TypedDict):
    """
    The bound on the detector's own window: descriptive, not a confidence bound (the window and the time were
    chosen on the same data).
    """

    method: Literal['score', 'clopper_pearson']
    lower_bound: NotRequired[float | None]
    exceeds_claim: bool
    descriptive: NotRequired[Literal[True]]
    validity: NotRequired[Literal['across_runs', 'given_alarm', 'descriptive']]
    restates_alarm: NotRequired[bool]
    statement: str


class AuditRequest2(TypedDict):
    """
    A one-shot audit of a claimed ε (or (ε, δ)) on candidate pairs: the engine samples in rounds until the
    claim is refuted at level α or the budget is spent (docs/audit.md).
    """

    pairs: NotRequired[list[PairIn] | None]
    pattern: Literal['table1'] | None
    queries: NotRequired[int]
    alpha: NotRequired[float]
    first_round: NotRequired[int]
    region: NotRequired[tuple[float, float] | None]
    learned: NotRequired[bool]
    epsilon: float
    delta: NotRequired[float]
    budget: NotRequired[int]


AuditRequest: TypeAlias = AuditRequest1 | AuditRequest2


class CheckDetectionPower(TypedDict):
    """
    How large a violation this check catches, and how soon (app/stats/monitor_power.py, method.md §13.11):
    the check's design (n per period, its detector and threshold) at the event's estimated q, for a
    violation starting at the next period. Pure-ε claims only; others get `within` empty and the reason.
    """

    probability: float
    detector: str
    n: int
    q_estimate: float | None
    source: Literal['periods', 'discovery'] | None
    within: list[CheckPowerWithin]
    statement: str


class CheckEvidence(TypedDict):
    """
    What raised a privacy alarm: the anytime-valid bound (headline), the detector's guarantee, and its window
    with a descriptive bound.
    """

    method: Literal['confidence_sequence', 'score', 'clopper_pearson']
    window: EvidenceWindow
    counts: EvidenceCounts
    p_hat: float
    q_hat: float
    parameter: NotRequired[Literal['ε', 'μ', 'ρ']]
    lower_bound: NotRequired[float | None]
    epsilon_lower_bound: NotRequired[float | None]
    orientation: NotRequired[Literal['x', 'x_prime']]
    exact: ExactBound
    anytime: NotRequired[AnytimeBound | None]
    window_bound: NotRequired[WindowBound | None]
    detection: NotRequired[DetectionGuarantee | None]
    confidence: float
    claim: ClaimRead
    claim_description: NotRequired[str | None]
    exceeds_claim: bool
    validity: NotRequired[Literal['across_runs', 'given_alarm', 'descriptive']]
    restates_alarm: NotRequired[bool]
    statement: str


class CheckStatus(TypedDict):
    id: str
    position: int
    reversed: bool
    event: dict[str, Any]
    origin: NotRequired[Literal['given', 'auto', 'rediscovery', 'search']]
    joined_t: NotRequired[int]
    level: NotRequired[float | None]
    threshold: NotRequired[float | None]
    discovery: NotRequired[dict[str, Any] | None]
    claim: dict[str, float]
    claim_description: str
    line: NotRequired[dict[str, Any] | None]
    last_z: float | None
    last_statistic: float | None
    max_statistic: float | None
    alarm: bool
    power: NotRequired[EventPower | None]
    detection_power: NotRequired[CheckDetectionPower | None]


class Confirmation(TypedDict):
    """
    The exact test of the claim on fresh outputs drawn after the alarm (valid given the alarm).
    """

    method: NotRequired[Literal['clopper_pearson_fresh']]
    counts: EvidenceCounts
    parameter: NotRequired[Literal['ε', 'μ', 'ρ']]
    lower_bound: NotRequired[float | None]
    confidence: float
    confirms: bool
    orientation: NotRequired[Literal['x', 'x_prime']]
    face: NotRequired[Literal['event', 'complement']]
    faces: NotRequired[ConfirmationFaces | None]
    validity: NotRequired[Literal['across_runs', 'given_alarm', 'descriptive']]
    restates_alarm: NotRequired[bool]
    statement: NotRequired[str | None]


class DiscoverRequest2(TypedDict):
    """
    Find the checks worth watching: the engine's held-out candidate events, ranked.
    """

    pairs: NotRequired[list[PairIn] | None]
    pattern: Literal['table1'] | None
    queries: NotRequired[int]
    alpha: NotRequired[float]
    first_round: NotRequired[int]
    region: NotRequired[tuple[float, float] | None]
    learned: NotRequired[bool]
    epsilon: NotRequired[float | None]
    budget: NotRequired[int]
    top: NotRequired[int]


DiscoverRequest: TypeAlias = DiscoverRequest1 | DiscoverRequest2


class InputDomain(TypedDict):
    """
    The databases the privacy claim covers (docs/search.md §1). `records`: `{"type": "real"|"integer", "low"?, "high"?}`, `{"type": "category", "values": [...]}` or `{"type": "vector", "dim": d, "low"?, "high"?}`; without `low`/`high` the claim must hold for every finite value. `size`: `{"min", "max"}` records (0 to 10000). `neighbours`: one or more of `add_remove`, `replace_one` (records form a multiset) or `linf`/`l1` with a top-level `sensitivity` > 0 (the database is a fixed-length vector of query answers, `size.min` = `size.max`; real or integer records; not mixed with the record relations). A database is sent to the mechanism as the JSON list of its records. A tabular domain declares `table` instead of `records`: `{"columns": {name: {"type": "id"|"integer"|"real"|"category"|"bool", ...}}, "privacy_unit"?: an id column, "rows_per_unit"?: {"min", "max"?}}`, `size` counts units and `neighbours` are `add_remove_unit`, `replace_unit`, `add_remove_row`, `replace_row`; a database is then a JSON list of row objects, e.g. `[{"user": 7, "city": "a", "spend": 12.5}]`.
    """

    records: NotRequired[RealRecords | IntegerRecords | CategoryRecords | VectorRecords | None]
    table: NotRequired[TableSpec | None]
    size: SizeRange
    neighbours: list[Literal['add_remove', 'replace_one', 'linf', 'l1', 'add_remove_unit', 'replace_unit', 'add_remove_row', 'replace_row']]
    sensitivity: NotRequired[float | None]


class JobRead(TypedDict):
    """
    A job: what was asked, where it stands, and what came of it (kept after it ends).
    """

    id: str
    kind: Literal['discovery', 'audit', 'rediscovery', 'search']
    state: Literal['queued', 'running', 'succeeded', 'failed', 'cancelled']
    mechanism_id: str | None
    monitor_id: NotRequired[str | None]
    params: dict[str, Any]
    progress: JobProgress
    result: NotRequired[DiscoveryResult | AuditResult | RediscoveryResult | SearchResultModel | dict[str, Any] | None]
    error: NotRequired[str | None]
    failure_reason: NotRequired[Literal['memory limit', 'time limit', 'cancelled', 'crashed', 'error'] | None]
    cancel_requested: bool
    attempts: int
    created_at: str
    updated_at: str
    started_at: str | None
    finished_at: str | None


class KeyCount(TypedDict):
    """
    ``{o : |keys released by o| ∈ event}`` (the count includes keys released as ``null``).
    """

    kind: NotRequired[Literal['key_count']]
    event: Interval | IntervalUnion | DiscreteSet | LatticeSet


class KeySum(TypedDict):
    """
    ``{o : Σ_{k ∈ keys} v_k(o) ∈ event}``, with ``v_k(o)`` the value of key ``k`` in ``o`` and
    ``v_k(o) = 0`` when ``o`` does not release ``k`` (a group-by that leaves a group out adds nothing
    to the total); an output that releases one of the keys as ``null`` is no member (its sum is
    undefined, like ``NaN``). Keys are kept sorted (docs/audit.md §8).
    """

    kind: NotRequired[Literal['key_sum']]
    keys: list[str]
    event: Interval | IntervalUnion | DiscreteSet | LatticeSet


class KeyValue(TypedDict):
    """
    ``{o : o[key] ∈ event}``; with ``absent``, outputs that do not release ``key`` are members
    too, and with ``nulls``, outputs that release it as ``null``. With no ``event``, only those.
    """

    kind: NotRequired[Literal['key_value']]
    key: str
    event: NotRequired[Interval | IntervalUnion | DiscreteSet | LatticeSet | None]
    absent: NotRequired[bool]
    nulls: NotRequired[bool]


class MechanismCreate(TypedDict):
    name: str
    sampling_url: str
    output_kind: Literal['real', 'discrete', 'vector', 'keyed']
    dim: NotRequired[int | None]
    max_batch: NotRequired[int]
    timeout_seconds: NotRequired[float]
    prefer_binary: NotRequired[bool]
    secret: NotRequired[str | None]
    output_shape: NotRequired[OutputShape | None]
    probe_database: NotRequired[Any]
    input_domain: NotRequired[InputDomain | None]


class MechanismCreated(TypedDict):
    """
    The created mechanism, with its signing secret: shown this once and never again.
    """

    id: str
    name: str
    sampling_url: str
    output_kind: Literal['real', 'discrete', 'vector', 'keyed']
    dim: int | None
    max_batch: int
    timeout_seconds: float
    prefer_binary: bool
    output_shape: NotRequired[dict[str, Any] | None]
    output_shape_source: NotRequired[Literal['declared', 'detected'] | None]
    probe_database: NotRequired[Any]
    input_domain: NotRequired[dict[str, Any] | None]
    created_at: str
    updated_at: str
    secret: str
    validation: NotRequired[ProbeReport | None]


class MechanismUpdate(TypedDict):
    """
    Fields to change; omitted fields keep their value.
    """

    name: NotRequired[str]
    sampling_url: NotRequired[str]
    output_kind: NotRequired[Literal['real', 'discrete', 'vector', 'keyed']]
    dim: NotRequired[int | None]
    max_batch: NotRequired[int]
    timeout_seconds: NotRequired[float]
    prefer_binary: NotRequired[bool]
    output_shape: NotRequired[OutputShape | None]
    probe_database: NotRequired[Any]
    input_domain: NotRequired[InputDomain | None]


class MechanismUpdated(TypedDict):
    id: str
    name: str
    sampling_url: str
    output_kind: Literal['real', 'discrete', 'vector', 'keyed']
    dim: int | None
    max_batch: int
    timeout_seconds: float
    prefer_binary: bool
    output_shape: NotRequired[dict[str, Any] | None]
    output_shape_source: NotRequired[Literal['declared', 'detected'] | None]
    probe_database: NotRequired[Any]
    input_domain: NotRequired[dict[str, Any] | None]
    created_at: str
    updated_at: str
    validation: NotRequired[ProbeReport | None]


class MonitorCreated(TypedDict):
    id: str
    name: str
    mechanism_id: str
    state: Literal['calibrating', 'active', 'alarm', 'completed', 'paused', 'degraded']
    epsilon: float | None
    claim: dict[str, float] | None
    alpha: float
    gamma: float
    horizon: int
    samples_per_period: int
    period_seconds: int | None
    cron: str | None
    variance: Literal['score', 'wald']
    kappa: float
    symmetric: bool
    renew: bool
    detector: NotRequired[Literal['aggregator', 'e-process', 'e-detector']]
    design_horizon: NotRequired[int | None]
    outputs_window: int
    snapshot_every: int | None
    alarm_snapshot_samples: int
    rediscover_every: int
    rediscoveries: int
    discovery_samples: int | None
    discovery_fresh_samples: int | None
    search_every: NotRequired[int]
    search_budget: NotRequired[int | None]
    horizon_index: int
    horizon_alpha: float
    threshold: float | None
    threshold_std_error: float | None
    threshold_source: str | None
    calibration_attempts: NotRequired[int]
    calibration_error: NotRequired[str | None]
    t: int
    next_run_at: str
    last_period_at: str | None
    created_at: str
    updated_at: str
    checks: list[CheckRead]
    validation: NotRequired[MonitorValidation | None]
    warnings: NotRequired[list[str]]


class MonitorStatus(TypedDict):
    """
    Where a monitor stands: what a dashboard polls.
    """

    id: str
    name: str
    state: Literal['calibrating', 'active', 'alarm', 'completed', 'paused', 'degraded']
    paused_from_state: Literal['calibrating', 'active', 'alarm', 'completed', 'paused', 'degraded'] | None
    t: int
    horizon: int
    horizon_index: int
    detector: NotRequired[Literal['aggregator', 'e-process', 'e-detector']]
    periods_remaining: int | None
    alpha: float
    horizon_alpha: float
    check_alpha: float
    checks_count: int
    threshold: float | None
    threshold_std_error: float | None
    threshold_source: str | None
    consecutive_failures: int
    calibration_attempts: NotRequired[int]
    calibration_error: NotRequired[str | None]
    open_alarms: int
    last_period_at: str | None
    next_run_at: str
    checks: list[CheckStatus]
    warnings: NotRequired[list[str]]


class PageJobRead(TypedDict):
    items: list[JobRead]
    next_cursor: str | None


class PagePeriodRead(TypedDict):
    items: list[PeriodRead]
    next_cursor: str | None


class PageSilenceRead(TypedDict):
    items: list[SilenceRead]
    next_cursor: str | None


class PageWebhookRead(TypedDict):
    items: list[WebhookRead]
    next_cursor: str | None


class Projected(TypedDict):
    """
    ``{o : s(o) ∈ event}`` for a scalar statistic ``s`` of a vector or list output
    (:class:`Projection`); with ``nulls``, outputs whose statistic is null are members too, and
    with no ``event``, only they are (e.g. "query 3 answered ⊥").
    """

    kind: NotRequired[Literal['projection']]
    projection: Projection
    event: NotRequired[Interval | IntervalUnion | DiscreteSet | LatticeSet | None]
    nulls: NotRequired[bool]


class QuotaRead(TypedDict):
    """
    This tenant's quotas (defaults, or its own) and its usage of each.
    """

    limits: QuotaLimits
    usage: QuotaUsage


class SearchRequest(TypedDict):
    """
    Search the mechanism's input domain for a pair of neighbouring databases and an event that break
    the claim; only a certification on fresh samples reports a violation.
    """

    claim: ClaimSpec
    domain: NotRequired[InputDomain | None]
    alpha: NotRequired[float]
    budget: NotRequired[int]
    time_limit_seconds: NotRequired[float | None]
    candidates: NotRequired[int]
    seed: NotRequired[int]
    full_report: NotRequired[bool]


class SnapshotRead(TypedDict):
    """
    A snapshot with, for each pair: ε̂, t̂, LB, the loss curve ℓ̂ over C and the profile δ̂(ε).
    """

    id: str
    monitor_id: str
    alarm_id: str | None
    trigger: Literal['schedule', 'on_demand', 'alarm']
    state: Literal['queued', 'running', 'succeeded', 'failed']
    status: Literal['pending', 'running', 'done', 'failed']
    params: dict[str, Any]
    error: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    lower_bound: NotRequired[float | None]
    epsilon_hat: NotRequired[float | None]
    statement: NotRequired[str | None]
    verdict: NotRequired[Verdict | None]
    result: dict[str, Any] | None


class SnapshotSummary(TypedDict):
    """
    A snapshot without its curves.
    """

    id: str
    monitor_id: str
    alarm_id: str | None
    trigger: Literal['schedule', 'on_demand', 'alarm']
    state: Literal['queued', 'running', 'succeeded', 'failed']
    status: Literal['pending', 'running', 'done', 'failed']
    params: dict[str, Any]
    error: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    lower_bound: NotRequired[float | None]
    epsilon_hat: NotRequired[float | None]
    statement: NotRequired[str | None]
    verdict: NotRequired[Verdict | None]


class AlarmEvidence(TypedDict):
    """
    Why the alarm fired, in the order to read it: what raised it (`check` for a privacy alarm, `contract`
    for a contract alarm), then the MPL snapshot, labelled as a separate estimator.
    """

    kind: Literal['privacy', 'contract']
    statement: str
    check: NotRequired[CheckEvidence | None]
    contract: NotRequired[ContractEvidence | None]
    snapshot: NotRequired[SnapshotEvidence | None]
    confirmation: NotRequired[Confirmation | None]


class AlarmRead(TypedDict):
    """
    A check's statistic M_t crossed its threshold (`privacy`), or the outputs broke their contract
    (`contract`).
    """

    id: str
    kind: Literal['privacy', 'contract']
    monitor_id: str
    monitor_name: NotRequired[str | None]
    archived: NotRequired[bool]
    archived_at: NotRequired[str | None]
    check_id: str | None
    period_run_id: str | None
    horizon_index: int
    t: int
    statistic: float | None
    threshold: float | None
    a: int | None
    b: int | None
    n: int | None
    z: float | None
    created_at: str
    acknowledged_at: str | None
    acknowledged_note: str | None
    resolved_at: str | None
    status: Literal['firing', 'resolved']
    fingerprint: str
    claim: NotRequired[dict[str, float] | None]
    evidence: NotRequired[AlarmEvidence | None]
    verdict: NotRequired[Verdict | None]


class CheckCreate(TypedDict):
    x: Any
    x_prime: Any
    event: Interval | IntervalUnion | DiscreteSet | Box | LatticeSet | RowSet | Projected | KeyReleased | KeyValue | KeyCount | KeySet | KeySets | KeySum | AutoEvent
    claim: NotRequired[ClaimSpec | None]


class MonitorCreate(TypedDict):
    name: str
    mechanism_id: str
    checks: list[CheckCreate]
    epsilon: NotRequired[float | None]
    claim: NotRequired[ClaimSpec | None]
    alpha: NotRequired[float]
    gamma: NotRequired[float]
    detector: NotRequired[Literal['aggregator', 'e-process', 'e-detector']]
    horizon: NotRequired[int | None]
    samples_per_period: int
    period_seconds: NotRequired[int | None]
    cron: NotRequired[str | None]
    variance: NotRequired[Literal['score', 'wald']]
    kappa: NotRequired[float]
    symmetric: NotRequired[bool]
    renew: NotRequired[bool]
    outputs_window: NotRequired[int]
    snapshot_every: NotRequired[int | None]
    alarm_snapshot_samples: NotRequired[int]
    start_at: NotRequired[str | None]
    rediscover_every: NotRequired[int | None]
    discovery_samples: NotRequired[int | None]
    discovery_fresh_samples: NotRequired[int | None]
    search_every: NotRequired[int]
    search_budget: NotRequired[int | None]


class MonitorUpdate(TypedDict):
    """
    A JSON merge patch (RFC 7396) of a monitor: the fields given change, the others keep their value.

    Changed in place, keeping the monitor's id, periods, alarms and running detectors, because none of
    them enters the threshold q(T, γ, α_j/m), a check's level or a detector's state: ``name``;
    ``samples_per_period`` (n: each period's z_t is standardised with that period's own n, and the
    lines and bets chosen from past periods use each period's own counts); the schedule
    (``period_seconds`` or ``cron``: the test counts periods, not time); the snapshot and discovery
    sizes; and ``rediscover_every``/``search_every`` between positive values (the share of α they
    reserve does not depend on K). They take effect from the next period: a period already sampling
    finishes with the values it started with. The fields that define the test (`mechanism_id`,
    `checks`, `epsilon`, `claim`, `alpha`, `gamma`, `detector`, `horizon`, `variance`, `kappa`,
    `symmetric`, `renew`) answer 409 when their value would change.
    """

    name: NotRequired[str]
    samples_per_period: NotRequired[int]
    period_seconds: NotRequired[int | None]
    cron: NotRequired[str | None]
    outputs_window: NotRequired[int]
    snapshot_every: NotRequired[int | None]
    alarm_snapshot_samples: NotRequired[int]
    discovery_samples: NotRequired[int | None]
    discovery_fresh_samples: NotRequired[int | None]
    rediscover_every: NotRequired[int]
    search_every: NotRequired[int]
    search_budget: NotRequired[int | None]
    mechanism_id: NotRequired[str]
    checks: NotRequired[list[CheckCreate]]
    epsilon: NotRequired[float | None]
    claim: NotRequired[ClaimSpec | None]
    alpha: NotRequired[float]
    gamma: NotRequired[float]
    detector: NotRequired[Literal['aggregator', 'e-process', 'e-detector']]
    horizon: NotRequired[int]
    variance: NotRequired[Literal['score', 'wald']]
    kappa: NotRequired[float]
    symmetric: NotRequired[bool]
    renew: NotRequired[bool]


class PageAlarmRead(TypedDict):
    items: list[AlarmRead]
    next_cursor: str | None


class PageSnapshotSummary(TypedDict):
    items: list[SnapshotSummary]
    next_cursor: str | None
