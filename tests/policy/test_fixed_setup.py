"""R2: a malleable job's setup takes the same time at any size (t = t_single / n + t_setup).
Job M below: 10 nodes, walltime 1,100 s at full size, of which 100 s setup."""

from __future__ import annotations

from metaq_py.cluster import Cluster
from metaq_py.policy import Job, Kind
from metaq_py.policy.checkpoint import resumed
from metaq_py.policy.work import resized


def m(fixed: bool) -> Job:
    return Job("M", Kind.MALLEABLE, 10, 1100.0, 0.0, min_size=2, runtime=1100.0, setup=100.0,
               fixed_setup=fixed)


def test_only_the_time_past_the_setup_scales_with_the_size() -> None:
    # 5 nodes: 100 + 1000 * 10/5 = 2100, against 1100 * 10/5 = 2200 when the setup scales
    assert m(True).time_at(5, False) == 2100.0
    assert m(False).time_at(5, False) == 2200.0
    assert m(True).time_at(10, True) == 1100.0
    c = Cluster(10)
    assert c.start(m(True), (0, 1, 2, 3, 4), now=0.0).end == 2100.0


def test_a_resize_during_the_setup_leaves_what_is_left_of_it() -> None:
    c = Cluster(10)
    r = c.start(m(True), tuple(range(10)), now=0.0)
    # at 50, 50 s of setup are left, then 1,000 s of work at 10 nodes = 2,000 s at 5
    assert resized(r, (0, 1, 2, 3, 4), 50.0).end == 50.0 + 50.0 + 2000.0
    # at 600 the setup is done: the 500 s left double
    assert resized(r, (0, 1, 2, 3, 4), 600.0).end == 600.0 + 1000.0


def test_a_resumed_job_pays_its_setup_once_more_at_full_size() -> None:
    c = Cluster(10)
    r = c.start(m(True), (0, 1, 2, 3, 4), now=0.0)  # ends at 2,100
    # at 1,100: 1,000 s of work at 5 nodes left = 500 s at 10, plus the setup again
    back = resumed(r, 1100.0)
    assert (back.walltime, back.runtime) == (600.0, 600.0)
    # preempted during its setup (at 40: 60 s of setup left, none of it work)
    assert resumed(r, 40.0).walltime == 1000.0 + 100.0
