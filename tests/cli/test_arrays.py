"""``metaq submit --array/--after`` and arrays taken as one thing by ls, cancel and retry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_queue import metaq, script


def test_an_array_from_submit_to_retry(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    run = script(tmp_path / "run.sh")
    sub = metaq("submit", "--queue", str(q), "--array", "0-19", str(run))
    assert sub.returncode == 0, sub.stderr
    assert "todo/run.sh[0-19] (20 tasks)" in sub.stdout
    ls = metaq("ls", "--queue", str(q))
    assert "todo/run.sh[0-19]" in ls.stdout and "20 tasks of an array" in ls.stdout
    assert len(json.loads(metaq("ls", "--json", "--queue", str(q)).stdout)) == 20
    assert metaq("ls", "--each", "--queue", str(q)).stdout.count("todo/run.sh[") == 20
    cancel = metaq("cancel", "--queue", str(q), "run.sh[17]", "run.sh[3-4]")
    assert cancel.returncode == 0, cancel.stderr
    assert sorted(p.name for p in (q / "cancelled/todo/run.sh").iterdir()
                  if not p.name.endswith(".reason")) == ["17", "3", "4"]
    assert "todo/run.sh[0-2,5-16,18-19]" in metaq("ls", "--queue", str(q)).stdout
    none = metaq("retry", "--queue", str(q), "run.sh", "--failed")
    assert none.returncode == 1 and "no task of the array todo/run.sh" in none.stderr
    back = metaq("retry", "--queue", str(q), "run.sh")
    assert back.returncode == 0
    assert back.stdout == "retry: 3 tasks of run.sh: 3 to todo/\n"  # one line for a range
    explain = metaq("explain", "--queue", str(q), "run.sh[17]")
    assert explain.returncode == 0 and "todo/run.sh[17]: pending" in explain.stdout


def test_submit_after_refuses_unknown_names_and_resolves_known(tmp_path: Path) -> None:
    q = tmp_path / "q"
    metaq("init", str(q))
    bad = metaq("submit", "--queue", str(q), "--after", "nope.sh", str(script(tmp_path / "a.sh")))
    assert bad.returncode == 1 and "names no task" in bad.stderr
    assert not (q / "todo/a.sh").exists()
    metaq("submit", "--queue", str(q), str(script(tmp_path / "b.sh")))
    ok = metaq("submit", "--queue", str(q), "--again", "--after", "b.sh",
               str(script(tmp_path / "a.sh")))
    assert ok.returncode == 0, ok.stderr
    assert "#METAQ AFTER todo/b.sh\n" in (q / "todo/a.sh").read_text()
    why = metaq("explain", "--queue", str(q), "todo/a.sh")
    assert "waits for its dependency todo/b.sh, which is waiting" in why.stdout


def test_a_range_is_moved_with_one_summary_line(tmp_path: Path) -> None:
    from metaq_py.queue.store import Queue

    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    sub = metaq("submit", "--queue", str(q), "--array", "0-4499", str(script(tmp_path / "p.sh")))
    assert sub.returncode == 0, sub.stderr
    queue = Queue(q)
    for t in queue.pending()[:3]:  # three indices run in a batch job
        assert queue.claim(t, machine="m", jobid="7") is not None
    held = metaq("hold", "--queue", str(q), "p.sh[100-199]")
    assert held.stdout == "hold: 100 tasks of p.sh[100-199]: 100 to hold/\n", held.stderr
    cancel = metaq("cancel", "--queue", str(q), "p.sh")
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout == ("cancel: 4500 tasks of p.sh: 4497 to cancelled/, 3 running "
                             "(their jobs will stop them)\n")
    one = metaq("retry", "--queue", str(q), "p.sh[4000]")
    assert one.stdout == "retry: todo/p.sh[4000] -> todo/p.sh/4000\n"


def _prop(path: Path, flag: Path) -> Path:
    """An array script whose index 2 fails until ``flag`` exists."""
    path.write_text(f'#!/bin/sh\n#METAQ RETRIES 0\necho "prop $METAQ_ARRAY_INDEX"\n'
                    f'[ "$METAQ_ARRAY_INDEX" != 2 ] || [ -e {flag} ]\n')
    path.chmod(0o755)
    return path


def test_a_finished_array_leaves_its_task_folder_and_stays_known(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    flag = tmp_path / "fixed"
    sub = metaq("submit", "--queue", str(q), "--array", "0-3", str(_prop(tmp_path / "prop.sh",
                                                                          flag)))
    assert sub.returncode == 0, sub.stderr
    assert (q / "todo/prop.sh/.array").exists()  # waiting: in its task folder
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    # Its last index ended: its own files went beside its finished indices.
    assert not (q / "todo/prop.sh").exists() and os.listdir(q / "todo") == []
    assert sorted(os.listdir(q / "finished/todo/prop.sh")) == [".array", ".script", "0", "1",
                                                               "3"]
    report = metaq("report", "--queue", str(q), "prop.sh")
    assert report.returncode == 0, report.stderr
    row = next(line for line in report.stdout.splitlines() if "todo/prop.sh" in line)
    # tasks, finished, failed, runs
    assert [c.strip() for c in row.split("│")][2:6] == ["4", "3", "1", "4"], row
    shown = metaq("show", "--queue", str(q), "prop.sh[1]")
    assert shown.returncode == 0 and "todo/prop.sh[1]: finished" in shown.stdout, shown.stderr
    log = metaq("log", "--queue", str(q), "prop.sh[3]")
    assert log.returncode == 0 and "prop 3" in log.stdout, log.stderr
    # A new array binds per index to the ended one.
    contract = script(tmp_path / "contract.sh", "#METAQ AFTER prop.sh[{index}]\n")
    bound = metaq("submit", "--queue", str(q), "--array", "0-3", str(contract))
    assert bound.returncode == 0, bound.stderr
    assert "#METAQ AFTER todo/prop.sh/1\n" in (q / "todo/contract.sh/1").read_text()
    # A retry of its failed index brings the array back to wait, and it leaves again.
    flag.touch()
    retry = metaq("retry", "--queue", str(q), "prop.sh", "--failed")
    assert retry.returncode == 0, retry.stderr
    assert sorted(os.listdir(q / "todo/prop.sh")) == [".2.record", ".array", ".script", "2"]
    assert not (q / "finished/todo/prop.sh/.array").exists()
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    assert os.listdir(q / "todo") == []
    assert sorted(os.listdir(q / "finished/todo/prop.sh")) == [".array", ".script", *"0123"]
    assert sorted(os.listdir(q / "finished/todo/contract.sh")) == [".array", ".script",
                                                                   *"0123"]


def test_an_array_grows_by_new_indices_and_refuses_old_ones(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    prop = _prop(tmp_path / "prop.sh", tmp_path / "fixed")
    assert metaq("submit", "--queue", str(q), "--array", "0-3", str(prop)).returncode == 0
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    assert not (q / "todo/prop.sh").exists()  # ended: 0, 1, 3 finished, 2 failed
    contract = script(tmp_path / "contract.sh", "#METAQ AFTER prop.sh[{index}]\n")
    assert metaq("submit", "--queue", str(q), "--array", "0-3", str(contract)).returncode == 0
    # Next week's configurations: both arrays grow, in one command.
    grow = metaq("submit", "--queue", str(q), "--array", "20-21", str(prop), str(contract))
    assert grow.returncode == 0, grow.stderr
    assert grow.stdout.splitlines() == [
        f"submitted {prop} into the array todo/prop.sh: 2 new tasks [20-21], now "
        f"todo/prop.sh[0-3,20-21]",
        f"submitted {contract} into the array todo/contract.sh: 2 new tasks [20-21], now "
        f"todo/contract.sh[0-3,20-21]"]
    assert sorted(os.listdir(q / "todo/prop.sh")) == [".array", ".script", "20", "21"]
    assert "#METAQ AFTER todo/prop.sh/21\n" in (q / "todo/contract.sh/21").read_text()
    ls = metaq("ls", "--queue", str(q), "--each")
    assert "todo/contract.sh[20]" in ls.stdout and "waiting on todo/prop.sh[20]" in ls.stdout
    # Indices it has are refused, named with their states.
    old = metaq("submit", "--queue", str(q), "--array", "1-2,21-22", str(prop))
    assert old.returncode == 1
    assert old.stderr == ("metaq: the array todo/prop.sh already has the indices 1 (finished), "
                          "2 (failed), 21 (waiting); submit only new indices, or with --again "
                          "to queue those once more.\n")
    assert not (q / "todo/prop.sh/22").exists()
    busy = metaq("submit", "--queue", str(q), "--again", "--array", "2,21", str(prop))
    assert busy.returncode == 1 and "21 (waiting)" in busy.stderr, busy.stderr
    again = metaq("submit", "--queue", str(q), "--again", "--array", "2", str(prop))
    assert again.returncode == 0, again.stderr
    assert (q / "todo/prop.sh/2").exists() and (q / "failed/todo/prop.sh/2").exists()
    # Another script under the array's name is another array.
    other = tmp_path / "new" / "prop.sh"
    other.parent.mkdir()
    other.write_text(prop.read_text() + "echo more\n")
    other.chmod(0o755)
    refused = metaq("submit", "--queue", str(q), "--array", "30", str(other))
    assert refused.returncode == 1
    assert "is not the script of the array todo/prop.sh" in refused.stderr
    assert "--folder" in refused.stderr
    assert metaq("submit", "--queue", str(q), "--array", "30", "--folder", "b2",
                 str(other)).returncode == 0
    (tmp_path / "x").mkdir()
    one = metaq("submit", "--queue", str(q), str(script(tmp_path / "x" / "prop.sh")))
    assert one.returncode == 1 and "already in the queue" in one.stderr
    # Everything runs; both arrays end and leave todo/ again.
    (tmp_path / "fixed").touch()
    assert metaq("run", "--queue", str(q), "--batch", "local").returncode == 0
    assert os.listdir(q / "todo") == ["b2"] and os.listdir(q / "todo/b2") == []
    assert sorted(os.listdir(q / "finished/todo/contract.sh")) == [
        ".array", ".script", "0", "1", "20", "21", "3"]


def test_an_array_throttle_bounds_the_indices_running_at_once(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    live = tmp_path / "live"
    live.mkdir()
    counts = tmp_path / "counts"
    run = tmp_path / "run.sh"
    # Each index notes how many indices are running as it starts, and runs a while.
    run.write_text(f"#!/bin/sh\n#METAQ ARRAY 0-7%2\n#METAQ MIN_WC_TIME 1:00\n"
                   f"touch {live}/$METAQ_ARRAY_INDEX\nls {live} | wc -l >> {counts}\n"
                   f"sleep 1\nrm {live}/$METAQ_ARRAY_INDEX\n")
    run.chmod(0o755)
    sub = metaq("submit", "--queue", str(q), str(run))
    assert sub.returncode == 0, sub.stderr
    assert json.loads((q / "todo/run.sh/.array").read_text())["throttle"] == 2
    checked = metaq("check", "--queue", str(q), str(run))
    assert "0-7%2" in checked.stdout and "at most 2 at once" in checked.stdout, checked.stdout
    shown = metaq("show", "--queue", str(q), "run.sh[5]")
    assert "array        todo/run.sh[0-7], at most 2 at once" in shown.stdout, shown.stdout
    ran = metaq("run", "--queue", str(q), "--batch", "local", "--nodes", "4")
    assert ran.returncode == 0, ran.stderr
    seen = [int(n) for n in counts.read_text().split()]
    assert len(seen) == 8 and max(seen) == 2, seen  # 4 nodes, never more than 2 at once
    assert sorted(os.listdir(q / "finished/todo/run.sh")) == [".array", ".script",
                                                              *map(str, range(8))]


def test_two_runners_keep_to_an_array_throttle_together(tmp_path: Path) -> None:
    q = tmp_path / "q"
    assert metaq("init", str(q)).returncode == 0
    live, counts = tmp_path / "live", tmp_path / "counts"
    live.mkdir()
    run = tmp_path / "run.sh"
    run.write_text(f"#!/bin/sh\n#METAQ MIN_WC_TIME 1:00\n"
                   f"touch {live}/$METAQ_ARRAY_INDEX\nls {live} | wc -l >> {counts}\n"
                   f"sleep 0.5\nrm {live}/$METAQ_ARRAY_INDEX\n")
    run.chmod(0o755)
    assert metaq("submit", "--queue", str(q), "--array", "0-11%2", str(run)).returncode == 0
    runners = [subprocess.Popen([sys.executable, "-m", "metaq_py", "run", "--queue", str(q),
                                 "--batch", "local", "--nodes", "3"], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    for r in runners:
        _, err = r.communicate(timeout=240)
        assert r.returncode == 0, err
    seen = [int(n) for n in counts.read_text().split()]
    assert len(seen) == 12 and max(seen) <= 2, seen  # 6 nodes in all, 2 at once
    assert sorted(os.listdir(q / "finished/todo/run.sh")) == sorted(
        [".array", ".script", *map(str, range(12))])
