"""The campaign example (share/queue/examples/campaign) run by real ``metaq run`` processes:
20 propagators as an array, 20 contractions each after its propagator, one analysis after
them all; two local batch jobs share the queue. Every task runs exactly once, in a valid
order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.cli.test_queue import REPO, metaq

CAMPAIGN = REPO / "metaq_py" / "share" / "queue" / "examples" / "campaign"


def test_the_campaign_runs_every_task_once_in_a_valid_order(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    (q / "metaq.yaml").write_text("poll_interval: 1s\n")
    scripts = [str(CAMPAIGN / n) for n in ("prop.sh", "contract.sh", "analysis.sh")]
    sub = metaq("submit", "--queue", str(q), *scripts)
    assert sub.returncode == 0, sub.stderr
    assert "todo/prop.sh[0-19] (20 tasks)" in sub.stdout
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "CAMPAIGN_DIR": str(out), "CAMPAIGN_SLEEP": "0.1"}
    runners = [subprocess.Popen([sys.executable, "-m", "metaq_py", "run", "--queue", str(q),
                                 "--nodes", "2", "--walltime", "1h"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    for r in runners:
        _, err = r.communicate(timeout=240)
        assert r.returncode == 0, err
    lines = (out / "order.log").read_text().splitlines()
    starts = Counter(line for line in lines if line.startswith("start"))
    wanted = {f"start {step} {i}" for step in ("prop", "contract") for i in range(20)}
    assert set(starts) == wanted | {"start analysis"}
    assert set(starts.values()) == {1}  # each task ran exactly once
    at = {line: n for n, line in enumerate(lines)}
    for i in range(20):
        assert at[f"end prop {i}"] < at[f"start contract {i}"]
        assert at[f"end contract {i}"] < at["start analysis"]
    assert (out / "analysis.out").read_text().count("correlator") == 20
    # The queue agrees: 41 tasks finished, none waiting or failed; one start each.
    finished = metaq("ls", "finished", "--json", "--queue", str(q))
    assert len(json.loads(finished.stdout)) == 41
    assert json.loads(metaq("ls", "--json", "--queue", str(q)).stdout) == []
    assert not list((q / "failed").rglob("*.sh*"))
    started = Counter(json.loads(e)["task"] for log in (q / "jobs").glob("*/events.jsonl")
                      for e in log.read_text().splitlines() if '"event":"start"' in e)
    assert len(started) == 41 and set(started.values()) == {1}
