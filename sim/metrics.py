"""What a simulated run is judged by: the per-job record the engine fills, and pure functions
that summarise a list of them.

Definitions (the paper's metrics and the field's usual ones):

- wait = first start - submit; turnaround = end - submit (a preempted job's turnaround runs to
  its final end);
- bounded slowdown = max(1, turnaround / max(runtime, 10 s)), with the job's undisturbed
  runtime (Feitelson's bounded slowdown; the 10 s threshold keeps tiny jobs from dominating);
- utilisation = useful node-hours / (nodes x window hours); useful work is what the jobs
  needed, never work lost to preemption. The window defaults to first submit .. last end and
  is always stated with the figure;
- CQSim's utilisation = sum(runtime x size) / (nodes x (last end - first submit)), the figure
  CQSim prints, so runs can be compared with it like for like;
- on-demand instant-start rate = share of on-demand jobs started at their arrival;
- preemption ratio of a kind = share of its jobs preempted at least once (malleable jobs
  that were only shrunk are counted separately, as ``shrink_ratio``);
- node-hours lost to preemption = the sum of the jobs' ``lost_node_seconds``, in hours;
- decision time = wall-clock seconds per scheduling decision: mean, p50, p99 and max.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from metaq_py.policy.model import Kind
from metaq_py.policy.value import value

BSLD_THRESHOLD = 10.0
HOUR = 3600.0


@value
class JobOutcome:
    """What happened to one job in a run. The engine fills it when the job ends.

    ``start`` is the first start and ``end`` the final end (``None`` when the run's window
    closed first). ``runtime`` is the undisturbed run at full size; ``useful_node_seconds`` the
    node-seconds of work it needed (``runtime * size`` unless malleable resizing changed the
    shape, which under linear speedup leaves it unchanged). ``lost_node_seconds`` is work
    thrown away by preemptions (redone work and repeated setups). ``instant_start`` is set for
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


def by_kind(outcomes: Iterable[JobOutcome], name: str) -> ByKind:
    """Stats of ``name`` (``"wait"``, ``"turnaround"`` or ``"bounded_slowdown"``), overall and
    per kind, over the jobs for which it is defined."""
    get = _VALUES.get(name)
    if get is None:
        raise ValueError(f"unknown per-job value {name!r}")
    every: list[float] = []
    per_kind: dict[Kind, list[float]] = {k: [] for k in Kind}
    for o in outcomes:
        v = get(o)
        if v is not None:
            every.append(v)
            per_kind[o.kind].append(v)
    kinds = {str(k): Stats.of(values) for k, values in per_kind.items()}
    return ByKind(all=Stats.of(every), kinds=kinds)


def bounded_slowdown(o: JobOutcome, threshold: float = BSLD_THRESHOLD) -> float | None:
    """``max(1, turnaround / max(runtime, threshold))``; ``None`` for an unfinished job."""
    t = o.turnaround
    if t is None:
        return None
    return max(1.0, t / max(o.runtime, threshold))


_VALUES: dict[str, Callable[[JobOutcome], float | None]] = {
    "wait": lambda o: o.wait,
    "turnaround": lambda o: o.turnaround,
    "bounded_slowdown": bounded_slowdown,
}


def window_of(outcomes: Sequence[JobOutcome]) -> tuple[float, float]:
    """The default window: first submit to last end (last submit when nothing ended)."""
    if not outcomes:
        return (0.0, 0.0)
    ends = [o.end for o in outcomes if o.end is not None]
    first = min(o.submit for o in outcomes)
    return first, max(ends) if ends else max(o.submit for o in outcomes)


def utilisation(outcomes: Sequence[JobOutcome], *, nodes: int,
                window: tuple[float, float] | None = None) -> Utilisation:
    """Useful node-hours over ``nodes`` x window hours.

    A job's useful work is counted in the window in proportion to the overlap of its
    ``[start, end]`` with the window, which is exact for jobs that ran undisturbed; the default
    window contains every job whole.
    """
    start, end = window if window is not None else window_of(outcomes)
    useful = 0.0
    for o in outcomes:
        if o.start is None:
            continue
        stop = o.end if o.end is not None else end
        if stop <= o.start:
            overlap = 1.0 if start <= o.start <= end else 0.0
        else:
            overlap = max(0.0, min(stop, end) - max(o.start, start)) / (stop - o.start)
        useful += o.useful_node_seconds * overlap
    elapsed = nodes * (end - start)
    return Utilisation(value=useful / elapsed if elapsed > 0 else None, start=start, end=end,
                       nodes=nodes, useful_node_hours=useful / HOUR)


def cqsim_utilisation(outcomes: Sequence[JobOutcome], *, nodes: int) -> float | None:
    """CQSim's figure: ``sum(runtime * size) / (nodes * (last end - first submit))``."""
    done = [o for o in outcomes if o.end is not None]
    if not done:
        return None
    span = max(o.end for o in done if o.end is not None) - min(o.submit for o in outcomes)
    if span <= 0:
        return None
    return sum(o.runtime * o.size for o in done) / (nodes * span)


def instant_start_rate(outcomes: Iterable[JobOutcome]) -> float | None:
    """Share of on-demand jobs that started at once (``None`` with no on-demand jobs)."""
    flags = [bool(o.instant_start) for o in outcomes if o.kind is Kind.ONDEMAND]
    return sum(flags) / len(flags) if flags else None


def preemption_ratio(outcomes: Iterable[JobOutcome], kind: Kind) -> float | None:
    """Share of jobs of ``kind`` preempted at least once (``None`` with no such jobs)."""
    flags = [o.preemptions > 0 for o in outcomes if o.kind is kind]
    return sum(flags) / len(flags) if flags else None


def shrink_ratio(outcomes: Iterable[JobOutcome]) -> float | None:
    """Share of malleable jobs shrunk at least once."""
    flags = [o.shrinks > 0 for o in outcomes if o.kind is Kind.MALLEABLE]
    return sum(flags) / len(flags) if flags else None


def lost_node_hours(outcomes: Iterable[JobOutcome]) -> float:
    """Node-hours of work thrown away by preemption."""
    return sum(o.lost_node_seconds for o in outcomes) / HOUR


def decision_times(durations: Sequence[float] | np.ndarray) -> DecisionTimes:
    """Summary of per-decision wall-clock durations in seconds."""
    data = np.asarray(durations, dtype=np.float64)
    if not len(data):
        return DecisionTimes(0, None, None, None, None)
    return DecisionTimes(len(data), float(data.mean()), float(np.percentile(data, 50)),
                         float(np.percentile(data, 99)), float(data.max()))


def summarise(outcomes: Sequence[JobOutcome], *, nodes: int,
              window: tuple[float, float] | None = None,
              decision_durations: Sequence[float] | np.ndarray = (),
              extra: Mapping[str, object] | None = None) -> Summary:
    """Every metric of a run of ``outcomes`` on a ``nodes``-node machine."""
    return Summary(
        jobs=len(outcomes),
        finished=sum(1 for o in outcomes if o.end is not None),
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
