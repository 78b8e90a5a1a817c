"""A campaign's failure semantics end to end (issue 31): ``metaq run`` in a real batch job on
the local four-node SLURM, with a generator's tasks as a lattice campaign writes them. A third
of the outputs exist beforehand, some tasks exit 75 once, one array fails on every index, one
task hangs, one asks for more memory than a node has, one allocates past its ``MEM``. Skips,
with the reason, when the cluster is not up."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from metaq_py.queue.admin import QueueAdmin
from metaq_py.queue.submit import Submitter
from tests.conftest import REPO, SlurmCluster
from tests.runner_helpers import make_queue, task

pytestmark = pytest.mark.slurm

JOBSCRIPT = REPO / "metaq_py" / "share" / "jobscripts" / "slurm.sh"


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_campaign_ends_as_its_directives_say(slurm: SlurmCluster, tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    admin = QueueAdmin(q)
    out = q.root / "out"
    out.mkdir()
    for i in (0, 3, 6):  # a third of the outputs exist beforehand
        (out / f"cfg_{i}.h5").write_text("old")
    ledger = tmp_path / "ledger"
    Submitter(q).submit(_script(tmp_path / "make.sh", (
        "#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-8\n"
        "#METAQ CREATES out/cfg_{index}.h5\n"
        f'echo "make $METAQ_ARRAY_INDEX" >> {ledger}\n'
        f'echo new > {out}/cfg_$METAQ_ARRAY_INDEX.h5\n')))
    for i in range(3):  # exit 75 once (a file system away), then succeed
        marker = tmp_path / f"flaky{i}.seen"
        task(q, f"flaky{i}.sh", f"""
            echo "flaky{i}" >> {ledger}
            [ -e {marker} ] && exit 0
            touch {marker}; exit 75
        """, RETRY_DELAY="1s")
    Submitter(q).submit(_script(tmp_path / "broken.sh", (
        "#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-11\n#METAQ MAX_FAILS 2\n"
        f'echo "broken $METAQ_ARRAY_INDEX" >> {ledger}\nexit 1\n')))
    task(q, "hang.sh", f"""
        echo hang >> {ledger}
        trap 'echo warned >> {tmp_path}/hang.warned' USR1
        while true; do sleep 0.2; done
    """, TIME_LIMIT="3s", SIGNAL="USR1@2")
    task(q, "hog.sh", f"echo hog >> {ledger}", MEM="900T")
    # Fills four times its MEM, 1 MiB at a time, then is killed as the node's OOM killer
    # would (where its cgroup holds it to its MEM, the kernel kills it first). 256 MiB is
    # also past the runner's own peak (a `metaq run` of this campaign, under 100 MB), which a
    # script's peak starts from at its exec: only a peak above it is the task's own.
    task(q, "greedy.sh", f"""
        echo greedy >> {ledger}
        {sys.executable} -c '
import os, signal
pieces = [b"x" * (1 << 20) for _ in range(256)]
os.kill(os.getpid(), signal.SIGKILL)
' || exit $?
        echo survived >> {ledger}
    """, MEM="64M")
    jobid = slurm.sbatch("-N", "4", "-t", "5", "-o", tmp_path / "job.out", JOBSCRIPT,
                         "--launch-pause", "0", cwd=tmp_path, env={"PYTHONPATH": str(REPO),
                                                                   "METAQ_QUEUE": str(q.root)})
    end = slurm.wait(jobid, timeout=240)
    job_out = (tmp_path / "job.out").read_text()
    assert end.state == "COMPLETED", job_out
    events = [json.loads(line) for line in
              (q.root / "jobs" / jobid / "events.jsonl").read_text().splitlines()]
    ends = [e for e in events if e["event"] == "end"]
    outcome = {(e["task"], e["outcome"]) for e in ends}
    runs = Counter(line for line in ledger.read_text().splitlines())

    # Skipped, never run: the outputs that were there; the others made once each.
    for i in range(9):
        want = "skipped" if i % 3 == 0 else "finished"
        assert (f"todo/make.sh/{i}", want) in outcome
        assert runs[f"make {i}"] == (0 if i % 3 == 0 else 1)
    assert (out / "cfg_0.h5").read_text() == "old" and (out / "cfg_1.h5").read_text() == "new\n"
    # Requeued once with no retry spent, then finished.
    for i in range(3):
        mine = [e["outcome"] for e in ends if e["task"] == f"todo/flaky{i}.sh"]
        assert mine == ["requeued", "finished"] and runs[f"flaky{i}"] == 2
    # The failing array: two failures reach MAX_FAILS; what had started by then finishes,
    # every other index is held, none runs twice.
    broken = [e for e in ends if e["task"].startswith("todo/broken.sh/")]
    assert all(e["outcome"] == "failed" for e in broken)
    failed = {e["task"] for e in broken}
    held = {e.id for e in admin.entries("hold", specs=False)}
    assert len(failed) == len(broken) >= 2 and len(failed) + len(held) == 12
    assert len(failed) <= 2 + 3  # at most the other three nodes' starts were under way
    assert all(n == 1 for k, n in runs.items() if k.startswith("broken"))
    # The hang: warned, then killed at its TIME_LIMIT.
    assert ("todo/hang.sh", "timeout") in outcome and runs["hang"] == 1
    assert (tmp_path / "hang.warned").read_text().strip() == "warned"
    # The task asking for more memory than any node has never ran, and said why.
    assert runs["hog"] == 0 and [t.id for t in q.pending()] == ["todo/hog.sh"]
    assert "its MEM on line" in job_out
    # The task past its MEM: outcome oom, with its peak memory, in failed/ (no RETRIES).
    greedy = [e for e in ends if e["task"] == "todo/greedy.sh"]
    assert [e["outcome"] for e in greedy] == ["oom"] and runs["greedy"] == 1
    assert (greedy[0].get("memory_peak_bytes") or greedy[0]["max_rss_bytes"]) >= 60 << 20
    assert "survived" not in runs and (q.root / "failed/todo/greedy.sh").exists()
    # report adds up: one count per end event, with the same words.
    rep = subprocess.run([sys.executable, "-m", "metaq_py", "report", "--json", "-q",
                          str(q.root)], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    counted = json.loads(rep.stdout)["outcomes"]
    assert counted == dict(Counter(e["outcome"] for e in ends))
    assert not q.leases()
