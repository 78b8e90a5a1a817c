"""A small stateful batch system for the alloc tests: fake ``sbatch``/``squeue`` and
``qsub``/``qstat`` on ``PATH`` that share one file of jobs, so what one command submits the
other lists, as on a real machine. A test ends or starts a job by editing that file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import FakeBin

_COMMON = f"""#!{sys.executable}
import json, os, sys, time, fcntl
here = os.path.dirname(os.path.abspath(__file__))
jobs_file = os.path.join(here, "jobs.json")
def load():
    try:
        with open(jobs_file) as f:
            return json.load(f)
    except FileNotFoundError:
        return []
def save(jobs):
    with open(jobs_file + ".tmp", "w") as f:
        json.dump(jobs, f)
    os.replace(jobs_file + ".tmp", jobs_file)
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"cmd": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                        "queue": os.environ.get("METAQ_QUEUE")}}) + "\\n")
"""

_SUBMIT = """
lock = open(jobs_file + ".lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
# Slow, like a busy controller: two unlocked callers would both count, then both submit.
time.sleep(float(os.environ.get("FAKE_SUBMIT_DELAY", "0")))
if os.path.exists(os.path.join(here, "refuse")):
    sys.stderr.write(open(os.path.join(here, "refuse")).read())
    sys.exit(1)
jobs = load()
jobid = str(100 + len(jobs))
jobs.append({"id": jobid, "name": NAME, "state": "Q"})
save(jobs)
print(OUT)
"""

SBATCH = _COMMON + """
NAME = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--job-name="))
""" + _SUBMIT.replace("print(OUT)", "print(jobid)")

SQUEUE = _COMMON + """
name = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--name="))
words = {"Q": "PENDING", "R": "RUNNING", "F": "COMPLETED"}
for job in load():
    if job["name"] == name:
        print(job["id"], words[job["state"]])
"""

QSUB = _COMMON + """
NAME = sys.argv[sys.argv.index("-N") + 1]
""" + _SUBMIT.replace("print(OUT)", "print(jobid + '.pbs01')")

QSTAT = _COMMON + """
print("Job id            Name             User              Time Use S Queue")
print("----------------  ---------------- ----------------  -------- - -----")
for job in load():
    print(f"{job['id']}.pbs01".ljust(18) + job["name"].ljust(17) + "alice".ljust(18)
          + "0 " + job["state"] + " workq")
"""


class FakeBatch:
    """The fake batch system in ``fake_bin``'s folder, for ``system`` (slurm or pbs)."""

    def __init__(self, fake_bin: FakeBin, system: str) -> None:
        self.dir = fake_bin.directory
        self.system = system
        if system == "slurm":
            fake_bin.script("sbatch", SBATCH)
            fake_bin.script("squeue", SQUEUE)
        else:
            fake_bin.script("qsub", QSUB)
            fake_bin.script("qstat", QSTAT)

    def jobs(self) -> list[dict]:
        path = self.dir / "jobs.json"
        return json.loads(path.read_text()) if path.exists() else []

    def set_state(self, index: int, state: str) -> None:
        """Move job ``index`` (in submission order) to ``Q``, ``R`` or ``F``."""
        jobs = self.jobs()
        jobs[index]["state"] = state
        (self.dir / "jobs.json").write_text(json.dumps(jobs))

    def submissions(self) -> list[dict]:
        """The submit commands run, with the METAQ_QUEUE each saw."""
        path = self.dir / "calls.jsonl"
        calls = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        return [c for c in calls if c["cmd"] in ("sbatch", "qsub")]

    def refuse(self, message: str | None) -> None:
        """Make the next submissions fail with ``message`` (``None``: accept again)."""
        path = Path(self.dir / "refuse")
        if message is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(message)
