"""A synthetic Theta-like workload: the simulator's default when no trace file is given.

Jobs come in *campaigns*, as on the real machine: a project submits a run of jobs with the same
size and walltime, seconds to an hour apart (the same grouping :mod:`sim.workload.grouping` uses to
find them in a trace). Every distribution below was measured on the ALCF Theta 2022 log
(23,911 jobs, 4,360 nodes; ``../shared/traces/theta_2022.swf.gz``) with campaigns cut where the
same (size, walltime) signature pauses for more than an hour, and is embedded here as a small
table; the trace itself is not needed. ``docs/model.md`` ("Synthetic Theta workload") gives the
fit and what it leaves out.

Draws, all from one seeded generator:

- campaign length: the empirical distribution (1 job in 62% of campaigns, up to 68);
- campaign size: Theta's sizes cluster on a few values (128 nodes for 56% of jobs, 256 for
  18%, then 1,024, 512 ...); each value at least 20 jobs used is kept with its job count, the
  rest are drawn uniformly within their power-of-two band, with the band's count. The table
  counts jobs, not campaigns, and the length is drawn independently of the size, so the
  *job* sizes of a long synthetic trace follow Theta's;
- campaign walltime: drawn from the measured walltime quantiles of the campaign's size band
  (128, 129-255, 256-511, 512-1,023, 1,024-2,047, 2,048 nodes and up), because walltime grows
  with size on Theta and the work per job (hence the arrival rate at a given load) depends on
  it;
- runtime: the job's walltime times a ratio drawn from the measured quantiles of
  runtime / walltime (after capping at the walltime; 29% of jobs use all of it);
- gaps between jobs of a campaign: the measured quantiles;
- gaps between campaign starts: the measured quantiles in units of their mean, then scaled so
  that the offered load ``sum(runtime * size) / (nodes * submit span)`` meets the target;
- project: a Zipf-like popularity over ``projects`` synthetic projects (exponent ``skew``), so
  a few projects submit most campaigns, as at real sites.
"""

from __future__ import annotations

import numpy as np

from sim.trace.cleaning import CleaningReport
from sim.trace.columns import JobTable
from sim.trace.loader import Trace

THETA_NODES = 4360
THETA_JOBS = 23_911
THETA_LOAD = 0.76
"""Offered load of Theta 2022 over its submit span (0.753 with runtimes capped at walltime)."""
JOBS_PER_PROJECT = 120
"""Default projects = jobs / this, about the ratio of a year of Theta (not in the SWF trace)."""

# Quantile tables share these probabilities; sampled by linear interpolation.
PROBS = (0, 0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.225, 0.25, 0.275, 0.3,
         0.325, 0.35, 0.375, 0.4, 0.425, 0.45, 0.475, 0.5, 0.525, 0.55, 0.575, 0.6, 0.625, 0.65,
         0.675, 0.7, 0.725, 0.75, 0.775, 0.8, 0.825, 0.85, 0.875, 0.9, 0.925, 0.95, 0.975, 0.99,
         0.995, 0.999, 1)
