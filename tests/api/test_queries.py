"""Asking about the queue from Python, without shelling out: is prop_13 finished? Which
tasks failed?"""

from __future__ import annotations

from pathlib import Path

import pytest

import metaq_py
from metaq_py.errors import QueueError
from tests.cli.test_queue import metaq


def test_a_campaign_is_asked_about_from_python(tmp_path: Path) -> None:
    root = tmp_path / "q"
    assert metaq("init", str(root)).returncode == 0
    q = metaq_py.open_queue(root)
    for cfg in range(12, 15):
        q.submit(f"prop_{cfg}.sh", command=f"exit {1 if cfg == 14 else 0}", min_wc_time="1m")
    q.submit("sweep.sh", command="exit 0", min_wc_time="1m", array="0-2")
    assert q.state("prop_13.sh") == "waiting" and not q.finished("prop_13.sh")
    assert q.tasks("waiting") == ["todo/prop_12.sh", "todo/prop_13.sh", "todo/prop_14.sh",
                                  "todo/sweep.sh/0", "todo/sweep.sh/1", "todo/sweep.sh/2"]
    assert metaq("run", "--queue", str(root), "--batch", "local").returncode == 0
    assert q.finished("prop_13.sh") and q.finished("todo/prop_12.sh")
    assert q.finished("sweep.sh[2]")
    assert q.state("prop_14.sh") == "failed" and q.tasks("failed") == ["todo/prop_14.sh"]
    assert q.tasks("waiting") == [] and len(q.tasks("finished")) == 5
    with pytest.raises(QueueError, match=r"no task called 'prop_99\.sh'"):
        q.state("prop_99.sh")
    with pytest.raises(QueueError, match="'done' is not a state"):
        q.tasks("done")
