"""The launch agent (metaq_py.launch.agent and agent_link), a real process: it starts, signals,
contains and reaps tasks for the runner; a start it refuses is one sentence; its tasks die
with the runner; and when it dies, the runner kills what it held and learns why."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaq_py.launch import LaunchSpec, TaskProcess
from metaq_py.launch.agent import MESSAGE_MOST
from metaq_py.launch.agent_link import AgentLink, AgentTask
from metaq_py.launch.binding import machine_cpus, parse_cpu_list
from metaq_py.launch.cgroup import runner_cgroup
from metaq_py.launch.prepare import Prepared, prepare
from metaq_py.launch.process import start_prepared
from tests.capability import cgroup_problem
from tests.launch.test_launch import alive, all_dead, script, spec_for, wait_for_file


class Starts:
    """What the agent told of the starts handed to it, and of the exits."""

    def __init__(self) -> None:
        self.done: dict[str, tuple[AgentTask | None, str | None]] = {}
        self.exits: list[TaskProcess] = []
        self.answered = threading.Event()

    def on_done(self, task: AgentTask | None, error: str | None) -> None:
        self.done[f"{len(self.done)}"] = (task, error)
        self.answered.set()

    def on_exit(self, process: TaskProcess) -> None:
        self.exits.append(process)


@pytest.fixture
def link() -> Iterator[AgentLink]:
    opened = AgentLink.open()
    assert opened is not None, "this Linux has pidfds: the agent must start"
    yield opened
    opened.close()


def ready(tmp_path: Path, body: str, name: str = "t.sh", **kwargs: object) -> Prepared:
    spec = spec_for(tmp_path, script(tmp_path, name, body), **kwargs)
    return prepare(spec, base_env=os.environ, srun="srun", aside=None)


def started(link: AgentLink, prepared: Prepared, starts: Starts) -> AgentTask:
    """Hand ``prepared`` over and wait for its start."""
    before = len(starts.done)
    assert link.start(prepared, done=starts.on_done, on_exit=starts.on_exit)
    link.sync()
    assert len(starts.done) == before + 1
    task, error = list(starts.done.values())[-1]
    assert error is None and task is not None, error
    return task


def test_a_task_runs_as_the_agents_child_and_its_end_comes_back(
        tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    task = started(link, ready(tmp_path, "#!/bin/sh\necho out $METAQ_TASK\n"
                                         "echo err >&2\nexit 3\n"), starts)
    status = task.wait(10)
    assert status is not None and status.returncode == 3
    assert starts.exits == [task]  # once, after its start
    assert task.log.read_text().split() == ["out", "todo/t.sh", "err"]
    assert status.usage is not None and status.usage.source == "wait4"
    assert task.ended_at is not None and task.ended_at >= task.started_at
    # The agent's child, not the runner's: the runner never reaps it.
    with pytest.raises(ChildProcessError):
        os.waitpid(task.pid, os.WNOHANG)


def test_the_parent_of_a_running_task_is_the_agent(tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    task = started(link, ready(tmp_path, "#!/bin/sh\nsleep 30\n"), starts)
    try:
        stat = Path(f"/proc/{task.pid}/stat").read_text()
        assert int(stat.rsplit(")", 1)[1].split()[1]) == link.pid
        assert os.getsid(task.pid) == task.pid  # a session of its own
    finally:
        task.kill()
    status = task.wait(10)
    assert status is not None and status.signal is signal.SIGKILL


def test_a_start_the_kernel_refuses_is_one_sentence(tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    assert link.start(ready(tmp_path, "no interpreter line\n"), done=starts.on_done,
                      on_exit=starts.on_exit)
    link.sync()
    [(task, error)] = starts.done.values()
    assert task is None
    assert error == (f"task 'todo/t.sh': the script {tmp_path / 't.sh'} has no #! line "
                     f"naming its interpreter")
    assert starts.exits == []


def test_signals_go_through_the_agent_and_scripts_have_them_at_their_defaults(
        tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    os.kill(link.pid, signal.SIGTERM)  # meant for the runner: the agent stays
    os.kill(link.pid, signal.SIGINT)
    # grep reads its own masks, which it inherits from the script: the shell's own masks
    # are briefly all blocked while it forks (dash), which a loaded machine can catch. The
    # trap comes first (a caught signal is back at its default in grep), so the masks' file
    # also says the trap is set.
    body = ("#!/bin/sh\ntrap 'exit 7' USR1\nf=\"$METAQ_CHECKPOINT_FILE\"\n"
            "grep -E '^Sig(Ign|Blk)' /proc/self/status > \"$f.part\" && mv \"$f.part\" \"$f\""
            "\nsleep 30 & wait\n")
    task = started(link, ready(tmp_path, body), starts)
    # The agent handled both signals before this start (they were pending when it read it).
    assert alive(link.pid)
    masks = dict(line.split(":") for line in wait_for_file(task.spec.checkpoint_file).split("\n")
                 if line)
    ignored, blocked = int(masks["SigIgn"], 16), int(masks["SigBlk"], 16)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGUSR1):
        assert not ignored & (1 << (sig - 1)), f"{sig.name} is ignored in the script"
        assert not blocked & (1 << (sig - 1)), f"{sig.name} is blocked in the script"
    assert task.send_signal(signal.SIGUSR1)
    status = task.wait(10)
    assert status is not None and status.returncode == 7
    assert task.sent_signals == [signal.SIGUSR1]
    assert not task.send_signal(signal.SIGTERM)  # over: nothing is sent


def test_a_kill_takes_the_whole_task_with_it(tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    body = ("#!/bin/sh\ntrap '' TERM\n(setsid sleep 300 & echo $! > \"$METAQ_CHECKPOINT_FILE\")\n"
            "sleep 300\n")
    task = started(link, ready(tmp_path, body), starts)
    child = int(wait_for_file(task.spec.checkpoint_file))
    assert task.kill()
    status = task.wait(10)
    assert status is not None and status.signal is signal.SIGKILL
    assert all_dead([child], timeout=5.0), "a detached child outlived its killed task"


def test_output_through_the_tee_is_complete_when_the_exit_is_told(
        tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    tee = tmp_path / "also.log"
    task = started(link, ready(tmp_path, "#!/bin/sh\nseq 1 20000\n", tee=tee), starts)
    assert task.wait(10) is not None
    lines = [str(i) for i in range(1, 20001)]
    assert tee.read_text().split() == lines and task.log.read_text().split() == lines


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,  # read from the kernel
                    reason="one CPU: nothing to pin a share to")
def test_a_bound_share_is_pinned_by_the_agent(tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    cpu = machine_cpus()[1]
    go = tmp_path / "go"
    task = started(link, ready(tmp_path, f"#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.01; done\n"
                                         "grep Cpus_allowed_list /proc/$$/status\n",
                               nodes=("n1",), cores=(1,), bind=True), starts)
    try:  # pinned by the time the agent says it started (the pin follows the spawn)
        assert parse_cpu_list(next(
            line.split(":", 1)[1] for line in Path(f"/proc/{task.pid}/status").read_text()
            .splitlines() if line.startswith("Cpus_allowed_list:"))) == (cpu,)
    finally:
        go.touch()
    assert task.wait(10) is not None
    assert task.log.read_text().split() == ["Cpus_allowed_list:", str(cpu)]


@pytest.mark.skipif(cgroup_problem() is not None, reason=str(cgroup_problem()))
def test_the_agent_contains_each_task_in_a_cgroup_of_its_own(
        tmp_path: Path, link: AgentLink) -> None:
    assert runner_cgroup() is not None  # the machine allows one (read from the machine)
    starts = Starts()
    task = started(link, ready(tmp_path, "#!/bin/sh\nsleep 30\n"), starts)
    try:
        assert task.cgroup is not None and task.cgroup.parent.name == f"metaq-{link.pid}"
        line = next(x for x in Path(f"/proc/{task.pid}/cgroup").read_text().splitlines()
                    if x.startswith("0::"))
        assert line.endswith(f"/metaq-{link.pid}/{task.cgroup.name}")
    finally:
        task.kill()
    assert task.wait(10) is not None


def test_a_start_too_large_to_send_is_left_to_the_runner(
        tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    prepared = ready(tmp_path, "#!/bin/sh\nexit 0\n")
    prepared.env["HUGE"] = "x" * MESSAGE_MOST
    assert not link.start(prepared, done=starts.on_done, on_exit=starts.on_exit)
    assert starts.done == {}
    prepared.env.pop("HUGE")
    process = start_prepared(prepared)  # untouched: the runner starts it itself
    status = process.wait(10)
    assert status is not None and status.ok


def test_when_the_agent_dies_its_tasks_are_killed_and_told_lost(
        tmp_path: Path, link: AgentLink) -> None:
    starts = Starts()
    body = "#!/bin/sh\n(setsid sleep 300 & echo $! > \"$METAQ_CHECKPOINT_FILE\")\nsleep 300\n"
    task = started(link, ready(tmp_path, body), starts)
    child = int(wait_for_file(task.spec.checkpoint_file))
    os.kill(link.pid, signal.SIGKILL)
    status = task.wait(10)
    assert status is not None and status.signal is signal.SIGKILL
    assert task.lost == f"its launch agent (pid {link.pid}) ended (killed by SIGKILL)"
    assert all_dead([task.pid, child], timeout=5.0), "a task outlived its dead agent"
    assert not link.alive and link.ended == "ended (killed by SIGKILL)"
    later = ready(tmp_path, "#!/bin/sh\nexit 0\n", name="later.sh")
    assert not link.start(later, done=starts.on_done, on_exit=starts.on_exit)
    later.abandon()


def test_when_the_runner_dies_the_agent_ends_its_tasks(tmp_path: Path) -> None:
    """A runner killed outright (here a small Python process holding the link): its agent
    reads the end of the conversation, kills the task and exits."""
    body = "#!/bin/sh\n(setsid sleep 300 & echo $! > \"$METAQ_CHECKPOINT_FILE\")\nsleep 300\n"
    path = script(tmp_path, "t.sh", body)
    holder = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
from metaq_py.launch import LaunchSpec
from metaq_py.launch.agent_link import AgentLink
from metaq_py.launch.prepare import prepare
spec = LaunchSpec(script=Path({str(path)!r}), task="todo/t.sh", nodes=("n1",),
                  log=Path({str(tmp_path / "t.log")!r}), rundir=Path({str(tmp_path / "run")!r}))
link = AgentLink.open()
link.start(prepare(spec, base_env=os.environ, srun="srun", aside=None),
           done=lambda t, e: print(link.pid, t.pid if t else e, flush=True), on_exit=None)
time.sleep(300)
"""
    runner = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None
        agent_pid, task_pid = map(int, runner.stdout.readline().split())
        checkpoint = LaunchSpec(script=path, task="todo/t.sh", nodes=("n1",),
                                log=tmp_path / "t.log", rundir=tmp_path / "run").checkpoint_file
        child = int(wait_for_file(checkpoint))
        assert alive(task_pid) and alive(child)
    finally:
        runner.kill()
        runner.wait()
    assert all_dead([task_pid, child], timeout=5.0), "a task outlived its killed runner"
    assert all_dead([agent_pid], timeout=5.0), "the agent outlived its runner"


