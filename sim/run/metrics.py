"""What a simulated run is judged by: each job's outcome (what the engine's ledger holds), and
pure functions that summarise them.

Definitions (the paper's metrics and the field's usual ones):

- wait = first start - submit; turnaround = end - submit (a preempted job's turnaround runs to
  its final end);
- bounded slowdown = max(1, turnaround / max(runtime, 10 s)), with the job's undisturbed
  runtime (Feitelson's bounded slowdown; the 10 s threshold keeps tiny jobs from dominating);
- utilisation = useful node-hours / (nodes x window hours); useful work is what the jobs
  needed, never work lost to preemption. The window defaults to first submit .. last end and
  is always stated with the figure;
- steady-state window = first submit + a warm-up (a week, at most a tenth of the submit
  span) .. last submit (:func:`steady_window`): it ends before the queue drains, so a policy
  that does the same work sooner shows a higher utilisation in it;
- busy node-hours = useful node-hours + node-hours lost to preemption; busy utilisation is
  read off the machine's busy series (:func:`busy_utilisation`);
- CQSim's utilisation = sum(runtime x size) / (nodes x (last end - first submit)), the figure
  CQSim prints, so runs can be compared with it like for like;
- on-demand instant-start rate = share of on-demand jobs started at their arrival;
- preemption ratio of a kind = share of its jobs preempted at least once (malleable jobs
  that were only shrunk are counted separately, as ``shrink_ratio``);
- node-hours lost to preemption = the sum of the jobs' ``lost_node_seconds``, in hours;
- decision time = wall-clock seconds per scheduling decision: mean, p50, p99 and max.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from metaq_py.policy.model import Kind

BSLD_THRESHOLD = 10.0
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What happened to one job in a run. The engine fills it when the job ends.

    ``start`` is the first start and ``end`` the final end (``None`` when the run's window
    closed first). ``runtime`` is the undisturbed run at full size; ``useful_node_seconds`` the
    node-seconds of work it needed (``runtime * size`` unless malleable resizing changed the
    shape, which under linear speedup leaves it unchanged). ``lost_node_seconds`` is work
    thrown away by preemptions (redone work and repeated setups), and under
    ``resize_cost="setup"`` the setups its shrinks and expands repeat. ``instant_start`` is set for
    on-demand jobs only; ``notice`` is their notice category.
    """

    id: int
    kind: Kind
    size: int
    submit: float
    start: float | None
    end: float | None
    runtime: float
    useful_node_seconds: float
    preemptions: int = 0
    shrinks: int = 0
    lost_node_seconds: float = 0.0
    instant_start: bool | None = None
    notice: str | None = None

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.submit

    @property
    def turnaround(self) -> float | None:
        return None if self.end is None else self.end - self.submit


@dataclass(frozen=True, slots=True)
class Stats:
    """Mean, median and 95th percentile of some seconds; ``None`` throughout when empty."""

    count: int
    mean: float | None
    median: float | None
    p95: float | None

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Stats:
        data = np.asarray(values, dtype=np.float64)
        if not len(data):
            return cls(0, None, None, None)
        return cls(len(data), float(data.mean()), float(np.median(data)),
                   float(np.percentile(data, 95)))


@dataclass(frozen=True, slots=True)
class ByKind:
    """One statistic over all jobs and per job kind."""

    all: Stats
    kinds: Mapping[str, Stats]


@dataclass(frozen=True, slots=True)
class Utilisation:
    """Useful node-hours over elapsed node-hours of ``nodes`` nodes from ``start`` to ``end``."""

    value: float | None
    start: float
    end: float
    nodes: int
    useful_node_hours: float


@dataclass(frozen=True, slots=True)
class DecisionTimes:
    """Wall-clock seconds per scheduling decision."""

    count: int
    mean: float | None
    p50: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class Summary:
    """Every metric of a run; :meth:`to_dict` gives the content of ``summary.json``."""

    jobs: int
    finished: int
    wait: ByKind
    turnaround: ByKind
    bounded_slowdown: ByKind
    utilisation: Utilisation
    cqsim_utilisation: float | None
    instant_start_rate: float | None
    preemption_ratio: Mapping[str, float | None]
    shrink_ratio: float | None
    lost_node_hours: float
    decision_time: DecisionTimes
    extra: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """Plain nested dicts, lists and numbers; times in seconds, work in node-hours."""
        data = asdict(self)
        for name in ("wait", "turnaround", "bounded_slowdown"):
            data[name] = {"all": data[name]["all"], **data[name]["kinds"]}
        data["preemption_ratio"] = dict(self.preemption_ratio)
        data["extra"] = dict(self.extra)
        return data


KIND_CODES: tuple[Kind, ...] = tuple(Kind)
"""The kinds in code order: :attr:`Columns.kind` holds indices into this."""
KIND_CODE: dict[Kind, int] = {k: i for i, k in enumerate(KIND_CODES)}
"""Each kind's code in :attr:`Columns.kind`."""


