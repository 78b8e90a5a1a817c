"""The examples of README.md and docs/user-guide.md that need a real batch system
(``<!-- doc: slurm -->``, see tests/test_docs.py), run as written on the local four-node
SLURM: each must have a batch job run ``metaq run`` on the queue. Skips, with the reason,
when the cluster is not up."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SlurmCluster
from tests.runner_helpers import wait_until
from tests.test_docs import Block, of, run_block, scratch

pytestmark = pytest.mark.slurm


def _runner_starts(tmp_path: Path) -> set[str]:
    """The batch jobs that started ``metaq run`` on a queue below ``tmp_path``."""
    jobs: set[str] = set()
    for log in tmp_path.glob("**/jobs/*/events.jsonl"):
        for line in log.read_text().splitlines():
            if line.strip() and json.loads(line).get("event") == "runner-start":
                jobs.add(log.parent.name)
    return jobs


@pytest.mark.parametrize("b", of("slurm"), ids=lambda b: b.id)
def test_batch_examples_run_as_written(b: Block, slurm: SlurmCluster, tmp_path: Path) -> None:
    env = scratch(tmp_path, b)
    try:
        run_block(b, tmp_path, env)
        assert wait_until(lambda: _runner_starts(tmp_path), timeout=180), \
            "no batch job ran metaq run on the queue"
    finally:
        # An example may leave a job that lingers (--linger) or one alloc submitted later.
        for job in _runner_starts(tmp_path) | _alloc_submitted(tmp_path):
            subprocess.run(["scancel", job], check=False)


def _alloc_submitted(tmp_path: Path) -> set[str]:
    """The batch jobs ``metaq alloc`` submitted for a queue below ``tmp_path``."""
    return {str(json.loads(line)["job"])
            for log in tmp_path.glob("**/alloc/events.jsonl")
            for line in log.read_text().splitlines()
            if line.strip() and json.loads(line).get("event") == "submit"}
