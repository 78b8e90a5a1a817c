"""``metaq report`` per user with two real users: each submits a task as itself, the
queue's owner runs them both, and the report counts each run under the owner of its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.members import MEMBER, OWNER, Members


def test_each_run_counts_under_the_user_who_owns_its_task(members: Members) -> None:
    m = members
    q = m.init_queue()
    for who, name, nodes in ((m.owner, "mine.sh", 2), (m.member, "theirs.sh", 1)):
        script = m.base / f"{who.name}-{name}"

        def write(script: Path = script, nodes: int = nodes) -> None:
            script.write_text(f"#!/bin/sh\n#METAQ NODES {nodes}\n#METAQ MIN_WC_TIME 1m\n"
                              f"#METAQ PROJECT lat\ntrue\n")
            script.chmod(0o755)

        who.do(write)
        done = m.metaq(who, "submit", str(script), "-q", str(q), timeout=60)
        assert done.returncode == 0, done.stderr
    ran = m.metaq(m.owner, "run", "-q", str(q), "--nodes", "2", "--batch", "local",
                  "--jobid", "j1", "--machine", "m", timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert sorted(p.name for p in (q / "finished" / "todo").iterdir()
                  if not p.name.startswith(".")) == [f"{MEMBER}-theirs.sh", f"{OWNER}-mine.sh"]
    done = m.metaq(m.member, "report", "--json", "-q", str(q), timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    users = {u["user"]: u for u in doc["users"]}
    assert sorted(users) == sorted([OWNER, MEMBER])
    assert users[OWNER]["runs"] == users[MEMBER]["runs"] == 1
    assert users[OWNER]["node_hours"] > 0 and users[MEMBER]["node_hours"] > 0
    assert users[OWNER]["node_hours"] + users[MEMBER]["node_hours"] == \
        pytest.approx(doc["node_hours"])
    table = m.metaq(m.member, "report", "-q", str(q), timeout=60).stdout
    assert "usage per user, all time" in table and OWNER in table and MEMBER in table