@dataclass(frozen=True, slots=True, eq=False)
class Columns:
    """Per-job outcomes as arrays, one row per job in submit order: what the metrics compute on.

    The engine hands these over directly; :meth:`of` builds them from :class:`JobOutcome`
    values. ``start`` and ``end`` are NaN where the job never started or never ended;
    ``instant`` says whether an on-demand job started at its arrival (read only for those).
    """

    kind: np.ndarray
    size: np.ndarray
    submit: np.ndarray
    start: np.ndarray
    end: np.ndarray
    runtime: np.ndarray
    useful: np.ndarray
    preemptions: np.ndarray
    shrinks: np.ndarray
    lost: np.ndarray
    instant: np.ndarray

    def __len__(self) -> int:
        return len(self.kind)

    @classmethod
    def of(cls, outcomes: Iterable[JobOutcome]) -> Columns:
        rows = list(outcomes)
        nan = float("nan")

        def floats(values: Iterable[float | None]) -> np.ndarray:
            return np.array([nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            kind=np.array([KIND_CODE[o.kind] for o in rows], dtype=np.int8),
            size=np.array([o.size for o in rows], dtype=np.int64),
            submit=floats(o.submit for o in rows), start=floats(o.start for o in rows),
            end=floats(o.end for o in rows), runtime=floats(o.runtime for o in rows),
            useful=floats(o.useful_node_seconds for o in rows),
            preemptions=np.array([o.preemptions for o in rows], dtype=np.int64),
            shrinks=np.array([o.shrinks for o in rows], dtype=np.int64),
            lost=floats(o.lost_node_seconds for o in rows),
            instant=np.array([bool(o.instant_start) for o in rows], dtype=bool))


OutcomeData = Sequence[JobOutcome] | Columns
"""What the metrics accept: outcome values, or the same as columns."""


def _columns(outcomes: OutcomeData) -> Columns:
    return outcomes if isinstance(outcomes, Columns) else Columns.of(outcomes)


def by_kind(outcomes: OutcomeData, name: str) -> ByKind:
    """Stats of ``name`` (``"wait"``, ``"turnaround"`` or ``"bounded_slowdown"``), overall and
    per kind, over the jobs for which it is defined."""
    c = _columns(outcomes)
    if name == "wait":
        values, defined = c.start - c.submit, ~np.isnan(c.start)
    elif name == "turnaround":
        values, defined = c.end - c.submit, ~np.isnan(c.end)
    elif name == "bounded_slowdown":
        values, defined = _bounded_slowdowns(c), ~np.isnan(c.end)
    else:
        raise ValueError(f"unknown per-job value {name!r}")
    kinds = {str(k): Stats.of(values[defined & (c.kind == i)])
             for i, k in enumerate(KIND_CODES)}
    return ByKind(all=Stats.of(values[defined]), kinds=kinds)


def _bounded_slowdowns(c: Columns, threshold: float = BSLD_THRESHOLD) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN for unfinished jobs, which are never read
        slowdowns: np.ndarray = np.maximum(1.0, (c.end - c.submit) / np.maximum(c.runtime,
                                                                                threshold))
    return slowdowns


def bounded_slowdown(o: JobOutcome, threshold: float = BSLD_THRESHOLD) -> float | None:
    """``max(1, turnaround / max(runtime, threshold))``; ``None`` for an unfinished job."""
    t = o.turnaround
    if t is None:
        return None
    return max(1.0, t / max(o.runtime, threshold))


def window_of(outcomes: OutcomeData) -> tuple[float, float]:
    """The default window: first submit to last end (last submit when nothing ended)."""
    c = _columns(outcomes)
    if not len(c):
        return (0.0, 0.0)
    ends = c.end[~np.isnan(c.end)]
    first = float(c.submit.min())
    return first, float(ends.max()) if len(ends) else float(c.submit.max())


def utilisation(outcomes: OutcomeData, *, nodes: int,
                window: tuple[float, float] | None = None) -> Utilisation:
    """Useful node-hours over ``nodes`` x window hours.

    A job's useful work is counted in the window in proportion to the overlap of its
    ``[start, end]`` with the window, which is exact for jobs that ran undisturbed; the default
    window contains every job whole.
    """
    c = _columns(outcomes)
    start, end = window if window is not None else window_of(c)
    ran = ~np.isnan(c.start)
    began = c.start[ran]
    stop = np.where(np.isnan(c.end[ran]), end, c.end[ran])
    instant = stop <= began  # no length: all in or all out
    inside = ((start <= began) & (began <= end)).astype(np.float64)
    span = np.where(instant, 1.0, stop - began)
    overlap = np.where(instant, inside,
                       np.maximum(0.0, np.minimum(stop, end) - np.maximum(began, start)) / span)
    # summed one job after another, as the definition reads
    useful = sum((c.useful[ran] * overlap).tolist(), 0.0)
    elapsed = nodes * (end - start)
    return Utilisation(value=useful / elapsed if elapsed > 0 else None, start=start, end=end,
                       nodes=nodes, useful_node_hours=useful / HOUR)


STEADY_WARMUP = 7 * 86400.0
"""The default warm-up of the steady-state window: a week, in seconds."""


def steady_window(outcomes: OutcomeData, *,
                  warmup: float = STEADY_WARMUP) -> tuple[float, float]:
    """The steady-state window: first submit plus a warm-up, to the last submit.

    Jobs keep arriving throughout it, so the queue is neither filling from empty nor
    draining; with a fixed amount of work, only such a window can show one policy doing
    more of it sooner. The warm-up is at most a tenth of the submit span, so a short trace
    keeps most of its window."""
    c = _columns(outcomes)
    if not len(c):
        return (0.0, 0.0)
    first, last = float(c.submit.min()), float(c.submit.max())
    return first + min(warmup, (last - first) / 10), last


def useful_node_hours(outcomes: OutcomeData) -> float:
    """Node-hours of the work the jobs needed (no lost work), over the whole run."""
    c = _columns(outcomes)
    ran = ~np.isnan(c.start)
    return sum(c.useful[ran].tolist(), 0.0) / HOUR


def busy_node_hours(outcomes: OutcomeData) -> float:
    """Node-hours the machine spent running jobs: useful work plus work lost to
    preemption (redone work and repeated setups), over the whole run."""
    return useful_node_hours(outcomes) + lost_node_hours(outcomes)


def busy_utilisation(time: np.ndarray, busy: np.ndarray, *, nodes: int,
                     window: tuple[float, float]) -> float | None:
    """Busy node-seconds over ``nodes`` x window seconds, from the machine's busy series (a
    step function: ``busy[i]`` nodes ran jobs from ``time[i]`` to ``time[i + 1]``, and the
    last value holds to the window's end). Exact, lost work included."""
    start, end = window
    if end <= start or not len(time):
        return None
    edges = np.clip(np.append(np.asarray(time, dtype=np.float64), end), start, end)
    spans = np.diff(edges)
    return float(np.dot(spans, np.asarray(busy, dtype=np.float64))) / (nodes * (end - start))


def cqsim_utilisation(outcomes: OutcomeData, *, nodes: int) -> float | None:
    """CQSim's figure: ``sum(runtime * size) / (nodes * (last end - first submit))``."""
    c = _columns(outcomes)
    done = ~np.isnan(c.end)
    if not done.any():
        return None
    span = float(c.end[done].max()) - float(c.submit.min())
    if span <= 0:
        return None
    return sum((c.runtime[done] * c.size[done]).tolist(), 0.0) / (nodes * span)


def _share(flags: np.ndarray) -> float | None:
    return int(flags.sum()) / len(flags) if len(flags) else None


def instant_start_rate(outcomes: OutcomeData) -> float | None:
    """Share of on-demand jobs that started at once (``None`` with no on-demand jobs)."""
    c = _columns(outcomes)
    return _share(c.instant[c.kind == KIND_CODE[Kind.ONDEMAND]])


def preemption_ratio(outcomes: OutcomeData, kind: Kind) -> float | None:
    """Share of jobs of ``kind`` preempted at least once (``None`` with no such jobs)."""
    c = _columns(outcomes)
    return _share(c.preemptions[c.kind == KIND_CODE[kind]] > 0)


def shrink_ratio(outcomes: OutcomeData) -> float | None:
    """Share of malleable jobs shrunk at least once."""
    c = _columns(outcomes)
    return _share(c.shrinks[c.kind == KIND_CODE[Kind.MALLEABLE]] > 0)


def lost_node_hours(outcomes: OutcomeData) -> float:
    """Node-hours of work thrown away by preemption."""
    return sum(_columns(outcomes).lost.tolist(), 0.0) / HOUR


def decision_times(durations: Sequence[float] | np.ndarray) -> DecisionTimes:
    """Summary of per-decision wall-clock durations in seconds."""
    data = np.asarray(durations, dtype=np.float64)
    if not len(data):
        return DecisionTimes(0, None, None, None, None)
    return DecisionTimes(len(data), float(data.mean()), float(np.percentile(data, 50)),
                         float(np.percentile(data, 99)), float(data.max()))


def summarise(outcomes: OutcomeData, *, nodes: int,
              window: tuple[float, float] | None = None,
              decision_durations: Sequence[float] | np.ndarray = (),
              extra: Mapping[str, object] | None = None) -> Summary:
    """Every metric of a run of ``outcomes`` on a ``nodes``-node machine."""
    outcomes = _columns(outcomes)
    return Summary(
        jobs=len(outcomes),
        finished=int((~np.isnan(outcomes.end)).sum()),
        wait=by_kind(outcomes, "wait"),
        turnaround=by_kind(outcomes, "turnaround"),
        bounded_slowdown=by_kind(outcomes, "bounded_slowdown"),
        utilisation=utilisation(outcomes, nodes=nodes, window=window),
        cqsim_utilisation=cqsim_utilisation(outcomes, nodes=nodes),
        instant_start_rate=instant_start_rate(outcomes),
        preemption_ratio={str(Kind.RIGID): preemption_ratio(outcomes, Kind.RIGID),
                          str(Kind.MALLEABLE): preemption_ratio(outcomes, Kind.MALLEABLE)},
        shrink_ratio=shrink_ratio(outcomes),
        lost_node_hours=lost_node_hours(outcomes),
        decision_time=decision_times(decision_durations),
        extra=dict(extra or {}),
    )
