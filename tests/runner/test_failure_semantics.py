"""A campaign's failure semantics in the live loop, with real task processes (issue 31):
exit-code classes (``REQUEUE_ON``, ``SOFT_FAIL_ON``), the retry delay, ``TIME_LIMIT``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from metaq_py.launch.usage import peak_rss_self
from metaq_py.queue.logbook import Logbook, find_logbook
from metaq_py.queue.store import Queue
from metaq_py.queue.submit import Submitter
from tests.runner_helpers import SETTINGS, events, make_queue, of, runner, task, where


def _logbook(q: Queue, path: Path) -> Logbook | None:
    """The logbook of the done task at ``path``, packed by its runner or beside it."""
    return find_logbook(path, path.stat().st_ino, q.packed)


def _outcomes(q, name: str) -> list[str]:
    return [e["outcome"] for e in of(events(q), "end", task=f"todo/{name}")]


def test_exit_75_requeues_once_with_no_retry_spent(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    count = tmp_path / "count"
    # No RETRIES at all: a failure would be final, a requeue is not a failure.
    task(q, "temp.sh", f"""
        echo "$METAQ_ATTEMPT $METAQ_RESUME" >> {count}
        [ "$(wc -l < {count})" -ge 2 ] || exit 75
    """)
    runner(q).run()
    assert where(q, "temp.sh") == "finished"
    assert _outcomes(q, "temp.sh") == ["requeued", "finished"]
    assert count.read_text().splitlines() == ["1 0", "2 1"]  # resumes, as after a requeue
    book = _logbook(q, q.root / "finished/todo/temp.sh")
    assert book is not None and book.attempts == 0
    requeued = [h for h in book.history if h["event"] == "requeued"]
    assert requeued[0]["exit_code"] == 75 and "REQUEUE_ON" in requeued[0]["reason"]


def test_soft_fail_finishes_with_its_code_and_a_warning(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "warn.sh", "exit 3", SOFT_FAIL_ON="3 7")
    task(q, "bad.sh", "exit 4", SOFT_FAIL_ON="3 7")
    runner(q).run()
    assert where(q, "warn.sh") == "finished"
    assert where(q, "bad.sh") == "failed"
    end = of(events(q), "end", task="todo/warn.sh")[0]
    assert (end["outcome"], end["exit_code"]) == ("soft-failed", 3)
    path = q.root / "finished/todo/warn.sh"
    book = _logbook(q, path)
    assert book is not None
    last = book.history[-1]
    assert (last["event"], last["exit_code"]) == ("soft-failed", 3)
    assert "warning" in last["reason"]


def test_requeue_on_none_makes_75_a_failure(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "plain.sh", "exit 75", REQUEUE_ON="none")
    runner(q).run()
    assert _outcomes(q, "plain.sh") == ["failed"]


def test_a_task_that_always_asks_for_later_ends_at_caps_requeues(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q", SETTINGS.replace("  attempts: 5\n",
                                                    "  attempts: 5\n  requeues: 3\n"))
    task(q, "again.sh", "exit 75")
    runner(q).run()
    assert _outcomes(q, "again.sh") == ["requeued", "requeued", "failed"]
    assert "caps.requeues" in (q.root / "failed/todo/again.sh.reason").read_text()


def test_a_retry_waits_its_delay_without_blocking_others(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    stamps = tmp_path / "stamps"
    task(q, "flaky.sh", f"""
        date +%s.%N >> {stamps}
        [ "$(wc -l < {stamps})" -ge 3 ]
    """, RETRIES=2, RETRY_DELAY="1s 10s", PRIORITY=10)
    for i in range(3):
        task(q, f"other{i}.sh", "true")
    runner(q, nodes=1).run()
    assert _outcomes(q, "flaky.sh") == ["retry", "retry", "finished"]
    t = [float(x) for x in stamps.read_text().split()]
    assert t[1] - t[0] >= 1.0  # the first delay
    assert t[2] - t[1] >= 2.0  # doubled
    evs = events(q)
    # The others ran while the flaky one waited: on one node, before its second start.
    starts = [e for e in of(evs, "start")]
    second = [e for e in starts if e["task"] == "todo/flaky.sh"][1]
    others = [e for e in starts if e["task"].startswith("todo/other")]
    assert len(others) == 3 and all(e["time"] < second["time"] for e in others)


def test_a_delay_past_the_allocation_hands_the_task_on(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    task(q, "later.sh", "exit 1", RETRIES=1, RETRY_DELAY="1h")
    r = runner(q, walltime=600)
    r.run()
    assert _outcomes(q, "later.sh") == ["retry"]
    assert where(q, "later.sh") == "pending"
    stop = of(events(q), "runner-stop")[0]["reason"]
    assert "retry delay" in stop and "next allocation" in stop
    path = q.root / "todo/later.sh"
    book = _logbook(q, path)
    assert book is not None and book.not_before > book.history[-1]["time"] + 3500


def test_time_limit_warns_then_kills_with_outcome_timeout(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    warned = tmp_path / "warned"
    task(q, "hang.sh", f"""
        trap 'echo warned > {warned}' USR1
        while true; do sleep 0.1; done
    """, TIME_LIMIT="1s", SIGNAL="USR1@1")
    runner(q).run()
    assert warned.read_text().strip() == "warned"
    end = of(events(q), "end", task="todo/hang.sh")[0]
    assert end["outcome"] == "timeout" and end["signal"] == "SIGKILL"
    assert where(q, "hang.sh") == "failed"
    assert "TIME_LIMIT" in (q.root / "failed/todo/hang.sh.reason").read_text()


def test_a_timeout_listed_in_requeue_on_is_requeued(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    count = tmp_path / "count"
    task(q, "slow.sh", f"""
        echo x >> {count}
        [ "$(wc -l < {count})" -ge 2 ] && exit 0
        exec sleep 60
    """, TIME_LIMIT="1s", REQUEUE_ON="75 timeout")
    runner(q).run()
    assert _outcomes(q, "slow.sh") == ["requeued", "finished"]


def test_outcome_words_are_the_same_in_report_json(tmp_path: Path) -> None:
    import subprocess
    import sys
    q = make_queue(tmp_path / "q")
    task(q, "warn.sh", "exit 3", SOFT_FAIL_ON="3")
    runner(q).run()
    out = subprocess.run([sys.executable, "-m", "metaq_py", "report", "--json", "-q",
                          str(q.root)], capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    assert data["outcomes"] == {"soft-failed": 1}


def test_status_and_explain_say_when_a_delayed_task_becomes_eligible(tmp_path: Path) -> None:
    import subprocess
    import sys
    q = make_queue(tmp_path / "q")
    task(q, "later.sh", "exit 1", RETRIES=1, RETRY_DELAY="1h")
    runner(q, walltime=600).run()
    path = q.root / "todo/later.sh"
    book = _logbook(q, path)
    assert book is not None

    def metaq(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "metaq_py", *args, "-q", str(q.root)],
                              capture_output=True, text=True, check=True).stdout

    data = json.loads(metaq("status", "--json"))
    assert data["delayed"] == [{"task": "todo/later.sh", "eligible": book.not_before}]
    assert "waiting for a retry delay" in metaq("status")
    said = metaq("explain", "later.sh")
    assert "retry delay" in said and "eligible at" in said and "exit code 1" in said


def test_a_task_whose_outputs_exist_is_skipped_and_counted(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    out = q.root / "out"
    out.mkdir()
    (out / "a.h5").write_text("data")
    (out / "b_1.dat").write_text("data")
    (out / "empty.h5").write_text("")
    ran = tmp_path / "ran"
    task(q, "done.sh", f"echo done >> {ran}", CREATES="out/a.h5")
    task(q, "globbed.sh", f"echo globbed >> {ran}", CREATES="out/b_*.dat")
    task(q, "empty.sh", f"echo empty >> {ran}", CREATES="out/empty.h5")
    (q.root / "todo/two.sh").write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n"
                                        f"#METAQ CREATES out/a.h5\n#METAQ CREATES out/c.h5\n"
                                        f"echo two >> {ran}\n")
    (q.root / "todo/two.sh").chmod(0o755)
    runner(q).run()
    assert sorted(ran.read_text().split()) == ["empty", "two"]
    for name in ("done.sh", "globbed.sh", "empty.sh", "two.sh"):
        assert where(q, name) == "finished"
    assert _outcomes(q, "done.sh") == ["skipped"] == _outcomes(q, "globbed.sh")
    assert _outcomes(q, "empty.sh") == ["finished"]
    path = q.root / "finished/todo/done.sh"
    book = _logbook(q, path)
    assert book is not None and book.history[-1]["event"] == "skipped"


def test_a_link_or_fifo_output_is_said_and_the_task_runs(tmp_path: Path) -> None:
    import os
    q = make_queue(tmp_path / "q")
    out = q.root / "out"
    out.mkdir()
    (tmp_path / "real.h5").write_text("data")
    (out / "linked.h5").symlink_to(tmp_path / "real.h5")
    os.mkfifo(out / "pipe.h5")
    said: list[str] = []
    task(q, "link.sh", "true", CREATES="out/linked.h5")
    task(q, "fifo.sh", "true", CREATES="out/pipe.h5")
    runner(q, say=said.append).run()
    assert _outcomes(q, "link.sh") == ["finished"] == _outcomes(q, "fifo.sh")
    assert any("todo/link.sh, line 2: CREATES out/linked.h5: it is a link" in s for s in said)
    assert any("todo/fifo.sh, line 2: CREATES out/pipe.h5: it is a FIFO" in s for s in said)


def test_submit_force_runs_a_task_whose_outputs_exist(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    (q.root / "out").mkdir()
    (q.root / "out/a.h5").write_text("data")
    ran = tmp_path / "ran"
    script = tmp_path / "make.sh"
    script.write_text(f"#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ CREATES out/a.h5\n"
                      f"echo ran >> {ran}\n")
    script.chmod(0o755)
    dst = Submitter(q).submit(script, force=True)
    assert "#METAQ FORCE\n" in dst.read_text()
    runner(q).run()
    assert ran.read_text() == "ran\n"
    assert _outcomes(q, "make.sh") == ["finished"]


def test_an_array_skips_the_indices_whose_outputs_exist(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    (q.root / "out").mkdir()
    for i in (0, 2):
        (q.root / f"out/cfg_{i}.h5").write_text("data")
    script = tmp_path / "gen.sh"
    script.write_text("#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-3\n"
                      "#METAQ CREATES out/cfg_{index}.h5\n"
                      'echo made > "$METAQ_QUEUE_ROOT_OUT/cfg_$METAQ_ARRAY_INDEX.h5"\n'
                      .replace("$METAQ_QUEUE_ROOT_OUT", str(q.root / "out")))
    script.chmod(0o755)
    Submitter(q).submit(script)
    runner(q).run()
    ends = {e["task"]: e["outcome"] for e in of(events(q), "end")}
    assert ends == {"todo/gen.sh/0": "skipped", "todo/gen.sh/1": "finished",
                    "todo/gen.sh/2": "skipped", "todo/gen.sh/3": "finished"}
    assert (q.root / "out/cfg_3.h5").read_text() == "made\n"


def test_array_keys_without_an_array_are_refused_at_submit(tmp_path: Path) -> None:
    import pytest

    from metaq_py.errors import TaskError
    q = make_queue(tmp_path / "q")
    for line, words in (("MAX_FAILS 3", "only to a task array"),
                        ("CREATES out/{index}.h5", "only a task array has")):
        script = tmp_path / "one.sh"
        script.write_text(f"#!/bin/bash\n#METAQ {line}\ntrue\n")
        script.chmod(0o755)
        with pytest.raises(TaskError, match=words) as e:
            Submitter(q).submit(script)
        assert str(e.value).startswith(f"{script}, line 2: ")


def test_an_array_past_max_fails_holds_its_waiting_indices(tmp_path: Path) -> None:
    import subprocess
    import sys

    q = make_queue(tmp_path / "q")
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/bash\n#METAQ MIN_WC_TIME 1m\n#METAQ ARRAY 0-9\n"
                      "#METAQ MAX_FAILS 3\nexit 1\n")
    script.chmod(0o755)
    Submitter(q).submit(script)
    runner(q, nodes=1, max_tasks=1).run()
    ends = [e for e in of(events(q), "end") if e["task"].startswith("todo/bad.sh/")]
    assert [e["outcome"] for e in ends] == ["failed"] * 3  # no hours past MAX_FAILS
    held = sorted(p.name for p in (q.root / "hold/todo/bad.sh").iterdir()
                  if not p.name.startswith(".") and not p.name.endswith(".reason"))
    assert len(held) == 7
    reason = next((q.root / "hold/todo/bad.sh").glob("*.reason")).read_text()
    assert "MAX_FAILS 3" in reason and "metaq release" in reason
    r = subprocess.run([sys.executable, "-m", "metaq_py", "release", "bad.sh", "-q",
                        str(q.root)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len([t for t in q.scan().tasks if t.id.startswith("todo/bad.sh/")]) == 7


def test_submit_max_fails_is_the_directive(tmp_path: Path) -> None:
    import subprocess
    import sys
    q = make_queue(tmp_path / "q")
    script = tmp_path / "arr.sh"
    script.write_text("#!/bin/bash\n#METAQ MIN_WC_TIME 1m\nexit 1\n")
    script.chmod(0o755)
    r = subprocess.run([sys.executable, "-m", "metaq_py", "submit", "--array", "0-3",
                        "--max-fails", "2", str(script), "-q", str(q.root)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "#METAQ MAX_FAILS 2\n" in (q.root / "todo/arr.sh/0").read_text()
    runner(q, nodes=1, max_tasks=1).run()
    assert len(of(events(q), "end", outcome="failed")) == 2
    r = subprocess.run([sys.executable, "-m", "metaq_py", "submit", "--max-fails", "2",
                        str(script), "--again", "--folder", "x", "-q", str(q.root)],
                       capture_output=True,
                       text=True)
    assert r.returncode == 1 and "MAX_FAILS applies only to a task array" in r.stderr


def test_a_mem_larger_than_a_node_is_skipped_with_one_sentence(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    said: list[str] = []
    task(q, "huge.sh", "true", MEM="900T")
    task(q, "small.sh", "true", MEM="1M")
    r = runner(q, say=said.append)
    assert r.ctx.batch.node_memory("localhost") is not None  # MemTotal of this node
    r.run()
    assert where(q, "huge.sh") == "pending" and where(q, "small.sh") == "finished"
    assert any("skipping todo/huge.sh: its MEM on line 2 asks for 943718400 MiB per node, "
               "and a node here has" in s for s in said), said


def test_node_memory_is_read_as_the_batch_systems_print_it() -> None:
    from metaq_py.batch.pbs import parse_pbs_mem
    from metaq_py.batch.slurm import parse_real_memory
    # `scontrol show node n1` of the local SLURM (tests/slurm) and a PBS Pro `pbsnodes`.
    slurm = ("NodeName=n1 Arch=x86_64 CoresPerSocket=1 \n   CPUAlloc=0 CPUEfctv=2 CPUTot=2\n"
             "   RealMemory=4000 AllocMem=0 FreeMem=18098 Sockets=2 Boards=1\n")
    assert parse_real_memory(slurm) == 4000 << 20
    assert parse_real_memory(slurm.replace("RealMemory=4000", "RealMemory=1")) == 1 << 20
    assert parse_real_memory("NodeName=n1 RealMemory=0 AllocMem=0") is None
    pbs = ("node01\n     Mom = node01\n     ntype = PBS\n     state = free\n"
           "     resources_available.mem = 196608kb\n     resources_available.ncpus = 32\n")
    assert parse_pbs_mem(pbs) == 196608 << 10
    assert parse_pbs_mem(pbs.replace("196608kb", "192gb")) == 192 << 30
    assert parse_pbs_mem("node01\n     state = free\n") is None


def test_a_task_that_answers_its_time_limit_with_75_is_requeued(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    count = tmp_path / "count"
    task(q, "saver.sh", f"""
        echo x >> {count}
        [ "$(wc -l < {count})" -ge 2 ] && exit 0
        trap 'exit 75' USR1
        while true; do sleep 0.1; done
    """, TIME_LIMIT="1s", SIGNAL="USR1@5")
    runner(q).run()
    ends = of(events(q), "end", task="todo/saver.sh")
    assert [e["outcome"] for e in ends] == ["requeued", "finished"]
    assert ends[0]["exit_code"] == 75


# A command that fills memory 1 MiB at a time up to twice its MEM of 64M, then kills itself
# as the node's OOM killer would: where the task's cgroup holds it to its MEM (memory.max),
# the kernel kills it first; where none can, the SIGKILL at its peak is what tells the oom.
HOG = f"""
    echo started >> {{ledger}}
    {sys.executable} -c '
