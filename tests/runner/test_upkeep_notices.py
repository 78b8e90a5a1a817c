"""Reading ``notices/`` at every pass (:mod:`metaq_py.runner.upkeep`): an unchanged folder
that held no notice is not listed again for :data:`NOTICES_TRUSTED` seconds, and a notice
written meanwhile is seen at the next pass all the same."""

from __future__ import annotations

from pathlib import Path

from metaq_py.queue.notices import write_notice
from metaq_py.runner.upkeep import NOTICES_TRUSTED
from tests.runner.fakes import START, World
from tests.runner_helpers import make_queue


def test_a_notice_written_between_passes_is_seen_at_the_next(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    r = World({}).runner(q, nodes=4)
    upkeep, cluster = r.upkeep, r.cluster
    now = START + 1.0
    upkeep.sync_notices(now)
    assert not cluster.notices and upkeep._no_notices is not None  # none, and trusted
    assert upkeep._no_notices[1] == now + NOTICES_TRUSTED
    write_notice(q.root, nodes=2, arrival=now + 600, walltime=300, now=now, name="beam")
    upkeep.sync_notices(now + 0.001)  # the folder changed: listed again at once
    assert set(cluster.notices) == {"beam"} and upkeep._no_notices is None
    (q.root / "notices" / "beam.json").unlink()
    upkeep.sync_notices(now + 0.002)  # a notice known: always listed, so its end is seen
    assert not cluster.notices


def test_an_unchanged_empty_folder_is_listed_again_after_a_while(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    r = World({}).runner(q, nodes=4)
    upkeep = r.upkeep
    upkeep.sync_notices(START)
    first = upkeep._no_notices
    upkeep.sync_notices(START + NOTICES_TRUSTED / 2)
    assert upkeep._no_notices == first  # trusted: not listed again
    upkeep.sync_notices(START + NOTICES_TRUSTED)
    assert upkeep._no_notices is not None and upkeep._no_notices[1] == \
        START + 2 * NOTICES_TRUSTED  # listed again, and trusted from then on
