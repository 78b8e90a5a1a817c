"""``metaq jobs`` lists the batch jobs that ran on a queue; ``metaq gantt`` without a job id
draws the latest."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_queue import metaq


def _run(q: Path, tmp_path: Path, name: str, code: int, jobid: str) -> None:
    task = tmp_path / name
    task.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\nexit {code}\n")
    task.chmod(0o755)
    assert metaq("submit", str(task), "--queue", str(q)).returncode == 0
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--jobid", jobid)
    assert ran.returncode == 0, ran.stderr


def test_jobs_lists_every_batch_job_and_gantt_draws_the_latest(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    none = metaq("jobs", "--queue", str(q))
    assert none.stdout == f"no batch job has run metaq on {q} yet\n"
    nothing = metaq("gantt", "--queue", str(q))
    assert nothing.returncode == 1 and "nothing to draw" in nothing.stderr
    _run(q, tmp_path, "ok.sh", 0, "900")
    _run(q, tmp_path, "bad.sh", 5, "17")  # started later, though its id sorts first
    listed = metaq("jobs", "--queue", str(q))
    assert listed.returncode == 0, listed.stderr
    first, second = listed.stdout.splitlines()
    assert first.startswith("900  ") and "  1 node  1 finished  for " in first
    assert second.startswith("17  ") and "  1 failed  " in second
    assert second.endswith("stopped: nothing left to run")
    data = json.loads(metaq("jobs", "--json", "--queue", str(q)).stdout)
    assert [(d["job"], d["ended"]) for d in data] == [("900", {"finished": 1}),
                                                      ("17", {"failed": 1})]
    drawn = metaq("gantt", "--queue", str(q), cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.startswith("wrote gantt-17.png: 1 host, 1 task, ")
    assert (tmp_path / "gantt-17.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