def test_the_link_says_every_start_before_its_exit(tmp_path: Path, link: AgentLink) -> None:
    order: list[str] = []
    lock = threading.Lock()

    def done(task: AgentTask | None, error: str | None) -> None:
        with lock:
            order.append(f"start {task.spec.task if task else error}")

    def exited(process: TaskProcess) -> None:
        with lock:
            order.append(f"end {process.spec.task}")

    spec_dir = tmp_path / "many"
    spec_dir.mkdir()
    for i in range(50):
        prepared = prepare(
            LaunchSpec(script=script(spec_dir, f"{i}.sh", "#!/bin/sh\nexit 0\n"),
                       task=f"t{i}", nodes=("n1",), log=spec_dir / f"{i}.log",
                       rundir=spec_dir / f"r{i}"),
            base_env=os.environ, srun="srun", aside=None)
        assert link.start(prepared, done=done, on_exit=exited)
    deadline = time.monotonic() + 20
    while len(order) < 100 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted(order) == sorted([f"start t{i}" for i in range(50)]
                                   + [f"end t{i}" for i in range(50)])
    for i in range(50):
        assert order.index(f"start t{i}") < order.index(f"end t{i}")


def test_a_failing_callback_leaves_the_link_listening(tmp_path: Path, link: AgentLink,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    def broken(task: AgentTask | None, error: str | None) -> None:
        raise RuntimeError("a bug in the caller")

    first = ready(tmp_path, "#!/bin/sh\nexit 0\n", name="first.sh")
    assert link.start(first, done=broken, on_exit=None)
    starts = Starts()
    task = started(link, ready(tmp_path, "#!/bin/sh\nexit 5\n", name="second.sh"), starts)
    status = task.wait(10)
    assert status is not None and status.returncode == 5
    assert link.alive
    assert any(r.getMessage().startswith("the answer") and r.exc_info is not None
               and r.exc_info[0] is RuntimeError for r in caplog.records)


def test_a_start_whose_descriptor_cannot_be_received_is_refused(tmp_path: Path) -> None:
    """An agent out of descriptors gets a start without its output (the kernel drops it):
    that start is refused with one sentence, and the agent goes on."""
    opened = AgentLink.open()
    assert opened is not None
    try:
        starts = Starts()
        opened.sync()  # the agent is up, its descriptors all open
        used = {int(fd) for fd in os.listdir(f"/proc/{opened.pid}/fd")}
        free = min(set(range(len(used) + 1)) - used)  # the number its next descriptor gets
        resource.prlimit(opened.pid, resource.RLIMIT_NOFILE, (free, free))
        refused = ready(tmp_path, "#!/bin/sh\nexit 0\n", name="refused.sh")
        assert opened.start(refused, done=starts.on_done, on_exit=None)
        opened.sync()
        [(task, error)] = starts.done.values()
        assert task is None and error == (f"task 'todo/refused.sh': cannot start "
                                          f"{tmp_path / 'refused.sh'}: Too many open files")
        assert opened.alive
    finally:
        opened.close()