RUNTIME_RATIO = (0.0002, 0.0026, 0.0049, 0.0089, 0.0154, 0.0206, 0.0263, 0.0364, 0.0533, 0.0811,
                 0.111, 0.1628, 0.2261, 0.3037, 0.3633, 0.4475, 0.5262, 0.5784, 0.6452, 0.7088,
                 0.7496, 0.7981, 0.8392, 0.8833, 0.9241, 0.9471, 0.9708, 0.9789, 0.9836, 0.9881,
                 0.995, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
"""Quantiles of runtime / requested walltime, per job."""
INTRA_GAP = (0, 0, 0, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 12, 13, 15, 17, 18, 20, 22, 27, 37, 45, 62,
             84, 124, 181, 260, 350, 496, 530, 613, 793, 980, 1059, 1345, 1569, 1978, 2377,
             2642, 3117, 3512, 3535, 3572, 3596)
"""Quantiles of the seconds between consecutive jobs of one campaign."""
CAMPAIGN_GAP = (0, 0.0007, 0.001, 0.0026, 0.0056, 0.0118, 0.0252, 0.0414, 0.0583, 0.0796,
                0.1016, 0.1278, 0.1533, 0.1786, 0.2061, 0.2406, 0.2752, 0.3126, 0.3453, 0.384,
                0.4253, 0.4685, 0.5137, 0.5675, 0.6332, 0.693, 0.7625, 0.8299, 0.9112, 0.9972,
                1.1113, 1.2123, 1.3218, 1.4718, 1.6296, 1.8481, 2.1231, 2.4381, 2.8913, 3.5911,
                5.1309, 7.9871, 10.3504, 15.4339, 44.5075)
"""Quantiles of the time between campaign starts, in units of its mean (3,052 s on Theta)."""
CAMPAIGN_LENGTH = (
    (1, 6422), (2, 1639), (3, 699), (4, 446), (5, 256), (6, 197), (7, 106), (8, 105), (9, 54),
    (10, 65), (11, 36), (12, 56), (13, 28), (14, 20), (15, 24), (16, 15), (17, 18), (18, 15),
    (19, 21), (20, 31), (21, 7), (22, 5), (23, 4), (24, 5), (25, 1), (26, 2), (27, 1), (28, 1),
    (29, 3), (30, 5), (31, 1), (32, 3), (34, 1), (40, 1), (42, 1), (43, 1), (51, 1), (68, 1))
"""(jobs in the campaign, number of campaigns)."""
SIZE = (
    (128, 13396), (129, 23), (130, 20), (136, 41), (140, 28), (144, 77), (150, 59), (160, 23),
    (192, 345), (216, 68), (256, 4363), (280, 22), (285, 21), (300, 121), (384, 193), (400, 133),
    (416, 27), (480, 40), (500, 63), (504, 71), (512, 1022), (540, 84), (600, 78), (632, 27),
    (640, 211), (700, 33), (768, 78), (802, 106), (804, 212), (808, 31), (840, 21), (875, 137),
    (957, 50), (1000, 21), (1024, 1198), (1056, 25), (1140, 21), (1408, 29), (1536, 37),
    (1620, 44), (2048, 139), (2400, 44), (3180, 28), (3850, 22))
"""(nodes, jobs) for every size at least 20 jobs used."""
SIZE_BANDS = ((129, 255, 251), (256, 511, 287), (512, 1023, 262), (1024, 2047, 180),
              (2048, 4048, 99))
"""(lowest, highest, jobs) of the rarer sizes, drawn uniformly within the band."""
WALLTIME_BY_SIZE = (
    (128, (1200, 1800, 1800, 1800, 1800, 1800, 1800, 2400, 2400, 2400, 2400, 2700, 3600, 3600,
           3600, 3600, 3600, 3600, 3600, 7020, 7200, 7200, 9780, 10740, 10800, 10800, 10800,
           10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800,
           10800, 10800, 10800, 10800, 10800, 10800)),
    (129, (1800, 1800, 1800, 1800, 2100, 3600, 3600, 4800, 5400, 7200, 7200, 7200, 10200, 10500,
           10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800,
           10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800, 10800,
           10800, 10800, 10800, 10800, 10800, 10800, 10800)),
    (256, (1800, 1800, 1800, 2400, 2400, 2400, 2400, 3600, 3600, 3600, 3600, 3600, 3600, 7200,
           7200, 7200, 10800, 10800, 10800, 14400, 14400, 19800, 21540, 21600, 21600, 21600,
           21600, 21600, 21600, 21600, 21600, 21600, 21600, 21600, 21600, 21600, 21600, 21600,
           21600, 32340, 32400, 32400, 32400, 32400, 32400)),
    (512, (1800, 1800, 1800, 1800, 3600, 3600, 3600, 3600, 3600, 3600, 3600, 5400, 7200, 9960,
           10800, 10800, 10800, 10800, 10800, 10800, 12600, 14400, 18000, 21600, 21600, 21600,
           28800, 28800, 28800, 30600, 32340, 32400, 32400, 32400, 32400, 38400, 43200, 43200,
           86100, 86100, 86400, 86400, 86400, 86400, 86400)),
    (1024, (1800, 1800, 1800, 1800, 1800, 1800, 1800, 1800, 1800, 1800, 1800, 1800, 1800, 3600,
            3600, 3600, 7200, 7200, 7200, 10800, 12600, 14400, 14400, 21600, 21600, 21600, 21600,
            25200, 32400, 43200, 43200, 57480, 73800, 86340, 86400, 86400, 86400, 86400, 86400,
            86400, 86400, 86400, 86400, 86400, 86400)),
    (2048, (1800, 1800, 1800, 1800, 3600, 5400, 7200, 7200, 7200, 7200, 7200, 7200, 10800, 10800,
            12600, 14400, 18000, 21600, 21600, 21600, 21600, 21600, 21600, 28800, 32400, 43200,
            43200, 54000, 72000, 86400, 86400, 86400, 86400, 86400, 86400, 86400, 86400, 86400,
            86400, 86400, 86400, 86400, 86400, 86400, 86400)),
)
"""(smallest size of the band, walltime quantiles at PROBS) per size band: bigger jobs ask for
longer walltimes (a 128-node job asks for 6,900 s on average, a 2,048-node one 40,400 s).
Sampled as a step function, so only walltimes users really chose come out."""


def synthetic_trace(*, jobs: int = THETA_JOBS, load: float = THETA_LOAD, seed: int = 0,
                    nodes: int = THETA_NODES, projects: int | None = None,
                    skew: float = 1.0) -> Trace:
    """A seeded Theta-like trace of ``jobs`` jobs offering ``load`` of a ``nodes``-node machine.

    ``projects`` defaults to ``jobs / 120`` (at least 10). Sizes above ``nodes`` (on a smaller
    machine) are clamped to it. The same arguments always give the same trace. Submit times
    start at 0; ids are ``1..jobs`` in submit order.
    """
    if jobs < 1:
        raise ValueError(f"need at least one job, got {jobs}")
    if not load > 0:
        raise ValueError(f"the offered load must be positive, got {load}")
    if nodes < 1:
        raise ValueError(f"the machine needs at least one node, got {nodes}")
    rng = np.random.default_rng(seed)
    n_projects = projects if projects is not None else max(10, round(jobs / JOBS_PER_PROJECT))
    if n_projects < 1:
        raise ValueError(f"need at least one project, got {n_projects}")

    lengths = _campaign_lengths(rng, jobs)
    campaigns = len(lengths)
    campaign_size = np.minimum(_sizes(rng, campaigns), nodes)
    campaign_walltime = _walltimes(rng, campaign_size)
    weights = 1.0 / np.arange(1, n_projects + 1) ** skew
    campaign_project = rng.choice(n_projects, size=campaigns, p=weights / weights.sum())
    starts_unit = np.cumsum(_quantiles(rng, CAMPAIGN_GAP, campaigns))

    owner = np.repeat(np.arange(campaigns), lengths)
    gaps = _quantiles(rng, INTRA_GAP, jobs)
    first_of_campaign = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    gaps[first_of_campaign] = 0.0
    offsets = np.cumsum(gaps)
    offsets -= np.repeat(offsets[first_of_campaign], lengths)

    size = campaign_size[owner]
    walltime = campaign_walltime[owner].astype(np.float64)
    ratio = _quantiles(rng, RUNTIME_RATIO, jobs)
    runtime = np.clip(np.round(ratio * walltime), 1.0, walltime)

    work = float(np.dot(runtime, size.astype(np.float64)))
    span = work / (load * nodes)
    submit = _scaled_submits(starts_unit, owner, offsets, span)

    order = np.argsort(submit, kind="stable")
    submit = submit[order] - submit[order][0]
    labels = np.array([f"p{k:04d}" for k in range(n_projects)], dtype=object)
    table = JobTable.empty(jobs).with_columns(
        submit=submit, runtime=runtime[order], walltime=walltime[order], nodes=size[order],
        requested_nodes=size[order], wait=np.full(jobs, np.nan),
        status=np.ones(jobs, dtype=np.int64), project=labels[campaign_project[owner][order]])
    report = CleaningReport(records=jobs, kept=jobs, machine_nodes=nodes)
    return Trace(source=f"synthetic Theta-like workload (seed {seed})", format="synthetic",
                 nodes=nodes, jobs=table, report=report)


def _quantiles(rng: np.random.Generator, table: tuple[float, ...], n: int) -> np.ndarray:
    return np.interp(rng.random(n), PROBS, table)


def _campaign_lengths(rng: np.random.Generator, jobs: int) -> np.ndarray:
    values = np.array([v for v, _ in CAMPAIGN_LENGTH])
    counts = np.array([c for _, c in CAMPAIGN_LENGTH], dtype=np.float64)
    mean = float(np.dot(values, counts) / counts.sum())
    lengths = np.empty(0, dtype=np.int64)
    while lengths.sum() < jobs:
        more = int((jobs - lengths.sum()) / mean * 1.1) + 16
        lengths = np.concatenate((lengths, rng.choice(values, size=more, p=counts / counts.sum())))
    total = np.cumsum(lengths)
    last = int(np.searchsorted(total, jobs))
    lengths = lengths[: last + 1].copy()
    lengths[-1] -= int(total[last]) - jobs  # trim the last campaign to hit the job count
    return lengths


def _from_table(rng: np.random.Generator, exact: tuple[tuple[int, int], ...],
                bands: tuple[tuple[int, int, int], ...], n: int, step: int,
                inclusive: bool) -> np.ndarray:
    exact_weights = [c for _, c in exact]
    band_weights = [c for *_, c in bands]
    weights = np.array(exact_weights + band_weights, dtype=np.float64)
    pick = rng.choice(len(weights), size=n, p=weights / weights.sum())
    values = np.array([v for v, _ in exact] + [0] * len(bands), dtype=np.int64)[pick]
    for b, (low, high, _) in enumerate(bands):
        rows = pick == len(exact) + b
        top = high // step + (1 if inclusive else 0)
        values[rows] = rng.integers(-(-low // step), top, size=int(rows.sum())) * step
    return values


def _sizes(rng: np.random.Generator, n: int) -> np.ndarray:
    return _from_table(rng, SIZE, SIZE_BANDS, n, step=1, inclusive=True)


def _walltimes(rng: np.random.Generator, sizes: np.ndarray) -> np.ndarray:
    probs = np.asarray(PROBS)
    step = np.searchsorted(probs, rng.random(len(sizes)), side="left")
    lows = np.array([low for low, _ in WALLTIME_BY_SIZE])
    band = np.maximum(np.searchsorted(lows, sizes, side="right") - 1, 0)
    table = np.array([quantiles for _, quantiles in WALLTIME_BY_SIZE], dtype=np.int64)
    return table[band, step]


def _scaled_submits(starts_unit: np.ndarray, owner: np.ndarray, offsets: np.ndarray,
                    span: float) -> np.ndarray:
    """Submit times whose span is ``span``: campaign starts are stretched by one factor (found
    by a few secant steps, since within-campaign gaps do not stretch)."""
    base = starts_unit - starts_unit[0]

    def submits(scale: float) -> np.ndarray:
        return base[owner] * scale + offsets

    def span_of(scale: float) -> float:
        s = submits(scale)
        return float(s.max() - s.min())

    if base[-1] <= 0:
        return submits(1.0)
    scale = span / base[-1]
    for _ in range(8):
        achieved = span_of(scale)
        if achieved <= 0 or abs(achieved - span) <= 1e-9 * span:
            break
        scale = max(scale * span / achieved, 0.0)
    return submits(scale)