import os, signal
pieces = [b"x" * (1 << 20) for _ in range({{pieces}})]
os.kill(os.getpid(), signal.SIGKILL)
' || exit $?
    echo survived >> {{ledger}}
"""


def test_a_task_past_its_mem_ends_oom_with_its_peak_memory(tmp_path: Path) -> None:
    q = make_queue(tmp_path / "q")
    ledger = tmp_path / "ledger"
    # Past its MEM and past the runner's own peak (this process runs the runner), which a
    # script's peak starts from at its exec: only a peak above that is the task's own.
    pieces = peak_rss_self() // (1 << 20) + 128
    task(q, "hog.sh", HOG.format(ledger=ledger, pieces=pieces), MEM="64M", RETRIES=1)
    r = runner(q, nodes=1)
    r.run()
    assert where(q, "hog.sh") == "failed"
    ends = of(events(q), "end", task="todo/hog.sh")
    assert [e["outcome"] for e in ends] == ["oom", "oom"], "retried once, as a failure"
    for e in ends:
        peak = e.get("memory_peak_bytes") or e["max_rss_bytes"]
        assert peak >= 60 << 20, e
    assert ledger.read_text().split() == ["started", "started"], "never past the kill"
    book = _logbook(q, q.root / "failed/todo/hog.sh")
    assert book is not None and book.attempts == 2
    last = book.history[-1]
    assert "OOM killer" in last["reason"] and "MEM" in last["reason"], last
    shown = subprocess.run([sys.executable, "-m", "metaq_py", "show", "todo/hog.sh", "-q",
                            str(q.root)], capture_output=True, text=True, check=True).stdout
    assert shown.count("killed for passing its MEM (oom)") == 2, shown
    assert "peak memory" in shown
    assert "reason: killed by the kernel's OOM killer past its MEM" in shown
    assert "(MEM 64 MiB, peak " in shown
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "metaq_py", "status", "--json", "-q", str(q.root)],
        capture_output=True, text=True, check=True).stdout)
    assert status["outcomes"] == {"oom": 2}, status
    table = subprocess.run([sys.executable, "-m", "metaq_py", "status", "-q", str(q.root)],
                           capture_output=True, text=True, check=True).stdout
    assert "runs ended, by outcome" in table and "oom" in table, table
